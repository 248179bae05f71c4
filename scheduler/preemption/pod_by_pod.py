"""Pod by pod: a pod group's members placed one at a time, each where its own victims cost least.

kube-scheduler preempts for a basic group one pod at a time: `SelectVictimsOnNode` on every node, then
`pickOneNodeForPreemption` (fewest PDB violations, lowest highest priority, smallest sum of priorities,
fewest pods). The search builds this plan for every pod group beside the KEP's cluster-wide one and
keeps the cheaper (`search`). Each member goes on the node where the victims it needs, added to those
already taken for earlier members, rank lowest. A node's second member pays for what its first left in
place, and a unit taken for one member is gone for the next, so a `disruptionMode: PodGroup` unit taken
on one node frees its pods' room on the others. Victims that make room for several members cost each a
share: the sum of priorities and the pods are divided by the members that fit on the node once they are
gone, at most those still to place (a 4-CPU victim that fits two 2-CPU members costs each half of it,
and beats a 2-CPU victim of the same priority that fits one; issue 20). On a node the victims are
kube-scheduler's selection in the cheapest order of its ties (`ties`), the PDB allowances being what
earlier members' victims left.

Like kube-scheduler (`minCandidateNodesAbsolute`), it weighs a sample of the nodes: the `SAMPLE` (or
twice the members, if more) where one member would cost least by a vectorised estimate, the same
greedy run on every node at once without the PDB and tie refinements. `fewest_pods` bounds what any
placement takes, so the search can tell when this plan cannot beat the other. Pure: arrays in, a plan
out.
"""

from __future__ import annotations

import heapq
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


def plan(free: IntArray, removable: Removable, requests: IntArray, masks: BoolArray) -> Plan:
    """Place every member (rows of `requests`, `masks`) in turn where its own victims cost least; `free`
    is each node's room with every running pod in place."""
    return _Planner(free.copy(), removable).run(requests, masks)


@dataclass(frozen=True, slots=True)
class _Found:
    """What one more member costs on a node: its victims' ranking, how many members fit once they are
    gone (this one included), and the units taken."""

    cost: ties.Cost
    fits: int
    taken: list[int]


class _Planner:
    """The plan's state: each node's room with the victims so far gone and the members so far placed,
    and the items still in place. Items are read as Python lists: a node has a few, and the per-item
    work is a handful of integer comparisons."""

    def __init__(self, free: IntArray, removable: Removable) -> None:
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
        self.top = ties.NONE[1]

    def run(self, requests: IntArray, masks: BoolArray) -> Plan:
        assign = np.full(len(requests), -1, dtype=np.int64)
        keys = [(requests[m].tobytes(), masks[m].tobytes()) for m in range(len(requests))]
        shape: tuple[bytes, bytes] | None = None
        costs: dict[int, _Found] = {}
        heap: list[tuple[Share, int]] = []
        request: list[int] = []
        for member in range(len(requests)):
            left = keys[member:].count(keys[member])
            if keys[member] != shape:
                shape, request = keys[member], requests[member].tolist()
                sample = self._sample(requests[member], masks[member], left)
                costs = {n: found for n in sample if (found := self._evaluate(n, request)) is not None}
                heap = self._heap(costs, left)
            elif left < max((found.fits for found in costs.values()), default=0):
                heap = self._heap(costs, left)  # fewer members left than some node fits: shares grow
            node = self._cheapest(heap, costs, left)
            if node is None:
                continue
            taken = costs[node].taken
            assign[member] = node
            self.free[node] -= requests[member]
            top, changed = self.top, {node}
            for unit in taken:
                changed.update(self._take(unit))
            if any(unit in self.items.covered for unit in taken):
                changed.update(costs)  # an allowance changed: every node's PDB-violating units may differ
            for n in changed & costs.keys():
                found = self._evaluate(n, request)
                if found is None:
                    del costs[n]
                else:
                    costs[n] = found
                    heapq.heappush(heap, (self._share(found, left - 1), n))
            if self.top != top:
                heap = self._heap(costs, left - 1)  # a higher top ties every node whose own victims are below it
        return Plan(assign, self.victims)

    def _heap(self, costs: dict[int, _Found], left: int) -> list[tuple[Share, int]]:
        heap = [(self._share(found, left), n) for n, found in costs.items()]
        heapq.heapify(heap)
        return heap

    def _cheapest(self, heap: list[tuple[Share, int]], costs: dict[int, _Found], left: int) -> int | None:
        """The node ranking lowest, then lowest-numbered; entries a later evaluation replaced are dropped."""
        while heap:
            key, node = heap[0]
            if node in costs and key == self._share(costs[node], left):
                return node
            heapq.heappop(heap)
        return None

    def _share(self, found: _Found, left: int) -> Share:
        """A node's price for the next member: the victims so far plus these, only the highest priority not
        adding up, the sum and the pods shared by the members they make room for (at most those left)."""
        violations, top, total, pods = found.cost
        members = max(1, min(found.fits, left))
        return (violations, max(top, self.top), total / members, pods / members)

    def _take(self, unit: int) -> set[int]:
        """Preempt `unit`: its room comes back on every node it holds; those nodes are returned."""
        low, high = np.searchsorted(self.units, [unit, unit + 1]).tolist()
        items = self.by_unit[low:high]
        for item in items:
            self.alive[item] = False
            self.free[self.node[item]] += self.items.request[item]
        for pdb, pods in self.items.covered.get(unit, ()):
            self.allowed[pdb] -= pods
        self.victims.append(unit)
        self.top = max(self.top, self.priority[items[0]])
        return {self.node[item] for item in items}

    def _evaluate(self, node: int, request: list[int]) -> _Found | None:
        """The victims one more member takes on `node`, or None when it cannot fit there."""
        alive, need = self.alive, self.request
        items = [i for i in self.by_node[self.node_starts[node] : self.node_starts[node + 1]] if alive[i]]
        room = [have - want for have, want in zip(self.free[node].tolist(), request, strict=True)]
        for item in items:
            room = [have + want for have, want in zip(room, need[item], strict=True)]
        if any(have < 0 for have in room):
            return None
        covered = self.items.covered
        units = [
            ties.Unit(tuple(need[i]), self.priority[i], self.pods[i], covered.get(self.unit[i], ())) for i in items
        ]
        outcome = ties.cheapest(room, units, self.allowed)
        for unit, back in zip(units, outcome.kept, strict=True):
            if back:
                room = [have - want for have, want in zip(room, unit.request, strict=True)]
        fits = 1 + min((have // want for have, want in zip(room, request, strict=True) if want > 0), default=0)
        taken = [self.unit[item] for item, back in zip(items, outcome.kept, strict=True) if not back]
        return _Found(outcome.cost, fits, taken)

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
    width = int(np.bincount(node, minlength=nodes).max())
    never = width + 1
    needed = np.zeros((min(copies, members) + 1, nodes), dtype=np.int64)
    for resource in positive.tolist():
        order = np.lexsort((-requests[:, resource], node))
        starts = np.searchsorted(node[order], np.arange(nodes))
        column = np.arange(len(order)) - starts[node[order]]
        sizes = np.zeros((nodes, width), dtype=np.int64)
        sizes[node[order], column] = requests[order, resource]
        freed = np.concatenate([np.zeros((nodes, 1), dtype=np.int64), np.cumsum(sizes, axis=1)], axis=1)
        for copy in range(1, len(needed)):
            deficit = copy * request[resource] - free[:, resource]
            enough = freed >= deficit[:, None]
            count = np.where(enough.any(axis=1), enough.argmax(axis=1), never)
            needed[copy] = np.maximum(needed[copy], count)
    steps = np.where(needed[1:] >= never, never, np.diff(needed, axis=0))[:, mask].ravel()
    return int(np.sort(steps)[:members].sum())


def _sums(node: IntArray, requests: IntArray, nodes: int) -> IntArray:
    out = np.zeros((nodes, requests.shape[1]), dtype=np.int64)
    np.add.at(out, node, requests)
    return out
