"""Volumes on the real API server, beside kube-scheduler 1.36.2: the PV controller binds claims to local volumes, and
each scheduler, given the same pods, places the one whose volume fits on that volume's node and says the same of
those whose claim is missing or whose volume fits no node."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial

import pytest

from tests.e2e.control_plane import ControlPlane, Json, wait_for
from tests.e2e.differential.kube_scheduler import KubeScheduler
from tests.e2e.differential.live import KUBE_SCHEDULER_NAME
from tests.e2e.objects import SCHEDULER_NAME, Pool


@pytest.fixture(scope="module")
def kube_scheduler(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeScheduler]:
    started = KubeScheduler(control_plane, tmp_path_factory.mktemp("kube-scheduler-volumes")).start()
    yield started
    started.stop()


def local_volume(name: str, storage_class: str, hostname: str) -> Json:
    affinity = {"key": "kubernetes.io/hostname", "operator": "In", "values": [hostname]}
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Delete",
            "storageClassName": storage_class,
            "local": {"path": "/mnt/disk"},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [affinity]}]}},
        },
    }


def claim(pool: Pool, name: str, storage_class: str, volume: str) -> Json:
    spec = {
        "accessModes": ["ReadWriteOnce"],
        "storageClassName": storage_class,
        "volumeName": volume,
        "resources": {"requests": {"storage": "1Gi"}},
    }
    meta = {"name": name, "namespace": pool.namespace}
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta, "spec": spec}


def pod_with(pool: Pool, name: str, claim_name: str, scheduler: str) -> Json:
    pod = pool.pod(name, scheduler_name=scheduler)
    pod["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim_name}}]
    return pod


def unschedulable(pool: Pool, name: str) -> str | None:
    pod = pool.read_pod(name) or {}
    conditions: list[Json] = pod.get("status", {}).get("conditions", [])
    condition = next((c for c in conditions if c["type"] == "PodScheduled"), {})
    message = condition.get("message")
    return message if condition.get("reason") == "Unschedulable" and isinstance(message, str) else None


def fit_error(message: str) -> str:
    """`0/N nodes are available: REASONS.` of a PodScheduled message: what follows differs between the two
    schedulers (their preemption's words)."""
    return message.split(". ")[0].rstrip(".")


def test_pods_go_to_their_local_volumes_node_and_say_why_not_as_kube_scheduler_does(
    pool: Pool, kube_scheduler: KubeScheduler
) -> None:
    nodes = pool.add_nodes(2)
    storage_class = pool.cluster_object(
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": f"{pool.name}-local"},
            "provisioner": "kubernetes.io/no-provisioner",
        }
    )["metadata"]["name"]
    schedulers = {"phalanx": SCHEDULER_NAME, "kube": KUBE_SCHEDULER_NAME}
    for tag in schedulers:
        pool.cluster_object(local_volume(f"{pool.name}-{tag}-near", storage_class, nodes[1]))
        pool.cluster_object(local_volume(f"{pool.name}-{tag}-far", storage_class, "no-such-node"))
        pool.create(
            claim(pool, f"{tag}-near", storage_class, f"{pool.name}-{tag}-near"),
            claim(pool, f"{tag}-far", storage_class, f"{pool.name}-{tag}-far"),
        )

    def bound_claims() -> bool:
        claims = pool.api.items(f"/api/v1/namespaces/{pool.namespace}/persistentvolumeclaims")
        return len(claims) == 4 and all(c.get("status", {}).get("phase") == "Bound" for c in claims)

    wait_for(bound_claims, what="the PV controller to bind the claims")
    for tag, scheduler in schedulers.items():
        pool.create(
            pod_with(pool, f"{tag}-db", f"{tag}-near", scheduler),
            pod_with(pool, f"{tag}-far", f"{tag}-far", scheduler),
            pod_with(pool, f"{tag}-orphan", "nope", scheduler),
        )
    placed = pool.wait_bound(["phalanx-db", "kube-db"])
    assert placed == {"phalanx-db": nodes[1], "kube-db": nodes[1]}
    said = {}
    for name in ("phalanx-far", "kube-far", "phalanx-orphan", "kube-orphan"):
        said[name] = fit_error(wait_for(partial(unschedulable, pool, name), what=f"{name} unschedulable"))
    assert said["phalanx-far"] == said["kube-far"]
    assert "2 node(s) didn't match PersistentVolume's node affinity" in said["phalanx-far"]
    assert said["phalanx-orphan"] == said["kube-orphan"]
    assert said["phalanx-orphan"].endswith('nodes are available: persistentvolumeclaim "nope" not found')
