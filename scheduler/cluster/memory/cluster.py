"""MemoryCluster: an API server and kubelets in one object, driven by a virtual clock.

Writes behave as the real ones do for the scheduler: a bound pod starts running at once; a deleted
pod that runs on a node keeps its resources until its grace period (`terminationGracePeriodSeconds`,
default 30 s) has passed on the virtual clock, then disappears; a pending pod, or one deleted with a
grace period of 0, is deleted at once (counted in `removed`, so the driver wakes the scheduler for it). What a
write came to for its pod (bound, its PodScheduled condition changed) is told to the same `Outcomes` as the kube
back end's, so the Events recorded are the same (`Scheduled`, `FailedScheduling`).
Every write replaces the object (copy-on-write) and bumps `resourceVersion`, as the API server
does, so readers holding old objects see a consistent past. Every pod write is numbered (`kube.marks`, as
the kube back end's informer numbers its changes), so a pass compares only the pods written since the last
one. Bindings, events and preemptions (a pod deleted while it carried a `DisruptionTarget` condition) are
recorded for the simulation report.

It also plays the PV controller and the provisioners, at once: a volume the scheduler binds to a claim
(`bind_volumes`) binds the claim to it, and a claim it asks to provision on a node gets a new volume there
(`pvc-<claim uid>`, of the claim's size, modes and class, a CSI volume of the provisioner when it names a CSI
driver, usable from that node only: its `kubernetes.io/hostname`, as a local provisioner's) and is bound to it.
Every class that names a provisioner is taken to have one running.

And the resource claim controller (`claim_controller.py`): a pod's (or PodGroup's) claim from a template is made as
soon as the pod is; a claim DynamicResources allocates (`allocate_claims`) is written at once; once the pod is gone,
the claims made for it are deleted and its reservations removed (a claim reserved for no one is deallocated).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import structlog

from kube.marks import ChangeMarks
from scheduler.api.meta import DISRUPTION_TARGET, ApiModel, Condition, ObjectMeta
from scheduler.api.namespace import Namespace
from scheduler.api.node import Node
from scheduler.api.persistent_volume import (
    CSIPersistentVolumeSource,
    PersistentVolume,
    PersistentVolumeSpec,
    PersistentVolumeStatus,
    VolumeNodeAffinity,
    bound_to_claim,
    claim_reference,
)
from scheduler.api.persistent_volume_claim import (
    ANN_BIND_COMPLETED,
    ANN_BOUND_BY_CONTROLLER,
    STORAGE,
    PersistentVolumeClaim,
    with_selected_node,
)
from scheduler.api.pod import NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, Pod
from scheduler.api.pod_group import PodGroup
from scheduler.cluster.memory.claim_controller import made_claims, released
from scheduler.cluster.outcomes import OutcomeEvents
from scheduler.framework.cluster import ClusterObjects, WriteRefused, device_table, object_key, storage_table
from scheduler.framework.devices import ClaimWrite
from scheduler.framework.ledger import Ledger
from scheduler.framework.storage import PodVolumes

log = structlog.get_logger(__name__)

DEFAULT_GRACE_SECONDS = 30
HOSTNAME = "kubernetes.io/hostname"
ANN_PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"


@dataclass(frozen=True, slots=True)
class RecordedEvent:
    time: datetime
    regarding: str
    regarding_kind: str
    event_type: str
    reason: str
    note: str
    related: str | None
    related_kind: str | None


@dataclass(frozen=True, slots=True)
class Preemption:
    """A pod deleted while marked `DisruptionTarget`; the preemptor comes from the `Preempted` event."""

    victim: str
    node: str | None
    preemptor: str | None
    preemptor_kind: str | None
    time: datetime
    message: str


@dataclass(frozen=True, slots=True)
class BindingRecord:
    pod: str
    node: str
    time: datetime


class MemoryCluster:
    def __init__(
        self,
        objects: ClusterObjects,
        now: datetime,
        terminating: Iterable[str] | None = None,
        pass_ends: Callable[[MemoryCluster], bool] | None = None,
    ) -> None:
        """`terminating`: the keys of the bound pods being deleted, when the caller has them at hand (`explain`'s
        index of a cluster's pods); else they are found among every pod, a walk that touches each of them.
        `pass_ends`: asked before each unit of a pass, as the Kubernetes back end asks whether its Bindings are backed
        up; true ends the pass there, the units left staying queued in order (explain's dry run ends a pass once the
        unit it follows is bound: the units after it cannot change that)."""
        self._pass_ends = pass_ends
        self._objects = objects
        self._now = now
        self._version = 0
        self._terminations: list[tuple[datetime, str]] = []
        self._marks = ChangeMarks()
        """Every pod write, numbered, as the kube back end's informer numbers its changes: the change feed."""
        self.bindings: list[BindingRecord] = []
        self.events: list[RecordedEvent] = []
        self.preemptions: list[Preemption] = []
        self.gates_removed: list[tuple[str, str, datetime]] = []
        self.outcomes = OutcomeEvents(self.record_event)
        self.ledger: Ledger[Any] = Ledger()
        """Always empty: every write here is made before the call returns, or refused by raising `WriteRefused`."""
        self.removed = 0
        """Pods a write removed at once (unbound, or a grace period of 0): each is a change no pass has
        seen yet, as a watch's DELETED event is on a real cluster; the driver runs a pass for it."""
        for key, pod in objects.pods.items() if terminating is None else ((k, objects.pods[k]) for k in terminating):
            deleted = pod.metadata.deletion_timestamp
            if deleted is not None and pod.spec.node_name:
                gone = deleted + timedelta(seconds=pod.metadata.deletion_grace_period_seconds or 0)
                heapq.heappush(self._terminations, (max(now, gone), key))
        if objects.resource_claim_templates:  # else none to make: a walk of every pod saved (a cluster's objects)
            for group in list(objects.pod_groups.values()):
                self._make_claims(group)
            for pod in list(objects.pods.values()):
                self._make_claims(pod)

    # -- clock -------------------------------------------------------------------------------
    def now(self) -> datetime:
        return self._now

    def writes_backed_up(self) -> bool:
        """Every write takes effect when made, so only the caller's `pass_ends` ends a pass early."""
        return self._pass_ends is not None and self._pass_ends(self)

    def next_termination(self) -> datetime | None:
        """When the next pod being deleted disappears (frees its node)."""
        return self._terminations[0][0] if self._terminations else None

    def advance(self, to: datetime) -> None:
        """Move the clock forward, finishing every termination due by then."""
        if to > self._now:
            self._now = to
        while self._terminations and self._terminations[0][0] <= self._now:
            _, key = heapq.heappop(self._terminations)
            if self._drop(key):
                log.debug("pod gone", pod=key, time=self._now.isoformat())

    # -- reads -------------------------------------------------------------------------------
    def objects(self) -> ClusterObjects:
        objects = self._objects
        objects.pod_feed, objects.pod_mark = self, self._marks.last
        return objects

    def changed_since(self, mark: int) -> set[str] | None:
        """The pods written since `mark` (`ClusterObjects.pod_feed`): a pass compares those, not every pod."""
        return self._marks.since(mark)

    def _put(self, pod: Pod) -> None:
        self._objects.pods[pod.key] = pod
        self._marks.mark(pod.key, len(self._objects.pods))

    def _drop(self, key: str) -> bool:
        """Remove a pod, and release its ResourceClaims as the claim controller does; whether it was there."""
        pod = self._objects.pods.pop(key, None)
        self._marks.mark(key, len(self._objects.pods))
        if pod is not None and pod.spec.resource_claims:
            claims = released(pod, self._objects.resource_claims)
            if claims is not None:
                self._objects.resource_claims = claims  # replaced, not changed (see `bind_volumes`)
        return pod is not None

    # -- writes ------------------------------------------------------------------------------
    def create(self, obj: ApiModel) -> None:
        """Add (or replace) a node, pod, PodGroup, Namespace or storage object (a claim, volume, StorageClass,
        CSINode), as `kubectl apply` would: arrivals in a what-if."""
        self._version += 1
        obj.metadata.resource_version = str(self._version)  # type: ignore[attr-defined]
        if isinstance(obj, Node):
            self._objects.nodes[obj.metadata.name] = obj
        elif isinstance(obj, Pod):
            self._put(obj)
            self._make_claims(obj)
        elif isinstance(obj, PodGroup):
            self._objects.pod_groups[obj.key] = obj
            self._make_claims(obj)
        elif (table := storage_table(self._objects, obj)) is not None or (
            table := device_table(self._objects, obj)
        ) is not None:
            table[object_key(obj)] = obj
        elif isinstance(obj, Namespace):
            self._objects.namespaces[obj.metadata.name] = obj
        else:
            raise TypeError(f"cannot create a {type(obj).__name__}")

    def _make_claims(self, owner: Pod | PodGroup) -> None:
        """The resource claim controller's work for a new pod or PodGroup (the module docstring)."""
        claims, statuses = made_claims(owner, self._objects.resource_claim_templates)
        if not claims:
            return
        table = dict(self._objects.resource_claims)
        for claim in claims:
            self._version += 1
            claim.metadata.resource_version = str(self._version)
            table[claim.key] = claim
        self._objects.resource_claims = table
        status = owner.status.model_copy(
            update={"resource_claim_statuses": tuple(statuses) if isinstance(owner, Pod) else statuses}
        )
        if isinstance(owner, Pod):
            self._put(owner.model_copy(update={"metadata": self._bump(owner.metadata), "status": status}))
        else:
            self._objects.pod_groups[owner.key] = owner.model_copy(
                update={"metadata": self._bump(owner.metadata), "status": status}
            )

    def allocate_claims(
        self, pod: Pod, node_name: str, writes: tuple[ClaimWrite, ...], unit: str | None = None
    ) -> None:
        """As the Kubernetes back end: each claim allocated (when it is not) and reserved for its consumer, all or
        none; a claim gone is refused as the API server refuses the write (404), one allocated to other devices as
        the Kubernetes back end refuses it on reading the claim again, before any write. The table is replaced, not
        changed (see `bind_volumes`)."""
        if self._current(pod) is None:
            raise WriteRefused(f'allocate_claims {pod.key}: 404 NotFound: pods "{pod.metadata.name}" not found')
        claims = dict(self._objects.resource_claims)
        for write in writes:
            key, name = write.claim.key, write.claim.metadata.name
            stored = claims.get(key)
            if stored is None:
                raise WriteRefused(
                    f'allocate_claims {pod.key}: 404 NotFound: resourceclaims.resource.k8s.io "{name}" not found'
                )
            made = write.applied(stored)
            if made is None:
                raise WriteRefused(f'allocate_claims {pod.key}: resourceclaim "{name}" is allocated to other devices')
            if made is not stored:
                claims[key] = made.model_copy(update={"metadata": self._bump(made.metadata)})
        self._objects.resource_claims = claims

    def _bump(self, meta: ObjectMeta, **changes: Any) -> ObjectMeta:
        self._version += 1
        return meta.model_copy(update={"resource_version": str(self._version), **changes})

    def _current(self, pod: Pod) -> Pod | None:
        current = self._objects.pods.get(pod.key)
        if current is None or (pod.metadata.uid and current.metadata.uid and pod.metadata.uid != current.metadata.uid):
            return None
        return current

    def bind(self, pod: Pod, node_name: str, unit: str | None = None) -> None:
        """As kube-apiserver and the Kubernetes back end: a pod already bound stays where it is."""
        current = self._current(pod)
        if current is None:
            raise WriteRefused(f'bind {pod.key}: 404 NotFound: pods "{pod.metadata.name}" not found')
        if current.spec.node_name:
            return
        if node_name not in self._objects.nodes:
            raise LookupError(f"nodes {node_name}: NotFound")
        scheduled = Condition.model_construct(type="PodScheduled", status="True", last_transition_time=self._now)
        conditions = (*(c for c in current.status.conditions if c.type != "PodScheduled"), scheduled)
        self._put(
            current.model_copy(
                update={
                    "metadata": self._bump(current.metadata),
                    "spec": current.spec.model_copy(update={"node_name": node_name}),
                    "status": current.status.model_copy(
                        update={
                            "phase": "Running",
                            "start_time": self._now,
                            "conditions": conditions,
                            "nominated_node_name": None,
                        }
                    ),
                }
            )
        )
        self.bindings.append(BindingRecord(pod.key, node_name, self._now))
        self.outcomes.bound(current, node_name)

    def bind_volumes(self, pod: Pod, node_name: str, volumes: PodVolumes, unit: str | None = None) -> None:
        """As the Kubernetes back end, with the PV controller and the provisioners done at once (the module
        docstring). A volume gone is refused as the API server refuses it, and so is one claimed by another claim by
        now (kube-apiserver's 409 on the resourceVersion the pass saw; the Kubernetes back end sends it again only
        when the newer volume is still free for the claim).

        The storage tables are replaced, not changed: a pass's snapshot shares the tables it was built from, and
        must see the storage as it was (with what the pass assumed) to its end, as a Kubernetes back end's view."""
        what = f"bind_volumes {pod.key}"
        claims = dict(self._objects.persistent_volume_claims)
        stored = dict(self._objects.persistent_volumes)
        for claim, volume in volumes.bindings:
            name = volume.metadata.name
            current = stored.get(name)
            if current is None:
                raise WriteRefused(f'{what}: 404 NotFound: persistentvolumes "{name}" not found')
            if current.spec.claim_ref is not None and not current.bound_to(claim):
                raise WriteRefused(
                    f'{what}: 409 Conflict: Operation cannot be fulfilled on persistentvolumes "{name}": the object '
                    "has been modified; please apply your changes to the latest version and try again"
                )
        for claim in [*(c for c, _ in volumes.bindings), *volumes.provisions]:
            if claim.key not in claims:
                raise WriteRefused(f'{what}: 404 NotFound: persistentvolumeclaims "{claim.metadata.name}" not found')
        for claim, volume in volumes.bindings:
            stored_claim = claims[claim.key]
            self._bind_claim(claims, stored, stored_claim, bound_to_claim(stored[volume.metadata.name], stored_claim))
        for claim in volumes.provisions:
            annotated = with_selected_node(claims[claim.key], node_name)
            annotated = annotated.model_copy(update={"metadata": self._bump(annotated.metadata)})
            self._bind_claim(claims, stored, annotated, self._provision(annotated, node_name))
        self._objects.persistent_volume_claims = claims
        self._objects.persistent_volumes = stored

    def _provision(self, claim: PersistentVolumeClaim, node_name: str) -> PersistentVolume:
        """A volume for `claim` on the node, as its class's provisioner would make it (the module docstring)."""
        storage_class = self._objects.storage_classes.get(claim.storage_class)
        provisioner = storage_class.provisioner if storage_class is not None else ""
        meta = claim.metadata
        name = f"pvc-{meta.uid}" if meta.uid else f"pvc-{meta.namespace or 'default'}-{meta.name}"
        node = self._objects.nodes.get(node_name)
        hostname = node.metadata.labels.get(HOSTNAME) if node is not None else None
        affinity = None
        if hostname is not None:
            requirement = NodeSelectorRequirement(key=HOSTNAME, operator="In", values=[hostname])
            terms = [NodeSelectorTerm(match_expressions=[requirement])]
            affinity = VolumeNodeAffinity(required=NodeSelector(node_selector_terms=terms))
        # A CSI driver's name never holds a "/" (in-tree `kubernetes.io/...` and other provisioners' names do).
        csi = CSIPersistentVolumeSource(driver=provisioner, volume_handle=name) if "/" not in provisioner else None
        spec = PersistentVolumeSpec(
            capacity={STORAGE: claim.spec.resources.requests.get(STORAGE, "0")},
            access_modes=list(claim.spec.access_modes),
            storage_class_name=claim.storage_class,
            claim_ref=claim_reference(claim),
            node_affinity=affinity,
            csi=csi,
            volume_mode=claim.spec.volume_mode,
        )
        volume = PersistentVolume(
            metadata=ObjectMeta(name=name, annotations={ANN_PROVISIONED_BY: provisioner}, creation_timestamp=self._now),
            spec=spec,
            status=PersistentVolumeStatus(phase="Pending"),
        )
        self._version += 1
        volume.metadata.resource_version = str(self._version)
        return volume

    def _bind_claim(
        self,
        claims: dict[str, PersistentVolumeClaim],
        stored: dict[str, PersistentVolume],
        claim: PersistentVolumeClaim,
        volume: PersistentVolume,
    ) -> None:
        """The PV controller's binding, into the new tables: the volume (its claimRef set already) Bound, the claim
        bound to it."""
        stored[volume.metadata.name] = volume.model_copy(
            update={
                "metadata": self._bump(volume.metadata),
                "status": volume.status.model_copy(update={"phase": "Bound"}),
            }
        )
        annotations = {**claim.metadata.annotations, ANN_BIND_COMPLETED: "yes"}
        if claim.spec.volume_name != volume.metadata.name:
            annotations.setdefault(ANN_BOUND_BY_CONTROLLER, "yes")
        claims[claim.key] = claim.model_copy(
            update={
                "metadata": self._bump(claim.metadata, annotations=annotations),
                "spec": claim.spec.model_copy(update={"volume_name": volume.metadata.name}),
                "status": claim.status.model_copy(
                    update={
                        "phase": "Bound",
                        "access_modes": list(volume.spec.access_modes),
                        "capacity": dict(volume.spec.capacity),
                    }
                ),
            }
        )

    def remove_scheduling_gate(self, pod: Pod, gate: str, unit: str | None = None) -> None:
        current = self._current(pod)
        if current is None or not any(g.name == gate for g in current.spec.scheduling_gates):
            return
        gates = tuple(g for g in current.spec.scheduling_gates if g.name != gate)
        self._put(
            current.model_copy(
                update={
                    "metadata": self._bump(current.metadata),
                    "spec": current.spec.model_copy(update={"scheduling_gates": gates}),
                }
            )
        )
        self.gates_removed.append((pod.key, gate, self._now))

    def set_nominated_node(self, pod: Pod, node_name: str | None, unit: str | None = None) -> None:
        """As kube-apiserver: a Binding clears the nomination, and a bound pod takes none (422)."""
        current = self._current(pod)
        if current is None or current.status.nominated_node_name == node_name:
            return
        if node_name and current.spec.node_name:
            raise WriteRefused(
                f'nominate {pod.key}: 422 Invalid: Pod "{pod.metadata.name}" is invalid: status.nominatedNodeName: '
                "Forbidden: may not be set on pods that are already bound to a node"
            )
        self._put(
            current.model_copy(
                update={
                    "metadata": self._bump(current.metadata),
                    "status": current.status.model_copy(update={"nominated_node_name": node_name}),
                }
            )
        )

    def set_pod_condition(self, pod: Pod, condition: Condition, unit: str | None = None) -> None:
        current = self._current(pod)
        if current is None:
            return
        was = current.condition(condition.type)
        changed = was is None or (was.status, was.reason, was.message) != (
            condition.status,
            condition.reason,
            condition.message,
        )
        conditions = (*(c for c in current.status.conditions if c.type != condition.type), condition)
        self._put(
            current.model_copy(
                update={
                    "metadata": self._bump(current.metadata),
                    "status": current.status.model_copy(update={"conditions": conditions}),
                }
            )
        )
        if changed and condition.type == "PodScheduled":
            self.outcomes.condition_written(current, condition)

    def set_pod_group_condition(self, group: PodGroup, condition: Condition) -> None:
        current = self._objects.pod_groups.get(group.key)
        if current is None:
            return
        conditions = [c for c in current.status.conditions if c.type != condition.type] + [condition]
        self._objects.pod_groups[group.key] = current.model_copy(
            update={
                "metadata": self._bump(current.metadata),
                "status": current.status.model_copy(update={"conditions": conditions}),
            }
        )

    def annotate_pod_group(self, group: PodGroup, key: str, value: str) -> None:
        current = self._objects.pod_groups.get(group.key)
        if current is None:
            return
        annotations = {**current.metadata.annotations, key: value}
        self._objects.pod_groups[group.key] = current.model_copy(
            update={"metadata": self._bump(current.metadata, annotations=annotations)}
        )

    def delete_pod(self, pod: Pod, grace_period_seconds: int | None, unit: str | None = None) -> None:
        current = self._current(pod)
        if current is None or current.metadata.deletion_timestamp is not None:
            return
        grace = grace_period_seconds
        if grace is None:
            grace = current.spec.termination_grace_period_seconds
        if grace is None:
            grace = DEFAULT_GRACE_SECONDS
        target = current.condition(DISRUPTION_TARGET)
        if target is not None and target.status == "True":
            self._record_preemption(current, target)
        if not current.spec.node_name or grace <= 0:
            self._drop(pod.key)
            self.removed += 1
            return
        self._put(
            current.model_copy(
                update={
                    "metadata": self._bump(
                        current.metadata,
                        deletion_timestamp=self._now,
                        deletion_grace_period_seconds=grace,
                    )
                }
            )
        )
        heapq.heappush(self._terminations, (self._now + timedelta(seconds=grace), pod.key))

    def _record_preemption(self, pod: Pod, target: Condition) -> None:
        event = next(
            (e for e in reversed(self.events) if e.regarding == pod.key and e.reason == "Preempted"),
            None,
        )
        self.preemptions.append(
            Preemption(
                victim=pod.key,
                node=pod.spec.node_name,
                preemptor=event.related if event else None,
                preemptor_kind=event.related_kind if event else None,
                time=self._now,
                message=target.message or "",
            )
        )

    def record_event(
        self, regarding: ApiModel, event_type: str, reason: str, note: str, related: ApiModel | None = None
    ) -> None:
        self.events.append(
            RecordedEvent(
                time=self._now,
                regarding=object_key(regarding),
                regarding_kind=str(getattr(regarding, "kind", "")),
                event_type=event_type,
                reason=reason,
                note=note,
                related=object_key(related) if related is not None else None,
                related_kind=str(getattr(related, "kind", "")) if related is not None else None,
            )
        )
