"""NodeUnschedulable: a cordoned node (`spec.unschedulable`) takes no new pod unless the pod
tolerates `node.kubernetes.io/unschedulable:NoSchedule` (kube-scheduler `plugins/nodeunschedulable`).
"""

from __future__ import annotations

import numpy as np

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import NodeVerdict
from scheduler.framework.pod_info import PodInfo
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import Code
from scheduler.plugins.taint_toleration import tolerates

UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"


class NodeUnschedulable:
    name = "NodeUnschedulable"

    def filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> NodeVerdict:
        cordoned = np.fromiter((n.spec.unschedulable for n in snapshot.nodes.nodes), dtype=np.bool_)
        if tolerates(pod.pod.spec.tolerations, UNSCHEDULABLE_TAINT, None, "NoSchedule"):
            cordoned[:] = False
        return NodeVerdict(
            feasible=~cordoned,
            reasons=(("node(s) were unschedulable", cordoned),),
            code=Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        )
