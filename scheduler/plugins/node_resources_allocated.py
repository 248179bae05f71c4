"""NodeResourcesAllocated: score nodes by how allocated they would be with the pod placed.

Source: kube-scheduler `noderesources/least_allocated.go` and `most_allocated.go`. LeastAllocated
(the default) spreads load; MostAllocated packs pods onto busy nodes, keeping whole nodes free for
gangs (GPU pools). Each configured resource is scored 0..100 and weighted; a node without the
resource scores 0 for it.
"""

from __future__ import annotations

import numpy as np

from scheduler.api.config import ScoringStrategy
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.pod_info import PodInfo
from scheduler.framework.snapshot import BoolArray, Snapshot


class NodeResourcesAllocated:
    name = "NodeResourcesAllocated"

    def __init__(self, strategy: ScoringStrategy, weight: int = 1) -> None:
        self.most = strategy.type == "MostAllocated"
        self.resource_weights = dict(strategy.resources)
        self.weight = weight

    def score(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, feasible: BoolArray) -> object:
        table = snapshot.nodes
        total = np.zeros(len(table.names), dtype=np.float64)
        weights = 0
        for resource, weight in self.resource_weights.items():
            column = table.resource_index.get(resource)
            if column is None or weight <= 0:
                continue
            allocatable = table.allocatable[:, column]
            used = table.requested[:, column] + pod.requests.get(resource, 0)
            share = np.zeros(len(total), dtype=np.float64)
            np.divide(used, allocatable, out=share, where=allocatable > 0)
            np.clip(share, 0.0, 1.0, out=share)
            if not self.most:
                share = np.where(allocatable > 0, 1.0 - share, 0.0)
            total += (weight * 100.0) * share
            weights += weight
        return total / weights if weights else total
