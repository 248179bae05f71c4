"""Topology domains: the nodes grouped by the value of one label, as numbers numpy can sum over.

A domain is every node with the same value of a label (`kubernetes.io/hostname`, `topology.kubernetes.io/zone`,
a rack label); a node without the label is in none. Inter-pod affinity and topology spread count pods per domain:
with each node's domain as an integer, that is one `bincount` over the per-node counts (`pod_counts.py`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scheduler.api.node import Node
from scheduler.framework.node_derived import node_derived
from scheduler.framework.snapshot import BoolArray, IntArray, Snapshot


@dataclass(frozen=True, slots=True)
class Domains:
    """`ids[row]`: the domain of each node (-1: the node lacks the label); `values[id]`: its label value."""

    ids: IntArray
    values: tuple[str, ...]

    @property
    def labelled(self) -> BoolArray:
        return self.ids >= 0

    def totals(self, per_node: IntArray, rows: BoolArray | None = None) -> IntArray:
        """Per domain, the sum of `per_node` over its nodes (only `rows`, when given)."""
        keep = self.labelled if rows is None else self.labelled & rows
        return np.bincount(self.ids[keep], weights=per_node[keep], minlength=len(self.values)).astype(np.int64)

    def spread(self, per_domain: IntArray) -> IntArray:
        """Each node's domain's value of `per_domain`; 0 for a node in no domain."""
        return np.where(self.labelled, per_domain[np.maximum(self.ids, 0)] if len(per_domain) else 0, 0)

    def shared(self, per_node: IntArray) -> IntArray:
        """Per node, the sum of `per_node` over the node's domain (0 for a node in none)."""
        return self.spread(self.totals(per_node))


def domains(snapshot: Snapshot, key: str) -> Domains:
    """The domains of label `key` over the snapshot's nodes, kept while its Node objects stay the same."""
    return node_derived(snapshot, ("domains", key), lambda nodes: _domains(nodes, key))


def _domains(nodes: tuple[Node, ...], key: str) -> Domains:
    values: dict[str, int] = {}
    ids = np.fromiter(
        (
            values.setdefault(value, len(values)) if (value := node.metadata.labels.get(key)) is not None else -1
            for node in nodes
        ),
        dtype=np.int64,
        count=len(nodes),
    )
    return Domains(ids, tuple(values))
