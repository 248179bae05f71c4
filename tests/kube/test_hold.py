"""Events and PodScheduled messages wait while a preemption is under way, and none is lost.

The preemption's own writes (nominations, each victim's DisruptionTarget and deletion, the
nominees' Bindings) go first; what only informs follows once the victims are gone and the
nominees' Bindings are sent, or `best_effort_hold_seconds` after the last preemption write at the
latest (a victim with a long grace period holds nothing back for longer).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kube.client import api_client
from scheduler.api.meta import Condition
from scheduler.cluster.kube import KubeCluster
from tests.apiserver import ApiServer
from tests.builders import make_node, make_pod
from tests.kube.stored import stored_pod
from tests.polling import wait_for

TARGET = Condition(type="DisruptionTarget", status="True", reason="PreemptionByScheduler", message="x")
WAITING = Condition(type="PodScheduled", status="False", reason="Unschedulable", message="waiting for 1 victim")


@pytest.fixture
def objects(apiserver: ApiServer) -> ApiServer:
    apiserver.hold_terminating = True
    apiserver.create(make_node("n0").cap(cpu="8", memory="8Gi").json())
    apiserver.create(make_pod("victim").on("n0").json())
    apiserver.create(make_pod("preemptor").json())
    return apiserver


def start(kubeconfig: Path, hold_seconds: float) -> KubeCluster:
    kube = KubeCluster(
        api_client(kubeconfig, "scheduler"),
        identity="hold",
        request_timeout_seconds=1.0,
        best_effort_hold_seconds=hold_seconds,
    )
    kube.start()
    assert kube.wait_synced(10)
    return kube


@pytest.fixture
def cluster(objects: ApiServer, kubeconfig: Path) -> Iterator[KubeCluster]:
    kube = start(kubeconfig, hold_seconds=30.0)
    yield kube
    kube.stop()


def events(server: ApiServer) -> list[dict[str, Any]]:
    return server.list("events", "default", group="events.k8s.io")


def informed(server: ApiServer) -> bool:
    """Whether anything that only informs reached the server: an Event, or the preemptor's PodScheduled."""
    return bool(events(server)) or stored_pod(server, "preemptor").condition("PodScheduled") is not None


def preempt(cluster: KubeCluster, server: ApiServer) -> None:
    """What the actuator does for one victim, then a pass's message on the waiting preemptor."""
    victim = stored_pod(server, "victim")
    cluster.set_nominated_node(stored_pod(server, "preemptor"), "n0")
    cluster.set_pod_condition(victim, TARGET)
    cluster.record_event(victim, "Normal", "Preempted", "Preempted by Pod default/preemptor on node n0")
    cluster.delete_pod(victim, None)
    cluster.set_pod_condition(stored_pod(server, "preemptor"), WAITING)


def test_informing_writes_wait_for_the_victims_and_the_nominees_binding(
    objects: ApiServer, cluster: KubeCluster
) -> None:
    preempt(cluster, objects)
    wait_for(lambda: stored_pod(objects, "victim").metadata.deletion_timestamp is not None)
    wait_for(lambda: stored_pod(objects, "preemptor").status.nominated_node_name == "n0")
    time.sleep(0.3)
    assert not informed(objects), "held while the victim terminates"
    objects.finish_terminating()
    wait_for(lambda: cluster.pods.get("default/victim") is None)
    time.sleep(0.3)
    assert not informed(objects), "held until the nominee's Binding is sent"
    cluster.bind(stored_pod(objects, "preemptor"), "n0")
    wait_for(lambda: {e["reason"] for e in events(objects)} == {"Preempted", "Scheduled"})
    cluster.stop()
    scheduled = stored_pod(objects, "preemptor").condition("PodScheduled")
    assert scheduled is not None
    assert scheduled.status == "True", "the message held back went stale when the preemptor was bound"


def test_a_victim_that_stays_terminating_holds_nothing_back_for_long(objects: ApiServer, kubeconfig: Path) -> None:
    cluster = start(kubeconfig, hold_seconds=1.0)
    try:
        preempt(cluster, objects)
        wait_for(lambda: "Preempted" in {e["reason"] for e in events(objects)}, timeout=10)
        wait_for(lambda: stored_pod(objects, "preemptor").condition("PodScheduled") is not None, timeout=10)
        assert stored_pod(objects, "victim").metadata.deletion_timestamp is not None, "the victim is still terminating"
    finally:
        cluster.stop()


def test_preemptions_without_pause_hold_events_back_no_longer_than_the_hold(
    objects: ApiServer, kubeconfig: Path
) -> None:
    """A busy cluster preempts again before the last preemption's victims are gone: a hold that every
    new victim prolonged would keep Events and PodScheduled messages back for as long as that lasts."""
    for i in range(20):
        objects.create(make_pod(f"next-{i}").on("n0").json())
    cluster = start(kubeconfig, hold_seconds=1.0)
    try:
        preempt(cluster, objects)
        for i in range(20):
            cluster.delete_pod(stored_pod(objects, f"next-{i}"), None)
            if "Preempted" in {e["reason"] for e in events(objects)}:
                break
            time.sleep(0.25)
        assert "Preempted" in {e["reason"] for e in events(objects)}, "an Event was held back for 5 s"
    finally:
        cluster.stop()
