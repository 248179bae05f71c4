"""CEL device selectors: each expression compiled once, each device's CEL value made once, results kept per device.

A selector sees `device.driver`, `device.attributes[DOMAIN].NAME` and `device.capacity[DOMAIN].NAME`, as
kube-scheduler's `dynamic-resource-allocation/cel` environment gives them (an attribute or capacity named without a
domain is under the driver's). Evaluation uses `common-expression-language` (cel-rust), which compiles an expression
about ten times and evaluates it some hundreds of times faster than cel-python (`bench/cel_selectors.py`; README,
"Devices (DRA)"): a claim's selectors are asked of every device of the cluster whose verdict is not kept yet.

Divergences: a version attribute is its string; `semver(s)` returns it and `compareTo`, `isGreaterThan`,
`isLessThan` order two versions by semantic version, or two quantities (`quantity(s)`, a capacity) by value. A
runtime error (a missing domain or attribute, say) counts as no match and is reported with the request (upstream
fails the scheduling attempt with it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from scheduler.api.quantity import parse_quantity
from scheduler.api.resource_slice import Device

if TYPE_CHECKING:
    import cel

MAX_KEPT = 4096
"""Compiled expressions kept; past this the cache is emptied and filled again as needed."""


class SelectorError(ValueError):
    """An expression that does not compile, or that failed on a device: `str()` says which and why."""


def _number(value: Fraction) -> int | float:
    return int(value) if value.denominator == 1 else float(value)


def _version(text: str) -> tuple[tuple[int, ...], tuple[tuple[int, int | str], ...]]:
    core, _, pre = text.lstrip("v").split("+")[0].partition("-")
    numbers = tuple(int(p) for p in core.split(".") if p.isdigit())
    tags = tuple((0, int(t)) if t.isdigit() else (1, t) for t in pre.split(".")) if pre else ((2, 0),)
    return numbers, tags


def _compare(a: Any, b: Any) -> int:
    if isinstance(a, str) and isinstance(b, str):
        left, right = _version(a), _version(b)
    else:
        left, right = a, b
    return (left > right) - (left < right)


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "quantity": lambda text: _number(parse_quantity(text)),
    "semver": lambda text: str(text),
    "compareTo": _compare,
    "isGreaterThan": lambda a, b: _compare(a, b) > 0,
    "isLessThan": lambda a, b: _compare(a, b) < 0,
    "asInteger": lambda a: int(a),
    "asApproximateFloat": lambda a: float(a),
}


def device_value(driver: str, device: Device) -> dict[str, Any]:
    """The device as a selector sees it (`device`)."""
    attributes: dict[str, dict[str, Any]] = {}
    for name, attribute in device.attributes.items():
        domain, _, short = name.rpartition("/")
        attributes.setdefault(domain or driver, {})[short] = attribute.value()
    capacity: dict[str, dict[str, Any]] = {}
    for name, amount in device.capacity.items():
        domain, _, short = name.rpartition("/")
        capacity.setdefault(domain or driver, {})[short] = _number(parse_quantity(amount.value))
    return {"driver": driver, "attributes": attributes, "capacity": capacity}


def device_context(driver: str, device: Device) -> cel.Context:
    import cel  # on first use: the package imports its command line (typer, prompt_toolkit), 13 MiB of RSS

    context = cel.Context({"device": device_value(driver, device)})
    for name, function in FUNCTIONS.items():
        context.add_function(name, function)
    return context


@dataclass(slots=True)
class Selectors:
    """Compiled expressions by their text (configuration, kept for the process's life)."""

    programs: dict[str, cel.Program]

    def __init__(self) -> None:
        self.programs = {}

    def program(self, expression: str) -> cel.Program:
        found = self.programs.get(expression)
        if found is None:
            try:
                import cel  # as in `device_context`

                found = cel.compile(expression)
            except ValueError as err:
                first = next(iter(str(err).splitlines()), "")
                raise SelectorError(f"CEL compile error: {first}") from None
            if len(self.programs) >= MAX_KEPT:
                self.programs.clear()
            self.programs[expression] = found
        return found

    def matches(self, expression: str, context: cel.Context) -> bool:
        """Whether the device of `context` satisfies `expression`; `SelectorError` when evaluating it failed or it
        is not a boolean."""
        try:
            result = self.program(expression).execute(context)
        except SelectorError:
            raise
        except Exception as err:  # cel raises KeyError, RuntimeError, TypeError, ValueError by cause
            raise SelectorError(f"CEL runtime error: {type(err).__name__}: {err}") from None
        if not isinstance(result, bool):
            raise SelectorError(f"CEL runtime error: expression returned {type(result).__name__}, not bool")
        return result
