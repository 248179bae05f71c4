"""PodGroup: a set of pods scheduled, prioritised and preempted as one unit (KEP-5710).

Accepts both our CRD (`scheduling.phalanx.dev/v1alpha1`) and the native
`scheduling.k8s.io/v1alpha2` kind; the field names are the same.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from scheduler.api.meta import ApiModel, Condition, ObjectMeta
from scheduler.api.pod import PodResourceClaim, PodResourceClaimStatus

GROUP = "scheduling.phalanx.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
NATIVE_API_VERSION = "scheduling.k8s.io/v1alpha2"
LAST_START_ANNOTATION = "scheduling.phalanx.dev/last-start-timestamp"

DisruptionMode = Literal["Pod", "PodGroup"]


class GangPolicy(ApiModel):
    min_count: int


class BasicPolicy(ApiModel):
    pass


class SchedulingPolicy(ApiModel):
    basic: BasicPolicy | None = None
    gang: GangPolicy | None = None


class WorkloadTemplateRef(ApiModel):
    workload_name: str
    pod_group_template_name: str


class PodGroupTemplateRef(ApiModel):
    workload: WorkloadTemplateRef | None = None


class TopologyConstraint(ApiModel):
    key: str
    """A node label: the group's members all go to nodes with one value of it (KEP-5732)."""


class SchedulingConstraints(ApiModel):
    topology: list[TopologyConstraint] = Field(default_factory=list)
    """The native kind allows one entry. Ours allows two, narrowest first (Phalanx's extension): the group must
    fit in one domain of the last, and is placed in one domain of the first when one can take it."""


class PodGroupSpec(ApiModel):
    pod_group_template_ref: PodGroupTemplateRef | None = None
    scheduling_policy: SchedulingPolicy | None = None
    disruption_mode: DisruptionMode | None = None
    priority_class_name: str | None = None
    priority: int | None = None
    queue_name: str | None = None
    resource_claims: list[PodResourceClaim] = Field(default_factory=list)
    """Claims its members share (1.36, DRAWorkloadResourceClaims): reserved for the group, allocated once."""
    scheduling_constraints: SchedulingConstraints | None = None


class PodGroupStatus(ApiModel):
    conditions: list[Condition] = Field(default_factory=list)
    resource_claim_statuses: list[PodResourceClaimStatus] = Field(default_factory=list)


class PodGroup(ApiModel):
    api_version: str = API_VERSION
    kind: str = "PodGroup"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: PodGroupSpec = Field(default_factory=PodGroupSpec)
    status: PodGroupStatus = Field(default_factory=PodGroupStatus)

    @property
    def key(self) -> str:
        return f"{self.metadata.namespace or 'default'}/{self.metadata.name}"

    @property
    def min_count(self) -> int:
        """Members needed before any is bound: the gang's `minCount`, or 1 for a basic group."""
        policy = self.spec.scheduling_policy
        return policy.gang.min_count if policy and policy.gang else 1

    @property
    def is_gang(self) -> bool:
        policy = self.spec.scheduling_policy
        return bool(policy and policy.gang)

    @property
    def topology_keys(self) -> tuple[str, ...]:
        """The labels whose domains hold the group, narrowest first; empty when it is free to spread."""
        constraints = self.spec.scheduling_constraints
        return tuple(c.key for c in constraints.topology) if constraints else ()

    @property
    def disruption_mode(self) -> DisruptionMode:
        return self.spec.disruption_mode or "Pod"


class NativePodGroup(PodGroup):
    """The upstream kind as a watch reads it: items of a built-in kind's list carry no `apiVersion`, so where
    the object was read from says which API it belongs to (and where its status is written)."""

    api_version: str = NATIVE_API_VERSION
