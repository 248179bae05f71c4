"""The devices of a cluster as one table: which node may use each, which are taken, and which match a selector.

Pools are gathered as kube-scheduler's `structured.GatherPools`: per driver and pool only the slices of the highest
`pool.generation`; a pool with fewer of those than its `resourceSliceCount` is incomplete (a request for `All` its
devices then fails). A device of a slice with a `nodeName` is that node's; one of a slice with a `nodeSelector` (or
`allNodes`, or a per-device selection) may be used from every node the selector admits.

The table is kept in the snapshot's indexes until a slice or a Node is replaced; what each set of selectors matches is
kept with it (`matching`), and the devices allocated (`Taken`) are counted once per pass from the claims, then by
Reserve and Unreserve as the pass goes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from operator import is_not
from typing import TYPE_CHECKING

import numpy as np

from scheduler.api.pod import NodeSelector, NodeSelectorRequirement, NodeSelectorTerm
from scheduler.api.resource_claim import ResourceClaim
from scheduler.api.resource_slice import Device, ResourceSlice
from scheduler.framework.snapshot import BoolArray, IntArray, Snapshot
from scheduler.plugins.dynamic_resources.selectors import SelectorError, Selectors, device_context
from scheduler.plugins.node_affinity import requirement_matches
from scheduler.plugins.volume_binding import requirement_mask

if TYPE_CHECKING:
    import cel  # imported where used (`selectors.py`)

INVENTORY_KEY = "DynamicResources.inventory"
TAKEN_KEY = "DynamicResources.taken"
DeviceId = tuple[str, str, str]
"""driver, pool, device: a device's identity (`structured.DeviceID`)."""


def unmodelled(device: Device, slice_: ResourceSlice) -> str | None:
    """A device feature the allocator does not model, which makes the device unusable here (never over-allocated)."""
    if device.consumes_counters or slice_.spec.shared_counters:
        return "consumesCounters"
    if device.binding_conditions:
        return "bindingConditions"
    if device.allow_multiple_allocations:
        return "allowMultipleAllocations"
    return None


def node_name_selector(node: str) -> NodeSelector:
    """The allocation's node selector for a node-local device (upstream's `metadata.name` field selector)."""
    requirement = NodeSelectorRequirement(key="metadata.name", operator="In", values=[node])
    return NodeSelector(node_selector_terms=[NodeSelectorTerm(match_fields=[requirement])])


def nodes_mask(snapshot: Snapshot, selector: NodeSelector) -> BoolArray:
    """The nodes a device's or an allocation's node selector admits: some non-empty term matches the node's labels
    and its name (`metadata.name` fields, which an allocation of node-local devices uses)."""
    names = snapshot.nodes.names
    found: BoolArray = np.zeros(len(names), dtype=np.bool_)
    for term in selector.node_selector_terms:
        if not term.match_expressions and not term.match_fields:
            continue
        matched: BoolArray = np.ones(len(names), dtype=np.bool_)
        for requirement in term.match_expressions:
            matched &= requirement_mask(snapshot, requirement)
        for requirement in term.match_fields:
            if requirement.key != "metadata.name":
                matched[:] = False
            elif requirement.operator == "In":
                named: BoolArray = np.zeros(len(names), dtype=np.bool_)
                named[[snapshot.nodes.index[n] for n in requirement.values if n in snapshot.nodes.index]] = True
                matched &= named
            else:
                matched &= np.array([requirement_matches(requirement, {"metadata.name": n}) for n in names])
        found |= matched
    return found


@dataclass(slots=True)
class Inventory:
    """Every usable device, in a fixed order (driver, pool, slice name, position), with where it may be used."""

    slices: tuple[ResourceSlice, ...]
    nodes: tuple[object, ...]
    ids: list[DeviceId] = field(default_factory=list)
    devices: list[Device] = field(default_factory=list)
    slice_of: list[ResourceSlice] = field(default_factory=list)
    rows: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """Per device, its node's row, or -1 when several nodes may use it (`reach`)."""
    reach: dict[int, BoolArray] = field(default_factory=dict)
    """Per device usable from several nodes, the nodes that may use it."""
    index: dict[DeviceId, int] = field(default_factory=dict)
    tainted: list[int] = field(default_factory=list)
    """The devices with taints, in order: the only ones a request's tolerations may rule out."""
    incomplete: set[tuple[str, str]] = field(default_factory=set)
    contexts: dict[int, cel.Context] = field(default_factory=dict)
    matching: dict[tuple[str, ...], tuple[BoolArray, str | None]] = field(default_factory=dict)

    def on_node(self, row: int) -> list[int]:
        """The devices the node of `row` may use, in order."""
        local = np.flatnonzero(self.rows == row).tolist()
        shared = [d for d, mask in self.reach.items() if mask[row]]
        return sorted(local + shared) if shared else local

    def match(self, expressions: tuple[str, ...], selectors: Selectors) -> tuple[BoolArray, str | None]:
        """Which devices every expression selects, and the first runtime error met (such a device does not match)."""
        kept = self.matching.get(expressions)
        if kept is not None:
            return kept
        found: BoolArray = np.ones(len(self.ids), dtype=np.bool_)
        problem: str | None = None
        for expression in expressions:
            for d in np.flatnonzero(found).tolist():
                context = self.contexts.get(d)
                if context is None:
                    context = self.contexts[d] = device_context(self.ids[d][0], self.devices[d])
                try:
                    found[d] = selectors.matches(expression, context)
                except SelectorError as err:
                    found[d] = False
                    if problem is None:
                        problem = f"{err}"
        self.matching[expressions] = (found, problem)
        return found, problem


def build_inventory(snapshot: Snapshot, slices: tuple[ResourceSlice, ...]) -> Inventory:
    newest: dict[tuple[str, str], int] = {}
    for s in slices:
        pool = (s.spec.driver, s.spec.pool.name)
        newest[pool] = max(newest.get(pool, s.spec.pool.generation), s.spec.pool.generation)
    current = [s for s in slices if s.spec.pool.generation == newest[(s.spec.driver, s.spec.pool.name)]]
    current.sort(key=lambda s: (s.spec.driver, s.spec.pool.name, s.metadata.name))
    inventory = Inventory(slices, snapshot.nodes.nodes)
    counts: dict[tuple[str, str], int] = {}
    declared: dict[tuple[str, str], int] = {}
    for s in current:
        pool = (s.spec.driver, s.spec.pool.name)
        counts[pool] = counts.get(pool, 0) + 1
        declared[pool] = max(declared.get(pool, 1), s.spec.pool.resource_slice_count)
    inventory.incomplete = {pool for pool, n in counts.items() if n < declared[pool]}
    rows: list[int] = []
    index = snapshot.nodes.index
    for s in current:
        spec = s.spec
        slice_reach: BoolArray | None = None
        if spec.node_selector is not None:
            slice_reach = nodes_mask(snapshot, spec.node_selector)
        elif spec.all_nodes:
            slice_reach = np.ones(len(snapshot.nodes.names), dtype=np.bool_)
        for device in spec.devices:
            if unmodelled(device, s) is not None:
                continue
            ident = (spec.driver, spec.pool.name, device.name)
            if ident in inventory.index:
                continue  # a duplicate name makes upstream's pool invalid; the first is kept
            reach = slice_reach
            node = spec.node_name
            if spec.per_device_node_selection:
                node = device.node_name
                if device.node_selector is not None:
                    reach = nodes_mask(snapshot, device.node_selector)
                elif device.all_nodes:
                    reach = np.ones(len(snapshot.nodes.names), dtype=np.bool_)
            d = len(inventory.ids)
            if node is not None:
                row = index.get(node)
                if row is None:
                    continue  # a node not (or no longer) in the cluster
                rows.append(row)
            elif reach is not None:
                rows.append(-1)
                inventory.reach[d] = reach
            else:
                continue
            if device.taints:
                inventory.tainted.append(d)
            inventory.ids.append(ident)
            inventory.devices.append(device)
            inventory.slice_of.append(s)
            inventory.index[ident] = d
    inventory.rows = np.array(rows, dtype=np.int64)
    return inventory


def inventory_of(snapshot: Snapshot) -> Inventory:
    """The snapshot's inventory, kept in its indexes while the slices and the Node objects stay the same."""
    slices = tuple(snapshot.devices.slices.values())
    kept = snapshot.indexes.get(INVENTORY_KEY)
    if (
        isinstance(kept, Inventory)
        and kept.nodes is snapshot.nodes.nodes
        and len(kept.slices) == len(slices)
        and not any(map(is_not, kept.slices, slices))
    ):
        return kept
    inventory = build_inventory(snapshot, slices)
    snapshot.indexes[INVENTORY_KEY] = inventory
    return inventory


def allocated_ids(claim: ResourceClaim) -> Iterable[DeviceId]:
    """The devices a claim's allocation holds (admin access holds none: it may use devices others hold)."""
    allocation = claim.status.allocation
    if allocation is None:
        return ()
    return [(r.driver, r.pool, r.device) for r in allocation.devices.results if not r.admin_access]


@dataclass(slots=True)
class Taken:
    """How many claims hold each device of an inventory: counted from the claims once per pass, then kept by
    Reserve and Unreserve (`add`)."""

    inventory: Inventory
    claims: Mapping[str, ResourceClaim]
    counts: IntArray

    def add(self, ids: Iterable[DeviceId], by: int) -> None:
        for ident in ids:
            d = self.inventory.index.get(ident)
            if d is not None:
                self.counts[d] += by

    def free(self) -> BoolArray:
        result: BoolArray = self.counts == 0
        return result


def taken_of(snapshot: Snapshot, inventory: Inventory) -> Taken:
    """The devices held now: by the claims' allocations, and by the claims this pass assumed."""
    kept = snapshot.indexes.get(TAKEN_KEY)
    claims = snapshot.devices.claims
    if isinstance(kept, Taken) and kept.inventory is inventory and kept.claims is claims:
        return kept
    counts: IntArray = np.zeros(len(inventory.ids), dtype=np.int64)
    taken = Taken(inventory, claims, counts)
    for claim in snapshot.devices.all_claims():
        taken.add(allocated_ids(claim), 1)
    snapshot.indexes[TAKEN_KEY] = taken
    return taken
