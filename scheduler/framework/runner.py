"""The scheduler's main loop, one pass at a time, on any `Cluster` back end (memory or kube).

A pass: read the cluster, remove our gang gate from gangs that became ready, build a Snapshot, run
PreEnqueue on the pending pods that changed (the others' answers are kept from pass to pass:
`pending.py`), then pop units (a lone pod, or every pending member of a PodGroup) in priority order and
place each one on the snapshot (static mask cached per pod shape, resource fit, score), reserving what it
takes beyond its node's resources (Reserve: the volumes chosen for its claims). A gang binds only if at least
`minCount` members are placed, else its trial placements and their reservations are rolled back, so a gang
that cannot be placed whole writes nothing; each pod bound gets its PreBind writes (its volumes) just before
its Binding. A unit that does not fit runs the PostFilter plugins, for the members still pending (never one
bound in this pass); a proposal with victims or nominations is handed to the actuator. Time comes only from
`cluster.now()`, so the same code runs on the simulator's clock.

Each unit's reason is said once (`reasons.py`): when it changes, the runner logs it, writes it in the
PodGroup's `PodGroupScheduled` condition (the members' one-line message, the preemption part included:
who protects whom, until when) and records a Warning Event on the PodGroup; a unit tried again with the
same reason is only counted. The pass report says what is pending and why, for metrics.

A write the API server refuses (or a bug in one unit's cycle) fails that unit only (docs/DESIGN.md,
invariant 7): a `FailedScheduling` Warning on it, `SchedulerError` on its pending members, and a retry
after a backoff that doubles while the refusals go on; the pass goes on with the next unit. A write the
back end sends in the background (a Binding, a preemption write) is found refused in its ledger at the
next pass, naming the unit it was for, and treated alike.

Each pass also asks the configuration checks what their plugins ignore (a bad toleration annotation,
a bad min-runtime, a missing PriorityClass) and reports each finding once: a `Warning` Event on the
object concerned and one log line. A finding is reported again only after it went away, or when the
object holding the bad value changed and is still wrong (a new resourceVersion), as an operator
fixing it by hand would expect.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from types import MappingProxyType
from typing import Protocol

import structlog

from scheduler.api.config import SchedulerConfiguration
from scheduler.api.meta import Condition, rfc3339
from scheduler.api.pod import Pod
from scheduler.api.pod_group import LAST_START_ANNOTATION, PodGroup
from scheduler.framework.cluster import (
    Cluster,
    ClusterObjects,
    PassAborted,
    WriteRefused,
    object_key,
    unit_of,
)
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.feasibility import describe
from scheduler.framework.hints import Sighting
from scheduler.framework.interfaces import ConfigurationWarning, NodeVerdict, PostFilterResult, ReservePlugin
from scheduler.framework.ledger import Refusal
from scheduler.framework.pending import Pending, PendingPods
from scheduler.framework.placement import PlacementMemo
from scheduler.framework.pod_info import PodInfo, SchedulingUnit, unit_queue
from scheduler.framework.profile import Profile
from scheduler.framework.queue import SchedulingQueue
from scheduler.framework.reasons import PendingReason, ReasonBook, UnitReason
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.snapshot_builder import PodInfoCache, build_snapshot
from scheduler.framework.status import Code, Status, error
from scheduler.framework.unit_key import group_of, unit_key

log = structlog.get_logger(__name__)

DEFAULT_SCHEDULER = "default-scheduler"

GROUP_SCHEDULED = "PodGroupScheduled"

NOT_HELPFUL = "Preemption is not helpful for scheduling"
"""kube-scheduler's reason for a node where removing pods cannot help (UnschedulableAndUnresolvable)."""

POD_STATES = ("gated", "waiting", "unschedulable", "backoff", "nominated")
"""What a pending pod waits for after a pass (kube-scheduler's `scheduler_pending_pods` queues, by cause)."""


class Actuator(Protocol):
    """Acts on a PostFilter proposal (nominate, mark and delete victims); see `scheduler/preemption`."""

    def actuate(self, unit: SchedulingUnit, result: PostFilterResult, snapshot: Snapshot) -> None: ...


@dataclass(frozen=True, slots=True)
class Binding:
    pod: str
    node: str
    time: datetime


@dataclass(frozen=True, slots=True)
class Attempt:
    """How a unit's placement went before preemption: members placed (with those bound before) of those it
    needs, kube-scheduler's FitError for the first member that fit nowhere ("" when every member fit), and the
    members bound in this pass (none for a gang that could not place `minCount`)."""

    placed: int
    needed: int
    fit_error: str
    bound: int


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
    the scheduler's own, valid until its next pass (a copy of 11,000 reasons each pass was for nobody)."""
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


class Scheduler:
    def __init__(
        self,
        cluster: Cluster,
        config: SchedulerConfiguration,
        profile: Profile,
        actuator: Actuator | None = None,
        all_schedulers: bool = False,
        interrupted: Callable[[], bool] = lambda: False,
        cache: PodInfoCache | None = None,
    ) -> None:
        self.cluster = cluster
        self.config = config
        self.profile = profile
        self.actuator = actuator
        self.all_schedulers = all_schedulers
        self.interrupted = interrupted
        """Asked after each snapshot and before each unit: true when this scheduler must stop acting (told to
        stop, or its replica lost the Lease). The pass then ends with `PassAborted` instead of going through
        every unit: one that retries 10,000 pending pods takes seconds, and may write nothing that would
        notice the Lease is gone."""
        self.queue = SchedulingQueue(config.backoff_seconds, config.max_backoff_seconds)
        self._cache = cache or PodInfoCache()
        """What the snapshot builds reuse: given warm by a standby that just became leader (`process.py`)."""
        self._reported: dict[str, set[WarningKey]] = {}
        """Per configuration check, the findings of its last answer: those are not reported again."""
        self.reasons = ReasonBook()
        """What each pending unit was last told: a reason is said (logged, written, evented) when it changes."""
        self.waiting = PendingPods(self.is_ours, config.gate_name)
        """Our pending pods, what PreEnqueue said of each and their units, kept between passes (`pending.py`)."""

    def is_ours(self, pod: Pod) -> bool:
        return self.all_schedulers or (pod.spec.scheduler_name or DEFAULT_SCHEDULER) == self.config.scheduler_name

    def next_wakeup(self) -> datetime | None:
        """When a parked unit becomes ready again with no other change (backoff, a PostFilter `until`,
        the end of a refused write's backoff)."""
        return self.queue.next_wakeup()

    def schedule_pending(self) -> PassReport:
        now = self.cluster.now()
        report = PassReport(time=now)
        objects = self.cluster.objects()
        self._take_refusals(objects, now)
        snapshot = build_snapshot(objects, now, self.config, self._cache)
        self.waiting.update(snapshot)
        self._check_interrupted()
        if self._remove_gang_gates(snapshot, self.waiting.gated()):
            snapshot = build_snapshot(self.cluster.objects(), now, self.config, self._cache)
            self.waiting.update(snapshot)
            self._check_interrupted()
        self._report_warnings(snapshot, report)
        self._snapshot_ready(snapshot)
        self.queue.keep_refusals(self.waiting.units_pending(), now)
        admitted = self.waiting.admit(snapshot, self._running_preemption(objects), self._pre_enqueue, self._say_pending)
        report.pending += admitted.pending
        units, held = admitted.units, admitted.held
        placed: set[str] = set()
        tried: set[str] = set()
        memo = PlacementMemo(snapshot, self.profile)
        self.queue.sight(Sighting.of(snapshot))
        order = self.queue.pop_order(units, admitted.looked, now, until=self.cluster.writes_backed_up)
        report.retries, report.retries_avoided = self.queue.retries, self.queue.avoided
        for unit in order:
            self._check_interrupted()
            report.units_tried += 1
            tried.add(unit.key)
            try:
                self._schedule_unit(unit, memo, report, placed)
            except PassAborted:
                raise
            except Exception as err:  # a refused write, or a bug, fails this unit only (invariant 7)
                self._unit_failed(unit, err, snapshot.now, report, placed)
        placed_infos = [snapshot.pods[key] for key in placed]
        self.queue.sight(Sighting.of(snapshot, placed_infos), placed_infos)
        self._tell_held(snapshot, report, tried, admitted.looked)
        self._summarise(units, admitted.members, held, placed, snapshot, report)
        report.deferred = self.queue.active
        report.pools = self.queue.pools(gated=len(held))
        log.info(
            "pass done", tried=report.units_tried, bound=len(report.bindings), deferred=report.deferred, **report.pools
        )
        return report

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

    def _tell_held(self, snapshot: Snapshot, report: PassReport, tried: set[str], looked: set[str]) -> None:
        """Units whose pods PreEnqueue held back (gated, or waiting for their gang) and that were not tried: their
        reason is the first held member's. A group's condition says it only while none of its members is bound.

        A unit told the same, from the same Pending (kept by `Admission`) and PodGroup objects, with nothing
        written, is only counted; one not `looked` at again by `PendingPods` since, nor tried, nor given another
        reason, is known the same without a look: 1,000 waiting gangs cost a pass 10 ms to tell again, and
        1.6 ms on the real server to find the few to look at among them one by one (issue 23)."""
        first = self.waiting.first_held
        current = self.reasons.current
        told = self.waiting.told
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

    def _summarise(
        self,
        units: Mapping[str, SchedulingUnit],
        members: int,
        held: Mapping[str, str],
        placed: set[str],
        snapshot: Snapshot,
        report: PassReport,
    ) -> None:
        """What is still pending after the pass: each unit's reason, and the pods by state (`members`: the pods
        in `units`).

        Counted by the queue's pools (`SchedulingQueue.pods_by_pool`), then mended for the few pods placed or
        nominated: a walk over 12,000 pending pods cost a pass 8 ms (issue 23)."""
        pool = self.queue.pool_of
        states: Counter[str | None] = Counter(held.values())
        states.update(self.queue.pods_by_pool(units, members))
        gone: set[str] = set()
        for key in placed:
            unit = unit_key(snapshot.pods[key].group_key, key)
            states[pool(unit)] -= 1
            gone.add(unit)
        admitted = self.waiting.admitted
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
            and not any(pod in held for pod in self.waiting.pods_of(key))
        }
        for state, count in states.items():
            if count:
                report.pods[state or "active"] += count
        departed = self.waiting.departed()
        if departed is None:
            self.reasons.keep(self.waiting.units_pending(), done)
        else:
            self.reasons.forget(departed | done)
        report.reasons = MappingProxyType(self.reasons.current)
        report.units = dict(self.reasons.by_label)

    def _check_interrupted(self) -> None:
        """After each snapshot and before each unit, the moments a pass can end without leaving a unit half done."""
        if self.interrupted():
            raise PassAborted("interrupted")

    def _snapshot_ready(self, snapshot: Snapshot) -> None:
        """Let plugins bring their caches up to this snapshot; a failing one is logged and left behind."""
        for hook in self.profile.snapshot_hooks:
            try:
                hook.snapshot_ready(snapshot)
            except Exception as err:  # a plugin bug must not stop the pass: its cache is rebuilt when used
                log.error("snapshot hook failed", plugin=hook.name, error=repr(err))

    def _report_warnings(self, snapshot: Snapshot, report: PassReport) -> None:
        """Report each new finding of the configuration checks: a Warning Event (when there is an object) and a log."""
        for check in self.profile.configuration_checks:
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

    def _take_refusals(self, objects: ClusterObjects, now: datetime) -> None:
        """Writes the back end sent in the background and the server refused, from its ledger: each names the
        unit it was for, which is retried after a backoff, its gates kept meanwhile. The back end told a pod
        why its Binding or gate removal was refused (and the view shows it pending again); a refused
        preemption write (a nomination, a victim's DisruptionTarget or deletion) is told to its preemptor
        here, in a Warning Event."""
        units: set[str] = set()
        for refusal in self.cluster.ledger.refusals():
            units.add(refusal.unit)
            if not refusal.told:
                self._warn_unit(refusal, objects)
        for unit in sorted(units):
            until = self.queue.refused(unit, now)
            log.warning("write refused, retrying", unit=unit, retry_at=rfc3339(until))

    def _warn_unit(self, refusal: Refusal, objects: ClusterObjects) -> None:
        """As `_unit_failed` tells a unit whose own write was refused: a Warning Event, and its pending
        members' PodScheduled condition (reason SchedulerError) say which write and what the server said."""
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

    def _unit_failed(
        self, unit: SchedulingUnit, err: Exception, now: datetime, report: PassReport, placed: set[str]
    ) -> None:
        """A write for `unit` was refused (or its cycle hit a bug): a Warning Event on the unit, its
        pending members told why, and a retry after a backoff that doubles while it keeps failing.

        `FailedScheduling` is the reason operators already watch and alert on, and the one
        kube-scheduler gives its own API errors (a rejected Binding, a failed preemption).
        """
        if isinstance(err, WriteRefused):
            message = f"the API server refused a write, retrying after a backoff: {err}"
            log.warning("write refused", unit=unit.key, error=str(err))
        else:
            first_line = next(iter(str(err).splitlines()), "")
            message = f"scheduling cycle failed, retrying after a backoff: {type(err).__name__}: {first_line}"
            log.error("scheduling cycle failed", unit=unit.key, exc_info=err)
        self.queue.refused(unit.key, now)
        regarding = unit.group if unit.group is not None else unit.members[0].pod
        self.cluster.record_event(regarding, "Warning", "FailedScheduling", message)
        for member in unit.members:
            if member.key not in placed:
                self._pending(member, "SchedulerError", message, report)
        queue = unit_queue(unit.group, unit.members) or ""
        reason = UnitReason(PendingReason.SCHEDULER_ERROR, message, queue)
        self._tell(unit.key, unit.group, reason, report, event=False)  # its Warning Event is above, on every failure

    def _remove_gang_gates(self, snapshot: Snapshot, gated: list[PodInfo]) -> bool:
        """Remove our gate from every member of a ready gang (and from lone pods) of the pending pods that carry it;
        never a foreign one."""
        gate = self.config.gate_name
        removed = False
        for info in gated:
            if self.queue.backing_off(unit_key(info.group_key, info.key), snapshot.now):
                continue  # a refused write: its gates stay until the backoff is over
            if info.group_key is not None:
                group = snapshot.groups.get(info.group_key)
                if group is None or len(snapshot.members.get(info.group_key, ())) < group.min_count:
                    continue
            self.cluster.remove_scheduling_gate(info.pod, gate)
            log.info("gate removed", pod=info.key, gate=gate, group=info.group_key)
            removed = True
        return removed

    def _running_preemption(self, objects: ClusterObjects) -> set[str]:
        """Units whose preemption is still being sent: a victim whose deletion the view does not show yet.

        Such a unit is not tried until every deletion of its preemption shows, as kube-scheduler's
        DefaultPreemption PreEnqueue keeps a preemptor (every member of a pod group) out of the queue
        while its asynchronous preemption runs (`Executor.IsPodRunningPreemption`, KEP-4832). Tried
        meanwhile, it saw some victims gone and others not, and bound where a victim happened to go
        first instead of on its nomination: on another node than `phalanx simulate` predicts, where all
        victims of a decision go at once (fuzz seed 284884 protected #3).
        """
        return set(objects.victims_in_flight.values())

    def _pre_enqueue(self, info: PodInfo, snapshot: Snapshot) -> Status:
        for plugin in self.profile.pre_enqueue:
            try:
                status = plugin.pre_enqueue(info, snapshot)
            except Exception as err:  # a plugin bug parks the pod and names the plugin
                log.error("pre-enqueue failed", plugin=plugin.name, pod=info.key, error=repr(err))
                status = error(f"{plugin.name} failed: {err!r}")
            if not status.is_success:
                return status.with_plugin(plugin.name)
        return Status()

    def _schedule_unit(self, unit: SchedulingUnit, memo: PlacementMemo, report: PassReport, placed: set[str]) -> None:
        snapshot = memo.snapshot
        state = CycleState()
        unit, trial, failures = self._place_sparing_claims(unit, memo, state)
        already = self._bound_members(unit.group, snapshot) if unit.group is not None else 0
        verdicts = [verdict for _, verdict in failures.values() if verdict is not None]
        fit_error = describe(verdicts[0], len(snapshot.nodes.names)) if verdicts else ""
        needed = unit.min_count if unit.group is not None and unit.group.is_gang else already + len(unit.members)
        fitted = len(trial) + already
        if unit.group is not None and unit.group.is_gang and len(trial) + already < unit.min_count:
            self._undo(trial, memo, state)
            gang = f"gang {unit.group.key} needs {unit.min_count} members, {len(trial) + already} can be placed"
            held_back = len(snapshot.members.get(unit.group.key, ())) - already - len(unit.members)
            gang += f" ({held_back} held back by scheduling gates)." if held_back > 0 else "."
            # Members no node could take whatever was removed: when too many, preemption cannot help the gang.
            nowhere = sum(1 for status, _ in failures.values() if status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE)
            hopeless = already + len(unit.members) - nowhere < unit.min_count
            code = Code.UNSCHEDULABLE_AND_UNRESOLVABLE if hopeless else None
            failures = {
                m.key: (
                    Status(code or Code.UNSCHEDULABLE, (f"{gang} {failures[m.key][0].message()}",))
                    if m.key in failures
                    else Status(code or Code.UNSCHEDULABLE, (gang,)),
                    failures[m.key][1] if m.key in failures else None,
                )
                for m in unit.members
            }
            trial = []
        report.attempts[unit.key] = Attempt(fitted, needed, fit_error, len(trial))
        for pod, row in trial:
            self._bind(pod, row, unit.key, state, snapshot, report, placed)
        if unit.group is not None and trial and already < unit.min_count:
            # The group just started running: min-runtime counts from here (docs/DESIGN.md, API: Min-runtime).
            self.cluster.annotate_pod_group(unit.group, LAST_START_ANNOTATION, rfc3339(snapshot.now))
        scheduled = bool(trial) or not failures
        if unit.group is not None and scheduled:
            self._group_condition(unit.group, None)
        if not failures:
            self.queue.done(unit)
            return
        if trial:
            # Members bound in this pass are placed: preemption is for the others only. A bound pod
            # never takes a nomination (the API server refuses it, issue 11).
            bound = {pod.key for pod, _ in trial}
            unit = replace(unit, members=tuple(m for m in unit.members if m.key not in bound))
        reason = self._post_filter(unit, snapshot, state, failures, report, placed)
        self._tell(unit.key, None if scheduled else unit.group, reason, report)

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

    def _bound_members(self, group: PodGroup, snapshot: Snapshot) -> int:
        return sum(1 for m in snapshot.members.get(group.key, ()) if m.node_name is not None)

    def _place_sparing_claims(
        self, unit: SchedulingUnit, memo: PlacementMemo, state: CycleState
    ) -> tuple[SchedulingUnit, list[tuple[PodInfo, int]], dict[str, tuple[Status, NodeVerdict | None]]]:
        """`_place_held`, a gang first sparing the room other pod groups' preemptions claimed (their nominations,
        `Snapshot.claims_against`); it takes that room only if it can neither fit nor preempt elsewhere. Returns
        the unit as placed (sparing or not: its preemption, if any, follows the same rule).

        By priority alone (kube-scheduler's rule), a higher gang that completes after a lower one decided takes
        the room the lower gang's victims leave, and the lower gang decides again, on victims the higher one
        could have taken itself: 4 gangs preempting at once on the real server did so (issue 23)."""
        snapshot = memo.snapshot
        if unit.group is not None and unit.group.is_gang and snapshot.claims_against(unit):
            sparing = replace(unit, spares_claims=True)
            trial, failures = self._place_held(sparing, memo, state)
            if len(trial) + self._bound_members(unit.group, snapshot) >= unit.min_count:
                return sparing, trial, failures
            self._undo(trial, memo, state)
            if self._would_preempt(sparing, snapshot, state, failures):
                return sparing, *self._place_held(sparing, memo, state)
        return unit, *self._place_held(unit, memo, state)

    def _would_preempt(
        self,
        unit: SchedulingUnit,
        snapshot: Snapshot,
        state: CycleState,
        failures: dict[str, tuple[Status, NodeVerdict | None]],
    ) -> bool:
        """Whether a PostFilter plugin would nominate the unit's members (with victims or without): a dry run,
        nothing is written."""
        statuses = {key: status for key, (status, _) in failures.items()}
        if not any(s.code == Code.UNSCHEDULABLE for s in statuses.values()):
            return False
        for plugin in self.profile.post_filters:
            try:
                result = plugin.post_filter(state.clone(), unit, snapshot, statuses)
            except Exception as err:  # reported by the real run that follows
                log.debug("post filter failed", plugin=plugin.name, unit=unit.key, error=repr(err))
                continue
            if result.nominations or result.victims:
                return True
        return False

    def _place_held(
        self, unit: SchedulingUnit, memo: PlacementMemo, state: CycleState
    ) -> tuple[list[tuple[PodInfo, int]], dict[str, tuple[Status, NodeVerdict | None]]]:
        """`_place` with the room other units' nominations hold against this one counted as taken."""
        snapshot = memo.snapshot
        held = snapshot.held_against(unit)
        rows = [snapshot.nodes.index[p.pod.status.nominated_node_name or ""] for p in held]
        for pod, row in zip(held, rows, strict=True):
            snapshot.nodes.requested[row] += snapshot.nodes.usage(pod.requests)
            memo.changed(row)
        try:
            return self._place(unit, memo, state)
        finally:
            for pod, row in zip(held, rows, strict=True):
                snapshot.nodes.requested[row] -= snapshot.nodes.usage(pod.requests)
                memo.changed(row)

    def _place(
        self, unit: SchedulingUnit, memo: PlacementMemo, state: CycleState
    ) -> tuple[list[tuple[PodInfo, int]], dict[str, tuple[Status, NodeVerdict | None]]]:
        """Place members one by one on the snapshot (assume); the caller binds or rolls back."""
        snapshot = memo.snapshot
        trial: list[tuple[PodInfo, int]] = []
        failures: dict[str, tuple[Status, NodeVerdict | None]] = {}
        count = len(snapshot.nodes.names)
        for member in unit.members:
            try:
                row = self._nominated_row(member, memo, state)
                if row is None:
                    row = memo.best(member, state)
            except Exception as err:  # a filter or score bug: this member is retried after backoff
                log.error("scheduling cycle failed", pod=member.key, error=repr(err))
                failures[member.key] = (error(f"scheduling cycle failed: {err!r}"), None)
                continue
            if row is None:
                verdict = memo.verdict(member, state)
                failures[member.key] = (Status(verdict.code, (describe(verdict, count),)), verdict)
                continue
            snapshot.assume(member, row)
            memo.changed(row)
            status = self._reserve(member, row, snapshot, state)
            if not status.is_success:
                snapshot.forget(member, row)
                memo.changed(row)
                failures[member.key] = (status, None)
                continue
            trial.append((member, row))
        return trial, failures

    def _reserve(self, pod: PodInfo, row: int, snapshot: Snapshot, state: CycleState) -> Status:
        """Run the Reserve plugins for a pod just placed on `row`; on a failure, those that reserved are undone (in
        reverse), and the Status names the plugin."""
        done: list[ReservePlugin] = []
        for plugin in self.profile.reserves:
            try:
                status = plugin.reserve(state, pod, snapshot, row)
            except Exception as err:  # a plugin bug fails this pod only
                log.error("reserve failed", plugin=plugin.name, pod=pod.key, error=repr(err))
                status = error(f"{plugin.name} failed: {err!r}")
            if not status.is_success:
                for earlier in reversed(done):
                    earlier.unreserve(state, pod, snapshot, row)
                return status.with_plugin(plugin.name)
            done.append(plugin)
        return Status()

    def _undo(self, trial: list[tuple[PodInfo, int]], memo: PlacementMemo, state: CycleState) -> None:
        """Undo trial placements (a gang that could not place `minCount` members): each pod's reservations, in
        reverse, then the pod itself."""
        for pod, row in trial:
            for plugin in reversed(self.profile.reserves):
                plugin.unreserve(state, pod, memo.snapshot, row)
            memo.snapshot.forget(pod, row)
            memo.changed(row)

    def _nominated_row(self, pod: PodInfo, memo: PlacementMemo, state: CycleState) -> int | None:
        """A nominated pod goes back to its nominated node when it fits there (kube-scheduler does too)."""
        row = memo.snapshot.nodes.index.get(pod.pod.status.nominated_node_name or "")
        if row is None:
            return None
        return row if memo.verdict(pod, state).feasible[row] else None

    def _bind(
        self,
        pod: PodInfo,
        row: int,
        unit: str,
        state: CycleState,
        snapshot: Snapshot,
        report: PassReport,
        placed: set[str],
    ) -> None:
        """PreBind (what the pod needs written before it is bound: its volumes), then the Binding."""
        node = snapshot.nodes.names[row]
        for plugin in self.profile.pre_binds:
            plugin.pre_bind(state, pod, node, self.cluster, unit)
        self.cluster.bind(pod.pod, node, unit=unit)
        placed.add(pod.key)
        report.bindings.append(Binding(pod.key, node, snapshot.now))

    def _post_filter(
        self,
        unit: SchedulingUnit,
        snapshot: Snapshot,
        state: CycleState,
        failures: dict[str, tuple[Status, NodeVerdict | None]],
        report: PassReport,
        placed: set[str],
    ) -> UnitReason:
        """Run the PostFilter plugins (preemption) for the unit's failed members; returns the unit's reason: its
        first failed member's message with what the plugins said (who protects whom, until when)."""
        statuses = {key: status for key, (status, _) in failures.items()}
        until: datetime | None = None
        notes: list[str] = []
        resolvable = any(s.code == Code.UNSCHEDULABLE for s in statuses.values())
        preempting = any(m.pod.status.nominated_node_name for m in unit.members)
        if not resolvable and not any(s.code == Code.ERROR for s in statuses.values()):
            nodes = len(snapshot.nodes.names)
            for plugin in self.profile.post_filters:  # kube-scheduler's words when no node is worth a search
                notes.append(f"{plugin.name}: 0/{nodes} nodes are available: {nodes} {NOT_HELPFUL}.")
        for plugin in self.profile.post_filters if resolvable else ():
            try:
                result = plugin.post_filter(state.clone(), unit, snapshot, statuses)
            except Exception as err:  # a plugin bug must not stop the pass
                log.error("post filter failed", plugin=plugin.name, unit=unit.key, error=repr(err))
                continue
            report.post_filter.append((unit.key, result))
            if result.status.until is not None:
                until = result.status.until if until is None else min(until, result.status.until)
            if result.status.reasons:
                notes.append(f"{plugin.name}: {result.status.message()}")
            if (result.nominations or result.victims) and self.actuator is not None:
                if result.victims or any(result.nominations.values()):
                    # Here, not in the plugin: a dry run (`_would_preempt`) decides nothing.
                    log.info(
                        "preemption decided",
                        preemptor=unit.key,
                        victims=len(result.victims),
                        nominated=sum(1 for node in result.nominations.values() if node),
                        pdb_violations=result.explanation.pdb_violations if result.explanation else 0,
                    )
                self.actuator.actuate(unit, result, snapshot)
                for member in unit.members:
                    if member.key in result.nominations:
                        snapshot.nominate(member, result.nominations[member.key])
                preempting = True
                break
        erred = any(s.code == Code.ERROR for s in statuses.values())
        if erred:
            retry = snapshot.now + timedelta(seconds=self.config.backoff_seconds)
            until = retry if until is None else min(until, retry)
        hopeless = not resolvable and not erred and not preempting
        self.queue.failed(unit, snapshot.now, until, backoff=not preempting, unresolvable=hopeless)
        suffix = f" {' '.join(notes)}" if notes else ""
        for member in unit.members:
            if member.key in failures:
                status = failures[member.key][0]
                reason = "SchedulerError" if status.code == Code.ERROR else "Unschedulable"
                self._pending(member, reason, status.message() + suffix, report)
        first = next(iter(failures.values()))[0]
        if preempting:
            code = PendingReason.PREEMPTING
        elif first.code == Code.ERROR:
            code = PendingReason.SCHEDULER_ERROR
        else:
            code = PendingReason.UNSCHEDULABLE
        return UnitReason(code, first.message() + suffix, unit_queue(unit.group, unit.members) or "")

    def _pending(self, info: PodInfo, reason: str, message: str, report: PassReport) -> None:
        """Report the pod pending, and write its PodScheduled condition if it says otherwise."""
        report.pending.append(self._say_pending(info, reason, message) or Pending(info.key, reason, message))

    def _say_pending(self, info: PodInfo, reason: str, message: str) -> Pending | None:
        """The Pending the pod's PodScheduled condition says already; None when it said otherwise and was written."""
        current = info.pod.condition("PodScheduled")
        if current is not None and current.reason == reason and current.message == message:
            return Pending(info.key, reason, message)
        condition = Condition(
            type="PodScheduled", status="False", reason=reason, message=message, last_transition_time=self.cluster.now()
        )
        self.cluster.set_pod_condition(info.pod, condition)
        return None


WarningKey = tuple[str, str, str, str, str, str]
"""kind, `namespace/name`, uid, reason, note, version: what makes a configuration finding the same one."""


def warning_key(warning: ConfigurationWarning) -> WarningKey:
    obj = warning.regarding
    if obj is None:
        return "", "", "", warning.reason, warning.note, warning.version or ""
    uid = getattr(getattr(obj, "metadata", None), "uid", None) or ""
    return str(getattr(obj, "kind", "")), object_key(obj), uid, warning.reason, warning.note, warning.version or ""
