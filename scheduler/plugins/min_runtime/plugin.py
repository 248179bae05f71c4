"""MinRuntime: a unit is not preempted before it has run its resolved min-runtime.

Source: KAI-Scheduler `pkg/scheduler/plugins/minruntime/minruntime.go` (victim filter registered on
the session); the queue-tree walk is `resolver.py`. A unit is protected while now < start +
min-runtime, start being its PodGroup's `last-start-timestamp` or a lone pod's scheduled time; a
unit that never started is unprotected. A `PodGroup`-mode unit is judged as a whole. Divergence:
members of an elastic group pass here and `ElasticMinRuntime` checks the plan instead, so the
search may still take the members above `minCount`.
"""

from __future__ import annotations

from scheduler.framework.pod_info import SchedulingUnit, VictimUnit
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import SUCCESS, Status, unschedulable
from scheduler.plugins.min_runtime.elastic import is_elastic
from scheduler.plugins.min_runtime.resolver import Resolver, ancestry, duration_error, unit_queue
from scheduler.plugins.preemption_toleration import ProtectionWarning

NAME = "MinRuntime"


class MinRuntime:
    """VictimFilter: spares units still inside their min-runtime against this preemptor (see module doc)."""

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

    def warnings(self, snapshot: Snapshot) -> list[ProtectionWarning]:
        """Queues with unusable durations or broken parents, and running units naming unknown queues."""
        found: list[ProtectionWarning] = []
        for name in sorted(snapshot.queues):
            queue = snapshot.queues[name]
            for field, raw in (
                ("spec.preemptMinRuntime", queue.spec.preempt_min_runtime),
                ("spec.reclaimMinRuntime", queue.spec.reclaim_min_runtime),
            ):
                problem = duration_error(raw) if raw is not None else None
                if problem is not None:
                    note = f"{field}: Invalid value: {raw!r}: {problem}; treated as 0"
                    found.append(ProtectionWarning(queue, "InvalidMinRuntime", note))
            parent = queue.spec.parent_queue
            if parent is not None and parent not in snapshot.queues:
                note = f"spec.parentQueue: Not found: {parent!r}; the walk stops at {name}"
                found.append(ProtectionWarning(queue, "QueueNotFound", note))
            elif parent is not None and name in ancestry(parent, snapshot.queues):
                note = f"spec.parentQueue: Invalid value: {parent!r}: queue {name} is its own ancestor"
                found.append(ProtectionWarning(queue, "QueueCycle", note))
        seen: set[str] = set()
        for info in snapshot.pods.values():
            group = snapshot.groups.get(info.group_key) if info.group_key else None
            key = group.key if group is not None else info.key
            if info.node_name is None or key in seen:
                continue
            seen.add(key)
            queue_name = unit_queue(group, (info,))
            if queue_name is not None and queue_name not in snapshot.queues:
                note = f"queue {queue_name} not found: {key} gets the node-pool min-runtime defaults"
                found.append(ProtectionWarning(group if group is not None else info.pod, "QueueNotFound", note))
        return found
