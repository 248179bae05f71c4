"""Reading a live cluster for `kubectl phalanx` where the scheduler serves no explain API (`served.py`), or for
`--config FILE`: one LIST of each kind the scheduler reads, and nothing written.

The kinds are the scheduler's informers' (pods, nodes, PriorityClasses, PodDisruptionBudgets, claims, volumes,
StorageClasses, CSINodes, Namespaces, DeviceClasses, ResourceSlices and ResourceClaims where the server serves
`resource.k8s.io/v1`, our PodGroups and Queues, native PodGroups where the server serves them),
listed at once from a thread pool, each body decoded by orjson and pruned (`managedFields`, the kubelet's status)
before our models read it, as the informers do; the garbage collector is kept out of the way while tens of thousands
of objects are built. The scheduler's own configuration is read from its ConfigMap (`--scheduler-config
NAMESPACE/NAME`, the chart's by default for a release named `phalanx`): the schedulerName, gate, scoring and
min-runtime defaults the live scheduler decides with. A ConfigMap that is not there, or that the user may not read,
is a warning naming the flags that say which configuration to use, and the defaults are used.

Every request is a GET (get and list rights, nothing else).
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, TypeVar

import yaml
from pydantic import ValidationError

from kube.routes import CoreV1Api, CustomObjectsApi, PolicyV1Api, SchedulingV1Api, StorageV1Api
from phalanx.kubectl.connection import Connection, server_error
from phalanx.kubectl.errors import KubectlError
from scheduler.api.config import SchedulerConfiguration
from scheduler.api.csi import CSINode
from scheduler.api.device_class import DeviceClass
from scheduler.api.meta import ApiModel
from scheduler.api.namespace import Namespace
from scheduler.api.node import Node
from scheduler.api.pdb import PodDisruptionBudget
from scheduler.api.persistent_volume import PersistentVolume
from scheduler.api.persistent_volume_claim import PersistentVolumeClaim
from scheduler.api.pod import Pod
from scheduler.api.pod_group import GROUP, NATIVE_API_VERSION, VERSION, NativePodGroup, PodGroup
from scheduler.api.priority_class import PriorityClass
from scheduler.api.queue import Queue
from scheduler.api.resource_claim import ResourceClaim
from scheduler.api.resource_slice import ResourceSlice
from scheduler.api.storage_class import StorageClass
from scheduler.api.wire import prune
from scheduler.framework.cluster import ClusterObjects

CONFIG_KEY = "config.yaml"
"""The key of the chart's scheduler ConfigMap that holds the SchedulerConfiguration."""
M = TypeVar("M", bound=ApiModel)


def _items(body: Any, kind: str, model: type[M]) -> dict[str, M]:
    """The list's items as models, keyed as `ClusterObjects` keys them; an item our models cannot read is skipped."""
    found: dict[str, M] = {}
    for raw in (body or {}).get("items", []):
        try:
            parsed = model.model_validate(prune(kind, raw))
        except ValidationError:
            continue  # the server validated it: our model is stricter than the API; the scheduler skips it too
        meta = parsed.metadata  # type: ignore[attr-defined]
        found[f"{meta.namespace or 'default'}/{meta.name}" if meta.namespace else meta.name] = parsed
    return found


def check_namespace(connection: Connection, namespace: str) -> None:
    """kubectl's `Error from server (NotFound): namespaces "x" not found` for a namespace that does not exist."""
    connection.get(CoreV1Api.read_namespace.at(name=namespace))


def read_cluster(connection: Connection) -> ClusterObjects:
    """Every object the scheduler reads, one LIST per kind, listed concurrently."""
    native_group, native_version = NATIVE_API_VERSION.split("/")

    def optional(plural: str, group: str = GROUP, version: str = VERSION) -> Callable[[], Any]:
        """A LIST that is empty when not found: our CRDs not installed, or `resource.k8s.io/v1` not served."""
        path = CustomObjectsApi.list_cluster_custom_object.at(group=group, version=version, plural=plural)
        return lambda: connection.get(path, missing_ok=True)

    def native() -> Any:
        """The native PodGroups, where the server serves them (discovery, which every user may read)."""
        served = connection.get(
            CustomObjectsApi.get_api_resources.at(group=native_group, version=native_version), missing_ok=True
        )
        if not any(r.get("name") == "podgroups" for r in (served or {}).get("resources", [])):
            return None
        path = CustomObjectsApi.list_cluster_custom_object.at(
            group=native_group, version=native_version, plural="podgroups"
        )
        return connection.get(path)

    calls: dict[str, Callable[[], Any]] = {
        "pods": lambda: connection.get(CoreV1Api.list_pod_for_all_namespaces.path),
        "nodes": lambda: connection.get(CoreV1Api.list_node.path),
        "priorityclasses": lambda: connection.get(SchedulingV1Api.list_priority_class.path),
        "poddisruptionbudgets": lambda: connection.get(PolicyV1Api.list_pod_disruption_budget_for_all_namespaces.path),
        "persistentvolumeclaims": lambda: connection.get(
            CoreV1Api.list_persistent_volume_claim_for_all_namespaces.path
        ),
        "persistentvolumes": lambda: connection.get(CoreV1Api.list_persistent_volume.path),
        "storageclasses": lambda: connection.get(StorageV1Api.list_storage_class.path),
        "csinodes": lambda: connection.get(StorageV1Api.list_csi_node.path),
        "namespaces": lambda: connection.get(CoreV1Api.list_namespace.path),
        "deviceclasses": optional("deviceclasses", "resource.k8s.io", "v1"),
        "resourceslices": optional("resourceslices", "resource.k8s.io", "v1"),
        "resourceclaims": optional("resourceclaims", "resource.k8s.io", "v1"),
        "podgroups": optional("podgroups"),
        "queues": optional("queues"),
        "native-podgroups": native,
    }
    with ThreadPoolExecutor(max_workers=len(calls)) as pool, _no_collection():
        futures = {kind: pool.submit(call) for kind, call in calls.items()}
        bodies = {kind: future.result() for kind, future in futures.items()}
        groups: dict[str, PodGroup] = {**_items(bodies["native-podgroups"], "podgroups", NativePodGroup)}
        groups.update(_items(bodies["podgroups"], "podgroups", PodGroup))  # ours wins a name both use
        return ClusterObjects(
            nodes=_items(bodies["nodes"], "nodes", Node),
            pods=_items(bodies["pods"], "pods", Pod),
            pod_groups=groups,
            queues=_items(bodies["queues"], "queues", Queue),
            priority_classes=_items(bodies["priorityclasses"], "priorityclasses", PriorityClass),
            pdbs=_items(bodies["poddisruptionbudgets"], "poddisruptionbudgets", PodDisruptionBudget),
            persistent_volume_claims=_items(
                bodies["persistentvolumeclaims"], "persistentvolumeclaims", PersistentVolumeClaim
            ),
            persistent_volumes=_items(bodies["persistentvolumes"], "persistentvolumes", PersistentVolume),
            storage_classes=_items(bodies["storageclasses"], "storageclasses", StorageClass),
            csi_nodes=_items(bodies["csinodes"], "csinodes", CSINode),
            device_classes=_items(bodies["deviceclasses"], "deviceclasses", DeviceClass),
            resource_slices=_items(bodies["resourceslices"], "resourceslices", ResourceSlice),
            resource_claims=_items(bodies["resourceclaims"], "resourceclaims", ResourceClaim),
            namespaces=_items(bodies["namespaces"], "namespaces", Namespace),
        )


@contextmanager
def _no_collection() -> Iterator[None]:
    """No cyclic garbage collection while the objects are built, and none of them scanned by a later one: they
    hold no cycles and live until the command ends. Decoding and parsing 50,000 pods took twice as long with
    the collector on, and every collection the dry run then triggered walked all of them again (seconds)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


def scheduler_config(connection: Connection, where: str) -> tuple[SchedulerConfiguration, str | None]:
    """The live scheduler's configuration from its ConfigMap `NAMESPACE/NAME`; the built-in defaults, with a
    warning to print, when there is no such ConfigMap or the user may not read it."""
    namespace, _, name = where.partition("/")
    if not namespace or not name:
        raise KubectlError(f"error: --scheduler-config: Invalid value: {where!r}: must be NAMESPACE/NAME")
    answer = connection.request(CoreV1Api.read_namespaced_config_map.at(namespace=namespace, name=name))
    if answer.status in (403, 404):
        why = "not found" if answer.status == 404 else "forbidden"
        note = (
            f"Warning: configmaps {where} {why}: explaining with the default SchedulerConfiguration (name the "
            "scheduler's ConfigMap with --scheduler-config NAMESPACE/NAME, or give --config FILE)"
        )
        return SchedulerConfiguration(), note
    if not 200 <= answer.status < 300:
        raise server_error(answer.status, answer.data)
    raw = (answer.body().get("data") or {}).get(CONFIG_KEY)
    if raw is None:
        raise KubectlError(f"error: configmaps {where} has no {CONFIG_KEY}")
    try:
        return SchedulerConfiguration.model_validate(yaml.safe_load(raw) or {}), None
    except (yaml.YAMLError, ValidationError) as err:
        raise KubectlError(f"error: configmaps {where}: {CONFIG_KEY}: {str(err).splitlines()[0]}") from None
