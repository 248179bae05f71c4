"""Victim importance: the one order in which preemption considers units (KEP-5710, Search step 3).

Upstream kube-scheduler's `MoreImportantPod` orders pods only; KEP-5710 adds pod groups. The most
important unit comes first: it is the first one reprieved and so the last one preempted.

The key comes in two forms: `importance_key` for one unit and `importance_keys` for many units held as
columns, which is what the search holds. They must make the same tuples (a property test holds them
together), so a new criterion goes into both.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

ImportanceKey = tuple[int, int, int, float, str]


@dataclass(frozen=True, slots=True)
class Importance:
    """What the order needs to know of a victim unit (plain data, so the search stays numpy-friendly)."""

    key: str
    priority: int
    whole_group: bool
    pod_count: int
    started_at: float | None


def importance_key(unit: Importance) -> ImportanceKey:
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


def importance_keys(
    keys: Sequence[str],
    priority: npt.NDArray[np.int64],
    whole_group: npt.NDArray[np.bool_],
    pod_count: npt.NDArray[np.int64],
    started_at: npt.NDArray[np.float64],
) -> list[ImportanceKey]:
    """`importance_key` of many units given as columns (`started_at` NaN for a unit not started), the
    criteria computed array by array: the search ranks hundreds of victims at a time, and building one
    `Importance` per unit would be a large part of a decision's time."""
    return list(
        zip(
            (-priority).tolist(),
            np.where(whole_group, 0, 1).tolist(),
            np.where(whole_group, -pod_count, 0).tolist(),
            np.where(np.isnan(started_at), np.inf, started_at).tolist(),
            keys,
            strict=True,
        )
    )
