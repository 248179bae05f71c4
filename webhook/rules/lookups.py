"""What the rules need to read from the cluster, as a Protocol, plus an in-memory implementation.

The webhook satisfies it with a watch-backed cache (`webhook/lookups.py`); `phalanx simulate` and tests
with `MemoryLookups` built from scenario objects. Workloads and PodGroups are keyed by apiVersion too,
because ours (`scheduling.phalanx.dev`) and the native ones (`scheduling.k8s.io`) are different objects.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from scheduler.api.meta import ApiModel
from scheduler.api.pod_group import PodGroup
from scheduler.api.priority_class import PriorityClass
from scheduler.api.queue import Queue
from scheduler.api.workload import Workload


class Lookups(Protocol):
    """Read access to the objects admission depends on; may raise `LookupFailed`."""

    def priority_class(self, name: str) -> PriorityClass | None: ...

    def priority_classes(self) -> list[PriorityClass]: ...

    def workload(self, api_version: str, namespace: str, name: str) -> Workload | None: ...

    def pod_group(self, api_version: str, namespace: str, name: str) -> PodGroup | None: ...

    def queue(self, name: str) -> Queue | None: ...


def _namespace(obj: ApiModel) -> str:
    meta = getattr(obj, "metadata", None)
    return (meta.namespace if meta else None) or "default"


@dataclass
class MemoryLookups:
    """Lookups over objects held in memory; `add` replaces an object of the same identity."""

    classes: dict[str, PriorityClass] = field(default_factory=dict)
    workloads: dict[tuple[str, str, str], Workload] = field(default_factory=dict)
    pod_groups: dict[tuple[str, str, str], PodGroup] = field(default_factory=dict)
    queues: dict[str, Queue] = field(default_factory=dict)

    @classmethod
    def of(cls, objects: Iterable[ApiModel]) -> MemoryLookups:
        lookups = cls()
        for obj in objects:
            lookups.add(obj)
        return lookups

    def add(self, obj: ApiModel) -> None:
        """Remember a PriorityClass, Workload, PodGroup or Queue; other kinds are ignored."""
        if isinstance(obj, PriorityClass):
            self.classes[obj.metadata.name] = obj
        elif isinstance(obj, Workload):
            self.workloads[(obj.api_version, _namespace(obj), obj.metadata.name)] = obj
        elif isinstance(obj, PodGroup):
            self.pod_groups[(obj.api_version, _namespace(obj), obj.metadata.name)] = obj
        elif isinstance(obj, Queue):
            self.queues[obj.metadata.name] = obj

    def priority_class(self, name: str) -> PriorityClass | None:
        return self.classes.get(name)

    def priority_classes(self) -> list[PriorityClass]:
        return list(self.classes.values())

    def workload(self, api_version: str, namespace: str, name: str) -> Workload | None:
        return self.workloads.get((api_version, namespace, name))

    def pod_group(self, api_version: str, namespace: str, name: str) -> PodGroup | None:
        return self.pod_groups.get((api_version, namespace, name))

    def queue(self, name: str) -> Queue | None:
        return self.queues.get(name)
