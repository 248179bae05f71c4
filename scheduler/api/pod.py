"""Pod: the fields the scheduler reads, and the request arithmetic kube-scheduler uses.

`effective_requests` follows `k8s.io/component-helpers/resource.PodRequests`: the larger of the sum
of app containers (plus restartable sidecars) and the largest init container (plus the sidecars
started before it), plus `spec.overhead`. A container with limits but no requests requests its
limits, as API defaulting would have made it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from scheduler.api.meta import ApiModel, Condition, ObjectMeta
from scheduler.api.quantity import QuantityMap, resource_list

POD_GROUP_LABEL = "scheduling.phalanx.dev/pod-group"
QUEUE_LABEL = "scheduling.phalanx.dev/queue"


class ResourceRequirements(ApiModel):
    requests: QuantityMap = Field(default_factory=dict)
    limits: QuantityMap = Field(default_factory=dict)


class Container(ApiModel):
    name: str = ""
    resources: ResourceRequirements = Field(default_factory=ResourceRequirements)
    restart_policy: str | None = None

    def requests(self) -> dict[str, int]:
        merged = dict(self.resources.limits)
        merged.update(self.resources.requests)
        return resource_list(merged)


class NodeSelectorRequirement(ApiModel):
    key: str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]
    values: list[str] = Field(default_factory=list)


class NodeSelectorTerm(ApiModel):
    match_expressions: list[NodeSelectorRequirement] = Field(default_factory=list)
    match_fields: list[NodeSelectorRequirement] = Field(default_factory=list)


class NodeSelector(ApiModel):
    node_selector_terms: list[NodeSelectorTerm] = Field(default_factory=list)


class NodeAffinity(ApiModel):
    required_during_scheduling_ignored_during_execution: NodeSelector | None = None


class Affinity(ApiModel):
    node_affinity: NodeAffinity | None = None


class Toleration(ApiModel):
    key: str | None = None
    operator: Literal["Exists", "Equal"] | None = None
    value: str | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    toleration_seconds: int | None = None


class SchedulingGate(ApiModel):
    name: str


class SchedulingGroup(ApiModel):
    """Native `spec.schedulingGroup` (Kubernetes 1.36 with GenericWorkload)."""

    pod_group_name: str | None = None


class PodSpec(ApiModel):
    node_name: str | None = None
    scheduler_name: str | None = None
    priority: int | None = None
    priority_class_name: str | None = None
    preemption_policy: Literal["PreemptLowerPriority", "Never"] | None = None
    scheduling_gates: list[SchedulingGate] = Field(default_factory=list)
    containers: list[Container] = Field(default_factory=list)
    init_containers: list[Container] = Field(default_factory=list)
    overhead: QuantityMap = Field(default_factory=dict)
    node_selector: dict[str, str] = Field(default_factory=dict)
    affinity: Affinity | None = None
    tolerations: list[Toleration] = Field(default_factory=list)
    scheduling_group: SchedulingGroup | None = None
    termination_grace_period_seconds: int | None = None


class PodStatus(ApiModel):
    phase: str | None = None
    conditions: list[Condition] = Field(default_factory=list)
    start_time: datetime | None = None
    nominated_node_name: str | None = None


class Pod(ApiModel):
    api_version: str = "v1"
    kind: str = "Pod"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: PodSpec = Field(default_factory=PodSpec)
    status: PodStatus = Field(default_factory=PodStatus)

    @property
    def key(self) -> str:
        return f"{self.metadata.namespace or 'default'}/{self.metadata.name}"

    @property
    def pod_group_name(self) -> str | None:
        """The PodGroup this pod belongs to: our label, else the native `spec.schedulingGroup`."""
        label = self.metadata.labels.get(POD_GROUP_LABEL)
        if label:
            return label
        if self.spec.scheduling_group and self.spec.scheduling_group.pod_group_name:
            return self.spec.scheduling_group.pod_group_name
        return None

    def effective_requests(self) -> dict[str, int]:
        """Resources the pod occupies on a node, in scheduling units (see module docstring)."""
        total: dict[str, int] = {}
        for container in self.spec.containers:
            _add(total, container.requests())
        init_peak: dict[str, int] = {}
        sidecars: dict[str, int] = {}
        for container in self.spec.init_containers:
            requests = container.requests()
            if container.restart_policy == "Always":
                _add(total, requests)
                _add(sidecars, requests)
                candidate = dict(sidecars)
            else:
                candidate = dict(requests)
                _add(candidate, sidecars)
            _max(init_peak, candidate)
        _max(total, init_peak)
        _add(total, resource_list(self.spec.overhead))
        return total

    def condition(self, type_: str) -> Condition | None:
        return next((c for c in self.status.conditions if c.type == type_), None)

    def scheduled_time(self) -> datetime | None:
        """When the pod was bound: the `PodScheduled=True` transition, else `status.startTime`."""
        scheduled = self.condition("PodScheduled")
        if scheduled and scheduled.status == "True" and scheduled.last_transition_time:
            return scheduled.last_transition_time
        return self.status.start_time

    @property
    def is_terminal(self) -> bool:
        return self.status.phase in ("Succeeded", "Failed")


def _add(into: dict[str, int], other: dict[str, int]) -> None:
    for name, value in other.items():
        into[name] = into.get(name, 0) + value


def _max(into: dict[str, int], other: dict[str, int]) -> None:
    for name, value in other.items():
        into[name] = max(into.get(name, 0), value)
