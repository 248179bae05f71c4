"""Build a Snapshot from the cluster's objects: PodInfos with effective priority, capacity arrays.

Follows kube-scheduler's cache: a pod with `spec.nodeName` occupies its node until it is gone (a pod
being deleted still holds its resources), terminal pods hold nothing, and a pending pod nominated to
a node is kept aside so the runner can count it against pods of lower or equal priority.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np
import structlog

from scheduler.api.config import SchedulerConfiguration
from scheduler.api.node import Node
from scheduler.api.pod import QUEUE_LABEL, Pod
from scheduler.api.pod_group import PodGroup
from scheduler.api.priority_class import PriorityClass, PriorityClassNotFound, ResolvedPriority, resolve_priority
from scheduler.api.quantity import PODS
from scheduler.framework.cluster import ChangeFeed, ClusterObjects
from scheduler.framework.devices import Devices
from scheduler.framework.namespaces import Namespaces
from scheduler.framework.pod_info import PodInfo
from scheduler.framework.snapshot import (
    ROW_VERSIONS,
    IntArray,
    NodeTable,
    Snapshot,
    new_row_versions,
    replaced_rows,
    usage_row,
)
from scheduler.framework.storage import Storage

log = structlog.get_logger(__name__)

DEFAULT_MAX_PODS = 110
"""The kubelet's default `maxPods`, used when a node reports no `pods` allocatable."""


def effective_priority(
    pod: Pod, groups: dict[str, PodGroup], classes: dict[str, PriorityClass]
) -> tuple[ResolvedPriority, str | None]:
    """A pod's priority and group key: its PodGroup's for a member, else its own (docs/DESIGN.md, API: Priority).

    A priority already resolved at creation (`spec.priority`, which the Priority admission plugin
    fills in on a cluster) stands when its class has been deleted since, as kube-scheduler reads only
    `spec.priority`: pods keep running after their class is gone. Raises `PriorityClassNotFound` when
    the class that decides is missing and no priority was resolved.
    """
    group_name = pod.pod_group_name
    group_key = f"{pod.metadata.namespace or 'default'}/{group_name}" if group_name else None
    group = groups.get(group_key) if group_key else None
    if group is not None:
        return _resolved(group.spec.priority_class_name, group.spec.priority, classes), group_key
    resolved = _resolved(pod.spec.priority_class_name, pod.spec.priority, classes)
    if pod.spec.preemption_policy:
        resolved = ResolvedPriority(resolved.class_name, resolved.value, pod.spec.preemption_policy)
    return resolved, group_key


def _resolved(class_name: str | None, stored: int | None, classes: dict[str, PriorityClass]) -> ResolvedPriority:
    """The stored value when there is one (the class, if it still exists, gives the preemption policy)."""
    if stored is None:
        return resolve_priority(class_name, classes)
    found = classes.get(class_name) if class_name else None
    policy = (found.preemption_policy if found is not None else None) or "PreemptLowerPriority"
    return ResolvedPriority(class_name or None, stored, policy)


class PodInfoCache:
    """PodInfos (and node allocatable) reused across refreshes while the object is unchanged.

    Parsing quantities is the costly part of a refresh; back ends replace an object when it changes,
    so identity tells whether the cached PodInfo or allocatable still describes it. A pass that only
    sees a few changes (the usual case against a real cluster, where passes follow watch events)
    then costs a walk over the pods, not a re-parse of every pod and node.
    """

    def __init__(self) -> None:
        self._infos: dict[str, tuple[Pod, PodInfo]] = {}
        self._groups: dict[str, tuple[int | None, str | None]] = {}
        self._group_objects: dict[str, PodGroup] = {}
        self.group_class_names: frozenset[str | None] = frozenset()
        """The priority class names the PodGroups name (`Snapshot.group_class_names`)."""
        self.queued_groups: tuple[str, ...] = ()
        """The PodGroups that name a queue (`Snapshot.queued_groups`)."""
        self._classes: tuple[object, ...] = ()
        self._request_memo: dict[object, Mapping[str, int]] = {}
        self._allocatable: dict[str, tuple[Node, dict[str, int]]] = {}
        self.base: _Base | None = None
        """The last refresh's snapshot state, which the next `build_snapshot` updates by difference."""
        self.builds = 0
        """Snapshots built from this cache (`Snapshot.build`)."""
        self.namespaces = Namespaces()
        """The last refresh's namespaces, kept while their labels are (`Snapshot.namespaces`)."""

    def info(self, pod: Pod, objects: ClusterObjects, now: datetime) -> PodInfo:
        key = pod.key  # made once: the table and the PodInfo keep one string between them
        cached = self._infos.get(key)
        if cached is not None and cached[0] is pod:
            return cached[1]
        try:
            resolved, group_key = effective_priority(pod, objects.pod_groups, objects.priority_classes)
        except PriorityClassNotFound as err:  # reported once by the configuration checks, not per pass
            log.debug("priority class missing", pod=pod.key, priority_class=err.name)
            group_name = pod.pod_group_name
            group_key = f"{pod.metadata.namespace or 'default'}/{group_name}" if group_name else None
            resolved = ResolvedPriority(err.name, pod.spec.priority or 0, "PreemptLowerPriority")
        requests = self._requests(pod)
        info = PodInfo(
            pod=pod,
            key=key,
            requests=requests,
            priority=resolved.value,
            priority_class_name=resolved.class_name,
            preemption_policy=resolved.preemption_policy,
            group_key=group_key,
            node_name=pod.spec.node_name or None,
            created_at=pod.metadata.creation_timestamp or now,
            scheduled_at=pod.scheduled_time() if pod.spec.node_name else None,
            host_ports=pod.host_ports(),
            namespace=pod.metadata.namespace or "default",
            labels=pod.metadata.labels,
            pod_affinity=(affinity := pod.spec.affinity) is not None
            and (affinity.pod_affinity is not None or affinity.pod_anti_affinity is not None),
        )
        self._infos[key] = (pod, info)
        return info

    def _requests(self, pod: Pod) -> Mapping[str, int]:
        """`effective_requests` plus one `pods`, memoised by the resource fields: replicas share them, one map
        for all (read only), not one each.

        A pod of one container (most of them) is keyed without the generators the general key needs: those were
        a third of the time to build a snapshot of 50,000 pods from scratch (`kubectl phalanx explain`)."""
        spec = pod.spec
        key: tuple[object, ...]
        if len(spec.containers) == 1 and not spec.init_containers and not spec.overhead:
            resources = spec.containers[0].resources
            key = (tuple(resources.requests.items()), tuple(resources.limits.items()))
        else:
            containers = tuple(
                (tuple(c.resources.requests.items()), tuple(c.resources.limits.items())) for c in spec.containers
            )
            init_containers = tuple(
                (tuple(c.resources.requests.items()), tuple(c.resources.limits.items()), c.restart_policy)
                for c in spec.init_containers
            )
            key = (containers, init_containers, tuple(spec.overhead.items()))
        cached = self._request_memo.get(key)
        if cached is None:
            cached = self._request_memo[key] = {**pod.effective_requests(), PODS: 1}
        return cached

    def begin(self, objects: ClusterObjects) -> set[str]:
        """Forget what `effective_priority` computed from groups or classes that changed since the last
        refresh; returns the keys of the groups whose members must be charged again.

        A changed PriorityClass (rare) drops every PodInfo and the base. A PodGroup created, deleted or
        given another priority (one per gang that arrives) affects only its own members: at 10,000 pods,
        re-resolving every pod for it cost 0.17 s of GIL on each such pass (issue 12). Only the groups'
        priority fields count: a PodGroup status or annotation write changes nothing here.
        """
        classes = tuple(
            (name, c.value, c.global_default, c.preemption_policy) for name, c in objects.priority_classes.items()
        )
        groups = self._groups
        if objects.pod_groups != self._group_objects:  # the same objects compare at C speed: most passes
            groups = {key: (g.spec.priority, g.spec.priority_class_name) for key, g in objects.pod_groups.items()}
            self._group_objects = dict(objects.pod_groups)
            self.group_class_names = frozenset(name for _, name in groups.values())
            self.queued_groups = tuple(key for key, g in objects.pod_groups.items() if g.spec.queue_name)
        changed: set[str] = set()
        if classes != self._classes:
            self._infos.clear()
            self.base = None
        elif groups != self._groups:
            changed = {key for key in groups.keys() | self._groups.keys() if groups.get(key) != self._groups.get(key)}
            for key in [k for k, (_, info) in self._infos.items() if info.group_key in changed]:
                del self._infos[key]
        self._classes, self._groups = classes, groups
        return changed

    def prune(self, live: dict[str, Pod]) -> None:
        for key in [k for k in self._infos if k not in live]:
            del self._infos[key]

    def forget(self, key: str) -> None:
        self._infos.pop(key, None)

    def allocatable(self, name: str, node: Node) -> dict[str, int]:
        """`node.allocatable()`, parsed again only when the Node object was replaced."""
        cached = self._allocatable.get(name)
        if cached is not None and cached[0] is node:
            return cached[1]
        parsed = node.allocatable()
        self._allocatable[name] = (node, parsed)
        return parsed

    def prune_nodes(self, live: dict[str, Node]) -> None:
        for name in [n for n in self._allocatable if n not in live]:
            del self._allocatable[name]


@dataclass(slots=True)
class _Charge:
    """One pod's part of the base: the object it was computed from, its PodInfo (None for a terminal
    pod), the row it is charged to (None: pending or on an unknown node) and the index of its usage
    vector."""

    pod: Pod
    info: PodInfo | None
    row: int | None
    shape: int


@dataclass(slots=True)
class _Base:
    """The snapshot as of the last refresh, kept to apply the next one as a difference.

    A real cluster's refresh sees a few changed pods among tens of thousands; rebuilding every
    structure walked each pod in Python and, at 10,000 pods, made each pass cost 50-100 ms of
    GIL (issue 12). The base is valid for one node table (names and resource columns) and one
    priority context; either changing starts a new base.
    """

    names: tuple[str, ...]
    nodes: tuple[Node, ...]
    resources: tuple[str, ...]
    index: dict[str, int]
    resource_index: dict[str, int]
    allocatable: IntArray
    requested: IntArray
    versions: IntArray
    """Per row of `running`, its list's version (`Snapshot.versions`)."""
    allocatable_maps: list[dict[str, int]]
    """Per row, its Node's allocatable as parsed (`PodInfoCache.allocatable`)."""
    resource_nodes: Counter[str]
    """How many Nodes list each resource in their allocatable: the resource columns stay while these names do."""
    infos: dict[str, PodInfo] = field(default_factory=dict)
    unbound: dict[str, PodInfo] = field(default_factory=dict)
    """The PodInfos of `infos` without a node, in the same order."""
    running: list[list[PodInfo]] = field(default_factory=list)
    members: dict[str, list[PodInfo]] = field(default_factory=dict)
    shown_members: dict[str, list[PodInfo]] = field(default_factory=dict)
    """`members` as the snapshots show them: a group's list copied again only by a build that changed its members
    (`touched_groups`), so a pass does not copy every group's, nor a new base each list once per member."""
    nominated: dict[str, PodInfo] = field(default_factory=dict)
    queued: dict[str, PodInfo] = field(default_factory=dict)
    charges: dict[str, _Charge] = field(default_factory=dict)
    shapes: dict[tuple[tuple[str, int], ...], int] = field(default_factory=dict)
    vectors: list[IntArray] = field(default_factory=list)
    class_names: Counter[str | None] = field(default_factory=Counter)
    """The priority class names of `infos`, counted as pods are charged: a configuration check asks each pass."""
    replaced: set[str] = field(default_factory=set)
    """Keys whose PodInfo in `infos` the last snapshot's pass replaced (`Snapshot.replaced`): `infos` is that
    snapshot's `pods`, shared, not copied."""
    static_masks: dict[object, object] = field(default_factory=dict)
    """`Snapshot.static_masks`, kept for the next snapshot of these node names."""
    indexes: dict[object, object] = field(default_factory=dict)
    """`Snapshot.indexes`, kept for the next snapshot of these node names."""
    feed: ChangeFeed | None = None
    """The change feed the base was last brought up to (`ClusterObjects.pod_feed`), at `mark`, with the pods
    that were `overlaid` then."""
    mark: int = 0
    overlaid: frozenset[str] = frozenset()
    node_feed: ChangeFeed | None = None
    """The nodes' change feed (`ClusterObjects.node_feed`) and its mark, as `feed` and `mark` for the pods."""
    node_mark: int = 0
    touched: dict[str, None] = field(default_factory=dict)
    """The pods the current build charged or uncharged, in the order last charged (`Snapshot.changed`)."""
    touched_groups: set[str] = field(default_factory=set)
    """The PodGroups of those pods, before and after (`Snapshot.changed_groups`)."""


def _node_table(
    objects: ClusterObjects, cache: PodInfoCache
) -> tuple[tuple[str, ...], tuple[Node, ...], list[dict[str, int]]]:
    names = tuple(sorted(objects.nodes))
    nodes = tuple(objects.nodes[n] for n in names)
    allocatable_maps = [cache.allocatable(name, node) for name, node in zip(names, nodes, strict=True)]
    cache.prune_nodes(objects.nodes)
    return names, nodes, allocatable_maps


def _fill_allocatable(base: _Base, rows: Iterable[int], allocatable_maps: list[dict[str, int]]) -> None:
    pods_column = base.resource_index[PODS]
    for row in rows:
        base.allocatable[row] = 0
        for name, amount in allocatable_maps[row].items():
            base.allocatable[row, base.resource_index[name]] = amount
        if PODS not in allocatable_maps[row]:
            base.allocatable[row, pods_column] = DEFAULT_MAX_PODS


def _refresh_nodes(objects: ClusterObjects, cache: PodInfoCache) -> _Base:
    """The base for the current nodes: the kept one (rows of replaced Nodes re-read), or a new one."""
    base = _kept_base(objects, cache) or _new_base(objects, cache)
    base.node_feed, base.node_mark = objects.node_feed, objects.node_mark
    return base


def _kept_base(objects: ClusterObjects, cache: PodInfoCache) -> _Base | None:
    """The kept base with the rows of replaced Nodes re-read, or None: the nodes or their resources differ."""
    base = cache.base
    if base is None or len(objects.nodes) != len(base.names):
        return None
    changed = _replaced_nodes(objects, base)
    if not changed:
        return base
    names, maps = base.names, base.allocatable_maps
    if any(names[row] not in objects.nodes for row in changed):  # a Node gone is a changed row
        return None
    # only these rows: a real cluster's kubelets replace some Node most passes at 10,000 nodes
    read = {row: cache.allocatable(names[row], objects.nodes[names[row]]) for row in changed}
    counts = base.resource_nodes.copy()
    for row, allocatable in read.items():
        counts.subtract(maps[row].keys())
        counts.update(allocatable.keys())
    counts = +counts  # resources no Node lists any more leave the count
    if set(base.resources) != counts.keys() | {PODS}:
        return None  # the base is left as it was: a new one is built
    nodes = list(base.nodes)
    for row, allocatable in read.items():
        nodes[row], maps[row] = objects.nodes[names[row]], allocatable
    base.nodes, base.resource_nodes = tuple(nodes), counts
    _fill_allocatable(base, changed, maps)
    return base


def _replaced_nodes(objects: ClusterObjects, base: _Base) -> list[int]:
    """The rows whose Node is not the object the base read (gone: None), ascending.

    From the nodes' change feed, the Nodes it marks: comparing every row cost 2.4 ms of a pass at 10,000 nodes
    on the real API server (py-spy, issue 23), where a pass rarely sees a Node change. A Node added in place of
    one removed is found through the removed one's row."""
    feed = objects.node_feed
    keys = feed.changed_since(base.node_mark) if feed is not None and base.node_feed is feed else None
    if keys is None:
        return replaced_rows(base.nodes, list(map(objects.nodes.get, base.names)))
    index, nodes = base.index, objects.nodes
    return sorted(row for key in keys if (row := index.get(key)) is not None and nodes.get(key) is not base.nodes[row])


def _new_base(objects: ClusterObjects, cache: PodInfoCache) -> _Base:
    names, nodes, allocatable_maps = _node_table(objects, cache)
    resources = tuple(sorted({r for a in allocatable_maps for r in a} | {PODS}))
    base = _Base(
        names=names,
        nodes=nodes,
        resources=resources,
        index={name: i for i, name in enumerate(names)},
        resource_index={name: i for i, name in enumerate(resources)},
        allocatable=np.zeros((len(names), len(resources)), dtype=np.int64),
        requested=np.zeros((len(names), len(resources)), dtype=np.int64),
        running=[[] for _ in names],
        versions=new_row_versions(len(names)),
        allocatable_maps=allocatable_maps,
        resource_nodes=Counter(r for a in allocatable_maps for r in a),
    )
    _fill_allocatable(base, range(len(names)), allocatable_maps)
    cache.base = base
    return base


def _remove_identical(items: list[PodInfo], info: PodInfo) -> None:
    for i in range(len(items) - 1, -1, -1):
        if items[i] is info:
            del items[i]
            return


def _without(items: list[PodInfo], info: PodInfo) -> list[PodInfo]:
    """A copy of `items` without `info` (its last occurrence): a node's row is replaced, never changed in place."""
    copy = list(items)
    _remove_identical(copy, info)
    return copy


class _Delta:
    """Requested-capacity changes of one refresh, applied in one `np.add.at` per sign."""

    def __init__(self) -> None:
        self.added: tuple[list[int], list[int]] = ([], [])
        self.removed: tuple[list[int], list[int]] = ([], [])

    def apply(self, base: _Base) -> None:
        if not base.vectors:
            return
        vectors = np.array(base.vectors, dtype=np.int64)
        for (rows, shapes), sign in ((self.added, 1), (self.removed, -1)):
            if rows:
                np.add.at(
                    base.requested, np.array(rows, dtype=np.intp), sign * vectors[np.array(shapes, dtype=np.intp)]
                )


def _uncharge(base: _Base, key: str, charge: _Charge, delta: _Delta) -> None:
    info = charge.info
    if info is None:
        return
    del base.infos[key]
    base.touched[key] = None
    if info.group_key is not None:
        base.touched_groups.add(info.group_key)
    _count(base.class_names, info.priority_class_name, -1)
    base.unbound.pop(key, None)
    if info.group_key is not None:
        group = base.members[info.group_key]
        _remove_identical(group, info)
        if not group:
            del base.members[info.group_key]
    if charge.row is not None:
        base.running[charge.row] = _without(base.running[charge.row], info)
        base.versions[charge.row] = next(ROW_VERSIONS)
        delta.removed[0].append(charge.row)
        delta.removed[1].append(charge.shape)
    base.nominated.pop(key, None)
    base.queued.pop(key, None)


def _charge(
    base: _Base,
    key: str,
    pod: Pod,
    objects: ClusterObjects,
    now: datetime,
    cache: PodInfoCache,
    delta: _Delta,
) -> None:
    if pod.is_terminal:
        base.charges[key] = _Charge(pod, None, None, -1)
        return
    info = cache.info(pod, objects, now)
    base.infos[key] = info
    base.touched.pop(key, None)
    base.touched[key] = None
    if info.group_key is not None:
        base.touched_groups.add(info.group_key)
    _count(base.class_names, info.priority_class_name, 1)
    if info.group_key is not None:
        base.members.setdefault(info.group_key, []).append(info)
    if QUEUE_LABEL in pod.metadata.labels:
        base.queued[key] = info
    row: int | None = None
    shape = -1
    if info.node_name is not None:
        row = base.index.get(info.node_name)
        if row is not None:
            base.running[row] = [*base.running[row], info]
            base.versions[row] = next(ROW_VERSIONS)
            requests = tuple(info.requests.items())
            shape = base.shapes.get(requests, -1)
            if shape < 0:
                shape = base.shapes[requests] = len(base.vectors)
                base.vectors.append(usage_row(base.resource_index, info.requests))
            delta.added[0].append(row)
            delta.added[1].append(shape)
    else:
        base.unbound[key] = info
        if pod.status.nominated_node_name in base.index and pod.metadata.deletion_timestamp is None:
            base.nominated[key] = info
    base.charges[key] = _Charge(pod, info, row, shape)


def _count(counter: Counter[str | None], name: str | None, by: int) -> None:
    """Count `name` in or out; a name no longer counted is dropped, so the keys are the names in use."""
    left = counter[name] + by
    if left:
        counter[name] = left
    else:
        del counter[name]


def _shown_members(base: _Base) -> dict[str, list[PodInfo]]:
    """The snapshot's `members`: the lists of the groups this build changed copied, the others shared."""
    shown = base.shown_members
    for key in base.touched_groups:
        pods = base.members.get(key)
        if pods:
            shown[key] = list(pods)
        else:
            shown.pop(key, None)
    return dict(shown)


def _restore(base: _Base) -> None:
    """Put back the charged PodInfos of the keys the last pass replaced in the shared `infos` (`assume`,
    `forget`): before the next refresh compares them, as a copy of `infos` for each snapshot would have."""
    for key in base.replaced:
        charge = base.charges.get(key)
        if charge is not None and charge.info is not None:
            base.infos[key] = charge.info
    base.replaced.clear()


def _changed_pods(objects: ClusterObjects, base: _Base, recharged: set[str]) -> list[str] | None:
    """The pods that may differ from what the base charged (sorted, so a pass is the same whatever the hash
    seed), or None: compare them all (no feed, a new base, or a feed that no longer knows).

    A pod shown as a write in flight makes it, now or at the last build, may differ without a mark."""
    feed = objects.pod_feed
    if feed is None or base.feed is not feed:
        return None
    changed = feed.changed_since(base.mark)
    if changed is None:
        return None
    return sorted(changed | objects.overlaid | base.overlaid | recharged)


def _recharge(
    base: _Base,
    pods: Iterable[tuple[str, Pod | None]],
    objects: ClusterObjects,
    now: datetime,
    cache: PodInfoCache,
    delta: _Delta,
) -> None:
    """Charge each pod again whose object is not the one the base charged; a pod gone (None) is uncharged."""
    charges = base.charges
    for key, pod in pods:
        charge = charges.get(key)
        if charge is not None:
            if charge.pod is pod:
                continue
            _uncharge(base, key, charge, delta)
            if pod is None:
                del charges[key]
                cache.forget(key)
                continue
        if pod is not None:
            _charge(base, key, pod, objects, now, cache, delta)


def build_snapshot(
    objects: ClusterObjects,
    now: datetime,
    config: SchedulerConfiguration,
    cache: PodInfoCache | None = None,
) -> Snapshot:
    """One consistent Snapshot; every pod gets a PodInfo, bound pods are charged to their node.

    A pod this scheduler is binding is already on its node in `objects` (the back end's view shows
    its writes in flight, as kube-scheduler's cache does with assumed pods), so the next pass cannot
    over-commit the node.

    With a `cache` kept across refreshes, only pods whose object changed since the last refresh are
    charged again (`_Base`). The Snapshot's arrays, rows and lists are copies the pass may change; its `pods` is
    the base's own, which the next build brings up to date (`Snapshot`).
    """
    cache = cache or PodInfoCache()
    previous = cache.base
    regrouped = cache.begin(objects)
    base = _refresh_nodes(objects, cache)
    base.touched, base.touched_groups = {}, set()
    cache.builds += 1
    cache.namespaces = cache.namespaces.kept(objects.namespaces)
    _restore(base)
    delta = _Delta()
    charges = base.charges
    recharged: set[str] = set()
    for group_key in regrouped:  # their members' priority changed: charged again below
        for info in list(base.members.get(group_key, ())):
            _uncharge(base, info.key, charges.pop(info.key), delta)
            recharged.add(info.key)
    changed = _changed_pods(objects, base, recharged)
    if changed is not None:
        _recharge(base, [(key, objects.pods.get(key)) for key in changed], objects, now, cache, delta)
    if changed is None or len(charges) != len(objects.pods):
        if changed is not None:
            log.warning("pod changes missed by the feed, every pod compared", pods=len(objects.pods))
        _recharge(base, objects.pods.items(), objects, now, cache, delta)
        if len(charges) != len(objects.pods):
            for key in [k for k in charges if k not in objects.pods]:
                _uncharge(base, key, charges.pop(key), delta)
            cache.prune(objects.pods)
    base.feed, base.mark, base.overlaid = objects.pod_feed, objects.pod_mark, objects.overlaid
    delta.apply(base)
    table = NodeTable(
        names=base.names,
        nodes=base.nodes,
        resources=base.resources,
        allocatable=base.allocatable.copy(),
        requested=base.requested.copy(),
        index=base.index,
        resource_index=base.resource_index,
    )
    return Snapshot(
        now=now,
        nodes=table,
        pods=base.infos,
        unbound=base.unbound.values(),
        running=list(base.running),
        versions=base.versions.copy(),
        groups=dict(objects.pod_groups),
        priority_classes=dict(objects.priority_classes),
        pdbs=tuple(objects.pdbs.values()),
        queues=dict(objects.queues),
        config=config,
        members=_shown_members(base),
        nominated=list(base.nominated.values()),
        queued=list(base.queued.values()),
        static_masks=base.static_masks,
        indexes=base.indexes,
        replaced=base.replaced,
        class_names=base.class_names.keys(),
        build=cache.builds,
        changed=base.touched.keys() if base is previous else None,
        changed_groups=base.touched_groups,
        group_class_names=cache.group_class_names,
        queued_groups=cache.queued_groups,
        storage=Storage(
            claims=objects.persistent_volume_claims,
            volumes=objects.persistent_volumes,
            classes=objects.storage_classes,
            csi_nodes=objects.csi_nodes,
        ),
        devices=Devices(classes=objects.device_classes, slices=objects.resource_slices, claims=objects.resource_claims),
        namespaces=cache.namespaces,
    )
