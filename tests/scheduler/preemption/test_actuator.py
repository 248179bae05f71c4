"""The actuator through the scheduler on the memory cluster: conditions, events, deletion, idempotence."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from scheduler.cluster.memory import MemoryCluster
from scheduler.framework.pod_info import SchedulingUnit
from scheduler.framework.runner import Scheduler
from scheduler.framework.snapshot_builder import build_snapshot
from scheduler.plugins import default_profile
from scheduler.preemption.actuator import PreemptionActuator
from scheduler.simulation.scenario import load_scenario
from tests.builders import make_node, make_pod, make_podgroup, make_priority_class, yaml_documents

NOW = datetime(2026, 1, 1, 1, 0, tzinfo=UTC)
STARTED = datetime(2026, 1, 1, 0, 30, tzinfo=UTC)


def cluster_with_group_victim(tmp_path: Path) -> tuple[MemoryCluster, Scheduler]:
    objects = [
        make_priority_class("low", 10).json(),
        make_priority_class("high", 1000).json(),
        make_node("n1").cap(cpu="4").json(),
        make_node("n2").cap(cpu="4").json(),
        make_podgroup("old").gang(2).priority_class("low").disruption_mode("PodGroup").json(),
        make_pod("old-0").req(cpu="4").group("old").grace(60).on("n1", STARTED).json(),
        make_pod("old-1").req(cpu="4").group("old").grace(60).on("n2", STARTED).json(),
        make_podgroup("train").gang(1).priority_class("high").json(),
        make_pod("train-0").req(cpu="4").group("train").json(),
    ]
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml_documents(objects))
    scenario = load_scenario([str(path)], NOW)
    cluster = MemoryCluster(scenario.objects, NOW)
    return cluster, Scheduler(
        cluster, scenario.config, default_profile(scenario.config), actuator=PreemptionActuator(cluster)
    )


def test_victims_marked_evented_and_deleted_with_grace(tmp_path: Path) -> None:
    cluster, scheduler = cluster_with_group_victim(tmp_path)
    scheduler.schedule_pending()
    pods = cluster.objects().pods
    for key in ("default/old-0", "default/old-1"):
        pod = pods[key]
        target = pod.condition("DisruptionTarget")
        assert target is not None and target.status == "True"
        assert target.reason == "PreemptionByScheduler"
        assert target.message == "phalanx-scheduler: preempting to accommodate a higher priority podgroup default/train"
        assert pod.metadata.deletion_timestamp == NOW
        assert pod.metadata.deletion_grace_period_seconds == 60
    events = [(e.regarding, e.reason, e.related, e.related_kind) for e in cluster.events]
    assert ("default/old-0", "Preempted", "default/train", "PodGroup") in events
    (preempting,) = [e for e in cluster.events if e.reason == "Preempting"]
    assert preempting.regarding == "default/train"
    assert "victims: 1 unit (podgroup/default/old), 2 pods on 2 nodes" in preempting.note
    group = cluster.objects().pod_groups["default/old"]
    assert any(c.type == "DisruptionTarget" and c.reason == "PreemptionByScheduler" for c in group.status.conditions)
    assert pods["default/train-0"].status.nominated_node_name in {"n1", "n2"}
    assert not cluster.bindings


def test_replaying_a_decision_changes_nothing(tmp_path: Path) -> None:
    """Idempotent: the same proposal applied again (as after a restart) adds no event, write or deletion."""
    cluster, scheduler = cluster_with_group_victim(tmp_path)
    report = scheduler.schedule_pending()
    ((_, result),) = report.post_filter
    events = len(cluster.events)
    versions = {k: p.metadata.resource_version for k, p in cluster.objects().pods.items()}
    snapshot = build_snapshot(cluster.objects(), NOW, scheduler.config)
    member = snapshot.pods["default/train-0"]
    unit = SchedulingUnit((member,), snapshot.groups["default/train"], 1, member.priority, member.preemption_policy)
    PreemptionActuator(cluster).actuate(unit, result, snapshot)
    assert len(cluster.events) == events
    assert {k: p.metadata.resource_version for k, p in cluster.objects().pods.items()} == versions


def test_a_restarted_scheduler_does_not_preempt_again(tmp_path: Path) -> None:
    cluster, scheduler = cluster_with_group_victim(tmp_path)
    scheduler.schedule_pending()
    preempting = [e for e in cluster.events if e.reason in ("Preempting", "Preempted")]
    restarted = Scheduler(cluster, scheduler.config, scheduler.profile, actuator=PreemptionActuator(cluster))
    report = restarted.schedule_pending()
    assert [e for e in cluster.events if e.reason in ("Preempting", "Preempted")] == preempting
    assert [r.status.message() for _, r in report.post_filter] == [
        "waiting for 1 preempted pod(s) to terminate on the nominated node(s)"
    ]


def test_victims_go_after_their_grace_period_and_the_gang_binds(tmp_path: Path) -> None:
    cluster, scheduler = cluster_with_group_victim(tmp_path)
    scheduler.schedule_pending()
    cluster.advance(datetime(2026, 1, 1, 1, 1, tzinfo=UTC))
    scheduler.schedule_pending()
    assert [(b.pod, b.time) for b in cluster.bindings] == [("default/train-0", datetime(2026, 1, 1, 1, 1, tzinfo=UTC))]
    assert {p.victim for p in cluster.preemptions} == {"default/old-0", "default/old-1"}
