"""The placement step: a unit's members placed one by one on the snapshot, then permitted or undone as a whole.

Each member goes back to its nominated node when it fits there (as kube-scheduler's), else to the best node the
filters and scores find (`PlacementMemo`), with the room other units' nominations hold against it counted as taken;
it is assumed there and its Reserve plugins hold what it takes beyond the node's resources. Nothing is written: the
runner binds a placement the Permit plugins let through, and a rejected one is undone (each pod's reservations in
reverse, then the pod), so a unit that cannot bind leaves the snapshot as it found it.

A pod group with topology domains (`pod_group_placement.py`) is placed in each domain in turn, on its nodes only,
and goes where the PlacementScore plugins score highest; when none can take it, it is left placed in the domain that
took most of it, each member's reason saying how many members the closest domains could take, and its PostFilter may
preempt only inside one domain (the domains tried are in CycleState). Otherwise the Placement plugins propose other
ways to place the unit first (`PlacementPlugin`). One is taken when it binds, or when its preemption would nominate (a
dry run of the PostFilter plugins: nothing is written); the unit as it stands is the last resort. So a way that spares
something is given up only for one that can neither fit nor preempt.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import structlog

from scheduler.api.pod_group import PodGroup
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.feasibility import describe
from scheduler.framework.interfaces import (
    NodeVerdict,
    NormalizePlacementScore,
    PermitResult,
    Placement,
    PlacementScorePlugin,
    ReservePlugin,
)
from scheduler.framework.normalize import MAX_NODE_SCORE
from scheduler.framework.placement import PlacementMemo
from scheduler.framework.pod_group_placement import (
    TRIED_KEY,
    Domain,
    DomainFit,
    Proposal,
    Refusal,
    Tried,
    closest_first,
    shortfalls,
)
from scheduler.framework.pod_info import PodInfo, SchedulingUnit
from scheduler.framework.profile import Profile
from scheduler.framework.snapshot import BoolArray, IntArray, Snapshot
from scheduler.framework.status import Code, Status, error

log = structlog.get_logger(__name__)


class UnitPlacer:
    """The placement step over one pass's snapshot and placement memo."""

    def __init__(self, memo: PlacementMemo, profile: Profile) -> None:
        self.memo = memo
        self.profile = profile

    @property
    def snapshot(self) -> Snapshot:
        return self.memo.snapshot

    def place(self, unit: SchedulingUnit, state: CycleState) -> Placement:
        """In its best domain when the group has domains; else the first of the Placement plugins' ways that binds
        or would preempt, else the unit as it stands."""
        domains = self._domains(unit)
        if isinstance(domains, Refusal):
            return self._refused(unit, domains.message)
        if domains:
            return self._in_one_domain(unit, domains, state)
        for plugin in self.profile.placements:
            for candidate in plugin.placements(state, unit, self.memo.snapshot):
                placement = self._trial(candidate, state)
                if self.permit(placement, state).status.is_success:
                    return placement
                self.undo(placement, state)
                if self._would_preempt(placement, state):
                    return self._trial(candidate, state)
        return self._trial(unit, state)

    def _domains(self, unit: SchedulingUnit) -> list[Domain] | Refusal:
        """The domains the first PlacementGenerate plugin with a say gives the unit's group; none for a lone pod."""
        if unit.group is None:
            return []
        for plugin in self.profile.placement_generators:
            found = plugin.generate_placements(unit.group, self.memo.snapshot)
            if found is not None:
                return found
        return []

    def _refused(self, unit: SchedulingUnit, message: str) -> Placement:
        """No domain can take the group: every member fails, no preemption can help, and the FitError says why once
        (as a PreFilter rejection does) rather than counting nodes."""
        count = len(self.memo.snapshot.nodes.names)
        nowhere = np.zeros(count, dtype=np.bool_)
        verdict = NodeVerdict(nowhere, code=Code.UNSCHEDULABLE_AND_UNRESOLVABLE, message=message)
        failure = (Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (message,)), verdict)
        return Placement(unit, (), {m.key: failure for m in unit.members}, self._bound(unit))

    def _in_one_domain(self, unit: SchedulingUnit, domains: list[Domain], state: CycleState) -> Placement:
        """Each domain of the narrowest level that has a feasible one, the unit placed on its nodes only and undone;
        then the best of them again, for real. With none feasible, the domain that took most members, each
        member's reason naming what the closest domains could take."""
        assert unit.group is not None
        state.write(TRIED_KEY, Tried(tuple(domains)))
        bound = self._bound(unit)
        needed = unit.min_count if unit.group.is_gang else bound + 1
        fits: list[DomainFit] = []
        closest: tuple[int, Domain] | None = None
        need = self._cumulative_need(unit, needed - bound)
        free = self.memo.snapshot.nodes.free()
        for level in sorted({d.level for d in domains}):
            proposals: list[Proposal] = []
            tier = [d for d in domains if d.level == level]
            reach = _reach(need, free, tier, needed - bound)
            for domain, most in zip(tier, reach, strict=True):
                if most is not None:
                    fits.append(DomainFit(domain.name, bound + most, needed, exact=most == 0))
                    continue
                trial = self._trial(unit, state, domain.rows)
                fitted = len(trial.placed) + trial.bound_before
                if trial.placed and self.permit(trial, state).status.is_success:
                    proposals.append(Proposal(domain, trial.placed, trial.bound_before))
                elif closest is None or fitted > closest[0]:
                    closest = (fitted, domain)
                fits.append(DomainFit(domain.name, fitted, needed))
                self.undo(trial, state)
            if proposals:
                best = choose(unit.group, proposals, self.profile.placement_scores, self.memo.snapshot)
                state.write(TRIED_KEY, Tried((best.domain,)))  # what did not fit here is preempted for here only
                return self._trial(unit, state, best.domain.rows)
        # Left where most of it fits, its members' reasons (and the Permit plugins') naming the closest domains;
        # never on the union of the domains, where a gang could fit spread over several.
        ordered = closest_first(fits)
        said = shortfalls(ordered) + self._nominated_elsewhere(unit, domains)
        placement = self._trial(unit, state, (closest[1] if closest is not None else domains[0]).rows)
        failures = {
            key: (Status(status.code, (f"{said}; {status.message()}",)), verdict)
            for key, (status, verdict) in placement.failures.items()
        }
        return replace(placement, failures=failures, note=said, domains=tuple(ordered))

    def _nominated_elsewhere(self, unit: SchedulingUnit, domains: list[Domain]) -> str:
        """`; its nominated nodes are in no one topology domain now (rack=a, rack=b)` when no domain tried holds
        every member's nominated node (nodes relabelled since its preemption chose one): the nominations no longer pin
        the group, and its preemption decides again. Names the narrowest domains tried that hold any of those nodes,
        and counts those outside them."""
        index = self.memo.snapshot.nodes.index
        rows = [index[node] for m in unit.members if (node := m.pod.status.nominated_node_name) in index]
        if not rows or any(d.rows[rows].all() for d in domains):
            return ""
        narrowest = [d for d in domains if d.level == domains[0].level]
        named = [d.name for d in narrowest if d.rows[rows].any()]
        outside = sum(1 for row in set(rows) if not any(d.rows[row] for d in narrowest))
        if outside:
            named.append(f"{outside} node(s) outside those tried")
        return f"; its nominated nodes are in no one topology domain now ({', '.join(named)})"

    def _cumulative_need(self, unit: SchedulingUnit, want: int) -> IntArray | None:
        """Row k: what any k+1 members need at least, per resource (the sum of that resource's k+1 smallest
        requests); None when a domain must take no more members (`want`). A domain whose free resources, summed over
        its nodes, fall short of row `want - 1`, or whose nodes could not hold `want` members of the cheapest kind,
        cannot hold the members it must take (a bound, not a fit): it is passed over without placing a pod, and the
        bound says how many it could take at most (`_reach`)."""
        if want <= 0:
            return None
        table = self.memo.snapshot.nodes
        need: IntArray = np.cumsum(np.sort(np.array([table.usage(m.requests) for m in unit.members]), axis=0), axis=0)
        return need

    def _bound(self, unit: SchedulingUnit) -> int:
        group = unit.group
        members = self.memo.snapshot.members.get(group.key, ()) if group is not None else ()
        return sum(1 for m in members if m.node_name is not None)

    def _would_preempt(self, placement: Placement, state: CycleState) -> bool:
        """Whether a PostFilter plugin would nominate the placement's failed members (with victims or without)."""
        statuses = {key: status for key, (status, _) in placement.failures.items()}
        if not any(s.code == Code.UNSCHEDULABLE for s in statuses.values()):
            return False
        for plugin in self.profile.post_filters:
            try:
                result = plugin.post_filter(state.clone(), placement.unit, self.memo.snapshot, statuses)
            except Exception as err:  # reported by the real run that follows
                log.debug("post filter failed", plugin=plugin.name, unit=placement.unit.key, error=repr(err))
                continue
            if result.nominations or result.victims:
                return True
        return False

    def _trial(self, unit: SchedulingUnit, state: CycleState, within: BoolArray | None = None) -> Placement:
        snapshot, memo = self.memo.snapshot, self.memo
        held = snapshot.held_against(unit)
        rows = [snapshot.nodes.index[p.pod.status.nominated_node_name or ""] for p in held]
        for pod, row in zip(held, rows, strict=True):
            snapshot.nodes.requested[row] += snapshot.nodes.usage(pod.requests)
            memo.changed(row)
        try:
            placed, failures = self._place(unit, state, within)
        finally:
            for pod, row in zip(held, rows, strict=True):
                snapshot.nodes.requested[row] -= snapshot.nodes.usage(pod.requests)
                memo.changed(row)
        return Placement(unit, placed, failures, self._bound(unit))

    def undo(self, placement: Placement, state: CycleState) -> None:
        for pod, row in placement.placed:
            for plugin in reversed(self.profile.reserves):
                plugin.unreserve(state, pod, self.memo.snapshot, row)
            self.memo.snapshot.forget(pod, row)
            self.memo.changed(row)

    def permit(self, placement: Placement, state: CycleState) -> PermitResult:
        """The Permit plugins' answer: the first rejection (naming its plugin), else SUCCESS; `needs` is the first
        plugin's that names one."""
        needs: int | None = None
        for plugin in self.profile.permits:
            try:
                result = plugin.permit(state, placement, self.memo.snapshot)
            except Exception as err:  # a plugin bug fails this unit only
                log.error("permit failed", plugin=plugin.name, unit=placement.unit.key, error=repr(err))
                result = PermitResult(error(f"{plugin.name} failed: {err!r}"))
            needs = result.needs if needs is None else needs
            if not result.status.is_success:
                return PermitResult(result.status.with_plugin(plugin.name), needs)
        return PermitResult(needs=needs)

    def _place(
        self, unit: SchedulingUnit, state: CycleState, within: BoolArray | None = None
    ) -> tuple[tuple[tuple[PodInfo, int], ...], dict[str, tuple[Status, NodeVerdict | None]]]:
        snapshot, memo = self.memo.snapshot, self.memo
        placed: list[tuple[PodInfo, int]] = []
        failures: dict[str, tuple[Status, NodeVerdict | None]] = {}
        count = len(snapshot.nodes.names)
        for member in unit.members:
            try:
                row = self._nominated_row(member, state)
                if row is not None and within is not None and not within[row]:
                    row = None
                if row is None:
                    row = memo.best(member, state, within)
            except Exception as err:  # a filter or score bug: this member is retried after backoff
                log.error("scheduling cycle failed", pod=member.key, error=repr(err))
                failures[member.key] = (error(f"scheduling cycle failed: {err!r}"), None)
                continue
            if row is None:
                verdict = memo.verdict(member, state)
                if within is not None:
                    verdict = replace(verdict, feasible=verdict.feasible & within)
                failures[member.key] = (Status(verdict.code, (describe(verdict, count),)), verdict)
                continue
            snapshot.assume(member, row)
            memo.changed(row)
            status = self._reserve(member, row, state)
            if not status.is_success:
                snapshot.forget(member, row)
                memo.changed(row)
                failures[member.key] = (status, None)
                continue
            placed.append((member, row))
        return tuple(placed), failures

    def _reserve(self, pod: PodInfo, row: int, state: CycleState) -> Status:
        """Run the Reserve plugins for a pod just placed on `row`; on a failure, those that reserved are undone (in
        reverse), and the Status names the plugin."""
        done: list[ReservePlugin] = []
        for plugin in self.profile.reserves:
            try:
                status = plugin.reserve(state, pod, self.memo.snapshot, row)
            except Exception as err:  # a plugin bug fails this pod only
                log.error("reserve failed", plugin=plugin.name, pod=pod.key, error=repr(err))
                status = error(f"{plugin.name} failed: {err!r}")
            if not status.is_success:
                for earlier in reversed(done):
                    earlier.unreserve(state, pod, self.memo.snapshot, row)
                return status.with_plugin(plugin.name)
            done.append(plugin)
        return Status()

    def _nominated_row(self, pod: PodInfo, state: CycleState) -> int | None:
        """A nominated pod goes back to its nominated node when it fits there (kube-scheduler does too)."""
        row = self.memo.snapshot.nodes.index.get(pod.pod.status.nominated_node_name or "")
        if row is None:
            return None
        return row if self.memo.verdict(pod, state).feasible[row] else None


def choose(
    group: PodGroup, proposals: Sequence[Proposal], scorers: Sequence[PlacementScorePlugin], snapshot: Snapshot
) -> Proposal:
    """The proposal the PlacementScore plugins score highest (each normalised if it says how, clamped to 0-100, times
    its weight); the first in the generator's order on a tie."""
    totals = [0] * len(proposals)
    for scorer in scorers:
        raw = [scorer.score_placement(group, p, snapshot) for p in proposals]
        if isinstance(scorer, NormalizePlacementScore):
            raw = scorer.normalize_placement_scores(raw)
        for i, score in enumerate(raw):
            totals[i] += min(max(score, 0), MAX_NODE_SCORE) * scorer.weight
    return proposals[max(range(len(proposals)), key=lambda i: (totals[i], -i))]


def _reach(need: IntArray | None, free: IntArray, tier: list[Domain], want: int) -> list[int | None]:
    """Per domain, None when it could hold the `want` members it must take (or must take none), else at most how many
    more members it could hold: the fewer of the rows of `need` its free resources summed over its nodes cover, and
    of the members each node could hold were they all the cheapest (`need`'s first row)."""
    if need is None:
        return [None] * len(tier)
    cheapest = need[0]
    each = np.where(cheapest > 0, np.maximum(free, 0) // np.maximum(cheapest, 1), len(need)).min(axis=1)
    columns = np.column_stack([free, each])
    room = np.array([columns[d.rows].sum(axis=0) for d in tier])
    covered = np.min([np.searchsorted(need[:, r], room[:, r], side="right") for r in range(need.shape[1])], axis=0)
    most = np.minimum(covered, room[:, -1])
    return [None if int(m) >= want else int(m) for m in most]
