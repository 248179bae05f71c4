"""A unit's pending reason is said once, where kubectl looks: the PodGroup's condition and one Warning Event.

Driven through the public Scheduler on the memory cluster, whose recorded Events and stored conditions are
what the kube back end would write.
"""

from __future__ import annotations

from datetime import timedelta

from prometheus_client import generate_latest

from scheduler.api.config import SchedulerConfiguration
from scheduler.cluster.memory import MemoryCluster
from scheduler.framework.reasons import PendingReason, ReasonBook, UnitReason
from scheduler.framework.runner import Scheduler
from scheduler.metrics import SchedulerMetrics, record_pending
from scheduler.plugins import default_profile
from scheduler.preemption.actuator import PreemptionActuator
from tests.builders import EPOCH, make_node, make_pod, make_podgroup, make_priority_class
from tests.scheduler.scenario import cluster_of

TOLERATION = "preemption-toleration.scheduling.sigs.k8s.io"
GATE = "scheduling.phalanx.dev/gang"
NOW = EPOCH + timedelta(hours=12)
STARTED = NOW - timedelta(minutes=15)


def tolerated_gang() -> MemoryCluster:
    """A full node whose pod tolerates the gang's priority for 15 more minutes; a gang of two that needs it."""
    objects = [
        make_priority_class("sim", 10)
        .annotate(f"{TOLERATION}/minimum-preemptable-priority", "1000")
        .annotate(f"{TOLERATION}/toleration-seconds", "1800")
        .obj(),
        make_priority_class("train", 100).obj(),
        make_node("n1").cap(cpu="4").obj(),
        make_pod("sim-42").ns("physics").req(cpu="4").priority_class("sim").priority(10).on("n1", STARTED).obj(),
        make_podgroup("train").ns("ml").gang(2).priority_class("train").priority(100).obj(),
        *(make_pod(f"w{i}").ns("ml").req(cpu="2").group("train").priority_class("train").obj() for i in range(2)),
    ]
    return MemoryCluster(cluster_of(objects), NOW)


def scheduler_on(cluster: MemoryCluster) -> Scheduler:
    config = SchedulerConfiguration()
    return Scheduler(cluster, config, default_profile(config), actuator=PreemptionActuator(cluster))


def test_the_podgroup_condition_carries_the_members_reason_with_the_preemption_part() -> None:
    cluster = tolerated_gang()
    scheduler_on(cluster).schedule_pending()
    objects = cluster.objects()
    member = objects.pods["ml/w0"].condition("PodScheduled")
    (condition,) = objects.pod_groups["ml/train"].status.conditions
    assert member is not None and member.reason == "Unschedulable"
    assert (condition.type, condition.status, condition.reason) == ("PodGroupScheduled", "False", "Unschedulable")
    assert condition.message == member.message
    assert condition.message is not None
    assert condition.message.startswith("gang ml/train needs 2 members, 0 can be placed. 0/1 nodes are available")
    assert "physics/sim-42 tolerates preemption by priority 100 (PriorityClass sim" in condition.message
    assert "until 12:15:01Z" in condition.message


def test_a_reason_is_said_once_and_its_repeats_are_counted() -> None:
    cluster = tolerated_gang()
    scheduler = scheduler_on(cluster)
    first = scheduler.schedule_pending()
    cluster.create(make_node("n1").cap(cpu="4").label("zone", "a").obj())  # a change: tried again, same reason
    cluster.advance(NOW + timedelta(seconds=5))
    second = scheduler.schedule_pending()
    assert second.units_tried == 1
    warnings = [(e.regarding, e.regarding_kind, e.reason) for e in cluster.events if e.event_type == "Warning"]
    assert sorted(warnings) == [
        ("ml/train", "PodGroup", "FailedScheduling"),
        ("ml/w0", "Pod", "FailedScheduling"),
        ("ml/w1", "Pod", "FailedScheduling"),
    ], "one Warning on the PodGroup and one on each member (its PodScheduled condition), not one per pass"
    assert first.repeats == {} and second.repeats == {"Unschedulable": 1}
    assert {k: (r.reason, r.queue) for k, r in second.reasons.items()} == {"podgroup/ml/train": ("Unschedulable", "")}
    assert second.pods == {"unschedulable": 2}


def test_a_new_reason_is_said_again() -> None:
    cluster = tolerated_gang()
    scheduler = scheduler_on(cluster)
    scheduler.schedule_pending()
    cluster.create(make_node("n2").cap(cpu="2").obj())  # one member fits now: the message changes
    cluster.advance(NOW + timedelta(seconds=5))
    scheduler.schedule_pending()
    notes = [e.note for e in cluster.events if e.reason == "FailedScheduling" and e.regarding == "ml/train"]
    assert len(notes) == 2
    assert "0 can be placed" in notes[0] and "1 can be placed" in notes[1]


def test_events_on_a_unit_are_rate_limited_like_kube_schedulers() -> None:
    book = ReasonBook(burst=2, refill_seconds=300)
    assert [book.may_record("ml/train", NOW) for _ in range(3)] == [True, True, False]
    assert not book.may_record("ml/train", NOW + timedelta(seconds=299))
    assert book.may_record("ml/train", NOW + timedelta(seconds=600)), "one more Event every 5 minutes"
    assert book.may_record("ml/other", NOW), "a budget per unit"


def test_the_book_names_the_units_whose_reason_changed_or_was_forgotten() -> None:
    """What lets a pass keep what it told the units nothing happened to (`Scheduler._tell_held`)."""
    book = ReasonBook()
    waiting = UnitReason(PendingReason.WAITING_FOR_GANG, "waiting for 2 more member(s)", "")
    assert book.say("ml/a", waiting) and book.say("ml/b", waiting)
    assert book.replaced() == {"ml/a", "ml/b"} and book.replaced() == set()
    assert not book.say("ml/a", UnitReason(PendingReason.WAITING_FOR_GANG, "waiting for 2 more member(s)", ""))
    assert book.replaced() == set(), "the same reason again replaces nothing"
    book.say("ml/a", UnitReason(PendingReason.UNSCHEDULABLE, "0/3 nodes are available", ""))
    book.forget(["ml/b", "ml/never-said"])
    assert book.replaced() == {"ml/a", "ml/b"}


def test_preemption_is_announced_once_and_the_victims_name_their_preemptor() -> None:
    cluster = MemoryCluster(
        cluster_of(
            [
                make_node("n1").cap(cpu="4").obj(),
                make_pod("low").req(cpu="4").priority(10).on("n1", EPOCH).grace(30).obj(),
                make_podgroup("train").gang(1).priority(100).obj(),
                make_pod("w0").req(cpu="4").group("train").priority(100).obj(),
            ]
        ),
        NOW,
    )
    scheduler = scheduler_on(cluster)
    first = scheduler.schedule_pending()
    cluster.advance(NOW + timedelta(seconds=1))
    cluster.create(make_node("tiny").cap(cpu="1").obj())
    second = scheduler.schedule_pending()
    assert [e.reason for e in cluster.events if e.regarding == "default/train"] == ["Preempting"]
    target = cluster.objects().pods["default/low"].condition("DisruptionTarget")
    assert target is not None
    assert target.message == "phalanx-scheduler: preempting to accommodate a higher priority podgroup default/train"
    (condition,) = cluster.objects().pod_groups["default/train"].status.conditions
    assert (condition.reason, condition.status) == ("Preempting", "False")
    assert first.pods == {"nominated": 1} and second.pods == {"nominated": 1}
    assert "waiting for 1 preempted pod(s) to terminate" in second.reasons["podgroup/default/train"].message


def test_held_units_say_why_on_their_podgroup() -> None:
    cluster = MemoryCluster(
        cluster_of(
            [
                make_node("n1").cap(cpu="4").obj(),
                make_podgroup("train").gang(4).obj(),
                *(make_pod(f"w{i}").req(cpu="1").group("train").gate(GATE).obj() for i in range(2)),
                make_pod("held").req(cpu="1").gate("example.com/quota").obj(),
            ]
        ),
        NOW,
    )
    report = scheduler_on(cluster).schedule_pending()
    (condition,) = cluster.objects().pod_groups["default/train"].status.conditions
    assert (condition.reason, condition.message) == ("WaitingForGang", "2/4 members exist, gang needs 4")
    assert {k: r.reason for k, r in report.reasons.items()} == {
        "podgroup/default/train": "WaitingForGang",
        "default/held": "SchedulingGated",
    }
    assert report.pods == {"waiting": 2, "gated": 1}
    assert not [e for e in cluster.events if e.event_type == "Warning"], "waiting is not a failure"


def test_the_pending_gauges_come_from_the_pass() -> None:
    cluster = tolerated_gang()
    report = scheduler_on(cluster).schedule_pending()
    metrics = SchedulerMetrics()
    record_pending(metrics, report)
    text = generate_latest(metrics.registry).decode()
    assert 'phalanx_pending_units{queue="",reason="Unschedulable"} 1.0' in text
    assert 'phalanx_pending_pods{state="unschedulable"} 2.0' in text
    assert 'phalanx_pending_pods{state="gated"} 0.0' in text


def test_the_pending_gauges_follow_units_that_change_reason_and_leave() -> None:
    """The gang waits for a member, then is unschedulable; a lone pod fits once a node comes, and leaves the
    gauges; the gang's pods are deleted, and the gauges read nothing pending."""
    cluster = MemoryCluster(
        cluster_of(
            [
                make_node("n1").cap(cpu="1").obj(),
                make_podgroup("train").gang(2).obj(),
                make_pod("w0").req(cpu="8").group("train").obj(),
                make_pod("solo").req(cpu="2").obj(),
            ]
        ),
        NOW,
    )
    scheduler = scheduler_on(cluster)

    def gauges() -> set[str]:
        cluster.advance(cluster.now() + timedelta(seconds=20))  # past any backoff
        metrics = SchedulerMetrics()
        record_pending(metrics, scheduler.schedule_pending())
        text = generate_latest(metrics.registry).decode()
        return {line for line in text.splitlines() if line.startswith("phalanx_pending_units{")}

    assert gauges() == {
        'phalanx_pending_units{queue="",reason="WaitingForGang"} 1.0',
        'phalanx_pending_units{queue="",reason="Unschedulable"} 1.0',
    }
    cluster.create(make_pod("w1").req(cpu="8").group("train").obj())
    assert gauges() == {'phalanx_pending_units{queue="",reason="Unschedulable"} 2.0'}
    cluster.create(make_node("n2").cap(cpu="4").obj())
    assert gauges() == {'phalanx_pending_units{queue="",reason="Unschedulable"} 1.0'}
    for name in ("w0", "w1"):
        cluster.delete_pod(cluster.objects().pods[f"default/{name}"], 0)
    assert gauges() == set()
