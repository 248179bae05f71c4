"""Static feasibility: every filter except resources, combined and cached per pod shape.

Selectors, affinity, taints, cordons and nodeName depend only on the pod's spec and the nodes, so
50,000 replicas of one Deployment share a single verdict per snapshot. Preemption uses the same
mask: removing pods never makes a statically infeasible node feasible.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import FilterPlugin, NodeVerdict
from scheduler.framework.pod_info import PodInfo
from scheduler.framework.snapshot import BoolArray, Snapshot
from scheduler.framework.status import Code


def pod_shape(pod: PodInfo) -> Hashable:
    """What static filters read from a pod; pods with equal shapes get equal verdicts."""
    spec = pod.pod.spec
    affinity = spec.affinity.model_dump_json() if spec.affinity is not None else None
    tolerations = tuple((t.key, t.operator, t.value, t.effect) for t in spec.tolerations)
    return (spec.node_name, tuple(sorted(spec.node_selector.items())), affinity, tolerations)


def combine(verdicts: Sequence[NodeVerdict], count: int) -> NodeVerdict:
    """AND of verdicts; each rejected node is charged to the first filter that rejected it, as upstream.

    The combined code is UNSCHEDULABLE when some node was rejected only for a resolvable reason.
    """
    feasible: BoolArray = np.ones(count, dtype=np.bool_)
    reasons: list[tuple[str, BoolArray]] = []
    resolvable: BoolArray = np.zeros(count, dtype=np.bool_)
    for verdict in verdicts:
        rejected_here = feasible & ~verdict.feasible
        for reason, mask in verdict.reasons:
            charged = mask & rejected_here
            if charged.any():
                reasons.append((reason, charged))
        if verdict.code == Code.UNSCHEDULABLE:
            resolvable |= rejected_here
        feasible = feasible & verdict.feasible
    code = Code.UNSCHEDULABLE if resolvable.any() else Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    return NodeVerdict(feasible=feasible, reasons=tuple(reasons), code=code)


def static_mask(
    pod: PodInfo,
    snapshot: Snapshot,
    filters: Sequence[FilterPlugin],
    state: CycleState | None = None,
) -> NodeVerdict:
    """Nodes where `pod` could run if they were empty: all filters but resources (cached per shape).

    `filters` are the profile's static filters (the framework never picks plugins itself, so it does
    not depend on the plugin registry). The cache lives on the snapshot, so it is dropped with it
    whenever the nodes change; one snapshot serves one profile.
    """
    key = pod_shape(pod)
    cached = snapshot.static_masks.get(key)
    if isinstance(cached, NodeVerdict):
        return cached
    cycle = state if state is not None else CycleState()
    verdict = combine([f.filter(cycle, pod, snapshot) for f in filters], len(snapshot.nodes.names))
    verdict = NodeVerdict(feasible=verdict.feasible, reasons=verdict.reasons, code=Code.UNSCHEDULABLE_AND_UNRESOLVABLE)
    snapshot.static_masks[key] = verdict
    return verdict


def describe(verdict: NodeVerdict, count: int) -> str:
    """kube-scheduler's FitError text: `0/5 nodes are available: 3 Insufficient cpu, 2 node(s) ...`."""
    parts = sorted(f"{int(mask.sum())} {reason}" for reason, mask in verdict.reasons)
    return f"0/{count} nodes are available: {', '.join(parts)}." if parts else f"0/{count} nodes are available."
