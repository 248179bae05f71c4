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
from scheduler.api.meta import ApiModel
from scheduler.api.node import Node
from scheduler.api.pod import POD_GROUP_LABEL, QUEUE_LABEL, Pod
from scheduler.api.pod_group import API_VERSION, NATIVE_API_VERSION, PodGroup
from scheduler.api.priority_class import PriorityClass
from scheduler.api.queue import Queue

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

    def created(self, when: datetime) -> Self:
        self.raw["metadata"]["creationTimestamp"] = _ts(when)
        return self

    def uid(self, uid: str) -> Self:
        self.raw["metadata"]["uid"] = uid
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
