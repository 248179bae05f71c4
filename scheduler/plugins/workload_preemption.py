"""WorkloadPreemption (PostFilter): when a pod or a pod group does not fit, find what to preempt.

KEP-5710 "Workload-aware preemption" and its delayed preemption: the victim search
(`scheduler.preemption.search`) runs on the snapshot, and a proposal (nominations + victims) is
returned for the actuator only when a full placement exists. A preemptor whose nominations from an
earlier decision still hold waits for its victims to terminate instead of preempting again
(kube-scheduler's `podEligibleToPreemptOthers`); a nomination that no longer fits is cleared and the
search starts over on the current state.

As a Placement plugin it keeps gangs off the room preemption claimed: a gang with no nominations of its own is
first placed sparing the room other pod groups' preemptions claimed (their nominations, `Snapshot.claims_against`),
whatever their priority, and takes that room only if it can neither fit nor preempt elsewhere. By priority alone
(kube-scheduler's rule), a higher gang that completes after a lower one decided takes the room the lower gang's
victims leave, and the lower gang decides again, on victims the higher one could have taken itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import (
    FilterPlugin,
    PostFilterResult,
    PreemptionConstraint,
    ScenarioValidator,
    VictimFilter,
)
from scheduler.framework.pod_info import SchedulingUnit
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import Code, Status, unschedulable
from scheduler.preemption import collector
from scheduler.preemption.candidates import RunningPods, build_candidates, is_terminating
from scheduler.preemption.decision import Outcome, SpareReason

NAME = "WorkloadPreemption"

KEPT_BEHIND_SHARE = 16
"""Between passes, the running-pod columns may lag by fewer than 1/16 of the nodes (`snapshot_ready`)..."""
KEPT_NEAR_SECONDS = 10.0
"""...and are brought up at most this often, however many nodes changed. A backlog drained at hundreds of pods a
second changes 1/16 of 10,000 nodes every pass, and a refresh splices every column whole: kept near on that clock,
the columns cost a drain's passes little, and a decision that needs them brings up at most this long's changes."""

CLEAR = ""
"""A nomination to this node name means: clear the member's stale `nominatedNodeName`."""


class WorkloadPreemption:
    name = NAME

    def __init__(
        self,
        static_filters: Sequence[FilterPlugin],
        victim_filters: Sequence[VictimFilter] = (),
        validators: Sequence[ScenarioValidator] = (),
        constraints: Sequence[PreemptionConstraint] = (),
    ) -> None:
        """`static_filters` are the profile's: a member may only be nominated where they all pass. `constraints`
        are its filters beyond resources whose conflicts preemption may clear (host ports, pod affinity, spread)."""
        self.victim_filters = tuple(victim_filters)
        self.validators = tuple(validators)
        self.static_filters = static_filters
        self.constraints = tuple(constraints)
        self._columns: RunningPods | None = None
        self._kept_at: datetime | None = None
        """When `snapshot_ready` last brought the columns up (the snapshot's clock)."""

    def snapshot_ready(self, snapshot: Snapshot) -> None:
        """Keep the running-pod columns near the cluster (brought up once 1/16 of the nodes changed, at most every
        `KEPT_NEAR_SECONDS`), so a decision on a big cluster neither builds them from every pod nor re-reads most of
        them first."""
        if self._kept_at is not None and snapshot.now - self._kept_at < timedelta(seconds=KEPT_NEAR_SECONDS):
            return
        with collector.paused():
            before = self._columns.version if self._columns is not None else None
            columns = self._running(snapshot, unless_fewer=max(1, len(snapshot.nodes.names) // KEPT_BEHIND_SHARE))
            if columns.version != before:
                self._kept_at = snapshot.now

    def _running(self, snapshot: Snapshot, unless_fewer: int = 0) -> RunningPods:
        """Running pods as columns, updated by the snapshot's difference from the last one seen (a cache
        of derived data, not cycle state: it holds nothing a decision depends on besides the snapshot)."""
        columns = self._columns
        self._columns = RunningPods.of(snapshot) if columns is None else columns.refresh(snapshot, unless_fewer)
        return self._columns

    def post_filter(
        self, state: CycleState, unit: SchedulingUnit, snapshot: Snapshot, statuses: dict[str, Status]
    ) -> PostFilterResult:
        with collector.paused():
            return self._post_filter(state, unit, snapshot)

    def placements(self, state: CycleState, unit: SchedulingUnit, snapshot: Snapshot) -> tuple[SchedulingUnit, ...]:
        """A gang that other pod groups' preemptions claimed room from is first tried sparing that room; the unit as
        placed carries the choice, and its preemption, if any, follows the same rule."""
        if unit.group is None or not unit.group.is_gang or not snapshot.claims_against(unit):
            return ()
        return (replace(unit, spares_claims=True),)

    def _post_filter(self, state: CycleState, unit: SchedulingUnit, snapshot: Snapshot) -> PostFilterResult:
        min_count = self._still_needed(unit, snapshot)
        waiting = self._waiting_for_victims(unit, snapshot, min_count)
        if waiting is not None:
            return PostFilterResult(status=unschedulable(waiting), nominations={})
        unit = self._unplaced(unit, snapshot)
        candidates = build_candidates(
            unit,
            snapshot,
            self._running(snapshot),
            state,
            self.victim_filters,
            self.validators,
            self.static_filters,
            min_count,
            self.constraints,
        )
        decision = candidates.decide()
        stale = {
            m.key: CLEAR for m in unit.members if m.pod.status.nominated_node_name and m.key not in decision.nominations
        }
        if decision.outcome != Outcome.PREEMPT:
            # Not logged here: the runner logs a unit's reason once, when it changes (framework/reasons.py).
            protections = tuple(s.message for s in decision.spared if s.reason == SpareReason.PROTECTED)
            return PostFilterResult(
                status=unschedulable(decision.message, *protections, until=decision.until),
                nominations=stale,
                explanation=decision,
            )
        victims = candidates.victims(decision)
        return PostFilterResult(
            status=Status(Code.UNSCHEDULABLE, (decision.message,), until=decision.until),
            nominations={**stale, **decision.nominations},
            victims=victims,
            explanation=decision,
        )

    @staticmethod
    def _unplaced(unit: SchedulingUnit, snapshot: Snapshot) -> SchedulingUnit:
        """The unit without the members this cycle already placed (and bound): a basic group binds what
        fits before preempting, and those members must neither be placed a second time by the search
        (which would take victims for room they already hold) nor nominated."""
        members = tuple(m for m in unit.members if (snapshot.pods.get(m.key) or m).node_name is None)
        return unit if len(members) == len(unit.members) else replace(unit, members=members)

    @staticmethod
    def _still_needed(unit: SchedulingUnit, snapshot: Snapshot) -> int:
        """Members the unit still needs placed: a gang counts the members already bound, those bound
        in this very pass included (the snapshot holds them as placed)."""
        if unit.group is None:
            return 1
        pods = snapshot.pods
        bound = sum(1 for m in snapshot.members.get(unit.group.key, ()) if pods.get(m.key, m).node_name is not None)
        return max(1, unit.min_count - bound)

    @staticmethod
    def _waiting_for_victims(unit: SchedulingUnit, snapshot: Snapshot, min_count: int) -> str | None:
        """Why the unit should wait rather than preempt again, or None.

        It waits when at least `min_count` members hold nominations that fit once the pods already
        terminating on those nodes are gone, and something is still terminating there.
        """
        table = snapshot.nodes
        nominated = [
            (m, table.index[m.pod.status.nominated_node_name])
            for m in unit.members
            if m.pod.status.nominated_node_name in table.index
        ]
        if len(nominated) < min_count or not nominated:
            return None
        rows = sorted({row for _, row in nominated})
        free = table.free()
        room = {row: free[row].copy() for row in rows}
        terminating = 0
        for row in rows:
            for info in snapshot.running[row]:
                if is_terminating(info):
                    room[row] += table.usage(info.requests)
                    terminating += 1
        for member, row in nominated:
            room[row] -= table.vector(member.requests)
        if terminating == 0 or any((r < 0).any() for r in room.values()):
            return None
        return f"waiting for {terminating} preempted pod(s) to terminate on the nominated node(s)"
