"""InterPodAffinity: required pod affinity and anti-affinity, the pod's own and the running pods' against it.

Source: kube-scheduler `plugins/interpodaffinity/filtering.go`. A node is rejected, in this order, when:
- for some required affinity term of the pod, no pod matching every term runs in the node's domain, or the node
  lacks a term's topology label (UnschedulableAndUnresolvable: removing pods cannot help); a pod whose terms
  match itself may go anywhere the labels are while no pod in the cluster matches them, so the first of a set
  that wants to be together is not stuck;
- a pod matching one of its required anti-affinity terms runs in the node's domain;
- a running pod there holds a required anti-affinity term the pod matches.
The last two are Unschedulable: preemption may remove the pods in the way. A term looks in the namespaces it
lists and in those whose labels its `namespaceSelector` matches (`framework/namespaces.py`), in its owner's when
it has neither. The counts are per-node columns kept by row (`framework/pod_counts.py`) and summed per domain
(`framework/topology.py`); members of a gang placed in the same cycle are on their rows already, so a gang's
anti-affinity against itself spreads it.

Preemption, as kube-scheduler's, removes only pods on the node it considers: a node whose domain holds a
conflicting pod elsewhere is out, the conflicting pods on the node are a column the search must clear
(`preemption_terms`), and an affinity counts only the pods that are not candidates, so no victim is ever the pod
a preemptor needs beside it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import chain, repeat

import numpy as np

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import Exclusion, NodeVerdict, PreemptionTerms
from scheduler.framework.namespaces import Namespaces
from scheduler.framework.normalize import MAX_NODE_SCORE
from scheduler.framework.pod_counts import Counted, counted, pod_counts
from scheduler.framework.pod_info import PodInfo
from scheduler.framework.pod_terms import (
    HeldTerm,
    PodTerm,
    held_terms,
    preferred_terms,
    required_affinity,
    required_anti_affinity,
)
from scheduler.framework.snapshot import BoolArray, IntArray, RowsSeen, Snapshot
from scheduler.framework.status import Code
from scheduler.framework.topology import domains

AFFINITY = "node(s) didn't match pod affinity rules"
ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"


@dataclass(slots=True)
class _Holders:
    """The running pods' terms towards later pods: per term, how many pods on each node hold it, and per node
    which pods hold which terms (what preemption must remove)."""

    seen: RowsSeen
    namespaces: Namespaces
    """What the terms were resolved against: relabelled namespaces make other terms, and a new index."""
    rows: list[tuple[tuple[str, tuple[HeldTerm, ...]], ...]]
    counts: dict[HeldTerm, IntArray]
    keys: dict[HeldTerm, dict[int, list[str]]]
    """Per term, per node row, the pods holding it."""
    required: int = 0
    """How many of the terms in `counts` are required anti-affinity (weight 0): none, and a pod without pod
    affinity of its own has nothing to be filtered for (upstream's PreFilter Skip)."""

    def add(self, held: HeldTerm, row: int, key: str) -> None:
        counts = self.counts.get(held)
        if counts is None:
            counts = self.counts[held] = np.zeros(len(self.rows), dtype=np.int64)
            self.keys[held] = {}
            self.required += held[0] == 0
        counts[row] += 1
        self.keys[held].setdefault(row, []).append(key)

    def remove(self, held: HeldTerm, row: int) -> None:
        counts = self.counts[held]
        counts[row] -= 1
        self.keys[held].pop(row, None)
        if not counts.any():
            del self.counts[held], self.keys[held]
            self.required -= held[0] == 0


def _holders(snapshot: Snapshot) -> _Holders:
    """The running pods' terms, brought up to date: one walk over the pods when the node set or the namespaces'
    labels change, then only the rows that changed, as `pod_counts` keeps its columns. Asked for every pod a
    pass places, so the common case, a row or none changed and no pod in it with pod affinity, costs little."""
    slot = ("InterPodAffinity", "holders")
    kept = snapshot.indexes.get(slot)
    namespaces = snapshot.namespaces
    changed: list[int]
    if isinstance(kept, _Holders) and len(kept.rows) == len(snapshot.running) and kept.namespaces is namespaces:
        changed = kept.seen.changed(snapshot)
        if not changed:
            return kept
    else:
        nodes = len(snapshot.running)
        seen = RowsSeen(snapshot.versions.copy(), snapshot.row_log, len(snapshot.row_log))
        kept = _Holders(seen, namespaces, [()] * nodes, {}, {})
        snapshot.indexes[slot] = kept
        changed = list(range(nodes))
    rows = kept.rows
    for row in changed:
        pods = snapshot.running[row]
        if not rows[row] and not any(p.pod_affinity for p in pods):
            continue  # most rows: no pod with pod affinity, before or now
        for _, terms in rows[row]:
            for held in terms:
                kept.remove(held, row)
        rows[row] = tuple((p.key, terms) for p in pods if p.pod_affinity and (terms := held_terms(p.pod, namespaces)))
        for key, terms in rows[row]:
            for held in terms:
                kept.add(held, row, key)
    return kept


def _counted(snapshot: Snapshot, term: PodTerm) -> Counted:
    return counted(snapshot, ("InterPodAffinity", term), term.matches)


def _matching(snapshot: Snapshot, term: PodTerm) -> IntArray:
    return _counted(snapshot, term).counts


def _matching_all(snapshot: Snapshot, terms: tuple[PodTerm, ...]) -> IntArray:
    return pod_counts(snapshot, ("InterPodAffinity", "all", terms), lambda p: all(t.matches(p) for t in terms))


def affinity_rejects(snapshot: Snapshot, pod: PodInfo, terms: tuple[PodTerm, ...], counts: IntArray) -> BoolArray:
    """Nodes where the pod's required affinity fails, given per node the pods matching all its terms."""
    met = np.ones(len(counts), dtype=np.bool_)
    labelled = np.ones(len(counts), dtype=np.bool_)
    anywhere = False
    for term in terms:
        found = domains(snapshot, term.topology_key)
        per_domain = found.totals(counts)
        anywhere = anywhere or bool(per_domain.any())
        labelled &= found.labelled
        met &= found.spread(per_domain) > 0
    if not anywhere and all(t.matches(pod) for t in terms):
        met = labelled
    return ~(met & labelled)


class InterPodAffinity:
    name = "InterPodAffinity"
    weight = 2

    def filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> NodeVerdict | None:
        index = _holders(snapshot)
        if not pod.pod_affinity and not index.required:
            return None  # no term of its own, and none held against it: upstream's PreFilter Skip
        affinity = required_affinity(pod.pod, snapshot.namespaces)
        anti = required_anti_affinity(pod.pod, snapshot.namespaces)
        existing = {term: holders for (weight, term), holders in index.counts.items() if weight == 0}
        if not affinity and not anti and not existing:
            return None
        rows = len(snapshot.running)
        refused = np.zeros(rows, dtype=np.bool_)
        if affinity:
            refused = affinity_rejects(snapshot, pod, affinity, _matching_all(snapshot, affinity))
        excluded = np.zeros(rows, dtype=np.bool_)
        for term in anti:
            excluded |= domains(snapshot, term.topology_key).shared(_matching(snapshot, term)) > 0
        excluding = np.zeros(rows, dtype=np.bool_)
        for term, holders in existing.items():
            if term.matches(pod):
                excluding |= domains(snapshot, term.topology_key).shared(holders) > 0
        if not (refused.any() or excluded.any() or excluding.any()):
            return NodeVerdict(feasible=np.ones(rows, dtype=np.bool_))
        excluded &= ~refused
        excluding &= ~(refused | excluded)
        reasons = tuple(
            (reason, mask)
            for reason, mask in ((AFFINITY, refused), (ANTI_AFFINITY, excluded), (EXISTING_ANTI_AFFINITY, excluding))
            if mask.any()
        )
        resolvable = excluded.any() or excluding.any()
        return NodeVerdict(
            feasible=~(refused | excluded | excluding),
            reasons=reasons,
            code=Code.UNSCHEDULABLE if resolvable else Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            hard=refused,
        )

    def preemption_terms(
        self,
        state: CycleState,
        members: Sequence[PodInfo],
        snapshot: Snapshot,
        removable: Callable[[PodInfo], bool],
    ) -> PreemptionTerms:
        index = _holders(snapshot)
        existing = {term: per_node for (weight, term), per_node in index.counts.items() if weight == 0}
        rows = len(snapshot.running)
        masks = np.empty((len(members), rows), dtype=np.bool_)
        found: dict[tuple[str, PodTerm], tuple[BoolArray, list[str]]] = {}

        def in_the_way(kind: str, term: PodTerm, per_node: IntArray) -> tuple[BoolArray, list[str]]:
            """Nodes whose domain holds such a pod elsewhere (out), and the pods on the node itself (to clear);
            asked once per term, however many members share it."""
            if (kind, term) not in found:
                at = np.flatnonzero(per_node).tolist()
                if kind == "matches":
                    keys = list(chain.from_iterable(map(_counted(snapshot, term).keys.__getitem__, at)))
                else:
                    keys = list(chain.from_iterable(map(index.keys[0, term].get, at, repeat(()))))
                spread = domains(snapshot, term.topology_key)
                found[kind, term] = (spread.labelled & (spread.shared(per_node) - per_node > 0), keys)
            return found[kind, term]

        conflicts: dict[tuple[tuple[str, PodTerm], ...], list[int]] = {}
        repelled: set[int] = set()
        alike: dict[object, tuple[BoolArray, tuple[tuple[str, PodTerm], ...], bool]] = {}
        for at, member in enumerate(members):
            affinity = required_affinity(member.pod, snapshot.namespaces)
            anti = required_anti_affinity(member.pod, snapshot.namespaces)
            held = tuple(t for t in existing if t.matches(member))
            # Everything the member's mask and conflicts read of it: a gang's members mostly share one.
            shape = (affinity, all(t.matches(member) for t in affinity), anti, held)
            if shape not in alike:
                mask = np.ones(rows, dtype=np.bool_)
                if affinity:
                    mask &= ~self._affinity_rejects_after_removal(snapshot, member, affinity, removable)
                pairs = [("matches", t, _matching(snapshot, t)) for t in anti]
                pairs += [("holds", t, existing[t]) for t in held]
                blocking: list[tuple[str, PodTerm]] = []
                for kind, term, per_node in pairs:
                    if per_node.any():
                        mask &= ~in_the_way(kind, term, per_node)[0]
                        blocking.append((kind, term))
                repels = any(t.matches(other) for t in anti for other in members)
                alike[shape] = (mask, tuple(blocking), repels)
            mask, blocking_terms, repels = alike[shape]
            masks[at] = mask
            if repels:
                repelled.add(at)
            if blocking_terms or repels:
                conflicts.setdefault(blocking_terms, []).append(at)
        exclusions = []
        for blocking_terms, indices in conflicts.items():
            holders = frozenset(chain.from_iterable(found[pair][1] for pair in blocking_terms))
            needs = tuple(i in indices for i in range(len(members)))
            capacity = 1 if any(i in repelled for i in indices) else len(members)
            exclusions.append(Exclusion(needs=needs, holders=holders, capacity=capacity))
        return PreemptionTerms(masks=masks, exclusions=tuple(exclusions))

    def pod_score(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, feasible: BoolArray) -> object:
        """Upstream's `scoring.go`: per domain, the weights of the pod's preferred terms its pods match (anti-affinity
        subtracting), and of the running pods' preferred terms and required affinity (weight 1) the pod matches;
        a node scores its domains' sums, min-max normalised over the feasible nodes."""
        index = _holders(snapshot)
        held = index.counts
        if not pod.pod_affinity and len(held) == index.required:
            return None  # no term of its own, and the running pods' terms are all filters
        own = preferred_terms(pod.pod, snapshot.namespaces)
        theirs = [(weight, term, holders) for (weight, term), holders in held.items() if weight and term.matches(pod)]
        if (not own and not theirs) or not feasible.any():
            return None
        total = np.zeros(len(snapshot.running), dtype=np.int64)
        for weight, term in own:
            total += weight * domains(snapshot, term.topology_key).shared(_matching(snapshot, term))
        for weight, term, holders in theirs:
            total += weight * domains(snapshot, term.topology_key).shared(holders)
        low, high = int(total[feasible].min()), int(total[feasible].max())
        if low == high:
            return None
        return np.floor(MAX_NODE_SCORE * (total - low) / (high - low))

    @staticmethod
    def _affinity_rejects_after_removal(
        snapshot: Snapshot, member: PodInfo, terms: tuple[PodTerm, ...], removable: Callable[[PodInfo], bool]
    ) -> BoolArray:
        """`affinity_rejects` counting only the matching pods preemption may not remove."""
        counts = _matching_all(snapshot, terms).copy()
        for row in np.flatnonzero(counts).tolist():
            counts[row] -= sum(1 for p in snapshot.running[row] if removable(p) and all(t.matches(p) for t in terms))
        if not counts.any() and _matching_all(snapshot, terms).any():
            return np.ones(len(counts), dtype=np.bool_)
        return affinity_rejects(snapshot, member, terms, counts)
