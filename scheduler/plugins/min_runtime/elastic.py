"""ElasticMinRuntime: no plan may leave a min-runtime-protected elastic group below `minCount` running.

Source: KAI-Scheduler `minruntime` (elastic jobs may shrink to `minAvailable` while protected). An
elastic group is a gang in `disruptionMode: Pod` with more running members than `minCount`; the
MinRuntime victim filter lets its members through one by one, so only the whole plan shows whether
it shrinks the group too far. Members already being deleted no longer count as running.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from scheduler.api.pod_group import PodGroup
from scheduler.framework.pod_info import PodInfo, SchedulingUnit, VictimUnit
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import SUCCESS, Status, unschedulable
from scheduler.plugins.min_runtime.resolver import Resolver

NAME = "ElasticMinRuntime"


def running_members(group: PodGroup, snapshot: Snapshot) -> list[PodInfo]:
    return [
        info
        for info in snapshot.members.get(group.key, ())
        if info.node_name is not None and info.pod.metadata.deletion_timestamp is None
    ]


def is_elastic(group: PodGroup, snapshot: Snapshot) -> bool:
    """A gang preempted pod by pod that runs more members than it needs."""
    return group.is_gang and group.disruption_mode == "Pod" and len(running_members(group, snapshot)) > group.min_count


class ElasticMinRuntime:
    """ScenarioValidator: rejects plans taking a protected `Pod`-mode gang below `minCount` (see module doc)."""

    name = NAME

    def validate(self, preemptor: SchedulingUnit, victims: Sequence[VictimUnit], snapshot: Snapshot) -> Status:
        taken: dict[str, set[str]] = {}
        for victim in victims:
            if victim.group is not None and victim.group.disruption_mode == "Pod":
                taken.setdefault(victim.group.key, set()).update(info.key for info in victim.pods)
        resolver = Resolver(snapshot.queues, snapshot.config.min_runtime)
        reasons: list[str] = []
        until: datetime | None = None
        for key in sorted(taken):
            group = snapshot.groups.get(key)
            if group is None or not group.is_gang:
                continue
            running = running_members(group, snapshot)
            left = sum(1 for info in running if info.key not in taken[key])
            if left >= group.min_count:
                continue
            found = resolver.protection(preemptor, group, running, snapshot.now)
            if found is None:
                continue
            reasons.append(
                f"{found.message(key, snapshot.now)}: preempting {len(running) - left} of its {len(running)} "
                f"running members would leave {left}, below minCount {group.min_count}"
            )
            until = found.until if until is None else min(until, found.until)
        return unschedulable(*reasons, until=until) if reasons else SUCCESS
