"""UnsupportedFields: a pod that asks for something phalanx-scheduler cannot honour waits, saying so.

kube-scheduler honours every scheduling field of a pod; a scheduler that skipped one would place the pod where
it cannot run (a gang spread over racks it asked to stay in). Until Phalanx
implements such a field, the pod is UnschedulableAndUnresolvable with `phalanx-scheduler does not support
FIELD`, the message kube-scheduler would give for a PreFilter rejection: nothing is placed as if the field were
absent, and nothing is preempted for it. README's plugin table lists what is and is not supported.
"""

from __future__ import annotations

import numpy as np

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import NodeVerdict
from scheduler.framework.pod_info import PodInfo
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import Code


def unsupported(pod: PodInfo, snapshot: Snapshot) -> str | None:
    """The first field of `pod` (or of its PodGroup) the scheduler does not implement, or None."""
    group = snapshot.groups.get(pod.group_key) if pod.group_key is not None else None
    if group is not None:
        extra = group.spec.model_extra or {}
        constraints = extra.get("schedulingConstraints")
        if isinstance(constraints, dict) and constraints.get("topology"):
            return f"spec.schedulingConstraints.topology of PodGroup {group.key}"
    return None


class UnsupportedFields:
    name = "UnsupportedFields"

    def filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> NodeVerdict | None:
        field = unsupported(pod, snapshot)
        if field is None:
            return None
        return NodeVerdict(
            feasible=np.zeros(len(snapshot.running), dtype=np.bool_),
            code=Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            message=f"phalanx-scheduler does not support {field}",
        )
