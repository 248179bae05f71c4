"""Queue: a node in the min-runtime hierarchy (cluster-scoped, phalanx extension)."""

from __future__ import annotations

from pydantic import Field

from scheduler.api.meta import ApiModel, ObjectMeta
from scheduler.api.pod_group import API_VERSION


class QueueSpec(ApiModel):
    parent_queue: str | None = None
    preempt_min_runtime: str | None = None
    reclaim_min_runtime: str | None = None


class Queue(ApiModel):
    api_version: str = API_VERSION
    kind: str = "Queue"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: QueueSpec = Field(default_factory=QueueSpec)
