"""GangReadiness: a PodGroup member waits until its PodGroup exists and `minCount` members exist.

Source: KEP-4671 (gang scheduling) PreEnqueue; scheduling part of a gang before the rest exists only
wastes capacity it would then hold. A basic group (minCount 1) is ready with its first member.
"""

from __future__ import annotations

from scheduler.framework.pod_info import PodInfo
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import SUCCESS, Status, unresolvable


class GangReadiness:
    name = "GangReadiness"

    def pre_enqueue(self, pod: PodInfo, snapshot: Snapshot) -> Status:
        if pod.group_key is None:
            return SUCCESS
        group = snapshot.groups.get(pod.group_key)
        if group is None:
            return unresolvable(f"PodGroup {pod.group_key} does not exist yet")
        existing = len(snapshot.members.get(pod.group_key, ()))
        if existing < group.min_count:
            return unresolvable(f"{existing}/{group.min_count} members exist, gang needs {group.min_count}")
        return SUCCESS
