"""Victim units and the search input, built from a framework Snapshot (KEP-5710, "Units").

A running pod is its own unit unless its PodGroup has `disruptionMode: PodGroup`, in which case
every scheduled pod of the group forms one unit. A unit's priority is its pods' effective priority,
which for a member is the PodGroup's (the snapshot builder already resolved it). Pods already being
deleted are not candidates: their room is counted as free, since it comes back without preempting.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import FilterPlugin, ScenarioValidator, VictimFilter
from scheduler.framework.pod_info import PodInfo, SchedulingUnit, VictimUnit
from scheduler.framework.snapshot import IntArray, Snapshot
from scheduler.framework.status import Status
from scheduler.preemption.search import PdbInput, PreemptorInput, SearchInput, UnitInput


@dataclass(frozen=True, slots=True)
class Candidates:
    """The search input plus the VictimUnits behind its unit indices (for actuation and validators)."""

    search_input: SearchInput
    units: tuple[VictimUnit, ...]


def is_terminating(info: PodInfo) -> bool:
    return info.pod.metadata.deletion_timestamp is not None


def victim_units(unit: SchedulingUnit, snapshot: Snapshot) -> list[VictimUnit]:
    """Every running unit except the preemptor's own members, in node order then pod order."""
    own = unit.key if unit.group is not None else None
    lone: list[VictimUnit] = []
    grouped: dict[str, list[PodInfo]] = {}
    for pods in snapshot.running:
        for info in pods:
            if is_terminating(info) or (own is not None and info.group_key == own) or info.key == unit.key:
                continue
            group = snapshot.groups.get(info.group_key) if info.group_key else None
            if group is not None and group.disruption_mode == "PodGroup":
                grouped.setdefault(group.key, []).append(info)
            else:
                lone.append(VictimUnit(info.key, (info,), group, info.priority, info.scheduled_at))
    for key, members in grouped.items():
        starts = [m.scheduled_at for m in members if m.scheduled_at is not None]
        lone.append(
            VictimUnit(key, tuple(members), snapshot.groups[key], members[0].priority, min(starts, default=None))
        )
    return lone


def build_candidates(
    unit: SchedulingUnit,
    snapshot: Snapshot,
    state: CycleState,
    victim_filters: Sequence[VictimFilter],
    validators: Sequence[ScenarioValidator],
    static_filters: Sequence[FilterPlugin] | None,
    min_count: int,
) -> Candidates:
    """Columnar search input; victim filters run here, on strictly-lower-priority units only."""
    # Imported here: feasibility reads the plugin registry, which registers the preemption plugin.
    from scheduler.framework.feasibility import static_mask

    table = snapshot.nodes
    free = table.free()
    for row, pods in enumerate(snapshot.running):
        for info in pods:
            if is_terminating(info):
                free[row] += table.usage(info.requests)
    for held in snapshot.nominated:
        if held.priority >= unit.priority and held not in unit.members:
            free[table.index[held.pod.status.nominated_node_name or ""]] -= table.usage(held.requests)
    units = victim_units(unit, snapshot)
    inputs: list[UnitInput] = []
    protections: dict[int, Status] = {}
    pod_keys: list[str] = []
    pod_unit: list[int] = []
    pod_node: list[int] = []
    pod_requests: list[IntArray] = []
    row_of: dict[str, int] = {}
    for index, victim in enumerate(units):
        started = victim.started_at.timestamp() if victim.started_at is not None else None
        inputs.append(UnitInput(victim.key, victim.priority, victim.is_group, started))
        for info in victim.pods:
            row_of[info.key] = len(pod_keys)
            pod_keys.append(info.key)
            pod_unit.append(index)
            pod_node.append(table.index[info.node_name or ""])
            pod_requests.append(table.usage(info.requests))
        if victim.priority < unit.priority:
            status = _protection(unit, victim, snapshot, victim_filters)
            if status is not None:
                protections[index] = status
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
        pod_requests=np.array(pod_requests, dtype=np.int64).reshape(-1, width),
        preemptor=preemptor,
        pdbs=_pdbs(snapshot, units, row_of),
        protections=protections,
        validate=validate if validators else None,
    )
    return Candidates(search_input, tuple(units))


def _protection(
    unit: SchedulingUnit, victim: VictimUnit, snapshot: Snapshot, victim_filters: Sequence[VictimFilter]
) -> Status | None:
    for victim_filter in victim_filters:
        status = victim_filter.filter_victim(unit, victim, snapshot)
        if not status.is_success:
            return status.with_plugin(victim_filter.name)
    return None


def _pdbs(snapshot: Snapshot, units: list[VictimUnit], row_of: dict[str, int]) -> tuple[PdbInput, ...]:
    """Each PDB's allowance over the pods it selects; healthy = selected pods running and not deleting."""
    out = []
    for pdb in snapshot.pdbs:
        rows = [row_of[i.key] for v in units for i in v.pods if pdb.selects(i.namespace, i.labels)]
        if not rows:
            continue
        key = f"{pdb.metadata.namespace or 'default'}/{pdb.metadata.name}"
        out.append(PdbInput(key, pdb.disruptions_allowed(len(rows)), tuple(rows)))
    return tuple(out)
