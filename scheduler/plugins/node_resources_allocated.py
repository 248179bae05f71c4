"""NodeResourcesAllocated: score nodes by how allocated they would be with the pod placed.

Source: kube-scheduler `noderesources/least_allocated.go` and `most_allocated.go`. LeastAllocated
(the default) spreads load; MostAllocated packs pods onto busy nodes, keeping whole nodes free for
gangs (GPU pools). Each configured resource is scored 0..100 and weighted; a node without the
resource scores 0 for it.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from scheduler.api.config import ScoringStrategy
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.pod_info import PodInfo
from scheduler.framework.snapshot import BoolArray, Snapshot

FloatArray = npt.NDArray[np.float64]


class NodeResourcesAllocated:
    name = "NodeResourcesAllocated"

    def __init__(self, strategy: ScoringStrategy, weight: int = 1) -> None:
        self.most = strategy.type == "MostAllocated"
        self.resource_weights = {r: w for r, w in strategy.resources.items() if w > 0}
        self.weight = weight
        self._columns: tuple[tuple[str, ...], npt.NDArray[np.int64], FloatArray] | None = None

    def _layout(self, resources: tuple[str, ...]) -> tuple[npt.NDArray[np.int64], FloatArray]:
        """Columns and normalised weights of the scored resources, cached per resource layout."""
        if self._columns is None or self._columns[0] != resources:
            index = {name: i for i, name in enumerate(resources)}
            pairs = [(index[r], w) for r, w in self.resource_weights.items() if r in index]
            columns = np.array([c for c, _ in pairs], dtype=np.int64)
            weights = np.array([w for _, w in pairs], dtype=np.float64)
            self._columns = (resources, columns, weights / weights.sum() if len(pairs) else weights)
        return self._columns[1], self._columns[2]

    def score(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, feasible: BoolArray) -> object:
        table = snapshot.nodes
        columns, weights = self._layout(table.resources)
        if not len(columns):
            return np.zeros(len(table.names), dtype=np.float64)
        allocatable = table.allocatable[:, columns]
        request = np.array([pod.requests.get(table.resources[c], 0) for c in columns], dtype=np.int64)
        share = np.minimum((table.requested[:, columns] + request) / np.maximum(allocatable, 1), 1.0)
        if not self.most:
            share = 1.0 - share
        share[allocatable <= 0] = 0.0
        scores: FloatArray = (share @ weights) * 100.0
        return scores
