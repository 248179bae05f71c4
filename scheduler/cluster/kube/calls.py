"""The scheduler's writes as typed calls (kube-scheduler's `api_calls`): one small dataclass per kind of write.

Each call says which object it writes (`key`) and for which scheduling unit (`unit`), which lane of workers
sends it (`lane`), what the view shows while it is in flight (`shows`) and when the informer shows it done
(`seen`), how it merges with a newer call for the same object (`merge`, `supersedes`), what it must wait
for (`follows`), and how it is sent (`send`, over a `Wire`). The dispatcher (`dispatcher.py`) does the rest
for all of them alike: ordering per object, coalescing, retries, the leader check, results in the ledger.

Every write is idempotent, so a restarted scheduler may replay it: a Binding of a pod already bound answers
where it went, deletions carry a UID precondition and take "already gone" as done, a gate removal is a JSON
patch guarded by a `test` of the gate list, a PodGroup condition a merge patch guarded by resourceVersion,
and a condition that would change nothing is not sent. Adding a kind of write is adding a class here and
the `Cluster` method that makes it (`cluster.py`).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from enum import Enum
from typing import Any, ClassVar, Protocol

import structlog
from kubernetes import client

from kube.errors import ApiError, Conflict, Invalid, NotFound
from kube.transport import JSON
from scheduler.api.meta import ApiModel, Condition
from scheduler.api.pod import Pod
from scheduler.api.pod_group import GROUP, NATIVE_API_VERSION, VERSION, PodGroup
from scheduler.cluster.kube.hold import PreemptionHold

log = structlog.get_logger(__name__)

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
REPORTING_CONTROLLER = "scheduling.phalanx.dev/scheduler"
ALREADY_ASSIGNED = re.compile(r'is already assigned to node \\?"([^"\\]+)\\?"')
EVENT_ACTIONS = {"Scheduled": "Binding", "FailedScheduling": "Scheduling", "Preempted": "Preempting"}
EVENT_NOTE_LIMIT = 1024


class NotSent(Exception):
    """A call was not sent: what it follows was refused, it could only be refused, or stopping began first."""


class Order(Enum):
    """How a call relates to an earlier one in flight for the same object."""

    FREE = "free"
    """Sent whenever a worker is free."""
    AFTER = "after"
    """Sent once the earlier one has ended, however it ended."""
    REQUIRES = "requires"
    """Sent once the earlier one went through; not sent if it was refused (a Binding after its gate removal,
    a deletion after its DisruptionTarget)."""


class Wire(Protocol):
    """What a call needs to be sent: requests (retried, counted, only while this replica leads), and the view."""

    hold: PreemptionHold

    def request(
        self, call: Call, route: Callable[..., Any], path: str, body: Any = None, content_type: str = JSON
    ) -> Any:
        """One write of `call` along `route` (a `kubernetes.client` method, for its verb and its RBAC grant)."""

    def read(self, route: Callable[..., Any], path: str) -> Any:
        """One GET, not retried."""

    def now(self) -> datetime: ...

    def current_pod(self, pod: Pod) -> Pod:
        """The newest of `pod`, the informer's copy and what our writes returned."""

    def current_group(self, group: PodGroup) -> PodGroup: ...

    def newer_group(self, seen: PodGroup) -> PodGroup | None:
        """The group as the watch delivers it once it is newer than `seen`, within a few seconds, else None."""

    def bound(self, key: str) -> bool:
        """The pod is bound, or a Binding of it is in flight."""

    def event(self, regarding: ApiModel, event_type: str, reason: str, note: str) -> None:
        """Record an Event (an `EventCall`)."""


def pod_path(pod: Pod) -> str:
    return f"/api/v1/namespaces/{pod.metadata.namespace or 'default'}/pods/{pod.metadata.name}"


def group_path(group: PodGroup) -> str:
    """Where a PodGroup is written: the native kind at its own API, ours (and scenario files') at our CRD."""
    meta = group.metadata
    api_version = NATIVE_API_VERSION if group.api_version == NATIVE_API_VERSION else f"{GROUP}/{VERSION}"
    return f"/apis/{api_version}/namespaces/{meta.namespace or 'default'}/podgroups/{meta.name}"


def merge_condition(existing: list[Condition], condition: Condition, now: datetime) -> list[Condition] | None:
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
    told: ClassVar[bool] = False
    """A refusal is told to the pod by the call itself (a Warning Event), not by the runner."""
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

    def repeats(self, older: Call, done: bool) -> bool:
        """`older`, in the ledger for the same object (`done`: answered, not yet seen by the informer), already
        makes this write: this one is not entered."""
        return False

    def merge(self, older: Call) -> Call | None:
        """This newer call replacing `older`, still queued for the same object: the call to send, or None."""
        return None

    def supersedes(self, older: Call) -> bool:
        """`older`, still queued for the same object, is not to be sent at all once this call is made."""
        return False

    def follows(self, earlier: Call) -> Order:
        return Order.FREE

    def send(self, wire: Wire) -> Any:
        """Send it; returns the object the server wrote (shown until the informer has it), a replacement call
        (what the ledger must show instead), or None. Raises an `ApiError` when refused."""
        raise NotImplementedError

    def done(self, wire: Wire, written: Any) -> None:
        """After it went through."""

    def refused(self, wire: Wire, err: BaseException) -> None:
        """After it was refused (or not sent: `err` is then the reason)."""


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
        gates = [g for g in obj.spec.scheduling_gates if g.name != self.gate]
        return obj.model_copy(update={"spec": obj.spec.model_copy(update={"scheduling_gates": gates})})

    def seen(self, cached: Pod | None) -> bool:
        return cached is None or not any(g.name == self.gate for g in cached.spec.scheduling_gates)

    def repeats(self, older: Call, done: bool) -> bool:
        return isinstance(older, GateRemoval) and not done

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
                return wire.request(self, client.CoreV1Api.patch_namespaced_pod, pod_path(current), patch, JSON_PATCH)
            except NotFound:
                return None
            except Invalid:
                seen = current
                current = Pod.model_validate(wire.read(client.CoreV1Api.read_namespaced_pod, pod_path(current)))
                if (
                    seen.spec.scheduling_gates == current.spec.scheduling_gates
                    and seen.metadata.uid == current.metadata.uid
                ):
                    raise
        raise RuntimeError(f"scheduling gate {self.gate} of {self.key}: kept changing under us")

    def refused(self, wire: Wire, err: BaseException) -> None:
        if isinstance(err, ApiError):
            wire.event(self.pod, "Warning", "FailedScheduling", f"Removing scheduling gate {self.gate}: {err.answer}")


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

    def repeats(self, older: Call, done: bool) -> bool:
        """A pod is bound once: a pass that sees it on its node already (the view shows the Binding) never
        binds it again, and one made meanwhile is the same Binding."""
        return isinstance(older, Binding)

    def supersedes(self, older: Call) -> bool:
        """A PodScheduled=False still queued is stale once the pod is bound: written after the Binding, it would
        turn the bound pod's condition back to False and send a FailedScheduling Event for a scheduled pod."""
        return isinstance(older, PodScheduled)

    def follows(self, earlier: Call) -> Order:
        if isinstance(earlier, GateRemoval):
            return Order.REQUIRES
        if isinstance(earlier, PodScheduled):
            return Order.AFTER
        return Order.FREE

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
            wire.request(self, client.CoreV1Api.create_namespaced_pod_binding, f"{pod_path(self.pod)}/binding", body)
        except Conflict as err:
            placed = ALREADY_ASSIGNED.search(err.message)
            if placed is None:
                raise
            log.info("pod already bound", pod=self.key, node=placed.group(1))
            return replace(self, node=placed.group(1))
        return None

    def done(self, wire: Wire, written: Any) -> None:
        wire.hold.done(self.key)  # a nominee's Binding is answered: its preemption is over
        if not isinstance(written, Binding):
            wire.event(self.pod, "Normal", "Scheduled", f"Successfully assigned {self.key} to {self.node}")

    def refused(self, wire: Wire, err: BaseException) -> None:
        wire.hold.done(self.key)
        if isinstance(err, ApiError):
            log.warning("binding failed", pod=self.key, node=self.node, status=err.status or err.answer)
            wire.event(self.pod, "Warning", "FailedScheduling", f"Binding rejected: {err.answer}")


@dataclass(frozen=True, slots=True)
class Nomination(Call):
    """`status.nominatedNodeName` ("" clears it): shown at once, written by the preemption workers in parallel
    with the victims' writes (one after another they held a gang's pass for 4-5 s, issue 12)."""

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

    def merge(self, older: Call) -> Call | None:
        return self if isinstance(older, Nomination) else None

    def follows(self, earlier: Call) -> Order:
        return Order.AFTER if isinstance(earlier, Nomination) else Order.FREE

    def send(self, wire: Wire) -> Any:
        body = {"status": {"nominatedNodeName": self.node or None}}
        try:
            return wire.request(
                self,
                client.CoreV1Api.patch_namespaced_pod_status,
                f"{pod_path(self.pod)}/status",
                body,
                STRATEGIC_MERGE_PATCH,
            )
        except NotFound:
            return None

    def refused(self, wire: Wire, err: BaseException) -> None:
        wire.hold.done(self.key)


@dataclass(frozen=True, slots=True)
class PodCondition(Call):
    """A Pod condition other than PodScheduled: a victim's DisruptionTarget, written by the preemption workers
    before its deletion (`Deletion` requires it)."""

    pod: Pod = field(compare=False)
    condition: Condition = field(compare=False, default_factory=lambda: Condition(type="", status=""))

    operation: ClassVar[str] = "set_condition"
    lane: ClassVar[str] = "preemption"

    def merge(self, older: Call) -> Call | None:
        same = isinstance(older, PodCondition) and older.condition.type == self.condition.type
        return self if same else None

    def follows(self, earlier: Call) -> Order:
        return Order.AFTER if isinstance(earlier, PodCondition) else Order.FREE

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
                client.CoreV1Api.patch_namespaced_pod_status,
                f"{pod_path(current)}/status",
                body,
                STRATEGIC_MERGE_PATCH,
            )
        except NotFound:
            return None


@dataclass(frozen=True, slots=True)
class PodScheduled(PodCondition):
    """PodScheduled=False with why (ours, to inform users): the one worker of its lane writes the newest asked
    for each pod, once no preemption is under way, and a `FailedScheduling` Event with it, as kube-scheduler."""

    lane: ClassVar[str] = "pod-conditions"
    held: ClassVar[bool] = True
    quiet: ClassVar[bool] = True

    def send(self, wire: Wire) -> Any:
        if self.condition.status == "False" and wire.bound(self.key):
            return None  # bound since the pass that asked for it: stale
        written = PodCondition.send(self, wire)
        c = self.condition
        if written is not None and (c.type, c.status, c.reason) == ("PodScheduled", "False", "Unschedulable"):
            wire.event(self.pod, "Warning", "FailedScheduling", c.message or "")
        return written


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

    def follows(self, earlier: Call) -> Order:
        if isinstance(earlier, PodCondition) and not isinstance(earlier, PodScheduled):
            return Order.REQUIRES
        return Order.FREE

    def send(self, wire: Wire) -> Any:
        meta = self.pod.metadata
        body: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": meta.uid}}
        if self.grace_period_seconds is not None:
            body["gracePeriodSeconds"] = self.grace_period_seconds
        try:
            wire.request(self, client.CoreV1Api.delete_namespaced_pod, pod_path(self.pod), body)
        except (NotFound, Conflict) as err:
            log.info("victim already gone", pod=self.key, status=err.status)
            wire.hold.done(self.key, meta.uid or "")
        return None

    def refused(self, wire: Wire, err: BaseException) -> None:
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

    def merge(self, older: Call) -> Call | None:
        same = isinstance(older, PodGroupCondition) and older.condition.type == self.condition.type
        return self if same else None

    def follows(self, earlier: Call) -> Order:
        return Order.AFTER if isinstance(earlier, PodGroupCondition) else Order.FREE

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
                    client.CustomObjectsApi.patch_namespaced_custom_object_status,
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

    def merge(self, older: Call) -> Call | None:
        return self if isinstance(older, PodGroupAnnotation) and older.name == self.name else None

    def send(self, wire: Wire) -> Any:
        current = wire.current_group(self.group)
        if current.metadata.annotations.get(self.name) == self.value:
            return None
        body = {"metadata": {"annotations": {self.name: self.value}}}
        try:
            return wire.request(
                self, client.CustomObjectsApi.patch_namespaced_custom_object, group_path(current), body, MERGE_PATCH
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
    """An events.k8s.io/v1 Event, best effort: a lost Event never stops scheduling. Events are namespaced: one
    about a cluster-scoped object (a PriorityClass, a Queue, a Node) goes to `default`, where kube-apiserver
    accepts it (only `default` or `kube-system` pass validation). They wait while a preemption is under way."""

    body: dict[str, Any] = field(compare=False, default_factory=dict)

    kind: ClassVar[str] = "events"
    operation: ClassVar[str] = "event"
    lane: ClassVar[str] = "events"
    held: ClassVar[bool] = True

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
            client.EventsV1Api.create_namespaced_event,
            f"/apis/events.k8s.io/v1/namespaces/{namespace}/events",
            self.body,
        )
        return None

    def refused(self, wire: Wire, err: BaseException) -> None:
        log.warning("event not recorded", regarding=self.body["regarding"].get("name"), error=type(err).__name__)
