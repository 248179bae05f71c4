"""The scheduler's main loop, one pass at a time, on any `Cluster` back end (memory or kube).

A pass reads the cluster, takes our gate off the pending pods the Ungate plugins release, builds a Snapshot and
runs PreEnqueue on the pending pods that changed (the others' answers are kept from pass to pass: `pending.py`).
Then, for each unit popped in priority order (a lone pod, or every pending member of a PodGroup), as
kube-scheduler's `scheduleOne`:

1. place it (`placer.py`): the ways the Placement plugins propose, else the unit as it stands; each member
   filtered, scored, assumed and reserved on the snapshot;
2. permit it: the Permit plugins see the placement whole; a rejection undoes it, and every member fails with it;
3. bind it: each member's PreBind writes, then its Binding; then the PostBind plugins;
4. for the members that did not fit (never one bound in this pass), the PostFilter plugins (preemption), whose
   proposal with victims or nominations goes to the actuator.

The runner names no rule of its own: each is a plugin at one of these points (`plugins/__init__.py`). What each
unit is told, and the pass report, belong to the `Reporter`. Time comes only from `cluster.now()`, so the same code
runs on the simulator's clock.

A write the API server refuses (or a bug in one unit's cycle) fails that unit only (docs/DESIGN.md, invariant 7):
it is told so and retried after a backoff that doubles while the refusals go on, and the pass goes on with the
next unit. A write the back end sends in the background (a Binding, a preemption write) is found refused in its
ledger at the next pass, naming the unit it was for, and treated alike.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Protocol

import structlog

from scheduler.api.config import SchedulerConfiguration
from scheduler.api.meta import rfc3339
from scheduler.api.pod import Pod
from scheduler.framework.cluster import Cluster, ClusterObjects, PassAborted
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.feasibility import describe
from scheduler.framework.hints import Sighting
from scheduler.framework.interfaces import NodeVerdict, Placement, PostFilterResult
from scheduler.framework.pending import PendingPods
from scheduler.framework.placement import PlacementMemo
from scheduler.framework.placer import UnitPlacer
from scheduler.framework.pod_info import PodInfo, SchedulingUnit
from scheduler.framework.profile import Profile
from scheduler.framework.queue import SchedulingQueue
from scheduler.framework.reporter import Attempt, Binding, PassReport, Reporter, not_helpful
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.snapshot_builder import PodInfoCache, build_snapshot
from scheduler.framework.status import Code, Status, error
from scheduler.framework.unit_key import unit_key

__all__ = ["DEFAULT_SCHEDULER", "Actuator", "PassReport", "Scheduler"]

log = structlog.get_logger(__name__)

DEFAULT_SCHEDULER = "default-scheduler"


class Actuator(Protocol):
    """Acts on a PostFilter proposal (nominate, mark and delete victims); see `scheduler/preemption`."""

    def actuate(self, unit: SchedulingUnit, result: PostFilterResult, snapshot: Snapshot) -> None: ...


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
        every unit: one that retries every pending pod takes seconds, and may write nothing that would notice
        the Lease is gone."""
        self.queue = SchedulingQueue(config.backoff_seconds, config.max_backoff_seconds)
        self._cache = cache or PodInfoCache()
        """What the snapshot builds reuse: given warm by a standby that just became leader (`process.py`)."""
        self.reporter = Reporter(cluster)
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
        snapshot = self._snapshot(objects, now)
        if self._ungate(snapshot):
            snapshot = self._snapshot(self.cluster.objects(), now)
        self.reporter.warnings(self.profile.configuration_checks, snapshot, report)
        self._snapshot_ready(snapshot)
        self.queue.keep_refusals(self.waiting.units_pending(), now)
        # A unit whose preemption is still being sent waits until every deletion of it shows, as kube-scheduler's
        # DefaultPreemption PreEnqueue keeps a preemptor out while its asynchronous preemption runs (KEP-4832): tried
        # meanwhile, it would bind where a victim happened to go first rather than where `simulate` predicts.
        preempting = set(objects.victims_in_flight.values())
        admitted = self.waiting.admit(snapshot, preempting, self._pre_enqueue, self.reporter.say_pending)
        report.pending += admitted.pending
        placed: set[str] = set()
        tried: set[str] = set()
        placer = UnitPlacer(PlacementMemo(snapshot, self.profile), self.profile)
        self.queue.sight(Sighting.of(snapshot))
        order = self.queue.pop_order(admitted.units, admitted.looked, now, until=self.cluster.writes_backed_up)
        report.retries, report.retries_avoided = self.queue.retries, self.queue.avoided
        for unit in order:
            self._check_interrupted()
            report.units_tried += 1
            tried.add(unit.key)
            try:
                self._schedule_unit(unit, placer, report, placed)
            except PassAborted:
                raise
            except Exception as err:  # a refused write, or a bug, fails this unit only (invariant 7)
                self.queue.refused(unit.key, snapshot.now)
                self.reporter.failed(unit, err, report, placed)
        placed_infos = [snapshot.pods[key] for key in placed]
        self.queue.sight(Sighting.of(snapshot, placed_infos), placed_infos)
        self.reporter.held(snapshot, self.waiting, tried, admitted.looked, report)
        held = admitted.held
        self.reporter.summarise(
            admitted.units, admitted.members, held, placed, snapshot, self.queue, self.waiting, report
        )
        report.deferred = self.queue.active
        report.pools = self.queue.pools(gated=len(held))
        log.info(
            "pass done", tried=report.units_tried, bound=len(report.bindings), deferred=report.deferred, **report.pools
        )
        return report

    def _snapshot(self, objects: ClusterObjects, now: datetime) -> Snapshot:
        snapshot = build_snapshot(objects, now, self.config, self._cache)
        self.waiting.update(snapshot)
        self._check_interrupted()
        return snapshot

    def _schedule_unit(self, unit: SchedulingUnit, placer: UnitPlacer, report: PassReport, placed: set[str]) -> None:
        """One unit's cycle: place, permit, bind and post-bind, then PostFilter for the members that did not fit."""
        snapshot = placer.snapshot
        state = CycleState()
        placement = placer.place(unit, state)
        unit, failures = placement.unit, dict(placement.failures)
        permit = placer.permit(placement, state)
        verdicts = [verdict for _, verdict in failures.values() if verdict is not None]
        fit_error = describe(verdicts[0], len(snapshot.nodes.names)) if verdicts else ""
        fitted = len(placement.placed) + placement.bound_before
        needed = permit.needs if permit.needs is not None else placement.bound_before + len(unit.members)
        if not permit.status.is_success:
            placer.undo(placement, state)
            failures = rejected(placement, permit.status)
            placement = replace(placement, placed=())
        report.attempts[unit.key] = Attempt(fitted, needed, fit_error, len(placement.placed), placement.domains)
        for pod, row in placement.placed:
            self._bind(pod, snapshot.nodes.names[row], unit.key, state, snapshot, report, placed)
        if placement.placed:
            for plugin in self.profile.post_binds:
                plugin.post_bind(state, placement, snapshot, self.cluster)
        scheduled = bool(placement.placed) or not failures
        if unit.group is not None and scheduled:
            self.reporter.scheduled(unit.group)
        if not failures:
            self.queue.done(unit)
            return
        if placement.placed:
            # Members bound in this pass are placed: preemption is for the others only. A bound pod never takes a
            # nomination (the API server refuses it).
            bound = {pod.key for pod, _ in placement.placed}
            unit = replace(unit, members=tuple(m for m in unit.members if m.key not in bound))
        statuses = {key: status for key, (status, _) in failures.items()}
        preempting, notes = self._post_filter(unit, snapshot, state, statuses, report)
        self.reporter.unschedulable(unit, statuses, notes, preempting, None if scheduled else unit.group, report)

    def _bind(
        self,
        pod: PodInfo,
        node: str,
        unit: str,
        state: CycleState,
        snapshot: Snapshot,
        report: PassReport,
        placed: set[str],
    ) -> None:
        """PreBind (what the pod needs written before it is bound: its volumes, its devices), then the Binding."""
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
        statuses: dict[str, Status],
        report: PassReport,
    ) -> tuple[bool, list[str]]:
        """Run the PostFilter plugins (preemption) for the unit's failed members and park the unit; returns whether
        it is preempting and what the plugins said (who protects whom, until when)."""
        until: datetime | None = None
        notes: list[str] = []
        resolvable = any(s.code == Code.UNSCHEDULABLE for s in statuses.values())
        erred = any(s.code == Code.ERROR for s in statuses.values())
        preempting = any(m.pod.status.nominated_node_name for m in unit.members)
        if not resolvable and not erred:
            notes += [not_helpful(plugin.name, len(snapshot.nodes.names)) for plugin in self.profile.post_filters]
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
                    # Here, not in the plugin: a dry run of the plugin decides nothing.
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
        if erred:
            retry = snapshot.now + timedelta(seconds=self.config.backoff_seconds)
            until = retry if until is None else min(until, retry)
        hopeless = not resolvable and not erred and not preempting
        self.queue.failed(unit, snapshot.now, until, backoff=not preempting, unresolvable=hopeless)
        return preempting, notes

    def _ungate(self, snapshot: Snapshot) -> bool:
        """Take our gate off the pending pods that carry it and that every Ungate plugin releases (never a foreign
        gate; never while the unit waits out a refused write's backoff); whether any came off."""
        gate = self.config.gate_name
        removed = False
        for info in self.waiting.gated():
            if self.queue.backing_off(unit_key(info.group_key, info.key), snapshot.now):
                continue  # a refused write: its gates stay until the backoff is over
            if all(plugin.ungate(info, snapshot) for plugin in self.profile.ungates):
                self.cluster.remove_scheduling_gate(info.pod, gate)
                log.info("gate removed", pod=info.key, gate=gate, group=info.group_key)
                removed = True
        return removed

    def _take_refusals(self, objects: ClusterObjects, now: datetime) -> None:
        """Writes the back end sent in the background and the server refused, from its ledger: each names the
        unit it was for, which is retried after a backoff, its gates kept meanwhile. The back end told a pod
        why its Binding or gate removal was refused (and the view shows it pending again); a refused
        preemption write (a nomination, a victim's DisruptionTarget or deletion) is told to its preemptor
        here."""
        units: set[str] = set()
        for refusal in self.cluster.ledger.refusals():
            units.add(refusal.unit)
            if not refusal.told:
                self.reporter.refused(refusal, objects)
        for unit in sorted(units):
            until = self.queue.refused(unit, now)
            log.warning("write refused, retrying", unit=unit, retry_at=rfc3339(until))

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

    def _snapshot_ready(self, snapshot: Snapshot) -> None:
        """Let plugins bring their caches up to this snapshot; a failing one is logged and left behind."""
        for hook in self.profile.snapshot_hooks:
            try:
                hook.snapshot_ready(snapshot)
            except Exception as err:  # a plugin bug must not stop the pass: its cache is rebuilt when used
                log.error("snapshot hook failed", plugin=hook.name, error=repr(err))

    def _check_interrupted(self) -> None:
        """After each snapshot and before each unit, the moments a pass can end without leaving a unit half done."""
        if self.interrupted():
            raise PassAborted("interrupted")


def rejected(placement: Placement, status: Status) -> dict[str, tuple[Status, NodeVerdict | None]]:
    """Every member of a placement the Permit plugins refused fails with their status, its own failure (or the
    placement's note) after it."""
    failures = placement.failures
    alone = f"{status.message()} {placement.note}".rstrip()
    return {
        m.key: (
            Status(status.code, (f"{status.message()} {failures[m.key][0].message()}",), status.plugin)
            if m.key in failures
            else Status(status.code, (alone,), status.plugin),
            failures[m.key][1] if m.key in failures else None,
        )
        for m in placement.unit.members
    }
