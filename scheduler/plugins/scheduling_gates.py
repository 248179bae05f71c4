"""SchedulingGates: a pod with any `spec.schedulingGates` entry is parked, not scheduled (KEP-3521).

Source: kube-scheduler `plugins/schedulinggates`. Our own gang gate is parked like any other; the
runner removes it once the Ungate plugins release the pod (GangScheduling: once the gang is ready), and nothing
ever removes a foreign gate.
"""

from __future__ import annotations

from scheduler.framework.pod_info import PodInfo
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import SUCCESS, Status, unresolvable


class SchedulingGates:
    name = "SchedulingGates"

    def pre_enqueue(self, pod: PodInfo, snapshot: Snapshot) -> Status:
        gates = [g.name for g in pod.pod.spec.scheduling_gates]
        if not gates:
            return SUCCESS
        return unresolvable(f"waiting for scheduling gates: {', '.join(gates)}")
