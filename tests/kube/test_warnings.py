"""Configuration the scheduler ignores is reported once, as a Warning Event, on the loopback API server.

The PriorityClass and the Queue are created straight into storage, as objects written before the
webhook was installed would be: the scheduler must cope with them. Events about these cluster-scoped
objects live in `default`, which the loopback server enforces as kube-apiserver does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.apiserver import ApiServer
from tests.builders import make_node, make_pod, make_priority_class, make_queue
from tests.kube.replica import PG_GROUP, Replica, fast_config, node_of
from tests.polling import wait_for

TOLERATION = "preemption-toleration.scheduling.sigs.k8s.io/"


def start(server: ApiServer, kubeconfig: Path, replicas: list[Replica]) -> Replica:
    replica = Replica(server, kubeconfig, fast_config(), "a").start()
    replicas.append(replica)
    return replica


def passes(replica: Replica) -> float:
    sample = replica.process.metrics.registry.get_sample_value(
        "phalanx_scheduler_scheduling_attempt_duration_seconds_count", {"result": "success"}
    )
    return sample or 0.0


def warnings(server: ApiServer, reason: str) -> list[dict[str, Any]]:
    """Every Warning Event with `reason`, in any namespace."""
    found = [e for e in server.list("events", group="events.k8s.io") if e["reason"] == reason]
    assert all(e["type"] == "Warning" for e in found)
    return found


def drive_passes(server: ApiServer, replica: Replica, count: int) -> None:
    """Make the scheduler run at least `count` more passes (each new pod is a change it must handle)."""
    target = passes(replica) + count
    for i in range(count):
        name = f"filler-{int(target)}-{i}"
        server.create(make_pod(name).req(cpu="10m").json())
        wait_for(lambda name=name: node_of(server, name))  # type: ignore[misc]
    wait_for(lambda: passes(replica) >= target)


def test_bad_annotation_and_duration_warn_once_and_protect_nothing(
    apiserver: ApiServer, kubeconfig: Path, replicas: list[Replica]
) -> None:
    apiserver.create(
        make_priority_class("no-checkpoint", 100)
        .annotate(TOLERATION + "minimum-preemptable-priority", "10000")
        .annotate(TOLERATION + "toleration-seconds", "20m")
        .json()
    )
    apiserver.create(make_priority_class("high", 5000).json())
    apiserver.create(make_queue("research").reclaim_min_runtime("-10m").json())
    apiserver.create(make_node("n0").cap(cpu="4", memory="8Gi").json())
    apiserver.create(make_node("spare").cap(cpu="1", memory="8Gi").json())
    apiserver.create(
        make_pod("sim").ns("physics").req(cpu="4").priority_class("no-checkpoint").queue("research").on("n0").json()
    )
    apiserver.create(make_pod("urgent").ns("ops").req(cpu="4").priority_class("high").json())
    replica = start(apiserver, kubeconfig, replicas)

    wait_for(lambda: node_of(apiserver, "urgent", "ops") == "n0", timeout=15)
    assert apiserver.get("pods", "sim", "physics") is None, "an unparsable toleration protects nothing"
    drive_passes(apiserver, replica, 3)

    toleration = wait_for(lambda: warnings(apiserver, "InvalidPreemptionToleration"))
    min_runtime = wait_for(lambda: warnings(apiserver, "InvalidMinRuntime"))
    assert len(toleration) == 1, "one Event per finding, not one per pass"
    assert len(min_runtime) == 1
    event = toleration[0]
    assert event["metadata"]["namespace"] == "default"
    assert event["regarding"]["kind"] == "PriorityClass"
    assert event["regarding"]["name"] == "no-checkpoint"
    assert event["regarding"]["apiVersion"] == "scheduling.k8s.io/v1"
    assert "namespace" not in event["regarding"]
    assert event["reportingController"] == "scheduling.phalanx.dev/scheduler"
    assert f"metadata.annotations[{TOLERATION}toleration-seconds]" in event["note"]
    assert "got '20m'" in event["note"]
    assert "treated as no toleration" in event["note"]
    queue_event = min_runtime[0]
    assert queue_event["metadata"]["namespace"] == "default"
    assert (queue_event["regarding"]["kind"], queue_event["regarding"]["name"]) == ("Queue", "research")
    assert queue_event["regarding"]["apiVersion"] == f"{PG_GROUP}/v1alpha1"
    assert queue_event["note"] == (
        "spec.reclaimMinRuntime: Invalid value: '-10m': '-10m' is negative: must be 0 or more; treated as 0"
    )

    # An edit that leaves the annotation wrong is a new resourceVersion: the scheduler warns again.
    edited = apiserver.get("priorityclasses", "no-checkpoint", group="scheduling.k8s.io")
    assert edited is not None
    edited["description"] = "still wrong"
    apiserver.apply(edited)
    wait_for(lambda: len(warnings(apiserver, "InvalidPreemptionToleration")) == 2)
    drive_passes(apiserver, replica, 2)
    assert len(warnings(apiserver, "InvalidPreemptionToleration")) == 2
    assert len(warnings(apiserver, "InvalidMinRuntime")) == 1


def test_running_pod_whose_class_was_deleted_gets_one_warning(
    apiserver: ApiServer, kubeconfig: Path, replicas: list[Replica]
) -> None:
    apiserver.create(make_priority_class("gone", 100).json())
    apiserver.create(make_node("n0").cap(cpu="4", memory="8Gi").json())
    apiserver.create(make_pod("orphan").ns("ml").req(cpu="1").priority_class("gone").on("n0").json())
    apiserver.delete("priorityclasses", "gone", group="scheduling.k8s.io")
    replica = start(apiserver, kubeconfig, replicas)
    event = wait_for(lambda: warnings(apiserver, "PriorityClassNotFound"))[0]
    drive_passes(apiserver, replica, 3)
    assert len(warnings(apiserver, "PriorityClassNotFound")) == 1
    assert event["metadata"]["namespace"] == "ml"
    assert (event["regarding"]["kind"], event["regarding"]["namespace"], event["regarding"]["name"]) == (
        "Pod",
        "ml",
        "orphan",
    )
    assert event["note"] == (
        "spec.priorityClassName: Not found: 'gone': no PriorityClass with name gone was found; "
        "ml/orphan is treated as having no preemption toleration"
    )
