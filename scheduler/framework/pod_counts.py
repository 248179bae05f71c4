"""Pod counts: per node, how many of the pods on it a rule cares about, kept by the rows that changed.

Inter-pod affinity and topology spread ask, for every node, how many pods of some kind run there (or in its
domain). Counting every pod for every pending pod would cost a pass O(pods) per pod; instead each count is a
column over the nodes, kept on the snapshot under its key (`Snapshot.indexes`, handed from snapshot to snapshot
of the same node names) with the row versions it was made at. A snapshot's row is replaced with a new version
whenever its pods change (the builder, `assume`, `forget`), so a count is brought up to date by recounting only
the rows whose version differs: a pod placed in this very cycle counts at once, which is how the members of a
gang placed together see each other.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass

import numpy as np

from scheduler.framework.pod_info import PodInfo
from scheduler.framework.snapshot import IntArray, RowsSeen, Snapshot

KEPT_COUNTS = 512
"""Counts kept from pass to pass; past this, the oldest is dropped (each is one int64 per node)."""


@dataclass(slots=True)
class Counted:
    """Per node row, the keys of the pods a rule accepts (`keys`) and how many (`counts`), as of `seen`."""

    seen: RowsSeen
    counts: IntArray
    keys: list[tuple[str, ...]]


def counted(snapshot: Snapshot, key: Hashable, accepts: Callable[[PodInfo], bool]) -> Counted:
    """The pods on each node `accepts` takes, kept under `key` (which must say everything `accepts` depends on
    besides the pod: a `PodTerm`, say). The result is the cache's own: read it, do not change it."""
    store = snapshot.indexes
    slot = ("pod_counts", key)
    versions = snapshot.versions
    kept = store.get(slot)
    running = snapshot.running
    if not isinstance(kept, Counted) or len(kept.seen.versions) != len(versions):
        keys = [tuple(p.key for p in row if accepts(p)) for row in running]
        seen = RowsSeen(versions.copy(), snapshot.row_log, len(snapshot.row_log))
        kept = Counted(seen, np.fromiter(map(len, keys), dtype=np.int64, count=len(keys)), keys)
        store.pop(slot, None)
        if len(store) >= KEPT_COUNTS:
            del store[next(iter(store))]
        store[slot] = kept
        return kept
    for row in kept.seen.changed(snapshot):
        found = tuple(p.key for p in running[row] if accepts(p))
        kept.keys[row] = found
        kept.counts[row] = len(found)
    return kept


def pod_counts(snapshot: Snapshot, key: Hashable, accepts: Callable[[PodInfo], bool]) -> IntArray:
    """Per node row, how many pods on it `accepts` takes (`counted`)."""
    return counted(snapshot, key, accepts).counts
