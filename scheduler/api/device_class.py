"""DeviceClass (resource.k8s.io/v1): a kind of device, by CEL selectors every request of the class adds to its own,
and configuration the allocation carries to the driver (`config`, copied into `status.allocation` as `FromClass`)."""

from __future__ import annotations

from pydantic import Field

from scheduler.api.meta import ApiModel, ObjectMeta
from scheduler.api.resource_claim import API_VERSION, DeviceConfiguration, DeviceSelector


class DeviceClassConfiguration(DeviceConfiguration):
    pass


class DeviceClassSpec(ApiModel):
    selectors: list[DeviceSelector] = Field(default_factory=list)
    config: list[DeviceClassConfiguration] = Field(default_factory=list)
    extended_resource_name: str | None = None


class DeviceClass(ApiModel):
    api_version: str = API_VERSION
    kind: str = "DeviceClass"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: DeviceClassSpec = Field(default_factory=DeviceClassSpec)
