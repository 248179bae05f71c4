"""PodInfo and the scheduling/victim units built from pods: the plain data the algorithm works on.

A PodInfo is computed once per pod (requests parsed, priority resolved) so plugins never re-parse
quantities or walk PriorityClasses in a hot loop. Its `priority` is the effective one: the PodGroup's
for a member, whatever the pod's own class says (docs/DESIGN.md, API: Priority).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from scheduler.api.pod import QUEUE_LABEL, HostPort, Pod
from scheduler.api.pod_group import PodGroup
from scheduler.framework.unit_key import group_unit


@dataclass(frozen=True, slots=True)
class PodInfo:
    pod: Pod
    key: str
    requests: Mapping[str, int]
    """Read only: pods of one template share it (`SnapshotBuilder`)."""
    priority: int
    priority_class_name: str | None
    preemption_policy: str
    group_key: str | None
    node_name: str | None
    created_at: datetime
    scheduled_at: datetime | None
    host_ports: tuple[HostPort, ...] = ()
    """`Pod.host_ports`, read once: NodePorts looks at every pod on a node."""
    pod_affinity: bool = False
    """Whether the pod has pod affinity or anti-affinity terms: InterPodAffinity looks at every pod on a node."""
    namespace: str = "default"
    labels: dict[str, str] = field(default_factory=dict)
    """The pod's namespace and labels, read once: pod terms match them against every pod of a node."""


@dataclass(frozen=True, slots=True)
class SchedulingUnit:
    """What one scheduling cycle places: a lone pod, or every pending member of a PodGroup."""

    members: tuple[PodInfo, ...]
    group: PodGroup | None
    min_count: int
    priority: int
    preemption_policy: str
    spares_claims: bool = False
    """Other pod groups' nominations hold against this unit whatever their priority (`Snapshot.holds_room`): a
    gang's first try, so that it does not take the room another gang's preemption already paid for
    (the Placement plugin that spares claims, `WorkloadPreemption.place`)."""
    key: str = field(init=False)
    """The unit key (`framework/unit_key.py`): `podgroup/namespace/name`, or the lone pod's key. Made from the
    group or the first member, so that it cannot disagree with them; kept, as a pass reads it for every unit."""

    def __post_init__(self) -> None:
        key = group_unit(self.group.key) if self.group is not None else self.members[0].key
        object.__setattr__(self, "key", key)

    @property
    def is_group(self) -> bool:
        return self.group is not None

    @property
    def name(self) -> str:
        """The PodGroup's or the lone pod's `namespace/name`, as messages and Events name the unit."""
        return self.group.key if self.group is not None else self.members[0].key


@dataclass(frozen=True, slots=True)
class VictimUnit:
    """What preemption removes at once: a pod, or all scheduled pods of a `PodGroup`-mode group."""

    key: str
    pods: tuple[PodInfo, ...]
    group: PodGroup | None
    priority: int
    started_at: datetime | None

    @property
    def is_group(self) -> bool:
        return self.group is not None and self.group.disruption_mode == "PodGroup"


def unit_queue(group: PodGroup | None, pods: Sequence[PodInfo]) -> str | None:
    """A unit's leaf queue: its PodGroup's `spec.queueName`, else the queue label of its pods."""
    if group is not None and group.spec.queue_name:
        return group.spec.queue_name
    return next((info.labels[QUEUE_LABEL] for info in pods if info.labels.get(QUEUE_LABEL)), None)
