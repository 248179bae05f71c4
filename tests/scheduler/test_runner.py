"""The runner's queue and PostFilter contract, driven through the public Scheduler API."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from scheduler.api.config import SchedulerConfiguration
from scheduler.cluster.memory import MemoryCluster
from scheduler.framework.cluster import PassAborted
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import NodeVerdict, PostFilterResult
from scheduler.framework.pod_info import PodInfo, SchedulingUnit
from scheduler.framework.profile import Profile
from scheduler.framework.runner import Scheduler
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import Status, unschedulable
from scheduler.plugins import default_profile
from scheduler.preemption.actuator import PreemptionActuator
from tests.builders import EPOCH, make_node, make_pod
from tests.scheduler.scenario import cluster_of

RETRY = EPOCH + timedelta(minutes=5)


class RetryLater:
    """A PostFilter that proposes a nomination and asks to be retried at `at` (a protected victim)."""

    name = "RetryLater"

    def __init__(self, at: datetime = RETRY) -> None:
        self.at = at

    def post_filter(
        self, state: CycleState, unit: SchedulingUnit, snapshot: Snapshot, statuses: dict[str, Status]
    ) -> PostFilterResult:
        return PostFilterResult(unschedulable("victim protected", until=self.at), {m.key: "n1" for m in unit.members})


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, str]]] = []

    def actuate(self, unit: SchedulingUnit, result: PostFilterResult, snapshot: Snapshot) -> None:
        self.calls.append((unit.key, result.nominations))


def profile_with(post_filter: RetryLater) -> Profile:
    base = default_profile(SchedulerConfiguration())
    return Profile(base.pre_enqueue, base.static_filters, base.filters, base.scores, (post_filter,))


def test_unschedulable_unit_waits_for_a_change_then_backs_off() -> None:
    cluster = MemoryCluster(cluster_of([make_node("n1").cap(cpu="1").obj(), make_pod("p").req(cpu="2").obj()]), EPOCH)
    scheduler = Scheduler(cluster, SchedulerConfiguration(), default_profile(SchedulerConfiguration()))
    assert scheduler.schedule_pending().bindings == []
    assert scheduler.next_wakeup() is None, "nothing changed: nothing to wake for"
    assert scheduler.schedule_pending().units_tried == 0, "parked in the unschedulable pool"
    cluster.create(make_node("n2").cap(cpu="4").obj())
    assert scheduler.schedule_pending().units_tried == 0, "the change moves it to backoff first"
    assert scheduler.next_wakeup() == EPOCH + timedelta(seconds=1)
    cluster.advance(EPOCH + timedelta(seconds=1))
    assert [(b.pod, b.node) for b in scheduler.schedule_pending().bindings] == [("default/p", "n2")]


def test_post_filter_until_and_actuator() -> None:
    running = make_pod("r").req(cpu="1").on("n1").obj()
    objects = [make_node("n1").cap(cpu="2").obj(), running, make_pod("p").req(cpu="2").obj()]
    cluster = MemoryCluster(cluster_of(objects), EPOCH)
    recorder = Recorder()
    scheduler = Scheduler(cluster, SchedulerConfiguration(), profile=profile_with(RetryLater()), actuator=recorder)
    report = scheduler.schedule_pending()
    assert recorder.calls == [("default/p", {"default/p": "n1"})]
    assert scheduler.next_wakeup() == RETRY
    assert report.pending[0].message.endswith("RetryLater: victim protected")
    cluster.advance(RETRY)
    assert scheduler.schedule_pending().units_tried == 1, "retried at `until` though nothing changed"


def test_nominated_pod_returns_to_its_node() -> None:
    """LeastAllocated would pick the empty node; the nomination wins while the pod fits there."""
    busy = make_node("busy").obj()
    empty = make_node("empty").obj()
    running = make_pod("r").req(cpu="4").on("busy").obj()
    pod = make_pod("p").req(cpu="1").nominated("busy").obj()
    cluster = MemoryCluster(cluster_of([busy, empty, running, pod]), EPOCH)
    report = Scheduler(cluster, SchedulerConfiguration(), default_profile(SchedulerConfiguration())).schedule_pending()
    assert [(b.pod, b.node) for b in report.bindings] == [("default/p", "busy")]


class Broken:
    """A filter with a bug: the runner must contain it, name it, and retry after backoff."""

    name = "Broken"

    def filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> NodeVerdict:
        raise RuntimeError("boom")


def test_plugin_exception_is_a_scheduler_error_retried_after_backoff() -> None:
    cluster = MemoryCluster(cluster_of([make_node("n1").obj(), make_pod("p").req(cpu="1").obj()]), EPOCH)
    base = default_profile(SchedulerConfiguration())
    profile = Profile(base.pre_enqueue, base.static_filters, (Broken(),), base.scores)
    scheduler = Scheduler(cluster, SchedulerConfiguration(), profile=profile)
    report = scheduler.schedule_pending()
    assert [(p.pod, p.reason) for p in report.pending] == [("default/p", "SchedulerError")]
    assert "RuntimeError('boom')" in report.pending[0].message
    assert scheduler.next_wakeup() == EPOCH + timedelta(seconds=1)


def test_post_filter_until_in_the_past_does_not_spin() -> None:
    cluster = MemoryCluster(cluster_of([make_node("n1").cap(cpu="1").obj(), make_pod("p").req(cpu="2").obj()]), EPOCH)
    scheduler = Scheduler(cluster, SchedulerConfiguration(), profile=profile_with(RetryLater(at=EPOCH)))
    scheduler.schedule_pending()
    assert scheduler.next_wakeup() is None


def test_preemptor_binds_as_soon_as_its_victims_are_gone() -> None:
    """A unit waiting for its own victims takes no backoff: still waiting while they terminate (t=1 s), it
    binds at the moment the last one is gone (t=2 s), not after a backoff grown meanwhile (t=3 s)."""
    victim = make_pod("victim").req(cpu="2").priority(1).grace(2).on("n1").obj()
    preemptor = make_pod("p").req(cpu="2").priority(100).obj()
    cluster = MemoryCluster(cluster_of([make_node("n1").cap(cpu="2").obj(), victim, preemptor]), EPOCH)
    scheduler = Scheduler(
        cluster,
        SchedulerConfiguration(),
        default_profile(SchedulerConfiguration()),
        actuator=PreemptionActuator(cluster),
    )
    assert scheduler.schedule_pending().bindings == []
    assert cluster.objects().pods["default/victim"].metadata.deletion_timestamp is not None, "preempted"
    cluster.advance(EPOCH + timedelta(seconds=1))
    assert scheduler.schedule_pending().bindings == []
    cluster.advance(EPOCH + timedelta(seconds=2))
    assert [(b.pod, b.node) for b in scheduler.schedule_pending().bindings] == [("default/p", "n1")]


def test_an_interrupted_pass_stops_before_its_next_unit() -> None:
    """A scheduler told to stop mid-pass (here once two pods are bound) leaves it between two units: what it
    bound stays bound, and the next unit is not tried; the next pass tries it, though nothing changed for it."""
    pods = [make_pod(f"p{i}").req(cpu="1").obj() for i in range(5)]
    cluster = MemoryCluster(cluster_of([make_node("n1").cap(cpu="8").obj(), *pods]), EPOCH)

    def bound() -> list[str]:
        return sorted(p.key for p in cluster.objects().pods.values() if p.spec.node_name)

    profile = default_profile(SchedulerConfiguration())
    scheduler = Scheduler(cluster, SchedulerConfiguration(), profile, interrupted=lambda: len(bound()) == 2)
    with pytest.raises(PassAborted):
        scheduler.schedule_pending()
    assert bound() == ["default/p0", "default/p1"]
    scheduler.interrupted = lambda: False
    scheduler.schedule_pending()
    assert bound() == [f"default/p{i}" for i in range(5)]
