"""PersistentVolumeClaim: the fields volume scheduling reads, and how kube-scheduler tells a bound claim.

A claim is bound for scheduling (`volumebinding`'s `isPVCFullyBound`) when it names its volume and the PV
controller finished binding (`pv.kubernetes.io/bind-completed`). A claim read from a cluster carries both; a
hand-written one (`phalanx simulate`) often says only `status.phase: Bound`, which is taken to mean the same:
no PV controller runs in the simulator to add the annotation. Its class is the beta annotation when set, else
`spec.storageClassName` (`component-helpers/storage/volume.GetPersistentVolumeClaimClass`).
"""

from __future__ import annotations

from pydantic import Field

from scheduler.api.meta import ApiModel, LabelSelector, ObjectMeta
from scheduler.api.quantity import QuantityMap, parse_quantity, scheduling_units

ANN_BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
ANN_SELECTED_NODE = "volume.kubernetes.io/selected-node"
ANN_STORAGE_CLASS = "volume.beta.kubernetes.io/storage-class"
"""The beta annotation that names a claim's (or a volume's) class; it wins over `storageClassName`."""
READ_WRITE_ONCE_POD = "ReadWriteOncePod"
STORAGE = "storage"


class VolumeResourceRequirements(ApiModel):
    requests: QuantityMap = Field(default_factory=dict)
    limits: QuantityMap = Field(default_factory=dict)


class PersistentVolumeClaimSpec(ApiModel):
    access_modes: list[str] = Field(default_factory=list)
    resources: VolumeResourceRequirements = Field(default_factory=VolumeResourceRequirements)
    storage_class_name: str | None = None
    volume_name: str | None = None
    volume_mode: str | None = None
    selector: LabelSelector | None = None


class PersistentVolumeClaimStatus(ApiModel):
    phase: str | None = None
    access_modes: list[str] = Field(default_factory=list)
    capacity: QuantityMap = Field(default_factory=dict)


class PersistentVolumeClaim(ApiModel):
    api_version: str = "v1"
    kind: str = "PersistentVolumeClaim"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: PersistentVolumeClaimSpec = Field(default_factory=PersistentVolumeClaimSpec)
    status: PersistentVolumeClaimStatus = Field(default_factory=PersistentVolumeClaimStatus)

    @property
    def key(self) -> str:
        return f"{self.metadata.namespace or 'default'}/{self.metadata.name}"

    @property
    def storage_class(self) -> str:
        """The claim's class name; "" for none."""
        annotated = self.metadata.annotations.get(ANN_STORAGE_CLASS)
        if annotated is not None:
            return annotated
        return self.spec.storage_class_name or ""

    @property
    def is_bound(self) -> bool:
        """Bound for scheduling: it names its volume and the binding is complete (see the module docstring)."""
        if not self.spec.volume_name:
            return False
        return ANN_BIND_COMPLETED in self.metadata.annotations or self.status.phase == "Bound"

    def requested_bytes(self) -> int:
        """`spec.resources.requests.storage` in bytes (0 when unset)."""
        value = self.spec.resources.requests.get(STORAGE)
        return scheduling_units(STORAGE, parse_quantity(value)) if value is not None else 0
