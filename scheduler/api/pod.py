"""Pod: the fields the scheduler reads, and the request arithmetic kube-scheduler uses.

`effective_requests` follows `k8s.io/component-helpers/resource.PodRequests`: the larger of the sum
of app containers (plus restartable sidecars) and the largest init container (plus the sidecars
started before it), plus `spec.overhead`. A container with limits but no requests requests its
limits, as API defaulting would have made it.

A Pod's repeated fields (containers, tolerations, volumes, ...) are tuples defaulting to `()`: a pod that has none
shares the one empty tuple, where each empty list is an object of its own, and the scheduler caches every pod.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from scheduler.api.meta import ApiModel, Condition, LabelSelector, ObjectMeta, ValueModel
from scheduler.api.pod_volume import Volume
from scheduler.api.quantity import QuantityMap, resource_list

POD_GROUP_LABEL = "scheduling.phalanx.dev/pod-group"
QUEUE_LABEL = "scheduling.phalanx.dev/queue"


class ResourceRequirements(ValueModel):
    requests: QuantityMap = Field(default_factory=dict)
    limits: QuantityMap = Field(default_factory=dict)


class ContainerPort(ValueModel):
    container_port: int = 0
    host_port: int | None = None
    host_ip: str | None = Field(default=None, alias="hostIP")
    protocol: str | None = None


class Container(ValueModel):
    name: str = ""
    image: str | None = None
    resources: ResourceRequirements = Field(default_factory=ResourceRequirements)
    restart_policy: str | None = None
    ports: tuple[ContainerPort, ...] = ()

    def requests(self) -> dict[str, int]:
        merged = dict(self.resources.limits)
        merged.update(self.resources.requests)
        return resource_list(merged)


class NodeSelectorRequirement(ValueModel):
    key: str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]
    values: list[str] = Field(default_factory=list)


class NodeSelectorTerm(ValueModel):
    match_expressions: list[NodeSelectorRequirement] = Field(default_factory=list)
    match_fields: list[NodeSelectorRequirement] = Field(default_factory=list)


class NodeSelector(ValueModel):
    node_selector_terms: list[NodeSelectorTerm] = Field(default_factory=list)


class PreferredSchedulingTerm(ValueModel):
    weight: int = 0
    preference: NodeSelectorTerm = Field(default_factory=NodeSelectorTerm)


class NodeAffinity(ValueModel):
    required_during_scheduling_ignored_during_execution: NodeSelector | None = None
    preferred_during_scheduling_ignored_during_execution: list[PreferredSchedulingTerm] = Field(default_factory=list)


class PodAffinityTerm(ValueModel):
    label_selector: LabelSelector | None = None
    namespaces: list[str] = Field(default_factory=list)
    namespace_selector: LabelSelector | None = None
    topology_key: str = ""
    match_label_keys: list[str] = Field(default_factory=list)
    mismatch_label_keys: list[str] = Field(default_factory=list)


class WeightedPodAffinityTerm(ValueModel):
    weight: int = 0
    pod_affinity_term: PodAffinityTerm = Field(default_factory=PodAffinityTerm)


class PodAffinity(ValueModel):
    """`podAffinity` and `podAntiAffinity` share this shape."""

    required_during_scheduling_ignored_during_execution: list[PodAffinityTerm] = Field(default_factory=list)
    preferred_during_scheduling_ignored_during_execution: list[WeightedPodAffinityTerm] = Field(default_factory=list)


class Affinity(ValueModel):
    node_affinity: NodeAffinity | None = None
    pod_affinity: PodAffinity | None = None
    pod_anti_affinity: PodAffinity | None = None


class TopologySpreadConstraint(ValueModel):
    max_skew: int = 1
    topology_key: str = ""
    when_unsatisfiable: Literal["DoNotSchedule", "ScheduleAnyway"] = "DoNotSchedule"
    label_selector: LabelSelector | None = None
    min_domains: int | None = None
    node_affinity_policy: Literal["Honor", "Ignore"] | None = None
    node_taints_policy: Literal["Honor", "Ignore"] | None = None
    match_label_keys: list[str] = Field(default_factory=list)


class Toleration(ValueModel):
    key: str | None = None
    operator: Literal["Exists", "Equal"] | None = None
    value: str | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    toleration_seconds: int | None = None


class SchedulingGate(ValueModel):
    name: str


class SchedulingGroup(ValueModel):
    """Native `spec.schedulingGroup` (Kubernetes 1.36 with GenericWorkload)."""

    pod_group_name: str | None = None


class PodResourceClaim(ValueModel):
    """An entry of `spec.resourceClaims` (DRA): a ResourceClaim by name, or one the controller makes from a template
    (named in `status.resourceClaimStatuses`). A PodGroup's `spec.resourceClaims` entries have the same shape."""

    name: str = ""
    resource_claim_name: str | None = None
    resource_claim_template_name: str | None = None


class PodResourceClaimStatus(ApiModel):
    """The claim the controller made for a template entry of `spec.resourceClaims` (None: none was needed)."""

    name: str = ""
    resource_claim_name: str | None = None


HostPort = tuple[str, str, int]
"""A host port a pod takes on its node: (protocol, host IP, port), `0.0.0.0` for every address."""

WILDCARD_IP = "0.0.0.0"


class PodSpec(ApiModel):
    node_name: str | None = None
    scheduler_name: str | None = None
    priority: int | None = None
    priority_class_name: str | None = None
    preemption_policy: Literal["PreemptLowerPriority", "Never"] | None = None
    scheduling_gates: tuple[SchedulingGate, ...] = ()
    containers: tuple[Container, ...] = ()
    init_containers: tuple[Container, ...] = ()
    overhead: QuantityMap = Field(default_factory=dict)
    node_selector: dict[str, str] = Field(default_factory=dict)
    affinity: Affinity | None = None
    tolerations: tuple[Toleration, ...] = ()
    scheduling_group: SchedulingGroup | None = None
    termination_grace_period_seconds: int | None = None
    topology_spread_constraints: tuple[TopologySpreadConstraint, ...] = ()
    host_network: bool = False
    resource_claims: tuple[PodResourceClaim, ...] = ()
    volumes: tuple[Volume, ...] = ()


class PodStatus(ApiModel):
    phase: str | None = None
    conditions: tuple[Condition, ...] = ()
    start_time: datetime | None = None
    nominated_node_name: str | None = None
    resource_claim_statuses: tuple[PodResourceClaimStatus, ...] = ()


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

    def host_ports(self) -> tuple[HostPort, ...]:
        """The host ports the pod takes, as kube-scheduler's NodePorts reads them: its containers' and its
        sidecars' `hostPort`s (a `hostNetwork` pod's container ports, as API defaulting makes them), protocol
        TCP and host IP `0.0.0.0` when unset."""
        spec = self.spec
        ports: list[HostPort] = []
        containers = [*spec.containers, *(c for c in spec.init_containers if c.restart_policy == "Always")]
        for container in containers:
            for port in container.ports:
                number = port.host_port or (port.container_port if spec.host_network else 0)
                if number:
                    ports.append((port.protocol or "TCP", port.host_ip or WILDCARD_IP, number))
        return tuple(ports)

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
