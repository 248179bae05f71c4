"""What would unblock a pending unit, in words a user can act on, from its state and the scheduler's dry run.

Each sentence names what has to happen and, where the dry run saw it happen, when: "when physics/sim-42's
toleration ends at 12:15:01Z, preemption places all 8 members"; "no unit below priority 100: raise the
PodGroup's priority or add 2 nodes with 8 nvidia.com/gpu free"; "waiting for 2 more members: the gang needs
4". The node estimate takes, among the nodes the unit's static filters (selectors, affinity, taints, cordons)
accept, the one where most members fit when empty, and asks for as many such nodes as the members still
unplaced need; it says what those members request of the resources the FitError names, or, when it names only claims
that cannot be allocated, that the nodes need devices the claims select (the explanation's claims say which request
no node can meet).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from scheduler.api.config import SchedulerConfiguration
from scheduler.api.meta import rfc3339
from scheduler.api.quantity import PODS, format_units
from scheduler.explain.dry_run import DryRun
from scheduler.explain.units import NOT_TRIED, SCHEDULED, InFlight, Unit
from scheduler.framework.cluster import ClusterObjects
from scheduler.framework.feasibility import static_mask
from scheduler.framework.reasons import PendingReason
from scheduler.framework.snapshot_builder import build_snapshot
from scheduler.plugins import static_filters
from scheduler.plugins.dynamic_resources.plugin import CANNOT_ALLOCATE
from scheduler.plugins.inter_pod_affinity import AFFINITY
from scheduler.plugins.preemption_toleration import format_instant
from scheduler.preemption.decision import Decision, Outcome, Spared, SpareReason

PROTECTIONS = {"PreemptionToleration": "toleration", "MinRuntime": "min-runtime", "ElasticMinRuntime": "min-runtime"}
"""The plugin that spared a victim -> the protection a user knows it by."""
NAMED = 3
"""Protected victims a sentence names before it counts the rest."""


@dataclass(frozen=True, slots=True)
class Unblock:
    """One thing that would unblock the unit; `at` is when the dry run saw the unit bound because of it."""

    message: str
    at: datetime | None = None

    def as_json(self) -> dict[str, str | None]:
        return {"message": self.message, "at": rfc3339(self.at) if self.at is not None else None}


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _when(run: DryRun) -> str:
    at = run.bound_at
    return f" (bound at {format_instant(at, run.now)} in the dry run)" if at is not None else ""


def unblockers(
    unit: Unit,
    run: DryRun | None,
    flights: list[InFlight],
    objects: ClusterObjects,
    config: SchedulerConfiguration,
    now: datetime,
) -> list[Unblock]:
    """Everything that would unblock `unit`, most direct first; empty for a unit that is scheduled."""
    pending = unit.pending_members
    if unit.reason == SCHEDULED or not pending:
        return []
    if unit.reason == PendingReason.WAITING_FOR_GANG:
        if unit.group is None:
            return [Unblock(f"create PodGroup {unit.key}: its members wait for it")]
        missing = unit.min_count - unit.exist
        return [Unblock(f"waiting for {_count(missing, 'more member')}: the gang needs {unit.min_count}")]
    if unit.reason == PendingReason.SCHEDULING_GATED:
        foreign = sorted({g for m in pending for g in m.gates if g != config.gate_name})
        gated = sum(1 for m in pending if m.gates)
        return [
            Unblock(
                f"remove the scheduling gate(s) {', '.join(foreign)} from {_count(gated, 'member')}: Phalanx "
                f"removes only its own ({config.gate_name}); whoever added these removes them"
            )
        ]
    if run is None:
        return []
    found: list[Unblock] = []
    own = next((f for f in flights if f.preemptor == unit.unit_key), None)
    if run.waiting is not None or (own is not None and own.victims):
        left = len(own.victims) if own is not None else 0
        since = f" since {format_instant(own.since, now)}" if own is not None and own.since is not None else ""
        found.append(
            Unblock(
                f"its preemption is under way: {_count(left, 'victim')} still terminating{since}; the members "
                f"bind once they are gone{_when(run)}",
                run.bound_at,
            )
        )
        return found
    attempt = run.attempt
    if attempt is not None and attempt.placed >= attempt.needed:
        found.append(Unblock(f"it fits now: the scheduler binds it on its next try{_when(run)}", run.bound_at))
        return found
    decision = run.decision
    if decision is not None and decision.outcome == Outcome.PREEMPT and decision.victims:
        found.append(
            Unblock(
                f"preemption places {_members(unit, decision)} now: the scheduler preempts "
                f"{_count(len(decision.victims), 'unit')} ({_count(len(decision.victim_pods), 'pod')}) on its next "
                f"try{_when(run)}",
                run.bound_at,
            )
        )
        return found
    if decision is not None:
        found.extend(_after_protection(unit, decision, run))
        found.extend(_otherwise(unit, decision, run, objects, config, now))
    elif attempt is not None and attempt.fit_error:
        found.extend(_nodes(unit, run, objects, config, now, attempt.fit_error))
    if not found and unit.reason == NOT_TRIED:
        found.append(Unblock("the scheduler has not tried it yet: it does on its next pass", run.bound_at))
    return found


def _members(unit: Unit, decision: Decision) -> str:
    """`all 8 members`, `5 of 8 members`, or `the pod` for a lone pod."""
    if unit.group is None:
        return "the pod"
    placed = len(decision.nominations)
    total = len(unit.pending_members)
    return f"all {_count(total, 'member')}" if placed >= total else f"{placed} of {_count(total, 'member')}"


def _after_protection(unit: Unit, decision: Decision, run: DryRun) -> list[Unblock]:
    """When protected victims stop being protected and the dry run then preempts them for the unit."""
    protected = [s for s in decision.spared if s.reason == SpareReason.PROTECTED]
    if not protected:
        return []
    later = run.preempted[1] if run.preempted is not None else None
    taken = {v.key for v in later.victims} if later is not None else set()
    if later is not None and run.bound_at is not None and (blocking := [s for s in protected if s.key in taken]):
        names = _protections(blocking)
        ends = max((s.until for s in blocking if s.until is not None), default=None)
        when = f" at {format_instant(ends, run.now)}" if ends is not None else ""
        verb = "ends" if len(blocking) == 1 else "end"
        return [
            Unblock(
                f"when {names} {verb}{when}, preemption places {_members(unit, later)}{_when(run)}",
                run.bound_at,
            )
        ]
    lasting = [s for s in protected if s.until is None]
    if lasting:
        return [
            Unblock(
                f"{_protections(lasting)} never {'ends' if len(lasting) == 1 else 'end'} by itself: "
                f"{lasting[0].message}; raise the {_kind(unit)}'s priority above what they tolerate, or wait for "
                "them to finish"
            )
        ]
    return []


def _protections(spared: list[Spared]) -> str:
    """`physics/sim-42's toleration`, or several, then `and N more`."""
    named = [f"{s.key}'s {PROTECTIONS.get(s.plugin, s.plugin)}" for s in spared[:NAMED]]
    more = f" and {len(spared) - NAMED} more" if len(spared) > NAMED else ""
    return ", ".join(named) + more


def _kind(unit: Unit) -> str:
    return "PodGroup" if unit.group is not None else "pod"


def _otherwise(
    unit: Unit, decision: Decision, run: DryRun, objects: ClusterObjects, config: SchedulerConfiguration, now: datetime
) -> list[Unblock]:
    """When preemption cannot help by itself: what the user can change."""
    if decision.outcome == Outcome.PREEMPT or run.bound_at is not None:
        return []
    add = _nodes_text(unit, run, objects, config, now)
    if unit.preemption_policy == "Never":
        return [Unblock(f"its PriorityClass has preemptionPolicy Never: it waits for room, or {add}")]
    if decision.message.startswith("no unit has a priority lower than"):
        return [Unblock(f"no unit below priority {unit.priority}: raise the {_kind(unit)}'s priority or {add}")]
    if decision.rejected:
        return [Unblock(f"{decision.message}: wait for those units to run longer, or {add}")]
    return [Unblock(f"preempting every unit below priority {unit.priority} would not place it: {add}")]


def _nodes(
    unit: Unit, run: DryRun, objects: ClusterObjects, config: SchedulerConfiguration, now: datetime, fit_error: str
) -> list[Unblock]:
    """No node can take it, and preemption cannot change that (selectors, affinity, taints, cordons). A reason said
    once for the pod rather than counted per node (a missing claim, an unsupported field) is not about nodes: no
    node added would take it."""
    said = fit_error.partition("nodes are available: ")[2].split(". ")[0].rstrip(".")
    if said and not said[0].isdigit():
        return [Unblock(f"no node can take it until the pod or the objects it names change: {said}")]
    if AFFINITY in fit_error:
        return [Unblock(f"a pod its required pod affinity matches must run first ({fit_error.rstrip('.')})")]
    return [Unblock(f"no node can take it ({fit_error.rstrip('.')}): {_nodes_text(unit, run, objects, config, now)}")]


def _nodes_text(unit: Unit, run: DryRun, objects: ClusterObjects, config: SchedulerConfiguration, now: datetime) -> str:
    """`add 2 nodes with 8 nvidia.com/gpu free` (see the module docstring), or why no node would do."""
    attempt = run.attempt
    pending = unit.pending_members
    missing = max(1, (attempt.needed - attempt.placed) if attempt is not None else len(pending))
    pods = {m.key: m.pod for m in pending}
    small = ClusterObjects(
        nodes=objects.nodes, pods=pods, pod_groups=objects.pod_groups, priority_classes=objects.priority_classes
    )
    snapshot = build_snapshot(small, now, config)
    info = snapshot.pods[pending[0].key]
    table = snapshot.nodes
    feasible = static_mask(info, snapshot, static_filters()).feasible
    if not feasible.any():
        return "add nodes its node selector, affinity and tolerations accept (no node does)"
    request = table.vector(info.requests)
    used = [c for c, name in enumerate(table.resources) if request[c] > 0 and name != PODS]
    if not used:
        return f"add {_count(missing, 'node')}"
    fits = np.min(table.allocatable[:, used] // request[used], axis=1)
    fits = np.where(feasible, fits, 0)
    best = int(fits.max())
    if best == 0:
        return "add larger nodes: no node its filters accept could hold even one member when empty"
    short = run.attempt.fit_error if run.attempt is not None else ""
    named = [c for c in used if f"Insufficient {table.resources[c]}" in short]
    if not named and CANNOT_ALLOCATE in short:
        return f"add {_count(missing, 'node')} with free devices its claims select (see Claims)"
    named = named or used
    per_node = min(best, missing)
    resources = " and ".join(
        f"{format_units(table.resources[c], int(request[c]) * per_node)} {table.resources[c]}" for c in named
    )
    return f"add {_count(math.ceil(missing / best), 'node')} with {resources} free"
