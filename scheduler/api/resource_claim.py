"""ResourceClaim and ResourceClaimTemplate (resource.k8s.io/v1): what devices a pod asks for, and what it was given.

A claim's `spec.devices.requests` each ask for devices of one DeviceClass, `exactly` (a count, or all matching
devices) or as the `firstAvailable` of a list of subrequests; `constraints` tie requests together
(`matchAttribute`). Its `status.allocation` is the scheduler's answer (each request's devices, by driver, pool and
device name, and the nodes that can use them); `status.reservedFor` lists the pods (or the PodGroup) that may use
it. A template's claim is made by the resource claim controller and named in the pod's
`status.resourceClaimStatuses`. Shapes of Kubernetes 1.36 (`staging/src/k8s.io/api/resource/v1/types.go`).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from scheduler.api.meta import ApiModel, ObjectMeta
from scheduler.api.pod import NodeSelector

API_VERSION = "resource.k8s.io/v1"
EXACT_COUNT = "ExactCount"
ALL = "All"
CLAIM_NAME_ANNOTATION = "resource.kubernetes.io/pod-claim-name"
"""On a claim the controller made from a template: the `spec.resourceClaims[].name` it was made for."""
RESERVED_FOR_MAX = 256
"""How many consumers `status.reservedFor` may list (`ResourceClaimReservedForMaxSize`)."""


class CELDeviceSelector(ApiModel):
    expression: str = ""


class DeviceSelector(ApiModel):
    cel: CELDeviceSelector | None = None


class OpaqueDeviceConfiguration(ApiModel):
    driver: str = ""
    parameters: Any = None


class DeviceConfiguration(ApiModel):
    opaque: OpaqueDeviceConfiguration | None = None


class DeviceClaimConfiguration(DeviceConfiguration):
    requests: list[str] = Field(default_factory=list)


class DeviceToleration(ApiModel):
    key: str | None = None
    operator: str | None = None
    value: str | None = None
    effect: str | None = None
    toleration_seconds: int | None = None


class CapacityRequirements(ApiModel):
    requests: dict[str, Any] = Field(default_factory=dict)


class DeviceSubRequest(ApiModel):
    name: str = ""
    device_class_name: str = ""
    selectors: list[DeviceSelector] = Field(default_factory=list)
    allocation_mode: str | None = None
    count: int | None = None
    tolerations: list[DeviceToleration] = Field(default_factory=list)
    capacity: CapacityRequirements | None = None


class ExactDeviceRequest(DeviceSubRequest):
    """`exactly`: a subrequest with admin access (it has no name of its own)."""

    admin_access: bool | None = None


class DeviceRequest(ApiModel):
    name: str = ""
    exactly: ExactDeviceRequest | None = None
    first_available: list[DeviceSubRequest] = Field(default_factory=list)


class DeviceConstraint(ApiModel):
    requests: list[str] = Field(default_factory=list)
    match_attribute: str | None = None
    distinct_attribute: str | None = None


class DeviceClaim(ApiModel):
    requests: list[DeviceRequest] = Field(default_factory=list)
    constraints: list[DeviceConstraint] = Field(default_factory=list)
    config: list[DeviceClaimConfiguration] = Field(default_factory=list)


class ResourceClaimSpec(ApiModel):
    devices: DeviceClaim = Field(default_factory=DeviceClaim)


class DeviceRequestAllocationResult(ApiModel):
    request: str = ""
    driver: str = ""
    pool: str = ""
    device: str = ""
    admin_access: bool | None = None
    tolerations: list[DeviceToleration] = Field(default_factory=list)


class DeviceAllocationConfiguration(DeviceConfiguration):
    source: str = ""
    requests: list[str] = Field(default_factory=list)


class DeviceAllocationResult(ApiModel):
    results: list[DeviceRequestAllocationResult] = Field(default_factory=list)
    config: list[DeviceAllocationConfiguration] = Field(default_factory=list)


class AllocationResult(ApiModel):
    devices: DeviceAllocationResult = Field(default_factory=DeviceAllocationResult)
    node_selector: NodeSelector | None = None


class ResourceClaimConsumerReference(ApiModel):
    api_group: str | None = None
    resource: str = ""
    name: str = ""
    uid: str = ""


class ResourceClaimStatus(ApiModel):
    allocation: AllocationResult | None = None
    reserved_for: list[ResourceClaimConsumerReference] = Field(default_factory=list)


class ResourceClaim(ApiModel):
    api_version: str = API_VERSION
    kind: str = "ResourceClaim"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: ResourceClaimSpec = Field(default_factory=ResourceClaimSpec)
    status: ResourceClaimStatus = Field(default_factory=ResourceClaimStatus)

    @property
    def key(self) -> str:
        return f"{self.metadata.namespace or 'default'}/{self.metadata.name}"

    def reserved_for(self, consumer: ResourceClaimConsumerReference) -> bool:
        wanted = (consumer.resource, consumer.name, consumer.uid)
        return any((r.resource, r.name, r.uid) == wanted for r in self.status.reserved_for)


class ResourceClaimTemplateSpec(ApiModel):
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: ResourceClaimSpec = Field(default_factory=ResourceClaimSpec)


class ResourceClaimTemplate(ApiModel):
    api_version: str = API_VERSION
    kind: str = "ResourceClaimTemplate"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: ResourceClaimTemplateSpec = Field(default_factory=ResourceClaimTemplateSpec)

    @property
    def key(self) -> str:
        return f"{self.metadata.namespace or 'default'}/{self.metadata.name}"
