"""Snapshots and preemption units for the protection plugins' tables, built by the framework itself.

The snapshot comes from `build_snapshot` (effective priorities, group members), and the units are the
frozen dataclasses the preemption search hands to victim filters, so a table reads like a cluster.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from scheduler.api.config import SchedulerConfiguration
from scheduler.api.meta import ApiModel
from scheduler.api.node import Node
from scheduler.api.pod import Pod
from scheduler.api.pod_group import LAST_START_ANNOTATION, PodGroup
from scheduler.api.priority_class import PriorityClass
from scheduler.api.queue import Queue
from scheduler.framework.cluster import ClusterObjects
from scheduler.framework.pod_info import SchedulingUnit, VictimUnit
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.snapshot_builder import build_snapshot
from tests.builders import PodGroupWrapper, PodWrapper, make_config, make_node

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


def ts(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def scheduled(pod: PodWrapper, when: datetime, node: str = "n1") -> PodWrapper:
    """Bound to `node` with `PodScheduled=True` at `when`, as the apiserver's binding leaves it."""
    pod.on(node)
    pod.raw["status"]["conditions"] = [{"type": "PodScheduled", "status": "True", "lastTransitionTime": ts(when)}]
    return pod


def last_start(group: PodGroupWrapper, when: datetime | str) -> PodGroupWrapper:
    text = when if isinstance(when, str) else ts(when)
    group.raw["metadata"].setdefault("annotations", {})[LAST_START_ANNOTATION] = text
    return group


def snapshot_of(*objects: ApiModel, now: datetime = NOW, **config: Any) -> Snapshot:
    store = ClusterObjects(nodes={"n1": make_node("n1").obj()})
    for obj in objects:
        if isinstance(obj, Pod):
            store.pods[obj.key] = obj
        elif isinstance(obj, PodGroup):
            store.pod_groups[obj.key] = obj
        elif isinstance(obj, PriorityClass):
            store.priority_classes[obj.metadata.name] = obj
        elif isinstance(obj, Queue):
            store.queues[obj.metadata.name] = obj
        elif isinstance(obj, Node):
            store.nodes[obj.metadata.name] = obj
        else:
            raise TypeError(f"no place for {type(obj).__name__} in a snapshot")
    settings: SchedulerConfiguration = make_config(**config)
    return build_snapshot(store, now, settings)


def preemptor(snapshot: Snapshot, key: str) -> SchedulingUnit:
    """The pending pod `namespace/name`, or every pending member of the PodGroup `namespace/name`."""
    group = snapshot.groups.get(key)
    if group is None:
        info = snapshot.pods[key]
        return SchedulingUnit((info,), None, 1, info.priority, info.preemption_policy)
    members = tuple(info for info in snapshot.members[key] if info.node_name is None)
    return SchedulingUnit(members, group, group.min_count, members[0].priority, members[0].preemption_policy)


def victim(snapshot: Snapshot, key: str) -> VictimUnit:
    """The running pod `namespace/name`, or every running member of the PodGroup `namespace/name`."""
    group = snapshot.groups.get(key)
    if group is None:
        info = snapshot.pods[key]
        owner = snapshot.groups.get(info.group_key) if info.group_key else None
        return VictimUnit(key, (info,), owner, info.priority, info.scheduled_at)
    pods = tuple(info for info in snapshot.members[key] if info.node_name is not None)
    return VictimUnit(key, pods, group, pods[0].priority, None)
