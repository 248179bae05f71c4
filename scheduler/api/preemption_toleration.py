"""Preemption-toleration policy read from PriorityClass annotations.

Source: kubernetes-sigs/scheduler-plugins `pkg/preemptiontoleration` (the annotation names and
defaults). Both the `scheduling.sigs.k8s.io` and `scheduling.x-k8s.io` prefixes are accepted; when
both are present the `sigs.k8s.io` one wins. Parsing is shared by the webhook (which rejects bad
values) and the scheduler (which ignores them with a warning).
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduler.api.priority_class import PriorityClass

PREFIXES = (
    "preemption-toleration.scheduling.sigs.k8s.io/",
    "preemption-toleration.scheduling.x-k8s.io/",
)
MINIMUM_PREEMPTABLE_PRIORITY = "minimum-preemptable-priority"
TOLERATION_SECONDS = "toleration-seconds"

_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)


@dataclass(frozen=True, slots=True)
class TolerationPolicy:
    minimum_preemptable_priority: int
    toleration_seconds: int


class PolicyError(ValueError):
    """An annotation that does not parse; `annotation` is its full key."""

    def __init__(self, annotation: str, message: str) -> None:
        super().__init__(message)
        self.annotation = annotation


def _annotation(pc: PriorityClass, name: str) -> tuple[str, str] | None:
    for prefix in PREFIXES:
        key = prefix + name
        if key in pc.metadata.annotations:
            return key, pc.metadata.annotations[key]
    return None


def _parse_int(key: str, raw: str, bounds: tuple[int, int], kind: str) -> int:
    try:
        value = int(raw.strip())
    except ValueError:
        raise PolicyError(key, f"must be an {kind} integer, got {raw!r}") from None
    if not bounds[0] <= value <= bounds[1]:
        raise PolicyError(key, f"must be an {kind} integer, got {raw!r} (out of range)")
    return value


def has_policy(pc: PriorityClass) -> bool:
    return any(_annotation(pc, name) for name in (MINIMUM_PREEMPTABLE_PRIORITY, TOLERATION_SECONDS))


def parse_policy(pc: PriorityClass) -> TolerationPolicy | None:
    """The class's policy, or None when it carries none; raises `PolicyError` on a bad value."""
    if not has_policy(pc):
        return None
    minimum = pc.value + 1
    found = _annotation(pc, MINIMUM_PREEMPTABLE_PRIORITY)
    if found:
        minimum = _parse_int(found[0], found[1], _INT32, "int32")
    seconds = 0
    found = _annotation(pc, TOLERATION_SECONDS)
    if found:
        seconds = _parse_int(found[0], found[1], _INT64, "int64")
    return TolerationPolicy(minimum, seconds)


def policy_errors(pc: PriorityClass) -> list[PolicyError]:
    """Every malformed annotation (the webhook reports all of them, not just the first)."""
    errors: list[PolicyError] = []
    for name, bounds, kind in (
        (MINIMUM_PREEMPTABLE_PRIORITY, _INT32, "int32"),
        (TOLERATION_SECONDS, _INT64, "int64"),
    ):
        for prefix in PREFIXES:
            key = prefix + name
            if key in pc.metadata.annotations:
                try:
                    _parse_int(key, pc.metadata.annotations[key], bounds, kind)
                except PolicyError as err:
                    errors.append(err)
    return errors
