"""Snapshot: the cluster as one scheduling cycle sees it, with node capacity as numpy arrays.

Free capacity is `allocatable - requested`, both (nodes x resources) int64 arrays in scheduling units
(`scheduler.api.quantity`). Placing or removing a pod changes one row by its request vector, so a
gang placement or a preemption trial never rebuilds the snapshot (docs/DESIGN.md, Performance).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from itertools import compress, count, islice
from operator import is_, is_not

import numpy as np
import numpy.typing as npt

from scheduler.api.config import SchedulerConfiguration
from scheduler.api.node import Node
from scheduler.api.pdb import PodDisruptionBudget
from scheduler.api.pod_group import PodGroup
from scheduler.api.priority_class import PriorityClass
from scheduler.api.queue import Queue
from scheduler.framework.devices import Devices
from scheduler.framework.namespaces import Namespaces
from scheduler.framework.pod_info import PodInfo, SchedulingUnit
from scheduler.framework.storage import Storage
from scheduler.framework.unit_key import unit_key

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


def usage_row(resource_index: dict[str, int], requests: Mapping[str, int]) -> IntArray:
    """What a placed pod consumes, as a row over the resource columns; resources no node has are not counted."""
    row = np.zeros(len(resource_index), dtype=np.int64)
    for name, amount in requests.items():
        column = resource_index.get(name)
        if column is not None:
            row[column] = amount
    return row


def replaced_rows(before: Sequence[object], after: Sequence[object]) -> list[int]:
    """The rows whose object is not the same in `after` as in `before` (of equal length): a snapshot's rows are
    replaced, never changed in place, so the rest are unchanged. The scan runs in C (`map`, `compress`): a
    Python loop over 10,000 nodes cost a pass ~2 ms each time it was made."""
    if len(before) != len(after):
        raise ValueError(f"rows differ in number: {len(before)} and {len(after)}")
    return list(compress(range(len(after)), map(is_not, before, after)))


def changed_rows(
    before: Sequence[Sequence[object]],
    before_versions: IntArray,
    after: Sequence[Sequence[object]],
    after_versions: IntArray,
) -> list[int]:
    """The rows of two snapshots' `running` that do not hold the same pods in the same order, from their
    `versions`: only the rows whose lists differ are compared, by identity (by value would read whole pods).
    Comparing the lists of every row, even at C speed, cost 1.5 ms a pass twice at 10,000 nodes on the real API
    server (py-spy, issue 23)."""
    return [
        row
        for row in np.flatnonzero(before_versions != after_versions).tolist()
        if len(before[row]) != len(after[row]) or not all(map(is_, before[row], after[row]))
    ]


@dataclass(slots=True)
class RowsSeen:
    """The row versions a column derived from `running` was last brought to, and how far into which snapshot's
    `row_log`: within a pass only the rows logged since are looked at; a new snapshot is compared by version."""

    versions: IntArray
    log: list[int] | None = None
    at: int = 0

    def changed(self, snapshot: Snapshot) -> list[int]:
        """The rows whose pods may have changed since the last call (now marked seen)."""
        log = snapshot.row_log
        if self.log is log:
            if self.at == len(log):
                return []
            if self.at == len(log) - 1:  # a pod placed since: a pass asks this for every pod
                self.at = len(log)
                row = log[-1]
                self.versions[row] = snapshot.versions[row]
                return [row]
            rows = sorted(set(log[self.at :]))
        else:
            rows = np.flatnonzero(self.versions != snapshot.versions).tolist()
        self.log, self.at = snapshot.row_log, len(snapshot.row_log)
        if rows:
            self.versions[rows] = snapshot.versions[rows]
        return rows


ROW_VERSIONS = count(1)
"""Where every row list of `running` ever made gets its version: none is given twice, so two rows of the same
version are the same list (a snapshot copies its base's lists and their versions together)."""


def new_row_versions(rows: int) -> IntArray:
    """Versions for `rows` new row lists."""
    return np.fromiter(islice(ROW_VERSIONS, rows), dtype=np.int64, count=rows)


@dataclass(slots=True)
class NodeTable:
    names: tuple[str, ...]
    nodes: tuple[Node, ...]
    resources: tuple[str, ...]
    allocatable: IntArray
    requested: IntArray
    index: dict[str, int] = field(default_factory=dict)
    resource_index: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        """Index the names, unless given the snapshot builder's (the same names, read only): 10,000 a pass."""
        if len(self.index) != len(self.names):
            self.index = {name: i for i, name in enumerate(self.names)}
        if len(self.resource_index) != len(self.resources):
            self.resource_index = {name: i for i, name in enumerate(self.resources)}

    def vector(self, requests: Mapping[str, int]) -> IntArray:
        """A request as a row; a resource no node has makes the pod fit nowhere (allocatable 0)."""
        row = np.zeros(len(self.resources), dtype=np.int64)
        for name, amount in requests.items():
            column = self.resource_index.get(name)
            if column is None:
                if amount > 0:
                    row[:] = np.iinfo(np.int64).max // 4
                    return row
                continue
            row[column] = amount
        return row

    def usage(self, requests: Mapping[str, int]) -> IntArray:
        return usage_row(self.resource_index, requests)

    def free(self) -> IntArray:
        return self.allocatable - self.requested


@dataclass(slots=True)
class Snapshot:
    """The cluster as one pass sees it. One built with a `PodInfoCache` is valid until the next build from that
    cache, which brings `pods` up to date in place (as kube-scheduler's cache updates its snapshot): copying
    100,000 PodInfos cost a pass 11 ms at 10,000 nodes (issue 23)."""

    now: datetime
    nodes: NodeTable
    pods: dict[str, PodInfo]
    running: list[list[PodInfo]]
    """Per node the pods on it. A row is never changed in place but replaced (`assume`, `forget`, and the
    snapshot builder), with a new version in `versions`, so a row of the same version as in an earlier snapshot
    is the same list and holds the same pods: the queue's hints and the preemption's columns look only at the
    rows whose version changed (`changed_rows`), not pod by pod, at 10,000 nodes."""
    versions: IntArray
    """Per row of `running`, the version of its list (`ROW_VERSIONS`)."""
    groups: dict[str, PodGroup]
    priority_classes: dict[str, PriorityClass]
    pdbs: tuple[PodDisruptionBudget, ...]
    queues: dict[str, Queue]
    config: SchedulerConfiguration
    unbound: Collection[PodInfo] = ()
    """The pods without a node when the snapshot was built, in `pods`' order: the pending pods are among them,
    so a pass need not walk every bound pod to find them. As `pods`, the builder's own, valid until its next
    build: a copy of 11,000 cost a backlog's pass 0.5 ms on the real server (issue 23)."""
    members: dict[str, list[PodInfo]] = field(default_factory=dict)
    """Every existing, non-terminal pod of each PodGroup (`namespace/name`), bound or not."""
    nominated: list[PodInfo] = field(default_factory=list)
    """Pending pods with `status.nominatedNodeName` on a known node: they hold room there."""
    queued: list[PodInfo] = field(default_factory=list)
    """Pods labelled with a queue (`QUEUE_LABEL`), bound or not: checks over them need not walk every pod."""
    static_masks: dict[object, object] = field(default_factory=dict)
    """Cache of static feasibility verdicts per pod shape (`framework.feasibility`), kept by the snapshot builder
    from one snapshot to the next of the same node names: each verdict says which Node objects it is for."""
    indexes: dict[object, object] = field(default_factory=dict)
    """Derived per-node data the pod-constraint plugins read (`framework/pod_counts.py`, `framework/topology.py`),
    kept by the snapshot builder for the next snapshot of the same node names, as `static_masks`: each entry says
    which row versions or Node objects it is for, so a pass recounts only the rows that changed."""
    row_log: list[int] = field(default_factory=list)
    """The rows `assume` and `forget` replaced, in order: a derived column kept by row (`RowsSeen`) reads what changed
    since it last looked from here, rather than compare every row's version for each pod."""
    replaced: set[str] = field(default_factory=set)
    """The keys whose PodInfo `assume` or `forget` replaced in `pods`: the snapshot builder puts the charged ones
    back before the next build."""
    class_names: Collection[str | None] = ()
    """The priority class names the PodInfos of `pods` carry, counted by the snapshot builder."""
    build: int = 0
    """Which build of its `PodInfoCache` this snapshot is (0: built without one)."""
    changed: Collection[str] | None = None
    """The pods whose PodInfo this build charged or uncharged since the cache's previous build, in the order last
    charged (`unbound`'s order): the pending pods are kept by difference from these (`framework/pending.py`).
    None when not known: a first build, or a new node table or priority context, which charges every pod."""
    changed_groups: Collection[str] = ()
    """The PodGroups of the pods in `changed`, before and after: those whose members may have changed."""
    group_class_names: Collection[str | None] = ()
    """The priority class names the PodGroups name."""
    queued_groups: Collection[str] = ()
    """The PodGroups that name a queue."""
    storage: Storage = field(default_factory=Storage)
    """The claims, volumes, StorageClasses and CSINodes the volume plugins read."""
    devices: Devices = field(default_factory=Devices)
    """The DeviceClasses, ResourceSlices and ResourceClaims DynamicResources reads."""
    namespaces: Namespaces = field(default_factory=Namespaces)
    """The namespaces' labels, which pod affinity terms select namespaces by (`pod_terms.term_of`)."""

    def holds_room(self, pod: PodInfo, unit: SchedulingUnit, elsewhere: frozenset[str] | None = None) -> bool:
        """Whether nominated `pod` holds room on its nominated node against `unit`: the one rule for placing a
        unit (the runner) and for finding it victims (`preemption.candidates`).

        As kube-scheduler's `addGENominatedPods`: a pod nominated to a node keeps its room there against
        pods of lower or equal priority. Not against its own unit (a member of the group, or the pod
        itself), and not once this pass placed it: it then counts on that node as placed already.
        With `elsewhere` (the nodes of a unit's own nominations, `held_against`), it also holds whatever the
        priorities when it is nominated to a node not among them. Against a unit without nominations that
        `spares_claims`, a member of another pod group holds whatever the priorities: that room is its
        preemption's.
        """
        return (
            (
                pod.priority >= unit.priority
                or (elsewhere is not None and pod.pod.status.nominated_node_name not in elsewhere)
                or (unit.spares_claims and elsewhere is None and pod.group_key is not None)
            )
            and unit_key(pod.group_key, pod.key) != unit.key
            and getattr(self.pods.get(pod.key), "node_name", None) is None
        )

    def held_against(self, unit: SchedulingUnit) -> list[PodInfo]:
        """The nominated pods that hold room against `unit` (`holds_room`).

        A unit with nominations of its own is waiting for its own victims to go: every other unit's
        nomination to another node holds against it, whatever the priorities. Otherwise a higher-priority
        gang whose victims are still terminating takes the room a lower-priority gang's victims already
        left, and that gang decides again, on other victims or on the first gang's (4 gangs preempting at
        once, issue 23). On its own nominated nodes the priorities decide, as upstream. Nominations that
        can no longer be met are cleared by the unit's next preemption attempt.
        """
        index = self.nodes.index
        own = frozenset(
            name for m in unit.members if (name := m.pod.status.nominated_node_name) is not None and name in index
        )
        return [p for p in self.nominated if self.holds_room(p, unit, own or None)]

    def claims_against(self, unit: SchedulingUnit) -> bool:
        """Whether some other pod group's nomination holds room `unit` could take by priority alone: the room
        that group's preemption claimed (`SchedulingUnit.spares_claims`)."""
        if not self.nominated:
            return False
        return len(self.held_against(replace(unit, spares_claims=True))) > len(self.held_against(unit))

    def assume(self, pod: PodInfo, node: int) -> PodInfo:
        """Place `pod` on row `node` in this snapshot only (a trial placement, undone by `forget`).

        Returns the placed PodInfo (`node_name` and `scheduled_at` set), which `running` and `pods` now hold.
        """
        placed = replace(pod, node_name=self.nodes.names[node], scheduled_at=self.now)
        self.nodes.requested[node] += self.nodes.usage(pod.requests)
        self.running[node] = [*self.running[node], placed]
        self.versions[node] = next(ROW_VERSIONS)
        self.row_log.append(node)
        self.pods[pod.key] = placed
        self.replaced.add(pod.key)
        return placed

    def nominate(self, pod: PodInfo, node_name: str) -> None:
        """Record a nomination made during this cycle (empty `node_name`: cleared), so that the units
        tried after it see the room it holds, as kube-scheduler's nominator does."""
        self.nominated = [p for p in self.nominated if p.key != pod.key]
        if node_name in self.nodes.index:
            status = pod.pod.status.model_copy(update={"nominated_node_name": node_name})
            self.nominated.append(replace(pod, pod=pod.pod.model_copy(update={"status": status})))

    def forget(self, pod: PodInfo, node: int) -> None:
        """Undo `assume`: `pod` may be the pending or the placed PodInfo."""
        self.nodes.requested[node] -= self.nodes.usage(pod.requests)
        row = list(self.running[node])
        for i in range(len(row) - 1, -1, -1):
            if row[i].key == pod.key:
                del row[i]
                break
        self.running[node] = row
        self.versions[node] = next(ROW_VERSIONS)
        self.row_log.append(node)
        self.pods[pod.key] = replace(pod, node_name=None, scheduled_at=None)
        self.replaced.add(pod.key)

    def only_rows(self, rows: IntArray) -> Snapshot:
        """A snapshot holding only `rows` of the node table (copies), for row-local filters and scores."""
        table = self.nodes
        picked = rows.tolist()
        sub = NodeTable(
            names=tuple([table.names[r] for r in picked]),
            nodes=tuple([table.nodes[r] for r in picked]),
            resources=table.resources,
            allocatable=table.allocatable[rows],
            requested=table.requested[rows],
        )
        return Snapshot(
            now=self.now,
            nodes=sub,
            pods=self.pods,
            running=[self.running[r] for r in picked],
            versions=self.versions[rows],
            groups=self.groups,
            priority_classes=self.priority_classes,
            pdbs=self.pdbs,
            queues=self.queues,
            config=self.config,
            class_names=self.class_names,
            group_class_names=self.group_class_names,
            queued_groups=self.queued_groups,
            storage=self.storage,
            devices=self.devices,
            namespaces=self.namespaces,
        )
