"""KubeCluster's writes against the loopback server: guarded, idempotent, and refused without the Lease."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kube.client import api_client
from scheduler.api.meta import Condition
from scheduler.api.pod_group import PodGroup
from scheduler.cluster.kube import KubeCluster, NotLeader
from tests.apiserver import ApiServer
from tests.builders import make_node, make_pod, make_podgroup
from tests.kube.replica import GATE, PG_GROUP
from tests.kube.stored import stored_pod
from tests.polling import wait_for

START_ANNOTATION = "scheduling.phalanx.dev/last-start-timestamp"


@pytest.fixture
def cluster(apiserver: ApiServer, kubeconfig: Path) -> Iterator[KubeCluster]:
    apiserver.create(make_node("n0").cap(cpu="8", memory="8Gi").json())
    kube = KubeCluster(api_client(kubeconfig, "scheduler"), identity="writer", request_timeout_seconds=1.0)
    kube.start()
    assert kube.wait_synced(10)
    yield kube
    kube.stop()


def test_gate_removal_keeps_a_concurrent_change(apiserver: ApiServer, cluster: KubeCluster) -> None:
    apiserver.create(make_pod("p").gate("example.com/foreign", GATE, "example.com/other").json())
    wait_for(lambda: "default/p" in cluster.objects().pods)
    stale = stored_pod(apiserver, "p")
    raw = apiserver.get("pods", "p", "default")
    assert raw is not None
    raw["spec"]["schedulingGates"] = [{"name": GATE}, {"name": "example.com/other"}]
    apiserver.apply(raw)
    cluster.remove_scheduling_gate(stale, GATE)
    assert GATE not in [g.name for g in cluster.objects().pods["default/p"].spec.scheduling_gates], "assumed at once"
    wait_for(lambda: [g.name for g in stored_pod(apiserver, "p").spec.scheduling_gates] == ["example.com/other"])
    patches = apiserver.requests_matching("PATCH", "/api/v1/namespaces/default/pods/p")
    assert len(patches) == 2, "the first patch's test op failed (422), the retry used the fresh gates"


def test_removing_the_last_gate_drops_the_key(apiserver: ApiServer, cluster: KubeCluster) -> None:
    apiserver.create(make_pod("p").gate(GATE).json())
    cluster.remove_scheduling_gate(stored_pod(apiserver, "p"), GATE)
    wait_for(lambda: "schedulingGates" not in (apiserver.get("pods", "p", "default") or {"spec": {}})["spec"])


def test_delete_spares_a_replacement_with_the_same_name(apiserver: ApiServer, cluster: KubeCluster) -> None:
    apiserver.create(make_pod("victim").on("n0").json())
    old = stored_pod(apiserver, "victim")
    apiserver.delete("pods", "victim", "default")
    apiserver.create(make_pod("victim").on("n0").json())
    cluster.delete_pod(old, None)
    wait_for(lambda: apiserver.requests_matching("DELETE", "/api/v1/namespaces/default/pods/victim"))
    cluster.stop()
    assert stored_pod(apiserver, "victim").metadata.uid != old.metadata.uid
    assert stored_pod(apiserver, "victim").metadata.deletion_timestamp is None


def test_delete_uses_the_grace_period_and_tolerates_gone(apiserver: ApiServer, cluster: KubeCluster) -> None:
    apiserver.hold_terminating = True
    apiserver.create(make_pod("victim").on("n0").grace(7).json())
    victim = stored_pod(apiserver, "victim")
    wait_for(lambda: "default/victim" in cluster.objects().pods)
    cluster.delete_pod(victim, None)
    assert cluster.objects().pods["default/victim"].metadata.deletion_timestamp is not None, "shown at once"
    wait_for(lambda: stored_pod(apiserver, "victim").metadata.deletion_grace_period_seconds == 7)
    apiserver.finish_terminating()
    cluster.delete_pod(victim, None)
    wait_for(lambda: len(apiserver.requests_matching("DELETE", "/api/v1/namespaces/default/pods/victim")) == 2)
    wait_for(lambda: "default/victim" not in cluster.objects().pods)


def test_pod_condition_is_written_once(apiserver: ApiServer, cluster: KubeCluster) -> None:
    apiserver.create(make_pod("p").json())
    condition = Condition(type="PodScheduled", status="False", reason="Unschedulable", message="0/1 nodes fit")
    cluster.set_pod_condition(stored_pod(apiserver, "p"), condition)
    cluster.set_pod_condition(stored_pod(apiserver, "p"), condition)
    wait_for(lambda: stored_pod(apiserver, "p").condition("PodScheduled"))
    cluster.set_pod_condition(stored_pod(apiserver, "p"), condition)
    wait_for(lambda: "default/p" in cluster.objects().pods)
    cluster.stop()
    assert len(apiserver.requests_matching("PATCH", "/api/v1/namespaces/default/pods/p/status")) == 1
    written = stored_pod(apiserver, "p").condition("PodScheduled")
    assert written is not None
    assert (written.reason, written.message) == ("Unschedulable", "0/1 nodes fit")


def test_nomination_is_set_and_cleared(apiserver: ApiServer, cluster: KubeCluster) -> None:
    apiserver.create(make_pod("p").json())
    wait_for(lambda: "default/p" in cluster.objects().pods)
    cluster.set_nominated_node(stored_pod(apiserver, "p"), "n0")
    assert cluster.objects().pods["default/p"].status.nominated_node_name == "n0", "shown at once"
    wait_for(lambda: stored_pod(apiserver, "p").status.nominated_node_name == "n0")
    cluster.set_nominated_node(stored_pod(apiserver, "p"), None)
    wait_for(lambda: stored_pod(apiserver, "p").status.nominated_node_name is None)


def test_pod_group_conditions_merge_and_start_time_is_annotated(apiserver: ApiServer, cluster: KubeCluster) -> None:
    apiserver.create(make_podgroup("g").gang(2).json())

    def group() -> PodGroup:
        raw = apiserver.get("podgroups", "g", "default", group=PG_GROUP)
        assert raw is not None
        return PodGroup.model_validate(raw)

    scheduled = Condition(type="PodGroupScheduled", status="False", reason="Unschedulable", message="1/2 fit")
    target = Condition(type="DisruptionTarget", status="True", reason="PreemptionByScheduler", message="x")
    cluster.set_pod_group_condition(group(), scheduled)
    cluster.set_pod_group_condition(group(), target)
    cluster.set_pod_group_condition(group(), target)
    wait_for(lambda: [c.type for c in group().status.conditions] == ["PodGroupScheduled", "DisruptionTarget"])
    cluster.annotate_pod_group(group(), START_ANNOTATION, "2026-11-22T05:00:00Z")
    wait_for(lambda: group().metadata.annotations.get(START_ANNOTATION) == "2026-11-22T05:00:00Z")
    assert [c.type for c in group().status.conditions] == ["PodGroupScheduled", "DisruptionTarget"]
    assert (
        len(
            apiserver.requests_matching("PATCH", "/apis/scheduling.phalanx.dev/v1alpha1/namespaces/default/podgroups/g")
        )
        == 3
    )


def test_a_binding_holds_its_node_until_the_watch_shows_it(apiserver: ApiServer, cluster: KubeCluster) -> None:
    """The pass after a Binding the informer does not show yet must not give the same room away again: the
    view shows the pod on its node from the moment it is bound (kube-scheduler's assume)."""
    apiserver.create(make_pod("p").json())
    wait_for(lambda: "default/p" in cluster.objects().pods)
    blind = apiserver.fail("GET", "/api/v1/pods", 500, times=10_000)
    apiserver.restart(compact=False)  # the watch drops, and cannot list again
    cluster.bind(stored_pod(apiserver, "p"), "n0")
    assert cluster.objects().pods["default/p"].spec.node_name == "n0", "assumed at once"
    wait_for(lambda: stored_pod(apiserver, "p").spec.node_name == "n0")
    assert cluster.pods.get("default/p").spec.node_name is None, "the watch has not shown the binding"  # type: ignore[union-attr]
    assert cluster.objects().pods["default/p"].spec.node_name == "n0", "still shown on its node"
    blind.remaining = 0


def test_binding_a_pod_bound_elsewhere_assumes_where_it_went(apiserver: ApiServer, cluster: KubeCluster) -> None:
    apiserver.create(make_node("n1").cap(cpu="8", memory="8Gi").json())
    apiserver.create(make_pod("p").json())
    wait_for(lambda: "default/p" in cluster.objects().pods)
    unbound = stored_pod(apiserver, "p")
    blind = apiserver.fail("GET", "/api/v1/pods", 500, times=10_000)
    apiserver.restart(compact=False)
    raw = apiserver.get("pods", "p", "default")
    assert raw is not None
    raw["spec"]["nodeName"] = "n1"
    apiserver.apply(raw)
    cluster.bind(unbound, "n0")
    wait_for(lambda: apiserver.requests_matching("POST", "/api/v1/namespaces/default/pods/p/binding"))
    wait_for(lambda: cluster.objects().pods["default/p"].spec.node_name == "n1")
    assert cluster.pods.get("default/p").spec.node_name is None, "the watch has not shown the binding"  # type: ignore[union-attr]
    blind.remaining = 0


def test_writes_are_refused_without_the_lease(apiserver: ApiServer, kubeconfig: Path) -> None:
    apiserver.create(make_pod("p").json())
    kube = KubeCluster(api_client(kubeconfig, "scheduler"), may_write=lambda: False)
    with pytest.raises(NotLeader):
        kube.bind(stored_pod(apiserver, "p"), "n0")
    with pytest.raises(NotLeader):
        kube.delete_pod(stored_pod(apiserver, "p"), 0)
    kube.record_event(stored_pod(apiserver, "p"), "Normal", "Scheduled", "x")
    assert not [r for r in apiserver.requests if r.method != "GET"]


def test_victim_is_not_deleted_when_its_disruption_condition_is_refused(
    apiserver: ApiServer, cluster: KubeCluster
) -> None:
    apiserver.create(make_pod("victim").on("n0").json())
    wait_for(lambda: "default/victim" in cluster.objects().pods)
    refused = apiserver.fail("PATCH", "/api/v1/namespaces/default/pods/victim/status", 422, times=10_000)
    victim = stored_pod(apiserver, "victim")
    target = Condition(type="DisruptionTarget", status="True", reason="PreemptionByScheduler", message="x")
    cluster.changed.clear()
    cluster.set_pod_condition(victim, target)
    cluster.delete_pod(victim, None)
    wait_for(cluster.changed.is_set)
    wait_for(lambda: cluster.objects().pods["default/victim"].metadata.deletion_timestamp is None)
    refused.remaining = 0
    assert not apiserver.requests_matching("DELETE", "/api/v1/namespaces/default/pods/victim")
    assert stored_pod(apiserver, "victim").metadata.deletion_timestamp is None


def test_an_unschedulable_condition_queued_before_the_binding_is_not_written(
    apiserver: ApiServer, cluster: KubeCluster
) -> None:
    """The writer thread was busy (a slow write for another pod) while a later pass bound the pod: the
    PodScheduled=False it still held is stale, and written after the Binding it would turn the bound
    pod's PodScheduled condition back to False and send a FailedScheduling Event for a scheduled pod."""
    apiserver.create(make_pod("busy").json())
    apiserver.create(make_pod("p").json())
    wait_for(lambda: {"default/busy", "default/p"} <= set(cluster.objects().pods))
    apiserver.hang("PATCH", "/api/v1/namespaces/default/pods/busy/status", seconds=1.5, times=1)
    unschedulable = Condition(type="PodScheduled", status="False", reason="Unschedulable", message="0/1 nodes fit")
    cluster.set_pod_condition(stored_pod(apiserver, "busy"), unschedulable)
    cluster.set_pod_condition(stored_pod(apiserver, "p"), unschedulable)
    cluster.bind(stored_pod(apiserver, "p"), "n0")
    wait_for(lambda: stored_pod(apiserver, "p").spec.node_name == "n0")
    wait_for(lambda: stored_pod(apiserver, "busy").condition("PodScheduled") is not None, timeout=10)
    cluster.stop()
    scheduled = stored_pod(apiserver, "p").condition("PodScheduled")
    assert scheduled is not None
    assert scheduled.status == "True"
    events = apiserver.list("events", "default", group="events.k8s.io")
    assert [e["reason"] for e in events if e["regarding"]["name"] == "p"] == ["Scheduled"]
