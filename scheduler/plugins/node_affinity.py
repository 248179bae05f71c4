"""NodeAffinity: `spec.nodeSelector` and required node affinity must match the node's labels.

Source: kube-scheduler `plugins/nodeaffinity` and `component-helpers/scheduling/corev1/nodeaffinity`:
every nodeSelector label must match, and at least one `nodeSelectorTerms` entry must match (its
expressions ANDed). Gt/Lt compare integers; a label that is not an integer does not match.
`matchFields` supports `metadata.name`, the only field upstream allows. Preferred terms score (weight 2, as
upstream's default profile): the sum of the weights of the terms a node matches, normalised over the feasible
nodes.
"""

from __future__ import annotations

import numpy as np

from scheduler.api.node import Node
from scheduler.api.pod import NodeSelectorRequirement, NodeSelectorTerm, PreferredSchedulingTerm
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import NodeVerdict
from scheduler.framework.node_derived import node_derived
from scheduler.framework.normalize import default_normalize
from scheduler.framework.pod_info import PodInfo
from scheduler.framework.snapshot import BoolArray, IntArray, Snapshot
from scheduler.framework.status import Code

REASON = "node(s) didn't match Pod's node affinity/selector"


def _as_int(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None


def requirement_matches(req: NodeSelectorRequirement, values: dict[str, str]) -> bool:
    present = req.key in values
    if req.operator == "In":
        return present and values[req.key] in req.values
    if req.operator == "NotIn":
        return not present or values[req.key] not in req.values
    if req.operator == "Exists":
        return present
    if req.operator == "DoesNotExist":
        return not present
    if not present or len(req.values) != 1:
        return False
    have, bound = _as_int(values[req.key]), _as_int(req.values[0])
    if have is None or bound is None:
        return False
    return have > bound if req.operator == "Gt" else have < bound


def term_matches(term: NodeSelectorTerm, node: Node) -> bool:
    """An empty term matches nothing, as upstream says."""
    if not term.match_expressions and not term.match_fields:
        return False
    labels = node.metadata.labels
    fields = {"metadata.name": node.metadata.name}
    return all(requirement_matches(r, labels) for r in term.match_expressions) and all(
        requirement_matches(r, fields) for r in term.match_fields
    )


def _preferred(nodes: tuple[Node, ...], terms: list[PreferredSchedulingTerm]) -> IntArray:
    """Per node, the summed weight of the preferred terms it matches (an empty term matches nothing)."""
    return np.fromiter(
        (sum(t.weight for t in terms if t.weight and term_matches(t.preference, node)) for node in nodes),
        dtype=np.int64,
        count=len(nodes),
    )


class NodeAffinity:
    name = "NodeAffinity"
    weight = 2

    def filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> NodeVerdict:
        spec = pod.pod.spec
        selector = spec.node_selector
        affinity = spec.affinity.node_affinity if spec.affinity else None
        required = affinity.required_during_scheduling_ignored_during_execution if affinity else None
        nodes = snapshot.nodes.nodes
        if not selector and required is None:
            return NodeVerdict(feasible=np.ones(len(nodes), dtype=np.bool_))

        def matches(node: Node) -> bool:
            labels = node.metadata.labels
            if any(labels.get(k) != v for k, v in selector.items()):
                return False
            return required is None or any(term_matches(t, node) for t in required.node_selector_terms)

        feasible = np.fromiter((matches(n) for n in nodes), dtype=np.bool_, count=len(nodes))
        return NodeVerdict(feasible=feasible, reasons=((REASON, ~feasible),), code=Code.UNSCHEDULABLE_AND_UNRESOLVABLE)

    def pod_score(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, feasible: BoolArray) -> object:
        affinity = pod.pod.spec.affinity
        rules = affinity.node_affinity if affinity else None
        terms = rules.preferred_during_scheduling_ignored_during_execution if rules else []
        if not terms:
            return None
        key = ("NodeAffinity", tuple(t.model_dump_json() for t in terms))
        return default_normalize(node_derived(snapshot, key, lambda nodes: _preferred(nodes, terms)), feasible)
