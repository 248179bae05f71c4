"""Queueing hints: which changes to the cluster could help a parked unit fit, so that only those wake it.

kube-scheduler's QueueingHint (KEP-4247, `pkg/scheduler/backend/queue`) in our terms. The queue sights the
cluster twice a pass (the snapshot as the pass starts, and as it leaves it) and finds, between two sightings,
the events below. Each wakes only the parked units it could help:

- `node`: a node added or removed, or changed in what a filter reads (allocatable, labels, taints,
  unschedulable): every unit. A Node whose new resourceVersion changes none of those (a kubelet's status
  heartbeat, its images) wakes nothing, as kube-scheduler's node-update hints.
- `room`: some node's requested resources fell in any dimension (a pod deleted, finished or moved, a Binding
  refused): every unit.
- `nomination`: a nomination dropped (other than by its pod binding on its nominated node): it held room against
  units of its priority and below, which it wakes.
- `victim`: a pod newly placed below a unit's priority, which that unit may preempt (an elastic gang over its
  minCount may now lose a member it could not spare before): units that may preempt, above that priority.
- `terminating`: a pod on a node began terminating (a victim, say). Its room is not free yet, but the victim
  search counts it as coming free: a unit may fit there "without preempting" and be nominated. Units that may
  preempt, whatever their priority (hypothesis found it: a gang's member preempted by a higher pod, and the
  gang's parked late member fits in what the member leaves, nominated at once by a retry, not by the hints).
- `policy`: a PriorityClass, PodDisruptionBudget, Queue or PodGroup (spec, labels, annotations such as
  min-runtime's start) added, removed or changed, which the victim search reads: every unit that may preempt.
- `storage`: a PersistentVolumeClaim, PersistentVolume, StorageClass or CSINode added, removed or changed (a claim
  created or bound, a volume's labels, a node's attach limit), or a DeviceClass, ResourceSlice or ResourceClaim
  (devices published, a claim made from its template, allocated or released): every unit, as any node change.
- `placed`: a pod newly placed on some node: units whose pods have pod affinity or topology spread constraints
  (it may be the pod their affinity needs, or raise the least loaded domain), whatever their priority.
- `namespace`: a Namespace added, removed or relabelled: units whose pods have pod affinity or anti-affinity (a
  term's namespaceSelector may select other namespaces now) and units with a pod in that namespace (a running
  pod's term may select it, or no longer), whatever their priority. kube-scheduler registers no Namespace event
  and leaves such pods to its periodic flush of the unschedulable pods, which Phalanx does not have.
- A unit no node could take whatever was removed (UnschedulableAndUnresolvable: larger than every node, say)
  sleeps through everything but `node`, `storage`, `placed` (when constrained), `namespace` (as above) and its
  own `group` and `pod`.
- `group`: the unit's own PodGroup so changed; `pod`: its own pods (a member added or gone, another spec,
  labels, requests or priority). The queue finds these two per unit (`SchedulingQueue.pop_order`).

So a binding at the unit's priority or above wakes nothing: it only takes room. What the old rule (any change
to a fingerprint of the nodes, what they hold, the nominations and the groups) would have retried is still
tracked (`Changes.any`), to count the retries the hints avoid and for a unit waiting for its own victims,
which any change wakes at once.

Pods that left a node and pods new on one are found pod by pod between passes, so a pod deleted and another of
the same requests placed on the same node (`requested` as it was, which the fingerprint rule missed) is seen.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from scheduler.api.node import Node
from scheduler.api.pod_group import PodGroup
from scheduler.framework.namespaces import Namespaces
from scheduler.framework.pod_info import PodInfo
from scheduler.framework.snapshot import IntArray, Snapshot, changed_rows

NO_PRIORITY = -(2**63)


@dataclass(slots=True)
class Sighting:
    """What a parked unit's chances depend on, as one snapshot showed it (references, not copies, but for
    `requested`, which a pass changes in place)."""

    names: tuple[str, ...]
    nodes: tuple[Node, ...]
    requested: IntArray
    running: list[list[PodInfo]]
    """Per node the pods on it; only read as the earlier of two sightings, for the nodes whose requests rose."""
    versions: IntArray
    """`running`'s row versions (`Snapshot.versions`), a reference as `running` is."""
    nominated: dict[str, tuple[str, int]]
    """Each pending nominated pod: its node and priority."""
    policy: tuple[tuple[object, ...], ...]
    """The PriorityClasses, PodDisruptionBudgets and Queues."""
    groups: dict[str, PodGroup]
    placed: dict[str, str] = field(default_factory=dict)
    """Pods placed since the snapshot was built, and where: their nominations are not dropped."""
    storage: tuple[tuple[object, ...], ...] = ()
    """The storage objects (`Storage.sighting`)."""
    namespaces: Namespaces = field(default_factory=Namespaces)
    """The namespaces' labels (`Snapshot.namespaces`): the same object while none changed."""

    @classmethod
    def of(cls, snapshot: Snapshot, placed: Iterable[PodInfo] = ()) -> Sighting:
        """The snapshot as it is now; `placed`: the pods the pass placed on it so far."""
        where = {p.key: p.node_name or "" for p in placed}
        return cls(
            names=snapshot.nodes.names,
            nodes=snapshot.nodes.nodes,
            requested=snapshot.nodes.requested.copy(),
            running=snapshot.running,
            versions=snapshot.versions,
            nominated={
                p.key: (p.pod.status.nominated_node_name or "", p.priority)
                for p in snapshot.nominated
                if p.key not in where
            },
            policy=(tuple(snapshot.priority_classes.values()), snapshot.pdbs, tuple(snapshot.queues.values())),
            groups=dict(snapshot.groups),
            placed=where,
            storage=snapshot.storage.sighting() + snapshot.devices.sighting(),
            namespaces=snapshot.namespaces,
        )


@dataclass(slots=True)
class Changes:
    """The events between two sightings (see the module docstring)."""

    any: bool = False
    """The old fingerprint changed: nodes, requested, nominations or the set of groups."""
    node: bool = False
    room: bool = False
    nomination: int = NO_PRIORITY
    """The highest priority of a dropped nomination: units at or below it may use the room it held."""
    victim: int | None = None
    """The lowest priority of a pod newly placed (None: none was)."""
    terminating: bool = False
    """A pod on a node began terminating."""
    policy: bool = False
    groups: set[str] = field(default_factory=set)
    """PodGroups added, removed or changed (spec, labels, annotations)."""
    storage: bool = False
    """A claim, volume, StorageClass or CSINode added, removed or changed."""
    namespaces: set[str] = field(default_factory=set)
    """The namespaces added, removed or relabelled."""


def changes(before: Sighting, after: Sighting, placed: Iterable[PodInfo] | None = None) -> Changes:
    """What changed from `before` to `after`. Within a pass, the pods it `placed` are the new ones; between passes
    (None) they are found on the nodes whose requests rose."""
    found = Changes()
    if _nodes_changed(before, after):
        found.any = True
        found.node = _nodes_changed(before, after, _placing)
    if not found.node:
        if (after.requested < before.requested).any():
            found.any = found.room = True
        if (after.requested != before.requested).any():
            found.any = True
        if placed is None:
            left, found.victim, found.terminating = _moved(before, after)
            found.room = found.room or left
            found.any = found.any or left or found.victim is not None or found.terminating
    if placed is not None:
        found.victim = min((p.priority for p in placed), default=None)
    for key, (node, priority) in before.nominated.items():
        if after.nominated.get(key, ("", 0))[0] == node:
            continue
        found.any = True
        if after.placed.get(key) != node:
            found.nomination = max(found.nomination, priority)
    if not found.any and after.nominated.keys() - before.nominated.keys():
        found.any = True
    found.policy = any(_changed(a, b) for a, b in zip(before.policy, after.policy, strict=True))
    if before.groups is not after.groups and before.groups != after.groups:  # the same objects: C speed
        if before.groups.keys() != after.groups.keys():
            found.any = True
        for key in before.groups.keys() | after.groups.keys():
            a, b = before.groups.get(key), after.groups.get(key)
            if a is not b and (a is None or b is None or _group_changed(a, b)):
                found.groups.add(key)
    found.policy = found.policy or bool(found.groups)
    if len(before.storage) != len(after.storage) or any(
        _changed(a, b) for a, b in zip(before.storage, after.storage, strict=True)
    ):
        found.any = found.storage = True
    if before.namespaces is not after.namespaces:
        was, now = before.namespaces.labels, after.namespaces.labels
        found.namespaces = {name for name in was.keys() | now.keys() if was.get(name) != now.get(name)}
        found.any = found.any or bool(found.namespaces)
    return found


def _nodes_changed(before: Sighting, after: Sighting, differ: Callable[[Node, Node], bool] = lambda a, b: True) -> bool:
    """A node added or removed, or a Node object with a new resourceVersion (the snapshot keeps the object of
    an unchanged node) that `differ` says changed."""
    if before.names != after.names or before.requested.shape != after.requested.shape:
        return True
    return before.nodes is not after.nodes and any(
        a is not b and a.metadata.resource_version != b.metadata.resource_version and differ(a, b)
        for a, b in zip(before.nodes, after.nodes, strict=True)
    )


def _placing(before: Node, after: Node) -> bool:
    """Whether a Node changed in what a filter reads: labels, taints, unschedulable, allocatable."""
    return (
        before.metadata.labels != after.metadata.labels
        or before.spec != after.spec
        or before.status.allocatable != after.status.allocatable
        or before.status.capacity != after.status.capacity
    )


def _moved(before: Sighting, after: Sighting) -> tuple[bool, int | None, bool]:
    """Between passes: whether a pod left some node, the lowest priority of a pod new on one (None: none), and
    whether a pod on one began terminating.

    Found pod by pod, not from `requested`: a pod gone and another of the same requests placed on the same node
    leave it as it was, yet the room changed hands (hypothesis found it: a preemptor's victim gone, and a pod of
    lower priority placed where it was, which the preemptor may take). An unchanged node's row is the same list in
    both snapshots, of the same version (`Snapshot.versions`), so only the rows of a new version are compared:
    comparing every node's pods took 22 ms a pass at 10,000 nodes.
    """
    left = terminating = False
    lowest: int | None = None
    for row in changed_rows(before.running, before.versions, after.running, after.versions):
        was, now = before.running[row], after.running[row]
        old = {p.key: p for p in was}
        new = {p.key for p in now}
        left = left or any(key not in new for key in old)
        for info in now:
            earlier = old.get(info.key)
            if earlier is None:
                if lowest is None or info.priority < lowest:
                    lowest = info.priority
            elif earlier is not info and _terminating(info) and not _terminating(earlier):
                terminating = True
    return left, lowest, terminating


def _terminating(info: PodInfo) -> bool:
    return info.pod.metadata.deletion_timestamp is not None


def _changed(before: tuple[object, ...], after: tuple[object, ...]) -> bool:
    return len(before) != len(after) or any(a is not b for a, b in zip(before, after, strict=True))


def _group_changed(before: PodGroup, after: PodGroup) -> bool:
    """A PodGroup change that matters to scheduling or to the victim search; not a status write."""
    a, b = before.metadata, after.metadata
    return (
        before.spec != after.spec
        or a.labels != b.labels
        or a.annotations != b.annotations
        or a.deletion_timestamp != b.deletion_timestamp
    )


def unchanged_pods(before: tuple[PodInfo, ...], after: tuple[PodInfo, ...]) -> bool:
    """Whether a unit's members are the same pods as far as placing them goes (a status write is not a change)."""
    if len(before) != len(after):
        return False
    for a, b in zip(before, after, strict=True):
        if a is b:
            continue
        if (a.key, a.requests, a.priority, a.preemption_policy, a.group_key) != (
            b.key,
            b.requests,
            b.priority,
            b.preemption_policy,
            b.group_key,
        ):
            return False
        if a.pod.spec != b.pod.spec or a.pod.metadata.labels != b.pod.metadata.labels:
            return False
        if a.pod.status.nominated_node_name != b.pod.status.nominated_node_name:
            return False
    return True
