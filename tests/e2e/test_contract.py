"""One contract for both back ends: every `Cluster` call answers the same on the memory back end and on the
Kubernetes back end against the real API server.

Each case is set up once on the real server; the Kubernetes back end (`KubeCluster`, admin credentials) reads
it, and a memory back end is built from exactly the objects that view shows (as `phalanx simulate` reads a
dump). The same call is then made on both, and what each shows afterwards (its `objects()` once the writes in
flight have landed and the informer shows them) and what each refused (raised as `WriteRefused` by the memory
back end, in the ledger of the Kubernetes one) must be the same. The cases include a Binding of a pod already
bound, a write the server refuses, a pod that vanished, and a write made from a stale resourceVersion.

ResourceClaims are allocated and reserved by DynamicResources' PreBind (`allocate_claims`), before the Binding, to
devices the contract's nodes publish (`tests/devices.py`); the allocations are written here as the plugin makes
them. Once a pod that held a claim is gone, the real control plane's resource claim controller removes its
reservation and deallocates the claim, which lets the next case delete it.

Volumes are bound by the PV controller of the real control plane's kube-controller-manager, and by the memory back
end's own; nothing provisions on the real server, so the test provisions there as an external provisioner would
(a volume for the claim, once it names its node), and the memory back end's provisioner must make the same.

The pods name a scheduler nobody runs, so the suite's scheduler leaves them alone.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import pytest

from kube.client import api_client
from kube.informer import LIST_PAGE
from scheduler.api.meta import Condition
from scheduler.api.persistent_volume import ObjectReference, PersistentVolume
from scheduler.api.persistent_volume_claim import (
    ANN_BIND_COMPLETED,
    ANN_BOUND_BY_CONTROLLER,
    ANN_SELECTED_NODE,
    PersistentVolumeClaim,
)
from scheduler.api.pod import POD_GROUP_LABEL, Pod
from scheduler.api.pod_group import PodGroup
from scheduler.api.resource_claim import (
    AllocationResult,
    DeviceAllocationResult,
    DeviceRequestAllocationResult,
    ResourceClaim,
    ResourceClaimConsumerReference,
)
from scheduler.cluster.kube import KubeCluster
from scheduler.cluster.kube.calls import CLAIM_FINALIZER, REPORTING_CONTROLLER
from scheduler.cluster.memory import MemoryCluster
from scheduler.framework.cluster import Cluster, ClusterObjects, WriteRefused
from scheduler.framework.devices import ClaimWrite
from scheduler.framework.storage import PodVolumes
from scheduler.plugins.dynamic_resources.inventory import node_name_selector
from tests.devices import DRIVER, RESOURCE, claim_spec, device_class, gpu_slice, model_is, resource_claim
from tests.e2e.control_plane import ControlPlane, Json, collection_path, object_path, plural
from tests.e2e.objects import GATE, PHALANX
from tests.e2e.stack import Stack
from tests.polling import wait_for

NAMESPACE = "contract"
NODES = ("contract-n0", "contract-n1")
FOREIGN_GATE = "example.com/foreign"
ANNOTATION = "scheduling.phalanx.dev/last-start-timestamp"
UNSCHEDULABLE = Condition(
    type="PodScheduled", status="False", reason="Unschedulable", message="0/2 nodes are available"
)
WRITTEN = ("PodScheduled", "DisruptionTarget")
"""The Pod conditions the scheduler writes (the API server adds SchedulingGated itself)."""
SCHEDULED = Condition(type="PodGroupScheduled", status="False", reason="Unschedulable", message="gang needs 2")
LOCAL = "contract-local"
"""A WaitForFirstConsumer class of volumes made by hand."""
LAZY = "contract-lazy"
"""A WaitForFirstConsumer class whose provisioner is the test (on the real server)."""
PROVISIONER = "contract.example.com"
CLAIM_ANNOTATIONS = (ANN_SELECTED_NODE, ANN_BIND_COMPLETED, ANN_BOUND_BY_CONTROLLER)
"""The claim annotations the scheduler and the PV controller write (not the provisioner's own)."""
GPU = "contract-gpu"
"""The DeviceClass of the contract's ResourceClaims: every device of `DRIVER`; each node publishes two L4s."""


def pod(
    name: str,
    node: str | None = None,
    gates: tuple[str, ...] = (),
    grace: int | None = None,
    claim: str | None = None,
    member_of: str | None = None,
    device_claim: str | None = None,
) -> Json:
    spec: Json = {"schedulerName": "contract", "containers": [{"name": "c", "image": "busybox"}]}
    if node:
        spec["nodeName"] = node
    if gates:
        spec["schedulingGates"] = [{"name": g} for g in gates]
    if grace is not None:
        spec["terminationGracePeriodSeconds"] = grace
    if claim is not None:
        spec["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
    if device_claim is not None:  # its container uses the ResourceClaim, as `gpu`
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimName": device_claim}]
        spec["containers"][0]["resources"] = {"claims": [{"name": "gpu"}]}
    metadata: Json = {"name": name, "namespace": NAMESPACE}
    if member_of is not None:
        metadata["labels"] = {POD_GROUP_LABEL: member_of}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def claim(name: str, storage_class: str) -> Json:
    spec = {
        "accessModes": ["ReadWriteOnce"],
        "storageClassName": storage_class,
        "resources": {"requests": {"storage": "1Gi"}},
    }
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": spec,
    }


def node_affinity(node: str) -> Json:
    expression = {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}
    return {"required": {"nodeSelectorTerms": [{"matchExpressions": [expression]}]}}


def volume(name: str, node: str) -> Json:
    spec = {
        "capacity": {"storage": "1Gi"},
        "accessModes": ["ReadWriteOnce"],
        "persistentVolumeReclaimPolicy": "Retain",
        "storageClassName": LOCAL,
        "local": {"path": "/mnt/disk"},
        "nodeAffinity": node_affinity(node),
    }
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name}, "spec": spec}


def gpu_claim(name: str) -> Json:
    """A ResourceClaim for one L4 of the class `GPU` (request `gpu`)."""
    return resource_claim(name, NAMESPACE, claim_spec(GPU, [model_is("l4")]))


def group(name: str) -> Json:
    return {
        "apiVersion": PHALANX,
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}},
    }


class World:
    """What happens to the cluster outside the scheduler, on either back end."""

    def vanish(self, name: str) -> None: ...

    def annotate_group(self, name: str, key: str, value: str) -> None: ...

    def claim_volume(self, name: str, claim_name: str) -> None:
        """A user pre-binds the volume to another claim."""

    def provision(self, claim_name: str, node: str) -> None:
        """An external provisioner makes a volume for the claim once the claim names its node."""

    def allocate(self, claim_name: str, node: str, device: str, pod_name: str) -> None:
        """Another scheduler allocates the ResourceClaim to `device` of the node's pool and reserves it for a pod."""

    def delete_claim(self, name: str) -> None:
        """A user deletes the ResourceClaim (not allocated: it goes at once)."""


@dataclass(frozen=True, slots=True)
class Case:
    objects: tuple[Json, ...]
    act: Callable[[Cluster, ClusterObjects, World], None]
    look: tuple[str, ...]
    """The objects compared afterwards: `pods/<name>`, `podgroups/<name>`, `persistentvolumeclaims/<name>`,
    `persistentvolumes/<name>` or `resourceclaims/<name>`."""


def key(name: str) -> str:
    return f"{NAMESPACE}/{name}"


def bind_volume(c: Cluster, o: ClusterObjects, volume_name: str) -> None:
    """PreBind of pod `p` on the first node with claim `data` bound to the volume, then its Binding."""
    volumes = PodVolumes(bindings=((o.persistent_volume_claims[key("data")], o.persistent_volumes[volume_name]),))
    c.bind_volumes(o.pods[key("p")], NODES[0], volumes)
    c.bind(o.pods[key("p")], NODES[0])


def provision(c: Cluster, o: ClusterObjects, w: World) -> None:
    """PreBind of pod `p` on the first node with claim `data` to provision there, then its Binding."""
    c.bind_volumes(o.pods[key("p")], NODES[0], PodVolumes(provisions=(o.persistent_volume_claims[key("data")],)))
    c.bind(o.pods[key("p")], NODES[0])
    w.provision("data", NODES[0])


def allocation(node: str, device: str) -> AllocationResult:
    """What DynamicResources allocates to request `gpu`: one device of the node's pool, usable on that node only."""
    result = DeviceRequestAllocationResult(request="gpu", driver=DRIVER, pool=node, device=device)
    return AllocationResult(devices=DeviceAllocationResult(results=[result]), node_selector=node_name_selector(node))


def consumer(p: Pod) -> ResourceClaimConsumerReference:
    return ResourceClaimConsumerReference(resource="pods", name=p.metadata.name, uid=p.metadata.uid or "")


def allocate_claim(
    c: Cluster, o: ClusterObjects, pod_name: str, claim_name: str, node: str = NODES[0], device: str = "gpu-0"
) -> None:
    """PreBind of pod `pod_name` on `node` with its claim, as `o` shows it, allocated to `device` (when it is not) and
    reserved for the pod, then its Binding."""
    p = o.pods[key(pod_name)]
    c.allocate_claims(p, node, (ClaimWrite(o.resource_claims[key(claim_name)], allocation(node, device), consumer(p)),))
    c.bind(p, node)


def share_claim(c: Cluster, o: ClusterObjects, w: World) -> None:
    """Pods `a` and `b` of one claim placed in two passes: the second sees the claim as the first left it (allocated,
    reserved for `a`) and writes the same allocation."""
    allocate_claim(c, o, "a", "shared")
    allocate_claim(c, c.objects(), "b", "shared")


CASES = [
    pytest.param(
        Case((pod("p"),), lambda c, o, w: c.bind(o.pods[key("p")], NODES[0]), ("pods/p",)),
        id="a Binding places the pod",
    ),
    pytest.param(
        Case((pod("p", node=NODES[0]),), lambda c, o, w: c.bind(o.pods[key("p")], NODES[1]), ("pods/p",)),
        id="a Binding of a pod already bound leaves it where it is, refused by nobody",
    ),
    pytest.param(
        Case(
            (pod("p"),),
            lambda c, o, w: (w.vanish("p"), c.bind(o.pods[key("p")], NODES[0])),
            ("pods/p",),
        ),
        id="a Binding of a pod that vanished is refused with the server's answer",
    ),
    pytest.param(
        Case(
            (pod("p", gates=(FOREIGN_GATE, GATE)),),
            lambda c, o, w: c.remove_scheduling_gate(o.pods[key("p")], GATE),
            ("pods/p",),
        ),
        id="a gate removal takes only our gate",
    ),
    pytest.param(
        Case(
            (pod("p"),),
            lambda c, o, w: c.set_nominated_node(o.pods[key("p")], NODES[1]),
            ("pods/p",),
        ),
        id="a nomination is set",
    ),
    pytest.param(
        Case(
            (pod("p", node=NODES[0]),),
            lambda c, o, w: c.set_nominated_node(o.pods[key("p")], NODES[1]),
            ("pods/p",),
        ),
        id="a nomination of a bound pod is refused with the server's answer",
    ),
    pytest.param(
        Case(
            (pod("p"),),
            lambda c, o, w: c.set_pod_condition(o.pods[key("p")], UNSCHEDULABLE),
            ("pods/p",),
        ),
        id="a PodScheduled condition is written",
    ),
    pytest.param(
        Case(
            (pod("p"),),
            lambda c, o, w: (w.vanish("p"), c.set_pod_condition(o.pods[key("p")], UNSCHEDULABLE)),
            ("pods/p",),
        ),
        id="a condition for a pod that vanished is no error",
    ),
    pytest.param(
        Case(
            (pod("running", node=NODES[0], grace=30), pod("pending", grace=30)),
            lambda c, o, w: (c.delete_pod(o.pods[key("running")], None), c.delete_pod(o.pods[key("pending")], None)),
            ("pods/running", "pods/pending"),
        ),
        id="a deletion leaves a bound pod terminating and removes a pending one",
    ),
    pytest.param(
        Case(
            (pod("gone", node=NODES[0]),),
            lambda c, o, w: (w.vanish("gone"), c.delete_pod(o.pods[key("gone")], 0)),
            ("pods/gone",),
        ),
        id="a deletion of a pod that vanished is no error",
    ),
    pytest.param(
        Case(
            (group("g"),),
            lambda c, o, w: (
                c.set_pod_group_condition(o.pod_groups[key("g")], SCHEDULED),
                c.annotate_pod_group(o.pod_groups[key("g")], ANNOTATION, "2026-11-24T12:00:00Z"),
            ),
            ("podgroups/g",),
        ),
        id="a PodGroup condition and annotation are written",
    ),
    pytest.param(
        Case(
            (group("g"),),
            lambda c, o, w: (
                w.annotate_group("g", "example.com/touched", "yes"),
                c.set_pod_group_condition(o.pod_groups[key("g")], SCHEDULED),
            ),
            ("podgroups/g",),
        ),
        id="a PodGroup condition written from a stale resourceVersion keeps the change it missed",
    ),
    pytest.param(
        Case(
            (pod("p", claim="data"), claim("data", LOCAL), volume("contract-pv-static", NODES[0])),
            lambda c, o, w: bind_volume(c, o, "contract-pv-static"),
            ("pods/p", "persistentvolumeclaims/data", "persistentvolumes/contract-pv-static"),
        ),
        id="a volume is bound to its claim, then the pod",
    ),
    pytest.param(
        Case(
            (pod("p", claim="data"), claim("data", LAZY)),
            provision,
            ("pods/p", "persistentvolumeclaims/data"),
        ),
        id="a claim is annotated with its node, provisioned there, bound, then the pod",
    ),
    pytest.param(
        Case(
            (pod("p", claim="data"), claim("data", LOCAL), volume("contract-pv-taken", NODES[0])),
            lambda c, o, w: (w.claim_volume("contract-pv-taken", "other"), bind_volume(c, o, "contract-pv-taken")),
            ("pods/p", "persistentvolumeclaims/data", "persistentvolumes/contract-pv-taken"),
        ),
        id="a volume another claim took meanwhile is refused with the server's answer, and the pod not bound",
    ),
    pytest.param(
        Case(
            (pod("p", device_claim="gpu"), gpu_claim("gpu")),
            lambda c, o, w: allocate_claim(c, o, "p", "gpu"),
            ("pods/p", "resourceclaims/gpu"),
        ),
        id="a claim is allocated to a device of the node and reserved for the pod, then the pod bound",
    ),
    pytest.param(
        Case(
            (pod("a", device_claim="shared"), pod("b", device_claim="shared"), gpu_claim("shared")),
            share_claim,
            ("pods/a", "pods/b", "resourceclaims/shared"),
        ),
        id="a claim shared by two pods is allocated once and reserved for both, then both bound",
    ),
    pytest.param(
        Case(
            (pod("a", device_claim="shared"), pod("b", device_claim="shared"), gpu_claim("shared")),
            lambda c, o, w: (w.allocate("shared", NODES[0], "gpu-0", "a"), allocate_claim(c, o, "b", "shared")),
            ("pods/b", "resourceclaims/shared"),
        ),
        id="a claim allocated meanwhile to the same device for another pod is only reserved for this one too",
    ),
    pytest.param(
        Case(
            # names of its own: `holder` stays, and keeps the claim allocated, until the namespace goes
            (pod("p", device_claim="taken"), pod("holder", device_claim="taken"), gpu_claim("taken")),
            lambda c, o, w: (w.allocate("taken", NODES[1], "gpu-1", "holder"), allocate_claim(c, o, "p", "taken")),
            ("pods/p", "resourceclaims/taken"),
        ),
        id="a claim allocated meanwhile to other devices is refused alike, and the pod not bound",
    ),
    pytest.param(
        Case(
            (pod("p", device_claim="gpu"), gpu_claim("gpu")),
            lambda c, o, w: (w.delete_claim("gpu"), allocate_claim(c, o, "p", "gpu")),
            ("pods/p", "resourceclaims/gpu"),
        ),
        id="a claim deleted meanwhile is refused with the server's answer, and the pod not bound",
    ),
    pytest.param(
        Case(
            (pod("p", device_claim="gpu"), gpu_claim("gpu")),
            lambda c, o, w: (w.allocate("gpu", NODES[0], "gpu-0", "p"), allocate_claim(c, o, "p", "gpu")),
            ("pods/p", "resourceclaims/gpu"),
        ),
        id="a claim allocated and reserved for the pod already (a write replayed) is left as it is, and the pod bound",
    ),
]


def shown(objects: ClusterObjects, what: str) -> Any:
    """What the contract compares of one object: the fields the scheduler writes, and whether it is there."""
    kind, _, name = what.partition("/")
    if kind == "resourceclaims":
        rc: ResourceClaim | None = objects.resource_claims.get(key(name))
        if rc is None:
            return None
        made = rc.status.allocation
        selector = made.node_selector if made is not None else None
        return {
            "devices": [(r.request, r.driver, r.pool, r.device) for r in made.devices.results] if made else None,
            "node selector": selector.model_dump(by_alias=True, exclude_defaults=True) if selector else None,
            "reserved for": sorted((r.api_group or "", r.resource, r.name, r.uid) for r in rc.status.reserved_for),
        }
    if kind == "persistentvolumeclaims":
        c: PersistentVolumeClaim | None = objects.persistent_volume_claims.get(key(name))
        if c is None:
            return None
        bound = objects.persistent_volumes.get(c.spec.volume_name or "")
        ref = bound.spec.claim_ref if bound is not None else None
        return {
            "volume": c.spec.volume_name,
            "phase": c.status.phase,
            "annotations": {k: c.metadata.annotations[k] for k in CLAIM_ANNOTATIONS if k in c.metadata.annotations},
            "volume's claim": (ref.namespace, ref.name, ref.uid == c.metadata.uid) if ref is not None else None,
            "volume's phase": bound.status.phase if bound is not None else None,
        }
    if kind == "persistentvolumes":
        v: PersistentVolume | None = objects.persistent_volumes.get(name)
        if v is None:
            return None
        ref = v.spec.claim_ref
        return {
            "claim": (ref.namespace, ref.name) if ref is not None else None,
            "phase": v.status.phase,
            "bound by controller": v.metadata.annotations.get(ANN_BOUND_BY_CONTROLLER),
        }
    if kind == "pods":
        p: Pod | None = objects.pods.get(key(name))
        if p is None:
            return None
        conditions = sorted((c.type, c.status, c.reason, c.message) for c in p.status.conditions)
        return {
            "node": p.spec.node_name,
            "gates": [g.name for g in p.spec.scheduling_gates],
            "nominated": p.status.nominated_node_name,
            "terminating": p.metadata.deletion_timestamp is not None,
            "conditions": [c for c in conditions if c[0] in WRITTEN and c[2] != "SchedulingGated"],
        }
    g: PodGroup | None = objects.pod_groups.get(key(name))
    if g is None:
        return None
    return {
        "conditions": sorted((c.type, c.status, c.reason, c.message) for c in g.status.conditions),
        "annotations": {k: v for k, v in g.metadata.annotations.items() if not k.startswith("kubectl.")},
    }


@pytest.fixture(scope="module")
def kube(stack: Stack) -> Iterator[KubeCluster]:
    """The Kubernetes back end as the admin, beside the suite's scheduler (which ignores these pods)."""
    plane: ControlPlane = stack.plane
    api = plane.api()
    api.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    for name in NODES:
        resources = {"cpu": "4", "memory": "16Gi", "pods": "110"}
        api.apply(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
                "spec": {"taints": [{"key": "contract", "value": "yes", "effect": "NoSchedule"}]},
                "status": {"capacity": resources, "allocatable": resources},
            }
        )
    for name, provisioner in ((LOCAL, "kubernetes.io/no-provisioner"), (LAZY, PROVISIONER)):
        api.apply(
            {
                "apiVersion": "storage.k8s.io/v1",
                "kind": "StorageClass",
                "metadata": {"name": name},
                "provisioner": provisioner,
                "volumeBindingMode": "WaitForFirstConsumer",
                "reclaimPolicy": "Retain",
            }
        )
    for made in (device_class(GPU), *(gpu_slice(name, ("l4", "l4")) for name in NODES)):
        api.apply(made)
    cluster = KubeCluster(api_client(plane.admin_kubeconfig, "scheduler"), identity="contract")
    cluster.start()
    assert cluster.wait_synced(30)
    yield cluster
    cluster.stop()
    for name in NODES:
        api.delete(f"/apis/{RESOURCE}/resourceslices/{name}")
    api.delete(f"/apis/{RESOURCE}/deviceclasses/{GPU}")
    for name in NODES:
        api.delete(f"/api/v1/nodes/{name}")
    api.delete(f"/api/v1/namespaces/{NAMESPACE}")
    for made in api.items("/api/v1/persistentvolumes"):
        if made["spec"].get("storageClassName") in (LOCAL, LAZY):
            api.delete(f"/api/v1/persistentvolumes/{made['metadata']['name']}")
    for name in (LOCAL, LAZY):
        api.delete(f"/apis/storage.k8s.io/v1/storageclasses/{name}")


def settle(cluster: KubeCluster) -> ClusterObjects:
    """The view once every write in flight has landed and the informer shows it."""

    def landed() -> ClusterObjects | None:
        objects = cluster.objects()
        return objects if cluster.ledger.in_flight() == 0 else None

    settled: ClusterObjects = wait_for(landed, timeout=20, what="the writes in flight to land")
    return settled


class KubeWorld(World):
    def __init__(self, plane: ControlPlane) -> None:
        self.api = plane.api()

    def vanish(self, name: str) -> None:
        self.api.delete(f"/api/v1/namespaces/{NAMESPACE}/pods/{name}", grace_period_seconds=0)

    def annotate_group(self, name: str, key_: str, value: str) -> None:
        path = f"/apis/{PHALANX}/namespaces/{NAMESPACE}/podgroups/{name}"
        self.api.patch(path, {"metadata": {"annotations": {key_: value}}})

    def claim_volume(self, name: str, claim_name: str) -> None:
        ref = {"kind": "PersistentVolumeClaim", "namespace": NAMESPACE, "name": claim_name}
        assert self.api.patch(f"/api/v1/persistentvolumes/{name}", {"spec": {"claimRef": ref}}).status == 200

    def provision(self, claim_name: str, node: str) -> None:
        path = f"/api/v1/namespaces/{NAMESPACE}/persistentvolumeclaims/{claim_name}"

        def selected() -> Json | None:
            found = self.api.get(path)
            annotations = (found or {}).get("metadata", {}).get("annotations", {})
            return found if annotations.get(ANN_SELECTED_NODE) == node else None

        made: Json = wait_for(selected, what=f"claim {claim_name} to name its node")
        meta = made["metadata"]
        ref = {"kind": "PersistentVolumeClaim", "namespace": NAMESPACE, "name": claim_name, "uid": meta["uid"]}
        name = f"pvc-{meta['uid']}"
        spec = {
            "capacity": {"storage": made["spec"]["resources"]["requests"]["storage"]},
            "accessModes": made["spec"]["accessModes"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": LAZY,
            "claimRef": ref,
            "csi": {"driver": PROVISIONER, "volumeHandle": name},
            "nodeAffinity": node_affinity(node),
        }
        annotations = {"pv.kubernetes.io/provisioned-by": PROVISIONER}
        body = {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name, "annotations": annotations}}
        self.api.create("/api/v1/persistentvolumes", {**body, "spec": spec})

    def allocate(self, claim_name: str, node: str, device: str, pod_name: str) -> None:
        path = f"/apis/{RESOURCE}/namespaces/{NAMESPACE}/resourceclaims/{claim_name}"
        found = self.api.get(f"/api/v1/namespaces/{NAMESPACE}/pods/{pod_name}")
        assert found is not None
        assert self.api.patch(path, {"metadata": {"finalizers": [CLAIM_FINALIZER]}}).status == 200
        status = {
            "allocation": allocation(node, device).model_dump(by_alias=True, exclude_defaults=True, mode="json"),
            "reservedFor": [{"resource": "pods", "name": pod_name, "uid": found["metadata"]["uid"]}],
        }
        assert self.api.patch(f"{path}/status", {"status": status}).status == 200

    def delete_claim(self, name: str) -> None:
        self.api.delete(f"/apis/{RESOURCE}/namespaces/{NAMESPACE}/resourceclaims/{name}")


class MemoryWorld(World):
    def __init__(self, cluster: MemoryCluster) -> None:
        self.cluster = cluster

    def vanish(self, name: str) -> None:
        self.cluster.objects().pods.pop(key(name), None)

    def annotate_group(self, name: str, key_: str, value: str) -> None:
        current = self.cluster.objects().pod_groups[key(name)]
        annotations = {**current.metadata.annotations, key_: value}
        version = str(int(current.metadata.resource_version or 0) + 1)
        metadata = current.metadata.model_copy(update={"annotations": annotations, "resource_version": version})
        self.cluster.objects().pod_groups[key(name)] = current.model_copy(update={"metadata": metadata})

    def claim_volume(self, name: str, claim_name: str) -> None:
        volumes = self.cluster.objects().persistent_volumes
        current = volumes[name]
        ref = ObjectReference(kind="PersistentVolumeClaim", namespace=NAMESPACE, name=claim_name)
        version = str(int(current.metadata.resource_version or 0) + 1)
        volumes[name] = current.model_copy(
            update={
                "metadata": current.metadata.model_copy(update={"resource_version": version}),
                "spec": current.spec.model_copy(update={"claim_ref": ref}),
            }
        )

    def allocate(self, claim_name: str, node: str, device: str, pod_name: str) -> None:
        objects = self.cluster.objects()
        current = objects.resource_claims[key(claim_name)]
        version = str(int(current.metadata.resource_version or 0) + 1)
        status = current.status.model_copy(
            update={"allocation": allocation(node, device), "reserved_for": [consumer(objects.pods[key(pod_name)])]}
        )
        metadata = current.metadata.model_copy(update={"resource_version": version, "finalizers": [CLAIM_FINALIZER]})
        made = current.model_copy(update={"metadata": metadata, "status": status})
        objects.resource_claims = {**objects.resource_claims, key(claim_name): made}  # replaced, as the back end does

    def delete_claim(self, name: str) -> None:
        objects = self.cluster.objects()
        objects.resource_claims = {k: c for k, c in objects.resource_claims.items() if k != key(name)}


def refusal(act: Callable[[], Any]) -> str | None:
    """The server's answer when `act` raises `WriteRefused` (`<write> <object>: <answer>`), else None."""
    try:
        act()
    except WriteRefused as err:
        return str(err).split(": ", 1)[1]
    return None


def prepared(objects: tuple[Json, ...], kube: KubeCluster, stack: Stack) -> tuple[ClusterObjects, MemoryCluster]:
    """The case's objects made afresh on the real server, as the Kubernetes back end shows them, and a memory back end
    built from exactly those."""
    api = stack.plane.api()
    for obj in objects:  # pods first: a claim in use, and a volume bound, are removed only after
        api.delete(object_path(obj), grace_period_seconds=0)
    names = {f"{plural(o['kind'])}/{o['metadata']['name']}" for o in objects}
    wait_for(lambda: all(shown(kube.objects(), n) is None for n in names), what="the previous case's objects gone")
    for obj in objects:
        api.create(collection_path(obj), obj)

    def created() -> ClusterObjects | None:
        now = kube.objects()
        if not all(shown(now, n) is not None for n in names):
            return None
        volumes = [now.persistent_volumes[n.partition("/")[2]] for n in names if n.startswith("persistentvolumes/")]
        return now if all(v.status.phase == "Available" for v in volumes) else None  # the PV controller saw them

    seen: ClusterObjects = wait_for(created, what="the case's objects")
    # a copy: the view's next `objects()` (in `settle`) brings its own tables up to date, the vanished pod gone
    before = replace(seen, pods=dict(seen.pods), pod_groups=dict(seen.pod_groups))
    memory = MemoryCluster(
        ClusterObjects(
            nodes=dict(before.nodes),
            pods={k: p for k, p in before.pods.items() if k.startswith(f"{NAMESPACE}/")},
            pod_groups={k: g for k, g in before.pod_groups.items() if k.startswith(f"{NAMESPACE}/")},
            persistent_volume_claims={
                k: c for k, c in before.persistent_volume_claims.items() if k.startswith(f"{NAMESPACE}/")
            },
            persistent_volumes={k: v for k, v in before.persistent_volumes.items() if v.storage_class in (LOCAL, LAZY)},
            storage_classes=dict(before.storage_classes),
            device_classes={GPU: before.device_classes[GPU]},
            resource_slices={n: s for n, s in before.resource_slices.items() if n in NODES},
            resource_claims={k: c for k, c in before.resource_claims.items() if k.startswith(f"{NAMESPACE}/")},
        ),
        datetime.now(UTC),
    )
    kube.ledger.refusals()  # only this case's
    return before, memory


@pytest.mark.parametrize("case", CASES)
def test_both_back_ends_answer_the_same(case: Case, kube: KubeCluster, stack: Stack) -> None:
    before, memory = prepared(case.objects, kube, stack)

    kube_refused = refusal(lambda: case.act(kube, before, KubeWorld(stack.plane)))
    after = settle(kube)
    kube_refused = kube_refused or next((r.answer for r in kube.ledger.refusals()), None)
    # `before`, not `memory.objects()`: the memory back end's store is that very dict, and a case that makes a
    # pod vanish then writes the pod it saw before, as a pass does with its snapshot
    memory_refused = refusal(lambda: case.act(memory, before, MemoryWorld(memory)))

    assert memory_refused == kube_refused
    for name in case.look:
        assert shown(memory.objects(), name) == shown(after, name), name


def test_an_event_is_recorded_alike(kube: KubeCluster, stack: Stack) -> None:
    api = stack.plane.api()
    api.create(f"/api/v1/namespaces/{NAMESPACE}/pods", pod("evented"))
    regarding = wait_for(lambda: kube.objects().pods.get(key("evented")), what="the pod")
    memory = MemoryCluster(ClusterObjects(pods={key("evented"): regarding}), datetime.now(UTC))
    for cluster in (kube, memory):
        cluster.record_event(regarding, "Warning", "ContractTest", "the same note")
    [recorded] = memory.events
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        events = [
            e
            for e in api.items(f"/apis/events.k8s.io/v1/namespaces/{NAMESPACE}/events")
            if e.get("reason") == "ContractTest"
        ]
        if events:
            break
        time.sleep(0.1)
    assert [(e["type"], e["reason"], e["note"], e["regarding"]["name"]) for e in events] == [
        (recorded.event_type, recorded.reason, recorded.note, recorded.regarding.split("/")[1])
    ]


def gang_unschedulable(c: Cluster, o: ClusterObjects, w: World) -> None:
    """What a pass tells a gang that does not fit: a Warning on its PodGroup, and each member's PodScheduled."""
    c.record_event(o.pod_groups[key("g")], "Warning", "FailedScheduling", "gang needs 2 members, 0 fit")
    for name in ("m0", "m1"):
        c.set_pod_condition(o.pods[key(name)], UNSCHEDULABLE)


def gang_bound(c: Cluster, o: ClusterObjects, w: World) -> None:
    """Each member's gang gate (the webhook's) removed, then its Binding."""
    for i, name in enumerate(("m0", "m1")):
        c.remove_scheduling_gate(o.pods[key(name)], GATE)
        c.bind(o.pods[key(name)], NODES[i])


def preemption(c: Cluster, o: ClusterObjects, w: World) -> None:
    """What the actuator does for a lone preemptor, then its Binding once the room is free."""
    preemptor, victim = o.pods[key("p")], o.pods[key("v")]
    c.set_nominated_node(preemptor, NODES[0])
    c.record_event(preemptor, "Normal", "Preempting", "preempting 1 pod of priority 0")
    target = Condition(type="DisruptionTarget", status="True", reason="PreemptionByScheduler", message="by p")
    c.set_pod_condition(victim, target)
    c.record_event(victim, "Normal", "Preempted", f"Preempted by Pod p on node {NODES[0]}", related=preemptor)
    c.delete_pod(victim, None)
    c.bind(preemptor, NODES[0])


EVENT_CASES = [
    pytest.param(
        Case((pod("p"),), lambda c, o, w: c.bind(o.pods[key("p")], NODES[0]), ()),
        id="a bound pod is told it was scheduled",
    ),
    pytest.param(
        Case((pod("p"),), lambda c, o, w: c.set_pod_condition(o.pods[key("p")], UNSCHEDULABLE), ()),
        id="a lone unschedulable pod is told why",
    ),
    pytest.param(
        Case((group("g"), pod("m0", member_of="g"), pod("m1", member_of="g")), gang_unschedulable, ()),
        id="a gang that does not fit is told why, on its PodGroup and its members",
    ),
    pytest.param(
        Case((group("g"), pod("m0", member_of="g"), pod("m1", member_of="g")), gang_bound, ()),
        id="a gang bound: each member is told it was scheduled",
    ),
    pytest.param(
        Case((pod("v", node=NODES[0], grace=30), pod("p")), preemption, ()),
        id="a preemption: the preemptor, its victim, then the preemptor's Binding",
    ),
]

Recorded = tuple[str, str, str, str, str, str | None]
"""An Event as both back ends are compared on it: type, reason, the kind and `namespace/name` of the object it is
about, its note, and the `namespace/name` of the related object."""


def server_events(api: Any, uids: set[str]) -> list[Recorded]:
    """The Events this scheduler recorded on the real server about the objects of `uids`."""
    found = []
    for event in api.items(f"/apis/events.k8s.io/v1/namespaces/{NAMESPACE}/events"):
        regarding, related = event["regarding"], event.get("related")
        if event.get("reportingController") != REPORTING_CONTROLLER or regarding.get("uid") not in uids:
            continue
        found.append(
            (
                event["type"],
                event["reason"],
                regarding.get("kind", ""),
                f"{regarding['namespace']}/{regarding['name']}",
                event.get("note", ""),
                f"{related['namespace']}/{related['name']}" if related else None,
            )
        )
    return sorted(found)


@pytest.mark.parametrize("case", EVENT_CASES)
def test_both_back_ends_record_the_same_events(case: Case, kube: KubeCluster, stack: Stack) -> None:
    """The Events a scenario's writes leave (`Scheduled`, `FailedScheduling`, `Preempting`, `Preempted`) are the same
    on both back ends: `phalanx simulate` and `explain -f` tell what a cluster would."""
    before, memory = prepared(case.objects, kube, stack)
    made = [before.pods.get(key(o["metadata"]["name"])) for o in case.objects if o["kind"] == "Pod"]
    made += [before.pod_groups.get(key(o["metadata"]["name"])) for o in case.objects if o["kind"] == "PodGroup"]
    uids = {o.metadata.uid or "" for o in made if o is not None}
    case.act(kube, before, KubeWorld(stack.plane))
    case.act(memory, before, MemoryWorld(memory))
    settle(kube)
    want = sorted((e.event_type, e.reason, e.regarding_kind, e.regarding, e.note, e.related) for e in memory.events)
    api = stack.plane.api()
    last: list[list[Recorded]] = []

    def quiet() -> tuple[list[Recorded]] | None:
        """The server's Events once as many as the memory back end's came and no more for a second (the Kubernetes
        back end sends them in the background)."""
        now = server_events(api, uids)
        done = bool(last) and last[-1] == now and len(now) >= len(want)
        last.append(now)
        return (now,) if done else None

    (got,) = wait_for(quiet, timeout=30, interval=1.0, what="the Kubernetes back end's Events")
    assert got == want


def test_a_cache_listed_in_many_pages_holds_every_pod_as_one_read_would(stack: Stack) -> None:
    """The informers LIST in pages (kube.informer.LIST_PAGE): a back end started after more pods than two
    pages exist shows every one of them, each as it reads a pod (requests, tolerations, its node) without
    what no reader needs (a container's image, command and env)."""
    api = stack.plane.api()
    namespace = "contract-pages"
    api.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    count = 2 * LIST_PAGE + 7

    def one(i: int) -> None:
        container = {
            "name": "c",
            "image": "busybox",
            "command": ["sleep", "3600"],
            "env": [{"name": "N", "value": str(i)}],
            "resources": {"requests": {"cpu": "100m"}},
        }
        spec = {"schedulerName": "contract", "nodeName": NODES[i % 2], "containers": [container]}
        body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p-{i}", "namespace": namespace}}
        api.create(f"/api/v1/namespaces/{namespace}/pods", {**body, "spec": spec})

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(one, range(count)))
    cluster = KubeCluster(api_client(stack.plane.admin_kubeconfig, "scheduler"), identity="contract-pages")
    cluster.start()
    try:
        assert cluster.wait_synced(60)
        pods = {k: p for k, p in cluster.objects().pods.items() if k.startswith(f"{namespace}/")}
        assert len(pods) == count
        pod_ = pods[f"{namespace}/p-{count - 1}"]
        assert pod_.effective_requests() == {"cpu": 100}
        assert pod_.spec.node_name == NODES[(count - 1) % 2]
        assert pod_.spec.tolerations  # the server's default NoExecute tolerations
        assert pod_.spec.containers[0].model_extra is None or "env" not in pod_.spec.containers[0].model_extra
    finally:
        cluster.stop()
        api.request("DELETE", f"/api/v1/namespaces/{namespace}/pods?gracePeriodSeconds=0")
        api.delete(f"/api/v1/namespaces/{namespace}")
