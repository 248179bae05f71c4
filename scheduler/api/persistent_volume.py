"""PersistentVolume: where a volume can be used (node affinity, zone labels) and which CSI driver attaches it.

Only what scheduling reads is declared; every other source and field is kept as it came (`extra="allow"`).
The in-tree sources that kube-scheduler counts only through their CSI translation (`csi-translation-lib`)
are named in `MIGRATED_SOURCES`, with the CSI driver each is counted against.
"""

from __future__ import annotations

from fractions import Fraction

from pydantic import Field

from scheduler.api.meta import ApiModel, ObjectMeta
from scheduler.api.persistent_volume_claim import (
    ANN_BOUND_BY_CONTROLLER,
    ANN_STORAGE_CLASS,
    STORAGE,
    PersistentVolumeClaim,
)
from scheduler.api.pod import NodeSelector
from scheduler.api.quantity import QuantityMap, parse_quantity

AVAILABLE = "Available"

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
    api_version: str | None = None
    kind: str | None = None
    namespace: str | None = None
    name: str | None = None
    uid: str | None = None
    resource_version: str | None = None


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
    volume_attributes_class_name: str | None = None


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

    @property
    def capacity(self) -> Fraction:
        """`spec.capacity.storage`, exact (0 when unset)."""
        value = self.spec.capacity.get(STORAGE)
        return parse_quantity(value) if value is not None else Fraction(0)

    @property
    def available(self) -> bool:
        """Phase Available: free for any claim. A hand-written volume that says no phase and names no claim is
        taken to be, as the PV controller would make it on a cluster (none runs in the simulator)."""
        phase = self.status.phase
        return phase == AVAILABLE or (phase is None and self.spec.claim_ref is None)

    def bound_to(self, claim: PersistentVolumeClaim) -> bool:
        """`IsVolumeBoundToClaim`: its claimRef names the claim (and its uid, when it says one): bound, or pre-bound
        by a user or a scheduler."""
        ref = self.spec.claim_ref
        if ref is None or ref.name != claim.metadata.name:
            return False
        if (ref.namespace or "default") != (claim.metadata.namespace or "default"):
            return False
        return not ref.uid or ref.uid == claim.metadata.uid

    def migrated_source(self) -> str | None:
        """The in-tree source this volume uses that kube-scheduler counts through CSI migration, if any."""
        extra = self.spec.model_extra or {}
        return next((name for name in MIGRATED_SOURCES if extra.get(name) is not None), None)


def claim_reference(claim: PersistentVolumeClaim) -> ObjectReference:
    """A volume's claimRef to `claim`, as `reference.GetReference` makes it (its uid and resourceVersion too)."""
    meta = claim.metadata
    return ObjectReference(
        api_version="v1",
        kind="PersistentVolumeClaim",
        namespace=meta.namespace or "default",
        name=meta.name,
        uid=meta.uid,
        resource_version=meta.resource_version,
    )


def bound_to_claim(volume: PersistentVolume, claim: PersistentVolumeClaim) -> PersistentVolume:
    """`volume` bound to `claim` as a scheduler binds it (`GetBindVolumeToClaim`): its claimRef names the claim, and
    `pv.kubernetes.io/bound-by-controller` says the binding is not the user's, unless the user had made it. The
    same object when it already is."""
    ref = volume.spec.claim_ref
    meta = claim.metadata
    same = (
        ref is not None
        and ref.name == meta.name
        and (ref.namespace or "default") == (meta.namespace or "default")
        and (ref.uid or None) == (meta.uid or None)
    )
    annotate = not volume.bound_to(claim) and ANN_BOUND_BY_CONTROLLER not in volume.metadata.annotations
    if same and not annotate:
        return volume
    changes: dict[str, object] = {}
    if not same:
        changes["spec"] = volume.spec.model_copy(update={"claim_ref": claim_reference(claim)})
    if annotate:
        annotations = {**volume.metadata.annotations, ANN_BOUND_BY_CONTROLLER: "yes"}
        changes["metadata"] = volume.metadata.model_copy(update={"annotations": annotations})
    return volume.model_copy(update=changes)
