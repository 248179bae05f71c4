"""The PostFilter plugin on a framework Snapshot: scenario validators and the alternatives it tries."""

from __future__ import annotations

import gc
from collections.abc import Sequence
from datetime import UTC, datetime

from scheduler.framework.cluster import ClusterObjects
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.pod_info import SchedulingUnit, VictimUnit
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.snapshot_builder import build_snapshot
from scheduler.framework.status import Code, Status
from scheduler.plugins import static_filters
from scheduler.plugins.workload_preemption import WorkloadPreemption
from scheduler.preemption.decision import Outcome, SpareReason
from tests.builders import make_config, make_node, make_pod, make_podgroup, make_priority_class

NOW = datetime(2026, 1, 1, 1, tzinfo=UTC)


class KeepTwoOfElastic:
    """A scenario validator: at most one member of the `el` group may be preempted at once."""

    name = "KeepTwoOfElastic"

    def validate(self, preemptor: SchedulingUnit, victims: Sequence[VictimUnit], snapshot: Snapshot) -> Status:
        taken = [v.key for v in victims if v.group is not None and v.group.metadata.name == "el"]
        if len(taken) > 1:
            return Status(Code.UNSCHEDULABLE, (f"el would lose {len(taken)} members",))
        return Status()


def snapshot() -> Snapshot:
    objects = ClusterObjects()
    for pc in (make_priority_class("low", 10).obj(), make_priority_class("high", 1000).obj()):
        objects.priority_classes[pc.metadata.name] = pc
    for n in ("n1", "n2", "n3", "n4"):
        objects.nodes[n] = make_node(n).cap(cpu="4").obj()
    groups = [
        make_podgroup("el").gang(1).priority_class("low").disruption_mode("Pod").obj(),
        make_podgroup("train").gang(2).priority_class("high").obj(),
    ]
    for group in groups:
        objects.pod_groups[group.key] = group
    pods = [
        *(make_pod(f"el-{i}").req(cpu="4").group("el").on(f"n{i + 1}", NOW).obj() for i in range(3)),
        make_pod("solo").req(cpu="4").priority_class("low").on("n4", NOW).obj(),
        *(make_pod(f"train-{i}").req(cpu="4").group("train").obj() for i in range(2)),
    ]
    for pod in pods:
        objects.pods[pod.key] = pod
    return build_snapshot(objects, NOW, make_config())


def gang(snap: Snapshot) -> SchedulingUnit:
    members = tuple(snap.pods[f"default/train-{i}"] for i in range(2))
    return SchedulingUnit(members, snap.groups["default/train"], 2, 1000, "PreemptLowerPriority")


def test_refused_plan_is_replaced_by_one_the_validator_accepts() -> None:
    snap = snapshot()
    result = WorkloadPreemption(static_filters(), validators=(KeepTwoOfElastic(),)).post_filter(
        CycleState(), gang(snap), snap, {}
    )
    decision = result.explanation
    assert decision.outcome == Outcome.PREEMPT
    victims = sorted(v.key for v in result.victims)
    assert len(victims) == 2 and "default/solo" in victims
    assert sum(1 for s in decision.spared if s.reason == SpareReason.PROTECTED) >= 1


def test_without_the_validator_the_cheapest_nodes_go() -> None:
    snap = snapshot()
    result = WorkloadPreemption(static_filters()).post_filter(CycleState(), gang(snap), snap, {})
    assert sorted(v.key for v in result.victims) == ["default/el-0", "default/el-1"]


def test_a_decision_leaves_nothing_for_the_cyclic_collector() -> None:
    """What a decision builds (the columns of every running pod, at 100,000 pods) is freed with it, by reference
    counting: left in a cycle, it waits for a collection that walks it, and the collector runs on every pass."""
    snap = snapshot()
    plugin = WorkloadPreemption(static_filters(), validators=(KeepTwoOfElastic(),))
    plugin.post_filter(CycleState(), gang(snap), snap, {})  # the caches kept between decisions are made
    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    try:
        result = plugin.post_filter(CycleState(), gang(snap), snap, {})
        assert result.victims
        del result
        assert gc.collect() == 0
    finally:
        if enabled:
            gc.enable()
