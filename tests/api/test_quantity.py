"""Quantity parsing against the values kube-apiserver accepts, and the units the scheduler counts."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.api.quantity import QuantityError, format_units, parse_quantity, resource_list, scheduling_units


@pytest.mark.parametrize(
    ("text", "want"),
    [
        pytest.param("250m", Fraction(1, 4), id="milli suffix"),
        pytest.param("1.5Gi", Fraction(3 * 2**29), id="fractional binary suffix"),
        pytest.param("2", Fraction(2), id="plain integer"),
        pytest.param("1e3", Fraction(1000), id="exponent"),
        pytest.param("1E-2", Fraction(1, 100), id="negative exponent"),
        pytest.param("128974848", Fraction(128974848), id="bytes"),
        pytest.param("129M", Fraction(129 * 10**6), id="decimal mega"),
        pytest.param("123Mi", Fraction(123 * 2**20), id="binary mebi"),
        pytest.param(".5", Fraction(1, 2), id="leading dot"),
        pytest.param("100n", Fraction(1, 10**7), id="nano"),
        pytest.param(4, Fraction(4), id="YAML integer"),
        pytest.param(0.5, Fraction(1, 2), id="YAML float"),
    ],
)
def test_parse_quantity(text: str | int | float, want: Fraction) -> None:
    assert parse_quantity(text) == want


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("abc", id="letters"),
        pytest.param("1.5Gb", id="unknown suffix"),
        pytest.param("", id="empty"),
        pytest.param("1 Gi", id="space before suffix"),
        pytest.param("--1", id="double sign"),
    ],
)
def test_parse_quantity_rejects(text: str) -> None:
    with pytest.raises(QuantityError, match="is not a quantity"):
        parse_quantity(text)


@pytest.mark.parametrize(
    ("resource", "text", "want"),
    [
        pytest.param("cpu", "250m", 250, id="cpu in millicores"),
        pytest.param("cpu", "0.0001", 1, id="cpu rounds up to a millicore"),
        pytest.param("memory", "1.5Gi", 3 * 2**29, id="memory in bytes"),
        pytest.param("memory", "0.5", 1, id="fractional bytes round up"),
        pytest.param("nvidia.com/gpu", "2", 2, id="extended resource"),
    ],
)
def test_scheduling_units(resource: str, text: str, want: int) -> None:
    assert scheduling_units(resource, parse_quantity(text)) == want


def test_resource_list_names_the_bad_resource() -> None:
    with pytest.raises(QuantityError, match=r"^memory: 'lots' is not a quantity"):
        resource_list({"cpu": "1", "memory": "lots"})


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=0, max_value=2**50), st.sampled_from(["cpu", "memory", "pods", "nvidia.com/gpu"]))
def test_format_then_parse_round_trips(units: int, resource: str) -> None:
    assert scheduling_units(resource, parse_quantity(format_units(resource, units))) == units
