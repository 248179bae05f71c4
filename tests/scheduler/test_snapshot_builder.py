"""build_snapshot: bound pods charged to their nodes; parsed objects reused across refreshes only while current."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from scheduler.api.config import SchedulerConfiguration
from scheduler.api.meta import Condition
from scheduler.framework.cluster import ClusterObjects
from scheduler.framework.snapshot_builder import PodInfoCache, build_snapshot
from tests.builders import EPOCH, make_node, make_pod, make_podgroup
from tests.scheduler.scenario import cluster_of


def test_bound_pods_are_charged_to_their_nodes() -> None:
    objects = cluster_of(
        [
            make_node("a").cap(cpu="8", memory="8Gi").obj(),
            make_node("b").cap(cpu="8", memory="8Gi").obj(),
            make_pod("small-1").req(cpu="1").on("a").obj(),
            make_pod("large").req(cpu="2", memory="1Gi").on("a").obj(),
            make_pod("small-2").req(cpu="1").on("b").obj(),
            make_pod("done").req(cpu="4").on("b").phase("Succeeded").obj(),
            make_pod("pending").req(cpu="4").obj(),
        ]
    )
    snapshot = build_snapshot(objects, EPOCH, SchedulerConfiguration())
    table = snapshot.nodes
    usage = {key: table.usage(info.requests) for key, info in snapshot.pods.items()}
    want_a = usage["default/small-1"] + usage["default/large"]
    assert np.array_equal(table.requested[table.index["a"]], want_a)
    assert np.array_equal(table.requested[table.index["b"]], usage["default/small-2"])


def group_status_written(objects: ClusterObjects) -> None:
    group = objects.pod_groups["default/g"]
    condition = Condition(type="PodGroupScheduled", status="True", reason="Scheduled", message="")
    objects.pod_groups["default/g"] = group.model_copy(
        update={"status": group.status.model_copy(update={"conditions": [condition]})}
    )


def group_priority_raised(objects: ClusterObjects) -> None:
    objects.pod_groups["default/g"] = make_podgroup("g").gang(1).priority(500).obj()


def node_resized(objects: ClusterObjects) -> None:
    objects.nodes["n"] = make_node("n").cap(cpu="16", memory="8Gi").obj()


@pytest.mark.parametrize(
    ("change", "want_reused", "want_priority", "want_cpu"),
    [
        pytest.param(group_status_written, True, 100, "8", id="a PodGroup status write keeps its members' PodInfos"),
        pytest.param(group_priority_raised, False, 500, "8", id="a PodGroup priority change re-resolves its members"),
        pytest.param(node_resized, True, 100, "16", id="a replaced Node is parsed again"),
    ],
)
def test_refresh_reuses_only_what_is_current(
    change: Callable[[ClusterObjects], None], want_reused: bool, want_priority: int, want_cpu: str
) -> None:
    objects = cluster_of(
        [
            make_node("n").cap(cpu="8", memory="8Gi").obj(),
            make_podgroup("g").gang(1).priority(100).obj(),
            make_pod("member").req(cpu="1").group("g").obj(),
        ]
    )
    cache = PodInfoCache()
    before = build_snapshot(objects, EPOCH, SchedulerConfiguration(), cache)
    change(objects)
    after = build_snapshot(objects, EPOCH, SchedulerConfiguration(), cache)
    assert (after.pods["default/member"] is before.pods["default/member"]) == want_reused
    assert after.pods["default/member"].priority == want_priority
    want = make_node("n").cap(cpu=want_cpu, memory="8Gi").obj().allocatable()
    table = after.nodes
    assert {r: int(table.allocatable[0, c]) for c, r in enumerate(table.resources) if r in want} == want
