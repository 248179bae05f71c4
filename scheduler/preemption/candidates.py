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

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from itertools import repeat
from typing import Any

import numpy as np
import numpy.typing as npt

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.feasibility import static_mask
from scheduler.framework.interfaces import (
    Exclusion,
    FilterPlugin,
    PreemptionConstraint,
    ScenarioValidator,
    VictimFilter,
)
from scheduler.framework.pod_group_placement import tried_domains
from scheduler.framework.pod_info import PodInfo, SchedulingUnit, VictimUnit
from scheduler.framework.snapshot import BoolArray, IntArray, Snapshot, changed_rows
from scheduler.framework.status import Code, Status
from scheduler.framework.unit_key import group_unit
from scheduler.preemption.decision import SEARCH_PLUGIN, Decision, Outcome
from scheduler.preemption.search import (
    FloatArray,
    PdbInput,
    PreemptorInput,
    SearchDomain,
    SearchInput,
    Units,
    search,
)

FILTER_ROUNDS = 3
"""Searches run with victim filters applied only to chosen victims before every candidate is checked."""
VALIDATION_ROUNDS = 3
"""Extra searches, each sparing one more victim, after scenario validators refused every plan."""
SPLICED_IN_PLACE = 64
"""Up to this many changed nodes, their pods are spliced into the list of every running pod in place: a new list
touches every pod, and is one more young object of 100,000 references for the cyclic collector to walk."""
PLACES = 1 << 32
"""More than the pods any node runs: a running pod's place is its node times this plus its place on the node."""


def is_terminating(info: PodInfo) -> bool:
    return info.pod.metadata.deletion_timestamp is not None


@dataclass(slots=True)
class _Rows:
    """Column pieces for some nodes' running, non-terminating pods, node after node (`counts` per node)."""

    infos: list[PodInfo] = field(default_factory=list)
    priority: list[int] = field(default_factory=list)
    shape: list[int] = field(default_factory=list)
    member: list[int] = field(default_factory=list)
    started: list[float] = field(default_factory=list)
    counts: list[int] = field(default_factory=list)


@dataclass(slots=True)
class RunningPods:
    """Every running, non-terminating pod of a snapshot as columns, in node order (row = position in `infos`).

    Kept between snapshots and updated by difference (`refresh`): a real cluster's pass sees a few changed
    nodes among thousands, and rebuilding the columns from every PodInfo cost 2.5-4.5 us a pod, 0.25-0.45 s
    at 100,000 pods, on the decision's path (issue 23). Where a node's row has a new version (`changed_rows`),
    its pods are compared by identity with the list last seen (PodInfos are replaced when their pod changes);
    only changed nodes' rows are rebuilt and spliced in, so the rows stay in the order a fresh build gives and
    the search sees the same input.

    `member` is the code of the pod's PodGroup (index into `group_keys`), -1 for none; whether a group is
    one `PodGroup`-mode victim unit is read from the snapshot's PodGroups when candidates are built.
    `freed` is, per node, what pods already terminating there will give back.
    """

    names: tuple[str, ...]
    resources: tuple[str, ...]
    infos: list[PodInfo]
    keys: npt.NDArray[np.object_]
    node: IntArray
    priority: IntArray
    requests: IntArray
    member: IntArray
    started: FloatArray
    freed: IntArray
    starts: IntArray
    """Row where each node's pods begin (one more entry than nodes)."""
    group_keys: list[str]
    version: tuple[int, int, datetime] | None = None
    _snapshot: Snapshot | None = None
    """The snapshot the columns were last brought up to (held, so that its id is never another's)."""
    _seen: list[list[PodInfo]] = field(default_factory=list)
    _seen_versions: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """The versions of the `_seen` rows (`Snapshot.versions`)."""
    _codes: dict[str, int] = field(default_factory=dict)
    _shapes: dict[tuple[tuple[str, int], ...], int] = field(default_factory=dict)
    _vectors: list[IntArray] = field(default_factory=list)
    _stamps: dict[datetime, float] = field(default_factory=dict)
    _where: dict[str, int] = field(default_factory=dict)
    """Pod key -> where a running, non-terminating pod is: its node times `PLACES` plus its place among the node's
    pods. Rows move whenever an earlier node's pods change, places do not: kept with the rows that change, this
    finds the rows of thousands of pods (`rows_of`) without an index of every pod made again for each snapshot."""

    @staticmethod
    def of(snapshot: Snapshot) -> RunningPods:
        """Columns built from scratch."""
        table = snapshot.nodes
        width = len(table.resources)
        empty = np.zeros(0, dtype=np.int64)
        running = RunningPods(
            names=table.names,
            resources=table.resources,
            infos=[],
            keys=np.zeros(0, dtype=object),
            node=empty,
            priority=empty,
            requests=np.zeros((0, width), dtype=np.int64),
            member=empty,
            started=np.zeros(0, dtype=np.float64),
            freed=np.zeros_like(table.requested),
            starts=np.zeros(len(table.names) + 1, dtype=np.int64),
            group_keys=[],
            _seen=[[] for _ in table.names],
            _seen_versions=np.zeros(len(table.names), dtype=np.int64),
        )
        running._update(snapshot, list(range(len(table.names))))
        return running

    def refresh(self, snapshot: Snapshot, unless_fewer: int = 0) -> RunningPods:
        """These columns brought up to `snapshot` (in place), or new ones for another node table.

        With `unless_fewer`, they are left behind while fewer rows than that changed: bringing them up costs
        ~5 ms at 100,000 pods however few rows changed (the columns are spliced whole), and only a preemption
        reads them, which brings them up first; the rows changed since are found then."""
        table = snapshot.nodes
        if table.names != self.names or table.resources != self.resources:
            return RunningPods.of(snapshot)
        if snapshot is self._snapshot and version(snapshot) == self.version:
            return self
        seen, running = self._seen, snapshot.running
        changed = changed_rows(seen, self._seen_versions, running, snapshot.versions)
        if not changed:  # current as they are: they hold this snapshot, and let the last one's pods go
            self.version, self._snapshot = version(snapshot), snapshot
        elif len(changed) >= unless_fewer:
            self._update(snapshot, changed)  # marks the columns current
        return self

    def rows_of(self, keys: Collection[str]) -> IntArray:
        """The rows of these pods, -1 for a pod not running (gone, terminating or never bound): one dictionary
        look-up a pod, in C, for the thousands of pods a constraint's exclusion may name."""
        where = np.fromiter(map(self._where.get, keys, repeat(-1)), dtype=np.int64, count=len(keys))
        found = where >= 0
        rows = np.full(len(where), -1, dtype=np.int64)
        rows[found] = self.starts[where[found] // PLACES] + where[found] % PLACES
        return rows

    def row_of(self, key: str) -> int | None:
        """The row of a running, non-terminating pod."""
        where = self._where.get(key)
        return None if where is None else int(self.starts[where // PLACES]) + where % PLACES

    def code(self, group_key: str) -> int:
        """The code of a PodGroup in `member` (-1 when no running pod ever belonged to it)."""
        return self._codes.get(group_key, -1)

    def _collect(self, snapshot: Snapshot, changed: list[int]) -> _Rows:
        """The rows of the `changed` nodes; their terminating pods' room goes to `freed`.

        One comprehension per column rather than one loop over the pods: a first build walks 100,000 of
        them on the decision's path."""
        table = snapshot.nodes
        running = snapshot.running
        out = _Rows()
        pods = [info for row in changed for info in running[row]]
        live = [info.pod.metadata.deletion_timestamp is None for info in pods]
        self.freed[changed] = 0
        if all(live):
            out.infos = pods
            out.counts = [len(running[row]) for row in changed]
        else:
            rows = [row for row in changed for _ in running[row]]
            for info, row, alive in zip(pods, rows, live, strict=True):
                if not alive:
                    self.freed[row] += table.usage(info.requests)
            out.infos = [info for info, alive in zip(pods, live, strict=True) if alive]
            counts = dict.fromkeys(changed, 0)
            for row, alive in zip(rows, live, strict=True):
                counts[row] += alive
            out.counts = list(counts.values())
        infos = out.infos
        shapes = self._shapes
        requests = [tuple(info.requests.items()) for info in infos]
        for request in set(requests) - shapes.keys():
            shapes[request] = len(self._vectors)
            self._vectors.append(table.usage(dict(request)))
        out.shape = [shapes[request] for request in requests]
        codes = self._codes
        groups = [info.group_key for info in infos]
        for group in set(groups) - codes.keys():
            if group is not None:
                codes[group] = len(self.group_keys)
                self.group_keys.append(group)
        out.member = [-1 if group is None else codes[group] for group in groups]
        stamps = self._stamps
        times = [info.scheduled_at for info in infos]
        for when in set(times) - stamps.keys():
            if when is not None:
                stamps[when] = when.timestamp()
        out.started = [np.nan if when is None else stamps[when] for when in times]
        out.priority = [info.priority for info in infos]
        return out

    def _update(self, snapshot: Snapshot, changed: list[int]) -> None:
        """Rebuild the rows of the `changed` nodes (ascending) and splice them between the others'."""
        fresh = self._collect(snapshot, changed)
        where = self._where
        for row in changed:
            for info in self.infos[self.starts[row] : self.starts[row + 1]]:
                where.pop(info.key, None)
            self._seen[row] = snapshot.running[row]  # rows are replaced, never changed in place
        self._seen_versions[changed] = snapshot.versions[changed]
        at = 0
        for row, count in zip(changed, fresh.counts, strict=True):
            first = row * PLACES
            where.update(
                zip([info.key for info in fresh.infos[at : at + count]], range(first, first + count), strict=True)
            )
            at += count
        counts = np.diff(self.starts)
        counts[changed] = fresh.counts
        offsets = np.zeros(len(changed) + 1, dtype=np.int64)
        np.cumsum(fresh.counts, out=offsets[1:])
        cuts = [(int(self.starts[row]), int(self.starts[row + 1])) for row in changed]
        pieces = list(zip(cuts, offsets[:-1].tolist(), offsets[1:].tolist(), strict=True))
        if len(changed) <= SPLICED_IN_PLACE:
            for (low, high), begin, end in reversed(pieces):
                self.infos[low:high] = fresh.infos[begin:end]
        else:
            infos: list[PodInfo] = []
            previous = 0
            for (low, high), begin, end in pieces:
                infos += self.infos[previous:low]
                infos += fresh.infos[begin:end]
                previous = high
            infos += self.infos[previous:]
            self.infos = infos

        def spliced(old: npt.NDArray[Any], new: npt.NDArray[Any]) -> npt.NDArray[Any]:
            if len(changed) == len(self.names):
                return new
            parts = []
            previous = 0
            for (low, high), begin, end in pieces:
                parts += [old[previous:low], new[begin:end]]
                previous = high
            parts.append(old[previous:])
            return np.concatenate(parts)

        width = len(self.resources)
        vectors = np.array(self._vectors, dtype=np.int64).reshape(-1, width)
        self.keys = spliced(self.keys, np.array([i.key for i in fresh.infos], dtype=object))
        self.priority = spliced(self.priority, np.array(fresh.priority, dtype=np.int64))
        self.requests = spliced(self.requests, vectors[np.array(fresh.shape, dtype=np.int64)].reshape(-1, width))
        self.member = spliced(self.member, np.array(fresh.member, dtype=np.int64))
        self.started = spliced(self.started, np.array(fresh.started, dtype=np.float64))
        self.starts = np.zeros(len(self.names) + 1, dtype=np.int64)
        np.cumsum(counts, out=self.starts[1:])
        self.node = np.repeat(np.arange(len(self.names), dtype=np.int64), counts)
        self.version, self._snapshot = version(snapshot), snapshot


def version(snapshot: Snapshot) -> tuple[int, int, datetime]:
    """Changes whenever the runner assumes or forgets a pod on the snapshot (requested row changes)."""
    requested = snapshot.nodes.requested
    return (hash(requested.tobytes()), sum(map(len, snapshot.running)), snapshot.now)


@dataclass(slots=True)
class Candidates:
    """The search input, the pods behind each unit index, and the filters to apply to them."""

    search_input: SearchInput
    running: RunningPods
    pod_rows: IntArray
    preemptor: SchedulingUnit
    snapshot: Snapshot
    victim_filters: tuple[VictimFilter, ...]
    whole: dict[str, int] = field(default_factory=dict)
    """Unit index of each `PodGroup`-mode group among the candidates."""
    validators: tuple[ScenarioValidator, ...] = ()
    """Asked about each final victim set through `search` (`_search`); `search_input` does not hold them, so it
    refers to nothing that refers back to it: a decision's columns are freed with it, not left in a cycle for the
    collector to walk."""
    _victims: dict[int, VictimUnit] = field(default_factory=dict)
    _units: dict[str, int] = field(default_factory=dict)
    """Unit index of each lone pod's key looked up (`unit_of`)."""
    _order: IntArray | None = None
    _bounds: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    def victim(self, index: int) -> VictimUnit:
        """The VictimUnit for a unit index, made on first use."""
        found = self._victims.get(index)
        if found is None:
            inp = self.search_input
            if self._order is None:
                order = np.argsort(inp.pod_unit, kind="stable")
                self._order = self.pod_rows[order]
                self._bounds = np.zeros(len(inp.units) + 1, dtype=np.int64)
                np.cumsum(np.bincount(inp.pod_unit, minlength=len(inp.units)), out=self._bounds[1:])
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

    def index(self) -> _UnitIndex:
        return _UnitIndex(self)

    def unit_of(self, key: str) -> int:
        """The unit index of a unit key: a group's, or a lone pod's through its row (no dict of every key), kept
        for the next time: a decision looks its victims up again after each search."""
        found = self.whole.get(key)
        if found is None:
            found = self._units.get(key)
        if found is not None:
            return found
        row = self.running.row_of(key)
        at = int(np.searchsorted(self.pod_rows, row)) if row is not None else len(self.pod_rows)
        if at == len(self.pod_rows) or self.pod_rows[at] != row:
            raise KeyError(key)
        found = self._units[key] = int(self.search_input.pod_unit[at])
        return found

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
            decision = self._search(protections)
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
        return self._revalidate(self._search(protections), protections, checked)

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
            decision = self._search(tried)
            fresh = [index[v.key] for v in decision.victims if index[v.key] not in checked]
            checked.update(fresh)
            found = self._protect(fresh)
            if found:
                tried.update(found)
                decision = self._search(tried)
                if any(index[v.key] not in checked for v in decision.victims):
                    return first
        return first

    def _search(self, protections: dict[int, Status]) -> Decision:
        validate = self.validate if self.validators else None
        return search(replace(self.search_input, protections=protections, validate=validate))

    def validate(self, keys: tuple[str, ...]) -> Status:
        index = self.index()
        chosen = [self.victim(index[k]) for k in keys]
        for validator in self.validators:
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


@dataclass(frozen=True, slots=True)
class _UnitIndex:
    """`candidates.index()[key]`: a unit's index by key, looked up only for the few keys a decision names."""

    candidates: Candidates

    def __getitem__(self, key: str) -> int:
        return self.candidates.unit_of(key)


def build_candidates(
    unit: SchedulingUnit,
    snapshot: Snapshot,
    running: RunningPods,
    state: CycleState,
    victim_filters: Sequence[VictimFilter],
    validators: Sequence[ScenarioValidator],
    static_filters: Sequence[FilterPlugin],
    min_count: int,
    constraints: Sequence[PreemptionConstraint] = (),
) -> Candidates:
    """Columnar search input for `unit`; victim filters run later, in `Candidates.decide`. The `constraints`
    (host ports, inter-pod affinity, topology spread) narrow the members' masks and add their exclusions as
    columns beside the resources (`_excluded`)."""
    table = snapshot.nodes
    free = table.free() + running.freed
    for held in snapshot.held_against(unit):
        free[table.index[held.pod.status.nominated_node_name or ""]] -= table.usage(held.requests)
    selected: BoolArray = running.priority < unit.priority
    own = running.code(unit.group.key) if unit.group is not None else -1
    if own >= 0:
        selected &= running.member != own
    pod_rows = np.flatnonzero(selected)
    member = running.member[pod_rows]
    groups = snapshot.groups
    whole_code = np.array(
        [(g := groups.get(key)) is not None and g.disruption_mode == "PodGroup" for key in running.group_keys]
        + [False],
        dtype=bool,
    )
    grouped = whole_code[member]
    any_whole = bool(grouped.any())
    if any_whole:
        # A unit id per pod: its group's for a PodGroup-mode member (groups in the order their first running
        # pod comes, as one pass over the nodes meets them), else one of its own.
        is_whole = whole_code[running.member]
        whole_rows = np.flatnonzero(is_whole)
        codes, first = np.unique(running.member[whole_rows], return_index=True)
        rank = np.zeros(len(whole_code), dtype=np.int64)
        rank[codes[np.argsort(first, kind="stable")]] = np.arange(len(codes))
        ids = np.where(grouped, rank[member], len(codes) + pod_rows)
        unique, pod_unit = np.unique(ids, return_inverse=True)
        by_unit = np.argsort(pod_unit, kind="stable")
        counts = np.bincount(pod_unit, minlength=len(unique))
        first_row = np.zeros(len(unique), dtype=np.int64)
        np.cumsum(counts[:-1], out=first_row[1:])
        first = pod_rows[by_unit[first_row]]
        started = np.full(len(unique), np.inf)
        np.minimum.at(started, pod_unit, np.nan_to_num(running.started[pod_rows], nan=np.inf))
        whole = unique < len(codes)
        started = np.where(np.isinf(started), np.nan, started)
    else:
        pod_unit = np.arange(len(pod_rows), dtype=np.int64)
        first = pod_rows
        started = running.started[pod_rows]
        whole = np.zeros(len(pod_rows), dtype=bool)
    pod_keys = (running.keys if len(pod_rows) == len(running.keys) else running.keys[pod_rows]).tolist()
    keys = running.keys[first].tolist() if any_whole else pod_keys  # a unit a pod: the same keys
    whole_units: dict[str, int] = {}
    for at in np.flatnonzero(whole).tolist():
        keys[at] = group_unit(running.group_keys[int(running.member[first[at]])])
        whole_units[keys[at]] = at
    units = Units(
        keys=keys,
        priority=running.priority[first],
        whole_group=whole,
        started_at=started,
    )
    width = len(table.resources)
    members = unit.members
    requests = np.array([table.vector(m.requests) for m in members], dtype=np.int64).reshape(-1, width)
    masks = np.array([static_mask(m, snapshot, static_filters, state).feasible for m in members], dtype=bool).reshape(
        len(members), len(table.names)
    )
    pod_requests = running.requests[pod_rows]
    if constraints:
        own_group = unit.group.key if unit.group is not None else None

        def removable(info: PodInfo) -> bool:
            return info.priority < unit.priority and (own_group is None or info.group_key != own_group)

        exclusions: list[Exclusion] = []
        for plugin in constraints:
            terms = plugin.preemption_terms(state, members, snapshot, removable)
            if terms.masks is not None:
                masks &= terms.masks
            exclusions.extend(terms.exclusions)
        if exclusions:
            free, pod_requests, requests = _excluded(
                exclusions, snapshot, running, pod_rows, free, pod_requests, requests
            )
    preemptor = PreemptorInput(
        key=unit.key,
        priority=unit.priority,
        is_group=unit.is_group,
        min_count=min_count,
        members=tuple(m.key for m in members),
        requests=requests,
        masks=masks,
        preemption_policy=unit.preemption_policy,
    )
    search_input = SearchInput(
        node_names=table.names,
        free=free,
        units=units,
        pod_keys=pod_keys,
        pod_unit=pod_unit.astype(np.int64),
        pod_node=running.node[pod_rows],
        pod_requests=pod_requests,
        preemptor=preemptor,
        pdbs=_pdbs(snapshot, running, pod_rows),
        domains=tuple(SearchDomain(np.flatnonzero(d.rows), d.name, d.level) for d in tried_domains(state)),
    )
    return Candidates(
        search_input, running, pod_rows, unit, snapshot, tuple(victim_filters), whole_units, tuple(validators)
    )


def _excluded(
    exclusions: Sequence[Exclusion],
    snapshot: Snapshot,
    running: RunningPods,
    pod_rows: IntArray,
    free: IntArray,
    pod_requests: IntArray,
    requests: IntArray,
) -> tuple[IntArray, IntArray, IntArray]:
    """`free`, the candidates' `pod_requests` and the members' `requests` with one column per exclusion: a node
    has `capacity` of it less `capacity` for each holder running there (a terminating holder is going already),
    a candidate holder gives its `capacity` back when removed, and each member that needs it takes 1 (with `room`
    and `amounts`: what each holder holds, and what each member needs)."""
    nodes = len(snapshot.nodes.names)
    free_columns = np.zeros((nodes, len(exclusions)), dtype=np.int64)
    pod_columns = np.zeros((len(pod_rows), len(exclusions)), dtype=np.int64)
    member_columns = np.zeros((len(requests), len(exclusions)), dtype=np.int64)
    position = np.full(len(running.keys), -1, dtype=np.int64)
    position[pod_rows] = np.arange(len(pod_rows))
    for column, exclusion in enumerate(exclusions):
        rows = running.rows_of(exclusion.holders)
        amounts = None  # per running holder (devices), `holders` iterated in the same order as by `rows_of`
        if exclusion.amounts is not None:
            amounts = np.array([exclusion.amounts[k] for k in exclusion.holders], dtype=np.int64)[rows >= 0]
        rows = rows[rows >= 0]
        held = np.bincount(running.node[rows], weights=amounts, minlength=nodes).astype(np.int64)
        weight = 1 if exclusion.room is not None else exclusion.capacity
        free_columns[:, column] = exclusion.room - held if exclusion.room is not None else weight * (1 - held)
        member_columns[:, column] = exclusion.needs
        candidates = position[rows]
        pod_columns[candidates[candidates >= 0], column] = weight if amounts is None else amounts[candidates >= 0]
    return (
        np.hstack([free, free_columns]),
        np.hstack([pod_requests, pod_columns]),
        np.hstack([requests, member_columns]),
    )


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
