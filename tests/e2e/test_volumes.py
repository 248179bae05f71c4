"""Volumes on the real API server, beside kube-scheduler 1.36.2: the PV controller binds claims to local volumes, and
each scheduler, given the same pods, places the one whose volume fits on that volume's node and says the same of
those whose claim is missing or whose volume fits no node.

Claims of a WaitForFirstConsumer class are bound by the schedulers (VolumeBinding's PreBind): each binds its claim
to the local volume that fits and its pod to that volume's node, after the PV controller finished the binding. A
claim of a class with a provisioner is annotated with the node chosen for it; no provisioner runs on this control
plane, so both schedulers wait, their pods unbound, until the test provisions as an external provisioner would.
"""

from __future__ import annotations

import time
from functools import partial

from tests.e2e.control_plane import Json
from tests.e2e.differential.kube_scheduler import KubeScheduler
from tests.e2e.differential.live import KUBE_SCHEDULER_NAME
from tests.e2e.objects import SCHEDULER_NAME, Pool
from tests.polling import wait_for

SELECTED_NODE = "volume.kubernetes.io/selected-node"
FOR = "e2e.phalanx.dev/for"
"""A volume's label naming the scheduler whose claim may take it (the claims select on it)."""


def local_volume(
    name: str, storage_class: str, hostname: str, size: str = "1Gi", labels: dict[str, str] | None = None
) -> Json:
    affinity = {"key": "kubernetes.io/hostname", "operator": "In", "values": [hostname]}
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {
            "capacity": {"storage": size},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Delete",
            "storageClassName": storage_class,
            "local": {"path": "/mnt/disk"},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [affinity]}]}},
        },
    }


def claim(
    pool: Pool,
    name: str,
    storage_class: str,
    volume: str | None = None,
    size: str = "1Gi",
    selector: dict[str, str] | None = None,
) -> Json:
    spec: Json = {
        "accessModes": ["ReadWriteOnce"],
        "storageClassName": storage_class,
        "resources": {"requests": {"storage": size}},
    }
    if volume is not None:
        spec["volumeName"] = volume
    if selector is not None:
        spec["selector"] = {"matchLabels": selector}
    meta = {"name": name, "namespace": pool.namespace}
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta, "spec": spec}


def storage_class(pool: Pool, suffix: str, provisioner: str) -> str:
    made = pool.cluster_object(
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": f"{pool.name}-{suffix}"},
            "provisioner": provisioner,
            "volumeBindingMode": "WaitForFirstConsumer",
        }
    )
    name: str = made["metadata"]["name"]
    return name


def read_claim(pool: Pool, name: str) -> Json:
    found = pool.api.get(f"/api/v1/namespaces/{pool.namespace}/persistentvolumeclaims/{name}")
    assert found is not None, f"claim {name}"
    return found


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


def test_claims_of_a_wait_for_first_consumer_class_are_bound_to_local_volumes_as_kube_scheduler_binds_them(
    pool: Pool, kube_scheduler: KubeScheduler
) -> None:
    """Each scheduler's claim selects its own volumes: one on the first node, too small, one on the second that
    fits. Both bind the claim to the second (the PV controller completes it), then the pod there; a claim no volume
    fits is said the same by both."""
    nodes = pool.add_nodes(2)
    local = storage_class(pool, "wffc", "kubernetes.io/no-provisioner")
    schedulers = {"phalanx": SCHEDULER_NAME, "kube": KUBE_SCHEDULER_NAME}
    for tag in schedulers:
        mine = {FOR: f"{pool.name}-{tag}"}
        pool.cluster_object(local_volume(f"{pool.name}-{tag}-small", local, nodes[0], size="500Mi", labels=mine))
        pool.cluster_object(local_volume(f"{pool.name}-{tag}-fits", local, nodes[1], labels=mine))
        pool.create(
            claim(pool, f"{tag}-data", local, selector=mine),
            claim(pool, f"{tag}-huge", local, size="5Gi", selector=mine),
        )
    for tag, scheduler in schedulers.items():
        pool.create(
            pod_with(pool, f"{tag}-db", f"{tag}-data", scheduler),
            pod_with(pool, f"{tag}-huge", f"{tag}-huge", scheduler),
        )
    placed = pool.wait_bound(["phalanx-db", "kube-db"])
    assert placed == {"phalanx-db": nodes[1], "kube-db": nodes[1]}
    for tag in schedulers:
        data = read_claim(pool, f"{tag}-data")
        assert (data["spec"].get("volumeName"), data["status"].get("phase")) == (f"{pool.name}-{tag}-fits", "Bound")
        volume = pool.api.get(f"/api/v1/persistentvolumes/{pool.name}-{tag}-fits")
        assert volume is not None
        assert volume["spec"]["claimRef"]["name"] == f"{tag}-data"
        assert volume["metadata"]["annotations"]["pv.kubernetes.io/bound-by-controller"] == "yes"
    said = {
        name: fit_error(wait_for(partial(unschedulable, pool, name), what=f"{name} unschedulable"))
        for name in ("phalanx-huge", "kube-huge")
    }
    assert said["phalanx-huge"] == said["kube-huge"]
    assert "2 node(s) didn't find available persistent volumes to bind" in said["phalanx-huge"]


def test_a_claim_to_provision_is_given_a_node_and_its_pod_waits_for_the_volume_as_kube_scheduler_does(
    pool: Pool, kube_scheduler: KubeScheduler
) -> None:
    """Both schedulers annotate the claim with the node they chose and hold the pod's Binding while nothing
    provisions (kube-scheduler waits in PreBind, up to its bind timeout); once a volume is made on that node and the
    PV controller binds the claim to it, each binds its pod there."""
    nodes = pool.add_nodes(2)
    provisioner = f"example.com/{pool.name}"
    lazy = storage_class(pool, "lazy", provisioner)
    schedulers = {"phalanx": SCHEDULER_NAME, "kube": KUBE_SCHEDULER_NAME}
    for tag, scheduler in schedulers.items():
        pool.create(claim(pool, f"{tag}-scratch", lazy))
        pool.create(pod_with(pool, f"{tag}-job", f"{tag}-scratch", scheduler))

    def selected(tag: str) -> str | None:
        node: str | None = read_claim(pool, f"{tag}-scratch")["metadata"].get("annotations", {}).get(SELECTED_NODE)
        return node

    chosen = {tag: wait_for(partial(selected, tag), what=f"{tag}'s claim to name its node") for tag in schedulers}
    assert set(chosen.values()) <= set(nodes)
    time.sleep(5)
    assert pool.bound(["phalanx-job", "kube-job"]) == {}, "both wait for the volume to be provisioned"
    assert [unschedulable(pool, f"{tag}-job") for tag in schedulers] == [None, None], "and neither says it fits nowhere"
    for tag in schedulers:
        made = read_claim(pool, f"{tag}-scratch")
        name = f"{pool.name}-{tag}-provisioned"
        volume = local_volume(name, lazy, chosen[tag])
        volume["spec"]["claimRef"] = {
            "kind": "PersistentVolumeClaim",
            "namespace": pool.namespace,
            "name": f"{tag}-scratch",
            "uid": made["metadata"]["uid"],
        }
        volume["metadata"]["annotations"] = {"pv.kubernetes.io/provisioned-by": provisioner}
        pool.cluster_object(volume)
    placed = pool.wait_bound(["phalanx-job", "kube-job"], timeout=60)
    assert placed == {"phalanx-job": chosen["phalanx"], "kube-job": chosen["kube"]}
