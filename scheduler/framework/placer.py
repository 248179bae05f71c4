"""The placement step: a unit's members placed one by one on the snapshot, then permitted or undone as a whole.

Each member goes back to its nominated node when it fits there (as kube-scheduler's), else to the best node the
filters and scores find (`PlacementMemo`), with the room other units' nominations hold against it counted as taken;
it is assumed there and its Reserve plugins hold what it takes beyond the node's resources. Nothing is written: the
runner binds a placement the Permit plugins let through, and a rejected one is undone (each pod's reservations in
reverse, then the pod), so a unit that cannot bind leaves the snapshot as it found it.

A pod group with topology domains (`pod_group_placement.py`) is placed in each domain in turn, on its nodes only,
and goes where the PlacementScore plugins score highest; when none can take it, it is left placed in the domain that
took most of it, the domains' shortfalls said in each member's reason, and its PostFilter may preempt only inside
one domain (the domains tried are in CycleState). Otherwise the Placement plugins propose other ways to place the
unit first (`PlacementPlugin`). One is taken when it binds, or when its preemption would nominate (a dry run of the
PostFilter plugins: nothing is written); the unit as it stands is the last resort. So a way that spares something is
given up only for one that can neither fit nor preempt.
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
from scheduler.framework.pod_group_placement import TRIED_KEY, Domain, Proposal, Refusal, Tried
from scheduler.framework.pod_info import PodInfo, SchedulingUnit
from scheduler.framework.profile import Profile
from scheduler.framework.snapshot import BoolArray, IntArray, Snapshot
from scheduler.framework.status import Code, Status, error

SHORTFALLS_SHOWN = 4
"""Domains named in a reason when none can take a group (those that took most of it); the rest are counted."""

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
        """No domain exists: every member fails, and no preemption can make one."""
        failure = (Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (message,)), None)
        return Placement(unit, (), {m.key: failure for m in unit.members}, self._bound(unit))

    def _in_one_domain(self, unit: SchedulingUnit, domains: list[Domain], state: CycleState) -> Placement:
        """Each domain of the narrowest level that has a feasible one, the unit placed on its nodes only and undone;
        then the best of them again, for real. With none feasible, the domain that took most members, each
        member's reason naming what every domain could take."""
        assert unit.group is not None
        state.write(TRIED_KEY, Tried(tuple(domains)))
        needed = unit.min_count if unit.group.is_gang else self._bound(unit) + 1
        shortfalls: list[tuple[int, str]] = []
        closest: tuple[int, Domain] | None = None
        least = self._least_need(unit, needed)
        free = self.memo.snapshot.nodes.free()
        for level in sorted({d.level for d in domains}):
            proposals: list[Proposal] = []
            for domain in (d for d in domains if d.level == level):
                if least is not None and not (free[domain.rows].sum(axis=0) >= least).all():
                    shortfalls.append((-1, domain.name))
                    continue
                trial = self._trial(unit, state, domain.rows)
                fitted = len(trial.placed) + trial.bound_before
                if trial.placed and self.permit(trial, state).status.is_success:
                    proposals.append(Proposal(domain, trial.placed, trial.bound_before))
                elif closest is None or fitted > closest[0]:
                    closest = (fitted, domain)
                shortfalls.append((fitted, domain.name))
                self.undo(trial, state)
            if proposals:
                best = choose(unit.group, proposals, self.profile.placement_scores, self.memo.snapshot)
                return self._trial(unit, state, best.domain.rows)
        # Left where most of it fits, its members' reasons (and the Permit plugins') naming every domain's shortfall;
        # never on the union of the domains, where a gang could fit spread over several.
        said = _shortfalls(sorted(shortfalls, key=lambda s: -s[0]), needed)
        placement = self._trial(unit, state, (closest[1] if closest is not None else domains[0]).rows)
        failures = {
            key: (Status(status.code, (f"{said}; {status.message()}",)), verdict)
            for key, (status, verdict) in placement.failures.items()
        }
        return replace(placement, failures=failures, note=said)

    def _least_need(self, unit: SchedulingUnit, needed: int) -> IntArray | None:
        """What the members a domain must still take need at least, per resource (None: it needs none): a domain
        whose free resources fall short of it cannot hold them (a bound, not a fit), and is passed over without
        placing a pod."""
        table = self.memo.snapshot.nodes
        want = needed - self._bound(unit)
        if want <= 0:
            return None
        least: IntArray = np.sort(np.array([table.usage(m.requests) for m in unit.members]), axis=0)[:want].sum(axis=0)
        return least

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


def _shortfalls(found: list[tuple[int, str]], needed: int) -> str:
    """`no topology domain can take N members (rack=a: 3 of N fit; rack=b: too little free ...)`, the closest
    first (-1: the domain's free resources could not hold them, so none was placed there)."""
    named = [
        f"{name}: {fitted} of {needed} fit" if fitted >= 0 else f"{name}: too little free for {needed}"
        for fitted, name in found[:SHORTFALLS_SHOWN]
    ]
    rest = len(found) - SHORTFALLS_SHOWN
    if rest > 0:
        named.append(f"{rest} more domain(s), none closer")
    return f"no topology domain can take {needed} members ({'; '.join(named)})"
