"""The queue-tree walk: preempt vs reclaim, the LCA step, the `queue` method, node-pool defaults."""

from __future__ import annotations

from datetime import timedelta

import pytest

from scheduler.api.config import MinRuntimeDefaults
from scheduler.api.queue import Queue
from scheduler.plugins.min_runtime.resolver import PREEMPT, RECLAIM, Resolution, resolve
from tests.builders import make_queue


def tree() -> dict[str, Queue]:
    """A > B(600s) > {C > {leaf1(0s), leaf2(180s)}, D(60s) > leaf3}, reclaim values; preempt on C and leaf2."""
    queues = [
        make_queue("A"),
        make_queue("B").parent("A").reclaim_min_runtime("600s"),
        make_queue("C").parent("B").preempt_min_runtime("5m"),
        make_queue("D").parent("B").reclaim_min_runtime("60s"),
        make_queue("leaf1").parent("C").reclaim_min_runtime("0s"),
        make_queue("leaf2").parent("C").reclaim_min_runtime("180s").preempt_min_runtime("1h30m"),
        make_queue("leaf3").parent("D"),
        make_queue("solo").reclaim_min_runtime("2d"),
        make_queue("bad").parent("A").reclaim_min_runtime("ten minutes").preempt_min_runtime("-5m"),
        make_queue("orphan").parent("nowhere"),
        make_queue("loop1").parent("loop2"),
        make_queue("loop2").parent("loop1").reclaim_min_runtime("7m"),
    ]
    return {q.metadata.name: q for q in (w.obj() for w in queues)}


DEFAULTS = MinRuntimeDefaults(preempt="30s", reclaim="45s")
S = timedelta(seconds=1)

CASES = [
    pytest.param("leaf1", "leaf3", DEFAULTS, Resolution(RECLAIM, 60 * S, "D"), id="leaf1 vs leaf3: LCA B, step to D"),
    pytest.param("leaf1", "leaf2", DEFAULTS, Resolution(RECLAIM, 180 * S, "leaf2"), id="leaf1 vs leaf2: step to leaf2"),
    pytest.param(
        "leaf3", "leaf1", DEFAULTS, Resolution(RECLAIM, 600 * S, "B"), id="leaf3 vs leaf1: C unset, walk up to B"
    ),
    pytest.param("leaf2", "leaf1", DEFAULTS, Resolution(RECLAIM, 0 * S, "leaf1"), id="an explicit 0s stops the walk"),
    pytest.param(
        "leaf2", "leaf2", DEFAULTS, Resolution(PREEMPT, 5400 * S, "leaf2"), id="preempt uses the leaf's own value"
    ),
    pytest.param(
        "leaf1", "leaf1", DEFAULTS, Resolution(PREEMPT, 300 * S, "C"), id="preempt walks up from a leaf without one"
    ),
    pytest.param(
        "leaf3", "leaf3", DEFAULTS, Resolution(PREEMPT, 30 * S, None), id="preempt with no value on the path: default"
    ),
    pytest.param(
        "leaf1",
        "leaf3",
        MinRuntimeDefaults(reclaim_resolve_method="queue"),
        Resolution(RECLAIM, 60 * S, "D"),
        id="queue method walks up from the victim's leaf",
    ),
    pytest.param(
        "leaf3",
        "leaf1",
        MinRuntimeDefaults(reclaim_resolve_method="queue"),
        Resolution(RECLAIM, 0 * S, "leaf1"),
        id="queue method takes the victim leaf's own value",
    ),
    pytest.param(
        "leaf1",
        "leaf2",
        MinRuntimeDefaults(reclaim_resolve_method="queue"),
        Resolution(RECLAIM, 180 * S, "leaf2"),
        id="queue method: victim leaf2 has 180s",
    ),
    pytest.param(
        "solo",
        "leaf3",
        DEFAULTS,
        Resolution(RECLAIM, 45 * S, None),
        id="different trees: the victim's root, then the default",
    ),
    pytest.param("leaf3", "solo", DEFAULTS, Resolution(RECLAIM, 2 * 86400 * S, "solo"), id="durations take days"),
    pytest.param(None, None, DEFAULTS, Resolution(PREEMPT, 30 * S, None), id="two units without queues preempt"),
    pytest.param(
        None, "leaf1", DEFAULTS, Resolution(RECLAIM, 45 * S, None), id="unqueued preemptor reclaims from the root"
    ),
    pytest.param("leaf1", None, DEFAULTS, Resolution(RECLAIM, 45 * S, None), id="unqueued victim gets the default"),
    pytest.param("leaf1", "bad", DEFAULTS, Resolution(RECLAIM, 0 * S, "bad"), id="unparsable duration counts as 0"),
    pytest.param("bad", "bad", DEFAULTS, Resolution(PREEMPT, 0 * S, "bad"), id="negative duration counts as 0"),
    pytest.param("leaf1", "orphan", DEFAULTS, Resolution(RECLAIM, 45 * S, None), id="unknown parent ends the walk"),
    pytest.param("leaf1", "ghost", DEFAULTS, Resolution(RECLAIM, 45 * S, None), id="unknown leaf queue: default"),
    pytest.param("leaf1", "loop1", DEFAULTS, Resolution(RECLAIM, 420 * S, "loop2"), id="a parent cycle terminates"),
    pytest.param(
        "leaf1",
        "leaf3",
        MinRuntimeDefaults(reclaim="1w"),
        Resolution(RECLAIM, 60 * S, "D"),
        id="a queue value beats the node-pool default",
    ),
]


@pytest.mark.parametrize(("preemptor_queue", "victim_queue", "defaults", "want"), CASES)
def test_resolve(
    preemptor_queue: str | None, victim_queue: str | None, defaults: MinRuntimeDefaults, want: Resolution
) -> None:
    assert resolve(preemptor_queue, victim_queue, tree(), defaults) == want


def test_describe_names_kind_duration_and_source() -> None:
    assert Resolution(RECLAIM, timedelta(minutes=10), "research").describe() == (
        "reclaim-min-runtime 10m (queue research)"
    )
    assert Resolution(PREEMPT, timedelta(hours=1, minutes=30), None).describe() == (
        "preempt-min-runtime 1h30m (node-pool default)"
    )
