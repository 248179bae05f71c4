"""KubeCluster: the `Cluster` Protocol over a real API server: a view and a write path.

- The view (`view.py`): informers, plus the overlay of what the ledger holds in flight, give `objects()`.
- The write path: each `Cluster` write makes a typed call (`calls.py`) and hands it to the dispatcher
  (`dispatcher.py`), which orders it per object and coalesces it (`order.py`), sends it from its lane of workers
  over the sender (`sender.py`: retries, the Lease), and records the result in the ledger
  (`scheduler/framework/ledger.py`): the one record of the writes in flight, which the view shows and the runner
  reads refusals from. What a write came to for its pod goes to the `Outcomes` the back end is given, which
  records it as Events (`events.py`), as the memory back end's does.

So a pass never waits on the API: it writes, and the next `objects()` already shows what it wrote. A write
refused in the background fails only its unit (docs/DESIGN.md, invariant 7): the ledger names the unit, a
Binding's or a gate removal's refused outcome tells the pod why, and the pod shows pending again. `bind` never
raises for a pod already bound: the view shows it where it went, as the memory back end does.

Events and PodScheduled messages wait while a preemption is under way (`hold.py`), so its own writes have the
API server to themselves.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime

from kubernetes import client

from kube.transport import Transport
from scheduler.api.meta import ApiModel, Condition
from scheduler.api.pod import Pod
from scheduler.api.pod_group import PodGroup
from scheduler.cluster.kube.backpressure import Backpressure
from scheduler.cluster.kube.calls import (
    BIND_TIMEOUT_SECONDS,
    Binding,
    Call,
    ClaimAllocation,
    ClaimBinding,
    Deletion,
    GateRemoval,
    Nomination,
    PodCondition,
    PodGroupAnnotation,
    PodGroupCondition,
    PodScheduled,
    merge_condition,
)
from scheduler.cluster.kube.dispatcher import Dispatcher
from scheduler.cluster.kube.events import Events
from scheduler.cluster.kube.hold import PreemptionHold
from scheduler.cluster.kube.lanes import Stopped, lanes_of
from scheduler.cluster.kube.sender import NotLeader, Sender
from scheduler.cluster.kube.view import KubeView
from scheduler.cluster.outcomes import OutcomeEvents
from scheduler.framework.cluster import ClusterObjects, object_key, unit_of
from scheduler.framework.devices import ClaimWrite
from scheduler.framework.ledger import Ledger
from scheduler.framework.storage import PodVolumes
from scheduler.framework.unit_key import group_unit

__all__ = ["KubeCluster", "NotLeader"]


class KubeCluster:
    def __init__(
        self,
        api: client.ApiClient,
        identity: str = "",
        may_write: Callable[[], bool] = lambda: True,
        watch_timeout_seconds: int = 300,
        request_timeout_seconds: float = 10.0,
        on_api_call: Callable[[str, str], None] | None = None,
        on_relist: Callable[[str], None] | None = None,
        binding_workers: int = 16,
        preemption_workers: int = 32,
        best_effort_hold_seconds: float = 5.0,
        volume_bind_timeout_seconds: float = BIND_TIMEOUT_SECONDS,
    ) -> None:
        self.api = api
        self.identity = identity or f"phalanx-{uuid.uuid4().hex[:8]}"
        self.may_write = may_write
        self.request_timeout_seconds = request_timeout_seconds
        self.volume_bind_timeout_seconds = volume_bind_timeout_seconds
        """How long a pod's claims may take to be bound before its Binding is given up (`ClaimBinding`)."""
        self.ledger: Ledger[Call] = Ledger()
        self.hold = PreemptionHold(best_effort_hold_seconds)
        self.view = KubeView(api, self.ledger, self.hold, watch_timeout_seconds, request_timeout_seconds, on_relist)
        self.changed = self.view.changed
        self.pods = self.view.pods
        self.informers = self.view.informers
        self.sender = Sender(Transport(api, request_timeout_seconds), self.view, self.hold, may_write, on_api_call)
        lanes = lanes_of({"bindings": binding_workers, "preemption": preemption_workers})
        self.events = Events(lanes["events"], self.sender, self.identity)
        self.dispatcher = Dispatcher(
            self.sender, OutcomeEvents(self.events.record), self.ledger, lanes, on_refused=self.changed.set
        )
        self.backpressure = Backpressure(lanes["bindings"])

    # lifecycle

    def start(self) -> None:
        self.view.start()

    def stop_writing(self) -> None:
        """Stopping, first step: take no more writes and drop what is only queued, but for what is owed (a
        gang's min-runtime start). It waits for nothing, so the caller can hand its Lease back at once.

        From here no write is retried and nothing waits for a preemption (`hold.py`): a PodScheduled message
        or an Event that was waiting for one is not sent. Writes on the wire go on; `stop` waits for them.
        """
        self.sender.stopping.set()
        self.hold.release()
        self.dispatcher.stop_writing()

    def stop(self, deadline: float | None = None) -> Stopped:
        """Stopping, last step (after `stop_writing`, which it does if the caller did not): the writes on the
        wire, and the owed ones, are finished by `deadline` (`time.monotonic()`; default: one request
        timeout from now), then the watches closed. A leader hands its Lease back before this step; a write
        that would follow one on the wire (a victim's deletion after its DisruptionTarget, a Binding after
        its gate removal) is not sent once stopping began: the next leader decides it anew."""
        if deadline is None:
            deadline = time.monotonic() + self.request_timeout_seconds
        self.stop_writing()
        stopped = self.dispatcher.finish(deadline)
        self.view.stop(deadline)
        return stopped

    def wait_synced(self, timeout: float) -> bool:
        return self.view.wait_synced(timeout)

    # reads

    def now(self) -> datetime:
        return datetime.now(UTC)

    def writes_backed_up(self) -> bool:
        """The Bindings queued or on the wire reached a few seconds' worth (`backpressure.py`); once the pass
        ended, `backpressure.room` says when to run the next."""
        return self.backpressure.full()

    def objects(self) -> ClusterObjects:
        return self.view.objects()

    # writes (the `Cluster` Protocol)

    def bind(self, pod: Pod, node_name: str, unit: str | None = None) -> None:
        """Shown on the node now, sent by a binding worker after the pod's gate removal (kube-scheduler's
        binding cycle). A Binding refused for good leaves the ledger: the pod is pending again."""
        self.dispatcher.add(Binding(object_key(pod), unit or unit_of(pod), pod=pod, node=node_name))

    def bind_volumes(self, pod: Pod, node_name: str, volumes: PodVolumes, unit: str | None = None) -> None:
        """Shown at once (the volumes claimed, the claims annotated); sent by a volume worker, which then waits for the
        PV controller (`ClaimBinding`). The pod's Binding, made next, is sent once it went through."""
        if not self.may_write():
            raise NotLeader("bind_volumes")
        call = ClaimBinding(
            object_key(pod),
            unit or unit_of(pod),
            pod=pod,
            node=node_name,
            volumes=volumes,
            timeout=self.volume_bind_timeout_seconds,
        )
        self.dispatcher.add(call)

    def allocate_claims(
        self, pod: Pod, node_name: str, writes: tuple[ClaimWrite, ...], unit: str | None = None
    ) -> None:
        """Shown at once (the claims allocated and reserved); sent by a volume worker (`ClaimAllocation`). The pod's
        Binding, made next, is sent once it went through."""
        if not self.may_write():
            raise NotLeader("allocate_claims")
        call = ClaimAllocation(object_key(pod), unit or unit_of(pod), pod=pod, node=node_name, writes=writes)
        self.dispatcher.add(call)

    def remove_scheduling_gate(self, pod: Pod, gate: str, unit: str | None = None) -> None:
        """Shown without the gate now; sent by a gate worker (one patch per gang member, sent synchronously,
        cost the loop milliseconds each)."""
        if not self.may_write():
            raise NotLeader("remove_gate")
        current = self.sender.current_pod(pod)
        key = object_key(pod)
        if not any(g.name == gate for g in current.spec.scheduling_gates):
            return
        self.dispatcher.add(GateRemoval(key, unit or unit_of(pod), pod=current, gate=gate))

    def set_nominated_node(self, pod: Pod, node_name: str | None, unit: str | None = None) -> None:
        """Shown at once, written by the preemption workers; a nomination refused for good leaves the ledger,
        so the next pass decides again from what the cluster holds."""
        if not self.may_write():
            raise NotLeader("nominate")
        key = object_key(pod)
        nominee = node_name or ""
        current = self.sender.current_pod(pod)
        with self.ledger.lock:
            shown = self.view.show_pod(key, current)
        if (shown.status.nominated_node_name or "") == nominee:
            return
        if nominee:
            self.hold.nominee(key)
        else:
            self.hold.done(key)
        self.dispatcher.add(Nomination(key, unit or unit_of(pod), pod=current, node=nominee))

    def set_pod_condition(self, pod: Pod, condition: Condition, unit: str | None = None) -> None:
        """PodScheduled goes to its own lane (it only informs, and the newest wins); any other condition (a
        victim's DisruptionTarget) to the preemption workers, and the victim's deletion (`delete_pod`) is sent
        only once it went through, as upstream's preemption executor does."""
        current = self.sender.current_pod(pod)
        if merge_condition(current.status.conditions, condition, self.now()) is None:
            return
        key = object_key(pod)
        kind = PodScheduled if condition.type == "PodScheduled" else PodCondition
        self.dispatcher.add(kind(key, unit or unit_of(pod), pod=pod, condition=condition))

    def set_pod_group_condition(self, group: PodGroup, condition: Condition) -> None:
        if not self.may_write():
            raise NotLeader("set_group_condition")
        if merge_condition(self.sender.current_group(group).status.conditions, condition, self.now()) is not None:
            key = object_key(group)
            self.dispatcher.add(PodGroupCondition(key, group_unit(key), group=group, condition=condition))

    def annotate_pod_group(self, group: PodGroup, key: str, value: str) -> None:
        if not self.may_write():
            raise NotLeader("annotate_group")
        if self.sender.current_group(group).metadata.annotations.get(key) != value:
            at = object_key(group)
            self.dispatcher.add(PodGroupAnnotation(at, group_unit(at), group=group, name=key, value=value))

    def delete_pod(self, pod: Pod, grace_period_seconds: int | None, unit: str | None = None) -> None:
        """Shown terminating at once; sent by the preemption workers after the pod's DisruptionTarget. One
        refused for good (or not sent) leaves the ledger: the victim counts as running again."""
        if not self.may_write():
            raise NotLeader("delete")
        key = object_key(pod)
        self.hold.victim(key, pod.metadata.uid or "")
        self.dispatcher.add(Deletion(key, unit or unit_of(pod), pod=pod, grace_period_seconds=grace_period_seconds))

    def record_event(
        self, regarding: ApiModel, event_type: str, reason: str, note: str, related: ApiModel | None = None
    ) -> None:
        """events.k8s.io/v1, best effort: a lost Event must never stop scheduling; none without the Lease."""
        self.events.record(regarding, event_type, reason, note, related)
