"""MinRuntime: a unit is not preempted before it has run its resolved min-runtime.

Source: KAI-Scheduler `pkg/scheduler/plugins/minruntime/minruntime.go` (victim filter registered on
the session); the queue-tree walk is `resolver.py`. A unit is protected while now < start +
min-runtime, start being its PodGroup's `last-start-timestamp` or a lone pod's scheduled time; a
unit that never started is unprotected. A `PodGroup`-mode unit is judged as a whole. Divergence:
members of an elastic group pass here and `ElasticMinRuntime` checks the plan instead, so the
search may still take the members above `minCount`. An unusable duration (on a Queue or in the
SchedulerConfiguration) counts as 0; `warnings` names it, and the runner reports it once.

The start is written here too (PostBind): a PodGroup starts running when it goes from fewer than `minCount` bound
members to at least that many, and its `last-start-timestamp` annotation is set to that cycle's time.
"""

from __future__ import annotations

from scheduler.api.meta import rfc3339
from scheduler.api.pod_group import LAST_START_ANNOTATION
from scheduler.framework.cluster import Cluster
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import ConfigurationWarning, Placement
from scheduler.framework.pod_info import SchedulingUnit, VictimUnit, unit_queue
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import SUCCESS, Status, unschedulable
from scheduler.plugins.min_runtime.elastic import is_elastic
from scheduler.plugins.min_runtime.resolver import Resolver, ancestry, duration_error

NAME = "MinRuntime"
INVALID_MIN_RUNTIME = "InvalidMinRuntime"
QUEUE_NOT_FOUND = "QueueNotFound"
QUEUE_CYCLE = "QueueCycle"


class MinRuntime:
    """VictimFilter: spares units still inside their min-runtime against this preemptor; PostBind: records when a
    PodGroup started (see module doc)."""

    name = NAME

    def __init__(self) -> None:
        self._resolver: Resolver | None = None
        """Memo of the last snapshot's queue walks; rebuilt whenever the queues or defaults change."""

    def filter_victim(self, preemptor: SchedulingUnit, victim: VictimUnit, snapshot: Snapshot) -> Status:
        self._resolver = resolver = Resolver.of(snapshot, self._resolver)
        group = victim.group
        if group is not None and not victim.is_group and is_elastic(group, snapshot):
            return SUCCESS
        found = resolver.protection(preemptor, group, victim.pods, snapshot.now)
        if found is None:
            return SUCCESS
        return unschedulable(found.message(victim.key, snapshot.now), until=found.until)

    def post_bind(self, state: CycleState, placement: Placement, snapshot: Snapshot, cluster: Cluster) -> None:
        unit = placement.unit
        if unit.group is not None and placement.bound_before < unit.min_count:
            cluster.annotate_pod_group(unit.group, LAST_START_ANNOTATION, rfc3339(snapshot.now))

    def warnings(self, snapshot: Snapshot) -> list[ConfigurationWarning]:
        """Unusable defaults, queues with unusable durations or broken parents, running units naming unknown queues."""
        found: list[ConfigurationWarning] = []
        defaults = snapshot.config.min_runtime
        for setting, value in (("minRuntime.preempt", defaults.preempt), ("minRuntime.reclaim", defaults.reclaim)):
            problem = duration_error(value)
            if problem is not None:
                note = f"SchedulerConfiguration {setting}: Invalid value: {value!r}: {problem}; treated as 0"
                found.append(ConfigurationWarning(None, INVALID_MIN_RUNTIME, note))
        for name in sorted(snapshot.queues):
            queue = snapshot.queues[name]
            version = queue.metadata.resource_version
            for field, raw in (
                ("spec.preemptMinRuntime", queue.spec.preempt_min_runtime),
                ("spec.reclaimMinRuntime", queue.spec.reclaim_min_runtime),
            ):
                problem = duration_error(raw) if raw is not None else None
                if problem is not None:
                    note = f"{field}: Invalid value: {raw!r}: {problem}; treated as 0"
                    found.append(ConfigurationWarning(queue, INVALID_MIN_RUNTIME, note, version))
            parent = queue.spec.parent_queue
            if parent is not None and parent not in snapshot.queues:
                note = f"spec.parentQueue: Not found: {parent!r}; the walk stops at {name}"
                found.append(ConfigurationWarning(queue, QUEUE_NOT_FOUND, note, version))
            elif parent is not None and name in ancestry(parent, snapshot.queues):
                note = f"spec.parentQueue: Invalid value: {parent!r}: queue {name} is its own ancestor"
                found.append(ConfigurationWarning(queue, QUEUE_CYCLE, note, version))
        seen: set[tuple[bool, str]] = set()
        groups, queues = snapshot.groups, snapshot.queues
        # Only pods that can name a queue: members of a group with a queue, and pods with the queue
        # label. Walking every pod here cost ~10 ms a pass at 10,000 pods (issue 12).
        named = [info for key in snapshot.queued_groups for info in snapshot.members.get(key, ())]
        for info in [*named, *snapshot.queued]:
            if info.node_name is None:
                continue
            group = groups.get(info.group_key) if info.group_key else None
            queue_name = unit_queue(group, (info,))
            if not queue_name or queue_name in queues:
                continue
            key = group.key if group is not None else info.key
            if (group is not None, key) in seen:  # a pod and a PodGroup may share a name
                continue
            seen.add((group is not None, key))
            note = f"queue {queue_name} not found: {key} gets the node-pool min-runtime defaults"
            found.append(ConfigurationWarning(group if group is not None else info.pod, QUEUE_NOT_FOUND, note))
        return found
