"""Victim importance: the one order in which preemption considers units (KEP-5710, Search step 3).

Upstream kube-scheduler's `MoreImportantPod` orders pods only; KEP-5710 adds pod groups. The most
important unit comes first: it is the first one reprieved and so the last one preempted.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Importance:
    """What the order needs to know of a victim unit (plain data, so the search stays numpy-friendly)."""

    key: str
    priority: int
    whole_group: bool
    pod_count: int
    started_at: float | None


def importance_key(unit: Importance) -> tuple[int, int, int, float, str]:
    """Sort key, most important first. Criteria, in order:

    1. higher priority;
    2. at equal priority, a pod group (`disruptionMode: PodGroup`) before a single pod;
    3. between groups, the one with more pods first;
    4. the unit that started earlier first (a unit not started yet counts as starting last);
    5. `namespace/name`, so that equal units always come out in the same order.
    """
    started = unit.started_at if unit.started_at is not None else float("inf")
    return (
        -unit.priority,
        0 if unit.whole_group else 1,
        -unit.pod_count if unit.whole_group else 0,
        started,
        unit.key,
    )
