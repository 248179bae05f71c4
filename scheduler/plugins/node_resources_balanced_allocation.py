"""NodeResourcesBalancedAllocation: prefer the node whose cpu and memory would be the most evenly used.

Source: kube-scheduler `plugins/noderesources/balanced_allocation.go` (weight 1 in its default profile): with
the pod placed, each resource's share of allocatable (capped at 1); the score is (1 - their standard deviation)
x 100, for two resources half their difference. A pod requesting neither is not scored (upstream skips
best-effort pods), and neither is a resource a node has none of.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.pod_info import PodInfo
from scheduler.framework.snapshot import BoolArray, Snapshot

RESOURCES = ("cpu", "memory")

FloatArray = npt.NDArray[np.float64]


class NodeResourcesBalancedAllocation:
    name = "NodeResourcesBalancedAllocation"
    weight = 1

    def score(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, feasible: BoolArray) -> object:
        table = snapshot.nodes
        rows = len(table.names)
        columns = [table.resource_index[r] for r in RESOURCES if r in table.resource_index]
        if not columns or not any(pod.requests.get(r, 0) for r in RESOURCES):
            return np.zeros(rows, dtype=np.float64)
        allocatable = table.allocatable[:, columns]
        request = np.array([pod.requests.get(table.resources[c], 0) for c in columns], dtype=np.int64)
        has = allocatable > 0
        share = np.where(has, np.minimum((table.requested[:, columns] + request) / np.maximum(allocatable, 1), 1.0), 0)
        counted = has.sum(axis=1)
        mean = share.sum(axis=1) / np.maximum(counted, 1)
        deviation: FloatArray = np.sqrt(
            (np.where(has, share - mean[:, None], 0.0) ** 2).sum(axis=1) / np.maximum(counted, 1)
        )
        return np.floor((1.0 - deviation) * 100.0)
