"""PodTopologySpread: `whenUnsatisfiable: DoNotSchedule` constraints keep a pod's matching pods within
`maxSkew` of the least loaded domain.

Source: kube-scheduler `plugins/podtopologyspread/filtering.go`. For each constraint, the pods in the pod's
namespace that its selector matches (with `matchLabelKeys` merged, terminating pods left out) are counted per
domain of `topologyKey`, over the nodes that have every constraint's key and, by default, match the pod's node
selector and required node affinity (`nodeAffinityPolicy: Honor`) but not necessarily tolerate its taints
(`nodeTaintsPolicy: Ignore`). A node is rejected when it lacks the key (unresolvable), or when its domain's
count, plus one if the pod matches the selector itself, exceeds the smallest domain's count by more than
`maxSkew`; with fewer domains than `minDomains` the smallest count is 0. A nil selector matches no pod.

`ScheduleAnyway` constraints, and the cluster-default constraints a pod without any gets, only score nodes
upstream; they place no limit. Preemption counts, as kube-scheduler's does on the node it considers, the
matching pods it removes from that node (`preemption_terms`): a node whose domain is too full may still be
chosen when enough of its matching pods are victims. Members placed on other nodes of the same domain by one
decision are not counted against each other there; the placement that follows the victims' deletion checks
them again.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from scheduler.api.pod import TopologySpreadConstraint
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import Exclusion, NodeVerdict, PreemptionTerms
from scheduler.framework.normalize import MAX_NODE_SCORE
from scheduler.framework.pod_counts import counted, pod_counts
from scheduler.framework.pod_info import PodInfo
from scheduler.framework.pod_terms import PodTerm, selector_of
from scheduler.framework.snapshot import BoolArray, IntArray, Snapshot
from scheduler.framework.status import Code
from scheduler.framework.topology import domains
from scheduler.plugins.node_affinity import NodeAffinity
from scheduler.plugins.taint_toleration import TaintToleration

MISSING_LABEL = "node(s) didn't match pod topology spread constraints (missing required label)"
SKEW = "node(s) didn't match pod topology spread constraints"


def _spread_term(pod: PodInfo, constraint: TopologySpreadConstraint) -> PodTerm:
    selector = selector_of(constraint.label_selector, pod.labels, constraint.match_label_keys)
    return PodTerm(frozenset({pod.namespace}), selector, constraint.topology_key)


def _counted(term: PodTerm) -> Callable[[PodInfo], bool]:
    return lambda p: p.pod.metadata.deletion_timestamp is None and term.matches(p)


HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"

SYSTEM_DEFAULTS = (
    TopologySpreadConstraint(max_skew=3, topology_key=HOSTNAME, when_unsatisfiable="ScheduleAnyway"),
    TopologySpreadConstraint(max_skew=5, topology_key=ZONE, when_unsatisfiable="ScheduleAnyway"),
)
"""kube-scheduler's `defaultingType: System` constraints for a pod that sets none."""

CONTROLLERS = ("ReplicaSet", "StatefulSet", "ReplicationController")


def _controller(pod: PodInfo) -> str | None:
    """The uid of the pod's ReplicaSet, StatefulSet or ReplicationController, or None.

    Its pods stand in for upstream's `DefaultSelector` (the selectors of that controller and of the Services that
    select the pod): the scheduler reads none of those objects, and the pods one controller made are what its
    selector selects. A pod with no such controller gets no default constraint, as upstream unless a Service
    selects it."""
    owner = next(
        (o for o in pod.pod.metadata.owner_references if o.controller and o.kind in CONTROLLERS and o.uid), None
    )
    return owner.uid if owner is not None else None


def _siblings(namespace: str, uid: str) -> Callable[[PodInfo], bool]:
    """Pods of the controller `uid`, not terminating."""
    return lambda p: (
        p.pod.metadata.deletion_timestamp is None
        and p.namespace == namespace
        and any(o.controller and o.uid == uid for o in p.pod.metadata.owner_references)
    )


class PodTopologySpread:
    name = "PodTopologySpread"
    weight = 2

    def __init__(self) -> None:
        self._node_affinity = NodeAffinity()
        self._taints = TaintToleration()

    def filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> NodeVerdict | None:
        constraints = [c for c in pod.pod.spec.topology_spread_constraints if c.when_unsatisfiable == "DoNotSchedule"]
        if not constraints:
            return None
        rows = len(snapshot.running)
        labelled = np.ones(rows, dtype=np.bool_)
        for constraint in constraints:
            labelled &= domains(snapshot, constraint.topology_key).labelled
        missing = np.zeros(rows, dtype=np.bool_)
        skewed = np.zeros(rows, dtype=np.bool_)
        for constraint in constraints:
            term = _spread_term(pod, constraint)
            found = domains(snapshot, constraint.topology_key)
            eligible = labelled & self._included(state, pod, snapshot, constraint)
            per_domain = found.totals(pod_counts(snapshot, ("PodTopologySpread", term), _counted(term)), eligible)
            present = np.unique(found.ids[eligible & found.labelled])
            smallest = int(per_domain[present].min()) if len(present) else 0
            if constraint.min_domains is not None and len(present) < constraint.min_domains:
                smallest = 0
            own = 1 if term.matches(pod) else 0
            missing |= ~found.labelled
            skewed |= found.labelled & (found.spread(per_domain) + own - smallest > constraint.max_skew)
        skewed &= ~missing
        if not (missing.any() or skewed.any()):
            return NodeVerdict(feasible=np.ones(rows, dtype=np.bool_))
        reasons = tuple((r, m) for r, m in ((MISSING_LABEL, missing), (SKEW, skewed)) if m.any())
        return NodeVerdict(
            feasible=~(missing | skewed),
            reasons=reasons,
            code=Code.UNSCHEDULABLE if skewed.any() else Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            hard=missing,
        )

    def _included(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot, constraint: TopologySpreadConstraint
    ) -> BoolArray:
        """The nodes a constraint's inclusion policies let count (upstream's `matchNodeInclusionPolicies`)."""
        included = np.ones(len(snapshot.running), dtype=np.bool_)
        if (constraint.node_affinity_policy or "Honor") == "Honor":
            included &= self._node_affinity.filter(state, pod, snapshot).feasible
        if (constraint.node_taints_policy or "Ignore") == "Honor":
            included &= self._taints.filter(state, pod, snapshot).feasible
        return included

    def preemption_terms(
        self,
        state: CycleState,
        members: Sequence[PodInfo],
        snapshot: Snapshot,
        removable: Callable[[PodInfo], bool],
    ) -> PreemptionTerms:
        """As kube-scheduler's preemption counts them on the node it considers: a member may go where every
        constraint's key is, and the node's matching pods it must lose are a column (`Exclusion.room`): the node
        keeps at most maxSkew + the smallest domain's count - its domain's count on other nodes of them, members
        that match included, and each matching victim removed from it gives one back."""
        rows = len(snapshot.running)
        masks = np.ones((len(members), rows), dtype=np.bool_)
        columns: dict[tuple[object, ...], tuple[IntArray, frozenset[str], list[int]]] = {}
        for at, member in enumerate(members):
            constraints = [
                c for c in member.pod.spec.topology_spread_constraints if c.when_unsatisfiable == "DoNotSchedule"
            ]
            if not constraints:
                continue
            labelled = np.ones(rows, dtype=np.bool_)
            for constraint in constraints:
                labelled &= domains(snapshot, constraint.topology_key).labelled
            masks[at] &= labelled
            for constraint in constraints:
                term = _spread_term(member, constraint)
                key = (term, constraint.max_skew, constraint.min_domains, self._inclusion(member, constraint))
                if key not in columns:
                    columns[key] = (*self._room(state, member, snapshot, constraint, labelled), [])
                if term.matches(member):
                    columns[key][2].append(at)
        exclusions = tuple(
            Exclusion(needs=tuple(i in needing for i in range(len(members))), holders=holders, capacity=1, room=room)
            for room, holders, needing in columns.values()
        )
        return PreemptionTerms(masks=masks, exclusions=exclusions)

    @staticmethod
    def _inclusion(pod: PodInfo, constraint: TopologySpreadConstraint) -> object:
        """What the inclusion policies read of the pod, for telling apart the columns of members alike."""
        spec = pod.pod.spec
        affinity = spec.affinity.node_affinity if spec.affinity else None
        return (
            constraint.node_affinity_policy,
            constraint.node_taints_policy,
            tuple(sorted(spec.node_selector.items())),
            affinity.model_dump_json() if affinity else None,
            tuple((t.key, t.operator, t.value, t.effect) for t in spec.tolerations),
        )

    def _room(
        self,
        state: CycleState,
        pod: PodInfo,
        snapshot: Snapshot,
        constraint: TopologySpreadConstraint,
        labelled: BoolArray,
    ) -> tuple[IntArray, frozenset[str]]:
        """Per node, how many matching pods (members included) it may keep, and the matching pods counted."""
        term = _spread_term(pod, constraint)
        found = domains(snapshot, constraint.topology_key)
        eligible = labelled & self._included(state, pod, snapshot, constraint)
        matching = counted(snapshot, ("PodTopologySpread", term), _counted(term))
        per_domain = found.totals(matching.counts, eligible)
        present = np.unique(found.ids[eligible & found.labelled])
        smallest = int(per_domain[present].min()) if len(present) else 0
        if constraint.min_domains is not None and len(present) < constraint.min_domains:
            smallest = 0
        on_node = np.where(eligible, matching.counts, 0)
        room = constraint.max_skew + smallest - (found.spread(per_domain) - on_node)
        holders = frozenset(key for row in np.flatnonzero(on_node).tolist() for key in matching.keys[row])
        return room.astype(np.int64), holders

    def pod_score(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, feasible: BoolArray) -> object:
        """Upstream's `scoring.go`: each `ScheduleAnyway` constraint (or, for a pod with none, the system defaults
        over its controller's pods) adds, on a node with its key, the matching pods in the node's domain times
        log(domains + 2) plus maxSkew - 1; fewer is better, normalised as `(max + min - score) / max`. Nodes
        missing a constraint's key score 0, unless the constraints are the system defaults."""
        own = pod.pod.spec.topology_spread_constraints
        constraints = [c for c in own if c.when_unsatisfiable == "ScheduleAnyway"] if own else list(SYSTEM_DEFAULTS)
        controller = None if own else _controller(pod)
        if not constraints or (not own and controller is None) or not feasible.any():
            return None
        rows = len(snapshot.running)
        labelled = np.ones(rows, dtype=np.bool_)
        for constraint in constraints:
            labelled &= domains(snapshot, constraint.topology_key).labelled
        scored = feasible & labelled if own else feasible
        total = np.zeros(rows, dtype=np.float64)
        for constraint in constraints:
            if controller is not None:
                per_node = pod_counts(
                    snapshot, ("PodTopologySpread", pod.namespace, controller), _siblings(pod.namespace, controller)
                )
            else:
                term = _spread_term(pod, constraint)
                per_node = pod_counts(snapshot, ("PodTopologySpread", term), _counted(term))
            found = domains(snapshot, constraint.topology_key)
            if constraint.topology_key == HOSTNAME:
                count = per_node
                size = int(scored.sum())
            else:
                counted = (labelled if own else found.labelled) & self._included(state, pod, snapshot, constraint)
                present = np.zeros(len(found.values), dtype=np.bool_)
                present[found.ids[scored & found.labelled]] = True
                count = found.spread(np.where(present, found.totals(per_node, counted), 0))
                size = int(present.sum())
            weight = math.log(size + 2)
            total += np.where(found.labelled, count * weight + (constraint.max_skew - 1), 0.0)
        raw = np.round(total).astype(np.int64)
        if not scored.any():
            return None
        low, high = int(raw[scored].min()), int(raw[scored].max())
        if high == 0:
            normalized = np.where(scored, MAX_NODE_SCORE, 0)
        else:
            normalized = np.where(scored, MAX_NODE_SCORE * (high + low - raw) // high, 0)
        if normalized[feasible].min() == normalized[feasible].max():
            return None
        return normalized.astype(np.float64)
