"""What the scheduler tells users of the units it tried or held, and what a pass reports.

The one place that owns reasons: each unit's reason is said once (`reasons.py`): when it changes, it is logged,
written in the PodGroup's `PodGroupScheduled` condition (the members' one-line message, the preemption part
included: who protects whom, until when) and recorded as a Warning Event on the PodGroup; a unit tried again with
the same reason is only counted. Each pending pod's `PodScheduled=False` condition is written when it says
otherwise. A unit that failed (a write the API server refused, or a bug in its cycle) gets a `FailedScheduling`
Warning, the reason operators already watch and kube-scheduler gives its own API errors, and `SchedulerError` on
its pending members.

The configuration checks' findings are reported once each: a `Warning` Event on the object concerned and one log
line, again only after the finding went away, or when the object holding the bad value changed and is still wrong
(a new resourceVersion), as an operator fixing it by hand would expect.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType

import structlog

from scheduler.api.meta import Condition
from scheduler.api.pod_group import PodGroup
from scheduler.framework.cluster import Cluster, ClusterObjects, WriteRefused, object_key, unit_of
from scheduler.framework.interfaces import ConfigurationCheck, ConfigurationWarning, PostFilterResult
from scheduler.framework.ledger import Refusal
from scheduler.framework.pending import Pending, PendingPods
from scheduler.framework.pod_group_placement import DomainFit
from scheduler.framework.pod_info import PodInfo, SchedulingUnit, unit_queue
from scheduler.framework.queue import SchedulingQueue
from scheduler.framework.reasons import PendingReason, ReasonBook, UnitReason
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import Code, Status
from scheduler.framework.unit_key import group_of, unit_key

log = structlog.get_logger(__name__)

GROUP_SCHEDULED = "PodGroupScheduled"

NOT_HELPFUL = "Preemption is not helpful for scheduling"
"""kube-scheduler's reason for a node where removing pods cannot help (UnschedulableAndUnresolvable)."""

POD_STATES = ("gated", "waiting", "unschedulable", "backoff", "nominated")
"""What a pending pod waits for after a pass (kube-scheduler's `scheduler_pending_pods` queues, by cause)."""


@dataclass(frozen=True, slots=True)
class Binding:
    pod: str
    node: str
    time: datetime


@dataclass(frozen=True, slots=True)
class Attempt:
    """How a unit's placement went before preemption: members placed (with those bound before) of those it
    needs, kube-scheduler's FitError for the first member that fit nowhere ("" when every member fit), the
    members bound in this pass (none for a unit whose Permit refused its placement), and for a topology group no
    domain could take, how many members each could (`Placement.domains`)."""

    placed: int
    needed: int
    fit_error: str
    bound: int
    domains: tuple[DomainFit, ...] = ()


@dataclass(slots=True)
class PassReport:
    """What one `schedule_pending` pass did; `pending` covers the pods it looked at."""

    time: datetime
    bindings: list[Binding] = field(default_factory=list)
    pending: list[Pending] = field(default_factory=list)
    post_filter: list[tuple[str, PostFilterResult]] = field(default_factory=list)
    units_tried: int = 0
    warnings: list[ConfigurationWarning] = field(default_factory=list)
    """Configuration findings reported for the first time in this pass."""
    reasons: Mapping[str, UnitReason] = field(default_factory=dict)
    """Every unit still pending after the pass, and the reason the scheduler last gave it: a read-only view of
    the scheduler's own, valid until its next pass (a copy of every unit's reason each pass was for nobody)."""
    units: dict[tuple[str, str], int] = field(default_factory=dict)
    """Those units counted by (queue, reason)."""
    pods: Counter[str] = field(default_factory=Counter)
    """Pods still pending after the pass, by state (`POD_STATES`; `active` for one no pool holds)."""
    repeats: Counter[str] = field(default_factory=Counter)
    """Units tried again whose reason did not change (said once, counted here), by reason."""
    attempts: dict[str, Attempt] = field(default_factory=dict)
    """Each unit tried in the pass, in the order tried, and how its placement went (what `explain` shows)."""
    retries: Counter[str] = field(default_factory=Counter)
    """Parked units tried again, by the event that woke each (`framework/hints.py`; `timer`, `refused`)."""
    retries_avoided: int = 0
    """Parked units not tried again, no event since could help them, that the old rule would have retried."""
    pools: dict[str, int] = field(default_factory=dict)
    """Units in the backoff and unschedulable pools, and pods in the gated one, after the pass."""
    deferred: int = 0
    """Units ready but not tried: the pass ended because the back end's writes were backed up
    (`Cluster.writes_backed_up`). They stay in the queue's active pool, in order, for the next pass."""


WarningKey = tuple[str, str, str, str, str, str]
"""kind, `namespace/name`, uid, reason, note, version: what makes a configuration finding the same one."""


def warning_key(warning: ConfigurationWarning) -> WarningKey:
    obj = warning.regarding
    if obj is None:
        return "", "", "", warning.reason, warning.note, warning.version or ""
    uid = getattr(getattr(obj, "metadata", None), "uid", None) or ""
    return str(getattr(obj, "kind", "")), object_key(obj), uid, warning.reason, warning.note, warning.version or ""


def not_helpful(plugin: str, nodes: int) -> str:
    """kube-scheduler's words when no node is worth a preemption search."""
    return f"{plugin}: 0/{nodes} nodes are available: {nodes} {NOT_HELPFUL}."


class Reporter:
    """The reasons, conditions and Events of the units one scheduler tries or holds, and its configuration findings."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.reasons = ReasonBook()
        """What each pending unit was last told: a reason is said (logged, written, evented) when it changes."""
        self._reported: dict[str, set[WarningKey]] = {}
        """Per configuration check, the findings of its last answer: those are not reported again."""

    def scheduled(self, group: PodGroup) -> None:
        """Members of the group were bound (or every member tried fit): `PodGroupScheduled=True`."""
        self._group_condition(group, None)

    def unschedulable(
        self,
        unit: SchedulingUnit,
        statuses: Mapping[str, Status],
        notes: Sequence[str],
        preempting: bool,
        group: PodGroup | None,
        report: PassReport,
    ) -> None:
        """The unit's failed members are pending, each with its own status and the PostFilter plugins' `notes` (who
        protects whom, until when); the unit's reason is its first failed member's. `group` is None when the group's
        condition must not change (members were just bound)."""
        suffix = f" {' '.join(notes)}" if notes else ""
        for member in unit.members:
            if member.key in statuses:
                status = statuses[member.key]
                reason = "SchedulerError" if status.code == Code.ERROR else "Unschedulable"
                self.pending(member, reason, status.message() + suffix, report)
        first = next(iter(statuses.values()))
        if preempting:
            code = PendingReason.PREEMPTING
        elif first.code == Code.ERROR:
            code = PendingReason.SCHEDULER_ERROR
        else:
            code = PendingReason.UNSCHEDULABLE
        queue = unit_queue(unit.group, unit.members) or ""
        self._tell(unit.key, group, UnitReason(code, first.message() + suffix, queue), report)

    def failed(self, unit: SchedulingUnit, err: Exception, report: PassReport, placed: set[str]) -> None:
        """A write for `unit` was refused (or its cycle hit a bug): a Warning Event on the unit, and its pending
        members told why."""
        if isinstance(err, WriteRefused):
            message = f"the API server refused a write, retrying after a backoff: {err}"
            log.warning("write refused", unit=unit.key, error=str(err))
        else:
            first_line = next(iter(str(err).splitlines()), "")
            message = f"scheduling cycle failed, retrying after a backoff: {type(err).__name__}: {first_line}"
            log.error("scheduling cycle failed", unit=unit.key, exc_info=err)
        regarding = unit.group if unit.group is not None else unit.members[0].pod
        self.cluster.record_event(regarding, "Warning", "FailedScheduling", message)
        for member in unit.members:
            if member.key not in placed:
                self.pending(member, "SchedulerError", message, report)
        queue = unit_queue(unit.group, unit.members) or ""
        reason = UnitReason(PendingReason.SCHEDULER_ERROR, message, queue)
        self._tell(unit.key, unit.group, reason, report, event=False)  # its Warning Event is above, on every failure

    def refused(self, refusal: Refusal, objects: ClusterObjects) -> None:
        """A write sent in the background for a unit was refused: as `failed` tells a unit, a Warning Event, and its
        pending members' PodScheduled condition (reason SchedulerError) say which write and what the server said."""
        unit = refusal.unit
        group_key = group_of(unit)
        regarding = objects.pod_groups.get(group_key) if group_key is not None else objects.pods.get(unit)
        if regarding is None:
            return
        write = f"{refusal.operation} {refusal.pod}: {refusal.answer}".rstrip(": ")
        message = f"the API server refused a write, retrying after a backoff: {write}"
        self.cluster.record_event(regarding, "Warning", "FailedScheduling", message)
        condition = Condition(
            type="PodScheduled",
            status="False",
            reason="SchedulerError",
            message=message,
            last_transition_time=self.cluster.now(),
        )
        for pod in objects.pods.values():
            if unit_of(pod) == unit and not pod.spec.node_name:
                self.cluster.set_pod_condition(pod, condition)

    def pending(self, info: PodInfo, reason: str, message: str, report: PassReport) -> None:
        """Report the pod pending, and write its PodScheduled condition if it says otherwise."""
        report.pending.append(self.say_pending(info, reason, message) or Pending(info.key, reason, message))

    def say_pending(self, info: PodInfo, reason: str, message: str) -> Pending | None:
        """The Pending the pod's PodScheduled condition says already; None when it said otherwise and was written."""
        current = info.pod.condition("PodScheduled")
        if current is not None and current.reason == reason and current.message == message:
            return Pending(info.key, reason, message)
        condition = Condition(
            type="PodScheduled", status="False", reason=reason, message=message, last_transition_time=self.cluster.now()
        )
        self.cluster.set_pod_condition(info.pod, condition)
        return None

    def held(
        self, snapshot: Snapshot, waiting: PendingPods, tried: set[str], looked: set[str], report: PassReport
    ) -> None:
        """Units whose pods PreEnqueue held back (gated, or waiting for their gang) and that were not tried: their
        reason is the first held member's. A group's condition says it only while none of its members is bound.

        A unit told the same, from the same Pending (kept by `Admission`) and PodGroup objects, with nothing
        written, is only counted; one not `looked` at again by `PendingPods` since, nor tried, nor given another
        reason, is known the same without a look, so a backlog of waiting gangs costs a pass nothing to tell again
        nor to find the few to look at among them."""
        first = waiting.first_held
        current = self.reasons.current
        told = waiting.told
        last_told = told.take(((looked | tried | self.reasons.replaced()) & told.keys()) | (told.keys() - first.keys()))
        report.repeats.update(told.by_reason)  # as `_tell` counts them, with nothing to say or write
        for key in sorted(first.keys() - told.keys() - tried):
            pending = first[key]
            group_key = group_of(key)
            group = snapshot.groups.get(group_key) if group_key is not None else None
            members = snapshot.members.get(group_key, []) if group_key is not None else []
            fresh = group if group is not None and not any(m.node_name for m in members) else None
            last = last_told.get(key)
            if last is not None and last[0] is pending and last[1] is fresh and current.get(key) is last[2]:
                report.repeats[last[2].reason] += 1
                told.put(key, last)
                continue
            info = snapshot.pods.get(pending.pod)
            queue = unit_queue(group, [info] if info is not None else []) or ""
            quiet = self._tell(key, fresh, UnitReason(PendingReason(pending.reason), pending.message, queue), report)
            if quiet:
                told.put(key, (pending, fresh, current[key]))

    def summarise(
        self,
        units: Mapping[str, SchedulingUnit],
        members: int,
        held: Mapping[str, str],
        placed: set[str],
        snapshot: Snapshot,
        queue: SchedulingQueue,
        waiting: PendingPods,
        report: PassReport,
    ) -> None:
        """What is still pending after the pass: each unit's reason, and the pods by state (`members`: the pods
        in `units`).

        Counted by the queue's pools (`SchedulingQueue.pods_by_pool`), then mended for the few pods placed or
        nominated, rather than walking every pending pod each pass."""
        pool = queue.pool_of
        states: Counter[str | None] = Counter(held.values())
        states.update(queue.pods_by_pool(units, members))
        gone: set[str] = set()
        for key in placed:
            unit = unit_key(snapshot.pods[key].group_key, key)
            states[pool(unit)] -= 1
            gone.add(unit)
        admitted = waiting.admitted
        for info in snapshot.nominated:
            key = info.key
            if key in admitted and key not in held and key not in placed:
                states[pool(unit_key(info.group_key, key))] -= 1
                states["nominated"] += 1
        done = {
            key
            for key in gone
            if key in units
            and all(m.key in placed for m in units[key].members)
            and not any(pod in held for pod in waiting.pods_of(key))
        }
        for state, count in states.items():
            if count:
                report.pods[state or "active"] += count
        departed = waiting.departed()
        if departed is None:
            self.reasons.keep(waiting.units_pending(), done)
        else:
            self.reasons.forget(departed | done)
        report.reasons = MappingProxyType(self.reasons.current)
        report.units = dict(self.reasons.by_label)

    def warnings(self, checks: Sequence[ConfigurationCheck], snapshot: Snapshot, report: PassReport) -> None:
        """Report each new finding of the configuration checks: a Warning Event (when there is an object) and a log."""
        for check in checks:
            try:
                found = check.warnings(snapshot)
            except Exception as err:  # a plugin bug must not stop the pass; its earlier findings stay reported
                log.error("configuration check failed", plugin=check.name, error=repr(err))
                continue
            previous = self._reported.get(check.name, set())
            current: set[WarningKey] = set()
            for warning in found:
                key = warning_key(warning)
                if key in current:
                    continue
                current.add(key)
                if key in previous:
                    continue
                where = {"kind": key[0], "object": key[1]} if key[1] else {"kind": "SchedulerConfiguration"}
                log.warning(
                    "configuration ignored", plugin=check.name, **where, reason=warning.reason, note=warning.note
                )
                if warning.regarding is not None:
                    self.cluster.record_event(warning.regarding, "Warning", warning.reason, warning.note)
                report.warnings.append(warning)
            self._reported[check.name] = current

    def _tell(
        self, unit: str, group: PodGroup | None, reason: UnitReason, report: PassReport, event: bool = True
    ) -> bool:
        """Say a unit's reason if it changed: a log line and a Warning Event on its PodGroup for a failure, and the
        PodGroup's condition (`group` is None when the group's condition must not change, e.g. members were just
        bound). An unchanged reason is counted instead. The condition is also written when it differs from the
        stored one (written by a previous leader, or by hand). True when the reason was unchanged and nothing was
        written."""
        changed = self.reasons.say(unit, reason)
        written = group is not None and self._group_condition(group, reason)
        if not changed:
            report.repeats[reason.reason] += 1
            return not written
        failed = reason.reason in (PendingReason.UNSCHEDULABLE, PendingReason.SCHEDULER_ERROR)
        if reason.reason == PendingReason.UNSCHEDULABLE:
            log.info("unit unschedulable", unit=unit, reason=reason.message)
        if failed and event and group is not None and self.reasons.may_record(unit, self.cluster.now()):
            self.cluster.record_event(group, "Warning", "FailedScheduling", reason.message)
        return False

    def _group_condition(self, group: PodGroup, reason: UnitReason | None) -> bool:
        """`PodGroupScheduled` on the PodGroup: True once members are bound (`reason` None), else the unit's
        reason and one-line message, the same its members' Events carry (written on change; returns whether it
        was)."""
        if reason is None:
            condition = Condition(type=GROUP_SCHEDULED, status="True", reason="Scheduled", message="")
        else:
            condition = Condition(type=GROUP_SCHEDULED, status="False", reason=reason.reason, message=reason.message)
        current = next((c for c in group.status.conditions if c.type == GROUP_SCHEDULED), None)
        if current is not None and (current.status, current.reason, current.message or "") == (
            condition.status,
            condition.reason,
            condition.message,
        ):
            return False
        condition.last_transition_time = self.cluster.now()
        self.cluster.set_pod_group_condition(group, condition)
        return True
