"""Build a Snapshot from the cluster's objects: PodInfos with effective priority, capacity arrays.

Follows kube-scheduler's cache: a pod with `spec.nodeName` occupies its node until it is gone (a pod
being deleted still holds its resources), terminal pods hold nothing, and a pending pod nominated to
a node is kept aside so the runner can count it against pods of lower or equal priority.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

import numpy as np
import structlog

from scheduler.api.config import SchedulerConfiguration
from scheduler.api.node import Node
from scheduler.api.pod import Pod
from scheduler.api.pod_group import PodGroup
from scheduler.api.priority_class import PriorityClass, PriorityClassNotFound, ResolvedPriority, resolve_priority
from scheduler.api.quantity import PODS
from scheduler.framework.cluster import ClusterObjects
from scheduler.framework.pod_info import PodInfo
from scheduler.framework.snapshot import NodeTable, Snapshot

log = structlog.get_logger(__name__)

DEFAULT_MAX_PODS = 110
"""The kubelet's default `maxPods`, used when a node reports no `pods` allocatable."""


def effective_priority(
    pod: Pod, groups: dict[str, PodGroup], classes: dict[str, PriorityClass]
) -> tuple[ResolvedPriority, str | None]:
    """A pod's priority and group key: its PodGroup's for a member, else its own (DESIGN.md, Priority).

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
        self._context: tuple[object, object] = ((), ())
        self._request_memo: dict[object, dict[str, int]] = {}
        self._allocatable: dict[str, tuple[Node, dict[str, int]]] = {}

    def info(self, pod: Pod, objects: ClusterObjects, now: datetime) -> PodInfo:
        cached = self._infos.get(pod.key)
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
            key=pod.key,
            requests=requests,
            priority=resolved.value,
            priority_class_name=resolved.class_name,
            preemption_policy=resolved.preemption_policy,
            group_key=group_key,
            node_name=pod.spec.node_name or None,
            created_at=pod.metadata.creation_timestamp or now,
            scheduled_at=pod.scheduled_time() if pod.spec.node_name else None,
        )
        self._infos[pod.key] = (pod, info)
        return info

    def _requests(self, pod: Pod) -> dict[str, int]:
        """`effective_requests` plus one `pods`, memoised by the resource fields (replicas share them)."""
        spec = pod.spec
        key = (
            tuple((tuple(c.resources.requests.items()), tuple(c.resources.limits.items())) for c in spec.containers),
            tuple(
                (tuple(c.resources.requests.items()), tuple(c.resources.limits.items()), c.restart_policy)
                for c in spec.init_containers
            ),
            tuple(spec.overhead.items()),
        )
        cached = self._request_memo.get(key)
        if cached is None:
            cached = pod.effective_requests()
            cached[PODS] = 1
            self._request_memo[key] = cached
        return dict(cached)

    def begin(self, objects: ClusterObjects) -> None:
        """Drop every cached PodInfo when what `effective_priority` reads of groups or classes changed.

        Only the groups' priority fields count: a PodGroup status or annotation write (one per gang
        scheduled) must not make the next refresh re-resolve every pod.
        """
        context = (
            tuple((key, g.spec.priority, g.spec.priority_class_name) for key, g in objects.pod_groups.items()),
            tuple(
                (name, c.value, c.global_default, c.preemption_policy) for name, c in objects.priority_classes.items()
            ),
        )
        if context != self._context:
            self._infos.clear()
            self._context = context

    def prune(self, live: dict[str, Pod]) -> None:
        for key in [k for k in self._infos if k not in live]:
            del self._infos[key]

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


def build_snapshot(
    objects: ClusterObjects,
    now: datetime,
    config: SchedulerConfiguration,
    cache: PodInfoCache | None = None,
    assumed: dict[str, str] | None = None,
) -> Snapshot:
    """One consistent Snapshot; every pod gets a PodInfo, bound pods are charged to their node.

    `assumed` maps pods this scheduler bound to their node: until the cluster's view shows the
    binding (an informer lags its writes), such a pod is charged to that node anyway, as
    kube-scheduler's cache does with assumed pods, so the next pass cannot over-commit the node.
    """
    cache = cache or PodInfoCache()
    cache.begin(objects)
    names = tuple(sorted(objects.nodes))
    nodes = tuple(objects.nodes[n] for n in names)
    allocatable_maps = [cache.allocatable(name, node) for name, node in zip(names, nodes, strict=True)]
    cache.prune_nodes(objects.nodes)
    resources = sorted({r for a in allocatable_maps for r in a} | {PODS})
    table = NodeTable(
        names=names,
        nodes=nodes,
        resources=tuple(resources),
        allocatable=np.zeros((len(names), len(resources)), dtype=np.int64),
        requested=np.zeros((len(names), len(resources)), dtype=np.int64),
    )
    pods_column = table.resource_index[PODS]
    for row, allocatable in enumerate(allocatable_maps):
        for name, amount in allocatable.items():
            table.allocatable[row, table.resource_index[name]] = amount
        if PODS not in allocatable:
            table.allocatable[row, pods_column] = DEFAULT_MAX_PODS
    infos: dict[str, PodInfo] = {}
    running: list[list[PodInfo]] = [[] for _ in names]
    members: dict[str, list[PodInfo]] = {}
    nominated: list[PodInfo] = []
    shapes: dict[tuple[tuple[str, int], ...], int] = {}
    placed_rows: list[int] = []
    placed_shapes: list[int] = []
    for key, pod in objects.pods.items():
        if pod.is_terminal:
            continue
        info = cache.info(pod, objects, now)
        if info.node_name is None and assumed and key in assumed:
            info = replace(info, node_name=assumed[key], scheduled_at=now)
        infos[key] = info
        if info.group_key is not None:
            members.setdefault(info.group_key, []).append(info)
        if info.node_name is not None:
            at = table.index.get(info.node_name)
            if at is not None:
                running[at].append(info)
                shape = tuple(info.requests.items())
                placed_rows.append(at)
                placed_shapes.append(shapes.setdefault(shape, len(shapes)))
        elif pod.status.nominated_node_name in table.index and pod.metadata.deletion_timestamp is None:
            nominated.append(info)
    cache.prune(objects.pods)
    if placed_rows:
        # One vector per distinct request, summed per node in one call instead of one row update per pod.
        vectors = np.array([table.usage(dict(shape)) for shape in shapes], dtype=np.int64)
        rows = np.array(placed_rows, dtype=np.intp)
        np.add.at(table.requested, rows, vectors[np.array(placed_shapes, dtype=np.intp)])
    return Snapshot(
        now=now,
        nodes=table,
        pods=infos,
        running=running,
        groups=dict(objects.pod_groups),
        priority_classes=dict(objects.priority_classes),
        pdbs=tuple(objects.pdbs.values()),
        queues=dict(objects.queues),
        config=config,
        members=members,
        nominated=nominated,
    )
