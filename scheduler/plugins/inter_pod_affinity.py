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


def _holders(snapshot: Snapshot) -> _Holders:
    """The index of `existing_terms`, brought up to date: one walk over the pods when the node set or the
    namespaces' labels change, then only the rows that changed, as `pod_counts` keeps its columns."""
    slot = ("InterPodAffinity", "holders")
    versions = snapshot.versions
    nodes = len(versions)
    kept = snapshot.indexes.get(slot)
    changed: list[int]
    namespaces = snapshot.namespaces
    if not isinstance(kept, _Holders) or len(kept.seen.versions) != nodes or kept.namespaces is not namespaces:
        seen = RowsSeen(versions.copy(), snapshot.row_log, len(snapshot.row_log))
        kept = _Holders(seen, namespaces, [()] * nodes, {}, {})
        snapshot.indexes[slot] = kept
        changed = list(range(nodes))
    else:
        changed = kept.seen.changed(snapshot)
    counts, keys = kept.counts, kept.keys
    for row in changed:
        for _, terms in kept.rows[row]:
            for held in terms:
                counts[held][row] -= 1
                keys[held].pop(row, None)
                if not counts[held].any():
                    del counts[held], keys[held]
        pods = snapshot.running[row]
        if not kept.rows[row] and not any(p.pod_affinity for p in pods):
            continue  # most rows: no pod with pod affinity, before or now
        now = tuple((p.key, terms) for p in pods if p.pod_affinity and (terms := held_terms(p.pod, namespaces)))
        kept.rows[row] = now
        for key, terms in now:
            for held in terms:
                if held not in counts:
                    counts[held] = np.zeros(nodes, dtype=np.int64)
                    keys[held] = {}
                counts[held][row] += 1
                keys[held].setdefault(row, []).append(key)
    return kept


def existing_terms(snapshot: Snapshot) -> dict[HeldTerm, IntArray]:
    """Per term some running pod holds (`pod_terms.held_terms`), the holders per node."""
    return _holders(snapshot).counts


def existing_anti_affinity(snapshot: Snapshot) -> dict[PodTerm, IntArray]:
    """The running pods' required anti-affinity terms, with their holders per node."""
    return {term: holders for (weight, term), holders in existing_terms(snapshot).items() if weight == 0}


HELD_KEY = "InterPodAffinity/held"


@dataclass(frozen=True, slots=True)
class _Held:
    """`existing_terms` as the filter read it for this cycle's pod (CycleState)."""

    terms: dict[HeldTerm, IntArray]


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
        affinity = required_affinity(pod.pod, snapshot.namespaces)
        anti = required_anti_affinity(pod.pod, snapshot.namespaces)
        held = existing_terms(snapshot)
        state.write(HELD_KEY, _Held(held))  # read again by `pod_score` in the same cycle, before any placement
        existing = {term: holders for (weight, term), holders in held.items() if weight == 0}
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
        masks = np.ones((len(members), rows), dtype=np.bool_)
        found: dict[tuple[str, PodTerm], tuple[BoolArray, list[str]]] = {}

        def in_the_way(kind: str, term: PodTerm, per_node: IntArray) -> tuple[BoolArray, list[str]]:
            """Nodes whose domain holds such a pod elsewhere (out), and the pods on the node itself (to clear);
            asked once per term, however many members share it."""
            if (kind, term) not in found:
                at = np.flatnonzero(per_node).tolist()
                if kind == "matches":
                    listed = _counted(snapshot, term).keys
                    keys = [key for row in at for key in listed[row]]
                else:
                    by_row = index.keys[0, term]
                    keys = [key for row in at for key in by_row.get(row, ())]
                spread = domains(snapshot, term.topology_key)
                found[kind, term] = (spread.labelled & (spread.shared(per_node) - per_node > 0), keys)
            return found[kind, term]

        conflicts: dict[tuple[tuple[str, PodTerm], ...], list[int]] = {}
        repelled: set[int] = set()
        for at, member in enumerate(members):
            affinity = required_affinity(member.pod, snapshot.namespaces)
            anti = required_anti_affinity(member.pod, snapshot.namespaces)
            if affinity:
                masks[at] &= ~self._affinity_rejects_after_removal(snapshot, member, affinity, removable)
            pairs = [("matches", t, _matching(snapshot, t)) for t in anti]
            pairs += [("holds", t, per_node) for t, per_node in existing.items() if t.matches(member)]
            blocking: list[tuple[str, PodTerm]] = []
            for kind, term, per_node in pairs:
                if per_node.any():
                    masks[at] &= ~in_the_way(kind, term, per_node)[0]
                    blocking.append((kind, term))
            if any(t.matches(other) for t in anti for other in members):
                repelled.add(at)
            if blocking or at in repelled:
                conflicts.setdefault(tuple(blocking), []).append(at)
        exclusions = []
        for blocking_terms, indices in conflicts.items():
            holders = frozenset(key for pair in blocking_terms for key in found[pair][1])
            needs = tuple(i in indices for i in range(len(members)))
            capacity = 1 if any(i in repelled for i in indices) else len(members)
            exclusions.append(Exclusion(needs=needs, holders=holders, capacity=capacity))
        return PreemptionTerms(masks=masks, exclusions=tuple(exclusions))

    def pod_score(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, feasible: BoolArray) -> object:
        """Upstream's `scoring.go`: per domain, the weights of the pod's preferred terms its pods match (anti-affinity
        subtracting), and of the running pods' preferred terms and required affinity (weight 1) the pod matches;
        a node scores its domains' sums, min-max normalised over the feasible nodes."""
        kept = state.read(HELD_KEY, _Held)
        held = kept.terms if kept is not None else existing_terms(snapshot)
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
