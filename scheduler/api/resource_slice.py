"""ResourceSlice (resource.k8s.io/v1): devices a DRA driver publishes, in pools, for one node, the nodes a selector
picks, or every node.

A pool may span several slices; only those of its highest `pool.generation` count, and a pool with fewer of them
than `pool.resourceSliceCount` is being updated. Each device has typed attributes (`int`, `bool`, `string`,
`version`) and capacities, keyed by qualified names (`gpu.example.com/model`; a name without a domain is the
driver's).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from scheduler.api.meta import ApiModel, ObjectMeta
from scheduler.api.pod import NodeSelector
from scheduler.api.resource_claim import API_VERSION


class DeviceAttribute(ApiModel):
    int_: int | None = Field(default=None, alias="int")
    bool_: bool | None = Field(default=None, alias="bool")
    string: str | None = None
    version: str | None = None

    def value(self) -> int | bool | str | None:
        """The one value set (a version as its string)."""
        for value in (self.int_, self.bool_, self.string, self.version):
            if value is not None:
                return value
        return None


class DeviceCapacity(ApiModel):
    value: str | int = "0"
    request_policy: Any = None


class DeviceTaint(ApiModel):
    key: str = ""
    value: str | None = None
    effect: str = ""


class Device(ApiModel):
    name: str = ""
    attributes: dict[str, DeviceAttribute] = Field(default_factory=dict)
    capacity: dict[str, DeviceCapacity] = Field(default_factory=dict)
    consumes_counters: list[Any] = Field(default_factory=list)
    node_name: str | None = None
    node_selector: NodeSelector | None = None
    all_nodes: bool | None = None
    taints: list[DeviceTaint] = Field(default_factory=list)
    binds_to_node: bool | None = None
    binding_conditions: list[str] = Field(default_factory=list)
    allow_multiple_allocations: bool | None = None


class ResourcePool(ApiModel):
    name: str = ""
    generation: int = 0
    resource_slice_count: int = 1


class ResourceSliceSpec(ApiModel):
    driver: str = ""
    pool: ResourcePool = Field(default_factory=ResourcePool)
    node_name: str | None = None
    node_selector: NodeSelector | None = None
    all_nodes: bool | None = None
    per_device_node_selection: bool | None = None
    devices: list[Device] = Field(default_factory=list)
    shared_counters: list[Any] = Field(default_factory=list)


class ResourceSlice(ApiModel):
    api_version: str = API_VERSION
    kind: str = "ResourceSlice"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: ResourceSliceSpec = Field(default_factory=ResourceSliceSpec)
