"""PersistentVolume: where a volume can be used (node affinity, zone labels) and which CSI driver attaches it.

Only what scheduling reads is declared; every other source and field is kept as it came (`extra="allow"`).
The in-tree sources that kube-scheduler counts only through their CSI translation (`csi-translation-lib`)
are named in `MIGRATED_SOURCES`, with the CSI driver each is counted against.
"""

from __future__ import annotations

from pydantic import Field

from scheduler.api.meta import ApiModel, ObjectMeta
from scheduler.api.persistent_volume_claim import ANN_STORAGE_CLASS
from scheduler.api.pod import NodeSelector
from scheduler.api.quantity import QuantityMap

MIGRATED_SOURCES: dict[str, str] = {
    "awsElasticBlockStore": "ebs.csi.aws.com",
    "gcePersistentDisk": "pd.csi.storage.gke.io",
    "azureDisk": "disk.csi.azure.com",
    "azureFile": "file.csi.azure.com",
    "cinder": "cinder.csi.openstack.org",
    "vsphereVolume": "csi.vsphere.vmware.com",
    "portworxVolume": "pxd.portworx.com",
}
"""In-tree volume sources (as the wire names them) and the CSI driver each is migrated to."""


class ObjectReference(ApiModel):
    kind: str | None = None
    namespace: str | None = None
    name: str | None = None
    uid: str | None = None


class VolumeNodeAffinity(ApiModel):
    required: NodeSelector | None = None


class CSIPersistentVolumeSource(ApiModel):
    driver: str = ""
    volume_handle: str = ""
    read_only: bool | None = None


class PersistentVolumeSpec(ApiModel):
    capacity: QuantityMap = Field(default_factory=dict)
    access_modes: list[str] = Field(default_factory=list)
    storage_class_name: str | None = None
    claim_ref: ObjectReference | None = None
    node_affinity: VolumeNodeAffinity | None = None
    csi: CSIPersistentVolumeSource | None = None
    volume_mode: str | None = None


class PersistentVolumeStatus(ApiModel):
    phase: str | None = None


class PersistentVolume(ApiModel):
    api_version: str = "v1"
    kind: str = "PersistentVolume"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: PersistentVolumeSpec = Field(default_factory=PersistentVolumeSpec)
    status: PersistentVolumeStatus = Field(default_factory=PersistentVolumeStatus)

    @property
    def storage_class(self) -> str:
        annotated = self.metadata.annotations.get(ANN_STORAGE_CLASS)
        if annotated is not None:
            return annotated
        return self.spec.storage_class_name or ""

    def migrated_source(self) -> str | None:
        """The in-tree source this volume uses that kube-scheduler counts through CSI migration, if any."""
        extra = self.spec.model_extra or {}
        return next((name for name in MIGRATED_SOURCES if extra.get(name) is not None), None)
