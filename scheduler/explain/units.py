"""A cluster's scheduling units as its objects show them: members, gates, nominations, and why each waits.

What `kubectl phalanx status` lists and what `explain` starts from. Units are grouped as the runner groups
them: a lone pod, or a PodGroup's members (our label, or the native `spec.schedulingGroup`). A unit's reason
is in the scheduler's own bounded vocabulary (`framework/reasons.py`) and is read first from what the
objects alone say, the way the scheduler's PreEnqueue plugins do (a PodGroup that does not exist yet, fewer
members than `minCount`, a scheduling gate Phalanx does not remove, members nominated while their victims
go), then from what the scheduler last wrote: the PodGroup's `PodGroupScheduled` condition, else its first
pending member's `PodScheduled`. `Pending` is a unit the scheduler has not tried since it last changed.

Victims in flight are the terminating pods whose `DisruptionTarget` names their preemptor (the actuator
writes its name, `message_preemptor` reads it back); one marked by an older scheduler, whose message names
nobody, counts for the pending units nominated to its node.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from scheduler.api.config import SchedulerConfiguration
from scheduler.api.meta import DISRUPTION_TARGET, rfc3339
from scheduler.api.pod import QUEUE_LABEL, Pod
from scheduler.api.pod_group import NATIVE_API_VERSION, PodGroup
from scheduler.api.priority_class import PriorityClassNotFound
from scheduler.explain.pod_index import PodIndex, is_ours
from scheduler.framework.cluster import ClusterObjects
from scheduler.framework.reasons import PendingReason
from scheduler.framework.reporter import GROUP_SCHEDULED
from scheduler.framework.snapshot_builder import effective_priority
from scheduler.framework.unit_key import group_of, group_unit, object_name
from scheduler.preemption.actuator import REASON, message_preemptor

NOT_TRIED = "Pending"
"""The reason of a unit the scheduler has not tried since it last changed."""
SCHEDULED = "Scheduled"
"""The reason of a unit that needs nothing more: all of its members bound (a gang: `minCount` of them)."""
TRUSTED = frozenset({PendingReason.UNSCHEDULABLE, PendingReason.SCHEDULER_ERROR, PendingReason.PREEMPTING})
"""Reasons only the scheduler knows; the others are read from the objects, so a stale condition never wins."""


@dataclass(frozen=True, slots=True)
class Member:
    pod: Pod
    gates: tuple[str, ...]

    @property
    def key(self) -> str:
        return self.pod.key

    @property
    def node(self) -> str | None:
        return self.pod.spec.node_name or None

    @property
    def nominated(self) -> str | None:
        return self.pod.status.nominated_node_name or None

    @property
    def terminating(self) -> bool:
        return self.pod.metadata.deletion_timestamp is not None

    @property
    def pending(self) -> bool:
        return self.node is None and not self.terminating

    @property
    def state(self) -> str:
        """`Bound`, `Terminating`, `Nominated` (to a node, waiting for its victims), `Gated` or `Pending`."""
        if self.terminating:
            return "Terminating"
        if self.node is not None:
            return "Bound"
        if self.nominated is not None:
            return "Nominated"
        return "Gated" if self.gates else "Pending"


@dataclass(frozen=True, slots=True)
class Unit:
    """One scheduling unit: `members` are its pods that are not terminal (bound or not), oldest first."""

    key: str
    kind: str
    group: PodGroup | None
    members: tuple[Member, ...]
    min_count: int
    priority: int
    priority_class: str | None
    preemption_policy: str
    queue: str
    created: datetime | None
    ours: bool
    reason: str
    message: str

    def as_json(self) -> dict[str, Any]:
        """What `status -o json` shows of a unit, and `explain -o json` with more beside it."""
        return {
            "kind": self.kind,
            "apiVersion": self.api_version,
            "priority": self.priority,
            "priorityClassName": self.priority_class,
            "preemptionPolicy": self.preemption_policy,
            "queue": self.queue or None,
            "created": rfc3339(self.created) if self.created is not None else None,
            "reason": self.reason,
            "message": self.message,
            "members": {
                "exist": self.exist,
                "bound": self.bound,
                "min": self.min_count,
                "pending": len(self.pending_members),
            },
        }

    @property
    def unit_key(self) -> str:
        """What the scheduler knows the unit by (`framework/unit_key.py`); `key` is its object's `namespace/name`."""
        return group_unit(self.key) if self.kind == "PodGroup" else self.key

    @property
    def api_version(self) -> str:
        return self.group.api_version if self.group is not None else "v1"

    @property
    def exist(self) -> int:
        """Members that exist, as GangScheduling counts them (a terminating pod still exists)."""
        return len(self.members)

    @property
    def bound(self) -> int:
        return sum(1 for m in self.members if m.node is not None and not m.terminating)

    @property
    def pending_members(self) -> tuple[Member, ...]:
        return tuple(m for m in self.members if m.pending)

    @property
    def is_pending(self) -> bool:
        """Ours, with a member still to be bound."""
        return self.ours and bool(self.pending_members)

    @property
    def policy(self) -> str:
        """`gang`, `basic` or `pod` (a lone pod)."""
        if self.group is None:
            return "pod"
        return "gang" if self.group.is_gang else "basic"


@dataclass(frozen=True, slots=True)
class InFlight:
    """A preemption under way: the preemptor's nominations and the victims still terminating, since when."""

    preemptor: str
    """The preemptor's unit key: `podgroup/namespace/name`, or the lone pod's `namespace/name`."""
    nominations: dict[str, str]
    victims: tuple[str, ...]
    since: datetime | None


def units_of(
    objects: ClusterObjects,
    config: SchedulerConfiguration,
    index: PodIndex,
    keys: Collection[str] = (),
    waiting: bool = True,
) -> dict[str, Unit]:
    """The units named in `keys` (pending or not, a PodGroup without members too) and, with `waiting`, every unit
    with a pending pod of this scheduler, by unit key (`framework/unit_key.py`: a pod and a PodGroup may share a
    name). Only those are built: a cluster's running pods are tens of thousands of units nobody asked about.
    `index` holds the pods of `objects` (`pod_index.py`)."""
    found = {key: index.members(key) for key in sorted(set(keys) | (index.waiting.keys() if waiting else set()))}
    return {
        key: _unit(key, pods, objects, config)
        for key, pods in found.items()
        if pods or group_of(key) in objects.pod_groups
    }


def _created(pod: Pod) -> float:
    created = pod.metadata.creation_timestamp
    return created.timestamp() if created is not None else float("inf")


def _unit(key: str, pods: list[Pod], objects: ClusterObjects, config: SchedulerConfiguration) -> Unit:
    pods.sort(key=lambda p: (_created(p), p.key))
    group_key = group_of(key)
    group = objects.pod_groups.get(group_key) if group_key is not None else None
    grouped = group_key is not None
    members = tuple(Member(p, tuple(g.name for g in p.spec.scheduling_gates)) for p in pods)
    first = pods[0] if pods else None
    class_name: str | None
    if first is not None:
        try:
            resolved, _ = effective_priority(first, objects.pod_groups, objects.priority_classes)
            priority, class_name, policy = resolved.value, resolved.class_name, resolved.preemption_policy
        except PriorityClassNotFound as err:  # stored priorities stand; the scheduler warns about the class
            priority, class_name, policy = first.spec.priority or 0, err.name, "PreemptLowerPriority"
    else:
        priority = (group.spec.priority or 0) if group is not None else 0
        class_name = group.spec.priority_class_name if group is not None else None
        policy = "PreemptLowerPriority"
    queue = group.spec.queue_name if group is not None and group.spec.queue_name else ""
    queue = queue or next((p.metadata.labels[QUEUE_LABEL] for p in pods if QUEUE_LABEL in p.metadata.labels), "")
    created = group.metadata.creation_timestamp if group is not None else None
    created = created or (first.metadata.creation_timestamp if first is not None else None)
    ours = any(is_ours(p, config) for p in pods) if pods else group is not None
    unit = Unit(
        key=object_name(key),
        kind="PodGroup" if grouped else "Pod",
        group=group,
        members=members,
        min_count=group.min_count if group is not None else 1,
        priority=priority,
        priority_class=class_name,
        preemption_policy=policy,
        queue=queue,
        created=created,
        ours=ours,
        reason="",
        message="",
    )
    reason, message = _reason(unit, grouped, config)
    return replace(unit, reason=str(reason), message=message)  # a plain string: YAML output has no enums


def _reason(unit: Unit, grouped: bool, config: SchedulerConfiguration) -> tuple[str, str]:
    """The unit's reason and one-line message (see the module docstring for the order)."""
    pending = unit.pending_members
    if grouped and unit.group is None:
        return PendingReason.WAITING_FOR_GANG, f"PodGroup {unit.key} does not exist yet"
    if unit.members and not pending:
        return SCHEDULED, f"{unit.bound} member(s) bound" if unit.group is not None else "bound"
    if unit.group is not None and unit.exist < unit.min_count:
        need = unit.min_count
        return PendingReason.WAITING_FOR_GANG, f"{unit.exist}/{need} members exist, gang needs {need}"
    foreign = sorted({g for m in pending for g in m.gates if g != config.gate_name})
    if foreign and all(m.gates for m in pending):
        return PendingReason.SCHEDULING_GATED, f"waiting for scheduling gates: {', '.join(foreign)}"
    written = _written(unit)
    nominated = [m for m in pending if m.nominated]
    if nominated:
        if written is not None and written[0] == PendingReason.PREEMPTING:
            return written
        nodes = sorted({m.nominated or "" for m in nominated})
        return PendingReason.PREEMPTING, f"{len(nominated)} member(s) nominated to {', '.join(nodes)}"
    if written is not None:
        return written
    if all(m.gates for m in pending):
        return NOT_TRIED, f"the scheduler removes its gate {config.gate_name} on its next pass"
    return NOT_TRIED, "not tried by the scheduler yet"


def _written(unit: Unit) -> tuple[str, str] | None:
    """What the scheduler last wrote for the unit, when it is a reason only the scheduler knows."""
    found = None
    if unit.group is not None:
        found = next((c for c in unit.group.status.conditions if c.type == GROUP_SCHEDULED), None)
    if found is None or found.status != "False":
        found = next(
            (c for m in unit.pending_members if (c := m.pod.condition("PodScheduled")) is not None),
            None,
        )
    if found is None or found.status != "False" or found.reason not in TRUSTED:
        return None
    return str(found.reason), found.message or ""


def _victims(index: PodIndex) -> tuple[dict[str, list[Pod]], dict[str, list[Pod]]]:
    """The bound pods being deleted that a preemption marked: by the preemptor their mark names, and those whose
    mark names nobody (an older scheduler's) by node."""
    named: dict[str, list[Pod]] = {}
    unnamed: dict[str, list[Pod]] = {}
    for pod in index.terminating.values():
        target = pod.condition(DISRUPTION_TARGET)
        if target is None or target.status != "True" or target.reason != REASON:
            continue
        preemptor = message_preemptor(target.message or "")
        if preemptor is None:
            unnamed.setdefault(pod.spec.node_name or "", []).append(pod)  # always bound
        else:
            named.setdefault(preemptor, []).append(pod)
    return named, unnamed


def may_be_in_flight(index: PodIndex) -> set[str]:
    """The pending units `in_flight` can find a preemption for, without building any: those with a nominated pod
    waiting (victims of nobody's name are found through their nodes), and those a victim being deleted names."""
    named, _ = _victims(index)
    return index.nominated.keys() | (named.keys() & index.waiting.keys())


def in_flight(index: PodIndex, units: Iterable[Unit]) -> list[InFlight]:
    """The preemptions under way: pending units with nominated members or with victims still terminating (among
    the pods `index` holds)."""
    named, unnamed = _victims(index)
    found = []
    for unit in units:
        if not unit.is_pending:
            continue
        nominations = {m.key: m.nominated for m in unit.pending_members if m.nominated}
        victims = list(named.get(unit.unit_key, []))
        if not victims:
            victims = [p for node in sorted(set(nominations.values())) for p in unnamed.get(node, [])]
        if not nominations and not victims:
            continue
        marks = [c.last_transition_time for p in victims if (c := p.condition(DISRUPTION_TARGET))]
        since = min((t for t in marks if t is not None), default=None)
        found.append(InFlight(unit.unit_key, nominations, tuple(sorted(p.key for p in victims)), since))
    return found


def native(unit: Unit) -> bool:
    """A `scheduling.k8s.io/v1alpha2` PodGroup's unit."""
    return unit.group is not None and unit.group.api_version == NATIVE_API_VERSION
