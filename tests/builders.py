"""Fluent builders for real `scheduler.api` objects, mirroring kube-scheduler's testing wrappers.

Each builder keeps the object as the JSON the API server would send and validates it in `obj()`,
so a test gets exactly what parsing a manifest would give (and `yaml_documents` can write it back
out as a scenario file for `phalanx simulate`).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any, Generic, Self, TypeVar

import yaml

from scheduler.api.config import SchedulerConfiguration
from scheduler.api.csi import ANN_MIGRATED_PLUGINS, CSINode
from scheduler.api.meta import ApiModel
from scheduler.api.namespace import Namespace
from scheduler.api.node import Node
from scheduler.api.persistent_volume import PersistentVolume
from scheduler.api.persistent_volume_claim import ANN_BIND_COMPLETED, ANN_SELECTED_NODE, PersistentVolumeClaim
from scheduler.api.pod import POD_GROUP_LABEL, QUEUE_LABEL, Pod
from scheduler.api.pod_group import API_VERSION, NATIVE_API_VERSION, PodGroup
from scheduler.api.priority_class import PriorityClass
from scheduler.api.queue import Queue
from scheduler.api.storage_class import ANN_DEFAULT_CLASS, StorageClass

GPU = "nvidia.com/gpu"
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


def _resources(cpu: str | None, memory: str | None, gpu: int | None, extra: dict[str, str]) -> dict[str, str]:
    out: dict[str, str] = {}
    if cpu is not None:
        out["cpu"] = cpu
    if memory is not None:
        out["memory"] = memory
    if gpu is not None:
        out[GPU] = str(gpu)
    out.update({k.replace("_", "-"): v for k, v in extra.items()})
    return out


def _ts(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


M = TypeVar("M", bound=ApiModel)


class _Builder(Generic[M]):
    """The object as API-server JSON (`json()`, a copy) and as the parsed model (`obj()`)."""

    model: type[M]
    raw: dict[str, Any]

    def json(self) -> dict[str, Any]:
        return copy.deepcopy(self.raw)

    def obj(self) -> M:
        return self.model.model_validate(self.raw)

    def stored(self, resource_version: str = "1") -> Self:
        """As read back from a cluster (`kubectl get -o yaml`): it carries a resourceVersion."""
        self.raw["metadata"]["resourceVersion"] = resource_version
        return self


class PodWrapper(_Builder[Pod]):
    model = Pod

    def __init__(self, name: str) -> None:
        self.raw: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "creationTimestamp": _ts(EPOCH)},
            "spec": {"schedulerName": "phalanx-scheduler", "containers": [{"name": "main"}]},
            "status": {"phase": "Pending"},
        }

    def ns(self, namespace: str) -> Self:
        self.raw["metadata"]["namespace"] = namespace
        return self

    def req(self, cpu: str | None = None, memory: str | None = None, gpu: int | None = None, **extra: str) -> Self:
        """Requests of the main container; `ephemeral_storage="1Gi"` becomes `ephemeral-storage`."""
        self.raw["spec"]["containers"][0].setdefault("resources", {})["requests"] = _resources(cpu, memory, gpu, extra)
        return self

    def container(self, cpu: str | None = None, memory: str | None = None, gpu: int | None = None) -> Self:
        containers = self.raw["spec"]["containers"]
        containers.append({"name": f"c{len(containers)}", "resources": {"requests": _resources(cpu, memory, gpu, {})}})
        return self

    def init(self, cpu: str | None = None, memory: str | None = None, sidecar: bool = False) -> Self:
        inits = self.raw["spec"].setdefault("initContainers", [])
        entry: dict[str, Any] = {
            "name": f"init{len(inits)}",
            "resources": {"requests": _resources(cpu, memory, None, {})},
        }
        if sidecar:
            entry["restartPolicy"] = "Always"
        inits.append(entry)
        return self

    def overhead(self, cpu: str | None = None, memory: str | None = None) -> Self:
        self.raw["spec"]["overhead"] = _resources(cpu, memory, None, {})
        return self

    def label(self, key: str, value: str) -> Self:
        self.raw["metadata"].setdefault("labels", {})[key] = value
        return self

    def group(self, name: str) -> Self:
        return self.label(POD_GROUP_LABEL, name)

    def scheduling_group(self, pod_group: str) -> Self:
        """Member of a native PodGroup through `spec.schedulingGroup` (no label)."""
        self.raw["spec"]["schedulingGroup"] = {"podGroupName": pod_group}
        return self

    def queue(self, name: str) -> Self:
        return self.label(QUEUE_LABEL, name)

    def on(self, node: str, started: datetime | None = None) -> Self:
        """Bound and running on `node` (since `started`, if given)."""
        self.raw["spec"]["nodeName"] = node
        self.raw["status"]["phase"] = "Running"
        if started is not None:
            self.raw["status"]["startTime"] = _ts(started)
        return self

    def nominated(self, node: str) -> Self:
        self.raw["status"]["nominatedNodeName"] = node
        return self

    def phase(self, phase: str) -> Self:
        self.raw["status"]["phase"] = phase
        return self

    def terminating(self, since: datetime = EPOCH, grace: int = 30) -> Self:
        self.raw["metadata"]["deletionTimestamp"] = _ts(since)
        self.raw["metadata"]["deletionGracePeriodSeconds"] = grace
        return self

    def grace(self, seconds: int) -> Self:
        self.raw["spec"]["terminationGracePeriodSeconds"] = seconds
        return self

    def priority(self, value: int) -> Self:
        self.raw["spec"]["priority"] = value
        return self

    def priority_class(self, name: str) -> Self:
        self.raw["spec"]["priorityClassName"] = name
        return self

    def preempt_never(self) -> Self:
        self.raw["spec"]["preemptionPolicy"] = "Never"
        return self

    def gate(self, *names: str) -> Self:
        self.raw["spec"].setdefault("schedulingGates", []).extend({"name": n} for n in names)
        return self

    def scheduler(self, name: str) -> Self:
        self.raw["spec"]["schedulerName"] = name
        return self

    def node_selector(self, **labels: str) -> Self:
        self.raw["spec"]["nodeSelector"] = dict(labels)
        return self

    def node_affinity_in(self, key: str, *values: str, operator: str = "In") -> Self:
        """Add one required node-affinity term with one expression (terms are ORed)."""
        affinity = self.raw["spec"].setdefault("affinity", {}).setdefault("nodeAffinity", {})
        required = affinity.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {"nodeSelectorTerms": []})
        required["nodeSelectorTerms"].append(
            {"matchExpressions": [{"key": key, "operator": operator, "values": list(values)}]}
        )
        return self

    def preferred_node(self, key: str, *values: str, weight: int = 1) -> Self:
        """Add a preferred node-affinity term `key In values` of `weight`."""
        affinity = self.raw["spec"].setdefault("affinity", {}).setdefault("nodeAffinity", {})
        affinity.setdefault("preferredDuringSchedulingIgnoredDuringExecution", []).append(
            {
                "weight": weight,
                "preference": {"matchExpressions": [{"key": key, "operator": "In", "values": list(values)}]},
            }
        )
        return self

    def toleration(
        self, key: str | None = None, value: str | None = None, effect: str | None = None, operator: str = "Equal"
    ) -> Self:
        entry: dict[str, Any] = {"operator": operator}
        if key is not None:
            entry["key"] = key
        if value is not None:
            entry["value"] = value
        if effect is not None:
            entry["effect"] = effect
        self.raw["spec"].setdefault("tolerations", []).append(entry)
        return self

    def pod_affinity(
        self,
        topology_key: str,
        anti: bool = False,
        namespaces: Iterable[str] = (),
        match_label_keys: Iterable[str] = (),
        mismatch_label_keys: Iterable[str] = (),
        namespace_selector: dict[str, Any] | None = None,
        weight: int | None = None,
        **labels: str,
    ) -> Self:
        """Add a required (or, with `weight`, preferred) pod (anti-)affinity term selecting pods by `labels`."""
        term: dict[str, Any] = {"labelSelector": {"matchLabels": dict(labels)}, "topologyKey": topology_key}
        if namespaces:
            term["namespaces"] = list(namespaces)
        if match_label_keys:
            term["matchLabelKeys"] = list(match_label_keys)
        if mismatch_label_keys:
            term["mismatchLabelKeys"] = list(mismatch_label_keys)
        if namespace_selector is not None:
            term["namespaceSelector"] = namespace_selector
        kind = "podAntiAffinity" if anti else "podAffinity"
        rules = self.raw["spec"].setdefault("affinity", {}).setdefault(kind, {})
        if weight is None:
            rules.setdefault("requiredDuringSchedulingIgnoredDuringExecution", []).append(term)
        else:
            rules.setdefault("preferredDuringSchedulingIgnoredDuringExecution", []).append(
                {"weight": weight, "podAffinityTerm": term}
            )
        return self

    def spread(
        self,
        topology_key: str,
        max_skew: int = 1,
        when: str = "DoNotSchedule",
        min_domains: int | None = None,
        node_affinity_policy: str | None = None,
        node_taints_policy: str | None = None,
        match_label_keys: Iterable[str] = (),
        **labels: str,
    ) -> Self:
        """Add a topology spread constraint over the pods with `labels`."""
        entry: dict[str, Any] = {
            "maxSkew": max_skew,
            "topologyKey": topology_key,
            "whenUnsatisfiable": when,
            "labelSelector": {"matchLabels": dict(labels)},
        }
        if min_domains is not None:
            entry["minDomains"] = min_domains
        if node_affinity_policy is not None:
            entry["nodeAffinityPolicy"] = node_affinity_policy
        if node_taints_policy is not None:
            entry["nodeTaintsPolicy"] = node_taints_policy
        if match_label_keys:
            entry["matchLabelKeys"] = list(match_label_keys)
        self.raw["spec"].setdefault("topologySpreadConstraints", []).append(entry)
        return self

    def host_port(self, port: int, protocol: str | None = None, ip: str | None = None) -> Self:
        """Expose a container port of the main container on the node's `port`."""
        entry: dict[str, Any] = {"containerPort": port, "hostPort": port}
        if protocol is not None:
            entry["protocol"] = protocol
        if ip is not None:
            entry["hostIP"] = ip
        self.raw["spec"]["containers"][0].setdefault("ports", []).append(entry)
        return self

    def host_network(self, *container_ports: int) -> Self:
        """On the node's network: API defaulting makes each container port a host port."""
        self.raw["spec"]["hostNetwork"] = True
        ports = self.raw["spec"]["containers"][0].setdefault("ports", [])
        ports.extend({"containerPort": p} for p in container_ports)
        return self

    def image(self, name: str) -> Self:
        self.raw["spec"]["containers"][0]["image"] = name
        return self

    def owned_by(self, kind: str, uid: str) -> Self:
        """Made by a controller (`metadata.ownerReferences` with `controller: true`)."""
        self.raw["metadata"].setdefault("ownerReferences", []).append(
            {"apiVersion": "apps/v1", "kind": kind, "name": uid, "uid": uid, "controller": True}
        )
        return self

    def named_claim(self, name: str, claim: str) -> Self:
        """`spec.resourceClaims` entry naming a ResourceClaim (`resource_claim`: one made from a template)."""
        self.raw["spec"].setdefault("resourceClaims", []).append({"name": name, "resourceClaimName": claim})
        return self

    def resource_claim(self, name: str, template: str) -> Self:
        self.raw["spec"].setdefault("resourceClaims", []).append({"name": name, "resourceClaimTemplateName": template})
        return self

    def created(self, when: datetime) -> Self:
        self.raw["metadata"]["creationTimestamp"] = _ts(when)
        return self

    def uid(self, uid: str) -> Self:
        self.raw["metadata"]["uid"] = uid
        return self

    def claim(self, claim: str, volume: str | None = None) -> Self:
        """Mount the PersistentVolumeClaim `claim` as volume `volume` (the claim's name by default)."""
        return self.volume(volume or claim, persistentVolumeClaim={"claimName": claim})

    def ephemeral(self, volume: str, storage_class: str | None = None, storage: str = "1Gi") -> Self:
        """A generic ephemeral volume: its claim is `<pod>-<volume>`, made by the ephemeral volume controller."""
        spec: dict[str, Any] = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": storage}}}
        if storage_class is not None:
            spec["storageClassName"] = storage_class
        return self.volume(volume, ephemeral={"volumeClaimTemplate": {"spec": spec}})

    def volume(self, name: str, **source: Any) -> Self:
        """Any volume, its source as on the wire: `volume("d", iscsi={"iqn": "iqn.x", "lun": 0})`."""
        self.raw["spec"].setdefault("volumes", []).append({"name": name, **source})
        return self


class NodeWrapper(_Builder[Node]):
    model = Node

    def __init__(self, name: str) -> None:
        self.raw: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "spec": {},
            "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}},
        }

    def cap(self, cpu: str | None = None, memory: str | None = None, gpu: int | None = None, **extra: str) -> Self:
        """Allocatable (replaces only the resources given); `pods="3"` caps the pod count."""
        self.raw["status"]["allocatable"].update(_resources(cpu, memory, gpu, extra))
        return self

    def label(self, key: str, value: str) -> Self:
        self.raw["metadata"]["labels"][key] = value
        return self

    def taint(self, key: str, value: str | None = None, effect: str = "NoSchedule") -> Self:
        entry: dict[str, Any] = {"key": key, "effect": effect}
        if value is not None:
            entry["value"] = value
        self.raw["spec"].setdefault("taints", []).append(entry)
        return self

    def image(self, name: str, size_mb: int) -> Self:
        """An image the kubelet reports present (`status.images`)."""
        self.raw["status"].setdefault("images", []).append({"names": [name], "sizeBytes": size_mb * 1024 * 1024})
        return self

    def unschedulable(self) -> Self:
        self.raw["spec"]["unschedulable"] = True
        return self


class PodGroupWrapper(_Builder[PodGroup]):
    model = PodGroup

    def __init__(self, name: str) -> None:
        self.raw: dict[str, Any] = {
            "apiVersion": API_VERSION,
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "default", "creationTimestamp": _ts(EPOCH)},
            "spec": {"schedulingPolicy": {"basic": {}}},
        }

    def ns(self, namespace: str) -> Self:
        self.raw["metadata"]["namespace"] = namespace
        return self

    def gang(self, min_count: int) -> Self:
        self.raw["spec"]["schedulingPolicy"] = {"gang": {"minCount": min_count}}
        return self

    def basic(self) -> Self:
        self.raw["spec"]["schedulingPolicy"] = {"basic": {}}
        return self

    def priority(self, value: int) -> Self:
        self.raw["spec"]["priority"] = value
        return self

    def priority_class(self, name: str) -> Self:
        self.raw["spec"]["priorityClassName"] = name
        return self

    def disruption_mode(self, mode: str) -> Self:
        self.raw["spec"]["disruptionMode"] = mode
        return self

    def queue(self, name: str) -> Self:
        self.raw["spec"]["queueName"] = name
        return self

    def native(self) -> Self:
        """The upstream `scheduling.k8s.io/v1alpha2` kind instead of ours."""
        self.raw["apiVersion"] = NATIVE_API_VERSION
        return self

    def spec_field(self, name: str, value: Any) -> Self:
        """Any other `spec` field as JSON (`schedulingConstraints`, `resourceClaims`)."""
        self.raw["spec"][name] = value
        return self


class QueueWrapper(_Builder[Queue]):
    model = Queue

    def __init__(self, name: str) -> None:
        self.raw: dict[str, Any] = {"apiVersion": API_VERSION, "kind": "Queue", "metadata": {"name": name}, "spec": {}}

    def parent(self, name: str) -> Self:
        self.raw["spec"]["parentQueue"] = name
        return self

    def preempt_min_runtime(self, duration: str) -> Self:
        self.raw["spec"]["preemptMinRuntime"] = duration
        return self

    def reclaim_min_runtime(self, duration: str) -> Self:
        self.raw["spec"]["reclaimMinRuntime"] = duration
        return self


class PriorityClassWrapper(_Builder[PriorityClass]):
    model = PriorityClass

    def __init__(self, name: str, value: int) -> None:
        self.raw: dict[str, Any] = {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": name},
            "value": value,
        }

    def global_default(self) -> Self:
        self.raw["globalDefault"] = True
        return self

    def never(self) -> Self:
        self.raw["preemptionPolicy"] = "Never"
        return self

    def annotate(self, key: str, value: str) -> Self:
        self.raw["metadata"].setdefault("annotations", {})[key] = value
        return self


def make_pod(name: str) -> PodWrapper:
    return PodWrapper(name)


def make_node(name: str) -> NodeWrapper:
    return NodeWrapper(name)


def make_podgroup(name: str) -> PodGroupWrapper:
    return PodGroupWrapper(name)


def make_queue(name: str) -> QueueWrapper:
    return QueueWrapper(name)


def make_priority_class(name: str, value: int) -> PriorityClassWrapper:
    return PriorityClassWrapper(name, value)


def make_config(**fields: Any) -> SchedulerConfiguration:
    return SchedulerConfiguration.model_validate(
        {"apiVersion": API_VERSION, "kind": "SchedulerConfiguration", **fields}
    )


def yaml_documents(objects: Iterable[ApiModel | dict[str, Any]]) -> str:
    """A multi-document YAML scenario, as `phalanx simulate` reads it."""
    docs = [o.to_json() if isinstance(o, ApiModel) else o for o in objects]
    return yaml.safe_dump_all(docs, sort_keys=False)


class ClaimWrapper(_Builder[PersistentVolumeClaim]):
    """A PersistentVolumeClaim in `default`, ReadWriteOnce, 1Gi, not bound."""

    model = PersistentVolumeClaim

    def __init__(self, name: str) -> None:
        self.raw: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": "default", "creationTimestamp": _ts(EPOCH)},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
            "status": {"phase": "Pending"},
        }

    def ns(self, namespace: str) -> Self:
        self.raw["metadata"]["namespace"] = namespace
        return self

    def storage_class(self, name: str) -> Self:
        self.raw["spec"]["storageClassName"] = name
        return self

    def access(self, *modes: str) -> Self:
        self.raw["spec"]["accessModes"] = list(modes)
        return self

    def size(self, storage: str) -> Self:
        self.raw["spec"]["resources"]["requests"]["storage"] = storage
        return self

    def bound(self, volume: str) -> Self:
        """Bound to `volume` by the PV controller, as a cluster shows it."""
        self.raw["spec"]["volumeName"] = volume
        self.raw["metadata"].setdefault("annotations", {})[ANN_BIND_COMPLETED] = "yes"
        self.raw["status"]["phase"] = "Bound"
        return self

    def prebound(self, volume: str) -> Self:
        """Names `volume` but not bound yet."""
        self.raw["spec"]["volumeName"] = volume
        return self

    def phase(self, phase: str) -> Self:
        self.raw["status"]["phase"] = phase
        return self

    def for_pod(self, pod: str, uid: str | None = None) -> Self:
        """Owned by the pod, as the ephemeral volume controller makes a generic ephemeral volume's claim."""
        owner = {"apiVersion": "v1", "kind": "Pod", "name": pod, "controller": True, "blockOwnerDeletion": True}
        if uid is not None:
            owner["uid"] = uid
        self.raw["metadata"].setdefault("ownerReferences", []).append(owner)
        return self

    def deleting(self) -> Self:
        self.raw["metadata"]["deletionTimestamp"] = _ts(EPOCH)
        self.raw["metadata"]["finalizers"] = ["kubernetes.io/pvc-protection"]
        return self

    def selected_node(self, node: str) -> Self:
        """Annotated by a scheduler with the node its volume is to be provisioned on."""
        self.raw["metadata"].setdefault("annotations", {})[ANN_SELECTED_NODE] = node
        return self

    def block(self) -> Self:
        self.raw["spec"]["volumeMode"] = "Block"
        return self

    def selector(self, **labels: str) -> Self:
        self.raw["spec"]["selector"] = {"matchLabels": labels}
        return self

    def uid(self, uid: str) -> Self:
        self.raw["metadata"]["uid"] = uid
        return self


class VolumeWrapper(_Builder[PersistentVolume]):
    """A PersistentVolume of 1Gi, ReadWriteOnce, a local path, usable from any node."""

    model = PersistentVolume

    def __init__(self, name: str) -> None:
        self.raw: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": name, "creationTimestamp": _ts(EPOCH)},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteOnce"],
                "hostPath": {"path": f"/mnt/{name}"},
            },
            "status": {"phase": "Available"},
        }

    def storage_class(self, name: str) -> Self:
        self.raw["spec"]["storageClassName"] = name
        return self

    def label(self, key: str, value: str) -> Self:
        self.raw["metadata"].setdefault("labels", {})[key] = value
        return self

    def node_affinity(self, key: str, *values: str, operator: str = "In") -> Self:
        """Add a required node selector term (terms are ORed)."""
        terms = self.raw["spec"].setdefault("nodeAffinity", {}).setdefault("required", {})
        expression = {"key": key, "operator": operator, "values": list(values)}
        terms.setdefault("nodeSelectorTerms", []).append({"matchExpressions": [expression]})
        return self

    def local_to(self, *hostnames: str) -> Self:
        """A local volume on the nodes of these `kubernetes.io/hostname` labels."""
        self.raw["spec"].pop("hostPath", None)
        self.raw["spec"]["local"] = {"path": "/mnt/disk"}
        return self.node_affinity("kubernetes.io/hostname", *hostnames)

    def csi(self, driver: str, handle: str | None = None) -> Self:
        self.raw["spec"].pop("hostPath", None)
        self.raw["spec"]["csi"] = {"driver": driver, "volumeHandle": handle or self.raw["metadata"]["name"]}
        return self

    def source(self, **source: Any) -> Self:
        """Another source, as on the wire: `source(awsElasticBlockStore={"volumeID": "vol-1"})`."""
        self.raw["spec"].pop("hostPath", None)
        self.raw["spec"].update(source)
        return self

    def claimed_by(self, claim: str, namespace: str = "default") -> Self:
        self.raw["spec"]["claimRef"] = {"kind": "PersistentVolumeClaim", "namespace": namespace, "name": claim}
        self.raw["status"]["phase"] = "Bound"
        return self

    def prebound(self, claim: str, namespace: str = "default") -> Self:
        """Its claimRef names the claim, which is not bound to it yet (still Available)."""
        self.raw["spec"]["claimRef"] = {"kind": "PersistentVolumeClaim", "namespace": namespace, "name": claim}
        return self

    def size(self, storage: str) -> Self:
        self.raw["spec"]["capacity"]["storage"] = storage
        return self

    def access(self, *modes: str) -> Self:
        self.raw["spec"]["accessModes"] = list(modes)
        return self

    def block(self) -> Self:
        self.raw["spec"]["volumeMode"] = "Block"
        return self

    def deleting(self) -> Self:
        self.raw["metadata"]["deletionTimestamp"] = _ts(EPOCH)
        self.raw["metadata"]["finalizers"] = ["kubernetes.io/pv-protection"]
        return self


class StorageClassWrapper(_Builder[StorageClass]):
    model = StorageClass

    def __init__(self, name: str, provisioner: str) -> None:
        self.raw: dict[str, Any] = {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": name, "creationTimestamp": _ts(EPOCH)},
            "provisioner": provisioner,
            "volumeBindingMode": "Immediate",
        }

    def wait_for_first_consumer(self) -> Self:
        self.raw["volumeBindingMode"] = "WaitForFirstConsumer"
        return self

    def allowed_topology(self, key: str, *values: str) -> Self:
        """Add a term of `allowedTopologies` (terms are ORed)."""
        term = {"matchLabelExpressions": [{"key": key, "values": list(values)}]}
        self.raw.setdefault("allowedTopologies", []).append(term)
        return self

    def default(self) -> Self:
        self.raw["metadata"].setdefault("annotations", {})[ANN_DEFAULT_CLASS] = "true"
        return self


class CSINodeWrapper(_Builder[CSINode]):
    model = CSINode

    def __init__(self, node: str) -> None:
        self.raw: dict[str, Any] = {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "CSINode",
            "metadata": {"name": node, "creationTimestamp": _ts(EPOCH)},
            "spec": {"drivers": []},
        }

    def driver(self, name: str, count: int | None = None) -> Self:
        """The node runs CSI driver `name`, which can attach `count` volumes there (None: no limit said)."""
        entry: dict[str, Any] = {"name": name, "nodeID": self.raw["metadata"]["name"], "topologyKeys": None}
        if count is not None:
            entry["allocatable"] = {"count": count}
        self.raw["spec"]["drivers"].append(entry)
        return self

    def migrated(self, *plugins: str) -> Self:
        """The in-tree plugins (`kubernetes.io/aws-ebs`, ...) whose volumes this node's CSI drivers take over."""
        self.raw["metadata"].setdefault("annotations", {})[ANN_MIGRATED_PLUGINS] = ",".join(plugins)
        return self


def make_claim(name: str) -> ClaimWrapper:
    return ClaimWrapper(name)


def make_volume(name: str) -> VolumeWrapper:
    return VolumeWrapper(name)


def make_storage_class(name: str, provisioner: str = "kubernetes.io/no-provisioner") -> StorageClassWrapper:
    return StorageClassWrapper(name, provisioner)


def make_csi_node(node: str) -> CSINodeWrapper:
    return CSINodeWrapper(node)


class NamespaceWrapper(_Builder[Namespace]):
    model = Namespace

    def __init__(self, name: str) -> None:
        self.raw: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": name, "creationTimestamp": _ts(EPOCH)},
        }

    def label(self, key: str, value: str) -> Self:
        self.raw["metadata"].setdefault("labels", {})[key] = value
        return self


def make_namespace(name: str) -> NamespaceWrapper:
    return NamespaceWrapper(name)
