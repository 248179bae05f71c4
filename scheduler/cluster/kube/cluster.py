"""KubeCluster: the `Cluster` Protocol over a real API server, with the `kubernetes` client.

Reads come from informers (list-then-watch caches, `informer.py`), so a pass never waits on the
API. Our own writes are overlaid on the cache until the watch delivers them: a pod we bound counts
on its node in the very next pass, which is what keeps a node from being over-committed between a
Binding and its watch event (kube-scheduler's "assume"). Writes are sent from lanes of worker
threads (`lanes.py`): Bindings and gate removals as kube-scheduler's binding cycle does (a Binding
waits for its pod's gate removal), preemption writes, PodScheduled conditions on a thread of their
own, PodGroup writes on one ordered thread, Events. Stopping drops what they only queued and
finishes what is on the wire (`stop_writing`, `stop`). So `bind` never raises `AlreadyBound` here: on a
409 "already assigned" the pod is assumed on the node the message names until the watch shows it.
Every pod is cached, whoever schedules it, so nodes are accounted for in full.

Writes are idempotent, so a restarted scheduler may replay them: 409 on Binding means someone
placed the pod, deletes carry a UID precondition and ignore "already gone", gate
removal is a JSON patch guarded by a `test` of the gate list, condition writes are skipped when
nothing changes. Like kube-scheduler, the back end reports `Scheduled` after each Binding and
`FailedScheduling` when a pod's PodScheduled condition turns Unschedulable (or its message
changes); Events go out from their own lane so they never slow a pass, and they and the
PodScheduled messages wait while a preemption is under way (`hold.py`). Transient failures
(429, 5xx, timeouts) are retried with jittered backoff; a write made in a pass that still fails
raises `WriteRefused` with the server's answer (`refusal.py`), which fails only its unit, and a
refused Binding is a Warning Event, its pod pending again in the next view. Each write first asks
`may_write` (the leader elector): a replica that lost its Lease stops at once.
"""

from __future__ import annotations

import importlib.metadata
import json
import re
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import CancelledError, Future
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import structlog
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from scheduler.api.meta import ApiModel, Condition
from scheduler.api.node import Node
from scheduler.api.pdb import PodDisruptionBudget
from scheduler.api.pod import Pod
from scheduler.api.pod_group import GROUP, NATIVE_API_VERSION, VERSION, NativePodGroup, PodGroup
from scheduler.api.priority_class import PriorityClass
from scheduler.api.queue import Queue
from scheduler.api.workload import Workload
from scheduler.cluster.kube.backoff import call_with_retry
from scheduler.cluster.kube.hold import PreemptionHold
from scheduler.cluster.kube.informer import Informer, prune
from scheduler.cluster.kube.lanes import Lane, LaneFull, Lanes, LaneStopped, Stopped
from scheduler.cluster.kube.refusal import FAILED_WRITES, answer, refusals
from scheduler.cluster.kube.transport import Transport
from scheduler.framework.cluster import BackgroundRefusal, ClusterObjects, PassAborted, object_key

log = structlog.get_logger(__name__)

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
REPORTING_CONTROLLER = "scheduling.phalanx.dev/scheduler"
ALREADY_ASSIGNED = re.compile(r'is already assigned to node \\"([^"\\]+)\\"')
USER_AGENT = f"phalanx-scheduler/{importlib.metadata.version('phalanx')}"
"""How the API server's audit log and metrics tell the scheduler's requests from other clients'."""
EVENT_ACTIONS = {"Scheduled": "Binding", "FailedScheduling": "Scheduling", "Preempted": "Preempting"}


class NotLeader(PassAborted):
    """This replica does not hold the Lease (any more): it must not write."""


def api_client_from(kubeconfig: str | Path | None) -> client.ApiClient:
    """A client for `kubeconfig`, or the in-cluster service account when it is None."""
    configuration = client.Configuration()
    if kubeconfig is None:
        config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    else:
        config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=str(kubeconfig), client_configuration=configuration
        )
    configuration.connection_pool_maxsize = 64
    # The loaders' token-refresh hook sets `host` again before every request, and while the proxy
    # comes from the environment each of those re-reads every environment variable (~65 us of a
    # Binding's ~1 ms of CPU). Pinning the proxy the environment gives for this host keeps it as is.
    configuration.proxy = configuration.proxy
    api = client.ApiClient(configuration)
    api.user_agent = USER_AGENT
    return api


def read_json(response: Any) -> Any:
    """Body of a `_preload_content=False` response; releasing it returns the connection to the pool."""
    try:
        data = response.data
    finally:
        response.release_conn()
    return json.loads(data) if data else None


def _version(obj: ApiModel | None) -> int:
    """resourceVersion as a number: opaque by contract, an etcd revision in every real server."""
    meta = getattr(obj, "metadata", None)
    try:
        return int(getattr(meta, "resource_version", None) or 0)
    except ValueError:
        return 0


SCHEDULING_CONDITIONS = ("DisruptionTarget",)
"""The Pod conditions whose change a pass must see. PodScheduled counts through `scheduled_time()` (its
True transition, which comes with the Binding); its False reason and message are ours, written to
inform users, and the kubelet's conditions (Ready, ...) change nothing for a pass."""


def same_for_scheduling(old: Pod, new: Pod) -> bool:
    """`new` differs from `old` only in what no pass reads, such as a kubelet's status report.

    A kubelet updates each pod it starts (phase Running, Ready conditions, IPs, container states)
    and then whenever a container changes. At 10,000 pods those updates woke a full pass each,
    back to back, and the loop took the GIL from the binders (issue 12). The cache still takes the
    new object, so the next pass sees it; it just does not run for it.
    """
    a, b = old.metadata, new.metadata
    if (a.uid, a.labels, a.annotations, a.deletion_timestamp) != (b.uid, b.labels, b.annotations, b.deletion_timestamp):
        return False
    if old.spec != new.spec:
        return False
    if (old.is_terminal, old.status.nominated_node_name, old.scheduled_time()) != (
        new.is_terminal,
        new.status.nominated_node_name,
        new.scheduled_time(),
    ):
        return False
    return all(old.condition(t) == new.condition(t) for t in SCHEDULING_CONDITIONS)


def _merge_condition(existing: list[Condition], condition: Condition, now: datetime) -> list[Condition] | None:
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


def serves(api: client.ApiClient, api_version: str, resource: str) -> bool:
    """Whether the server offers `resource` at `api_version` (discovery, which every authenticated user may read)."""
    group, version = api_version.split("/")
    try:
        custom: Any = client.CustomObjectsApi(api)
        body = read_json(custom.get_api_resources(group, version, _preload_content=False, _request_timeout=10))
    except (ApiException, ValueError):
        return False
    return isinstance(body, dict) and any(r.get("name") == resource for r in body.get("resources", []))


def _condition_json(condition: Condition) -> dict[str, Any]:
    return condition.model_dump(by_alias=True, exclude_none=True, mode="json")


Copies = dict[str, tuple[Pod, str, Pod]]
"""Per pod key: the cached object, our gate removed from it or the node we bound it to, and the copy showing that."""


def _copy(copies: Copies, key: str, value: str, pod: Pod, field: str) -> Pod:
    """`pod` as our writes in flight will make it, made once per cached object: without our gate `value`
    (`field` "gate"), on node `value` ("node"), nominated to `value` ("nominated", "" clears) or being
    deleted ("deleting", `value` its uid).

    A fresh copy in every `objects()` call made every assumed pod a new object to the snapshot's
    PodInfo cache (parsed again each pass) and fed the garbage collector tens of thousands of
    objects per pass.
    """
    made = copies.get(key)
    if made is not None and made[0] is pod and made[1] == value:
        return made[2]
    if field == "nominated":
        copy = pod.model_copy(update={"status": pod.status.model_copy(update={"nominated_node_name": value or None})})
    elif field == "deleting":
        deleted = {"deletion_timestamp": datetime.now(UTC)}
        copy = pod.model_copy(update={"metadata": pod.metadata.model_copy(update=deleted)})
    elif field == "gate":
        gates = [g for g in pod.spec.scheduling_gates if g.name != value]
        copy = pod.model_copy(update={"spec": pod.spec.model_copy(update={"scheduling_gates": gates})})
    else:
        copy = pod.model_copy(update={"spec": pod.spec.model_copy(update={"node_name": value})})
    copies[key] = (pod, value, copy)
    return copy


def _terminating(pod: Pod) -> bool:
    """Deleted, and kept by a grace period or a finalizer: not about to vanish within its DELETE."""
    meta = pod.metadata
    if meta.deletion_timestamp is None:
        return False
    return bool(meta.deletion_grace_period_seconds) or bool(meta.finalizers)


def _prune(copies: Copies, live: dict[str, Any]) -> None:
    """Drop copies whose reason (an assumed binding, a gate removal in flight) is gone."""
    if len(copies) > len(live):
        for key in [k for k in copies if k not in live]:
            del copies[key]


def _reason(exc: BaseException | None) -> str:
    """What failed, for a log line: the HTTP status, else the exception's type (never its text: it may hold a token)."""
    if isinstance(exc, ApiException):
        return str(exc.status)
    return type(exc).__name__


def _log_failed_write(event: str, exc: BaseException, **fields: str) -> None:
    """A refusal or a lost connection is a warning; anything else (an answer our models cannot read) is
    a bug, logged with its traceback (plain, without frame locals: `phalanx.logs`). A write not sent
    because this replica no longer leads (it lost or handed back the Lease) is neither: the next leader
    decides it anew."""
    if isinstance(exc, NotLeader):
        log.debug(event, error="NotLeader", **fields)
    elif isinstance(exc, FAILED_WRITES):
        log.warning(event, error=_reason(exc), **fields)
    else:
        log.error(event, error=_reason(exc), exc_info=exc, **fields)


def _pod_path(pod: Pod) -> str:
    return f"/api/v1/namespaces/{pod.metadata.namespace or 'default'}/pods/{pod.metadata.name}"


def _group_path(group: PodGroup) -> str:
    """Where a PodGroup is written: the native kind at its own API, ours (and scenario files') at our CRD."""
    meta = group.metadata
    api_version = NATIVE_API_VERSION if group.api_version == NATIVE_API_VERSION else f"{GROUP}/{VERSION}"
    return f"/apis/{api_version}/namespaces/{meta.namespace or 'default'}/podgroups/{meta.name}"


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
    ) -> None:
        self.api = api
        self.identity = identity or f"phalanx-{uuid.uuid4().hex[:8]}"
        self.may_write = may_write
        self.request_timeout_seconds = request_timeout_seconds
        self.changed = threading.Event()
        self._stop = threading.Event()
        self._on_api_call = on_api_call
        # Any: with `_preload_content=False` the calls return the raw urllib3 response, not the typed model.
        self.core: Any = client.CoreV1Api(api)
        self.custom: Any = client.CustomObjectsApi(api)
        self.events: Any = client.EventsV1Api(api)
        self._transport = Transport(api, request_timeout_seconds)
        self._lock = threading.Lock()
        self._pod_overlay: dict[str, Pod] = {}
        self._group_overlay: dict[str, PodGroup] = {}
        self._assumed: dict[str, str] = {}
        self._refused: list[BackgroundRefusal] = []
        self._gate_copies: Copies = {}
        self._node_copies: Copies = {}
        self._nominating: dict[str, str] = {}
        """Nominations being written (pod key -> node, "" to clear), shown by `objects()` meanwhile."""
        self._nominated_copies: Copies = {}
        self._deleting: dict[str, str] = {}
        """Victims whose deletion was requested (pod key -> uid), shown as terminating by `objects()` meanwhile."""
        self._deleting_copies: Copies = {}
        self._unseen_deletions: dict[str, str] = {}
        """Victims whose deletion was requested (pod key -> uid) until the informer's cache shows it (the pod gone,
        replaced, or with a deletionTimestamp), whatever our own write's answer showed before: `objects()` lists
        them in `victims_in_flight`, and their preemptor waits meanwhile."""
        self._disrupting: dict[str, Future[None]] = {}
        """DisruptionTarget writes in flight, by pod key: the victim's deletion is sent once its write succeeded."""
        self._scheduled_conditions: dict[str, tuple[Pod, Condition]] = {}
        """PodScheduled conditions waiting for the writer thread, by pod key (the newest wins)."""
        self._condition_writes: dict[str, threading.Event] = {}
        """PodScheduled writes on the wire, by pod key: a Binding of that pod waits for its write to end."""
        self._shown_versions: dict[str, int] = {}
        self._shown_nodes: dict[str, str] = {}
        self._ungating: dict[str, tuple[str, Future[bool]]] = {}
        self._binder = Lane("bindings", binding_workers)
        self._gater = Lane("gate-removals", 4)
        self._preempter = Lane("preemption", preemption_workers)
        self._writer = Lane("podgroup-conditions", 1)
        """One thread, so the conditions written to a PodGroup keep their order."""
        self._starts = Lane("podgroup-starts", 4)
        """Min-runtime starts, apart from the conditions: 200 gangs starting at once queued 400 writes on one
        thread, and a start written seconds late leaves its gang without protection meanwhile."""
        self._conditions = Lane("pod-conditions", 1)
        self._events = Lane("events", 1, limit=10_000)
        self._lanes = Lanes(
            self._binder, self._gater, self._preempter, self._writer, self._starts, self._conditions, self._events
        )
        self._hold = PreemptionHold(best_effort_hold_seconds)
        scheduling: Any = client.SchedulingV1Api(api)
        policy: Any = client.PolicyV1Api(api)

        def custom_list(plural: str) -> Callable[..., Any]:
            return lambda **kw: self.custom.list_cluster_custom_object(GROUP, VERSION, plural, **kw)

        def informer(kind: str, call: Callable[..., Any], model: type[Any], optional: bool = False) -> Informer[Any]:
            return Informer(
                kind,
                call,
                model,
                self._changed,
                watch_timeout_seconds=watch_timeout_seconds,
                request_timeout_seconds=request_timeout_seconds,
                on_relist=on_relist,
                optional=optional,
            )

        self.pods: Informer[Pod] = informer("pods", self.core.list_pod_for_all_namespaces, Pod)
        self.nodes: Informer[Node] = informer("nodes", self.core.list_node, Node)
        self.priority_classes: Informer[PriorityClass] = informer(
            "priorityclasses", scheduling.list_priority_class, PriorityClass
        )
        self.pdbs: Informer[PodDisruptionBudget] = informer(
            "poddisruptionbudgets", policy.list_pod_disruption_budget_for_all_namespaces, PodDisruptionBudget
        )
        # Our CRDs may be applied after the scheduler starts: until then, empty.
        self.pod_groups: Informer[PodGroup] = informer("podgroups", custom_list("podgroups"), PodGroup, True)
        self.workloads: Informer[Workload] = informer("workloads", custom_list("workloads"), Workload, True)
        self.queues: Informer[Queue] = informer("queues", custom_list("queues"), Queue, True)
        self.native_pod_groups: Informer[PodGroup] | None = None
        if serves(api, NATIVE_API_VERSION, "podgroups"):
            group, version = NATIVE_API_VERSION.split("/")
            native_list = lambda **kw: self.custom.list_cluster_custom_object(group, version, "podgroups", **kw)  # noqa: E731
            self.native_pod_groups = informer("native-podgroups", native_list, NativePodGroup)
        self.informers: tuple[Informer[Any], ...] = tuple(
            i
            for i in (
                self.pods,
                self.nodes,
                self.priority_classes,
                self.pdbs,
                self.pod_groups,
                self.native_pod_groups,
                self.workloads,
                self.queues,
            )
            if i is not None
        )

    # lifecycle

    def start(self) -> None:
        for informer in self.informers:
            informer.start()

    def stop_writing(self) -> None:
        """Stopping, first step: take no more writes and drop what is only queued, but for what is owed (a
        gang's min-runtime start). It waits for nothing, so the caller can hand its Lease back at once.

        From here no write is retried and nothing waits for a preemption (`hold.py`): a PodScheduled message
        or an Event that was waiting for one is not sent. Writes on the wire go on; `stop` waits for them.
        """
        self._stop.set()
        self._hold.release()
        self._lanes.drop_queued()

    def stop(self, deadline: float | None = None) -> Stopped:
        """Stopping, last step (after `stop_writing`, which it does if the caller did not): the writes on the
        wire, and the owed ones, are finished by `deadline` (`time.monotonic()`; default: one request
        timeout from now), then the watches closed. A leader hands its Lease back before this step, so a
        write that would follow one on the wire (a victim's deletion after its DisruptionTarget, a Binding
        after its gate removal) is not sent: the next leader decides it anew (issue 24)."""
        if deadline is None:
            deadline = time.monotonic() + self.request_timeout_seconds
        self.stop_writing()
        stopped = self._lanes.finish(deadline)
        for informer in self.informers:
            informer.stop(timeout=max(0.0, deadline - time.monotonic()))
        return stopped

    def wait_synced(self, timeout: float) -> bool:
        """True once every informer has listed: scheduling before that would double-book nodes."""
        deadline = datetime.now(UTC).timestamp() + timeout
        for informer in self.informers:
            remaining = deadline - datetime.now(UTC).timestamp()
            if remaining <= 0 or not informer.synced.wait(remaining):
                return False
        return True

    def _changed(self, kind: str, old: Any, new: Any) -> None:
        if kind == "pods" and old is not None:
            with self._lock:
                uid = self._unseen_deletions.get(object_key(old))
            if uid is not None and (new is None or new.metadata.uid != uid or _terminating(new)):
                self.changed.set()  # even the echo of our DELETE: only a pass lets its waiting preemptor go
                return
        if kind == "pods" and new is None:
            if old is not None:
                self._hold.done(object_key(old), old.metadata.uid or "")
            else:  # relisted
                self._hold.keep({key: pod.metadata.uid or "" for key, pod in self.pods.items().items()})
        if (
            kind == "pods"
            and old is not None
            and new is not None
            and (self._echo(old, new) or same_for_scheduling(old, new))
        ):
            return
        self.changed.set()

    def _echo(self, old: Pod, new: Pod) -> bool:
        """The event only repeats what the last `objects()` already showed: no pass needs to run for it.

        Either it brings the very version one of our writes returned, or it is our Binding of a pod
        the view already showed on that node (the server adds only `PodScheduled=True`). A pass for
        such echoes rebuilds the snapshot to find nothing to do; a burst of Bindings woke hundreds of
        them, which kept the binder threads waiting for the GIL (BENCHMARKS.md, Kubernetes back end).
        """
        key = object_key(new)
        with self._lock:
            version = self._shown_versions.get(key)
            node = self._shown_nodes.get(key)
        if version is not None and version == _version(new):
            return True
        return (
            node is not None
            and not old.spec.node_name
            and new.spec.node_name == node
            and new.metadata.labels == old.metadata.labels
            and new.metadata.annotations == old.metadata.annotations
        )

    # reads

    def now(self) -> datetime:
        return datetime.now(UTC)

    def _pod_groups(self) -> dict[str, PodGroup]:
        """Ours and the native kind in one map; ours wins a name both use (our label names it explicitly)."""
        if self.native_pod_groups is None:
            return self.pod_groups.items()
        return {**self.native_pod_groups.items(), **self.pod_groups.items()}

    def objects(self) -> ClusterObjects:
        pods = self.pods.items()
        groups = self._pod_groups()
        with self._lock:
            in_flight = self._deletions_in_flight(pods)
            self._shown_versions = self._overlay(pods, self._pod_overlay)
            self._overlay(groups, self._group_overlay)
            gate_copies, node_copies = self._gate_copies, self._node_copies
            for key, (gate, _) in self._ungating.items():
                pod = pods.get(key)
                if pod is not None and any(g.name == gate for g in pod.spec.scheduling_gates):
                    pods[key] = _copy(gate_copies, key, gate, pod, "gate")
            confirmed = []
            for key, node in self._assumed.items():
                pod = pods.get(key)
                if pod is None or pod.spec.node_name:
                    confirmed.append(key)
                else:
                    pods[key] = _copy(node_copies, key, node, pod, "node")
            for key in confirmed:
                del self._assumed[key]
            for key, nominee in self._nominating.items():
                pod = pods.get(key)
                if pod is not None and (pod.status.nominated_node_name or "") != nominee:
                    pods[key] = _copy(self._nominated_copies, key, nominee, pod, "nominated")
            shown = []
            for key, uid in self._deleting.items():
                pod = pods.get(key)
                if pod is None or pod.metadata.uid != uid or pod.metadata.deletion_timestamp is not None:
                    shown.append(key)
                else:
                    pods[key] = _copy(self._deleting_copies, key, uid, pod, "deleting")
            for key in shown:
                del self._deleting[key]
            _prune(gate_copies, self._ungating)
            _prune(node_copies, self._assumed)
            _prune(self._nominated_copies, self._nominating)
            _prune(self._deleting_copies, self._deleting)
            self._shown_nodes = dict(self._assumed)
        return ClusterObjects(
            nodes=self.nodes.items(),
            pods=pods,
            pod_groups=groups,
            workloads=self.workloads.items(),
            queues=self.queues.items(),
            priority_classes=self.priority_classes.items(),
            pdbs=self.pdbs.items(),
            victims_in_flight=in_flight,
        )

    def _deletions_in_flight(self, cached: dict[str, Pod]) -> frozenset[str]:
        """The victims whose deletion the informer's cache does not show yet (called with the lock held).

        The cache, not our overlay: a DELETE's answer can show a victim terminating while the cache still
        holds it running, and one victim's watch event can come before another's. Upstream's preemptor waits
        until the lister shows its last victim deleted (`IsPodRunningPreemption`); the watch delivers events
        in order, so by then it shows every earlier one too.

        A victim deleted with no grace period counts only once it is gone. The API server writes it with a
        deletionTimestamp (grace 0) before it removes it, in the same request, and the watch delivers both:
        released on the first, the preemptor saw that victim still on its nominated node, and another
        victim of the same decision already gone elsewhere (fuzz seed 284884 protected #3). Only a victim
        a kubelet must stop (a grace period) or a finalizer holds counts from its deletionTimestamp on.
        """
        waiting = []
        for key, uid in list(self._unseen_deletions.items()):
            pod = cached.get(key)
            if pod is None or pod.metadata.uid != uid or _terminating(pod):
                del self._unseen_deletions[key]
            else:
                waiting.append(key)
        return frozenset(waiting)

    @staticmethod
    def _overlay(cached: dict[str, Any], overlay: dict[str, Any]) -> dict[str, int]:
        """Our write results replace cached objects until the watch catches up (or the object is gone).

        Returns the version shown for each object replaced.
        """
        shown: dict[str, int] = {}
        for key, written in list(overlay.items()):
            seen = cached.get(key)
            if seen is None or _version(seen) >= _version(written):
                del overlay[key]
            else:
                cached[key] = written
                shown[key] = _version(written)
        return shown

    def _current_pod(self, pod: Pod) -> Pod:
        key = object_key(pod)
        with self._lock:
            written = self._pod_overlay.get(key)
        cached = self.pods.get(key)
        candidates = [p for p in (written, cached, pod) if p is not None]
        return max(candidates, key=_version)

    # writes

    def _call(self, operation: str, call: Callable[[], Any], owed: bool = False) -> Any:
        """Run one write (returning the parsed body), retried; only while this replica leads, except an `owed`
        write once stopping (see `annotate_pod_group`)."""

        def leading() -> bool:
            return self.may_write() or (owed and self._stop.is_set())

        if not leading():
            raise NotLeader(operation)

        def guarded() -> Any:
            if not leading():
                raise NotLeader(operation)
            return call()

        try:
            result = call_with_retry(operation, guarded, self._stop)
        except ApiException as exc:
            self._count(operation, str(exc.status))
            raise
        except NotLeader:
            raise
        except Exception:
            self._count(operation, "error")
            raise
        self._count(operation, "success")
        return result

    def _count(self, operation: str, result: str) -> None:
        if self._on_api_call is not None:
            self._on_api_call(operation, result)

    def _remember_pod(self, data: Any) -> Pod:
        pod = Pod.model_validate(prune("pods", data))
        with self._lock:
            self._pod_overlay[object_key(pod)] = pod
        return pod

    def bind(self, pod: Pod, node_name: str) -> None:
        """Assume the pod on the node now and send the Binding from a worker (kube-scheduler's binding cycle).

        A pass never waits on Binding round trips; the pod counts on its node from this moment. A
        Binding that fails for good drops the assumption and wakes the loop, so the pod is retried.
        """
        if not self.may_write():
            raise NotLeader("bind")
        key = object_key(pod)
        with self._lock:
            if key in self._assumed:
                return
            self._assumed[key] = node_name
        self._binder.submit(self._send_binding, pod, node_name)

    def _send_binding(self, pod: Pod, node_name: str) -> None:
        try:
            self._send_binding_now(pod, node_name)
        finally:
            self._hold.done(object_key(pod))  # a nominee's Binding is answered: its preemption is over

    def _send_binding_now(self, pod: Pod, node_name: str) -> None:
        meta = pod.metadata
        key = object_key(pod)
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": meta.name, "namespace": meta.namespace, "uid": meta.uid},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node_name},
        }
        with self._lock:
            ungating = self._ungating.get(key)
            condition_write = self._condition_writes.get(key)
        if condition_write is not None:
            condition_write.wait()
        if ungating is not None and not self._wait_quietly(ungating[1]):
            self._refuse("bind", key)  # the gate removal's failure has its own Warning
            self._forget_binding(key)
            return
        try:
            self._call(
                "bind",
                lambda: self._transport.request(
                    self.core.create_namespaced_pod_binding, f"{_pod_path(pod)}/binding", body
                ),
            )
        except ApiException as exc:
            placed = ALREADY_ASSIGNED.search(exc.body or "") if exc.status == 409 else None
            if placed is not None:
                log.info("pod already bound", pod=key, node=placed.group(1))
                with self._lock:
                    self._assumed[key] = placed.group(1)
                return
            log.warning("binding failed", pod=key, node=node_name, status=exc.status)
            self._binding_refused(pod, exc)
            return
        except Exception as exc:
            _log_failed_write("binding failed", exc, pod=key, node=node_name)
            self._binding_refused(pod, exc)
            return
        self.record_event(pod, "Normal", "Scheduled", f"Successfully assigned {key} to {node_name}")

    @staticmethod
    def _wait_quietly(future: Future[bool]) -> bool:
        try:
            return future.result()
        except CancelledError:
            return False

    def refused_writes(self) -> list[BackgroundRefusal]:
        with self._lock:
            refused, self._refused = self._refused, []
        return refused

    def _refuse(self, operation: str, key: str, why: str = "") -> None:
        with self._lock:
            self._refused.append(BackgroundRefusal(operation, key, why))

    def _binding_refused(self, pod: Pod, exc: Exception) -> None:
        """The pod shows pending again and the runner retries it after a backoff; the Warning is
        kube-scheduler's for a refused Binding."""
        self.record_event(pod, "Warning", "FailedScheduling", f"Binding rejected: {answer(exc)}")
        self._refuse("bind", object_key(pod))
        self._forget_binding(object_key(pod))

    def _forget_binding(self, key: str) -> None:
        with self._lock:
            self._assumed.pop(key, None)
        self.changed.set()

    def remove_scheduling_gate(self, pod: Pod, gate: str) -> None:
        """Assume the gate gone now; a worker sends the guarded patch, and the pod's Binding waits for it.

        Sent synchronously, one patch per gang member cost the loop ~7 ms each (issue 7 benchmark).
        """
        if not self.may_write():
            raise NotLeader("remove_gate")
        current = self._current_pod(pod)
        if not any(g.name == gate for g in current.spec.scheduling_gates):
            return
        key = object_key(pod)
        with self._lock:
            if key not in self._ungating:
                self._ungating[key] = (gate, self._gater.submit(self._send_gate_removal, current, gate))

    def _send_gate_removal(self, pod: Pod, gate: str) -> bool:
        key = object_key(pod)
        try:
            self._remove_gate_now(pod, gate)
            return True
        except Exception as exc:
            _log_failed_write("gate removal failed", exc, pod=key, gate=gate)
            self.record_event(pod, "Warning", "FailedScheduling", f"Removing scheduling gate {gate}: {answer(exc)}")
            self._refuse("remove_gate", key)
            self.changed.set()
            return False
        finally:
            with self._lock:
                self._ungating.pop(key, None)

    def _remove_gate_now(self, pod: Pod, gate: str) -> None:
        """JSON patch: `test` the gate list we saw, then replace it; on a lost race, re-read and retry.

        A failed `test` and a refusal (a validating policy, say) are both 422: the re-read tells them
        apart. Gates that did not change mean the server refused the write itself, and that answer is
        what the unit's Warning must carry.
        """
        current = pod
        for _ in range(3):
            gates = [g.model_dump(by_alias=True, exclude_none=True) for g in current.spec.scheduling_gates]
            if not any(g.get("name") == gate for g in gates):
                return
            patch = [
                {"op": "test", "path": "/metadata/uid", "value": current.metadata.uid},
                {"op": "test", "path": "/spec/schedulingGates", "value": gates},
                {"op": "replace", "path": "/spec/schedulingGates", "value": [g for g in gates if g["name"] != gate]},
            ]
            try:
                response = self._call(
                    "remove_gate",
                    lambda current=current, patch=patch: self._patch_pod(  # type: ignore[misc]
                        current, patch, JSON_PATCH, status=False
                    ),
                )
            except ApiException as exc:
                if exc.status == 404:
                    return
                if exc.status != 422:
                    raise
                fresh = self._transport.request(self.core.read_namespaced_pod, _pod_path(current))
                seen, current = current, Pod.model_validate(prune("pods", fresh))
                unchanged = seen.spec.scheduling_gates == current.spec.scheduling_gates
                if unchanged and seen.metadata.uid == current.metadata.uid:
                    raise
                continue
            self._remember_pod(response)
            return
        raise RuntimeError(f"scheduling gate {gate} of {object_key(pod)}: kept changing under us")

    def _patch_pod(self, pod: Pod, body: Any, content_type: str, status: bool) -> Any:
        if status:
            return self._transport.request(
                self.core.patch_namespaced_pod_status, f"{_pod_path(pod)}/status", body, content_type
            )
        return self._transport.request(self.core.patch_namespaced_pod, _pod_path(pod), body, content_type)

    def set_nominated_node(self, pod: Pod, node_name: str | None) -> None:
        """Shown by `objects()` at once and written by the preemption workers, in parallel with the victims.

        Written one after another, a 64-member gang's nominations and its 320 victims' writes held
        the loop for 4-5 s (issue 12). A write that fails for good drops what was shown and wakes
        the loop, so the next pass decides again from what the cluster holds.
        """
        if not self.may_write():
            raise NotLeader("nominate")
        current = self._current_pod(pod)
        key = object_key(pod)
        nominee = node_name or ""
        with self._lock:
            shown = self._nominating.get(key, current.status.nominated_node_name or "")
            if shown == nominee:
                return
            self._nominating[key] = nominee
        if nominee:
            self._hold.nominee(key)
        else:
            self._hold.done(key)
        self._preempter.submit(self._send_nomination, current, nominee)

    def _send_nomination(self, pod: Pod, nominee: str) -> None:
        key = object_key(pod)
        body = {"status": {"nominatedNodeName": nominee or None}}
        try:
            response = self._call("nominate", lambda: self._patch_pod(pod, body, STRATEGIC_MERGE_PATCH, status=True))
            self._remember_pod(response)
        except Exception as exc:
            if not (isinstance(exc, ApiException) and exc.status == 404):
                _log_failed_write("nomination failed", exc, pod=key, node=nominee)
                self._hold.done(key)
                self._refuse("nominate", key, answer(exc))
                self.changed.set()
        finally:
            with self._lock:
                if self._nominating.get(key) == nominee:
                    del self._nominating[key]

    def set_pod_condition(self, pod: Pod, condition: Condition) -> None:
        """PodScheduled, which only informs, goes to its writer thread so the loop never waits.

        DisruptionTarget goes to the preemption workers; the victim's deletion that follows
        (`delete_pod`) is sent only once this write succeeded, as upstream's preemption executor does.
        Any other condition is written before returning.
        """
        current = self._current_pod(pod)
        if _merge_condition(current.status.conditions, condition, self.now()) is None:
            return
        if condition.type == "DisruptionTarget":
            if not self.may_write():
                raise NotLeader("set_condition")
            future = self._preempter.submit(self._write_pod_condition, pod, condition)
            with self._lock:
                self._disrupting[object_key(pod)] = future
            return
        if condition.type != "PodScheduled":
            with refusals("set_condition", object_key(pod)):
                self._write_pod_condition(pod, condition)
            return
        if not self.may_write():
            raise NotLeader("set_condition")
        key = object_key(pod)
        with self._lock:
            queued = key in self._scheduled_conditions
            self._scheduled_conditions[key] = (pod, condition)
        if not queued:
            self._conditions.submit(self._write_latest_pod_condition, key)

    def _write_latest_pod_condition(self, key: str) -> None:
        """Write the newest PodScheduled condition asked for `key`, once no preemption is under way: one
        write however many passes changed its message meanwhile (a gang waiting for victims counts them
        down each pass).

        A pod bound (or being bound) since the pass that asked for `False` is scheduled: that write is
        stale, and landing after the Binding it would turn the pod's PodScheduled back to False. The
        check and the registration in `_condition_writes` share the lock with `bind`, so either the
        write is dropped or the Binding waits for it.
        """
        self._hold.wait()
        cached = self.pods.get(key)  # read before taking our lock: the informer calls back into it
        with self._lock:
            pod, condition = self._scheduled_conditions.pop(key)
            if self._stop.is_set():
                return  # it waited for a preemption, not for an answer: stopping drops it
            seen = (cached, self._pod_overlay.get(key))
            if condition.status == "False" and (key in self._assumed or any(p and p.spec.node_name for p in seen)):
                return
            written = self._condition_writes[key] = threading.Event()
        try:
            self._write_pod_condition_quietly(pod, condition)
        finally:
            with self._lock:
                del self._condition_writes[key]
            written.set()

    def _write_pod_condition_quietly(self, pod: Pod, condition: Condition) -> None:
        try:
            self._write_pod_condition(pod, condition)
        except Exception as exc:
            log.warning("pod condition not written", pod=object_key(pod), type=condition.type, error=type(exc).__name__)

    def _write_pod_condition(self, pod: Pod, condition: Condition) -> None:
        current = self._current_pod(pod)
        conditions = _merge_condition(current.status.conditions, condition, self.now())
        if conditions is None:
            return
        changed = next(c for c in conditions if c.type == condition.type)
        body = {"status": {"conditions": [_condition_json(changed)]}}
        try:
            response = self._call(
                "set_condition", lambda: self._patch_pod(current, body, STRATEGIC_MERGE_PATCH, status=True)
            )
        except ApiException as exc:
            if exc.status == 404:
                return
            raise
        self._remember_pod(response)
        if (condition.type, condition.status, condition.reason) == ("PodScheduled", "False", "Unschedulable"):
            self.record_event(current, "Warning", "FailedScheduling", condition.message or "")

    def _current_group(self, group: PodGroup) -> PodGroup:
        key = object_key(group)
        with self._lock:
            written = self._group_overlay.get(key)
        cached = self._pod_groups().get(key) if self.native_pod_groups is not None else self.pod_groups.get(key)
        candidates = [g for g in (written, cached, group) if g is not None]
        return max(candidates, key=_version)

    def _remember_group(self, data: Any) -> None:
        group = PodGroup.model_validate(data)
        with self._lock:
            self._group_overlay[object_key(group)] = group

    def set_pod_group_condition(self, group: PodGroup, condition: Condition) -> None:
        """Queued for the writer thread: one thread, so writes to a group keep their order."""
        if not self.may_write():
            raise NotLeader("set_group_condition")
        if _merge_condition(self._current_group(group).status.conditions, condition, self.now()) is not None:
            self._writer.submit(self._write_quietly, "set_group_condition", group, condition)

    def _write_quietly(self, operation: str, group: PodGroup, *args: Any) -> None:
        """PodGroup status and annotations inform users and min-runtime; a failure is logged, not fatal."""
        write = self._write_group_condition if operation == "set_group_condition" else self._write_annotation
        try:
            write(group, *args)
        except Exception as exc:
            log.warning("podgroup write failed", group=object_key(group), operation=operation, error=type(exc).__name__)

    def _write_group_condition(self, group: PodGroup, condition: Condition) -> None:
        """A merge patch of the whole list (custom resources have no strategic merge), guarded by resourceVersion."""
        current = self._current_group(group)
        for _ in range(3):
            conditions = _merge_condition(current.status.conditions, condition, self.now())
            if conditions is None:
                return
            body = {
                "metadata": {"resourceVersion": current.metadata.resource_version},
                "status": {"conditions": [_condition_json(c) for c in conditions]},
            }
            try:
                response = self._call(
                    "set_group_condition",
                    lambda body=body, current=current: self._transport.request(  # type: ignore[misc]
                        self.custom.patch_namespaced_custom_object_status,
                        f"{_group_path(current)}/status",
                        body,
                        MERGE_PATCH,
                    ),
                )
            except ApiException as exc:
                if exc.status == 404:
                    return
                if exc.status != 409:
                    raise
                newer = self._newer_group(current)
                if newer is None:
                    log.info("podgroup condition not written: the group kept changing", group=object_key(group))
                    return
                current = newer
                continue
            self._remember_group(response)
            return

    def _newer_group(self, seen: PodGroup) -> PodGroup | None:
        """After a 409: the group as the watch delivers it once it is newer than `seen`, or None when it does
        not come within a few seconds (the next pass writes the condition again).

        The watch, not a GET, so the scheduler needs no `get` on PodGroups: the write that lost the race
        was someone else's, and the informer sees it within milliseconds.
        """
        deadline = time.monotonic() + 3.0
        while not self._stop.is_set() and time.monotonic() < deadline:
            current = self._current_group(seen)
            if _version(current) > _version(seen):
                return current
            self._stop.wait(0.02)
        return None

    def annotate_pod_group(self, group: PodGroup, key: str, value: str) -> None:
        """Queued for the starts' lane. Owed: when stopping it is sent though only queued, and after the Lease
        was handed back. The next leader finds the group running and never writes its min-runtime start
        again, and without it the group has no min-runtime protection; nothing else writes it, so it cannot
        undo the next leader's work."""
        if not self.may_write():
            raise NotLeader("annotate_group")
        if self._current_group(group).metadata.annotations.get(key) != value:
            self._starts.submit(self._write_quietly, "annotate_group", group, key, value, owed=True)

    def _write_annotation(self, group: PodGroup, key: str, value: str) -> None:
        current = self._current_group(group)
        if current.metadata.annotations.get(key) == value:
            return
        body = {"metadata": {"annotations": {key: value}}}
        try:
            response = self._call(
                "annotate_group",
                lambda: self._transport.request(
                    self.custom.patch_namespaced_custom_object, _group_path(current), body, MERGE_PATCH
                ),
                owed=True,
            )
        except ApiException as exc:
            if exc.status == 404:
                return
            raise
        self._remember_group(response)

    def delete_pod(self, pod: Pod, grace_period_seconds: int | None) -> None:
        """Shown as terminating by `objects()` at once; sent by the preemption workers, after the pod's
        DisruptionTarget write when one is in flight. A deletion that fails for good drops what was
        shown and wakes the loop: the victim counts as running again and the next pass decides anew.
        """
        if not self.may_write():
            raise NotLeader("delete")
        key = object_key(pod)
        self._hold.victim(key, pod.metadata.uid or "")
        with self._lock:
            self._deleting[key] = pod.metadata.uid or ""
            self._unseen_deletions[key] = pod.metadata.uid or ""
            marked = self._disrupting.pop(key, None)
        if marked is None:
            self._preempter.submit(self._send_deletion, pod, grace_period_seconds)
            return

        caller = threading.get_ident()

        def after_condition(done: Future[None]) -> None:
            """Runs in the worker that wrote the condition, which sends the deletion right away (a victim is
            gone sooner than if it queued behind every other victim's condition); in the caller's thread
            only when the write had already finished, and then the deletion goes to the pool; in the
            stopping thread when stopping dropped the write, and then the victim is not deleted."""
            failure = None if done.cancelled() else done.exception()
            if failure is not None:
                _log_failed_write("victim not deleted: its DisruptionTarget was not written", failure, pod=key)
                self._refuse("set_condition", key, answer(failure))
                self._undelete(key)
            elif done.cancelled():  # dropped by stopping, which counts it
                self._undelete(key)
            elif threading.get_ident() != caller:
                self._send_deletion(pod, grace_period_seconds)
            else:
                try:
                    self._preempter.submit(self._send_deletion, pod, grace_period_seconds)
                except LaneStopped:  # the next leader decides again
                    self._undelete(key)

        marked.add_done_callback(after_condition)

    def _undelete(self, key: str) -> None:
        self._hold.done(key)
        with self._lock:
            self._deleting.pop(key, None)
            self._unseen_deletions.pop(key, None)
        self.changed.set()

    def _send_deletion(self, pod: Pod, grace_period_seconds: int | None) -> None:
        try:
            self._delete_now(pod, grace_period_seconds)
        except Exception as exc:
            _log_failed_write("victim not deleted", exc, pod=object_key(pod))
            self._refuse("delete", object_key(pod), answer(exc))
            self._undelete(object_key(pod))

    def _delete_now(self, pod: Pod, grace_period_seconds: int | None) -> None:
        meta = pod.metadata
        body: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": meta.uid}}
        if grace_period_seconds is not None:
            body["gracePeriodSeconds"] = grace_period_seconds
        try:
            response = self._call(
                "delete",
                lambda: self._transport.request(self.core.delete_namespaced_pod, _pod_path(pod), body),
            )
        except ApiException as exc:
            if exc.status in (404, 409):
                log.info("victim already gone", pod=object_key(pod), status=exc.status)
                self._hold.done(object_key(pod), meta.uid or "")
                return
            raise
        if response.get("kind") == "Pod" and response.get("metadata", {}).get("deletionTimestamp"):
            self._remember_pod(response)

    def record_event(
        self, regarding: ApiModel, event_type: str, reason: str, note: str, related: ApiModel | None = None
    ) -> None:
        """events.k8s.io/v1, best effort: a lost Event must never stop scheduling.

        Events are namespaced: one about a cluster-scoped object (a PriorityClass, a Queue, a Node) goes
        to `default`, where kube-apiserver accepts it (only `default` or `kube-system` pass validation).
        """
        if not self.may_write():
            return
        meta = regarding.metadata  # type: ignore[attr-defined]
        namespace = meta.namespace or "default"
        now = self.now()
        body: dict[str, Any] = {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": f"{meta.name}.{uuid.uuid4().hex[:16]}", "namespace": namespace},
            "eventTime": now.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            "reportingController": REPORTING_CONTROLLER,
            "reportingInstance": self.identity,
            "action": EVENT_ACTIONS.get(reason, reason),
            "reason": reason,
            "note": note[:1024],
            "type": event_type,
            "regarding": self._reference(regarding),
        }
        if related is not None:
            body["related"] = self._reference(related)
        try:
            self._events.submit(self._send_event, body)
        except LaneFull:
            self._count("event", "dropped")
            log.warning("event dropped", regarding=object_key(regarding), reason=reason)
        except LaneStopped:
            pass  # stopping: Events are best effort, and the next leader reports what still holds

    def _send_event(self, body: dict[str, Any]) -> None:
        self._hold.wait()
        if self._stop.is_set():
            return  # it waited for a preemption, not for an answer: stopping drops it
        namespace = body["metadata"]["namespace"]
        try:
            call_with_retry(
                "event",
                lambda: self._transport.request(
                    self.events.create_namespaced_event,
                    f"/apis/events.k8s.io/v1/namespaces/{namespace}/events",
                    body,
                ),
                self._stop,
                attempts=3,
            )
            self._count("event", "success")
        except Exception as exc:
            self._count("event", "error")
            log.warning("event not recorded", regarding=body["regarding"].get("name"), error=type(exc).__name__)

    @staticmethod
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
