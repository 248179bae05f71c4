"""build_snapshot: bound pods charged to their nodes; parsed objects reused across refreshes only while current."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import numpy as np
import pytest
import structlog
from hypothesis import given, settings
from hypothesis import strategies as st

from kube.marks import ChangeMarks
from scheduler.api.config import SchedulerConfiguration
from scheduler.api.meta import Condition
from scheduler.cluster.memory import MemoryCluster
from scheduler.framework.cluster import ClusterObjects
from scheduler.framework.feasibility import static_mask
from scheduler.framework.interfaces import NodeVerdict
from scheduler.framework.pod_info import PodInfo, SchedulingUnit
from scheduler.framework.snapshot import Snapshot, changed_rows
from scheduler.framework.snapshot_builder import PodInfoCache, build_snapshot
from scheduler.plugins import static_filters
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


def other_group_created(objects: ClusterObjects) -> None:
    objects.pod_groups["default/other"] = make_podgroup("other").gang(2).priority(900).obj()


def node_resized(objects: ClusterObjects) -> None:
    objects.nodes["n"] = make_node("n").cap(cpu="16", memory="8Gi").obj()


@pytest.mark.parametrize(
    ("change", "want_reused", "want_priority", "want_cpu"),
    [
        pytest.param(group_status_written, True, 100, "8", id="a PodGroup status write keeps its members' PodInfos"),
        pytest.param(group_priority_raised, False, 500, "8", id="a PodGroup priority change re-resolves its members"),
        pytest.param(other_group_created, True, 100, "8", id="another PodGroup created keeps this group's PodInfos"),
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
    before = build_snapshot(objects, EPOCH, SchedulerConfiguration(), cache).pods["default/member"]
    change(objects)
    after = build_snapshot(objects, EPOCH, SchedulerConfiguration(), cache)
    assert (after.pods["default/member"] is before) == want_reused
    assert after.pods["default/member"].priority == want_priority
    want = make_node("n").cap(cpu=want_cpu, memory="8Gi").obj().allocatable()
    table = after.nodes
    assert {r: int(table.allocatable[0, c]) for c, r in enumerate(table.resources) if r in want} == want


def snapshot_state(snapshot: Snapshot) -> tuple[object, ...]:
    """Everything a pass reads from a snapshot, in a form that ignores list order."""
    table = snapshot.nodes
    return (
        table.names,
        table.resources,
        table.allocatable.tolist(),
        table.requested.tolist(),
        {key: (info.node_name, info.priority, info.group_key, info.pod) for key, info in snapshot.pods.items()},
        [sorted(info.key for info in pods) for pods in snapshot.running],
        {key: sorted(info.key for info in pods) for key, pods in snapshot.members.items()},
        sorted(info.key for info in snapshot.nominated),
        sorted(info.key for info in snapshot.queued),
        sorted(info.key for info in snapshot.unbound),
        sorted(map(str, snapshot.class_names)),
    )


NODE_NAMES = ("n1", "n2", "n3")
POD_NAMES = tuple(f"p{i}" for i in range(8))
GROUP_NAMES = ("g", "h")


def pod_change(draw: st.DrawFn, objects: ClusterObjects) -> None:
    """One change a real cluster or the runner makes between two refreshes."""
    name = draw(st.sampled_from(POD_NAMES))
    key = f"default/{name}"
    what = draw(st.sampled_from(("create", "bind", "delete", "finish", "nominate", "terminate")))
    cpu = draw(st.sampled_from(("1", "2")))
    pod = make_pod(name).req(cpu=cpu)
    group = draw(st.sampled_from((None, *GROUP_NAMES)))
    if group is not None:
        pod = pod.group(group)
    if draw(st.booleans()):
        pod = pod.queue("research")
    if draw(st.integers(0, 3)) == 0:
        pod = pod.priority_class(draw(st.sampled_from(("high", "gone"))))
    if what == "delete":
        objects.pods.pop(key, None)
    elif what == "create":
        objects.pods[key] = pod.obj()
    elif what == "bind":
        objects.pods[key] = pod.on(draw(st.sampled_from(NODE_NAMES))).obj()
    elif what == "finish":
        objects.pods[key] = pod.on(draw(st.sampled_from(NODE_NAMES))).phase("Succeeded").obj()
    elif what == "nominate":
        objects.pods[key] = pod.nominated(draw(st.sampled_from(NODE_NAMES))).obj()
    else:
        deleting = pod.on(draw(st.sampled_from(NODE_NAMES))).obj()
        deleting.metadata.deletion_timestamp = EPOCH
        objects.pods[key] = deleting


def node_change(draw: st.DrawFn, objects: ClusterObjects) -> None:
    name = draw(st.sampled_from(NODE_NAMES))
    what = draw(st.sampled_from(("resize", "remove", "gpu", "taint", "cordon", "label")))
    node = make_node(name).cap(cpu="8", memory="8Gi")
    if what == "remove":
        objects.nodes.pop(name, None)
    elif what == "gpu":
        objects.nodes[name] = make_node(name).cap(cpu="8", memory="8Gi", gpu=2).obj()
    elif what == "taint":
        objects.nodes[name] = node.taint("dedicated", "ml").obj()
    elif what == "cordon":
        objects.nodes[name] = node.unschedulable().obj()
    elif what == "label":
        objects.nodes[name] = node.label("zone", draw(st.sampled_from(("a", "b")))).obj()
    else:
        objects.nodes[name] = make_node(name).cap(cpu=draw(st.sampled_from(("8", "16"))), memory="8Gi").obj()


def group_change(draw: st.DrawFn, objects: ClusterObjects) -> None:
    """A PodGroup created (before or after its members), given another priority, or deleted."""
    name = draw(st.sampled_from(GROUP_NAMES))
    if draw(st.integers(0, 3)) == 0:
        objects.pod_groups.pop(f"default/{name}", None)
    else:
        objects.pod_groups[f"default/{name}"] = make_podgroup(name).gang(2).priority(draw(st.integers(0, 9))).obj()


@given(data=st.data())
@settings(max_examples=80, deadline=None)
def test_refresh_by_difference_equals_a_fresh_build(data: st.DataObject) -> None:
    """A snapshot updated from the last refresh is the snapshot built from scratch, whatever changed between;
    and any two snapshots' rows of the same version hold the same pods (what `changed_rows` relies on)."""
    objects = cluster_of(
        [*(make_node(n).cap(cpu="8", memory="8Gi").obj() for n in NODE_NAMES), make_podgroup("g").gang(2).obj()]
    )
    cache = PodInfoCache()
    config = SchedulerConfiguration()
    earlier: list[Snapshot] = []
    for _ in range(data.draw(st.integers(1, 12))):
        for _ in range(data.draw(st.integers(0, 6))):
            pod_change(data.draw, objects)
        if data.draw(st.integers(0, 5)) == 0:
            node_change(data.draw, objects)
        if data.draw(st.integers(0, 5)) == 0:
            group_change(data.draw, objects)
        kept = build_snapshot(objects, EPOCH, config, cache)
        fresh = build_snapshot(objects, EPOCH, config, PodInfoCache())
        assert snapshot_state(kept) == snapshot_state(fresh)
        for snapshot in (kept, fresh):  # the pending pods are found in `unbound`, in `pods`' order
            unbound = [(key, info) for key, info in snapshot.pods.items() if info.node_name is None]
            assert [(info.key, info) for info in snapshot.unbound] == unbound
        for pod in SHAPES:  # static verdicts kept from the last snapshot are those of the current nodes
            assert verdict_state(static_mask(pod, kept, static_filters())) == verdict_state(
                static_mask(pod, fresh, static_filters())
            )
        pending = sorted(info.key for info in kept.unbound)
        if pending and kept.nodes.names:  # a pass changes the snapshot; the next refresh must not see it
            placed = kept.assume(kept.pods[data.draw(st.sampled_from(pending))], 0)
            if data.draw(st.booleans()):
                kept.forget(placed, 0)
        earlier.append(kept)
        for before in earlier:
            if before.nodes.names == kept.nodes.names:
                assert changed_rows(before.running, before.versions, kept.running, kept.versions) == [
                    row for row, (a, b) in enumerate(zip(before.running, kept.running, strict=True)) if not same(a, b)
                ]


def same(a: list[PodInfo], b: list[PodInfo]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


SHAPES = [
    PodInfoCache().info(pod.obj(), ClusterObjects(), EPOCH)
    for pod in (
        make_pod("plain"),
        make_pod("zoned").node_selector(zone="a"),
        make_pod("tolerant").toleration("dedicated"),
    )
]


def verdict_state(verdict: NodeVerdict) -> tuple[object, ...]:
    """A static verdict in a form that ignores the order of its reasons."""
    return verdict.feasible.tolist(), sorted((reason, mask.tolist()) for reason, mask in verdict.reasons)


class Feed:
    """An informer's change feed (`ClusterObjects.pod_feed`, `node_feed`), on the informer's own `ChangeMarks`."""

    def __init__(self) -> None:
        self.marks = ChangeMarks()

    def changed_since(self, mark: int) -> set[str] | None:
        return self.marks.since(mark)


@given(data=st.data())
@settings(max_examples=80, deadline=None)
def test_refresh_from_a_change_feed_equals_a_fresh_build(data: st.DataObject) -> None:
    """With feeds, a refresh compares only the pods marked changed and those shown as a write in flight makes
    them (now or at the last refresh), and only the Nodes marked changed, and still equals the snapshot built
    from scratch, with no fallback."""
    informer = cluster_of(
        [*(make_node(n).cap(cpu="8", memory="8Gi").obj() for n in NODE_NAMES), make_podgroup("g").gang(2).obj()]
    )
    feed, node_feed = Feed(), Feed()
    cache = PodInfoCache()
    config = SchedulerConfiguration()
    for _ in range(data.draw(st.integers(1, 12))):
        before, nodes_before = dict(informer.pods), dict(informer.nodes)
        for _ in range(data.draw(st.integers(0, 6))):
            pod_change(data.draw, informer)
        for key in before.keys() | informer.pods.keys():
            if before.get(key) is not informer.pods.get(key):
                feed.marks.mark(key, len(informer.pods))
        for _ in range(data.draw(st.integers(0, 2))):
            node_change(data.draw, informer)
        for name in nodes_before.keys() | informer.nodes.keys():
            if nodes_before.get(name) is not informer.nodes.get(name):
                node_feed.marks.mark(name, len(informer.nodes))
        if data.draw(st.integers(0, 5)) == 0:
            group_change(data.draw, informer)
        written = ClusterObjects()
        for _ in range(data.draw(st.integers(0, 2))):  # writes in flight, shown over the informer's copies
            pod_change(data.draw, written)
        overlay = {key: pod for key, pod in written.pods.items() if key in informer.pods}
        objects = ClusterObjects(
            nodes=dict(informer.nodes),
            pods={**informer.pods, **overlay},
            pod_groups=dict(informer.pod_groups),
            pod_feed=feed,
            pod_mark=feed.marks.last,
            overlaid=frozenset(overlay),
            node_feed=node_feed,
            node_mark=node_feed.marks.last,
        )
        with structlog.testing.capture_logs() as logs:
            kept = build_snapshot(objects, EPOCH, config, cache)
        assert not [entry for entry in logs if entry["log_level"] == "warning"], "the feed missed no change"
        fresh = build_snapshot(objects, EPOCH, config, PodInfoCache())
        assert snapshot_state(kept) == snapshot_state(fresh)


def test_a_resource_leaves_the_node_table_with_the_last_node_that_lists_it() -> None:
    """The kept base counts the Nodes that list each resource: Nodes losing their GPUs one by one keep the GPU
    column until the last one, as a fresh build has it."""
    nodes = {name: make_node(name).cap(cpu="8", memory="8Gi", gpu=2).obj() for name in NODE_NAMES}
    node_feed, cache, config = Feed(), PodInfoCache(), SchedulerConfiguration()
    for name in (None, *NODE_NAMES):
        if name is not None:
            nodes[name] = make_node(name).cap(cpu="8", memory="8Gi").obj()
            node_feed.marks.mark(name, len(nodes))
        objects = ClusterObjects(nodes=dict(nodes), node_feed=node_feed, node_mark=node_feed.marks.last)
        kept = build_snapshot(objects, EPOCH, config, cache)
        fresh = build_snapshot(objects, EPOCH, config, PodInfoCache())
        assert snapshot_state(kept) == snapshot_state(fresh), f"after {name}"


def _unit(snapshot: Snapshot, kind: str, name: str, priority: int) -> SchedulingUnit:
    """The lone pod `default/name` (`kind` pod), or every member of the PodGroup `default/name`."""
    if kind == "pod":
        return SchedulingUnit((snapshot.pods[f"default/{name}"],), None, 1, priority, "PreemptLowerPriority")
    members = tuple(snapshot.members[f"default/{name}"])
    return SchedulingUnit(members, snapshot.groups[f"default/{name}"], len(members), priority, "PreemptLowerPriority")


@pytest.mark.parametrize(
    ("unit", "nominee", "priority", "placed", "want_held"),
    [
        pytest.param("pod/low", "member", 5, False, True, id="a nominee of higher priority holds room"),
        pytest.param("pod/low", "member", 10, False, True, id="a nominee of equal priority holds room"),
        pytest.param("pod/low", "member", 11, False, False, id="a nominee of lower priority holds none"),
        pytest.param("pod/alone", "alone", 5, False, False, id="a pod holds no room against itself"),
        pytest.param("podgroup/g", "member", 5, False, False, id="a member holds no room against its own group"),
        pytest.param("pod/g", "member", 5, False, True, id="a member holds room against a lone pod named as its group"),
        pytest.param("podgroup/g", "alone", 5, False, True, id="a lone pod holds room against a group of its name"),
        pytest.param(
            "pod/low", "member", 5, True, False, id="a nominee placed in this pass counts as placed, not held"
        ),
    ],
)
def test_a_nominated_pod_holds_room_by_one_rule(
    unit: str, nominee: str, priority: int, placed: bool, want_held: bool
) -> None:
    """A pod and a PodGroup may share a name (`g`, and `alone` beside a group `alone`): they are two units."""
    objects = cluster_of(
        [
            make_node("a").cap(cpu="8", memory="8Gi").obj(),
            make_podgroup("g").gang(1).priority(10).obj(),
            make_pod("member").req(cpu="1").priority(10).group("g").nominated("a").obj(),
            make_pod("alone").req(cpu="1").priority(10).nominated("a").obj(),
            make_pod("low").req(cpu="1").priority(5).obj(),
            make_pod("g").req(cpu="1").priority(5).obj(),
        ]
    )
    if unit == "podgroup/g" and nominee == "alone":  # the group named as the lone nominee, with one member
        objects.pod_groups["default/alone"] = make_podgroup("alone").gang(1).obj()
        objects.pods["default/alone-0"] = make_pod("alone-0").req(cpu="1").priority(5).group("alone").obj()
        unit = "podgroup/alone"
    snapshot = build_snapshot(objects, EPOCH, SchedulerConfiguration())
    held = next(p for p in snapshot.nominated if p.key == f"default/{nominee}")
    if placed:
        snapshot.assume(held, snapshot.nodes.index["a"])
    kind, _, name = unit.partition("/")
    against = _unit(snapshot, kind, name, priority)
    assert snapshot.holds_room(held, against) is want_held
    assert (held in snapshot.held_against(against)) is want_held


def memory_write(draw: st.DrawFn, cluster: MemoryCluster) -> None:
    """One write of the memory back end: each must reach its change feed, or the next refresh misses it."""
    name = draw(st.sampled_from(POD_NAMES))
    key = f"default/{name}"
    pod = cluster.objects().pods.get(key)
    what = draw(st.sampled_from(("create", "bind", "nominate", "condition", "ungate", "delete", "later")))
    if what == "create":
        cluster.create(make_pod(name).req(cpu=draw(st.sampled_from(("1", "2")))).gate("g").obj())
    elif what == "later":
        cluster.advance(cluster.now() + timedelta(seconds=draw(st.integers(1, 60))))
    elif pod is None:
        return
    elif what == "bind":
        cluster.bind(pod, draw(st.sampled_from(NODE_NAMES)))
    elif what == "nominate" and not pod.spec.node_name:
        cluster.set_nominated_node(pod, draw(st.sampled_from((None, *NODE_NAMES))))
    elif what == "condition":
        cluster.set_pod_condition(pod, Condition(type="DisruptionTarget", status="True", reason="x", message="y"))
    elif what == "ungate":
        cluster.remove_scheduling_gate(pod, "g")
    elif what == "delete":
        cluster.delete_pod(pod, draw(st.sampled_from((None, 0, 30))))


@given(data=st.data())
@settings(max_examples=80, deadline=None)
def test_a_refresh_on_the_memory_back_end_sees_every_write(data: st.DataObject) -> None:
    """The memory back end's change feed names every pod it wrote: a snapshot refreshed through it is the
    snapshot built from scratch."""
    cluster = MemoryCluster(cluster_of([make_node(n).cap(cpu="8", memory="8Gi").obj() for n in NODE_NAMES]), EPOCH)
    cache = PodInfoCache()
    config = SchedulerConfiguration()
    for _ in range(data.draw(st.integers(1, 10))):
        for _ in range(data.draw(st.integers(0, 8))):
            memory_write(data.draw, cluster)
        kept = build_snapshot(cluster.objects(), cluster.now(), config, cache)
        fresh_objects = ClusterObjects(nodes=dict(cluster.objects().nodes), pods=dict(cluster.objects().pods))
        fresh = build_snapshot(fresh_objects, cluster.now(), config, PodInfoCache())
        assert snapshot_state(kept) == snapshot_state(fresh)
