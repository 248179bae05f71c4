"""The Kubernetes back end's PreBind for volumes against the loopback server, which runs no PV controller: the test
plays it (and a provisioner), to show what the Binding waits for and what gives it up."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kube.client import api_client
from scheduler.api.persistent_volume import PersistentVolume
from scheduler.api.persistent_volume_claim import (
    ANN_BIND_COMPLETED,
    ANN_BOUND_BY_CONTROLLER,
    ANN_SELECTED_NODE,
    PersistentVolumeClaim,
)
from scheduler.cluster.kube import KubeCluster
from scheduler.framework.storage import PodVolumes
from tests.apiserver import ApiServer
from tests.builders import make_claim, make_node, make_pod, make_volume
from tests.kube.stored import stored_pod
from tests.polling import wait_for

PV_PATH = "/api/v1/persistentvolumes/pv"
CLAIM_PATH = "/api/v1/namespaces/default/persistentvolumeclaims/data"
BINDING_PATH = "/api/v1/namespaces/default/pods/p/binding"


def kube_cluster(kubeconfig: Path, bind_timeout: float = 60.0) -> KubeCluster:
    kube = KubeCluster(
        api_client(kubeconfig, "scheduler"),
        identity="writer",
        request_timeout_seconds=1.0,
        volume_bind_timeout_seconds=bind_timeout,
    )
    kube.start()
    assert kube.wait_synced(10)
    return kube


@pytest.fixture
def cluster(apiserver: ApiServer, kubeconfig: Path) -> Iterator[KubeCluster]:
    apiserver.create(make_node("n0").cap(cpu="8", memory="8Gi").label("kubernetes.io/hostname", "n0").json())
    apiserver.create(make_pod("p").claim("data").json())
    kube = kube_cluster(kubeconfig)
    yield kube
    kube.stop()


def stored_volume(server: ApiServer, name: str = "pv") -> PersistentVolume:
    raw = server.get("persistentvolumes", name)
    assert raw is not None
    return PersistentVolume.model_validate(raw)


def stored_claim(server: ApiServer, name: str = "data") -> PersistentVolumeClaim:
    raw = server.get("persistentvolumeclaims", name, "default")
    assert raw is not None
    return PersistentVolumeClaim.model_validate(raw)


def bind_claim(server: ApiServer, volume: str = "pv") -> None:
    """What the PV controller does once a volume names the claim: the claim bound to it."""
    raw = server.get("persistentvolumeclaims", "data", "default")
    assert raw is not None
    raw["spec"]["volumeName"] = volume
    raw["metadata"].setdefault("annotations", {})[ANN_BIND_COMPLETED] = "yes"
    server.apply(raw)


def seen(cluster: KubeCluster, kind: str, key: str) -> bool:
    return cluster.sender.stored(kind, key) is not None


def both_seen(cluster: KubeCluster) -> bool:
    """The informers have the volume and the claim."""
    return seen(cluster, "persistentvolumes", "pv") and seen(cluster, "persistentvolumeclaims", "default/data")


def test_the_binding_waits_until_the_claim_is_bound_to_the_chosen_volume(
    apiserver: ApiServer, cluster: KubeCluster
) -> None:
    apiserver.create(make_volume("pv").local_to("n0").storage_class("local").json())
    apiserver.create(make_claim("data").storage_class("local").json())
    wait_for(lambda: both_seen(cluster))
    volume, claim, pod = stored_volume(apiserver), stored_claim(apiserver), stored_pod(apiserver, "p")
    cluster.bind_volumes(pod, "n0", PodVolumes(bindings=((claim, volume),)))
    cluster.bind(pod, "n0")
    objects = cluster.objects()
    shown = objects.persistent_volumes["pv"].spec.claim_ref
    assert shown is not None and (shown.name, shown.uid) == ("data", claim.metadata.uid), "claimed at once"
    assert objects.pods["default/p"].spec.node_name == "n0", "the pod holds its node meanwhile"
    assert cluster.objects().persistent_volumes["pv"] is objects.persistent_volumes["pv"], "the same object each pass"
    wait_for(lambda: stored_volume(apiserver).spec.claim_ref is not None)
    written = stored_volume(apiserver)
    assert written.spec.claim_ref is not None
    assert (written.spec.claim_ref.kind, written.spec.claim_ref.namespace) == ("PersistentVolumeClaim", "default")
    assert written.metadata.annotations[ANN_BOUND_BY_CONTROLLER] == "yes"
    time.sleep(0.5)
    assert not apiserver.requests_matching("POST", BINDING_PATH), "no Binding before the claim is bound"
    bind_claim(apiserver)
    wait_for(lambda: stored_pod(apiserver, "p").spec.node_name == "n0")


def test_a_claim_to_provision_is_annotated_and_its_binding_waits_for_the_provisioner(
    apiserver: ApiServer, cluster: KubeCluster
) -> None:
    apiserver.create(make_claim("data").storage_class("lazy").json())
    wait_for(lambda: seen(cluster, "persistentvolumeclaims", "default/data"))
    claim, pod = stored_claim(apiserver), stored_pod(apiserver, "p")
    cluster.bind_volumes(pod, "n0", PodVolumes(provisions=(claim,)))
    cluster.bind(pod, "n0")
    assert cluster.objects().persistent_volume_claims["default/data"].metadata.annotations[ANN_SELECTED_NODE] == "n0"
    wait_for(lambda: stored_claim(apiserver).metadata.annotations.get(ANN_SELECTED_NODE) == "n0")
    time.sleep(0.5)
    assert not apiserver.requests_matching("POST", BINDING_PATH), "no Binding before a volume is provisioned"
    apiserver.create(make_volume("pv").local_to("n0").storage_class("lazy").claimed_by("data").json())
    bind_claim(apiserver)
    wait_for(lambda: stored_pod(apiserver, "p").spec.node_name == "n0")


def test_a_provisioner_that_gives_up_gives_the_binding_up(apiserver: ApiServer, cluster: KubeCluster) -> None:
    """A provisioner that fails removes the selected node: the pod is not bound, and tried again later."""
    apiserver.create(make_claim("data").storage_class("lazy").json())
    wait_for(lambda: seen(cluster, "persistentvolumeclaims", "default/data"))
    cluster.bind_volumes(stored_pod(apiserver, "p"), "n0", PodVolumes(provisions=(stored_claim(apiserver),)))
    cluster.bind(stored_pod(apiserver, "p"), "n0")
    wait_for(lambda: ANN_SELECTED_NODE in stored_claim(apiserver).metadata.annotations)
    raw = apiserver.get("persistentvolumeclaims", "data", "default")
    assert raw is not None
    raw["metadata"]["annotations"] = {"example.com/other": "x"}
    apiserver.apply(raw)
    wait_for(lambda: cluster.ledger.in_flight() == 0)
    [refusal] = cluster.ledger.refusals()
    assert (refusal.operation, refusal.unit) == ("bind_volumes", "default/p")
    assert refusal.answer == 'binding volumes: provisioning failed for PVC "data"'
    assert not apiserver.requests_matching("POST", BINDING_PATH)
    assert cluster.objects().pods["default/p"].spec.node_name is None, "pending again"
    wait_for(lambda: apiserver.list("events", "default", group="events.k8s.io"))
    [event] = apiserver.list("events", "default", group="events.k8s.io")
    assert (event["reason"], event["note"]) == (
        "FailedScheduling",
        'running PreBind plugin "VolumeBinding": binding volumes: provisioning failed for PVC "data"',
    )


def test_claims_not_bound_in_time_give_the_binding_up(apiserver: ApiServer, kubeconfig: Path) -> None:
    apiserver.create(make_node("n0").cap(cpu="8", memory="8Gi").json())
    apiserver.create(make_pod("p").claim("data").json())
    apiserver.create(make_claim("data").storage_class("lazy").json())
    kube = kube_cluster(kubeconfig, bind_timeout=0.5)
    try:
        wait_for(lambda: seen(kube, "persistentvolumeclaims", "default/data"))
        kube.bind_volumes(stored_pod(apiserver, "p"), "n0", PodVolumes(provisions=(stored_claim(apiserver),)))
        kube.bind(stored_pod(apiserver, "p"), "n0")
        wait_for(lambda: kube.ledger.in_flight() == 0)
        assert [r.answer for r in kube.ledger.refusals()] == ["binding volumes: context deadline exceeded"]
        assert not apiserver.requests_matching("POST", BINDING_PATH)
    finally:
        kube.stop()


def test_a_volume_another_claim_took_meanwhile_is_refused_with_the_servers_answer(
    apiserver: ApiServer, cluster: KubeCluster
) -> None:
    apiserver.create(make_volume("pv").local_to("n0").storage_class("local").json())
    apiserver.create(make_claim("data").storage_class("local").json())
    wait_for(lambda: both_seen(cluster))
    volume, claim = stored_volume(apiserver), stored_claim(apiserver)
    raw = apiserver.get("persistentvolumes", "pv")
    assert raw is not None
    raw["spec"]["claimRef"] = {"kind": "PersistentVolumeClaim", "namespace": "default", "name": "other"}
    apiserver.apply(raw)
    cluster.bind_volumes(stored_pod(apiserver, "p"), "n0", PodVolumes(bindings=((claim, volume),)))
    cluster.bind(stored_pod(apiserver, "p"), "n0")
    wait_for(lambda: cluster.ledger.in_flight() == 0)
    [refusal] = cluster.ledger.refusals()
    assert refusal.answer.startswith('409 Conflict: Operation cannot be fulfilled on persistentvolumes "pv"')
    assert len(apiserver.requests_matching("PATCH", PV_PATH)) == 1, "not sent again: the newer volume is taken"
    ref = stored_volume(apiserver).spec.claim_ref
    assert ref is not None and ref.name == "other"
    assert not apiserver.requests_matching("POST", BINDING_PATH)


def test_a_volume_changed_meanwhile_but_still_free_is_written_again(apiserver: ApiServer, cluster: KubeCluster) -> None:
    apiserver.create(make_volume("pv").local_to("n0").storage_class("local").json())
    apiserver.create(make_claim("data").storage_class("local").json())
    wait_for(lambda: both_seen(cluster))
    volume, claim = stored_volume(apiserver), stored_claim(apiserver)
    raw = apiserver.get("persistentvolumes", "pv")
    assert raw is not None
    raw["metadata"]["labels"] = {"example.com/touched": "yes"}
    apiserver.apply(raw)
    cluster.bind_volumes(stored_pod(apiserver, "p"), "n0", PodVolumes(bindings=((claim, volume),)))
    cluster.bind(stored_pod(apiserver, "p"), "n0")
    wait_for(lambda: stored_volume(apiserver).spec.claim_ref is not None)
    assert len(apiserver.requests_matching("PATCH", PV_PATH)) == 2, "a 409, then the newer volume written"
    assert stored_volume(apiserver).metadata.labels == {"example.com/touched": "yes"}
    bind_claim(apiserver)
    wait_for(lambda: stored_pod(apiserver, "p").spec.node_name == "n0")


def test_stopping_ends_the_wait_at_once_and_sends_no_binding(apiserver: ApiServer, kubeconfig: Path) -> None:
    """The next leader decides the pod anew (its claim names its node by then): this one does not hold its
    shutdown for a provisioner."""
    apiserver.create(make_node("n0").cap(cpu="8", memory="8Gi").json())
    apiserver.create(make_pod("p").claim("data").json())
    apiserver.create(make_claim("data").storage_class("lazy").json())
    kube = kube_cluster(kubeconfig)
    wait_for(lambda: seen(kube, "persistentvolumeclaims", "default/data"))
    kube.bind_volumes(stored_pod(apiserver, "p"), "n0", PodVolumes(provisions=(stored_claim(apiserver),)))
    kube.bind(stored_pod(apiserver, "p"), "n0")
    wait_for(lambda: ANN_SELECTED_NODE in stored_claim(apiserver).metadata.annotations)
    started = time.monotonic()
    stopped = kube.stop(deadline=started + 30)
    assert time.monotonic() - started < 10, "not held until the bind timeout (60 s)"
    assert stopped.unfinished == {}
    assert not apiserver.requests_matching("POST", BINDING_PATH)
