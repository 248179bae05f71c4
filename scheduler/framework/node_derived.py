"""Node-derived data: what a plugin computes from the Node objects alone, kept while they stay the same.

Topology domains, untolerated PreferNoSchedule taints, preferred node-affinity weights and image sizes depend
only on the nodes (and the pod's shape): computed once per set of Node objects and kept on the snapshot
(`Snapshot.indexes`, handed to the next snapshot of the same node names), they cost a pass nothing until a Node
changes.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar, cast

from scheduler.api.node import Node
from scheduler.framework.snapshot import Snapshot

T = TypeVar("T")

KEPT_DERIVED = 512
"""Entries kept from pass to pass; past this, the oldest is dropped."""


@dataclass(frozen=True, slots=True)
class _Kept(Generic[T]):
    nodes: tuple[Node, ...]
    value: T


def node_derived(snapshot: Snapshot, key: Hashable, compute: Callable[[tuple[Node, ...]], T]) -> T:
    """`compute(nodes)` for the snapshot's Node objects, kept under `key` (which must say everything else
    `compute` reads) until a Node is replaced."""
    nodes = snapshot.nodes.nodes
    store = snapshot.indexes
    slot = ("node_derived", key)
    kept = store.get(slot)
    if isinstance(kept, _Kept) and kept.nodes is nodes:
        return cast(T, kept.value)
    value = compute(nodes)
    store.pop(slot, None)
    if len(store) >= KEPT_DERIVED:
        del store[next(iter(store))]
    store[slot] = _Kept(nodes, value)
    return value
