"""PriorityClass and priority resolution, as the Priority admission plugin does it.

An unset class name takes the `globalDefault` class (the lowest value when several claim it); with
no default the priority is 0 (`scheduling.DefaultPriorityWhenNoDefaultClassExists`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from pydantic import Field

from scheduler.api.meta import ApiModel, ObjectMeta


class PriorityClass(ApiModel):
    api_version: str = "scheduling.k8s.io/v1"
    kind: str = "PriorityClass"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    value: int = 0
    global_default: bool = False
    preemption_policy: Literal["PreemptLowerPriority", "Never"] | None = None
    description: str | None = None


@dataclass(frozen=True, slots=True)
class ResolvedPriority:
    class_name: str | None
    value: int
    preemption_policy: str


class PriorityClassNotFound(LookupError):
    """A named PriorityClass does not exist; the message is the apiserver's."""

    def __init__(self, name: str) -> None:
        super().__init__(f"no PriorityClass with name {name} was found")
        self.name = name


def global_default(classes: Iterable[PriorityClass]) -> PriorityClass | None:
    """The `globalDefault` class; the lowest value wins when several claim it, then the name."""
    defaults = [pc for pc in classes if pc.global_default]
    return min(defaults, key=lambda pc: (pc.value, pc.metadata.name)) if defaults else None


def resolve_priority(class_name: str | None, classes: dict[str, PriorityClass]) -> ResolvedPriority:
    """Resolve a class name to its value; raises `PriorityClassNotFound` for an unknown name."""
    if class_name:
        found = classes.get(class_name)
        if found is None:
            raise PriorityClassNotFound(class_name)
        return ResolvedPriority(class_name, found.value, found.preemption_policy or "PreemptLowerPriority")
    default = global_default(classes.values())
    if default is None:
        return ResolvedPriority(None, 0, "PreemptLowerPriority")
    return ResolvedPriority(default.metadata.name, default.value, default.preemption_policy or "PreemptLowerPriority")
