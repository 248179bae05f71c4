"""The view: what the informers hold, overlaid with the writes in flight that they do not show yet.

Reads come from informers (`kube.informer`), so a pass never waits on the API. Every write in the ledger
shows in `objects()` from the moment it is made until the informer shows it: a pod being bound counts on its
node in the very next pass, which is what keeps a node from being over-committed between a Binding and its
watch event (kube-scheduler's "assume"); a gate removal, a nomination, a victim's deletion show at once; an
object a write returned replaces the informer's older copy. Nothing else lives here.

Every pod is cached, whoever schedules it, so nodes are accounted for in full. A watch event that only
repeats what the last `objects()` showed (an echo of our own write) or changes nothing a pass reads (a
kubelet's status report) wakes no pass.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from kubernetes import client

from kube.errors import ApiError, translated
from kube.informer import Informer
from kube.routes import CoreV1Api, CustomObjectsApi, PolicyV1Api, SchedulingV1Api, StorageV1Api
from kube.transport import get, lister, read_json
from scheduler.api.csi import CSINode
from scheduler.api.device_class import DeviceClass
from scheduler.api.meta import DISRUPTION_TARGET
from scheduler.api.namespace import Namespace
from scheduler.api.node import Node
from scheduler.api.pdb import PodDisruptionBudget
from scheduler.api.persistent_volume import PersistentVolume
from scheduler.api.persistent_volume_claim import PersistentVolumeClaim
from scheduler.api.pod import Pod
from scheduler.api.pod_group import GROUP, NATIVE_API_VERSION, VERSION, NativePodGroup, PodGroup
from scheduler.api.priority_class import PriorityClass
from scheduler.api.queue import Queue
from scheduler.api.resource_claim import ResourceClaim
from scheduler.api.resource_slice import ResourceSlice
from scheduler.api.storage_class import StorageClass
from scheduler.api.wire import prune
from scheduler.api.workload import Workload
from scheduler.cluster.kube.calls import Binding, Call, Deletion, version
from scheduler.cluster.kube.hold import PreemptionHold
from scheduler.framework.cluster import ClusterObjects, object_key
from scheduler.framework.ledger import Entry, Ledger, State

SCHEDULING_CONDITIONS = (DISRUPTION_TARGET,)
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


def serves(api: client.ApiClient, api_version: str, resource: str) -> bool:
    """Whether the server offers `resource` at `api_version` (discovery, which every authenticated user may read)."""
    group, version_ = api_version.split("/")
    try:
        with translated():
            body = read_json(get(api, CustomObjectsApi.get_api_resources.at(group=group, version=version_), [], 10))
    except (ApiError, ValueError):
        return False
    return isinstance(body, dict) and any(r.get("name") == resource for r in body.get("resources", []))


class KubeView:
    """Informers, and the overlay of the ledger's calls in flight: `objects()`."""

    def __init__(
        self,
        api: client.ApiClient,
        ledger: Ledger[Call],
        hold: PreemptionHold,
        watch_timeout_seconds: int,
        request_timeout_seconds: float,
        on_relist: Callable[[str], None] | None,
    ) -> None:
        self.ledger = ledger
        self.hold = hold
        self.changed = threading.Event()
        self._shown: dict[str, tuple[tuple[Any, ...], Any]] = {}
        """Per ledger slot: the inputs of the object last shown (identities) and that object, so an unchanged
        overlay is the same object in every `objects()` (a fresh copy each time made every assumed pod a new
        object to the snapshot's PodInfo cache, parsed again each pass)."""
        self._echoes: dict[str, int] = {}
        """Pod key -> the version a write of ours returned and the last `objects()` showed."""
        self._bound: dict[str, str] = {}
        """Pod key -> the node a Binding in flight showed it on in the last `objects()`."""
        self._pods: dict[str, Pod] | None = None
        """The pods the last `objects()` showed, brought up to date by the next (`Informer.update`): a snapshot is
        valid until the next build, as the memory back end's, so one copy serves every pass."""
        self._pods_mark = 0
        self._overlaid: frozenset[str] = frozenset()
        """The pods the last `objects()` showed as writes in flight made them: the next reads them again."""
        self._storage_shown: dict[tuple[str, str], tuple[Call, Any, Any]] = {}
        """Per storage object a call in flight writes (a `ClaimBinding`'s volumes and claims): the call, the informer's
        copy and what was shown, so an unchanged overlay is the same object in every `objects()` (a new one each
        pass would be a storage change to the queue's hints, and wake every parked unit)."""
        self._claims_shown: dict[str, tuple[Call, Any, Any]] = {}
        """As `_storage_shown`, for the ResourceClaims a `ClaimAllocation` in flight writes."""

        def custom_list(group: str, version_: str, plural: str) -> str:
            return CustomObjectsApi.list_cluster_custom_object.at(group=group, version=version_, plural=plural)

        def informer(kind: str, path: str, model: type[Any], optional: bool = False) -> Informer[Any]:
            """An informer of `path`, a list route's (`kube.routes`)."""
            return Informer(
                kind,
                lister(api, path),
                model,
                self._on_change,
                watch_timeout_seconds=watch_timeout_seconds,
                request_timeout_seconds=request_timeout_seconds,
                on_relist=on_relist,
                optional=optional,
                prune=partial(prune, kind),
            )

        self.pods: Informer[Pod] = informer("pods", CoreV1Api.list_pod_for_all_namespaces.path, Pod)
        self.nodes: Informer[Node] = informer("nodes", CoreV1Api.list_node.path, Node)
        self.priority_classes: Informer[PriorityClass] = informer(
            "priorityclasses", SchedulingV1Api.list_priority_class.path, PriorityClass
        )
        self.pdbs: Informer[PodDisruptionBudget] = informer(
            "poddisruptionbudgets", PolicyV1Api.list_pod_disruption_budget_for_all_namespaces.path, PodDisruptionBudget
        )
        self.claims: Informer[PersistentVolumeClaim] = informer(
            "persistentvolumeclaims",
            CoreV1Api.list_persistent_volume_claim_for_all_namespaces.path,
            PersistentVolumeClaim,
        )
        self.volumes: Informer[PersistentVolume] = informer(
            "persistentvolumes", CoreV1Api.list_persistent_volume.path, PersistentVolume
        )
        self.storage_classes: Informer[StorageClass] = informer(
            "storageclasses", StorageV1Api.list_storage_class.path, StorageClass
        )
        self.csi_nodes: Informer[CSINode] = informer("csinodes", StorageV1Api.list_csi_node.path, CSINode)
        self.namespaces: Informer[Namespace] = informer("namespaces", CoreV1Api.list_namespace.path, Namespace)
        # DRA (resource.k8s.io/v1, Kubernetes 1.34+): empty where the server does not serve it.
        self.device_classes: Informer[DeviceClass] = informer(
            "deviceclasses", custom_list("resource.k8s.io", "v1", "deviceclasses"), DeviceClass, True
        )
        self.resource_slices: Informer[ResourceSlice] = informer(
            "resourceslices", custom_list("resource.k8s.io", "v1", "resourceslices"), ResourceSlice, True
        )
        self.resource_claims: Informer[ResourceClaim] = informer(
            "resourceclaims", custom_list("resource.k8s.io", "v1", "resourceclaims"), ResourceClaim, True
        )
        # Our CRDs may be applied after the scheduler starts: until then, empty.
        self.pod_groups: Informer[PodGroup] = informer(
            "podgroups", custom_list(GROUP, VERSION, "podgroups"), PodGroup, True
        )
        self.workloads: Informer[Workload] = informer(
            "workloads", custom_list(GROUP, VERSION, "workloads"), Workload, True
        )
        self.queues: Informer[Queue] = informer("queues", custom_list(GROUP, VERSION, "queues"), Queue, True)
        self.native_pod_groups: Informer[PodGroup] | None = None
        if serves(api, NATIVE_API_VERSION, "podgroups"):
            group, version_ = NATIVE_API_VERSION.split("/")
            self.native_pod_groups = informer(
                "native-podgroups", custom_list(group, version_, "podgroups"), NativePodGroup
            )
        self.informers: tuple[Informer[Any], ...] = tuple(
            i
            for i in (
                self.pods,
                self.nodes,
                self.priority_classes,
                self.pdbs,
                self.claims,
                self.volumes,
                self.storage_classes,
                self.csi_nodes,
                self.namespaces,
                self.device_classes,
                self.resource_slices,
                self.resource_claims,
                self.pod_groups,
                self.native_pod_groups,
                self.workloads,
                self.queues,
            )
            if i is not None
        )

    # informers

    def start(self) -> None:
        for informer in self.informers:
            informer.start()

    def stop(self, deadline: float) -> None:
        for informer in self.informers:
            informer.stop(timeout=max(0.0, deadline - time.monotonic()))

    def wait_synced(self, timeout: float) -> bool:
        """True once every informer has listed: scheduling before that would double-book nodes."""
        deadline = time.monotonic() + timeout
        for informer in self.informers:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not informer.synced.wait(remaining):
                return False
        return True

    def _on_change(self, kind: str, old: Any, new: Any) -> None:
        if kind == "pods" and new is None:
            if old is not None:
                self.hold.done(object_key(old), old.metadata.uid or "")
            else:  # relisted
                self.hold.keep({key: pod.metadata.uid or "" for key, pod in self.pods.items().items()})
        if (
            kind == "pods"
            and old is not None
            and new is not None
            and (self._echo(old, new) or same_for_scheduling(old, new))
        ):
            return
        if kind == "namespaces" and old is not None and new is not None and old.labels == new.labels:
            return  # only a Namespace's labels are read (a namespaceSelector's), not its phase or finalizers
        self.changed.set()

    def _echo(self, old: Pod, new: Pod) -> bool:
        """The event only repeats what the last `objects()` already showed: no pass needs to run for it.

        Either it brings the very version one of our writes returned, or it is our Binding of a pod the view
        already showed on that node (the server adds only `PodScheduled=True`). A pass for such echoes
        rebuilds the snapshot to find nothing to do; a burst of Bindings woke hundreds of them, which kept
        the binder threads waiting for the GIL (BENCHMARKS.md, Kubernetes back end).
        """
        key = object_key(new)
        shown = self._echoes.get(key)
        if shown is not None and shown == version(new):
            return True
        node = self._bound.get(key)
        return (
            node is not None
            and not old.spec.node_name
            and new.spec.node_name == node
            and new.metadata.labels == old.metadata.labels
            and new.metadata.annotations == old.metadata.annotations
        )

    # reads

    def pod_groups_cached(self) -> dict[str, PodGroup]:
        """Ours and the native kind in one map; ours wins a name both use (our label names it explicitly)."""
        if self.native_pod_groups is None:
            return self.pod_groups.items()
        return {**self.native_pod_groups.items(), **self.pod_groups.items()}

    def cached_group(self, key: str) -> PodGroup | None:
        group = self.pod_groups.get(key)
        if group is None and self.native_pod_groups is not None:
            group = self.native_pod_groups.get(key)
        return group

    def objects(self) -> ClusterObjects:
        pods, mark = self._pods_now()
        nodes, node_mark = self.nodes.items_marked()
        overlaid: set[str] = set()
        groups = self.pod_groups_cached()
        echoes: dict[str, int] = {}
        bound: dict[str, str] = {}
        victims: dict[str, str] = {}
        writing: list[Call] = []
        with self.ledger.lock:
            for slot, entries in list(self.ledger.items()):
                kind, _, key = slot.partition("/")
                cached = pods if kind == "pods" else groups
                shown = self._show(slot, cached.get(key), entries)
                victims.update((key, e.call.unit) for e in self.ledger.entries(slot) if isinstance(e.call, Deletion))
                writing += [
                    e.call
                    for e in self.ledger.entries(slot)
                    if e.call.volume_names() or e.call.claim_keys() or e.call.resource_claim_keys()
                ]
                if shown is not None:
                    cached[key] = shown
                    if kind == "pods":
                        overlaid.add(key)
                        written = max((version(e.written) for e in entries if e.written is not None), default=0)
                        if written and written == version(shown):
                            echoes[key] = written
                        node = next((e.call.node for e in entries if isinstance(e.call, Binding)), None)
                        if node is not None:
                            bound[key] = node
            for slot in [s for s in self._shown if not self.ledger.entries(s)]:
                del self._shown[slot]
        self._echoes, self._bound, self._overlaid = echoes, bound, frozenset(overlaid)
        claims, volumes = self._storage(writing)
        return ClusterObjects(
            nodes=nodes,
            pods=pods,
            pod_groups=groups,
            workloads=self.workloads.items(),
            queues=self.queues.items(),
            priority_classes=self.priority_classes.items(),
            pdbs=self.pdbs.items(),
            persistent_volume_claims=claims,
            persistent_volumes=volumes,
            storage_classes=self.storage_classes.items(),
            csi_nodes=self.csi_nodes.items(),
            device_classes=self.device_classes.items(),
            resource_slices=self.resource_slices.items(),
            resource_claims=self._resource_claims(writing),
            namespaces=self.namespaces.items(),
            victims_in_flight=victims,
            pod_feed=self.pods,
            pod_mark=mark,
            overlaid=self._overlaid,
            node_feed=self.nodes,
            node_mark=node_mark,
        )

    def _storage(self, writing: list[Call]) -> tuple[dict[str, PersistentVolumeClaim], dict[str, PersistentVolume]]:
        """The claims and volumes informers' copies, with what the calls in flight write to them shown (the volumes
        a `ClaimBinding` claims, the claims it annotates): the next passes give them to no other pod."""
        claims, volumes = self.claims.items(), self.volumes.items()
        shown: dict[tuple[str, str], tuple[Call, Any, Any]] = {}
        for call in writing:
            for kind, table, keys in (
                ("persistentvolumes", volumes, call.volume_names()),
                ("persistentvolumeclaims", claims, call.claim_keys()),
            ):
                for key in keys:
                    cached: Any = table.get(key)
                    if cached is None:
                        continue
                    kept = self._storage_shown.get((kind, key))
                    if kept is not None and kept[0] is call and kept[1] is cached:
                        made = kept[2]
                    elif kind == "persistentvolumes":
                        made = call.shows_volume(key, cached)
                    else:
                        made = call.shows_claim(key, cached)
                    table[key] = made
                    shown[kind, key] = (call, cached, made)
        self._storage_shown = shown
        return claims, volumes

    def _resource_claims(self, writing: list[Call]) -> dict[str, ResourceClaim]:
        """The ResourceClaims informer's copies, with the allocations and reservations the calls in flight write shown
        (a `ClaimAllocation`'s): the next passes give those devices to no other pod."""
        claims = self.resource_claims.items()
        shown: dict[str, tuple[Call, Any, Any]] = {}
        for call in writing:
            for key in call.resource_claim_keys():
                cached = claims.get(key)
                if cached is None:
                    continue
                kept = self._claims_shown.get(key)
                made = kept[2] if kept is not None and kept[0] is call and kept[1] is cached else None
                if made is None:
                    made = call.shows_resource_claim(key, cached)
                claims[key] = made
                shown[key] = (call, cached, made)
        self._claims_shown = shown
        return claims

    def _pods_now(self) -> tuple[dict[str, Pod], int]:
        """The pods informer's cache, as the last copy brought up to date (with the pods it overlaid read again),
        and the change mark it is at; a fresh copy the first time and after a relist."""
        if self._pods is not None:
            mark = self.pods.update(self._pods, self._pods_mark, self._overlaid)
            if mark is not None:
                self._pods_mark = mark
                return self._pods, mark
        self._pods, self._pods_mark = self.pods.items_marked()
        return self._pods, self._pods_mark

    def _show(self, slot: str, cached: Any, entries: list[Entry[Call]]) -> Any:
        """The object at `slot` as the ledger's entries make it, or None to show the informer's copy as it is.

        An entry done leaves the ledger here once the informer shows it: once its copy is as new as the object
        the write returned, or, for a write that returned none (a Binding), once the call sees its effect
        there. An entry done for an object that is gone leaves too.
        """
        for entry in list(entries):
            if entry.state is not State.DONE:
                continue
            if entry.written is not None:
                shown = cached is None or version(cached) >= version(entry.written)
            else:
                shown = entry.call.seen(cached)
            if shown and isinstance(cached, Pod) and not cached.is_terminal:
                shown = self._claims_seen(entry.call)
            if shown:
                self.ledger.remove(entry)
        live = self.ledger.entries(slot)
        if not live or cached is None:
            return None
        inputs = (cached, *(e.call for e in live), *(e.written for e in live))
        memo = self._shown.get(slot)
        if (
            memo is not None
            and len(memo[0]) == len(inputs)
            and all(a is b for a, b in zip(memo[0], inputs, strict=True))
        ):
            return memo[1]
        shown = cached
        for entry in live:
            if entry.written is not None and version(entry.written) > version(shown):
                shown = entry.written
        for entry in live:
            shown = entry.call.shows(shown)
        self._shown[slot] = (inputs, shown)
        return shown

    def _claims_seen(self, call: Call) -> bool:
        """The ResourceClaims informer shows what `call` wrote to them (or they are gone): its watch is not the pods',
        and may lag behind it. Until then the view shows the claims from the call, so no pass gives their devices to
        another pod (both claim writes would pass: they are on different claims). Asked only while the pod the call
        was for is there and not finished: once it is, its claims are released, and nothing is left to show."""
        for key in call.resource_claim_keys():
            cached = self.resource_claims.get(key)
            if cached is not None and call.shows_resource_claim(key, cached) is not cached:
                return False
        return True

    def show_pod(self, key: str, pod: Pod) -> Pod:
        """`pod` as the calls in flight for it make it (the caller holds the ledger's lock)."""
        for entry in self.ledger.entries(f"pods/{key}"):
            if entry.state is not State.DONE:
                pod = entry.call.shows(pod)
        return pod

    def current(self, slot: str, given: Any) -> Any:
        """The newest of `given`, the informer's copy and what our writes to `slot` returned."""
        kind, _, key = slot.partition("/")
        cached = self.pods.get(key) if kind == "pods" else self.cached_group(key)
        candidates = [o for o in (cached, given) if o is not None]
        with self.ledger.lock:
            candidates += [e.written for e in self.ledger.entries(slot) if e.written is not None]
        return max(candidates, key=version)

    def bound(self, key: str) -> bool:
        """The pod is bound, or a Binding of it is in flight."""
        cached = self.pods.get(key)
        if cached is not None and cached.spec.node_name:
            return True
        with self.ledger.lock:
            entries = self.ledger.entries(f"pods/{key}")
            return any(isinstance(e.call, Binding) for e in entries) or any(
                e.written is not None and e.written.spec.node_name for e in entries
            )
