"""The PostFilter plugin kept across passes decides as a fresh one would (its running-pod columns are updated
by difference, issue 23): pods bound, deleted, terminating, and PodGroups changing disruption mode between
snapshots built with one cache, as the runner builds them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.framework.cluster import ClusterObjects
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.pod_info import SchedulingUnit
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.snapshot_builder import PodInfoCache, build_snapshot
from scheduler.plugins import static_filters
from scheduler.plugins.inter_pod_affinity import InterPodAffinity
from scheduler.plugins.node_ports import NodePorts
from scheduler.plugins.workload_preemption import WorkloadPreemption
from scheduler.preemption.candidates import RunningPods
from tests.builders import PodWrapper, make_config, make_node, make_pod, make_podgroup, make_priority_class

NOW = datetime(2026, 1, 1, 1, tzinfo=UTC)
NODES = 6
HOST = "kubernetes.io/hostname"
GROUPS = ("g0", "g1")

Change = tuple[str, int, int, int, int]
"""One change to the cluster: (kind, pod number, node, priority level, group index or -1)."""

changes = st.lists(
    st.tuples(
        st.sampled_from(("add", "delete", "terminate", "mode")),
        st.integers(0, 24),
        st.integers(0, NODES - 1),
        st.integers(0, 2),
        st.integers(-1, len(GROUPS) - 1),
    ),
    min_size=1,
    max_size=12,
)


def cluster(constrained: bool = False) -> ClusterObjects:
    """With `constrained`, the gang's members ask for host port 80 and repel `app=svc` pods on hostname (`role`)."""
    objects = ClusterObjects()
    for level in range(3):
        pc = make_priority_class(f"c{level}", 10 * level).obj()
        objects.priority_classes[pc.metadata.name] = pc
    high = make_priority_class("high", 1000).obj()
    objects.priority_classes[high.metadata.name] = high
    for n in range(NODES):
        objects.nodes[f"n{n}"] = make_node(f"n{n}").cap(cpu="4").obj()
    for name in GROUPS:
        group = make_podgroup(name).gang(1).priority_class("c0").disruption_mode("PodGroup").obj()
        objects.pod_groups[group.key] = group
    train = make_podgroup("train").gang(2).priority_class("high").obj()
    objects.pod_groups[train.key] = train
    for i in range(2):
        member = make_pod(f"train-{i}").req(cpu="3").group("train")
        if constrained:
            member = member.label("app", "train").host_port(80).pod_affinity(HOST, anti=True, app="svc")
        objects.pods[f"default/train-{i}"] = member.obj()
    return objects


def role(pod: PodWrapper, number: int) -> PodWrapper:
    """Running pods in the way of the constrained gang: some hold its port, some are what it repels, some repel it."""
    if number % 3 == 0:
        pod = pod.host_port(80)
    if number % 4 == 1:
        pod = pod.label("app", "svc")
    if number % 5 == 2:
        pod = pod.pod_affinity(HOST, anti=True, app="train")
    return pod


def apply(objects: ClusterObjects, change: Change, step: int, constrained: bool = False) -> None:
    kind, number, node, level, group = change
    key = f"default/p{number}"
    if kind == "add" and key not in objects.pods:
        pod = make_pod(f"p{number}").req(cpu="1").on(f"n{node}", NOW - timedelta(minutes=number))
        pod = pod.group(GROUPS[group]) if group >= 0 else pod.priority_class(f"c{level}")
        pod = role(pod, number) if constrained else pod
        objects.pods[key] = pod.obj()
    elif kind == "delete":
        objects.pods.pop(key, None)
    elif kind == "terminate" and key in objects.pods:
        meta = objects.pods[key].metadata.model_copy(update={"deletion_timestamp": NOW})
        objects.pods[key] = objects.pods[key].model_copy(update={"metadata": meta})
    elif kind == "mode":
        name = GROUPS[max(group, 0)]
        mode = "Pod" if step % 2 else "PodGroup"
        changed = make_podgroup(name).gang(1).priority_class("c0").disruption_mode(mode).obj()
        objects.pod_groups[changed.key] = changed


def decide(plugin: WorkloadPreemption, snap: Snapshot) -> tuple[object, ...]:
    members = tuple(snap.pods[f"default/train-{i}"] for i in range(2))
    unit = SchedulingUnit(members, snap.groups["default/train"], 2, 1000, "PreemptLowerPriority")
    result = plugin.post_filter(CycleState(), unit, snap, {})
    decision = result.explanation
    assert decision is not None
    return (
        decision.outcome,
        decision.victims,
        tuple(sorted(decision.nominations.items())),
        decision.spared,
        tuple(v.key for v in result.victims),
    )


@settings(max_examples=100, deadline=None)
@given(st.lists(changes, min_size=1, max_size=4))
def test_kept_plugin_decides_as_a_fresh_one(passes: list[list[Change]]) -> None:
    objects = cluster()
    config = make_config()
    cache = PodInfoCache()
    kept = WorkloadPreemption(static_filters())
    for number in range(12):  # a full start: two pods a node
        apply(objects, ("add", number, number % NODES, number % 3, -1 if number % 4 else number % 2), 0)
    for step, batch in enumerate([[], *passes]):
        for change in batch:
            apply(objects, change, step)
        snap = build_snapshot(dict_copy(objects), NOW, config, cache)
        fresh = WorkloadPreemption(static_filters())
        assert decide(kept, snap) == decide(fresh, snap)


@settings(max_examples=100, deadline=None)
@given(st.lists(changes, min_size=1, max_size=4))
def test_kept_plugin_decides_as_a_fresh_one_with_constraints(passes: list[list[Change]]) -> None:
    """The same with host ports and anti-affinity in the way: the pods that hold them are found among the kept
    columns by where they run (`RunningPods.rows_of`), which the nodes changed before theirs must not shift."""
    objects = cluster(constrained=True)
    config = make_config()
    cache = PodInfoCache()
    constraints = (NodePorts(), InterPodAffinity())
    kept = WorkloadPreemption(static_filters(), constraints=constraints)
    for number in range(12):
        apply(objects, ("add", number, number % NODES, number % 3, -1 if number % 4 else number % 2), 0, True)
    for step, batch in enumerate([[], *passes]):
        for change in batch:
            apply(objects, change, step, True)
        snap = build_snapshot(dict_copy(objects), NOW, config, cache)
        fresh = WorkloadPreemption(static_filters(), constraints=constraints)
        assert decide(kept, snap) == decide(fresh, snap)


def dict_copy(objects: ClusterObjects) -> ClusterObjects:
    """The objects as a back end hands them over: new dicts, the same (unchanged) objects."""
    out = ClusterObjects()
    out.nodes, out.pods = dict(objects.nodes), dict(objects.pods)
    out.pod_groups, out.priority_classes = dict(objects.pod_groups), dict(objects.priority_classes)
    return out


def columns_state(columns: RunningPods) -> tuple[object, ...]:
    """The columns per node, in a form that ignores the order of rows and of group codes."""
    rows = []
    for node in range(len(columns.names)):
        low, high = int(columns.starts[node]), int(columns.starts[node + 1])
        rows.append(
            sorted(
                (
                    columns.keys[i],
                    int(columns.priority[i]),
                    columns.requests[i].tolist(),
                    columns.group_keys[columns.member[i]] if columns.member[i] >= 0 else None,
                    None if np.isnan(columns.started[i]) else float(columns.started[i]),
                )
                for i in range(low, high)
            )
        )
    return tuple(map(tuple, rows)), columns.freed.tolist()


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(changes, st.integers(0, NODES + 1)), min_size=1, max_size=6))
def test_columns_left_behind_are_brought_up_when_read(passes: list[tuple[list[Change], int]]) -> None:
    """Between passes the columns may lag (`unless_fewer` rows changed); read, they are the current ones."""
    objects = cluster()
    cache = PodInfoCache()
    config = make_config()
    columns = RunningPods.of(build_snapshot(dict_copy(objects), NOW, config, cache))
    for step, (batch, unless_fewer) in enumerate(passes):
        for change in batch:
            apply(objects, change, step)
        snap = build_snapshot(dict_copy(objects), NOW, config, cache)
        columns = columns.refresh(snap, unless_fewer)
    assert columns_state(columns.refresh(snap)) == columns_state(RunningPods.of(snap))
