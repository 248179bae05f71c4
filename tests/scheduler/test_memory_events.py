"""The memory back end records the Events the Kubernetes back end records for its writes' outcomes (the contract
test compares both on the real server; this is the memory half, without one)."""

from __future__ import annotations

from datetime import UTC, datetime

from scheduler.api.meta import Condition
from scheduler.cluster.memory import MemoryCluster
from scheduler.framework.cluster import ClusterObjects
from tests.builders import make_node, make_pod

NOW = datetime(2026, 1, 1, tzinfo=UTC)
UNSCHEDULABLE = Condition(
    type="PodScheduled", status="False", reason="Unschedulable", message="0/1 nodes are available"
)


def cluster() -> MemoryCluster:
    pod = make_pod("p").obj()
    return MemoryCluster(ClusterObjects(nodes={"n0": make_node("n0").obj()}, pods={pod.key: pod}), NOW)


def told(memory: MemoryCluster) -> list[tuple[str, str, str, str]]:
    return [(e.event_type, e.reason, e.regarding, e.note) for e in memory.events]


def test_a_binding_is_told_as_kube_scheduler_tells_it_once() -> None:
    memory = cluster()
    pod = memory.objects().pods["default/p"]
    memory.bind(pod, "n0")
    memory.bind(pod, "n0")  # bound already: no outcome
    assert told(memory) == [("Normal", "Scheduled", "default/p", "Successfully assigned default/p to n0")]


def test_an_unschedulable_pod_is_told_once_per_message() -> None:
    memory = cluster()
    for condition in (UNSCHEDULABLE, UNSCHEDULABLE, UNSCHEDULABLE.model_copy(update={"message": "0/2 nodes"})):
        memory.set_pod_condition(memory.objects().pods["default/p"], condition)
    assert told(memory) == [
        ("Warning", "FailedScheduling", "default/p", "0/1 nodes are available"),
        ("Warning", "FailedScheduling", "default/p", "0/2 nodes"),
    ]


def test_a_condition_other_than_unschedulable_is_no_event() -> None:
    memory = cluster()
    gated = Condition(type="PodScheduled", status="False", reason="SchedulingGated", message="gated")
    memory.set_pod_condition(memory.objects().pods["default/p"], gated)
    assert told(memory) == []
