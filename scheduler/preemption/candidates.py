"""Victim units and the search input, built from a framework Snapshot (KEP-5710, "Units").

A running pod is its own unit unless its PodGroup has `disruptionMode: PodGroup`, in which case
every scheduled pod of the group forms one unit. A unit's priority is its pods' effective priority,
which for a member is the PodGroup's (the snapshot builder already resolved it). Only units of
strictly lower priority than the preemptor are candidates; the others stay in `free` as they are.
Pods already being deleted are not candidates either: their room counts as free, since it comes
back without preempting anything.

The running pods are turned into columns once per snapshot state (`RunningPods`), so each
preemptor then selects its candidates with numpy masks instead of a Python pass over every pod;
VictimUnit objects are only made for the few units filters, validators and the actuator look at.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

import numpy as np
import numpy.typing as npt

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.feasibility import static_mask
from scheduler.framework.interfaces import FilterPlugin, ScenarioValidator, VictimFilter
from scheduler.framework.pod_info import PodInfo, SchedulingUnit, VictimUnit
from scheduler.framework.snapshot import BoolArray, IntArray, Snapshot
from scheduler.framework.status import Code, Status
from scheduler.preemption.decision import SEARCH_PLUGIN, Decision, Outcome
from scheduler.preemption.search import FloatArray, PdbInput, PreemptorInput, SearchInput, Units, search

FILTER_ROUNDS = 3
"""Searches run with victim filters applied only to chosen victims before every candidate is checked."""
VALIDATION_ROUNDS = 3
"""Extra searches, each sparing one more victim, after scenario validators refused every plan."""


def is_terminating(info: PodInfo) -> bool:
    return info.pod.metadata.deletion_timestamp is not None


@dataclass(slots=True)
class RunningPods:
    """Every running, non-terminating pod of a snapshot as columns (row = position in `infos`).

    `group` is the index into `groups` of the pod's `PodGroup`-mode group, -1 for a lone unit.
    `freed` is, per node, what pods already terminating there will give back.
    """

    infos: list[PodInfo]
    keys: npt.NDArray[np.object_]
    node: IntArray
    priority: IntArray
    requests: IntArray
    group: IntArray
    started: FloatArray
    groups: list[str]
    members: dict[str, list[int]]
    freed: IntArray
    version: tuple[int, int, int, datetime]

    @staticmethod
    def of(snapshot: Snapshot) -> RunningPods:
        table = snapshot.nodes
        shapes: dict[tuple[tuple[str, int], ...], int] = {}
        rows: list[IntArray] = []
        infos: list[PodInfo] = []
        node: list[int] = []
        shape: list[int] = []
        group: list[int] = []
        started: list[float] = []
        group_index: dict[str, int] = {}
        members: dict[str, list[int]] = {}
        stamps: dict[datetime, float] = {}
        freed = np.zeros_like(table.requested)
        pod_groups = snapshot.groups
        for row, pods in enumerate(snapshot.running):
            for info in pods:
                if info.pod.metadata.deletion_timestamp is not None:
                    freed[row] += table.usage(info.requests)
                    continue
                key = tuple(info.requests.items())
                at = shapes.get(key)
                if at is None:
                    at = shapes[key] = len(rows)
                    rows.append(table.usage(info.requests))
                if info.group_key is not None:
                    members.setdefault(info.group_key, []).append(len(infos))
                owner = pod_groups.get(info.group_key) if info.group_key is not None else None
                if owner is not None and owner.disruption_mode == "PodGroup":
                    group.append(group_index.setdefault(owner.key, len(group_index)))
                else:
                    group.append(-1)
                when = info.scheduled_at
                if when is None:
                    started.append(np.nan)
                else:
                    stamp = stamps.get(when)
                    if stamp is None:
                        stamp = stamps[when] = when.timestamp()
                    started.append(stamp)
                infos.append(info)
                node.append(row)
                shape.append(at)
        width = len(table.resources)
        matrix = np.array(rows, dtype=np.int64).reshape(-1, width)
        return RunningPods(
            infos=infos,
            keys=np.array([i.key for i in infos], dtype=object),
            node=np.array(node, dtype=np.int64),
            priority=np.array([i.priority for i in infos], dtype=np.int64),
            requests=matrix[np.array(shape, dtype=np.int64)] if infos else np.zeros((0, width), dtype=np.int64),
            group=np.array(group, dtype=np.int64),
            started=np.array(started, dtype=np.float64),
            groups=list(group_index),
            members=members,
            freed=freed,
            version=version(snapshot),
        )


def version(snapshot: Snapshot) -> tuple[int, int, int, datetime]:
    """Changes whenever the runner assumes or forgets a pod on the snapshot (requested row changes)."""
    requested = snapshot.nodes.requested
    return (id(snapshot), hash(requested.tobytes()), sum(len(pods) for pods in snapshot.running), snapshot.now)


@dataclass(slots=True)
class Candidates:
    """The search input, the pods behind each unit index, and the filters to apply to them."""

    search_input: SearchInput
    running: RunningPods
    pod_rows: IntArray
    preemptor: SchedulingUnit
    snapshot: Snapshot
    victim_filters: tuple[VictimFilter, ...]
    _victims: dict[int, VictimUnit] = field(default_factory=dict)
    _order: IntArray | None = None
    _bounds: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    _index: dict[str, int] | None = None

    def victim(self, index: int) -> VictimUnit:
        """The VictimUnit for a unit index, made on first use."""
        found = self._victims.get(index)
        if found is None:
            inp = self.search_input
            if self._order is None:
                order = np.argsort(inp.pod_unit, kind="stable")
                self._order = self.pod_rows[order]
                self._bounds = np.searchsorted(inp.pod_unit[order], np.arange(len(inp.units) + 1))
            low, high = int(self._bounds[index]), int(self._bounds[index + 1])
            pods = tuple(self.running.infos[r] for r in self._order[low:high].tolist())
            group = self.snapshot.groups.get(pods[0].group_key) if pods[0].group_key is not None else None
            starts = [p.scheduled_at for p in pods if p.scheduled_at is not None]
            unit = inp.units[index]
            found = VictimUnit(unit.key, pods, group, unit.priority, min(starts, default=None))
            self._victims[index] = found
        return found

    def victims(self, decision: Decision) -> tuple[VictimUnit, ...]:
        index = self.index()
        return tuple(self.victim(index[v.key]) for v in decision.victims)

    def index(self) -> dict[str, int]:
        if self._index is None:
            self._index = {key: i for i, key in enumerate(self.search_input.units.keys)}
        return self._index

    def decide(self) -> Decision:
        """Search, applying victim filters lazily: first only to the victims a search picks.

        Filters cost a Python call per unit, and a big cluster has tens of thousands of candidates
        of which a decision picks a few hundred. A protected victim is excluded and the search
        rerun; after FILTER_ROUNDS, or when preemption cannot help although some protection was
        found, every candidate is filtered so the Decision lists every protection and its `until`.
        """
        index = self.index()
        protections: dict[int, Status] = {}
        checked: set[int] = set()
        for _ in range(FILTER_ROUNDS):
            decision = search(replace(self.search_input, protections=protections))
            if decision.outcome != Outcome.PREEMPT and not protections:
                return self._revalidate(decision, protections, checked)
            fresh = [index[v.key] for v in decision.victims if index[v.key] not in checked]
            found = self._protect(fresh)
            checked.update(fresh)
            if decision.outcome == Outcome.PREEMPT and not found:
                return decision
            protections.update(found)
            if decision.outcome != Outcome.PREEMPT:
                break
        protections.update(self._protect(i for i in range(len(self.search_input.units)) if i not in checked))
        checked.update(range(len(self.search_input.units)))
        return self._revalidate(search(replace(self.search_input, protections=protections)), protections, checked)

    def _revalidate(self, decision: Decision, protections: dict[int, Status], checked: set[int]) -> Decision:
        """When scenario validators refused every plan, spare refused victims one at a time and retry.

        Members of pod groups go first (validators guard groups, e.g. an elastic gang's minCount),
        most important first; at most VALIDATION_ROUNDS more searches. If none is accepted, the
        first refusal is what the Decision reports.
        """
        index = self.index()
        tried = dict(protections)
        first = decision
        for _ in range(VALIDATION_ROUNDS + 1):
            if not decision.rejected:
                return decision if decision.outcome == Outcome.PREEMPT else first
            order = sorted(
                (index[k] for k in decision.rejected),
                key=lambda i: (self.victim(i).group is None, -self.victim(i).priority, self.search_input.units.keys[i]),
            )
            spare = next((i for i in order if i not in tried), None)
            if spare is None:
                break
            tried[spare] = Status(Code.UNSCHEDULABLE, (decision.message,), plugin=SEARCH_PLUGIN)
            decision = search(replace(self.search_input, protections=tried))
            fresh = [index[v.key] for v in decision.victims if index[v.key] not in checked]
            checked.update(fresh)
            found = self._protect(fresh)
            if found:
                tried.update(found)
                decision = search(replace(self.search_input, protections=tried))
                if any(index[v.key] not in checked for v in decision.victims):
                    return first
        return first

    def validate(self, validators: Sequence[ScenarioValidator], keys: tuple[str, ...]) -> Status:
        index = self.index()
        chosen = [self.victim(index[k]) for k in keys]
        for validator in validators:
            status = validator.validate(self.preemptor, chosen, self.snapshot)
            if not status.is_success:
                return status.with_plugin(validator.name)
        return Status()

    def _protect(self, indices: Iterable[int]) -> dict[int, Status]:
        found: dict[int, Status] = {}
        for i in indices:
            for victim_filter in self.victim_filters:
                status = victim_filter.filter_victim(self.preemptor, self.victim(i), self.snapshot)
                if not status.is_success:
                    found[i] = status.with_plugin(victim_filter.name)
                    break
        return found


def build_candidates(
    unit: SchedulingUnit,
    snapshot: Snapshot,
    running: RunningPods,
    state: CycleState,
    victim_filters: Sequence[VictimFilter],
    validators: Sequence[ScenarioValidator],
    static_filters: Sequence[FilterPlugin],
    min_count: int,
) -> Candidates:
    """Columnar search input for `unit`; victim filters run later, in `Candidates.decide`."""
    table = snapshot.nodes
    free = table.free() + running.freed
    for held in snapshot.held_against(unit):
        free[table.index[held.pod.status.nominated_node_name or ""]] -= table.usage(held.requests)
    selected: BoolArray = running.priority < unit.priority
    selected[running.members.get(unit.key, [])] = False
    pod_rows = np.flatnonzero(selected)
    # A unit id per pod: its group's for a PodGroup-mode member, else one of its own.
    ids = np.where(running.group[pod_rows] >= 0, running.group[pod_rows], len(running.groups) + pod_rows)
    unique, pod_unit = np.unique(ids, return_inverse=True)
    by_unit = np.argsort(pod_unit, kind="stable")
    first = pod_rows[by_unit[np.searchsorted(pod_unit[by_unit], np.arange(len(unique)))]]
    started = np.full(len(unique), np.inf)
    np.minimum.at(started, pod_unit, np.nan_to_num(running.started[pod_rows], nan=np.inf))
    whole = unique < len(running.groups)
    keys = running.keys[first]
    for at in np.flatnonzero(whole).tolist():
        keys[at] = running.groups[int(unique[at])]
    units = Units(
        keys=keys.tolist(),
        priority=running.priority[first],
        whole_group=whole,
        started_at=np.where(np.isinf(started), np.nan, started),
    )
    width = len(table.resources)
    members = unit.members
    preemptor = PreemptorInput(
        key=unit.key,
        priority=unit.priority,
        is_group=unit.is_group,
        min_count=min_count,
        members=tuple(m.key for m in members),
        requests=np.array([table.vector(m.requests) for m in members], dtype=np.int64).reshape(-1, width),
        masks=np.array([static_mask(m, snapshot, static_filters, state).feasible for m in members], dtype=bool).reshape(
            len(members), len(table.names)
        ),
        preemption_policy=unit.preemption_policy,
    )
    search_input = SearchInput(
        node_names=table.names,
        free=free,
        units=units,
        pod_keys=running.keys[pod_rows].tolist(),
        pod_unit=pod_unit.astype(np.int64),
        pod_node=running.node[pod_rows],
        pod_requests=running.requests[pod_rows],
        preemptor=preemptor,
        pdbs=_pdbs(snapshot, running, pod_rows),
    )
    candidates = Candidates(search_input, running, pod_rows, unit, snapshot, tuple(victim_filters))
    if validators:
        candidates.search_input = replace(search_input, validate=lambda keys: candidates.validate(validators, keys))
    return candidates


def _pdbs(snapshot: Snapshot, running: RunningPods, pod_rows: IntArray) -> tuple[PdbInput, ...]:
    """Each PDB's allowance over the candidate pods it selects; healthy = selected pods not deleting.

    Pods the search never sees (priority not lower) still count as healthy for the allowance.
    """
    if not snapshot.pdbs:
        return ()
    position = {int(r): i for i, r in enumerate(pod_rows.tolist())}
    out = []
    for pdb in snapshot.pdbs:
        healthy = [r for r, info in enumerate(running.infos) if pdb.selects(info.namespace, info.labels)]
        rows = tuple(position[r] for r in healthy if r in position)
        if rows:
            key = f"{pdb.metadata.namespace or 'default'}/{pdb.metadata.name}"
            out.append(PdbInput(key, pdb.disruptions_allowed(len(healthy)), rows))
    return tuple(out)
