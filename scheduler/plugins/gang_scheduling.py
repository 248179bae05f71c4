"""GangScheduling: a gang is placed all or nothing, and its members wait until enough of them exist.

Source: KEP-4671 (gang scheduling) and kube-scheduler's GangScheduling plugin. Three points, one rule:

- PreEnqueue: a PodGroup member waits until its PodGroup exists and `minCount` members exist; placing part of a
  gang before the rest exists only wastes capacity it would then hold. A basic group (minCount 1) is ready with
  its first member.
- Ungate: our scheduling gate comes off a member once the same holds (a lone pod's at once).
- Permit: a gang binds only when at least `minCount` members, those bound before included, have a place; else
  its placement is undone and every member is told why. Divergence: upstream's Permit holds each assumed pod and
  waits for the rest; here every pending member is placed in the same cycle, so the answer is given at once.
  The rejection is UnschedulableAndUnresolvable (preemption is not tried) when too few members could have a
  place whatever were removed.
"""

from __future__ import annotations

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import PermitResult, Placement
from scheduler.framework.pod_info import PodInfo
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import SUCCESS, Code, Status, unresolvable


class GangScheduling:
    name = "GangScheduling"

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

    def ungate(self, pod: PodInfo, snapshot: Snapshot) -> bool:
        return self.pre_enqueue(pod, snapshot).is_success

    def permit(self, state: CycleState, placement: Placement, snapshot: Snapshot) -> PermitResult:
        unit, already = placement.unit, placement.bound_before
        group = unit.group
        if group is None or not group.is_gang:
            return PermitResult()
        fitted = len(placement.placed) + already
        if fitted >= unit.min_count:
            return PermitResult(needs=unit.min_count)
        message = f"gang {group.key} needs {unit.min_count} members, {fitted} can be placed"
        held_back = len(snapshot.members.get(group.key, ())) - already - len(unit.members)
        message += f" ({held_back} held back by scheduling gates)." if held_back > 0 else "."
        # Members no node could take whatever was removed: when too many, preemption cannot help the gang.
        failures = placement.failures.values()
        nowhere = sum(1 for status, _ in failures if status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE)
        hopeless = already + len(unit.members) - nowhere < unit.min_count
        code = Code.UNSCHEDULABLE_AND_UNRESOLVABLE if hopeless else Code.UNSCHEDULABLE
        return PermitResult(Status(code, (message,)), unit.min_count)
