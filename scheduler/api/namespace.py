"""Namespace (v1): only its labels matter to scheduling, which a pod affinity term's `namespaceSelector` selects by.

The API server labels every Namespace `kubernetes.io/metadata.name: <name>` (and keeps the label so on every
update); `labels` reads a hand-written one the same way.
"""

from __future__ import annotations

from pydantic import Field

from scheduler.api.meta import ApiModel, ObjectMeta

METADATA_NAME = "kubernetes.io/metadata.name"


class Namespace(ApiModel):
    api_version: str = "v1"
    kind: str = "Namespace"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)

    @property
    def labels(self) -> dict[str, str]:
        """The labels as the API server keeps them, `kubernetes.io/metadata.name` included."""
        labels = self.metadata.labels
        if labels.get(METADATA_NAME) == self.metadata.name:
            return labels
        return {**labels, METADATA_NAME: self.metadata.name}
