"""PreemptionToleration: a victim whose PriorityClass tolerates the preemptor is not a potential victim.

Source: kubernetes-sigs/scheduler-plugins `pkg/preemptiontoleration` (`ExemptedFromPreemption`). A
candidate tolerates a preemptor when its class carries a policy, the preemptor's priority is below
`minimum-preemptable-priority`, and the toleration is forever (negative seconds), the candidate has
no `PodScheduled=True` condition yet, or now is not after scheduled-time + toleration-seconds. A
preemptor with `preemptionPolicy: Never` is tolerated by everyone. Divergences: a PodGroup member's
class is its PodGroup's `priorityClassName` (DESIGN.md, Priority), a `PodGroup`-mode unit tolerates
while any of its pods does, a bound pod without the condition counts from `status.startTime`
(scenario files often carry only that), and `until` is the first whole second at which the
toleration is over (upstream tolerates through the last instant, so the clock must land after it).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache

import structlog

from scheduler.api.meta import ApiModel, ObjectMeta
from scheduler.api.preemption_toleration import PolicyError, TolerationPolicy, parse_policy, policy_errors
from scheduler.api.priority_class import PriorityClass, global_default
from scheduler.framework.pod_info import SchedulingUnit, VictimUnit
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import SUCCESS, Status, unschedulable

log = structlog.get_logger(__name__)

NAME = "PreemptionToleration"


@dataclass(frozen=True, slots=True)
class ProtectionWarning:
    """A misconfiguration a protection ignored, for the back end to record as a Warning Event.

    Filters are pure, so they cannot emit Events themselves; the runner asks each protection plugin
    for `warnings(snapshot)` and calls `cluster.record_event(regarding, "Warning", reason, note)`.
    """

    regarding: ApiModel
    reason: str
    note: str


def format_instant(when: datetime, now: datetime) -> str:
    """`12:40:00Z` when the protection ends today (UTC, as the user reads a clock), else the full date."""
    when = when.astimezone(UTC)
    if when.date() == now.astimezone(UTC).date():
        return when.strftime("%H:%M:%SZ")
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


@lru_cache(maxsize=512)
def _cached_policy(
    name: str, value: int, annotations: tuple[tuple[str, str], ...]
) -> TolerationPolicy | PolicyError | None:
    """Parse once per distinct class content, and log a bad annotation once instead of per candidate."""
    pc = PriorityClass(metadata=ObjectMeta(name=name, annotations=dict(annotations)), value=value)
    try:
        return parse_policy(pc)
    except PolicyError as err:
        log.warning("toleration policy ignored", priority_class=name, annotation=err.annotation, error=str(err))
        return err


@lru_cache(maxsize=4096)
def _warn_missing_class(victim: str, class_name: str) -> None:
    """Log once per victim and class, not once per preemption attempt that considers it."""
    log.warning("victim priority class missing", victim=victim, priority_class=class_name)


def policy_of(pc: PriorityClass) -> TolerationPolicy | PolicyError | None:
    """The class's policy, None when it carries none, or the error that voids it."""
    return _cached_policy(pc.metadata.name, pc.value, tuple(sorted(pc.metadata.annotations.items())))


def victim_class_name(victim: VictimUnit, snapshot: Snapshot) -> str | None:
    """The class that decides a victim's policy: its PodGroup's, else its pod's, else the globalDefault."""
    if victim.group is not None:
        name = victim.group.spec.priority_class_name
    else:
        name = victim.pods[0].priority_class_name if victim.pods else None
    if name:
        return name
    default = global_default(snapshot.priority_classes.values())
    return default.metadata.name if default else None


def _scheduled_at(victim: VictimUnit) -> datetime | None:
    """The latest scheduled time over the unit's pods; None when one of them has not been scheduled."""
    latest: datetime | None = None
    for info in victim.pods:
        scheduled = info.pod.scheduled_time()
        if scheduled is None:
            return None
        latest = scheduled if latest is None else max(latest, scheduled)
    return latest


class PreemptionToleration:
    """VictimFilter: spares candidates whose PriorityClass tolerates this preemptor (see module doc)."""

    name = NAME

    def filter_victim(self, preemptor: SchedulingUnit, victim: VictimUnit, snapshot: Snapshot) -> Status:
        if preemptor.preemption_policy == "Never":
            return unschedulable(f"{victim.key} is tolerated: preemptor {preemptor.key} has preemptionPolicy Never")
        class_name = victim_class_name(victim, snapshot)
        if class_name is None:
            return SUCCESS
        pc = snapshot.priority_classes.get(class_name)
        if pc is None:
            _warn_missing_class(victim.key, class_name)
            return SUCCESS
        policy = policy_of(pc)
        if policy is None or isinstance(policy, PolicyError):
            return SUCCESS
        if preemptor.priority >= policy.minimum_preemptable_priority:
            return SUCCESS
        why = (
            f"{victim.key} tolerates preemption by priority {preemptor.priority} "
            f"(PriorityClass {class_name}, minimum-preemptable-priority {policy.minimum_preemptable_priority})"
        )
        if policy.toleration_seconds < 0:
            return unschedulable(f"{why} forever")
        scheduled_at = _scheduled_at(victim)
        if scheduled_at is None:
            return unschedulable(f"{why} until it is scheduled")
        try:
            last = scheduled_at + timedelta(seconds=policy.toleration_seconds)
            until = last.replace(microsecond=0) + timedelta(seconds=1)
        except OverflowError:
            return unschedulable(f"{why} forever")
        if snapshot.now > last:
            return SUCCESS
        return unschedulable(f"{why} until {format_instant(until, snapshot.now)}", until=until)

    def warnings(self, snapshot: Snapshot) -> list[ProtectionWarning]:
        """Unparsable policies (one per bad annotation) and victims naming a missing class."""
        found: list[ProtectionWarning] = []
        for pc in sorted(snapshot.priority_classes.values(), key=lambda c: c.metadata.name):
            for err in policy_errors(pc):
                note = f"metadata.annotations[{err.annotation}]: Invalid value: {err}; no toleration applies"
                found.append(ProtectionWarning(pc, "InvalidPreemptionToleration", note))
        found.extend(_missing_classes(snapshot))
        return found


def _missing_classes(snapshot: Snapshot) -> list[ProtectionWarning]:
    """Running pods and groups whose deciding class is gone: they are unprotected until it returns."""
    found: list[ProtectionWarning] = []
    seen: set[str] = set()
    for info in snapshot.pods.values():
        if info.node_name is None:
            continue
        group = snapshot.groups.get(info.group_key) if info.group_key else None
        name = group.spec.priority_class_name if group is not None else info.priority_class_name
        key = group.key if group is not None else info.key
        if name and name not in snapshot.priority_classes and key not in seen:
            seen.add(key)
            note = f"PriorityClass {name} not found: {key} is not protected by preemption toleration"
            found.append(ProtectionWarning(group if group is not None else info.pod, "PriorityClassNotFound", note))
    return found
