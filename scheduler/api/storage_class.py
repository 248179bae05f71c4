"""StorageClass (storage.k8s.io/v1): when a claim of the class is bound, and where it may be provisioned.

`volumeBindingMode` is defaulted to `Immediate` by the API server; a hand-written class without it is read
the same way. The class marked `storageclass.kubernetes.io/is-default-class` is what the DefaultStorageClass
admission plugin gives a new claim that names none.
"""

from __future__ import annotations

from pydantic import Field

from scheduler.api.meta import ApiModel, ObjectMeta

IMMEDIATE = "Immediate"
WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"
NO_PROVISIONER = "kubernetes.io/no-provisioner"
"""The provisioner of a class whose volumes are only ever made by hand (local volumes, say)."""
ANN_DEFAULT_CLASS = "storageclass.kubernetes.io/is-default-class"


class TopologySelectorLabelRequirement(ApiModel):
    key: str = ""
    values: list[str] = Field(default_factory=list)


class TopologySelectorTerm(ApiModel):
    match_label_expressions: list[TopologySelectorLabelRequirement] = Field(default_factory=list)


class StorageClass(ApiModel):
    api_version: str = "storage.k8s.io/v1"
    kind: str = "StorageClass"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    provisioner: str = ""
    volume_binding_mode: str = IMMEDIATE
    allowed_topologies: list[TopologySelectorTerm] = Field(default_factory=list)

    @property
    def is_default(self) -> bool:
        return self.metadata.annotations.get(ANN_DEFAULT_CLASS) == "true"

    @property
    def waits_for_first_consumer(self) -> bool:
        return self.volume_binding_mode == WAIT_FOR_FIRST_CONSUMER

    @property
    def provisions(self) -> bool:
        """A claim of the class can be provisioned a volume: it names a provisioner, and not the one that says no."""
        return self.provisioner not in ("", NO_PROVISIONER)
