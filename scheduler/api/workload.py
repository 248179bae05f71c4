"""Workload: the templates PodGroups are stamped from (KEP-4671 / scheduling.k8s.io/v1alpha2)."""

from __future__ import annotations

from pydantic import Field

from scheduler.api.meta import ApiModel, ObjectMeta
from scheduler.api.pod_group import API_VERSION, DisruptionMode, SchedulingConstraints, SchedulingPolicy

MAX_TEMPLATES = 8


class ControllerRef(ApiModel):
    api_group: str | None = None
    kind: str = ""
    name: str = ""


class PodGroupTemplate(ApiModel):
    name: str
    scheduling_policy: SchedulingPolicy | None = None
    disruption_mode: DisruptionMode | None = None
    priority_class_name: str | None = None
    priority: int | None = None
    scheduling_constraints: SchedulingConstraints | None = None


class WorkloadSpec(ApiModel):
    controller_ref: ControllerRef | None = None
    pod_group_templates: list[PodGroupTemplate] = Field(default_factory=list)


class Workload(ApiModel):
    api_version: str = API_VERSION
    kind: str = "Workload"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: WorkloadSpec = Field(default_factory=WorkloadSpec)

    def template(self, name: str) -> PodGroupTemplate | None:
        return next((t for t in self.spec.pod_group_templates if t.name == name), None)
