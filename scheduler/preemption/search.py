"""Workload-aware victim search (KEP-5710, "Search"): plain arrays in, an explained Decision out.

Pure: no API calls, no clock reads, no randomness; ties are broken by node index and `namespace/name`.
The candidates are the units of strictly lower priority than the preemptor that no victim filter
protects. Victim sets are ranked as kube-scheduler ranks them (`pickOneNodeForPreemption`): fewest
PodDisruptionBudget violations, lowest highest priority, smallest sum of priorities, fewest pods, then
the latest start among the highest.

- A lone pod searches node by node, as kube-scheduler does: on every node where removing all
  candidates fits it, kube-scheduler's own selection in the cheapest order of its ties (`ties`; on
  one node it is the KEP's order), and the node whose victims rank lowest wins.
- A pod group searches the whole cluster in the KEP's order (`_search_cluster`): remove every
  candidate and place the group; reprieve the PDB-violating units best effort; binary-search the
  remaining candidates' priorities for the lowest bound that still places as many members; reprieve
  under it, most important first, with an incremental check (a reprieved unit only touches the rows
  of its own nodes). Then the pod-by-pod plan (`pod_by_pod`: each member where its own victims cost
  least, as kube-scheduler preempts for a basic group) is built, unless the KEP plan is provably the
  cheapest, and the cheaper of the two is kept.

Deliberate divergences from upstream 1.36: the binary search is implemented (upstream re-runs the
whole placement per reprieval, which takes minutes on 1,000 nodes; docs/DESIGN.md, Performance); a
`disruptionMode: PodGroup` unit goes whole for a lone pod as well (upstream's pod-by-pod preemption
deletes only the member it needs); ties go to the cheaper victims rather than to start time alone.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

import numpy as np
import numpy.typing as npt

from scheduler.framework.snapshot import BoolArray, IntArray
from scheduler.framework.status import Status
from scheduler.preemption import collector, pod_by_pod, ties
from scheduler.preemption.decision import (
    SEARCH_PLUGIN,
    Decision,
    DomainCost,
    Outcome,
    Spared,
    SpareReason,
    Victim,
    VictimReason,
)
from scheduler.preemption.ordering import Importance, ImportanceKey, importance_key, importance_keys

_UNLIMITED = np.int64(1 << 40)
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class UnitInput:
    """A victim unit: one pod, or every scheduled pod of a `disruptionMode: PodGroup` group."""

    key: str
    priority: int
    whole_group: bool
    started_at: float | None = None


@dataclass(frozen=True, slots=True)
class Units:
    """Victim units as columns: a cluster has tens of thousands, and the search reads a few of them.

    `started_at` is epoch seconds, NaN for a unit not started; indexing gives one `UnitInput`.
    """

    keys: Sequence[str]
    priority: IntArray
    whole_group: BoolArray
    started_at: FloatArray

    @staticmethod
    def of(units: Sequence[UnitInput]) -> Units:
        return Units(
            keys=[u.key for u in units],
            priority=np.array([u.priority for u in units], dtype=np.int64),
            whole_group=np.array([u.whole_group for u in units], dtype=bool),
            started_at=np.array([np.nan if u.started_at is None else u.started_at for u in units], dtype=np.float64),
        )

    def __len__(self) -> int:
        return len(self.keys)

    def __getitem__(self, index: int) -> UnitInput:
        started = float(self.started_at[index])
        return UnitInput(
            self.keys[index],
            int(self.priority[index]),
            bool(self.whole_group[index]),
            None if np.isnan(started) else started,
        )


@dataclass(frozen=True, slots=True)
class PdbInput:
    """A PodDisruptionBudget: how many of the pods it selects (rows of the pod arrays) may go."""

    key: str
    allowed: int
    pods: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class PreemptorInput:
    """The unit to place: `requests` is (members x resources), `masks` (members x nodes) static fit."""

    key: str
    priority: int
    is_group: bool
    min_count: int
    members: tuple[str, ...]
    requests: IntArray
    masks: BoolArray
    preemption_policy: str = "PreemptLowerPriority"


@dataclass(frozen=True, slots=True)
class SearchInput:
    """The cluster as the search sees it. Pod rows: `pod_unit`/`pod_node` indices, `pod_requests` rows.

    `free` is per-node free capacity with every running pod in place. `protections` holds the
    rejections of victim filters by unit index; `validate` is the scenario validators' check on a
    final victim set (unit keys).
    """

    node_names: tuple[str, ...]
    free: IntArray
    units: Units
    pod_keys: Sequence[str]
    pod_unit: IntArray
    pod_node: IntArray
    pod_requests: IntArray
    preemptor: PreemptorInput
    pdbs: tuple[PdbInput, ...] = ()
    protections: dict[int, Status] = field(default_factory=dict)
    validate: Callable[[tuple[str, ...]], Status] | None = None
    domains: tuple[SearchDomain, ...] = ()
    """A pod group that must stay inside one topology domain: the domains it may go to, narrowest level first.
    Empty: the whole cluster is its one domain."""


@dataclass(frozen=True, slots=True)
class SearchDomain:
    """The nodes of one topology domain (sorted node indices), its `LABEL=VALUE` and its level (0: narrowest)."""

    nodes: IntArray
    name: str
    level: int = 0


@dataclass(frozen=True, slots=True)
class _Shape:
    """Members with the same request and static mask, placed together by one vector expression."""

    members: IntArray
    request: IntArray
    mask: BoolArray


@dataclass(slots=True)
class _Placement:
    placed: int
    assign: IntArray
    remaining: IntArray


@dataclass(slots=True)
class _DomainResult:
    victims: list[int]
    reasons: dict[int, tuple[VictimReason, str]]
    spared: list[Spared]
    assign: IntArray
    dom: IntArray
    violations: int
    violating: dict[int, str]
    score: tuple[int, int, int, int, float]
    bound: int | None
    name: str = ""
    """The topology domain the preemptor goes to; empty for the whole cluster or one node."""


@dataclass(slots=True)
class _Context:
    inp: SearchInput
    unit_priority: IntArray
    by_unit: IntArray
    unit_bounds: IntArray
    pod_pdbs: dict[int, list[int]]
    shapes: list[_Shape]
    member_shape: list[int]
    pdb_rows: IntArray
    """Sorted pod rows some PDB selects."""

    importance_keys: dict[int, ImportanceKey] = field(default_factory=dict)
    covered_by: dict[int, tuple[tuple[int, int], ...]] = field(default_factory=dict)

    def importance(self, unit: int) -> ImportanceKey:
        """The unit's `ordering.importance_key`, computed once per search."""
        found = self.importance_keys.get(unit)
        if found is None:
            found = self.importance_keys[unit] = importance_key(_importance(self, unit))
        return found

    def by_importance(self, units: list[int]) -> list[int]:
        """`units` sorted by `importance`, the keys of many computed from the columns at once
        (`ordering.importance_keys`)."""
        todo = [u for u in units if u not in self.importance_keys]
        if len(todo) > 1:
            at = np.array(todo, dtype=np.int64)
            info = self.inp.units
            keys = importance_keys(
                [info.keys[u] for u in todo],
                info.priority[at],
                info.whole_group[at],
                self.unit_bounds[at + 1] - self.unit_bounds[at],
                info.started_at[at],
            )
            self.importance_keys.update(zip(todo, keys, strict=True))
        return sorted(units, key=self.importance)

    def rows(self, unit: int) -> IntArray:
        """Pod rows of one unit (a slice of one argsort: no per-unit arrays for 50,000 units)."""
        return self.by_unit[self.unit_bounds[unit] : self.unit_bounds[unit + 1]]

    @property
    def allowed(self) -> tuple[int, ...]:
        """What each PDB allows, in `inp.pdbs` order."""
        return tuple(pdb.allowed for pdb in self.inp.pdbs)

    def covered(self, unit: int) -> tuple[tuple[int, int], ...]:
        """The PDBs selecting the unit's pods: (index in `inp.pdbs`, pods selected)."""
        if not self.pod_pdbs:
            return ()
        found = self.covered_by.get(unit)
        if found is None:
            counts: dict[int, int] = {}
            for row in self.rows(unit).tolist():
                for index in self.pod_pdbs.get(row, ()):
                    counts[index] = counts.get(index, 0) + 1
            found = self.covered_by[unit] = tuple(sorted(counts.items()))
        return found

    def pdb_message(self, unit: int) -> str:
        names = ", ".join(f"{self.inp.pdbs[i].key} (allows {self.inp.pdbs[i].allowed})" for i, _ in self.covered(unit))
        return f"evicting it would exceed PodDisruptionBudget {names}"

    def removable(self, rows: IntArray, local: IntArray) -> pod_by_pod.Removable:
        """These candidate rows (on domain-local nodes `local`) as `pod_by_pod` items, their units ranked
        by `ordering.importance_key`."""
        inp = self.inp
        nodes = int(local.max(initial=0)) + 1
        _, first, item_of = np.unique(inp.pod_unit[rows] * nodes + local, return_index=True, return_inverse=True)
        item_unit = inp.pod_unit[rows[first]]
        units, back = np.unique(item_unit, return_inverse=True)
        pods = self.unit_bounds[units + 1] - self.unit_bounds[units]
        priority = self.unit_priority[units]
        rank = np.empty(len(units), dtype=np.int64)
        rank[sorted(range(len(units)), key=lambda at: self.importance(int(units[at])))] = np.arange(len(units))
        covered: dict[int, tuple[tuple[int, int], ...]] = {}
        if len(self.pdb_rows):
            for unit in units[np.isin(units, inp.pod_unit[self.pdb_rows])].tolist():
                covered[unit] = self.covered(unit)
        return pod_by_pod.Removable(
            node=local[first],
            unit=item_unit,
            request=_sums(item_of, inp.pod_requests[rows], len(first)),
            rank=rank[back],
            priority=priority[back],
            pods=pods[back],
            covered=covered,
            allowed=self.allowed,
        )


def search(inp: SearchInput) -> Decision:
    """Decide which units to preempt for `inp.preemptor`, or say why preemption cannot help."""
    with collector.paused():
        return _search(inp)


def _search(inp: SearchInput) -> Decision:
    pre = inp.preemptor
    protected = _protected(inp)
    until = min((s.until for s in protected if s.until is not None), default=None)
    if pre.preemption_policy == "Never":
        return _cannot_help(inp, "preemptionPolicy is Never: the preemptor preempts nothing", protected, None)
    unit_priority = inp.units.priority
    candidate = unit_priority < pre.priority
    for index in inp.protections:
        if not inp.protections[index].is_success:
            candidate[index] = False
    rows = np.flatnonzero(candidate[inp.pod_unit]) if len(inp.pod_unit) else np.zeros(0, dtype=np.int64)
    if len(rows) == 0:
        message = f"no unit has a priority lower than {pre.priority} and may be preempted"
        return _cannot_help(inp, message, protected, until)
    by_unit = np.argsort(inp.pod_unit, kind="stable")
    bounds = np.zeros(len(inp.units) + 1, dtype=np.int64)
    np.cumsum(np.bincount(inp.pod_unit, minlength=len(inp.units)), out=bounds[1:])
    shapes = _shapes(pre)
    member_shape = [0] * len(pre.members)
    for index, shape in enumerate(shapes):
        for member in shape.members.tolist():
            member_shape[member] = index
    pod_pdbs = _pdbs_by_pod(inp)
    pdb_rows = np.array(sorted(pod_pdbs), dtype=np.int64)
    ctx = _Context(inp, unit_priority, by_unit, bounds, pod_pdbs, shapes, member_shape, pdb_rows)
    searched = _Searched()
    if pre.is_group and inp.domains:
        ranked: Iterable[_DomainResult] = _cheapest_domains(ctx, rows, searched)
        results: list[_DomainResult] = []
    else:
        search_in = _search_cluster if pre.is_group else _search_node
        results = [r for dom, dom_rows, _ in _domains(ctx, rows, 0) if (r := search_in(ctx, dom, dom_rows)) is not None]
        if results and pre.is_group and (other := _pod_by_pod(ctx, rows, results[0])) is not None:
            results.append(other)
        results.sort(key=lambda r: r.score)
        ranked = results
    rejection: tuple[Status, tuple[str, ...]] | None = None
    for result in ranked:
        if ranked is not results:
            results.append(result)
        keys = tuple(inp.units.keys[u] for u in result.victims)
        verdict = inp.validate(keys) if inp.validate is not None and keys else None
        if verdict is not None and not verdict.is_success:
            rejection = rejection or (verdict, keys)
            continue
        return _decision(ctx, result, protected + _pdb_elsewhere(ctx, result, results), searched.about(result))
    if rejection is None:
        return _cannot_help(inp, _unschedulable_message(ctx, rows), protected, until)
    status, keys = rejection
    message = f"every placement was rejected by {status.plugin or 'a scenario validator'}: {status.message()}"
    return replace(_cannot_help(inp, message, protected, status.until or until), rejected=keys)


def _protected(inp: SearchInput) -> list[Spared]:
    spared = []
    for index, status in sorted(inp.protections.items()):
        unit = inp.units[index]
        if status.is_success or unit.priority >= inp.preemptor.priority:
            continue
        spared.append(
            Spared(
                unit.key,
                unit.priority,
                status.plugin or SEARCH_PLUGIN,
                SpareReason.PROTECTED,
                status.message(),
                status.until,
            )
        )
    return spared


def _cannot_help(inp: SearchInput, message: str, protected: list[Spared], until: datetime | None) -> Decision:
    pre = inp.preemptor
    return Decision(
        preemptor=pre.key,
        preemptor_priority=pre.priority,
        outcome=Outcome.CANNOT_HELP,
        message=message,
        spared=tuple(protected),
        pending={member: message for member in pre.members},
        until=until,
    )


def _pdbs_by_pod(inp: SearchInput) -> dict[int, list[int]]:
    by_pod: dict[int, list[int]] = {}
    for index, pdb in enumerate(inp.pdbs):
        for row in pdb.pods:
            by_pod.setdefault(row, []).append(index)
    return by_pod


def _shapes(pre: PreemptorInput) -> list[_Shape]:
    groups: dict[tuple[bytes, bytes], list[int]] = {}
    for member in range(len(pre.members)):
        groups.setdefault((pre.requests[member].tobytes(), pre.masks[member].tobytes()), []).append(member)
    return [
        _Shape(np.array(members, dtype=np.int64), pre.requests[members[0]], pre.masks[members[0]])
        for members in groups.values()
    ]


@dataclass(slots=True)
class _Searched:
    """The topology domains a decision searched and what each cost, and how many it passed over."""

    costs: list[tuple[tuple[int, int, int, int], int, str]] = field(default_factory=list)
    passed: int = 0

    def about(self, chosen: _DomainResult) -> tuple[tuple[DomainCost, ...], int]:
        """The chosen domain's cost first, then the others' cheapest first; and how many were passed over."""
        others = sorted((c for c in self.costs if c[2] != chosen.name), key=lambda c: (c[0], c[1]))
        first = [c for c in self.costs if c[2] == chosen.name]
        return tuple(DomainCost(name, *score) for score, _, name in first + others), self.passed


def _cheapest_domains(ctx: _Context, rows: IntArray, searched: _Searched) -> Iterator[_DomainResult]:
    """A topology group's result in each domain that can help, best first: most members placed, then cheapest by
    kube-scheduler's ranking, then the domains' order; the narrow level's before the wide one's. A domain is searched
    only once its bound (every member placed, at `_lower_bound`'s cost) could still beat the best found and not yet
    handed out: in a cluster of many like racks, one or a few are searched, not all."""
    everyone = len(ctx.inp.preemptor.members)
    for level in _levels(ctx.inp):
        pending: list[tuple[tuple[int, int, int, int, int], int, IntArray, IntArray, str]] = []
        hopeless = 0
        for order, (dom, dom_rows, name) in enumerate(_domains(ctx, rows, level)):
            bound = _lower_bound(ctx, dom, dom_rows)
            if bound is None:
                hopeless += 1
            else:
                pending.append(((-everyone, *bound), order, dom, dom_rows, name))
        pending.sort(key=lambda p: (p[0], p[1]))
        found: list[tuple[tuple[int, int, int, int, int], int, _DomainResult]] = []
        while pending or found:
            if pending and (not found or (pending[0][0], pending[0][1]) < min(f[:2] for f in found)):
                _, order, dom, dom_rows, name = pending.pop(0)
                result = _search_domain(ctx, dom, dom_rows)
                if result is not None:
                    score = (result.score[0], result.score[1], result.score[2], result.score[3])
                    placed = int((result.assign >= 0).sum())
                    found.append(((-placed, *score), order, replace(result, name=name)))
                    searched.costs.append((score, order, name))
                continue
            best = min(found, key=lambda f: f[:2])
            found.remove(best)
            searched.passed = hopeless + len(pending)  # as the decision stands if this result is taken
            yield best[2]


def _search_domain(ctx: _Context, dom: IntArray, dom_rows: IntArray) -> _DomainResult | None:
    """A topology group's search inside one domain: KEP-5710's, or the members placed one at a time there when
    that is cheaper (`_pod_by_pod`), as the whole cluster's search keeps the cheaper of the two."""
    kep = _search_cluster(ctx, dom, dom_rows)
    if kep is None:
        return None
    within = np.zeros(len(ctx.inp.node_names), dtype=np.bool_)
    within[dom] = True
    other = _pod_by_pod(ctx, dom_rows, kep, within)
    return other if other is not None and other.score < kep.score else kep


def _lower_bound(ctx: _Context, dom: IntArray, dom_rows: IntArray) -> tuple[int, int, int, int] | None:
    """What any victim set in this domain costs at least, by kube-scheduler's ranking (no PDB violation; the
    highest priority, the sum and the pods it takes to free in aggregate what `min_count` members need beyond the
    domain's free room), or None when even every candidate freed would not make that room. A bound, never more than
    the search's own result: members need their requests on some node, so the victims free at least that much
    in all."""
    inp, pre = ctx.inp, ctx.inp.preemptor
    need = np.sort(pre.requests, axis=0)[: pre.min_count].sum(axis=0)
    short = np.maximum(need - np.maximum(inp.free[dom], 0).sum(axis=0), 0)
    if not short.any():
        return (0, ties.NONE[1], 0, 0)
    requests = inp.pod_requests[dom_rows]
    if (requests.sum(axis=0) < short).any():
        return None
    priority = ctx.unit_priority[inp.pod_unit[dom_rows]]
    order = np.argsort(priority, kind="stable")
    covered = (np.cumsum(requests[order], axis=0) >= short).all(axis=1)
    top = int(priority[order][int(np.argmax(covered))])
    negative = bool((priority < 0).any())  # then a set's sum has no bound but the lowest
    total = ties.NONE[1] if negative else 0
    fewest = 0
    for column in np.flatnonzero(short).tolist():
        want, have = int(short[column]), requests[:, column]
        useful = have > 0
        by_size = np.sort(have[useful])[::-1]
        fewest = max(fewest, int(np.searchsorted(np.cumsum(by_size), want)) + 1)
        if negative:
            continue
        ratio = np.argsort(priority[useful] / have[useful], kind="stable")
        sizes, costs = have[useful][ratio], priority[useful][ratio]
        before = np.cumsum(sizes) - sizes
        taken = np.clip(want - before, 0, sizes)
        total = max(total, int(np.floor((costs * taken / sizes).sum())))
    return (0, top, total, fewest)


def _levels(inp: SearchInput) -> list[int]:
    """The topology levels to search in turn (a wider one only when no domain of the narrower can help)."""
    return sorted({d.level for d in inp.domains}) or [0]


def _domains(ctx: _Context, rows: IntArray, level: int) -> list[tuple[IntArray, IntArray, str]]:
    """KEP-5710's split: where the preemptor may be put, with the candidates running there. For a group, the
    whole cluster, or each topology domain of `level` it must stay inside (a candidate unit's pods elsewhere
    count in its cost, not in the room it frees there); for a lone pod, each node where removing every
    candidate fits it."""
    inp = ctx.inp
    nodes = len(inp.node_names)
    if inp.preemptor.is_group and inp.domains:
        at = inp.pod_node[rows]
        return [(d.nodes, rows[np.isin(at, d.nodes)], d.name) for d in inp.domains if d.level == level]
    if inp.preemptor.is_group:
        return [(np.arange(nodes, dtype=np.int64), rows, "")]
    freed = inp.free + _sums(inp.pod_node[rows], inp.pod_requests[rows], nodes)
    request = inp.preemptor.requests[0]
    fits = inp.preemptor.masks[0] & (freed >= request).all(axis=1)
    by_node = rows[np.argsort(inp.pod_node[rows], kind="stable")]
    starts = np.searchsorted(inp.pod_node[by_node], np.arange(nodes + 1))
    return [
        (np.array([n], dtype=np.int64), by_node[starts[n] : starts[n + 1]], "") for n in np.flatnonzero(fits).tolist()
    ]


def _local(dom: IntArray, nodes: IntArray, total: int) -> IntArray:
    """Domain-local indices of these (sorted `dom`'s) nodes; a pod group's domain is every node, itself."""
    return nodes if len(dom) == total else np.searchsorted(dom, nodes)


def _sums(local_nodes: IntArray, requests: IntArray, nodes: int) -> IntArray:
    """Per-node sums of request rows (bincount per resource: far faster than `np.add.at`)."""
    out = np.zeros((nodes, requests.shape[1]), dtype=np.int64)
    for r in range(requests.shape[1]):
        out[:, r] = np.rint(np.bincount(local_nodes, weights=requests[:, r], minlength=nodes)).astype(np.int64)
    return out


def _search_node(ctx: _Context, dom: IntArray, rows: IntArray) -> _DomainResult:
    """A lone pod's domain, one node where removing every candidate fits it: kube-scheduler's per-node
    selection in the cheapest order of its ties (`ties`), which on one node is the KEP's order; its
    highest victim is the binary search's bound."""
    inp = ctx.inp
    node = int(dom[0])
    units = ctx.by_importance(list(set(inp.pod_unit[rows].tolist())))
    index = {unit: at for at, unit in enumerate(units)}
    requests = _sums(
        np.array([index[u] for u in inp.pod_unit[rows].tolist()], dtype=np.int64), inp.pod_requests[rows], len(units)
    )
    room = inp.free[node] + requests.sum(axis=0) - inp.preemptor.requests[0]
    candidates = [
        ties.Unit(tuple(request), int(ctx.unit_priority[unit]), len(ctx.rows(unit)), ctx.covered(unit))
        for unit, request in zip(units, requests.tolist(), strict=True)
    ]
    outcome = ties.cheapest(room.tolist(), candidates, ctx.allowed)
    victims = [unit for unit, back in zip(units, outcome.kept, strict=True) if not back]
    bound = max((candidates[index[u]].priority for u in victims), default=None)
    violating = {u: ctx.pdb_message(u) for u, over in zip(units, outcome.violating, strict=True) if over}
    spared = []
    keys = inp.units.keys
    for unit, back in zip(units, outcome.kept, strict=True):
        value = candidates[index[unit]].priority
        if not back:
            continue
        if bound is not None and value > bound:
            message = f"priority {value} is above {bound}, the lowest bound at which the preemptor fits"
            spared.append(Spared(keys[unit], value, SEARCH_PLUGIN, SpareReason.ABOVE_BOUND, message))
        elif unit in violating:
            spared.append(Spared(keys[unit], value, SEARCH_PLUGIN, SpareReason.PDB, violating[unit]))
        else:
            message = "the preemptor still fits with it in place"
            spared.append(Spared(keys[unit], value, SEARCH_PLUGIN, SpareReason.REPRIEVED, message))
    kept = np.array(outcome.kept, dtype=bool)
    remaining = (room - requests[kept].sum(axis=0)).reshape(1, -1)
    placement = _Placement(1, np.zeros(1, dtype=np.int64), remaining)
    return _result(ctx, dom, victims, violating, spared, placement, bound)


def _pod_by_pod(
    ctx: _Context, rows: IntArray, kep: _DomainResult, within: BoolArray | None = None
) -> _DomainResult | None:
    """The other plan for a pod group: its members placed one at a time (`pod_by_pod`), each in a
    one-node domain as kube-scheduler preempts for a basic group, built twice: ranking each member's
    victims as kube-scheduler does, and counting every set up to the KEP plan's PDB violations and
    highest priority as equal (the set reaches them anyway unless this plan does better). Kept when it
    places as many
    members and is cheaper by kube-scheduler's ranking; KEP-5710 leaves room for it ("consider few
    potential placements ... and choose the one that ... optimizes the number of victims").

    Without PDB violations in the KEP plan, only candidates up to its highest victim can take part
    (above it this plan could only cost more); the plan is not built at all when the KEP plan's victims
    are provably the fewest and cheapest any placement takes: no PDB violated, its highest victim at the
    binary-search bound (for one member shape the bound is exact), its pods as few as
    `pod_by_pod.fewest_pods` allows and all of the lowest priority among those candidates. `within`: the nodes of
    the topology domain the members must stay in."""
    inp, pre = ctx.inp, ctx.inp.preemptor
    masks = pre.masks if within is None else pre.masks & within
    shapes = ctx.shapes if within is None else [_Shape(s.members, s.request, s.mask & within) for s in ctx.shapes]
    violations, ceiling, total, pods, _ = kep.score
    if not kep.victims:
        return None
    if violations == 0:
        rows = rows[ctx.unit_priority[inp.pod_unit[rows]] <= ceiling]
        lowest = int(ctx.unit_priority[inp.pod_unit[rows]].min())
        if len(shapes) == 1 and ceiling == kep.bound and total == pods * lowest:
            shape = shapes[0]
            fewest = pod_by_pod.fewest_pods(
                inp.free,
                inp.pod_node[rows],
                inp.pod_requests[rows],
                shape.request,
                shape.mask,
                int((kep.assign >= 0).sum()),
            )
            if pods <= fewest:
                return None
    local = inp.pod_node[rows]
    removable = ctx.removable(rows, local)
    dom = np.arange(len(inp.node_names), dtype=np.int64)
    best: tuple[tuple[int, int, int, int, float], _Placement, BoolArray] | None = None
    for floor in ((0, ties.NONE[1]), (violations, ceiling)):
        plan = pod_by_pod.plan(inp.free, removable, pre.requests, masks, floor)
        placed = plan.assign >= 0
        if placed.sum() < (kep.assign >= 0).sum():
            continue
        taken = np.isin(inp.pod_unit[rows], plan.victims)
        remaining = inp.free + _sums(local[taken], inp.pod_requests[rows[taken]], len(dom))
        remaining -= _sums(plan.assign[placed], pre.requests[placed], len(dom))
        placement = _Placement(int(placed.sum()), plan.assign, remaining)
        score = _result(ctx, dom, plan.victims, {}, [], placement, None).score
        if score < kep.score and (best is None or score < best[0]):
            best = (score, placement, taken)
    if best is None:
        return None
    _, placement, taken = best
    return _reprieve(ctx, dom, shapes, rows[taken], local, placement, ceiling, rows, {}, [])


def _search_cluster(ctx: _Context, dom: IntArray, dom_rows: IntArray) -> _DomainResult | None:
    """A pod group's search over the whole cluster, in KEP-5710's order.

    1. Remove every candidate and place the preemptor: if fewer than `min_count` members fit, preemption
       cannot help.
    2. Reprieve the units whose eviction would violate a PodDisruptionBudget (counted most important
       first, as upstream), most important first, each only if the placement survives it, moving members
       to other nodes with room if need be (best effort).
    3. Binary-search the remaining candidates' distinct priorities for the lowest bound at which removing
       the candidates up to it still places as many members as step 1 (at the top, step 2's placement).
    4. Reprieve what is under the bound, most important first, the PDB-violating ones step 2 could not
       keep first (as upstream).

    Step 2 before step 3 keeps a PDB that a bound searched first would give up: the bound would leave
    out non-violating units above it before the PDB is considered (issue 20).
    """
    inp = ctx.inp
    pre = inp.preemptor
    rows = dom_rows[_by_priority(ctx.unit_priority[inp.pod_unit[dom_rows]])]
    local = _local(dom, inp.pod_node[rows], len(inp.node_names))
    free = inp.free[dom]
    shapes = [_Shape(s.members, s.request, s.mask[dom]) for s in ctx.shapes]
    everything = _place(
        shapes, len(pre.members), free, local, inp.pod_requests[rows], ctx.unit_priority[inp.pod_unit[rows]]
    )
    best = everything.placed
    if best < pre.min_count or best == 0:
        return None
    violating = _violating(ctx, rows)
    spared: list[Spared] = []
    if violating:
        ordered = sorted(violating, key=ctx.importance)
        room = _Room.of(ctx, dom, shapes, everything, ordered)
        kept = [u for u in ordered if room.give_back(u, move=True)]
        for unit in kept:
            info = inp.units[unit]
            spared.append(Spared(info.key, info.priority, SEARCH_PLUGIN, SpareReason.PDB, violating.pop(unit)))
        left = np.isin(inp.pod_unit[rows], kept, invert=True)
        rows, local = rows[left], local[left]
    row_priority = ctx.unit_priority[inp.pod_unit[rows]]
    levels = row_priority[np.flatnonzero(np.diff(row_priority, prepend=np.iinfo(np.int64).min))]  # sorted already
    ends = np.searchsorted(row_priority, levels, side="right")
    tried: dict[int, _Placement] = {len(levels) - 1: everything}

    def place(level: int) -> _Placement:
        """Place the preemptor with every remaining candidate of priority <= levels[level] removed (-1: none)."""
        if level not in tried:
            end = int(ends[level]) if level >= 0 else 0
            tried[level] = _place(
                shapes, len(pre.members), free, local[:end], inp.pod_requests[rows[:end]], row_priority[:end]
            )
        return tried[level]

    low, high = -1, len(levels) - 1
    while low < high:
        middle = (low + high) // 2
        if place(middle).placed >= best:
            high = middle
        else:
            low = middle + 1
    chosen = place(high)
    bound_priority = int(levels[high]) if high >= 0 else None
    end = int(ends[high]) if high >= 0 else 0
    victim_rows = rows[:end]
    return _reprieve(ctx, dom, shapes, victim_rows, local, chosen, bound_priority, rows, violating, spared)


def _by_priority(priority: IntArray) -> IntArray:
    """A stable argsort of these priorities. When they span a small range (priority classes are few), by
    their rank among the values present, which numpy sorts by radix: a stable sort of 100,000 int64 keys
    was ~3 ms of a gang's search."""
    if len(priority) == 0:
        return np.zeros(0, dtype=np.int64)
    low = int(priority.min())
    offset = priority - low
    span = int(offset.max()) + 1
    if span <= 1 << 20:
        rank = np.cumsum(np.bincount(offset, minlength=span) > 0) - 1
        if rank[-1] <= np.iinfo(np.uint16).max:
            return np.argsort(rank[offset].astype(np.uint16), kind="stable")
    return np.argsort(priority, kind="stable")


def _place(
    shapes: list[_Shape],
    members: int,
    free: IntArray,
    local: IntArray,
    requests: IntArray,
    priorities: IntArray,
) -> _Placement:
    """Greedy vectorised gang placement: first where room already is, then where removal frees the most
    cheaply (lowest highest removed priority, then fewest removed pods, then node index)."""
    nodes = len(free)
    removed = free + _sums(local, requests, nodes) if len(local) else free.copy()
    base = free.copy()
    top = np.full(nodes, np.iinfo(np.int64).min, dtype=np.int64)
    if len(local):
        np.maximum.at(top, local, priorities)
    count = np.bincount(local, minlength=nodes)
    cheapest = np.lexsort((np.arange(nodes), count, top))
    natural = np.arange(nodes)
    assign = np.full(members, -1, dtype=np.int64)
    for arena, order in ((base, natural), (removed, cheapest)):
        for shape in shapes:
            todo = shape.members[assign[shape.members] < 0]
            if len(todo) == 0:
                continue
            chosen, counts = _take(_capacity(arena, shape.request, shape.mask)[order], order, len(todo))
            if len(chosen) == 0:
                continue
            assign[todo[: int(counts.sum())]] = np.repeat(chosen, counts)
            delta = counts[:, None] * shape.request[None, :]
            base[chosen] -= delta
            removed[chosen] -= delta
    return _Placement(int((assign >= 0).sum()), assign, removed)


def _capacity(free: IntArray, request: IntArray, mask: BoolArray) -> IntArray:
    """How many copies of `request` fit on each node (0 where the static mask rejects the node)."""
    positive = request > 0
    if not positive.any():
        return np.where(mask, _UNLIMITED, 0)
    copies = (free[:, positive] // request[positive]).min(axis=1)
    return np.where(mask & (copies > 0), copies, 0)


def _take(ordered_capacity: IntArray, order: IntArray, wanted: int) -> tuple[IntArray, IntArray]:
    cumulative = np.cumsum(ordered_capacity)
    if len(cumulative) == 0 or cumulative[-1] == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    last = int(np.searchsorted(cumulative, wanted)) if cumulative[-1] >= wanted else len(cumulative) - 1
    counts = ordered_capacity[: last + 1].copy()
    overshoot = int(cumulative[last]) - wanted
    if overshoot > 0:
        counts[-1] -= overshoot
    keep = counts > 0
    return order[: last + 1][keep], counts[keep]


def _reprieve(
    ctx: _Context,
    dom: IntArray,
    shapes: list[_Shape],
    victim_rows: IntArray,
    local_all: IntArray,
    placement: _Placement,
    bound: int | None,
    candidate_rows: IntArray,
    violating: dict[int, str],
    spared: list[Spared],
) -> _DomainResult:
    """Assume the preemptor, then give back every unit that still fits, most important first.

    Units whose pods all sit on nodes no member uses are given back in bulk (they fit: those rows
    return to their pre-preemption values). The rest go one by one, PDB-violating ones first, each
    touching only its own nodes' rows; a unit that crowds out members comes back if they can move to
    room the units still to be decided leave free (`_Room.give_back`). Then every candidate on a node
    members use is accounted for: preempted, given back, above the bound, or never taken (a plan of
    `pod_by_pod` removes only what it needs).
    """
    inp = ctx.inp
    used = np.zeros(len(dom), dtype=bool)
    used[placement.assign[placement.assign >= 0]] = True
    victim_units = np.unique(inp.pod_unit[victim_rows])
    touching = np.unique(inp.pod_unit[candidate_rows[used[local_all]]])
    on_used = victim_units[np.isin(victim_units, touching)]
    bulk = victim_units[np.isin(victim_units, on_used, invert=True)]
    bulk_rows = victim_rows[np.isin(inp.pod_unit[victim_rows], bulk)]
    if len(bulk_rows):
        placement.remaining -= _sums(
            _local(dom, inp.pod_node[bulk_rows], len(inp.node_names)), inp.pod_requests[bulk_rows], len(dom)
        )
    ordered = ctx.by_importance(on_used.tolist())
    order = [u for u in ordered if u in violating] + [u for u in ordered if u not in violating]
    room = _Room.of(ctx, dom, shapes, placement, order)
    victims = [u for u in order if not room.give_back(u, move=True)]
    preempted = set(victims)
    keys, priority = inp.units.keys, ctx.unit_priority
    fits = "the preemptor still fits with it in place"
    for unit in order:
        if unit in preempted:
            continue
        if unit in violating:
            spared.append(Spared(keys[unit], int(priority[unit]), SEARCH_PLUGIN, SpareReason.PDB, violating[unit]))
        else:
            spared.append(Spared(keys[unit], int(priority[unit]), SEARCH_PLUGIN, SpareReason.REPRIEVED, fits))
    tried = preempted | set(order)
    for unit in ctx.by_importance(list(set(touching.tolist()) - tried)):
        value = int(priority[unit])
        if bound is not None and value > bound:
            message = f"priority {value} is above {bound}, the lowest bound at which the preemptor fits"
            spared.append(Spared(keys[unit], value, SEARCH_PLUGIN, SpareReason.ABOVE_BOUND, message))
        else:
            spared.append(Spared(keys[unit], value, SEARCH_PLUGIN, SpareReason.REPRIEVED, fits))
    return _result(ctx, dom, victims, violating, spared, placement, bound)


@dataclass(slots=True)
class _Room:
    """A placement's room on the domain's nodes while units are given back (`placement` changes in place).

    `pending` is what the units still to be decided take on each node: a member may only move onto room
    they would leave it (`give_back`). `roomy` is a superset of the nodes with room for some member:
    room only grows on nodes members leave, so `_displace` checks these few rows instead of scanning
    every node per attempt. Each unit's pod rows (domain-local node, request) are gathered once for all
    the units to give back: a gang's reprieval gives back ~320 of them one at a time.
    """

    ctx: _Context
    shapes: list[_Shape]
    placement: _Placement
    pending: IntArray
    roomy: set[int]
    spans: dict[int, tuple[int, int]]
    """Each unit's rows in `local` and `requests`."""
    local: IntArray
    local_list: list[int]
    requests: IntArray

    @staticmethod
    def of(ctx: _Context, dom: IntArray, shapes: list[_Shape], placement: _Placement, units: list[int]) -> _Room:
        """The room of `placement` while `units` are given back, in any order."""
        inp = ctx.inp
        node_local = np.full(len(inp.node_names), -1, dtype=np.int64)
        node_local[dom] = np.arange(len(dom))
        rows = np.concatenate([ctx.rows(u) for u in units]) if units else np.zeros(0, dtype=np.int64)
        at = np.array(units, dtype=np.int64)
        bounds = [0, *np.cumsum(ctx.unit_bounds[at + 1] - ctx.unit_bounds[at]).tolist()]
        spans = dict(zip(units, itertools.pairwise(bounds), strict=True))
        local = node_local[inp.pod_node[rows]]
        requests = inp.pod_requests[rows]
        inside = local >= 0
        pending = _sums(local[inside], requests[inside], len(dom))
        roomy: set[int] = set()
        for shape in shapes:
            roomy.update(np.flatnonzero(shape.mask & (placement.remaining >= shape.request).all(axis=1)).tolist())
        return _Room(ctx, shapes, placement, pending, roomy, spans, local, local.tolist(), requests)

    def give_back(self, unit: int, move: bool = False) -> bool:
        """Put the unit back if the members still fit where they are.

        With `move`, members it would crowd out may move to other nodes with room, and the unit goes
        back only if they all move: so a PDB-covered pod is not lost to where the placement happened to
        put a member, nor a more important unit to a less important one. A member only moves onto room
        that the units still to be decided would leave free; room that exists only while they are out
        would keep this unit at the price of several of them (issue 20)."""
        remaining = self.placement.remaining
        start, end = self.spans[unit]
        if end - start == 1:  # one pod: plain row updates
            node = self.local_list[start]
            if node < 0:
                return True
            request = self.requests[start]
            row = remaining[node]
            row -= request
            self.pending[node] -= request
            if (row >= 0).all() or (move and self._displace(np.array([node], dtype=np.int64))):
                return True
            row += request
            return False
        nodes, requests = self.local[start:end], self.requests[start:end]
        inside = nodes >= 0
        nodes, requests = nodes[inside], requests[inside]
        np.subtract.at(remaining, nodes, requests)
        np.subtract.at(self.pending, nodes, requests)
        touched = np.unique(nodes)
        if (remaining[touched] >= 0).all() or (move and self._displace(touched)):
            return True
        np.add.at(remaining, nodes, requests)
        return False

    def _displace(self, touched: IntArray) -> bool:
        placement = self.placement
        return _displace(
            self.ctx.member_shape, self.shapes, placement.assign, placement.remaining, self.pending, touched, self.roomy
        )


def _displace(
    member_shape: list[int],
    shapes: list[_Shape],
    assign: IntArray,
    remaining: IntArray,
    pending: IntArray,
    nodes: IntArray,
    roomy: set[int],
) -> bool:
    """Move members off the overfull `nodes` to nodes with room beyond `pending`; on failure undo every move.

    `roomy` is a superset of the nodes with room for some member: room only grows on nodes members
    leave, so checking these few rows replaces a scan of every node per attempt.
    """
    excluded = set(nodes.tolist())
    if not roomy - excluded:
        return False
    shape_of = [shapes[index] for index in member_shape]
    moved: list[tuple[int, int]] = []
    for node in nodes.tolist():
        for member in np.flatnonzero(assign == node)[::-1].tolist():
            if (remaining[node] >= 0).all():
                break
            remaining[node] += shape_of[member].request
            assign[member] = -1
            moved.append((member, node))
    targets = np.array(sorted(roomy - excluded), dtype=np.int64)
    placed: list[tuple[int, int]] = []
    feasible = bool((remaining[nodes] >= 0).all()) and len(targets) > 0
    for member, _ in moved if feasible else []:
        shape = shape_of[member]
        room = shape.mask[targets] & (remaining[targets] - pending[targets] >= shape.request).all(axis=1)
        if not room.any():
            feasible = False
            break
        target = int(targets[int(np.argmax(room))])
        remaining[target] -= shape.request
        assign[member] = target
        placed.append((member, target))
    if feasible and moved:
        roomy.update(excluded)
        return True
    for back, where in placed:
        remaining[where] += shape_of[back].request
    for back, where in moved:
        remaining[where] -= shape_of[back].request
        assign[back] = where
    return False


def _importance(ctx: _Context, unit: int) -> Importance:
    info = ctx.inp.units[unit]
    return Importance(info.key, info.priority, info.whole_group, len(ctx.rows(unit)), info.started_at)


def _violating(ctx: _Context, rows: IntArray) -> dict[int, str]:
    """Units of these candidate rows whose eviction would exceed a PDB's allowance when every candidate
    goes, counted in importance order (upstream's `filterPodsWithPDBViolation`). Only units with a pod
    some PDB selects are sorted: the others can neither violate nor use up an allowance."""
    inp = ctx.inp
    if not inp.pdbs:
        return {}
    covered = rows[np.isin(rows, ctx.pdb_rows)]
    allowed = [pdb.allowed for pdb in inp.pdbs]
    out: dict[int, str] = {}
    for unit in ctx.by_importance(np.unique(inp.pod_unit[covered]).tolist()):
        for row in ctx.rows(unit).tolist():
            for index in ctx.pod_pdbs.get(row, ()):
                allowed[index] -= 1
                if allowed[index] < 0 and unit not in out:
                    pdb = inp.pdbs[index]
                    out[unit] = f"evicting it would exceed PodDisruptionBudget {pdb.key} (allows {pdb.allowed})"
    return out


def _result(
    ctx: _Context,
    dom: IntArray,
    victims: list[int],
    violating: dict[int, str],
    spared: list[Spared],
    placement: _Placement,
    bound: int | None,
) -> _DomainResult:
    inp = ctx.inp
    chosen = np.array(victims, dtype=np.int64)
    sizes = ctx.unit_bounds[chosen + 1] - ctx.unit_bounds[chosen]
    priorities = ctx.unit_priority[chosen]
    whole = inp.units.whole_group[chosen]
    reasons: dict[int, tuple[VictimReason, str]] = {}
    for unit, size, priority, group in zip(victims, sizes.tolist(), priorities.tolist(), whole.tolist(), strict=True):
        if group and size > 1:
            reasons[unit] = (
                VictimReason.WHOLE_GROUP,
                f"disruptionMode PodGroup: its {size} pods are preempted together",
            )
        else:
            why = f"priority {priority} is lower than the preemptor's {inp.preemptor.priority}"
            reasons[unit] = (VictimReason.LOWER_PRIORITY, why)
    top = int(priorities.max()) if len(chosen) else int(np.iinfo(np.int64).min)
    starts = inp.units.started_at[chosen[priorities == top]]
    earliest = float(np.nanmin(starts)) if len(starts) and not np.isnan(starts).all() else float("inf")
    violations = _violations(ctx, victims)
    return _DomainResult(
        victims,
        reasons,
        spared,
        placement.assign,
        dom,
        violations,
        {u: why for u, why in violating.items() if u in reasons},
        (violations, top, int((sizes * priorities).sum()), int(sizes.sum()), -earliest),
        bound,
    )


def _violations(ctx: _Context, victims: list[int]) -> int:
    """PodDisruptionBudget violations of a victim set: per PDB, the pods it selects preempted beyond its
    allowance (kube-scheduler's first ranking criterion, counted on the set itself)."""
    inp = ctx.inp
    if not inp.pdbs or not victims:
        return 0
    used = [0] * len(inp.pdbs)
    rows = np.concatenate([ctx.rows(u) for u in victims])
    for row in rows[np.isin(rows, ctx.pdb_rows)].tolist():
        for index in ctx.pod_pdbs[row]:
            used[index] += 1
    return sum(max(0, n - pdb.allowed) for n, pdb in zip(used, inp.pdbs, strict=True))


def _unschedulable_message(ctx: _Context, rows: IntArray) -> str:
    pre = ctx.inp.preemptor
    if not pre.is_group:
        return "no node fits the pod even after preempting every lower-priority unit on it"
    if ctx.inp.domains:
        return _domains_message(ctx, rows)
    placed = _everything_removed(ctx, np.arange(len(ctx.inp.node_names), dtype=np.int64), rows)
    return (
        f"removing every lower-priority unit places {placed} of {len(pre.members)} members; "
        f"the gang needs {pre.min_count}"
    )


DOMAINS_NAMED = 4
"""Domains named in a message (the closest); the rest are counted."""


def _everything_removed(ctx: _Context, dom: IntArray, rows: IntArray) -> int:
    """How many members the search's first step places in `dom` (sorted node indices) with every candidate of
    `rows` (running there) removed."""
    inp = ctx.inp
    shapes = [_Shape(s.members, s.request, s.mask[dom]) for s in ctx.shapes]
    local = _local(dom, inp.pod_node[rows], len(inp.node_names))
    requests, priorities = inp.pod_requests[rows], ctx.unit_priority[inp.pod_unit[rows]]
    return _place(shapes, len(inp.preemptor.members), inp.free[dom], local, requests, priorities).placed


def _domains_message(ctx: _Context, rows: IntArray) -> str:
    """Why no topology domain can take the group: how many members each would place with every lower-priority
    unit in it removed, the closest first (a few named, the rest counted)."""
    inp, pre = ctx.inp, ctx.inp.preemptor
    at = inp.pod_node[rows]
    found = [
        (_everything_removed(ctx, domain.nodes, rows[np.isin(at, domain.nodes)]), domain.name) for domain in inp.domains
    ]
    found.sort(key=lambda f: -f[0])
    named = [f"{name}: {placed} of {pre.min_count}" for placed, name in found[:DOMAINS_NAMED]]
    if len(found) > DOMAINS_NAMED:
        named.append(f"{len(found) - DOMAINS_NAMED} more, none closer")
    return (
        f"no topology domain can take {pre.min_count} members even with every lower-priority unit in it removed "
        f"({'; '.join(named)})"
    )


def _pdb_elsewhere(ctx: _Context, chosen: _DomainResult, results: list[_DomainResult]) -> list[Spared]:
    """Units a PDB kept out of the other domains' solutions (a lone pod's nodes not chosen)."""
    names = ctx.inp.node_names
    spared: dict[int, Spared] = {}
    for other in results:
        if other is chosen:
            continue
        for unit, why in other.violating.items():
            if unit not in chosen.reasons and unit not in spared:
                info = ctx.inp.units[unit]
                where = ", ".join(names[int(n)] for n in chosen.dom[:3].tolist())
                message = f"{why}; {where} was chosen instead"
                spared[unit] = Spared(info.key, info.priority, SEARCH_PLUGIN, SpareReason.PDB, message)
    return [spared[u] for u in sorted(spared, key=ctx.importance)]


def _decision(
    ctx: _Context,
    result: _DomainResult,
    protected: list[Spared],
    domains: tuple[tuple[DomainCost, ...], int] = ((), 0),
) -> Decision:
    inp = ctx.inp
    pre = inp.preemptor
    names = inp.node_names
    victims = []
    keys, priorities = inp.units.keys, inp.units.priority
    for unit in ctx.by_importance(result.victims):
        rows = ctx.rows(unit)
        reason, why = result.reasons[unit]
        victims.append(
            Victim(
                keys[unit],
                tuple(inp.pod_keys[r] for r in rows.tolist()),
                int(priorities[unit]),
                tuple(sorted({names[n] for n in inp.pod_node[rows].tolist()})),
                reason,
                why,
            )
        )
    nominations = {}
    pending = {}
    for member, local in enumerate(result.assign.tolist()):
        if local >= 0:
            nominations[pre.members[member]] = names[int(result.dom[local])]
        else:
            pending[pre.members[member]] = (
                "no room for this member unless a unit of equal or higher priority, or a protected one, is preempted"
            )
    kind = "pod group" if pre.is_group else "pod"
    if victims:
        placed = f"{len(nominations)} member(s) of the pod group" if pre.is_group else "the pod"
        message = f"preempting {len(victims)} unit(s) to place {placed}"
    else:
        message = f"the {kind} fits without preempting anything"
    if result.name:
        message += f" in {result.name}"
    until = min((s.until for s in protected if s.until is not None), default=None) if pending else None
    return Decision(
        preemptor=pre.key,
        preemptor_priority=pre.priority,
        outcome=Outcome.PREEMPT,
        message=message,
        victims=tuple(victims),
        spared=tuple(protected + result.spared),
        nominations=nominations,
        pending=pending,
        pdb_violations=result.violations,
        until=until,
        bound=result.bound,
        domains=domains[0],
        domains_passed=domains[1],
    )
