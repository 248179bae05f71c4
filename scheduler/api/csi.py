"""CSINode and CSIDriver (storage.k8s.io/v1): the CSI drivers each node runs, and what each driver needs.

A CSINode is named after its Node; each driver entry may say how many of the driver's volumes the node can
attach (`allocatable.count`), the limit NodeVolumeLimits enforces.
"""

from __future__ import annotations

from pydantic import Field

from scheduler.api.meta import ApiModel, ObjectMeta

ANN_MIGRATED_PLUGINS = "storage.alpha.kubernetes.io/migrated-plugins"


class VolumeNodeResources(ApiModel):
    count: int | None = None


class CSINodeDriver(ApiModel):
    name: str = ""
    node_id: str | None = Field(default=None, alias="nodeID")
    topology_keys: list[str] | None = None
    allocatable: VolumeNodeResources | None = None


class CSINodeSpec(ApiModel):
    drivers: list[CSINodeDriver] = Field(default_factory=list)


class CSINode(ApiModel):
    api_version: str = "storage.k8s.io/v1"
    kind: str = "CSINode"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: CSINodeSpec = Field(default_factory=CSINodeSpec)

    def limits(self) -> dict[str, int]:
        """Driver name -> how many of its volumes the node can attach, for the drivers that say."""
        return {
            d.name: d.allocatable.count
            for d in self.spec.drivers
            if d.allocatable is not None and d.allocatable.count is not None
        }


class CSIDriverSpec(ApiModel):
    attach_required: bool | None = None
    storage_capacity: bool | None = None
    volume_lifecycle_modes: list[str] = Field(default_factory=list)


class CSIDriver(ApiModel):
    api_version: str = "storage.k8s.io/v1"
    kind: str = "CSIDriver"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: CSIDriverSpec = Field(default_factory=CSIDriverSpec)

    @property
    def attach_required(self) -> bool:
        """The API default is true: a driver that does not say needs its volumes attached."""
        return self.spec.attach_required is not False
