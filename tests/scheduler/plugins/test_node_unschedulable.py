from __future__ import annotations

import numpy as np
import pytest

from scheduler.api.config import SchedulerConfiguration
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.snapshot_builder import build_snapshot
from scheduler.plugins.node_name import NodeName
from tests.builders import EPOCH, PodWrapper, make_node, make_pod
from tests.scheduler.scenario import cluster_of, run

NOT_HELPFUL = " WorkloadPreemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."


@pytest.mark.parametrize(
    ("pod", "want_node"),
    [
        pytest.param(make_pod("p"), "open", id="cordoned node rejects pod"),
        pytest.param(
            make_pod("p").toleration("node.kubernetes.io/unschedulable", operator="Exists", effect="NoSchedule"),
            "cordoned",
            id="pod tolerating the unschedulable taint may use a cordoned node",
        ),
    ],
)
def test_node_unschedulable(pod: PodWrapper, want_node: str) -> None:
    cordoned = make_node("cordoned").cap(cpu="64").unschedulable().obj()
    outcome = run(cordoned, make_node("open").obj(), pod.req(cpu="1").obj())
    assert outcome.node_of("p") == want_node


def test_only_cordoned_nodes_leave_pod_pending_with_reason() -> None:
    outcome = run(make_node("n1").unschedulable().obj(), make_pod("p").obj())
    assert outcome.pending("p") == (
        "Unschedulable",
        "0/1 nodes are available: 1 node(s) were unschedulable." + NOT_HELPFUL,
    )


@pytest.mark.parametrize(
    ("node_name", "want_feasible"),
    [
        pytest.param(None, [True, True], id="no nodeName fits every node"),
        pytest.param("b", [False, True], id="nodeName fits only that node"),
        pytest.param("zz", [False, False], id="unknown nodeName fits nowhere"),
    ],
)
def test_node_name(node_name: str | None, want_feasible: list[bool]) -> None:
    objects = cluster_of([make_node("a").obj(), make_node("b").obj()])
    snapshot = build_snapshot(objects, EPOCH, SchedulerConfiguration())
    pod = make_pod("p")
    if node_name:
        pod.raw["spec"]["nodeName"] = node_name
    info = build_snapshot(cluster_of([pod.obj()]), EPOCH, SchedulerConfiguration()).pods["default/p"]
    verdict = NodeName().filter(CycleState(), info, snapshot)
    assert np.array_equal(verdict.feasible, np.array(want_feasible))
