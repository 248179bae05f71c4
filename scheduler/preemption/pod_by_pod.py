"""Pod by pod: a pod group's members placed one at a time, each where its own victims cost least.

kube-scheduler preempts for a basic group one pod at a time: `SelectVictimsOnNode` on every node, then
`pickOneNodeForPreemption` (fewest PDB violations, lowest highest priority, smallest sum of priorities,
fewest pods). The search builds this plan for every pod group beside the KEP's cluster-wide one and
keeps the cheaper (`search`). Each member goes on the node whose offer ranks lowest, the victims it
takes added to those already taken for earlier members: a node's second member pays for what its first
left in place, and a unit taken for one member is gone for the next, so a `disruptionMode: PodGroup`
unit taken on one node frees its pods' room on the others.

A node's offer weighs placing 1, 2, ... of the members left there at once: the victims k members take
(kube-scheduler's selection in the cheapest order of its ties, `ties`, with the PDB allowances earlier
victims left), their sum of priorities and pods shared by the members that fit once they are gone, on
that node or, for a `PodGroup`-mode victim, on the others it frees, at most the members left. A 4-CPU
victim that fits two 2-CPU members costs each half of it and beats a 2-CPU victim of the same priority
that fits one (issue 20); the first member takes it, the second finds the room free. A floor counts
every set up to some PDB violations and highest priority as equal (`plan`).

Like kube-scheduler (`minCandidateNodesAbsolute`), it weighs a sample of the nodes: the `SAMPLE` (or
twice the members, if more) where one member would cost least by a vectorised estimate, the same
greedy run on every node at once without the PDB and tie refinements. `fewest_pods` bounds what any
placement takes, so the search can tell when this plan cannot beat the other. Pure: arrays in, a plan
out.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from scheduler.framework.snapshot import BoolArray, IntArray
from scheduler.preemption import ties

SAMPLE = 100
"""Nodes weighed at least (kube-scheduler's `minCandidateNodesAbsolute`)."""

Share = tuple[int, int, float, float]
"""A node's price for one more member: PDB violations, highest priority, sum and pods per member it fits."""


@dataclass(frozen=True, slots=True)
class Removable:
    """The units that may go, as items: one per (unit, node) with the unit's request on that node.

    `rank` orders units most important first (`ordering.importance_key`); `priority` and `pods` (all of
    the unit's pods, which go together) are per item. `covered` maps a unit to the PDBs selecting its
    pods (index, pods selected); `allowed` is each PDB's allowance.
    """

    node: IntArray
    unit: IntArray
    request: IntArray
    rank: IntArray
    priority: IntArray
    pods: IntArray
    covered: dict[int, tuple[tuple[int, int], ...]] = field(default_factory=dict)
    allowed: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Plan:
    """Member -> node (-1: no room for it), and the units taken, in the order they were taken."""

    assign: IntArray
    victims: list[int]


def plan(
    free: IntArray,
    removable: Removable,
    requests: IntArray,
    masks: BoolArray,
    floor: tuple[int, int] = (0, ties.NONE[1]),
) -> Plan:
    """Place every member (rows of `requests`, `masks`) in turn where its own victims cost least; `free`
    is each node's room with every running pod in place. `floor` (PDB violations, priority): sets up to
    that many violations and that highest priority rank as equal. When the whole set will reach them
    anyway, a member should not pay in pods and priorities for keeping its own lower; without a floor,
    each member is as kube-scheduler would place it."""
    return _Planner(free.copy(), removable, floor).run(requests, masks)


@dataclass(frozen=True, slots=True)
class _Found:
    """A node's best offer for the next members: the price per member, how many members it counted
    (fewer left than that: ask again), and the units it takes."""

    share: Share
    reach: int
    taken: list[int]


class _Planner:
    """The plan's state: each node's room with the victims so far gone and the members so far placed,
    and the items still in place. Items are read as Python lists: a node has a few, and the per-item
    work is a handful of integer comparisons."""

    def __init__(self, free: IntArray, removable: Removable, floor: tuple[int, int]) -> None:
        self.free = free
        self.items = removable
        self.allowed = list(removable.allowed)
        self.alive = [True] * len(removable.unit)
        self.request: list[list[int]] = removable.request.tolist()
        self.unit: list[int] = removable.unit.tolist()
        self.node: list[int] = removable.node.tolist()
        self.priority: list[int] = removable.priority.tolist()
        self.pods: list[int] = removable.pods.tolist()
        by_node = np.lexsort((removable.rank, removable.node))
        self.by_node: list[int] = by_node.tolist()
        self.node_starts = np.searchsorted(removable.node[by_node], np.arange(len(free) + 1)).tolist()
        by_unit = np.argsort(removable.unit, kind="stable")
        self.by_unit: list[int] = by_unit.tolist()
        self.units = removable.unit[by_unit]
        self.victims: list[int] = []
        self.least, self.top = floor

    def run(self, requests: IntArray, masks: BoolArray) -> Plan:
        assign = np.full(len(requests), -1, dtype=np.int64)
        keys = [(requests[m].tobytes(), masks[m].tobytes()) for m in range(len(requests))]
        shape: tuple[bytes, bytes] | None = None
        sample: set[int] = set()
        costs: dict[int, _Found] = {}
        stale: set[int] = set()
        request: list[int] = []
        for member in range(len(requests)):
            left = keys[member:].count(keys[member])
            if keys[member] != shape:
                shape, request = keys[member], requests[member].tolist()
                sample = set(self._sample(requests[member], masks[member], left))
                costs, stale = {}, set(sample)
            stale |= {n for n, found in costs.items() if found.reach > left}
            for n in stale & sample:
                found = self._evaluate(n, request, left)
                if found is None:
                    costs.pop(n, None)
                else:
                    costs[n] = found
            if not costs:
                stale = set()
                continue
            node = min(costs, key=lambda n: (costs[n].share, n))
            taken = costs[node].taken
            assign[member] = node
            self.free[node] -= requests[member]
            top, stale = self.top, {node}
            for unit in taken:
                stale |= self._take(unit)
            if self.top != top or any(unit in self.items.covered for unit in taken):
                stale |= sample  # a higher top ranks every node anew; an allowance changes PDB-violating units
        return Plan(assign, self.victims)

    @property
    def violations(self) -> int:
        """The PDB violations of the victims so far: pods taken beyond each allowance."""
        return sum(max(0, -left) for left in self.allowed)

    def _take(self, unit: int) -> set[int]:
        """Preempt `unit`: its room comes back on every node it holds; those nodes are returned."""
        low, high = self._span(unit)
        items = self.by_unit[low:high]
        for item in items:
            self.alive[item] = False
            self.free[self.node[item]] += self.items.request[item]
        for pdb, pods in self.items.covered.get(unit, ()):
            self.allowed[pdb] -= pods
        self.victims.append(unit)
        self.top = max(self.top, self.priority[items[0]])
        return {self.node[item] for item in items}

    def _evaluate(self, node: int, request: list[int], left: int) -> _Found | None:
        """The node's best offer: for each number of members k that fits there (at most `left`), the
        victims k members take, their price shared by the members that fit once they are gone; None
        when not even one member fits."""
        alive, need = self.alive, self.request
        items = [i for i in self.by_node[self.node_starts[node] : self.node_starts[node + 1]] if alive[i]]
        base = self.free[node].tolist()
        for item in items:
            base = [have + want for have, want in zip(base, need[item], strict=True)]
        covered = self.items.covered
        units = [
            ties.Unit(tuple(need[i]), self.priority[i], self.pods[i], covered.get(self.unit[i], ())) for i in items
        ]
        best: _Found | None = None
        for copies in range(1, left + 1):
            room = [have - copies * want for have, want in zip(base, request, strict=True)]
            if any(have < 0 for have in room):
                break
            outcome = ties.cheapest(room, units, self.allowed)
            for unit, back in zip(units, outcome.kept, strict=True):
                if back:
                    room = [have - want for have, want in zip(room, unit.request, strict=True)]
            taken = [self.unit[item] for item, back in zip(items, outcome.kept, strict=True) if not back]
            fits = copies + _copies(room, request) + self._room_elsewhere(node, taken, request)
            members = min(fits, left)
            violations, top, total, pods = outcome.cost
            violations = max(self.least, self.violations + violations)
            share = (violations, max(top, self.top), total / members, pods / members)
            if best is None or share < best.share:
                best = _Found(share, max(copies, fits), taken)
        return best

    def _room_elsewhere(self, node: int, taken: list[int], request: list[int]) -> int:
        """Members that fit on other nodes once `taken` are gone and did not before (a `PodGroup`-mode
        unit frees the room of its pods on every node)."""
        freed: dict[int, list[int]] = {}
        for unit in taken:
            low, high = self._span(unit)
            for item in self.by_unit[low:high]:
                where = self.node[item]
                if where != node:
                    have = freed.setdefault(where, [0] * len(request))
                    freed[where] = [a + b for a, b in zip(have, self.request[item], strict=True)]
        more = 0
        for where, extra in freed.items():
            room = self.free[where].tolist()
            after = [have + add for have, add in zip(room, extra, strict=True)]
            more += _copies(after, request) - _copies(room, request)
        return more

    def _span(self, unit: int) -> tuple[int, int]:
        """The slice of `by_unit` holding the unit's items."""
        low, high = np.searchsorted(self.units, [unit, unit + 1]).tolist()
        return int(low), int(high)

    def _sample(self, request: IntArray, mask: BoolArray, members: int) -> list[int]:
        """The nodes where one member would cost least, by a greedy reprieval on every node at once."""
        nodes = len(self.free)
        alive = np.flatnonzero(self.alive)
        node, rank = self.items.node[alive], self.items.rank[alive]
        room = self.free.copy()
        np.add.at(room, node, self.items.request[alive])
        left = room - request
        feasible = mask & (left >= 0).all(axis=1)
        order = alive[np.lexsort((rank, node))]
        starts = np.searchsorted(self.items.node[order], np.arange(nodes))
        position = np.arange(len(order)) - starts[self.items.node[order]]
        by_position = order[np.argsort(position, kind="stable")]
        cuts = np.searchsorted(np.sort(position), np.arange(int(position.max(initial=-1)) + 2))
        total = np.zeros(nodes, dtype=np.int64)
        pods = np.zeros(nodes, dtype=np.int64)
        top = np.full(nodes, ties.NONE[1], dtype=np.int64)
        for at in range(len(cuts) - 1):
            items = by_position[cuts[at] : cuts[at + 1]]
            where = self.items.node[items]
            fits = (left[where] >= self.items.request[items]).all(axis=1)
            left[where[fits]] -= self.items.request[items[fits]]
            out = items[~fits]
            total[where[~fits]] += self.items.priority[out] * self.items.pods[out]
            pods[where[~fits]] += self.items.pods[out]
            top[where[~fits]] = np.maximum(top[where[~fits]], self.items.priority[out])
        positive = request > 0
        share = np.ones(nodes, dtype=np.int64)
        if positive.any():
            share = np.minimum(share + np.maximum((left[:, positive] // request[positive]).min(axis=1), 0), members)
        ranked = np.lexsort((np.arange(nodes), pods / share, total / share, np.maximum(top, self.top)))
        ranked = ranked[feasible[ranked]]
        limit: int = max(SAMPLE, 2 * members)
        sample: list[int] = ranked[:limit].tolist()
        return sample


def _copies(room: list[int], request: list[int]) -> int:
    """How many `request`s fit in `room` (none when some resource is short already)."""
    if any(have < 0 for have in room):
        return 0
    return min((have // want for have, want in zip(room, request, strict=True) if want > 0), default=0)


def fewest_pods(
    free: IntArray, node: IntArray, requests: IntArray, request: IntArray, mask: BoolArray, members: int
) -> int:
    """A lower bound on the pods any placement of `members` copies of `request` must preempt, taking only
    these rows (pods on `node`): on each node, the pods of each resource's largest requests first, and the
    cheapest node for each copy, as if copies could take the cheapest step of any node in any order."""
    nodes = len(free)
    inside = mask[node]
    node, requests = node[inside], requests[inside]
    if not len(node):
        return 0
    positive = np.flatnonzero(request > 0)
    room = free + _sums(node, requests, nodes)
    copies = int(((room[:, positive] // request[positive]).min(axis=1) * mask).max(initial=0))
    per_node = np.bincount(node, minlength=nodes)
    width = int(per_node.max())
    never = width + 1
    starts = np.cumsum(per_node) - per_node
    needed = np.zeros((min(copies, members) + 1, nodes), dtype=np.int64)
    for resource in positive.tolist():
        order = np.lexsort((-requests[:, resource], node))
        column = np.arange(len(order)) - starts[node[order]]
        sizes = np.zeros((nodes, width), dtype=np.int64)
        sizes[node[order], column] = requests[order, resource]
        freed = np.concatenate([np.zeros((nodes, 1), dtype=np.int64), np.cumsum(sizes, axis=1)], axis=1)
        for copy in range(1, len(needed)):
            deficit = copy * request[resource] - free[:, resource]
            # `freed` rises along each row: the pods needed are the steps still short (never: all of them).
            count = (freed < deficit[:, None]).sum(axis=1)
            needed[copy] = np.maximum(needed[copy], count)
    steps = np.where(needed[1:] >= never, never, np.diff(needed, axis=0))[:, mask].ravel()
    return int(np.sort(steps)[:members].sum())


def _sums(node: IntArray, requests: IntArray, nodes: int) -> IntArray:
    out = np.zeros((nodes, requests.shape[1]), dtype=np.int64)
    np.add.at(out, node, requests)
    return out
