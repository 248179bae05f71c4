"""Objects as the test server stores them, read into our models: what the scheduler's writes left there, and the
cluster as a scheduler's informers would hold it."""

from __future__ import annotations

from typing import Any

from scheduler.api.csi import CSINode
from scheduler.api.namespace import Namespace
from scheduler.api.node import Node
from scheduler.api.pdb import PodDisruptionBudget
from scheduler.api.persistent_volume import PersistentVolume
from scheduler.api.persistent_volume_claim import PersistentVolumeClaim
from scheduler.api.pod import Pod
from scheduler.api.pod_group import GROUP, NATIVE_API_VERSION, NativePodGroup, PodGroup
from scheduler.api.priority_class import PriorityClass
from scheduler.api.queue import Queue
from scheduler.api.storage_class import StorageClass
from scheduler.api.wire import prune
from scheduler.framework.cluster import ClusterObjects
from tests.apiserver import ApiServer


def stored_pod(server: ApiServer, name: str, namespace: str = "default") -> Pod:
    raw = server.get("pods", name, namespace)
    assert raw is not None, f"pod {namespace}/{name} is not stored"
    return Pod.model_validate(raw)


def stored_objects(server: ApiServer) -> ClusterObjects:
    """Every object the scheduler reads, as the server stores them now."""

    def table(plural: str, model: Any, group: str = "") -> dict[str, Any]:
        found = {}
        for raw in server.list(plural, group=group):
            parsed = model.model_validate(prune(plural, raw))
            meta = parsed.metadata
            found[f"{meta.namespace}/{meta.name}" if meta.namespace else meta.name] = parsed
        return found

    native_group = NATIVE_API_VERSION.split("/")[0]
    return ClusterObjects(
        nodes=table("nodes", Node),
        pods=table("pods", Pod),
        pod_groups={**table("podgroups", NativePodGroup, native_group), **table("podgroups", PodGroup, GROUP)},
        queues=table("queues", Queue, GROUP),
        priority_classes=table("priorityclasses", PriorityClass, "scheduling.k8s.io"),
        pdbs=table("poddisruptionbudgets", PodDisruptionBudget, "policy"),
        persistent_volume_claims=table("persistentvolumeclaims", PersistentVolumeClaim),
        persistent_volumes=table("persistentvolumes", PersistentVolume),
        storage_classes=table("storageclasses", StorageClass, "storage.k8s.io"),
        csi_nodes=table("csinodes", CSINode, "storage.k8s.io"),
        namespaces=table("namespaces", Namespace),
    )
