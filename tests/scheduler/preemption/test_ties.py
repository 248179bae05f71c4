"""One node's victims (`ties`): kube-scheduler's selection, and the cheapest order of its ties."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.preemption import ties
from scheduler.preemption.ties import Unit


@dataclass
class Case:
    room: list[int]
    units: list[Unit]
    allowed: tuple[int, ...] = ()
    want_kept: list[bool] | None = None
    want_cost: ties.Cost | None = None


def cpu(request: int, priority: int, covered: tuple[tuple[int, int], ...] = ()) -> Unit:
    return Unit((request,), priority, 1, covered)


CASES = [
    pytest.param(
        Case([4], [cpu(4, 30), cpu(2, 30), cpu(1, 20)], want_kept=[False, True, True]),
        id="issue 20: of two tied pods the small one stays, so the pod below fits too",
    ),
    pytest.param(
        Case([3], [cpu(2, 50), cpu(2, 10)], want_kept=[True, False]),
        id="no tie: the most important goes back first",
    ),
    pytest.param(
        Case([2], [cpu(1, 30), cpu(1, 30), cpu(1, 30), cpu(1, 30)], want_kept=[True, True, False, False]),
        id="a tie of equal pods keeps the given order",
    ),
    pytest.param(
        Case(
            [2],
            [cpu(1, 50), cpu(1, 20, ((0, 1),)), cpu(2, 20, ((0, 1),))],
            allowed=(1,),
            want_cost=(0, 20, 20, 1),
        ),
        id="the PDB allowance goes to the tied pod whose eviction costs less",
    ),
    pytest.param(
        Case([0], [cpu(1, 10, ((0, 1),)), cpu(1, 10, ((0, 1),))], allowed=(1,), want_cost=(1, 10, 20, 2)),
        id="a violation counts the pods beyond the allowance",
    ),
    pytest.param(
        Case(
            [7],
            [cpu(3, 50, ((0, 1),)), Unit((4,), 30, 2, ((0, 1),)), cpu(1, 20, ((0, 1),))],
            allowed=(1,),
            want_kept=[True, True, False],
            want_cost=(0, 20, 20, 1),
        ),
        id="fuzz seed 885950 #5: the allowance used up least important first leaves the cheapest pod as the victim",
    ),
]


@pytest.mark.parametrize("case", CASES)
def test_cheapest(case: Case) -> None:
    outcome = ties.cheapest(case.room, case.units, case.allowed)
    if case.want_kept is not None:
        assert outcome.kept == case.want_kept
    if case.want_cost is not None:
        assert outcome.cost == case.want_cost


@st.composite
def one_tie(draw: st.DrawFn) -> tuple[list[int], list[Unit], tuple[int, ...]]:
    """Units of distinct priorities but for one pair, most important first; some under one PDB."""
    priorities = draw(st.lists(st.integers(1, 60), min_size=2, max_size=6, unique=True))
    tied = draw(st.sampled_from(priorities))
    priorities = sorted([*priorities, tied], reverse=True)
    allowed = draw(st.integers(0, 2))
    units = []
    for priority in priorities:
        covered = ((0, 1),) if draw(st.booleans()) else ()
        units.append(Unit((draw(st.integers(1, 4)),), priority, draw(st.integers(1, 2)), covered))
    return [draw(st.integers(0, 8))], units, (allowed,)


@settings(max_examples=300, deadline=None)
@given(one_tie())
def test_never_costlier_than_either_order_of_a_tie(scenario: tuple[list[int], list[Unit], tuple[int, ...]]) -> None:
    """What kube-scheduler does with the tie in either order costs at least as much (issue 20, item 2)."""
    room, units, allowed = scenario
    best = ties.cheapest(room, units, allowed).cost
    first = next(i for i in range(len(units) - 1) if units[i].priority == units[i + 1].priority)
    for pair in itertools.permutations((first, first + 1)):
        order = [*range(first), *pair, *range(first + 2, len(units))]
        assert best <= ties.select(room, units, order, allowed).cost


@settings(max_examples=300, deadline=None)
@given(one_tie())
def test_never_costlier_than_upstreams_pdb_order(scenario: tuple[list[int], list[Unit], tuple[int, ...]]) -> None:
    """The allowances used up either way, the result costs no more than kube-scheduler's own selection."""
    room, units, allowed = scenario
    order = list(range(len(units)))
    assert ties.cheapest(room, units, allowed).cost <= ties.select(room, units, order, allowed).cost
