"""A pod's `spec.volumes`: the sources volume scheduling reads, the others kept as they came.

A volume names its claim directly (`persistentVolumeClaim.claimName`) or through a generic ephemeral volume,
whose claim the ephemeral volume controller creates as `<pod name>-<volume name>`, owned by the pod
(`component-helpers/storage/ephemeral`). The inline sources that conflict between pods on one node (GCE PD,
AWS EBS, iSCSI, Ceph RBD: VolumeRestrictions) are declared; the rest are kept as extras, and `SOURCES` lists
every source Kubernetes 1.36 defines, so that one it does not is noticed rather than ignored.
"""

from __future__ import annotations

from pydantic import Field

from scheduler.api.meta import ApiModel, ObjectMeta, OwnerReference, ValueModel
from scheduler.api.persistent_volume_claim import PersistentVolumeClaimSpec

SOURCES = frozenset(
    {
        "hostPath", "emptyDir", "gcePersistentDisk", "awsElasticBlockStore", "gitRepo", "secret", "nfs", "iscsi",
        "glusterfs", "persistentVolumeClaim", "rbd", "flexVolume", "cinder", "cephfs", "flocker", "downwardAPI",
        "fc", "azureFile", "configMap", "vsphereVolume", "quobyte", "azureDisk", "photonPersistentDisk", "projected",
        "portworxVolume", "scaleIO", "storageos", "csi", "ephemeral", "image",
    }
)  # fmt: skip
"""The volume sources of `core/v1.Volume` in Kubernetes 1.36, as the wire names them."""


class PersistentVolumeClaimVolumeSource(ValueModel):
    claim_name: str = ""
    read_only: bool | None = None


class PersistentVolumeClaimTemplate(ApiModel):
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: PersistentVolumeClaimSpec = Field(default_factory=PersistentVolumeClaimSpec)


class EphemeralVolumeSource(ApiModel):
    volume_claim_template: PersistentVolumeClaimTemplate | None = None


class CSIVolumeSource(ValueModel):
    driver: str = ""
    read_only: bool | None = None


class GCEPersistentDiskVolumeSource(ValueModel):
    pd_name: str = ""
    read_only: bool | None = None


class AWSElasticBlockStoreVolumeSource(ValueModel):
    volume_id: str = Field(default="", alias="volumeID")
    read_only: bool | None = None


class ISCSIVolumeSource(ValueModel):
    iqn: str = ""
    read_only: bool | None = None


class RBDVolumeSource(ValueModel):
    monitors: list[str] = Field(default_factory=list)
    image: str = ""
    pool: str = "rbd"
    """`rbd` is the API default."""
    read_only: bool | None = None


class Volume(ValueModel):
    name: str = ""
    persistent_volume_claim: PersistentVolumeClaimVolumeSource | None = None
    ephemeral: EphemeralVolumeSource | None = None
    csi: CSIVolumeSource | None = None
    gce_persistent_disk: GCEPersistentDiskVolumeSource | None = None
    aws_elastic_block_store: AWSElasticBlockStoreVolumeSource | None = None
    iscsi: ISCSIVolumeSource | None = None
    rbd: RBDVolumeSource | None = None

    def sources(self) -> list[str]:
        """The wire names of the sources set on this volume (one, on a valid pod)."""
        declared = [
            (Volume.model_fields[name].alias or name)
            for name in Volume.model_fields
            if name != "name" and getattr(self, name) is not None
        ]
        return declared + [key for key, value in (self.model_extra or {}).items() if value is not None]


def claim_name(pod_name: str, volume: Volume) -> str | None:
    """The claim a volume uses: its `claimName`, or `<pod>-<volume>` for a generic ephemeral one; None for none."""
    if volume.persistent_volume_claim is not None:
        return volume.persistent_volume_claim.claim_name
    if volume.ephemeral is not None:
        return f"{pod_name}-{volume.name}"
    return None


def owned_by(owners: list[OwnerReference], pod_name: str, uid: str | None) -> bool:
    """Whether a generic ephemeral volume's claim was made for this pod: the pod is its controller
    (`metav1.IsControlledBy`). A hand-written owner reference without a uid names the pod instead: a scenario's
    pods get their uid only when `phalanx simulate` reads them."""
    return any(o.controller and (o.uid == uid if o.uid else (o.kind == "Pod" and o.name == pod_name)) for o in owners)
