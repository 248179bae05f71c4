"""Node: labels, taints, cordon state and allocatable resources."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from scheduler.api.meta import ApiModel, ObjectMeta, ValueModel
from scheduler.api.quantity import QuantityMap, resource_list


class Taint(ValueModel):
    key: str
    value: str | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


class NodeSpec(ApiModel):
    unschedulable: bool = False
    taints: list[Taint] = Field(default_factory=list)


class ContainerImage(ApiModel):
    names: list[str] = Field(default_factory=list)
    size_bytes: int = 0


class NodeStatus(ApiModel):
    capacity: QuantityMap = Field(default_factory=dict)
    allocatable: QuantityMap = Field(default_factory=dict)
    images: list[ContainerImage] = Field(default_factory=list)


class Node(ApiModel):
    api_version: str = "v1"
    kind: str = "Node"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: NodeSpec = Field(default_factory=NodeSpec)
    status: NodeStatus = Field(default_factory=NodeStatus)

    def allocatable(self) -> dict[str, int]:
        """Allocatable in scheduling units; capacity stands in when the kubelet reported none."""
        return resource_list(self.status.allocatable or self.status.capacity)
