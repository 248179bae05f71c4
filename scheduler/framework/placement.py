"""Placement memo: filter and score verdicts per pod shape, kept current by the rows that changed.

Within a pass, thousands of pods share a handful of shapes (same selectors, tolerations and request
vector). Filters and scores are row-local (a node's verdict depends only on that node's row), so once
a shape's feasibility and scores are known for all nodes, placing a pod only invalidates the row it
went to. The memo recomputes just the rows changed since it last looked (through a sub-snapshot
holding those rows), which turns a pass from O(pods x nodes) numpy work into O(pods x changed rows)
plus one argmax per pod. Results are identical to recomputing everything.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.feasibility import combine, pod_shape, static_mask
from scheduler.framework.interfaces import FilterPlugin, NodeVerdict, ScorePlugin
from scheduler.framework.pod_info import PodInfo
from scheduler.framework.profile import Profile
from scheduler.framework.snapshot import BoolArray, Snapshot

FloatArray = npt.NDArray[np.float64]

FULL_RECOMPUTE_SHARE = 8
"""Recompute everything when more than 1/8 of the rows changed: the sub-snapshot no longer pays."""


@dataclass(slots=True)
class _Entry:
    static: BoolArray
    feasible: BoolArray
    ranked: FloatArray
    seen: int
    filters: tuple[FilterPlugin, ...]
    scores: tuple[ScorePlugin, ...]
    """The per-node filters and scores that have something to say about this shape (`skipped`)."""


def skipped(plugin: object, pod: PodInfo) -> bool:
    """Whether a plugin's optional `skips(pod)` says it has nothing to say about `pod` (upstream's PreFilter or
    PreScore returning Skip: a pod without host ports to NodePorts, without volumes to the volume filters): it is
    then not asked on any row."""
    skips = getattr(plugin, "skips", None)  # not isinstance: a runtime Protocol check costs microseconds
    return skips is not None and bool(skips(pod))


class PlacementMemo:
    def __init__(self, snapshot: Snapshot, profile: Profile) -> None:
        self.snapshot = snapshot
        self.profile = profile
        self._changes: list[int] = []
        self._entries: dict[Hashable, _Entry] = {}

    def changed(self, row: int) -> None:
        """Record that `requested[row]` changed (assume, rollback, a nomination held or released)."""
        self._changes.append(row)

    def verdict(self, pod: PodInfo, state: CycleState) -> NodeVerdict:
        """The full combined verdict, with reasons (for messages and PostFilter); not memoised."""
        count = len(self.snapshot.nodes.names)
        static = static_mask(pod, self.snapshot, self.profile.static_filters, state)
        verdicts = [static, *(f.filter(state, pod, self.snapshot) for f in self.profile.filters)]
        return combine([*verdicts, *self._constraints(pod, state)], count)

    def _constraints(self, pod: PodInfo, state: CycleState) -> list[NodeVerdict]:
        """The pod-constraint filters' verdicts that apply to `pod` (none for most pods)."""
        return [v for f in self.profile.pod_constraints if (v := f.filter(state, pod, self.snapshot)) is not None]

    def best(self, pod: PodInfo, state: CycleState, within: BoolArray | None = None) -> int | None:
        """The highest-scoring feasible node for `pod` (lowest index on ties), or None; only among `within` when
        given (a pod group's topology domain, whose nodes are then the only ones the normalised scores see). The
        pod-constraint filters are asked afresh: their verdicts change on every node of a domain a pod is placed
        in."""
        constraints = self._constraints(pod, state)
        key = (pod_shape(pod), tuple(sorted(pod.requests.items())))
        entry = self._entries.get(key)
        count = len(self.snapshot.nodes.names)
        if entry is None:
            entry = self._full(pod, state)
            self._entries[key] = entry
        elif entry.seen < len(self._changes):
            rows = np.array(sorted(set(self._changes[entry.seen :])), dtype=np.int64)
            if len(rows) * FULL_RECOMPUTE_SHARE > count:
                entry = self._full(pod, state)
                self._entries[key] = entry
            else:
                self._update(entry, pod, state, rows)
        allowed = entry.feasible
        if constraints or within is not None:
            allowed = allowed.copy() if within is None else allowed & within
            for verdict in constraints:
                allowed &= verdict.feasible
        if not allowed.any():
            return None
        ranked = np.where(allowed, entry.ranked, -np.inf) if constraints or within is not None else entry.ranked
        for plugin in self.profile.pod_scores:
            scores = plugin.pod_score(state, pod, self.snapshot, allowed)
            if scores is not None:
                ranked = ranked + plugin.weight * np.asarray(scores, dtype=np.float64)
        return int(np.argmax(ranked))

    def _scores(
        self, pod: PodInfo, state: CycleState, snapshot: Snapshot, feasible: BoolArray, plugins: Sequence[ScorePlugin]
    ) -> FloatArray:
        total = np.zeros(len(feasible), dtype=np.float64)
        for plugin in plugins:
            total += plugin.weight * np.asarray(plugin.score(state, pod, snapshot, feasible), dtype=np.float64)
        return np.where(feasible, total, -np.inf)

    def _full(self, pod: PodInfo, state: CycleState) -> _Entry:
        static = static_mask(pod, self.snapshot, self.profile.static_filters, state).feasible
        filters = tuple(f for f in self.profile.filters if not skipped(f, pod))
        scores = tuple(s for s in self.profile.scores if not skipped(s, pod))
        feasible = static.copy()
        for plugin in filters:
            feasible &= plugin.filter(state, pod, self.snapshot).feasible
        ranked = self._scores(pod, state, self.snapshot, feasible, scores)
        return _Entry(static, feasible, ranked, len(self._changes), filters, scores)

    def _update(self, entry: _Entry, pod: PodInfo, state: CycleState, rows: npt.NDArray[np.int64]) -> None:
        part = self.snapshot.only_rows(rows)
        feasible = entry.static[rows]
        for plugin in entry.filters:
            feasible &= plugin.filter(state, pod, part).feasible
        entry.feasible[rows] = feasible
        entry.ranked[rows] = self._scores(pod, state, part, feasible, entry.scores)
        entry.seen = len(self._changes)
