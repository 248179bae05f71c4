"""Queueing hints (issue 23): a unit kept asleep would not have fit anyway.

The property: on two identical in-memory clusters given the same changes, a scheduler whose queue sleeps on
unhelpful events binds and nominates exactly what a scheduler that retries every unit at every pass does.
Time moves past the longest backoff between passes, so the backoff alone never tells them apart: only a unit
the hints left asleep while it could have fit (or found victims) would.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from scheduler.api.config import SchedulerConfiguration
from scheduler.cluster.memory import MemoryCluster
from scheduler.framework.queue import SchedulingQueue
from scheduler.framework.runner import PassReport, Scheduler
from scheduler.plugins import default_profile
from scheduler.preemption.actuator import PreemptionActuator
from tests.builders import EPOCH, make_namespace, make_node, make_pod, make_podgroup
from tests.scheduler.scenario import cluster_of

NOW = EPOCH + timedelta(hours=1)
PRIORITIES = st.sampled_from([0, 10, 100])
CPU = st.integers(1, 12)
MAX_BACKOFF = timedelta(seconds=11)

Op = tuple[Any, ...]
OPS: st.SearchStrategy[Op] = st.one_of(
    st.tuples(st.just("node"), st.integers(1, 16)),
    st.tuples(st.just("cordon"), st.integers(0, 9), st.booleans()),
    st.tuples(st.just("resize"), st.integers(0, 9), st.integers(1, 16)),
    st.tuples(st.just("pending"), CPU, PRIORITIES, st.booleans()),
    st.tuples(st.just("running"), st.integers(0, 9), CPU, PRIORITIES),
    st.tuples(st.just("delete"), st.integers(0, 99)),
    st.tuples(st.just("gang"), st.integers(1, 3), st.integers(1, 4), st.integers(1, 8), PRIORITIES),
    st.tuples(st.just("member"), st.integers(0, 9), st.integers(1, 8)),
)


class Side:
    """One cluster and its scheduler; `eager` retries every unit at every pass (a fresh queue each time)."""

    def __init__(self, eager: bool) -> None:
        self.cluster = MemoryCluster(cluster_of([make_node("n0").cap(cpu="8").obj()]), NOW)
        config = SchedulerConfiguration()
        self.scheduler = Scheduler(self.cluster, config, default_profile(config), PreemptionActuator(self.cluster))
        self.eager = eager
        self.made = 0
        self.report = PassReport(time=NOW)

    def apply(self, op: Op) -> None:
        cluster, kind = self.cluster, op[0]
        nodes = sorted(cluster.objects().nodes)
        self.made += 1
        name = f"x{self.made}"
        if kind == "node":
            cluster.create(make_node(name).cap(cpu=str(op[1])).obj())
        elif kind in ("cordon", "resize"):
            node = nodes[op[1] % len(nodes)]
            cpu = cluster.objects().nodes[node].status.allocatable["cpu"]
            built = make_node(node).cap(cpu=str(op[2]) if kind == "resize" else str(cpu))
            if kind == "cordon" and op[2]:
                built = built.unschedulable()
            cluster.create(built.obj())
        elif kind == "pending":
            pod = make_pod(name).req(cpu=str(op[1])).priority(op[2])
            cluster.create((pod.preempt_never() if op[3] else pod).obj())
        elif kind == "running":
            node = nodes[op[1] % len(nodes)]
            cluster.create(make_pod(name).req(cpu=str(op[2])).priority(op[3]).on(node, NOW).grace(5).obj())
        elif kind == "delete":  # a bound pod, most often: that frees room
            pods = sorted(k for k, p in cluster.objects().pods.items() if p.spec.node_name or op[1] % 4 == 0)
            if pods:
                cluster.delete_pod(cluster.objects().pods[pods[op[1] % len(pods)]], 0)
        elif kind == "member":  # a late member of a gang, maybe smaller than the others
            groups = sorted(cluster.objects().pod_groups)
            if groups:
                group = groups[op[1] % len(groups)].split("/")[1]
                cluster.create(make_pod(f"{group}-{name}").req(cpu=str(op[2])).group(group).obj())
        else:
            _, min_count, members, cpu, priority = op
            cluster.create(make_podgroup(name).gang(min_count).priority(priority).obj())
            for m in range(members):
                cluster.create(make_pod(f"{name}-{m}").req(cpu=str(cpu)).group(name).obj())

    def step(self, wait: timedelta = MAX_BACKOFF) -> None:
        self.cluster.advance(self.cluster.now() + wait)
        if self.eager:
            config = self.scheduler.config
            self.scheduler.queue = SchedulingQueue(config.backoff_seconds, config.max_backoff_seconds)
        self.report = self.scheduler.schedule_pending()

    def placed(self) -> dict[str, tuple[str | None, str | None]]:
        """Each pod's node and nominated node."""
        return {
            key: (pod.spec.node_name, pod.status.nominated_node_name)
            for key, pod in self.cluster.objects().pods.items()
        }


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(OPS, min_size=2, max_size=10))
@example(  # a gang's member preempted: its late member fits in what it leaves (the `terminating` event)
    ops=[
        ("resize", 0, 16),
        ("pending", 1, 0, False),
        ("gang", 1, 3, 5, 10),
        ("member", 0, 2),
        ("pending", 2, 100, False),
    ]
)
def test_a_unit_kept_asleep_would_not_fit_anyway(ops: list[Op]) -> None:
    hinted, eager = Side(eager=False), Side(eager=True)
    for op in ops:
        for side in (hinted, eager):
            side.apply(op)
        for _ in range(3):
            hinted.step()
            eager.step()
            assert hinted.placed() == eager.placed(), f"after {op}"


def test_bindings_at_the_units_priority_or_above_wake_nothing() -> None:
    """10 pods that fit nowhere, then pods that fit arrive: each pass retries none of the 10, and says so."""
    side = Side(eager=False)
    for i in range(10):
        side.cluster.create(make_pod(f"big-{i}").req(cpu="100").obj())
    side.step()
    assert side.report.units_tried == 10
    avoided = 0
    for i in range(5):
        side.cluster.create(make_pod(f"fits-{i}").req(cpu="1").obj())
        side.step()
        assert side.report.units_tried == 1 and not side.report.retries
        avoided += side.report.retries_avoided
    assert avoided == 10 * 4  # the old rule retried all 10 at each pass after one that bound a pod
    side.cluster.create(make_node("large").cap(cpu="1000").obj())
    side.step()
    assert side.report.retries == {"node": 10}
    assert len(side.report.bindings) == 10


HOST = "kubernetes.io/hostname"
TEAM_A = {"matchLabels": {"team": "a"}}


def _replace_node(cluster: MemoryCluster) -> None:
    cluster.create(make_node("n0").cap(cpu="8").obj())


EVENTS = [
    pytest.param(
        [make_node("n0").cap(cpu="8").unschedulable().obj(), make_pod("u").req(cpu="2").obj()],
        _replace_node,
        "node",
        id="an uncordoned node wakes the unit",
    ),
    pytest.param(
        [make_pod("old").req(cpu="6").on("n0", NOW).obj(), make_pod("u").req(cpu="4").obj()],
        lambda cluster: cluster.delete_pod(cluster.objects().pods["default/old"], 0),
        "room",
        id="a deleted pod frees room",
    ),
    pytest.param(
        [
            make_podgroup("g").gang(2).obj(),
            make_pod("g-0").req(cpu="6").group("g").obj(),
            make_pod("g-1").req(cpu="6").group("g").obj(),
        ],
        lambda cluster: cluster.create(make_pod("g-2").req(cpu="2").group("g").obj()),
        "pod",
        id="a smaller late member lets the gang fit",
    ),
    pytest.param(
        [
            make_pod("other").req(cpu="6").priority(100).nominated("n0").scheduler("another-scheduler").obj(),
            make_pod("u").req(cpu="4").preempt_never().obj(),
        ],
        lambda cluster: cluster.delete_pod(cluster.objects().pods["default/other"], 0),
        "nomination",
        id="a nomination dropped gives back the room it held",
    ),
    pytest.param(
        [
            make_namespace("team-b").label("team", "b").obj(),
            make_pod("db").ns("team-b").label("app", "db").req(cpu="1").on("n0", NOW).obj(),
            make_pod("u").req(cpu="1").pod_affinity(HOST, namespace_selector=TEAM_A, app="db").obj(),
        ],
        lambda cluster: cluster.create(make_namespace("team-b").label("team", "a").obj()),
        "namespace",
        id="a namespace relabelled into an affinity's namespaceSelector brings the pod it needs",
    ),
    pytest.param(
        [
            make_namespace("apps").label("team", "a").obj(),
            make_pod("db")
            .label("app", "db")
            .req(cpu="1")
            .pod_affinity(HOST, anti=True, namespace_selector=TEAM_A, app="web")
            .on("n0", NOW)
            .obj(),
            make_pod("u").ns("apps").label("app", "web").req(cpu="1").obj(),
        ],
        lambda cluster: cluster.create(make_namespace("apps").label("team", "b").obj()),
        "namespace",
        id="a pod's namespace relabelled out of a running pod's anti-affinity",
    ),
]


@pytest.mark.parametrize(("objects", "change", "want_event"), EVENTS)
def test_an_event_that_can_help_wakes_the_unit(objects: list[Any], change: Any, want_event: str) -> None:
    side = Side(eager=False)
    for obj in objects:
        side.cluster.create(obj)
    side.step()
    assert side.report.retries == {} and not side.report.bindings
    change(side.cluster)
    side.step()
    assert set(side.report.retries) == {want_event}
    assert side.report.bindings


def test_a_pod_larger_than_every_node_is_never_searched_and_sleeps_until_a_node_grows() -> None:
    """kube-scheduler marks a request above every node's allocatable unresolvable and skips preemption: so does
    Phalanx, and such a pod is tried again only when a node is added or changes in what a filter reads, not on a
    kubelet's heartbeat nor when room is freed."""
    cluster = MemoryCluster(
        cluster_of(
            [
                make_node("n1").cap(cpu="8").obj(),
                make_pod("low").req(cpu="4").priority(0).on("n1", NOW).obj(),
                make_pod("huge").req(cpu="100").priority(1000).obj(),
            ]
        ),
        NOW,
    )
    config = SchedulerConfiguration()
    scheduler = Scheduler(cluster, config, default_profile(config), PreemptionActuator(cluster))
    first = scheduler.schedule_pending()
    assert first.post_filter == [], "no victim search for a pod no node can hold"
    assert [(p.pod, p.reason, p.message) for p in first.pending] == [
        (
            "default/huge",
            "Unschedulable",
            "0/1 nodes are available: 1 Insufficient cpu."
            " WorkloadPreemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.",
        )
    ]
    for change in ("heartbeat", "room"):
        if change == "heartbeat":
            cluster.create(make_node("n1").cap(cpu="8").obj())  # the same Node, a new resourceVersion
        else:
            cluster.delete_pod(cluster.objects().pods["default/low"], 0)
        cluster.advance(cluster.now() + MAX_BACKOFF)
        assert scheduler.schedule_pending().units_tried == 0, f"woken by a {change}"
    cluster.create(make_node("n1").cap(cpu="128").obj())
    cluster.advance(cluster.now() + MAX_BACKOFF)
    assert [b.pod for b in scheduler.schedule_pending().bindings] == ["default/huge"]


def test_a_gang_with_a_member_no_node_can_hold_is_never_searched() -> None:
    cluster = MemoryCluster(
        cluster_of(
            [
                make_node("n1").cap(cpu="8").obj(),
                make_pod("low").req(cpu="8").priority(0).on("n1", NOW).obj(),
                make_podgroup("g").gang(2).priority(1000).obj(),
                make_pod("g-0").req(cpu="4").group("g").obj(),
                make_pod("g-1").req(cpu="100").group("g").obj(),
            ]
        ),
        NOW,
    )
    config = SchedulerConfiguration()
    report = Scheduler(cluster, config, default_profile(config), PreemptionActuator(cluster)).schedule_pending()
    assert report.post_filter == []
    assert cluster.objects().pods["default/low"].metadata.deletion_timestamp is None


def test_a_pod_placed_wakes_the_pod_whose_affinity_it_meets() -> None:
    """No pod matches the affinity (unresolvable); a matching pod bound later, a binding that takes room and frees
    none, must still wake it, as kube-scheduler's InterPodAffinity hint does on a pod added."""
    cluster = MemoryCluster(
        cluster_of(
            [
                make_node("n1").cap(cpu="8").obj(),
                make_pod("web").req(cpu="1").pod_affinity("kubernetes.io/hostname", app="db").obj(),
            ]
        ),
        NOW,
    )
    config = SchedulerConfiguration()
    scheduler = Scheduler(cluster, config, default_profile(config), PreemptionActuator(cluster))
    assert scheduler.schedule_pending().bindings == []
    cluster.create(make_pod("db").label("app", "db").req(cpu="1").on("n1", NOW).obj())
    cluster.advance(cluster.now() + MAX_BACKOFF)
    assert [b.pod for b in scheduler.schedule_pending().bindings] == ["default/web"]


def test_ten_thousand_pods_larger_than_every_node_cost_a_pass_nothing() -> None:
    """Issue 43: each of 10,000 such pods is tried once, searched for victims never, and then sleeps while pods come
    and go, nodes report status and other pods bind: a pass looks only at the pods it can place."""
    huge = [make_pod(f"huge-{i}").req(cpu="100").priority(1000).obj() for i in range(10_000)]
    running = [make_pod(f"low-{i}").req(cpu="1").priority(0).on(f"n{i % 4}", NOW).obj() for i in range(8)]
    cluster = MemoryCluster(
        cluster_of([*(make_node(f"n{i}").cap(cpu="8").obj() for i in range(4)), *running, *huge]), NOW
    )
    config = SchedulerConfiguration()
    scheduler = Scheduler(cluster, config, default_profile(config), PreemptionActuator(cluster))
    first = scheduler.schedule_pending()
    assert (first.units_tried, first.post_filter) == (10_000, [])
    for i in range(3):
        cluster.create(make_node(f"n{i}").cap(cpu="8").obj())  # a status heartbeat: a new resourceVersion
        cluster.delete_pod(cluster.objects().pods[f"default/low-{i}"], 0)  # room freed
        cluster.create(make_pod(f"new-{i}").req(cpu="1").obj())
        cluster.advance(cluster.now() + MAX_BACKOFF)
        report = scheduler.schedule_pending()
        assert (report.units_tried, [b.pod for b in report.bindings]) == (1, [f"default/new-{i}"])
