"""Which watch events wake the scheduling loop: not the echo of a Binding a view already showed.

A pass after such an echo would rebuild the snapshot and find nothing to do; during a burst of
Bindings those passes kept the loop busy and starved the binder threads (BENCHMARKS.md, Kubernetes
back end). Every other change still wakes it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kube.client import api_client
from scheduler.api.pod import Pod
from scheduler.cluster.kube import KubeCluster
from tests.apiserver import ApiServer
from tests.builders import make_node, make_pod, make_podgroup, make_priority_class
from tests.kube.replica import Replica, fast_config, node_of
from tests.polling import wait_for

ZONE = "topology.kubernetes.io/zone"


@pytest.fixture
def cluster(apiserver: ApiServer, kubeconfig: Path) -> Iterator[KubeCluster]:
    apiserver.create(make_node("plain").cap(cpu="8", memory="8Gi").json())
    apiserver.create(make_node("zoned").cap(cpu="8", memory="8Gi").label(ZONE, "z1").json())
    kube = KubeCluster(api_client(kubeconfig, "scheduler"), identity="wakeups", request_timeout_seconds=1.0)
    kube.start()
    assert kube.wait_synced(10)
    yield kube
    kube.stop()


def cached_node(cluster: KubeCluster, key: str) -> str | None:
    pod = cluster.pods.get(key)
    return pod.spec.node_name if pod is not None else None


@pytest.mark.parametrize(
    ("node", "view_first", "want_wake"),
    [
        pytest.param("plain", True, False, id="our Binding, already shown by a view, does not wake the loop"),
        pytest.param("plain", False, True, id="our Binding before any view showed it wakes the loop"),
        pytest.param("zoned", True, True, id="a Binding that also copied the node's zone label wakes the loop"),
    ],
)
def test_binding_echo(apiserver: ApiServer, cluster: KubeCluster, node: str, view_first: bool, want_wake: bool) -> None:
    apiserver.create(make_pod("p").json())
    wait_for(lambda: "default/p" in cluster.objects().pods)
    raw = apiserver.get("pods", "p", "default")
    assert raw is not None
    held = apiserver.fail("POST", "/api/v1/namespaces/default/pods/p/binding", 503, times=10_000)
    cluster.bind(Pod.model_validate(raw), node)
    if view_first:
        assert cluster.objects().pods["default/p"].spec.node_name == node, "the view shows the assumed binding"
    cluster.changed.clear()
    held.remaining = 0
    wait_for(lambda: cached_node(cluster, "default/p") == node)
    if want_wake:
        wait_for(cluster.changed.is_set)
        return
    time.sleep(0.2)
    assert not cluster.changed.is_set()
    labelled = apiserver.get("pods", "p", "default")
    assert labelled is not None
    labelled["metadata"].setdefault("labels", {})["app"] = "web"
    apiserver.apply(labelled)
    wait_for(cluster.changed.is_set)


IDLE = 120.0
"""No idle pass during these tests: only a watch event or the queue's own wake-up can start one."""


def test_victims_gone_at_once_wake_the_preemptor(
    apiserver: ApiServer, kubeconfig: Path, replicas: list[Replica]
) -> None:
    """Victims with grace 0 vanish with their DELETE: the gang waiting for that room is bound (issue 11, defect 2)."""
    apiserver.create(make_priority_class("low", 10).json())
    apiserver.create(make_priority_class("high", 1000).json())
    for i in range(2):
        apiserver.create(make_node(f"n{i}").cap(cpu="4", memory="8Gi").json())
        apiserver.create(make_pod(f"low-{i}").req(cpu="4").priority_class("low").grace(0).on(f"n{i}").json())
    apiserver.create(make_podgroup("train").gang(2).priority_class("high").json())
    for i in range(2):
        apiserver.create(make_pod(f"train-{i}").req(cpu="4").group("train").priority_class("high").json())
    replicas.append(Replica(apiserver, kubeconfig, fast_config(), "a", idle_seconds=IDLE).start())
    wait_for(lambda: node_of(apiserver, "train-0") and node_of(apiserver, "train-1"), timeout=15)
    assert apiserver.get("pods", "low-0", "default") is None and apiserver.get("pods", "low-1", "default") is None


@pytest.mark.parametrize(
    "marked_first",
    [
        pytest.param(False, id="victims vanish with their DELETE"),
        pytest.param(True, id="a grace-0 victim is stored terminating before it vanishes, as the real server does"),
    ],
)
def test_a_preemptor_waits_until_every_victim_deletion_is_seen(
    apiserver: ApiServer, kubeconfig: Path, replicas: list[Replica], marked_first: bool
) -> None:
    """A `disruptionMode: PodGroup` victim on both nodes; its member on the node nominated for the lone pod is
    deleted last. The pod is not retried before the watch shows every victim of its preemption gone (kube-
    scheduler's async preemption; a grace-0 victim is gone once removed, not when the API server first
    writes its deletionTimestamp), so it binds on its nomination, not on the node whose victim went first
    (fuzz seed 284884 protected #3)."""
    apiserver.create(make_priority_class("low", 10).json())
    apiserver.create(make_priority_class("high", 1000).json())
    apiserver.create(make_podgroup("spread").gang(1).priority_class("low").disruption_mode("PodGroup").json())
    for i in range(2):
        apiserver.create(make_node(f"n{i}").cap(cpu="4", memory="8Gi").json())
        member = make_pod(f"m{i}").req(cpu="4").group("spread").priority_class("low").grace(0).on(f"n{i}")
        apiserver.create(member.json())
    apiserver.create(make_pod("p").req(cpu="4").priority_class("high").json())
    late = apiserver.delay("DELETE", "/api/v1/namespaces/default/pods/m0", 0.5)
    replicas.append(Replica(apiserver, kubeconfig, fast_config(), "a", idle_seconds=IDLE).start())
    if marked_first:
        wait_for(lambda: apiserver.get("pods", "m1", "default") is None, timeout=15, interval=0.01)
        apiserver.mark_deleting("m0")
    wait_for(lambda: node_of(apiserver, "p"), timeout=15)
    assert late.remaining == 0, "the victim on the nominated node was deleted late"
    assert node_of(apiserver, "p") == "n0", "bound on its nomination"
    assert apiserver.get("pods", "m0", "default") is None and apiserver.get("pods", "m1", "default") is None


def test_a_pod_deleted_by_someone_else_wakes_the_pending_pod(
    apiserver: ApiServer, kubeconfig: Path, replicas: list[Replica]
) -> None:
    """A running pod removed at once (watch DELETED, no Terminating step) frees its room for the parked pod."""
    apiserver.create(make_node("n0").cap(cpu="4", memory="8Gi").json())
    apiserver.create(make_pod("running").req(cpu="4").on("n0").json())
    apiserver.create(make_pod("waiting").req(cpu="4").json())
    replica = Replica(apiserver, kubeconfig, fast_config(), "a", idle_seconds=IDLE).start()
    replicas.append(replica)

    def parked() -> bool:
        raw = apiserver.get("pods", "waiting", "default") or {}
        return any(c.get("reason") == "Unschedulable" for c in raw.get("status", {}).get("conditions", []))

    wait_for(parked)
    time.sleep(0.5)  # past the backoff: nothing but the deletion can wake the pod now
    apiserver.delete("pods", "running", "default")
    wait_for(lambda: node_of(apiserver, "waiting") == "n0", timeout=15)


RUNNING = {
    "phase": "Running",
    "startTime": "2026-11-22T02:00:00Z",
    "podIP": "10.0.0.7",
    "conditions": [
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-11-22T01:59:59Z"},
        {"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-22T02:00:01Z"},
    ],
    "containerStatuses": [{"name": "app", "ready": True, "restartCount": 0, "state": {"running": {}}}],
}


@pytest.mark.parametrize(
    ("status", "want_wake"),
    [
        pytest.param({"podIP": "10.0.0.8"}, False, id="a kubelet's IP and container report does not wake the loop"),
        pytest.param(
            {"conditions": [*RUNNING["conditions"][:1], {"type": "Ready", "status": "False"}]},
            False,
            id="a readiness flip does not wake the loop",
        ),
        pytest.param({"phase": "Succeeded"}, True, id="a pod that finished wakes the loop (its room is free)"),
        pytest.param(
            {"conditions": [{"type": "DisruptionTarget", "status": "True"}, *RUNNING["conditions"]]},
            True,
            id="a DisruptionTarget condition wakes the loop",
        ),
    ],
)
def test_status_report(apiserver: ApiServer, cluster: KubeCluster, status: dict[str, object], want_wake: bool) -> None:
    apiserver.create(make_pod("p").on("plain").json())
    running = apiserver.get("pods", "p", "default")
    assert running is not None
    running["status"] = dict(RUNNING)
    apiserver.apply(running)
    wait_for(lambda: (p := cluster.pods.get("default/p")) is not None and p.status.phase == "Running")
    time.sleep(0.1)
    cluster.changed.clear()
    reported = apiserver.get("pods", "p", "default")
    assert reported is not None
    reported["status"] = {**RUNNING, **status}
    apiserver.apply(reported)
    wait_for(lambda: cached_version(cluster) == reported_version(apiserver))
    if want_wake:
        wait_for(cluster.changed.is_set)
        return
    time.sleep(0.2)
    assert not cluster.changed.is_set()


def cached_version(cluster: KubeCluster) -> str | None:
    pod = cluster.pods.get("default/p")
    return pod.metadata.resource_version if pod is not None else None


def reported_version(apiserver: ApiServer) -> str | None:
    stored = apiserver.get("pods", "p", "default")
    return stored["metadata"]["resourceVersion"] if stored is not None else None


def test_unschedulable_message_does_not_wake(apiserver: ApiServer, cluster: KubeCluster) -> None:
    """A pending pod's PodScheduled=False reason and message are ours, for users: no pass reads them."""
    apiserver.create(make_pod("p").json())
    wait_for(lambda: cached_version(cluster) == reported_version(apiserver))
    for message in ("0/2 nodes are available", "waiting for 3 preempted pod(s)"):
        time.sleep(0.1)
        cluster.changed.clear()
        pending = apiserver.get("pods", "p", "default")
        assert pending is not None
        pending["status"] = {"conditions": [{"type": "PodScheduled", "status": "False", "message": message}]}
        apiserver.apply(pending)
        wait_for(lambda: cached_version(cluster) == reported_version(apiserver))
        time.sleep(0.2)
        assert not cluster.changed.is_set(), message
