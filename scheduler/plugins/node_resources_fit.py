"""NodeResourcesFit: a node fits when its free capacity covers the pod's request in every resource.

Source: kube-scheduler `plugins/noderesources/fit.go`. cpu, memory, ephemeral-storage, extended
resources and the pod count (`pods`) are all columns of one array, so the check is a single
`(free >= request).all(axis=1)`. A resource no node offers makes the pod fit nowhere. Rejections
are UNSCHEDULABLE: removing pods (preemption) can help, except on a node whose allocatable is below the
request, where nothing removed ever makes room (upstream's `Unresolvable` insufficient resource): a pod larger
than every node is UnschedulableAndUnresolvable, so it is not searched for victims, and waits for a node to be
added or to grow.

As a PlacementScore plugin (KEP-5732) it packs: a pod group's placement scores MostAllocated over all its nodes
with the group's pods placed, whatever the pod-by-pod strategy, with the pod-by-pod strategy's resource weights,
as kube-scheduler 1.36 does. Integer arithmetic as upstream's, so close placements rank as they do there.
"""

from __future__ import annotations

import numpy as np

from scheduler.api.config import ScoringStrategy
from scheduler.api.pod_group import PodGroup
from scheduler.api.quantity import PODS
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import NodeVerdict
from scheduler.framework.normalize import MAX_NODE_SCORE
from scheduler.framework.pod_group_placement import Proposal
from scheduler.framework.pod_info import PodInfo
from scheduler.framework.snapshot import BoolArray, Snapshot
from scheduler.framework.status import Code


class NodeResourcesFit:
    name = "NodeResourcesFit"

    def __init__(self, strategy: ScoringStrategy | None = None, weight: int = 1) -> None:
        self.resource_weights = {r: w for r, w in (strategy or ScoringStrategy()).resources.items() if w > 0}
        self.weight = weight
        """Of its placement score."""

    def score_placement(self, group: PodGroup, proposal: Proposal, snapshot: Snapshot) -> int:
        table = snapshot.nodes
        rows = proposal.domain.rows
        allocatable = table.allocatable[rows].sum(axis=0)
        requested = table.requested[rows].sum(axis=0)
        for pod, _ in proposal.assignments:
            requested = requested + table.usage(pod.requests)
        total = weights = 0
        for resource, weight in self.resource_weights.items():
            column = table.resource_index.get(resource)
            capacity = int(allocatable[column]) if column is not None else 0
            used = min(int(requested[column]), capacity) if column is not None else 0
            total += (used * MAX_NODE_SCORE // capacity if capacity else 0) * weight
            weights += weight
        return total // weights if weights else 0

    def filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> NodeVerdict:
        table = snapshot.nodes
        vector = table.usage(pod.requests)
        enough = (table.allocatable - table.requested) >= vector
        feasible: BoolArray = np.asarray(enough.all(axis=1), dtype=np.bool_)
        missing = [r for r, amount in pod.requests.items() if amount > 0 and r not in table.resource_index]
        if missing:
            feasible = np.zeros(len(table.names), dtype=np.bool_)
        elif feasible.all():
            return NodeVerdict(feasible=feasible, code=Code.UNSCHEDULABLE)
        too_small: BoolArray = np.asarray((table.allocatable < vector).any(axis=1), dtype=np.bool_)
        if missing:
            too_small = np.ones(len(table.names), dtype=np.bool_)
        reasons: list[tuple[str, BoolArray]] = []
        for column, resource in enumerate(table.resources):
            if vector[column] > 0:
                short = ~enough[:, column]
                if short.any():
                    reasons.append(("Too many pods" if resource == PODS else f"Insufficient {resource}", short))
        reasons.extend((f"Insufficient {resource}", ~feasible) for resource in missing)
        code = Code.UNSCHEDULABLE_AND_UNRESOLVABLE if too_small[~feasible].all() else Code.UNSCHEDULABLE
        return NodeVerdict(feasible=feasible, reasons=tuple(reasons), code=code, hard=too_small)
