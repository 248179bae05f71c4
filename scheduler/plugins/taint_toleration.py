"""TaintToleration: a node's NoSchedule and NoExecute taints must each be tolerated by the pod.

Source: kube-scheduler `plugins/tainttoleration` and `v1helper.TolerationsTolerateTaint`.
PreferNoSchedule taints only score (weight 3, as upstream's default profile): the fewer a node has that the pod
does not tolerate (by tolerations with effect PreferNoSchedule or none), the higher, normalised in reverse over
the feasible nodes.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from scheduler.api.node import Node
from scheduler.api.pod import Toleration
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import NodeVerdict
from scheduler.framework.node_derived import node_derived
from scheduler.framework.normalize import default_normalize
from scheduler.framework.pod_info import PodInfo
from scheduler.framework.snapshot import BoolArray, IntArray, Snapshot
from scheduler.framework.status import Code

FILTERED_EFFECTS = ("NoSchedule", "NoExecute")


def tolerates(tolerations: Sequence[Toleration], key: str, value: str | None, effect: str) -> bool:
    """`Toleration.ToleratesTaint`: empty effect matches all; `Exists` with no key matches every taint."""
    for t in tolerations:
        if t.effect and t.effect != effect:
            continue
        if t.operator == "Exists":
            if not t.key or t.key == key:
                return True
            continue
        if t.key == key and (t.value or "") == (value or ""):
            return True
    return False


def _intolerable(nodes: tuple[Node, ...], tolerations: Sequence[Toleration]) -> IntArray | None:
    """Per node, the PreferNoSchedule taints the tolerations (those with that effect or none) do not tolerate;
    None when there are none on any node, as on most clusters, so a pod pays nothing per node."""
    if not any(t.effect == "PreferNoSchedule" for node in nodes for t in node.spec.taints):
        return None
    preferring = [t for t in tolerations if not t.effect or t.effect == "PreferNoSchedule"]
    return np.fromiter(
        (
            sum(
                1
                for taint in node.spec.taints
                if taint.effect == "PreferNoSchedule"
                and not tolerates(preferring, taint.key, taint.value, "PreferNoSchedule")
            )
            for node in nodes
        ),
        dtype=np.int64,
        count=len(nodes),
    )


class TaintToleration:
    name = "TaintToleration"
    weight = 3

    def filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> NodeVerdict:
        nodes = snapshot.nodes.nodes
        feasible = np.ones(len(nodes), dtype=np.bool_)
        untolerated: dict[str, BoolArray] = {}
        tolerations = pod.pod.spec.tolerations
        for row, node in enumerate(nodes):
            for taint in node.spec.taints:
                if taint.effect in FILTERED_EFFECTS and not tolerates(
                    tolerations, taint.key, taint.value, taint.effect
                ):
                    feasible[row] = False
                    label = f"{{{taint.key}: {taint.value}}}" if taint.value else f"{{{taint.key}}}"
                    untolerated.setdefault(label, np.zeros(len(nodes), dtype=np.bool_))[row] = True
                    break
        reasons = tuple((f"node(s) had untolerated taint {label}", mask) for label, mask in untolerated.items())
        return NodeVerdict(feasible=feasible, reasons=reasons, code=Code.UNSCHEDULABLE_AND_UNRESOLVABLE)

    def pod_score(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, feasible: BoolArray) -> object:
        tolerations = pod.pod.spec.tolerations
        key = ("TaintToleration", tuple((t.key, t.operator, t.value, t.effect) for t in tolerations))
        counts = node_derived(snapshot, key, lambda nodes: _intolerable(nodes, tolerations))
        return None if counts is None else default_normalize(counts, feasible, reverse=True)
