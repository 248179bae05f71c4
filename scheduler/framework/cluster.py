"""The Cluster Protocol: everything the scheduler asks of a back end (`cluster/memory`, `cluster/kube`).

Reads come from `objects()`, a consistent view (the informer cache with the writes in flight, or the
simulator's store), valid until the next `objects()`: both back ends bring one set of tables up to date
rather than copy them (100,000 pods) for each call. Writes are the few API calls a scheduler makes; each is
idempotent so that a restarted scheduler can replay them (docs/DESIGN.md, invariant 6). A write that the
server refuses fails only the unit it was for (invariant 7): made before the call returns, it raises
`WriteRefused`; sent in the background, it is in the back end's `ledger` as a `Refusal` naming that unit.
`PassAborted` stops the pass.

Each write may name the scheduling unit it is made for (`unit`): a victim's writes are its preemptor's.
By default it is the pod's own unit (its PodGroup, or the pod itself).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from scheduler.api.csi import CSIDriver, CSINode
from scheduler.api.device_class import DeviceClass
from scheduler.api.meta import ApiModel, Condition, ObjectMeta
from scheduler.api.namespace import Namespace
from scheduler.api.node import Node
from scheduler.api.pdb import PodDisruptionBudget
from scheduler.api.persistent_volume import PersistentVolume
from scheduler.api.persistent_volume_claim import PersistentVolumeClaim
from scheduler.api.pod import Pod
from scheduler.api.pod_group import PodGroup
from scheduler.api.priority_class import PriorityClass
from scheduler.api.queue import Queue
from scheduler.api.resource_claim import ResourceClaim, ResourceClaimTemplate
from scheduler.api.resource_slice import ResourceSlice
from scheduler.api.storage_class import StorageClass
from scheduler.api.workload import Workload
from scheduler.framework.devices import ClaimWrite
from scheduler.framework.ledger import Ledger
from scheduler.framework.storage import PodVolumes
from scheduler.framework.unit_key import group_unit


class ChangeFeed(Protocol):
    """Which objects of a kind changed since an earlier read (the kube back end's informers, `kube.marks`)."""

    def changed_since(self, mark: int) -> set[str] | None:
        """Keys of objects added, changed or deleted after `mark` (a superset), or None: compare every one."""


@dataclass(slots=True)
class ClusterObjects:
    """Every object the scheduler reads; namespaced kinds keyed `namespace/name`, others by name."""

    nodes: dict[str, Node] = field(default_factory=dict)
    pods: dict[str, Pod] = field(default_factory=dict)
    pod_groups: dict[str, PodGroup] = field(default_factory=dict)
    workloads: dict[str, Workload] = field(default_factory=dict)
    queues: dict[str, Queue] = field(default_factory=dict)
    priority_classes: dict[str, PriorityClass] = field(default_factory=dict)
    pdbs: dict[str, PodDisruptionBudget] = field(default_factory=dict)
    persistent_volume_claims: dict[str, PersistentVolumeClaim] = field(default_factory=dict)
    persistent_volumes: dict[str, PersistentVolume] = field(default_factory=dict)
    storage_classes: dict[str, StorageClass] = field(default_factory=dict)
    csi_nodes: dict[str, CSINode] = field(default_factory=dict)
    csi_drivers: dict[str, CSIDriver] = field(default_factory=dict)
    """Read from input only (`phalanx simulate`, `explain -f`): no plugin reads a CSIDriver yet, so the Kubernetes
    back end does not watch them (see `storage_table`)."""
    device_classes: dict[str, DeviceClass] = field(default_factory=dict)
    resource_slices: dict[str, ResourceSlice] = field(default_factory=dict)
    resource_claims: dict[str, ResourceClaim] = field(default_factory=dict)
    resource_claim_templates: dict[str, ResourceClaimTemplate] = field(default_factory=dict)
    """Read from input only (`phalanx simulate`, which plays the resource claim controller): the Kubernetes back end
    waits for the controller's claim, as kube-scheduler does, and does not watch templates."""
    namespaces: dict[str, Namespace] = field(default_factory=dict)
    """By name: a pod affinity term's `namespaceSelector` selects namespaces by their labels."""
    victims_in_flight: dict[str, str] = field(default_factory=dict)
    """Pods this scheduler asked to delete whose deletion its view of the cluster does not show yet (the kube
    back end: the watch has not delivered it), each with the unit it was deleted for (its preemptor, which
    waits for them: `Scheduler._units`). Always empty in memory, where a deletion takes effect when asked."""
    pod_feed: ChangeFeed | None = None
    """Where to ask which of `pods` changed since an earlier read, so the snapshot compares only those (None: it
    compares them all)."""
    pod_mark: int = 0
    """The feed's mark `pods` was read at."""
    overlaid: frozenset[str] = frozenset()
    """Pods shown as the writes in flight make them, not as the feed has them: they change without a mark."""
    node_feed: ChangeFeed | None = None
    """As `pod_feed`, for `nodes`: a pass then looks only at the Nodes replaced since the last one."""
    node_mark: int = 0


def storage_table(objects: ClusterObjects, obj: ApiModel) -> dict[str, Any] | None:
    """The table of `objects` that files `obj` when it is a storage kind (PersistentVolumeClaim, PersistentVolume,
    StorageClass, CSINode, CSIDriver), else None."""
    tables: dict[type, dict[str, Any]] = {
        PersistentVolumeClaim: objects.persistent_volume_claims,
        PersistentVolume: objects.persistent_volumes,
        StorageClass: objects.storage_classes,
        CSINode: objects.csi_nodes,
        CSIDriver: objects.csi_drivers,
    }
    return tables.get(type(obj))


def device_table(objects: ClusterObjects, obj: ApiModel) -> dict[str, Any] | None:
    """The table of `objects` that files `obj` when it is a DRA kind (DeviceClass, ResourceSlice, ResourceClaim,
    ResourceClaimTemplate), else None."""
    tables: dict[type, dict[str, Any]] = {
        DeviceClass: objects.device_classes,
        ResourceSlice: objects.resource_slices,
        ResourceClaim: objects.resource_claims,
        ResourceClaimTemplate: objects.resource_claim_templates,
    }
    return tables.get(type(obj))


def unit_of(pod: Pod) -> str:
    """The unit key (`framework/unit_key.py`) a pod's own writes are for: its PodGroup's, or the pod's own."""
    group = pod.pod_group_name
    return group_unit(f"{pod.metadata.namespace or 'default'}/{group}") if group else pod.key


def object_key(obj: ApiModel) -> str:
    """The object's key in `ClusterObjects` (and in Events): `namespace/name`, or `name` for cluster-scoped kinds.

    Pods, PodGroups, PersistentVolumeClaims, ResourceClaims and ResourceClaimTemplates written without a namespace
    (scenario files) are in `default`, as on a cluster.
    """
    if isinstance(obj, Pod | PodGroup | PersistentVolumeClaim | ResourceClaim | ResourceClaimTemplate):
        return obj.key
    meta = getattr(obj, "metadata", None)
    if not isinstance(meta, ObjectMeta):
        return ""
    return f"{meta.namespace}/{meta.name}" if meta.namespace else meta.name


class Outcomes(Protocol):
    """What a back end's writes came to for a pod, told by the back end once it knows (at once in memory, when the
    server answered on a cluster); the writes themselves tell no one. The one implementation
    (`scheduler/cluster/outcomes.py`) turns them into the Events kube-scheduler records, so both back ends record
    the same."""

    def bound(self, pod: Pod, node_name: str) -> None:
        """The pod's Binding went through (not: it was found bound already, by someone else)."""

    def refused(self, pod: Pod, message: str) -> None:
        """A write the pod's binding needed was refused, and the unit is not told by the runner (`Refusal.told`):
        `message` says which write and the server's answer."""

    def condition_written(self, pod: Pod, condition: Condition) -> None:
        """The pod's PodScheduled condition was changed to `condition`."""


class Cluster(Protocol):
    @property
    def ledger(self) -> Ledger[Any]:
        """The writes in flight, and the refusals of those sent in the background."""

    def now(self) -> datetime: ...

    def objects(self) -> ClusterObjects:
        """The cluster now; the next call may change the tables this one returned (copy what must outlive it)."""
        ...

    def writes_backed_up(self) -> bool:
        """Backpressure: true while more Bindings wait to be sent than the back end sends in a few seconds. A pass
        then tries no further unit and the rest wait in the queue, so a pod created meanwhile still goes by
        priority rather than behind every Binding decided before it, and the writes in flight, which every
        pass's view overlays, stay a few seconds' worth. The memory back end writes at once: never."""

    def bind(self, pod: Pod, node_name: str, unit: str | None = None) -> None:
        """POST pods/binding. A pod already bound stays where it is, and the view shows it there."""

    def bind_volumes(self, pod: Pod, node_name: str, volumes: PodVolumes, unit: str | None = None) -> None:
        """PreBind (kube-scheduler's `BindPodVolumes`): each claim of `volumes.bindings` bound to its volume (the
        volume's claimRef, guarded by the resourceVersion the pass saw), each claim of `volumes.provisions`
        annotated `volume.kubernetes.io/selected-node: <node_name>`, then wait until the PV controller (and the
        provisioner) bound them all. The pod's Binding, made next, is sent only once this went through; a write
        refused, a binding undone or not done in time refuses both (the pod is pending again)."""

    def allocate_claims(
        self, pod: Pod, node_name: str, writes: tuple[ClaimWrite, ...], unit: str | None = None
    ) -> None:
        """PreBind (DynamicResources): each claim's `status.allocation` set, when it has none, and the consumer added to
        its `status.reservedFor`, guarded by the resourceVersion the pass saw. The pod's Binding, made next, is sent
        only once this went through; a write refused (the claim gone, allocated to other devices by now) refuses
        both (the pod is pending again)."""

    def remove_scheduling_gate(self, pod: Pod, gate: str, unit: str | None = None) -> None:
        """Remove one gate (ours), guarded so a concurrent change to the gates is not lost."""

    def set_nominated_node(self, pod: Pod, node_name: str | None, unit: str | None = None) -> None: ...

    def set_pod_condition(self, pod: Pod, condition: Condition, unit: str | None = None) -> None:
        """PodScheduled (SchedulingGated / Unschedulable, with message) or DisruptionTarget."""

    def set_pod_group_condition(self, group: PodGroup, condition: Condition) -> None: ...

    def annotate_pod_group(self, group: PodGroup, key: str, value: str) -> None: ...

    def delete_pod(self, pod: Pod, grace_period_seconds: int | None, unit: str | None = None) -> None:
        """Delete with a UID precondition; a pod already gone is not an error."""

    def record_event(
        self, regarding: ApiModel, event_type: str, reason: str, note: str, related: ApiModel | None = None
    ) -> None: ...


EVENT_NOTE_LIMIT = 1024
"""The longest note an Event may carry: the API server rejects a longer one."""


class WriteRefused(Exception):
    """The API server refused a write, or it never completed (422, 409, 403, a 5xx or a timeout once
    the back end's own retries are spent): only the unit it was made for fails (docs/DESIGN.md, invariant 7).

    The message names the write, the object and the server's answer in one short line, e.g.
    `nominate ml/m1: 422 Invalid: Pod "m1" is invalid: ...`; it never carries request headers or
    credentials (invariant 8), so it can go into an Event and a log as it is.
    """


class PassAborted(Exception):
    """The back end may no longer act for this scheduler (its replica lost the Lease): the pass stops
    at once, and no unit is blamed for it."""
