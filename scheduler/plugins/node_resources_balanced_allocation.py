"""NodeResourcesBalancedAllocation: prefer the node whose cpu and memory would be the most evenly used.

Source: kube-scheduler `plugins/noderesources/balanced_allocation.go` (weight 1 in its default profile): with
the pod placed, each resource's share of allocatable (capped at 1); the score is (1 - their standard deviation)
x 100, for two resources half their difference. A pod requesting neither is not scored (upstream skips
best-effort pods), and neither is a resource a node has none of.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.pod_info import PodInfo
from scheduler.framework.snapshot import BoolArray, NodeTable, Snapshot

RESOURCES = ("cpu", "memory")

FloatArray = npt.NDArray[np.float64]


def _balanced(table: NodeTable, columns: list[int], requests: Mapping[str, int]) -> float:
    """The score of a one-row table over two resources, in plain floats."""
    shares = []
    for c in columns:
        allocatable = int(table.allocatable[0, c])
        if allocatable > 0:
            used = int(table.requested[0, c]) + requests.get(table.resources[c], 0)
            shares.append(min(used / allocatable, 1.0))
    deviation = abs(shares[0] - shares[1]) / 2 if len(shares) == 2 else 0.0
    return float(math.floor((1.0 - deviation) * 100.0))


class NodeResourcesBalancedAllocation:
    name = "NodeResourcesBalancedAllocation"
    weight = 1

    def skips(self, pod: PodInfo) -> bool:
        """A best-effort pod (no cpu or memory request) is not scored, as upstream."""
        return not any(pod.requests.get(r, 0) for r in RESOURCES)

    def score(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, feasible: BoolArray) -> object:
        table = snapshot.nodes
        rows = len(table.names)
        columns = [table.resource_index[r] for r in RESOURCES if r in table.resource_index]
        if not columns or not any(pod.requests.get(r, 0) for r in RESOURCES):
            return np.zeros(rows, dtype=np.float64)
        if rows == 1 and len(columns) == 2:  # the one row a placement changed: numpy's overhead would dominate
            return np.array([_balanced(table, columns, pod.requests)], dtype=np.float64)
        allocatable = table.allocatable[:, columns]
        request = np.array([pod.requests.get(table.resources[c], 0) for c in columns], dtype=np.int64)
        share = np.minimum((table.requested[:, columns] + request) / np.maximum(allocatable, 1), 1.0)
        has = allocatable > 0
        if len(columns) == 2 and has.all():  # every node has cpu and memory: half their difference, cheaply
            deviation: FloatArray = np.abs(share[:, 0] - share[:, 1]) / 2
        else:
            share = np.where(has, share, 0.0)
            counted = np.maximum(has.sum(axis=1), 1)
            mean = share.sum(axis=1) / counted
            deviation = np.sqrt((np.where(has, share - mean[:, None], 0.0) ** 2).sum(axis=1) / counted)
        return np.floor((1.0 - deviation) * 100.0)
