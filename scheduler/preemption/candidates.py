"""Victim units and the search input, built from a framework Snapshot (KEP-5710, "Units").

A running pod is its own unit unless its PodGroup has `disruptionMode: PodGroup`, in which case
every scheduled pod of the group forms one unit. A unit's priority is its pods' effective priority,
which for a member is the PodGroup's (the snapshot builder already resolved it). Only units of
strictly lower priority than the preemptor are candidates; the others stay in `free` as they are.
Pods already being deleted are not candidates either: their room counts as free, since it comes
back without preempting anything.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import FilterPlugin, ScenarioValidator, VictimFilter
from scheduler.framework.pod_info import PodInfo, SchedulingUnit, VictimUnit
from scheduler.framework.snapshot import IntArray, NodeTable, Snapshot
from scheduler.framework.status import Status
from scheduler.preemption.decision import Decision, Outcome
from scheduler.preemption.search import PdbInput, PreemptorInput, SearchInput, UnitInput, search

FILTER_ROUNDS = 3
"""Searches run with victim filters applied only to chosen victims before every candidate is checked."""


def is_terminating(info: PodInfo) -> bool:
    return info.pod.metadata.deletion_timestamp is not None


@dataclass(frozen=True, slots=True)
class Candidates:
    """The search input plus the VictimUnits behind its unit indices (for filters, validators, actuation)."""

    search_input: SearchInput
    units: tuple[VictimUnit, ...]
    preemptor: SchedulingUnit
    snapshot: Snapshot
    victim_filters: tuple[VictimFilter, ...]

    def decide(self) -> Decision:
        """Search, applying victim filters lazily: first only to the victims a search picks.

        Filters cost a Python call per unit, and a big cluster has tens of thousands of candidates
        of which a decision picks a few hundred. A protected victim is excluded and the search
        rerun; after FILTER_ROUNDS, or when preemption cannot help although some protection was
        found, every candidate is filtered so the Decision lists every protection and its `until`.
        """
        index = {v.key: i for i, v in enumerate(self.units)}
        protections: dict[int, Status] = {}
        checked: set[int] = set()
        for _ in range(FILTER_ROUNDS):
            decision = search(replace(self.search_input, protections=protections))
            if decision.outcome != Outcome.PREEMPT and not protections:
                return decision
            fresh = [index[v.key] for v in decision.victims if index[v.key] not in checked]
            found = self._protect(fresh)
            checked.update(fresh)
            if decision.outcome == Outcome.PREEMPT and not found:
                return decision
            protections.update(found)
            if decision.outcome != Outcome.PREEMPT:
                break
        protections.update(self._protect(i for i in range(len(self.units)) if i not in checked))
        return search(replace(self.search_input, protections=protections))

    def _protect(self, indices: Iterable[int]) -> dict[int, Status]:
        found: dict[int, Status] = {}
        for i in indices:
            for victim_filter in self.victim_filters:
                status = victim_filter.filter_victim(self.preemptor, self.units[i], self.snapshot)
                if not status.is_success:
                    found[i] = status.with_plugin(victim_filter.name)
                    break
        return found


def victim_units(unit: SchedulingUnit, snapshot: Snapshot) -> list[VictimUnit]:
    """Running units of strictly lower priority than `unit`, not being deleted, in node then pod order."""
    lone: list[VictimUnit] = []
    grouped: dict[str, list[PodInfo]] = {}
    groups = snapshot.groups
    for pods in snapshot.running:
        for info in pods:
            if info.priority >= unit.priority or is_terminating(info):
                continue
            group = groups.get(info.group_key) if info.group_key is not None else None
            if group is not None and group.disruption_mode == "PodGroup":
                grouped.setdefault(group.key, []).append(info)
            else:
                lone.append(VictimUnit(info.key, (info,), group, info.priority, info.scheduled_at))
    for key, members in grouped.items():
        starts = [m.scheduled_at for m in members if m.scheduled_at is not None]
        lone.append(VictimUnit(key, tuple(members), groups[key], members[0].priority, min(starts, default=None)))
    return lone


class _Rows:
    """Request rows by request content: 50,000 replicas of a few shapes parse a few rows, not 50,000."""

    def __init__(self, table: NodeTable) -> None:
        self.table = table
        self.index: dict[tuple[tuple[str, int], ...], int] = {}
        self.rows: list[IntArray] = []

    def of(self, requests: dict[str, int]) -> int:
        key = tuple(requests.items())
        found = self.index.get(key)
        if found is None:
            found = self.index[key] = len(self.rows)
            self.rows.append(self.table.usage(requests))
        return found

    def matrix(self, picks: list[int]) -> IntArray:
        width = len(self.table.resources)
        if not self.rows:
            return np.zeros((len(picks), width), dtype=np.int64)
        return np.array(self.rows, dtype=np.int64).reshape(-1, width)[np.array(picks, dtype=np.int64)]


def build_candidates(
    unit: SchedulingUnit,
    snapshot: Snapshot,
    state: CycleState,
    victim_filters: Sequence[VictimFilter],
    validators: Sequence[ScenarioValidator],
    static_filters: Sequence[FilterPlugin] | None,
    min_count: int,
) -> Candidates:
    """Columnar search input for `unit` on `snapshot`; victim filters run later (`Candidates.decide`)."""
    # Imported here: feasibility reads the plugin registry, which registers the preemption plugin.
    from scheduler.framework.feasibility import static_mask

    table = snapshot.nodes
    rows = _Rows(table)
    free = table.free()
    for row, pods in enumerate(snapshot.running):
        for info in pods:
            if is_terminating(info):
                free[row] += rows.rows[rows.of(info.requests)]
    for held in snapshot.nominated:
        if held.priority >= unit.priority and held not in unit.members:
            free[table.index[held.pod.status.nominated_node_name or ""]] -= table.usage(held.requests)
    units = victim_units(unit, snapshot)
    inputs: list[UnitInput] = []
    pod_keys: list[str] = []
    pod_unit: list[int] = []
    pod_node: list[int] = []
    picks: list[int] = []
    node_index = table.index
    for index, victim in enumerate(units):
        started = victim.started_at.timestamp() if victim.started_at is not None else None
        inputs.append(UnitInput(victim.key, victim.priority, victim.is_group, started))
        for info in victim.pods:
            pod_keys.append(info.key)
            pod_unit.append(index)
            pod_node.append(node_index[info.node_name or ""])
            picks.append(rows.of(info.requests))
    width = len(table.resources)
    members = unit.members
    preemptor = PreemptorInput(
        key=unit.key,
        priority=unit.priority,
        is_group=unit.is_group,
        min_count=min_count,
        members=tuple(m.key for m in members),
        requests=np.array([table.vector(m.requests) for m in members], dtype=np.int64).reshape(-1, width),
        masks=np.array([static_mask(m, snapshot, state, static_filters).feasible for m in members], dtype=bool).reshape(
            len(members), len(table.names)
        ),
        preemption_policy=unit.preemption_policy,
    )
    by_key = {v.key: v for v in units}

    def validate(keys: tuple[str, ...]) -> Status:
        chosen = [by_key[k] for k in keys]
        for validator in validators:
            status = validator.validate(unit, chosen, snapshot)
            if not status.is_success:
                return status.with_plugin(validator.name)
        return Status()

    search_input = SearchInput(
        node_names=table.names,
        free=free,
        units=tuple(inputs),
        pod_keys=tuple(pod_keys),
        pod_unit=np.array(pod_unit, dtype=np.int64),
        pod_node=np.array(pod_node, dtype=np.int64),
        pod_requests=rows.matrix(picks),
        preemptor=preemptor,
        pdbs=_pdbs(snapshot, units),
        validate=validate if validators else None,
    )
    return Candidates(search_input, tuple(units), unit, snapshot, tuple(victim_filters))


def _pdbs(snapshot: Snapshot, units: list[VictimUnit]) -> tuple[PdbInput, ...]:
    """Each PDB's allowance over the pods it selects; healthy = selected pods running and not deleting.

    Pods the search never sees (priority not lower) still count as healthy for the allowance.
    """
    if not snapshot.pdbs:
        return ()
    row_of: dict[str, int] = {}
    for victim in units:
        for info in victim.pods:
            row_of[info.key] = len(row_of)
    out = []
    for pdb in snapshot.pdbs:
        healthy = [
            info
            for pods in snapshot.running
            for info in pods
            if not is_terminating(info) and pdb.selects(info.namespace, info.labels)
        ]
        rows = tuple(row_of[i.key] for i in healthy if i.key in row_of)
        if rows:
            key = f"{pdb.metadata.namespace or 'default'}/{pdb.metadata.name}"
            out.append(PdbInput(key, pdb.disruptions_allowed(len(healthy)), rows))
    return tuple(out)
