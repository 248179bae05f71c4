"""Shared pieces of every Kubernetes object: metadata, conditions, label selectors.

Models accept the JSON the API server sends (camelCase keys) and keep fields they do not declare
(`extra="allow"`), so an object read, changed and written back loses nothing.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel


def rfc3339(when: datetime) -> str:
    """A timestamp as Kubernetes writes one (`metav1.Time`): UTC, whole seconds, `Z`."""
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class ApiModel(BaseModel):
    """Base of every API model: camelCase on the wire, snake_case in Python, unknown keys kept."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="allow", validate_assignment=False)

    def to_json(self) -> dict[str, Any]:
        """The object as the API server would send it (only fields that were set)."""
        return self.model_dump(by_alias=True, exclude_unset=True, mode="json")


class ValueModel(ApiModel):
    """A part of an object with no identity of its own (a container, a toleration, an affinity term): two equal
    ones are interchangeable, so the scheduler's cache keeps one object for all of them (`kube.footprint`). One that
    holds a model of another class (an ephemeral volume's claim template, with its metadata) is kept as it is."""

    shared_by_value: ClassVar[bool] = True


class OwnerReference(ValueModel):
    api_version: str = ""
    kind: str = ""
    name: str = ""
    uid: str = ""
    controller: bool | None = None


class ObjectMeta(ApiModel):
    name: str = ""
    namespace: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    generation: int | None = None
    creation_timestamp: datetime | None = None
    deletion_timestamp: datetime | None = None
    deletion_grace_period_seconds: int | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    owner_references: list[OwnerReference] = Field(default_factory=list)
    finalizers: list[str] = Field(default_factory=list)


DISRUPTION_TARGET = "DisruptionTarget"
"""The condition preemption sets on a victim pod and on a preempted PodGroup (upstream `v1.DisruptionTarget`)."""


class Condition(ValueModel):
    """A status condition (`metav1.Condition` and the Pod's own `PodCondition` share these keys)."""

    type: str
    status: str
    reason: str | None = None
    message: str | None = None
    last_transition_time: datetime | None = None
    last_probe_time: datetime | None = None
    observed_generation: int | None = None


class LabelSelectorRequirement(ValueModel):
    key: str
    operator: str
    values: list[str] = Field(default_factory=list)


class LabelSelector(ValueModel):
    match_labels: dict[str, str] = Field(default_factory=dict)
    match_expressions: list[LabelSelectorRequirement] = Field(default_factory=list)

    def matches(self, labels: dict[str, str]) -> bool:
        """`metav1.LabelSelector` semantics: every label and every expression must hold."""
        if any(labels.get(key) != value for key, value in self.match_labels.items()):
            return False
        for expr in self.match_expressions:
            present = expr.key in labels
            if expr.operator == "In" and not (present and labels[expr.key] in expr.values):
                return False
            if expr.operator == "NotIn" and present and labels[expr.key] in expr.values:
                return False
            if expr.operator == "Exists" and not present:
                return False
            if expr.operator == "DoesNotExist" and present:
                return False
        return True
