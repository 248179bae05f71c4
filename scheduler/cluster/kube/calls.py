"""The scheduler's writes as typed calls (kube-scheduler's `api_calls`): one small dataclass per kind of write.

Each call says which object it writes (`key`) and for which scheduling unit (`unit`), which lane of workers
sends it (`lane`), what the view shows while it is in flight (`shows`) and when the informer shows it done
(`seen`), how it is sent (`send`, over a `Wire`: the sender) and what its outcome is for the pod (`done`,
`refused`, told to the back end's `Outcomes`, never sent from here). How it relates to another call for the
same object (follows, supersedes, merges with, repeats) is one table, `order.py`. The dispatcher
(`dispatcher.py`) does the rest for all of them alike: ordering per object, coalescing, results in the ledger.

Every write is idempotent, so a restarted scheduler may replay it: a Binding of a pod already bound answers
where it went, deletions carry a UID precondition and take "already gone" as done, a gate removal is a JSON
patch guarded by a `test` of the gate list, a PodGroup condition a merge patch guarded by resourceVersion,
a volume's claimRef and a claim's selected node merge patches guarded by resourceVersion and not sent when
already so, and a condition that would change nothing is not sent. Adding a kind of write is adding a class here, its
rows in `order.py`, and the `Cluster` method that makes it (`cluster.py`).
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, ClassVar, Protocol

import structlog

from kube.errors import ApiError, Conflict, Invalid, NotFound
from kube.routes import CoreV1Api, CustomObjectsApi, EventsV1Api, ResourceV1Api, Route
from kube.transport import JSON
from scheduler.api.meta import ApiModel, Condition, rfc3339
from scheduler.api.node import Node
from scheduler.api.persistent_volume import PersistentVolume, bound_to_claim
from scheduler.api.persistent_volume_claim import (
    ANN_BIND_COMPLETED,
    ANN_BOUND_BY_CONTROLLER,
    ANN_SELECTED_NODE,
    PersistentVolumeClaim,
    with_selected_node,
)
from scheduler.api.pod import Pod
from scheduler.api.pod_group import GROUP, NATIVE_API_VERSION, VERSION, PodGroup
from scheduler.api.resource_claim import ResourceClaim
from scheduler.api.wire import prune
from scheduler.cluster.kube.hold import PreemptionHold
from scheduler.framework.cluster import EVENT_NOTE_LIMIT, Outcomes
from scheduler.framework.devices import ClaimWrite
from scheduler.framework.storage import PodVolumes
from scheduler.plugins.volume_binding import node_fits

log = structlog.get_logger(__name__)

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
REPORTING_CONTROLLER = "scheduling.phalanx.dev/scheduler"
ALREADY_ASSIGNED = re.compile(r'is already assigned to node \\?"([^"\\]+)\\?"')
EVENT_ACTIONS = {"Scheduled": "Binding", "FailedScheduling": "Scheduling", "Preempted": "Preempting"}
BIND_TIMEOUT_SECONDS = 600.0
"""How long a pod's claims may take to be bound before its Binding is given up (kube-scheduler's
`VolumeBindingArgs.bindTimeoutSeconds` default)."""
BIND_POLL_SECONDS = 0.2
"""How often a `ClaimBinding` looks at the informers' copies while it waits (kube-scheduler: each second)."""
NEWER_WAIT_SECONDS = 3.0
"""How long a write that lost a race (409) waits for the watch to deliver the newer object."""


class NotSent(Exception):
    """A call was not sent: what it follows was refused, it could only be refused, or stopping began first."""


class Failed(Exception):
    """A call that did not go through for a reason of its own, not an API answer (volumes not bound in time, a
    binding undone): `answer` says why in one line, as an `ApiError`'s does, and the call is refused with it."""

    def __init__(self, answer: str) -> None:
        super().__init__(answer)
        self.answer = answer


class Wire(Protocol):
    """What a call needs to be sent (`sender.Sender`): requests (retried, counted, only while this replica leads),
    the newest objects it writes, the informers' copies, and the preemption hold it starts or ends."""

    hold: PreemptionHold

    def request(self, call: Call, route: Route, path: str, body: Any = None, content_type: str = JSON) -> Any:
        """One write of `call` along `route` (a `kube.routes.Route`, for its verb and its RBAC grant)."""

    def read(self, route: Route, path: str) -> Any:
        """One GET, not retried."""

    def now(self) -> datetime: ...

    def current_pod(self, pod: Pod) -> Pod:
        """The newest of `pod`, the informer's copy and what our writes returned."""

    def current_group(self, group: PodGroup) -> PodGroup: ...

    def newer_group(self, seen: PodGroup) -> PodGroup | None:
        """The group as the watch delivers it once it is newer than `seen`, within a few seconds, else None."""

    def bound(self, key: str) -> bool:
        """The pod is bound, or a Binding of it is in flight."""

    def stored(self, kind: str, key: str) -> Any:
        """The informer's copy of an object (`pods`, `nodes`, `persistentvolumes`, `persistentvolumeclaims`,
        `resourceclaims`), by the
        key `ClusterObjects` files it under, or None."""

    def pause(self, seconds: float) -> bool:
        """Wait `seconds`; False as soon as stopping began (the caller gives up)."""


def version(obj: ApiModel | dict[str, Any] | None) -> int:
    """resourceVersion as a number (of a model, or of the JSON a write returned): opaque by contract, an etcd
    revision in every real server."""
    if isinstance(obj, dict):
        value = (obj.get("metadata") or {}).get("resourceVersion")
    else:
        value = getattr(getattr(obj, "metadata", None), "resource_version", None)
    try:
        return int(value or 0)
    except ValueError:
        return 0


def pod_path(pod: Pod) -> str:
    return f"/api/v1/namespaces/{pod.metadata.namespace or 'default'}/pods/{pod.metadata.name}"


def group_path(group: PodGroup) -> str:
    """Where a PodGroup is written: the native kind at its own API, ours (and scenario files') at our CRD."""
    meta = group.metadata
    api_version = NATIVE_API_VERSION if group.api_version == NATIVE_API_VERSION else f"{GROUP}/{VERSION}"
    return f"/apis/{api_version}/namespaces/{meta.namespace or 'default'}/podgroups/{meta.name}"


def merge_condition(existing: Sequence[Condition], condition: Condition, now: datetime) -> list[Condition] | None:
    """The condition list with `condition` set, or None when that changes nothing."""
    current = next((c for c in existing if c.type == condition.type), None)
    if current is not None and (current.status, current.reason, current.message) == (
        condition.status,
        condition.reason,
        condition.message,
    ):
        return None
    transition = current.last_transition_time if current is not None and current.status == condition.status else now
    updated = condition.model_copy(update={"last_transition_time": condition.last_transition_time or transition})
    return [c for c in existing if c.type != condition.type] + [updated]


def condition_json(condition: Condition) -> dict[str, Any]:
    return condition.model_dump(by_alias=True, exclude_none=True, mode="json")


@dataclass(frozen=True, slots=True)
class Call:
    """What every call has; the subclasses below are the kinds of write."""

    key: str
    unit: str
    slot: str = field(init=False, repr=False, compare=False)
    """Its place in the ledger: its kind and key (`pods/namespace/name`), made once (every ledger step reads it)."""

    kind: ClassVar[str] = "pods"
    """The resource written: its kind and key are its place in the ledger (a pod and a PodGroup may share a name)."""
    operation: ClassVar[str] = ""
    lane: ClassVar[str] = ""
    owed: ClassVar[bool] = False
    """Sent though only queued when stopping, and after the Lease was handed back (see `PodGroupAnnotation`)."""
    held: ClassVar[bool] = False
    """Waits while a preemption is under way (`hold.py`) before it takes its turn; dropped if that was a stop."""
    attempts: ClassVar[int] = 6
    """Requests made before a 429 or a 5xx refuses it."""
    told: ClassVar[bool] = False
    """A refusal is told to the pod by the back end (its `refused` outcome), not by the runner."""
    quiet: ClassVar[bool] = False
    """A refusal is logged only: the write informs (a PodScheduled message, a PodGroup condition, an Event) and
    fails no unit; the next pass writes it again if it still holds."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "slot", f"{self.kind}/{self.key}")

    def shows(self, obj: Any) -> Any:
        """`obj` (the informer's copy, or the newest our writes returned) as this call in flight makes it."""
        return obj

    def seen(self, cached: Any) -> bool:
        """The informer's copy shows this call done (or the object is gone): it may leave the ledger."""
        return True

    @property
    def part(self) -> str:
        """The part of its object it writes (a condition's type, an annotation's name): a call merges into an older
        one (`order.py`) only when both write the same part."""
        return ""

    def send(self, wire: Wire) -> Any:
        """Send it; returns the object the server wrote (shown until the informer has it), a replacement call
        (what the ledger must show instead), or None. Raises an `ApiError` when refused."""
        raise NotImplementedError

    def answer(self, sent: Any) -> Any:
        """What `send` returned, with the object the server wrote parsed as the view shows it (in the worker: an
        answer our models cannot read fails that write, not a pass)."""
        if not isinstance(sent, dict):
            return sent
        return Pod.model_validate(prune("pods", sent)) if self.kind == "pods" else PodGroup.model_validate(sent)

    def done(self, wire: Wire, outcomes: Outcomes, written: Any) -> None:
        """After it went through: its outcome for the pod, if it has one, told to `outcomes`."""

    def refused(self, wire: Wire, outcomes: Outcomes, err: BaseException) -> None:
        """After it was refused (or not sent: `err` is then the reason)."""

    def shows_volume(self, name: str, volume: PersistentVolume) -> PersistentVolume:
        """A PersistentVolume this call writes (`volume_names`), as it shows while the call is in flight."""
        return volume

    def shows_claim(self, key: str, claim: PersistentVolumeClaim) -> PersistentVolumeClaim:
        """A PersistentVolumeClaim this call writes (`claim_keys`), as it shows while the call is in flight."""
        return claim

    def volume_names(self) -> tuple[str, ...]:
        """The PersistentVolumes it writes besides its own object (a `ClaimBinding`'s), shown by the view."""
        return ()

    def claim_keys(self) -> tuple[str, ...]:
        """The PersistentVolumeClaims it writes besides its own object, shown by the view."""
        return ()

    def resource_claim_keys(self) -> tuple[str, ...]:
        """The ResourceClaims it writes besides its own object (a `ClaimAllocation`'s), shown by the view."""
        return ()

    def shows_resource_claim(self, key: str, claim: ResourceClaim) -> ResourceClaim:
        """A ResourceClaim this call writes (`resource_claim_keys`), as it shows while the call is in flight."""
        return claim


@dataclass(frozen=True, slots=True)
class GateRemoval(Call):
    """Remove one scheduling gate (ours): the view shows the pod without it at once; its Binding waits for it."""

    pod: Pod = field(compare=False)
    gate: str = ""

    operation: ClassVar[str] = "remove_gate"
    lane: ClassVar[str] = "gate-removals"
    told: ClassVar[bool] = True

    def shows(self, obj: Pod) -> Pod:
        if not any(g.name == self.gate for g in obj.spec.scheduling_gates):
            return obj
        gates = tuple(g for g in obj.spec.scheduling_gates if g.name != self.gate)
        return obj.model_copy(update={"spec": obj.spec.model_copy(update={"scheduling_gates": gates})})

    def seen(self, cached: Pod | None) -> bool:
        return cached is None or not any(g.name == self.gate for g in cached.spec.scheduling_gates)

    def send(self, wire: Wire) -> Any:
        """JSON patch: `test` the gate list we saw, then replace it; on a lost race, re-read and retry.

        A failed `test` and a refusal (a validating policy, say) are both 422: the re-read tells them
        apart. Gates that did not change mean the server refused the write itself, and that answer is
        what the unit's Warning must carry.
        """
        current = self.pod  # as the pass saw it: a gate list that changed since fails the `test`, and is read again
        for _ in range(3):
            gates = [g.model_dump(by_alias=True, exclude_none=True) for g in current.spec.scheduling_gates]
            if not any(g.get("name") == self.gate for g in gates):
                return None
            patch = [
                {"op": "test", "path": "/metadata/uid", "value": current.metadata.uid},
                {"op": "test", "path": "/spec/schedulingGates", "value": gates},
                {
                    "op": "replace",
                    "path": "/spec/schedulingGates",
                    "value": [g for g in gates if g["name"] != self.gate],
                },
            ]
            try:
                return wire.request(self, CoreV1Api.patch_namespaced_pod, pod_path(current), patch, JSON_PATCH)
            except NotFound:
                return None
            except Invalid:
                seen = current
                current = Pod.model_validate(wire.read(CoreV1Api.read_namespaced_pod, pod_path(current)))
                if (
                    seen.spec.scheduling_gates == current.spec.scheduling_gates
                    and seen.metadata.uid == current.metadata.uid
                ):
                    raise
        raise RuntimeError(f"scheduling gate {self.gate} of {self.key}: kept changing under us")

    def refused(self, wire: Wire, outcomes: Outcomes, err: BaseException) -> None:
        if isinstance(err, ApiError):
            outcomes.refused(self.pod, f"Removing scheduling gate {self.gate}: {err.answer}")


@dataclass(frozen=True, slots=True)
class Binding(Call):
    """POST pods/binding: the view shows the pod on its node from the moment it is made (kube-scheduler's
    assume) until the informer does. A Binding of a pod already bound shows it where it went."""

    pod: Pod = field(compare=False)
    node: str = ""

    operation: ClassVar[str] = "bind"
    lane: ClassVar[str] = "bindings"
    told: ClassVar[bool] = True

    def shows(self, obj: Pod) -> Pod:
        if obj.spec.node_name:
            return obj
        return obj.model_copy(update={"spec": obj.spec.model_copy(update={"node_name": self.node})})

    def seen(self, cached: Pod | None) -> bool:
        return cached is None or bool(cached.spec.node_name) or cached.is_terminal

    def send(self, wire: Wire) -> Any:
        if wire.current_pod(self.pod).spec.scheduling_gates:
            # Its gate removal was refused (or is not ours to make) after the pass saw it in flight: the server
            # would refuse the Binding too, and the gate removal's own Warning says why.
            raise NotSent("the pod still has scheduling gates")
        meta = self.pod.metadata
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": meta.name, "namespace": meta.namespace, "uid": meta.uid},
            "target": {"apiVersion": "v1", "kind": "Node", "name": self.node},
        }
        try:
            wire.request(self, CoreV1Api.create_namespaced_pod_binding, f"{pod_path(self.pod)}/binding", body)
        except Conflict as err:
            placed = ALREADY_ASSIGNED.search(err.message)
            if placed is None:
                raise
            log.info("pod already bound", pod=self.key, node=placed.group(1))
            return replace(self, node=placed.group(1))
        return None

    def done(self, wire: Wire, outcomes: Outcomes, written: Any) -> None:
        wire.hold.done(self.key)  # a nominee's Binding is answered: its preemption is over
        if not isinstance(written, Binding):  # bound by someone else: not our outcome
            outcomes.bound(self.pod, self.node)

    def refused(self, wire: Wire, outcomes: Outcomes, err: BaseException) -> None:
        wire.hold.done(self.key)
        if isinstance(err, ApiError):
            log.warning("binding failed", pod=self.key, node=self.node, status=err.status or err.answer)
            outcomes.refused(self.pod, f"Binding rejected: {err.answer}")


def fully_bound(claim: PersistentVolumeClaim) -> bool:
    """`isPVCFullyBound`: it names its volume and the PV controller finished binding it."""
    return bool(claim.spec.volume_name) and ANN_BIND_COMPLETED in claim.metadata.annotations


@dataclass(frozen=True, slots=True)
class ClaimBinding(Call):
    """PreBind for a pod's claims to bind (kube-scheduler's `BindPodVolumes`): each chosen volume's claimRef set to
    its claim (with `pv.kubernetes.io/bound-by-controller`), each claim to provision annotated
    `volume.kubernetes.io/selected-node`, then a wait until the PV controller (and the provisioner) bound them all.

    It is keyed on the pod, so the pod's Binding, made right after, follows it in the pod's order and is sent only
    once it went through (`Order.REQUIRES`); meanwhile the Binding shows the pod on its node (its room held, as
    upstream's assumed pod during PreBind), and this call shows the volumes claimed and the claims annotated, so no
    pass gives them to another pod. Each write is a merge patch guarded by the resourceVersion the pass saw (as
    upstream's Update of its assumed copy): on a 409 it is sent again on the newer object the watch brings, if that
    one is still free for the claim. The wait reads the informers (upstream's `checkBindings`, every
    `BIND_POLL_SECONDS`): a binding undone (a claimRef reset, a selected node removed by a provisioner that failed),
    the pod gone, or `timeout` passed refuses the call, and the Binding with it; the writes are left as they are, as
    upstream leaves them, and the next attempt finds the volume pre-bound to the claim, or the claim's node chosen.
    """

    pod: Pod = field(compare=False)
    node: str = ""
    volumes: PodVolumes = field(compare=False, default_factory=PodVolumes)
    timeout: float = BIND_TIMEOUT_SECONDS

    operation: ClassVar[str] = "bind_volumes"
    lane: ClassVar[str] = "volumes"
    told: ClassVar[bool] = True

    def volume_names(self) -> tuple[str, ...]:
        return tuple(volume.metadata.name for _, volume in self.volumes.bindings)

    def claim_keys(self) -> tuple[str, ...]:
        return tuple(claim.key for claim in self.volumes.provisions)

    def shows_volume(self, name: str, volume: PersistentVolume) -> PersistentVolume:
        claim = next((c for c, v in self.volumes.bindings if v.metadata.name == name), None)
        if claim is None or volume.spec.claim_ref is not None:
            return volume  # claimed already: by this claim, or by another, which the write finds out
        return bound_to_claim(volume, claim)

    def shows_claim(self, key: str, claim: PersistentVolumeClaim) -> PersistentVolumeClaim:
        if claim.spec.volume_name or ANN_SELECTED_NODE in claim.metadata.annotations:
            return claim
        return with_selected_node(claim, self.node)

    def send(self, wire: Wire) -> Any:
        written: dict[tuple[str, str], int] = {}
        for claim, volume in self.volumes.bindings:
            written["persistentvolumes", volume.metadata.name] = self._bind(wire, claim, volume)
        for claim in self.volumes.provisions:
            written["persistentvolumeclaims", claim.key] = self._select(wire, claim)
        deadline = time.monotonic() + self.timeout
        while not self._bound(wire, written):
            if time.monotonic() >= deadline:
                raise Failed("binding volumes: context deadline exceeded")
            if not wire.pause(BIND_POLL_SECONDS):
                raise NotSent("stopping")
        return None

    def _bind(self, wire: Wire, claim: PersistentVolumeClaim, volume: PersistentVolume) -> int:
        """The volume's claimRef set to the claim; the resourceVersion written (0: it was already)."""
        seen = volume
        path = f"/api/v1/persistentvolumes/{volume.metadata.name}"
        while True:
            wanted = bound_to_claim(seen, claim)
            if wanted is seen:
                return 0
            metadata: dict[str, Any] = {"resourceVersion": seen.metadata.resource_version}
            if ANN_BOUND_BY_CONTROLLER in wanted.metadata.annotations:
                metadata["annotations"] = {
                    ANN_BOUND_BY_CONTROLLER: wanted.metadata.annotations[ANN_BOUND_BY_CONTROLLER]
                }
            ref = wanted.spec.claim_ref.model_dump(by_alias=True, exclude_none=True) if wanted.spec.claim_ref else None
            body = {"metadata": metadata, "spec": {"claimRef": ref}}
            try:
                return version(wire.request(self, CoreV1Api.patch_persistent_volume, path, body, MERGE_PATCH))
            except Conflict:
                newer = self._newer(wire, "persistentvolumes", volume.metadata.name, seen)
                if newer is None or (newer.spec.claim_ref is not None and not newer.bound_to(claim)):
                    raise
                seen = newer

    def _select(self, wire: Wire, claim: PersistentVolumeClaim) -> int:
        """The claim annotated with the node; the resourceVersion written (0: it was already)."""
        seen = claim
        meta = claim.metadata
        path = f"/api/v1/namespaces/{meta.namespace or 'default'}/persistentvolumeclaims/{meta.name}"
        while True:
            if seen.metadata.annotations.get(ANN_SELECTED_NODE) == self.node:
                return 0
            body = {
                "metadata": {
                    "resourceVersion": seen.metadata.resource_version,
                    "annotations": {ANN_SELECTED_NODE: self.node},
                }
            }
            try:
                return version(
                    wire.request(self, CoreV1Api.patch_namespaced_persistent_volume_claim, path, body, MERGE_PATCH)
                )
            except Conflict:
                newer = self._newer(wire, "persistentvolumeclaims", claim.key, seen)
                if newer is None or newer.spec.volume_name or ANN_SELECTED_NODE in newer.metadata.annotations:
                    raise
                seen = newer

    @staticmethod
    def _newer(wire: Wire, kind: str, key: str, seen: Any) -> Any:
        """After a 409: the object as the watch delivers it once newer than `seen`, or None (gone, or not in time)."""
        deadline = time.monotonic() + NEWER_WAIT_SECONDS
        while time.monotonic() < deadline:
            current = wire.stored(kind, key)
            if current is None:
                return None
            if version(current) > version(seen):
                return current
            if not wire.pause(BIND_POLL_SECONDS / 4):
                return None
        return None

    def _bound(self, wire: Wire, written: dict[tuple[str, str], int]) -> bool:
        """`checkBindings` on the informers' copies: True once every claim is bound; raises `Failed` when a binding
        was undone or can no longer hold."""
        node: Node | None = wire.stored("nodes", self.node)
        if node is None:
            raise Failed(f'binding volumes: failed to get node "{self.node}": node "{self.node}" not found')
        pod: Pod | None = wire.stored("pods", self.key)
        if pod is None or pod.metadata.uid != self.pod.metadata.uid:
            raise Failed("binding volumes: pod does not exist any more")
        for claim, chosen in self.volumes.bindings:
            name = chosen.metadata.name
            volume: PersistentVolume | None = wire.stored("persistentvolumes", name)
            current: PersistentVolumeClaim | None = wire.stored("persistentvolumeclaims", claim.key)
            if volume is None or current is None:
                gone = f'persistentvolume "{name}"' if volume is None else f'persistentvolumeclaim "{claim.key}"'
                raise Failed(f"binding volumes: failed to check binding: {gone} not found")
            if version(volume) < written["persistentvolumes", name]:
                return False  # the watch has not brought our write yet
            if not node_fits(volume, node):
                raise Failed(f'binding volumes: pv "{name}" node affinity doesn\'t match node "{self.node}"')
            if volume.spec.claim_ref is None or not volume.spec.claim_ref.uid:
                raise Failed(f'binding volumes: ClaimRef got reset for pv "{name}"')
            if not fully_bound(current):
                return False
        for claim in self.volumes.provisions:
            current = wire.stored("persistentvolumeclaims", claim.key)
            if current is None:
                raise Failed(f'binding volumes: failed to check provisioning pvc: "{claim.key}" not found')
            if version(current) < written["persistentvolumeclaims", claim.key]:
                return False
            if not current.metadata.annotations:
                raise Failed(f'binding volumes: selectedNode annotation reset for PVC "{claim.metadata.name}"')
            if current.metadata.annotations.get(ANN_SELECTED_NODE) != self.node:
                raise Failed(f'binding volumes: provisioning failed for PVC "{claim.metadata.name}"')
            if current.spec.volume_name:
                volume = wire.stored("persistentvolumes", current.spec.volume_name)
                if volume is None:
                    return False  # not in the cache yet: the next look finds it
                if not node_fits(volume, node):
                    raise Failed(
                        f'binding volumes: pv "{volume.metadata.name}" node affinity doesn\'t match node "{self.node}"'
                    )
            if not fully_bound(current):
                return False
        return True

    def refused(self, wire: Wire, outcomes: Outcomes, err: BaseException) -> None:
        if isinstance(err, ApiError | Failed):
            outcomes.refused(self.pod, f'running PreBind plugin "VolumeBinding": {err.answer}')


CLAIM_FINALIZER = "resource.kubernetes.io/delete-protection"
"""Set on a claim before it is allocated, so it is not deleted while allocated; the resource claim controller
removes it when it deallocates the claim (`resourceapi.Finalizer`)."""


def claim_path(claim: ResourceClaim) -> str:
    meta = claim.metadata
    return f"/apis/resource.k8s.io/v1/namespaces/{meta.namespace or 'default'}/resourceclaims/{meta.name}"


@dataclass(frozen=True, slots=True)
class ClaimAllocation(Call):
    """PreBind for a pod's ResourceClaims (DynamicResources): each claim given the finalizer
    `resource.kubernetes.io/delete-protection` (when it is to be allocated), then its `status.allocation` (when it has
    none, stamped with `allocationTimestamp`) and the consumer in `status.reservedFor`, as kube-scheduler's PreBind
    does. The API server checks that status write on `resourceclaims/binding` too (the chart's RBAC).

    Keyed on the pod, so its Binding follows it and is sent only once it went through (`Order.REQUIRES`); meanwhile
    the view shows the claims allocated and reserved, so no pass gives the devices to another pod. Each write is a
    merge patch guarded by the resourceVersion last seen: on a 409 it is made again on the newer claim the watch
    brings, as long as that one is not allocated to other devices (two pods sharing a claim write the same
    allocation: the second adds only its reservation). A claim gone, or allocated otherwise, refuses the call and the
    Binding: the pod is pending again.
    """

    pod: Pod = field(compare=False)
    node: str = ""
    writes: tuple[ClaimWrite, ...] = field(compare=False, default=())

    operation: ClassVar[str] = "allocate_claims"
    lane: ClassVar[str] = "volumes"
    told: ClassVar[bool] = True

    def resource_claim_keys(self) -> tuple[str, ...]:
        return tuple(write.claim.key for write in self.writes)

    def shows_resource_claim(self, key: str, claim: ResourceClaim) -> ResourceClaim:
        for write in self.writes:
            if write.claim.key == key:
                claim = write.applied(claim) or claim
        return claim

    def send(self, wire: Wire) -> Any:
        for write in self.writes:
            self._write(wire, write)
        return None

    def _write(self, wire: Wire, write: ClaimWrite) -> None:
        seen = self._newest(wire, write.claim)
        while True:
            wanted = write.applied(seen)
            if wanted is None:
                raise Failed(f'resourceclaim "{seen.metadata.name}" is allocated to other devices')
            if wanted is seen:
                return
            try:
                if seen.status.allocation is None and CLAIM_FINALIZER not in seen.metadata.finalizers:
                    body: dict[str, Any] = {
                        "metadata": {
                            "resourceVersion": seen.metadata.resource_version,
                            "finalizers": [*seen.metadata.finalizers, CLAIM_FINALIZER],
                        }
                    }
                    route = ResourceV1Api.patch_namespaced_resource_claim
                    seen = ResourceClaim.model_validate(wire.request(self, route, claim_path(seen), body, MERGE_PATCH))
                    continue
                status = wanted.status.model_dump(by_alias=True, exclude_none=True, mode="json")
                if seen.status.allocation is None and "allocation" in status:
                    status["allocation"]["allocationTimestamp"] = rfc3339(wire.now())  # as kube-scheduler stamps it
                body = {
                    "metadata": {"resourceVersion": seen.metadata.resource_version},
                    "status": {"allocation": status.get("allocation"), "reservedFor": status.get("reservedFor", [])},
                }
                route = ResourceV1Api.patch_namespaced_resource_claim_status
                wire.request(self, route, f"{claim_path(seen)}/status", body, MERGE_PATCH)
                return
            except Conflict:
                newer = ClaimBinding._newer(wire, "resourceclaims", write.claim.key, seen)
                if newer is None:
                    raise
                seen = newer

    @staticmethod
    def _newest(wire: Wire, claim: ResourceClaim) -> ResourceClaim:
        stored: ResourceClaim | None = wire.stored("resourceclaims", claim.key)
        return stored if stored is not None and version(stored) >= version(claim) else claim

    def refused(self, wire: Wire, outcomes: Outcomes, err: BaseException) -> None:
        if isinstance(err, ApiError | Failed):
            outcomes.refused(self.pod, f'running PreBind plugin "DynamicResources": {err.answer}')


@dataclass(frozen=True, slots=True)
class Nomination(Call):
    """`status.nominatedNodeName` ("" clears it): shown at once, written by the preemption workers in parallel
    with the victims' writes: one after another they held a gang's pass for seconds."""

    pod: Pod = field(compare=False)
    node: str = ""

    operation: ClassVar[str] = "nominate"
    lane: ClassVar[str] = "preemption"

    def shows(self, obj: Pod) -> Pod:
        if (obj.status.nominated_node_name or "") == self.node:
            return obj
        return obj.model_copy(
            update={"status": obj.status.model_copy(update={"nominated_node_name": self.node or None})}
        )

    def seen(self, cached: Pod | None) -> bool:
        return cached is None or (cached.status.nominated_node_name or "") == self.node

    def send(self, wire: Wire) -> Any:
        body = {"status": {"nominatedNodeName": self.node or None}}
        try:
            return wire.request(
                self,
                CoreV1Api.patch_namespaced_pod_status,
                f"{pod_path(self.pod)}/status",
                body,
                STRATEGIC_MERGE_PATCH,
            )
        except NotFound:
            return None

    def refused(self, wire: Wire, outcomes: Outcomes, err: BaseException) -> None:
        wire.hold.done(self.key)


@dataclass(frozen=True, slots=True)
class PodCondition(Call):
    """A Pod condition other than PodScheduled: a victim's DisruptionTarget, written by the preemption workers
    before its deletion (`Deletion` requires it)."""

    pod: Pod = field(compare=False)
    condition: Condition = field(compare=False, default_factory=lambda: Condition(type="", status=""))

    operation: ClassVar[str] = "set_condition"
    lane: ClassVar[str] = "preemption"

    @property
    def part(self) -> str:
        return self.condition.type

    def send(self, wire: Wire) -> Any:
        current = wire.current_pod(self.pod)
        conditions = merge_condition(current.status.conditions, self.condition, wire.now())
        if conditions is None:
            return None
        changed = next(c for c in conditions if c.type == self.condition.type)
        body = {"status": {"conditions": [condition_json(changed)]}}
        try:
            return wire.request(
                self,
                CoreV1Api.patch_namespaced_pod_status,
                f"{pod_path(current)}/status",
                body,
                STRATEGIC_MERGE_PATCH,
            )
        except NotFound:
            return None


@dataclass(frozen=True, slots=True)
class PodScheduled(PodCondition):
    """PodScheduled=False with why (ours, to inform users): the one worker of its lane writes the newest asked
    for each pod, once no preemption is under way; the condition written is its outcome (which kube-scheduler
    tells in a `FailedScheduling` Event)."""

    lane: ClassVar[str] = "pod-conditions"
    held: ClassVar[bool] = True
    quiet: ClassVar[bool] = True

    def send(self, wire: Wire) -> Any:
        if self.condition.status == "False" and wire.bound(self.key):
            return None  # bound since the pass that asked for it: stale
        return PodCondition.send(self, wire)

    def done(self, wire: Wire, outcomes: Outcomes, written: Any) -> None:
        if written is not None:  # None: it changed nothing, or was stale
            outcomes.condition_written(self.pod, self.condition)


@dataclass(frozen=True, slots=True)
class Deletion(Call):
    """Delete a victim with its grace period and a UID precondition: shown terminating at once, sent after its
    DisruptionTarget went through (as upstream's preemption executor does), never if that was refused.

    It stays in the ledger until the informer's copy shows it (`seen`), whatever the DELETE answered: until then
    the view lists the victim in `victims_in_flight`, and its preemptor waits. Upstream's preemptor waits until
    the lister shows its last victim deleted (`IsPodRunningPreemption`); the watch delivers events in order, so
    by then it shows every earlier one too.
    """

    pod: Pod = field(compare=False)
    grace_period_seconds: int | None = None

    operation: ClassVar[str] = "delete"
    lane: ClassVar[str] = "preemption"

    def shows(self, obj: Pod) -> Pod:
        if obj.metadata.uid != self.pod.metadata.uid or obj.metadata.deletion_timestamp is not None:
            return obj
        deleted = {"deletion_timestamp": datetime.now(UTC)}
        return obj.model_copy(update={"metadata": obj.metadata.model_copy(update=deleted)})

    def seen(self, cached: Pod | None) -> bool:
        """Gone, replaced, or terminating with a grace period or a finalizer that keeps it. A victim deleted with no
        grace period counts only once it is gone: the API server writes it with a deletionTimestamp (grace 0)
        before it removes it, in the same request, and the watch delivers both; released on the first, the
        preemptor saw that victim still on its nominated node and another victim of the same decision already
        gone elsewhere (fuzz seed 284884 protected #3)."""
        if cached is None or cached.metadata.uid != self.pod.metadata.uid:
            return True
        meta = cached.metadata
        return meta.deletion_timestamp is not None and bool(meta.deletion_grace_period_seconds or meta.finalizers)

    def send(self, wire: Wire) -> Any:
        meta = self.pod.metadata
        body: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": meta.uid}}
        if self.grace_period_seconds is not None:
            body["gracePeriodSeconds"] = self.grace_period_seconds
        try:
            wire.request(self, CoreV1Api.delete_namespaced_pod, pod_path(self.pod), body)
        except (NotFound, Conflict) as err:
            log.info("victim already gone", pod=self.key, status=err.status)
            wire.hold.done(self.key, meta.uid or "")
        return None

    def refused(self, wire: Wire, outcomes: Outcomes, err: BaseException) -> None:
        wire.hold.done(self.key)


@dataclass(frozen=True, slots=True)
class PodGroupCondition(Call):
    """A PodGroup status condition: a merge patch of the whole list (custom resources have no strategic merge),
    guarded by resourceVersion. One worker, so the conditions written to a group keep their order."""

    group: PodGroup = field(compare=False)
    condition: Condition = field(compare=False, default_factory=lambda: Condition(type="", status=""))

    kind: ClassVar[str] = "podgroups"
    operation: ClassVar[str] = "set_group_condition"
    lane: ClassVar[str] = "podgroup-conditions"
    quiet: ClassVar[bool] = True

    @property
    def part(self) -> str:
        return self.condition.type

    def send(self, wire: Wire) -> Any:
        current = wire.current_group(self.group)
        for _ in range(3):
            conditions = merge_condition(current.status.conditions, self.condition, wire.now())
            if conditions is None:
                return None
            body = {
                "metadata": {"resourceVersion": current.metadata.resource_version},
                "status": {"conditions": [condition_json(c) for c in conditions]},
            }
            try:
                return wire.request(
                    self,
                    CustomObjectsApi.patch_namespaced_custom_object_status,
                    f"{group_path(current)}/status",
                    body,
                    MERGE_PATCH,
                )
            except NotFound:
                return None
            except Conflict:
                newer = wire.newer_group(current)
                if newer is None:
                    log.info("podgroup condition not written: the group kept changing", group=self.key)
                    return None
                current = newer
        return None


@dataclass(frozen=True, slots=True)
class PodGroupAnnotation(Call):
    """A PodGroup annotation: a gang's min-runtime start. Owed: when stopping it is sent though only queued,
    and after the Lease was handed back. The next leader finds the group running and never writes its start
    again, and without it the group has no min-runtime protection; nothing else writes it, so it cannot undo
    the next leader's work."""

    group: PodGroup = field(compare=False)
    name: str = ""
    value: str = ""

    kind: ClassVar[str] = "podgroups"
    operation: ClassVar[str] = "annotate_group"
    lane: ClassVar[str] = "podgroup-starts"
    owed: ClassVar[bool] = True
    quiet: ClassVar[bool] = True

    @property
    def part(self) -> str:
        return self.name

    def send(self, wire: Wire) -> Any:
        current = wire.current_group(self.group)
        if current.metadata.annotations.get(self.name) == self.value:
            return None
        body = {"metadata": {"annotations": {self.name: self.value}}}
        try:
            return wire.request(
                self, CustomObjectsApi.patch_namespaced_custom_object, group_path(current), body, MERGE_PATCH
            )
        except NotFound:
            return None


def _reference(obj: ApiModel) -> dict[str, Any]:
    meta = obj.metadata  # type: ignore[attr-defined]
    reference = {
        "apiVersion": getattr(obj, "api_version", "v1"),
        "kind": getattr(obj, "kind", ""),
        "name": meta.name,
        "uid": meta.uid,
    }
    if meta.namespace:
        reference["namespace"] = meta.namespace
    return {k: v for k, v in reference.items() if v}


@dataclass(frozen=True, slots=True)
class EventCall(Call):
    """An events.k8s.io/v1 Event, best effort: a lost Event never stops scheduling, so it is tried fewer times and
    stays out of the ledger (`events.py` sends it). Events are namespaced: one about a cluster-scoped object (a
    PriorityClass, a Queue, a Node) goes to `default`, where kube-apiserver accepts it (only `default` or
    `kube-system` pass validation). They wait while a preemption is under way."""

    body: dict[str, Any] = field(compare=False, default_factory=dict)

    kind: ClassVar[str] = "events"
    operation: ClassVar[str] = "event"
    lane: ClassVar[str] = "events"
    held: ClassVar[bool] = True
    attempts: ClassVar[int] = 3

    @staticmethod
    def of(
        regarding: ApiModel,
        event_type: str,
        reason: str,
        note: str,
        related: ApiModel | None,
        identity: str,
        now: datetime,
    ) -> EventCall:
        meta = regarding.metadata  # type: ignore[attr-defined]
        namespace = meta.namespace or "default"
        body: dict[str, Any] = {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": f"{meta.name}.{uuid.uuid4().hex[:16]}", "namespace": namespace},
            "eventTime": now.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            "reportingController": REPORTING_CONTROLLER,
            "reportingInstance": identity,
            "action": EVENT_ACTIONS.get(reason, reason),
            "reason": reason,
            "note": note[:EVENT_NOTE_LIMIT],
            "type": event_type,
            "regarding": _reference(regarding),
        }
        if related is not None:
            body["related"] = _reference(related)
        return EventCall(key="", unit="", body=body)

    def send(self, wire: Wire) -> Any:
        namespace = self.body["metadata"]["namespace"]
        wire.request(
            self,
            EventsV1Api.create_namespaced_event,
            f"/apis/events.k8s.io/v1/namespaces/{namespace}/events",
            self.body,
        )
        return None
