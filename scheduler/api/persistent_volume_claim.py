"""PersistentVolumeClaim: the fields volume scheduling reads, and how kube-scheduler tells a bound claim.

A claim is bound for scheduling (`volumebinding`'s `isPVCFullyBound`) when it names its volume and the PV
controller finished binding (`pv.kubernetes.io/bind-completed`). A claim read from a cluster carries both; a
hand-written one (`phalanx simulate`) often says only `status.phase: Bound`, which is taken to mean the same:
no PV controller runs in the simulator to add the annotation. Its class is the beta annotation when set, else
`spec.storageClassName` (`component-helpers/storage/volume.GetPersistentVolumeClaimClass`).
"""

from __future__ import annotations

from fractions import Fraction

from pydantic import Field

from scheduler.api.meta import ApiModel, LabelSelector, ObjectMeta
from scheduler.api.quantity import QuantityMap, parse_quantity, scheduling_units

ANN_BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
ANN_BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
"""On a volume (or claim): a controller or a scheduler made the binding, not the user who wrote the object."""
ANN_SELECTED_NODE = "volume.kubernetes.io/selected-node"
"""On a claim of a WaitForFirstConsumer class: the node the scheduler chose, where its volume is to be provisioned."""
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
    volume_attributes_class_name: str | None = None
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

    def requested_storage(self) -> Fraction:
        """`spec.resources.requests.storage`, exact (0 when unset), as volumes' capacities are compared with it."""
        value = self.spec.resources.requests.get(STORAGE)
        return parse_quantity(value) if value is not None else Fraction(0)

    def requested_bytes(self) -> int:
        """`spec.resources.requests.storage` in bytes (0 when unset)."""
        value = self.spec.resources.requests.get(STORAGE)
        return scheduling_units(STORAGE, parse_quantity(value)) if value is not None else 0


def with_selected_node(claim: PersistentVolumeClaim, node: str) -> PersistentVolumeClaim:
    """`claim` annotated with the node its volume is to be provisioned on (the same object when it already is)."""
    if claim.metadata.annotations.get(ANN_SELECTED_NODE) == node:
        return claim
    annotations = {**claim.metadata.annotations, ANN_SELECTED_NODE: node}
    return claim.model_copy(update={"metadata": claim.metadata.model_copy(update={"annotations": annotations})})
