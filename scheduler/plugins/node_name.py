"""NodeName: a pod that names its node (`spec.nodeName`) fits only there (kube-scheduler `plugins/nodename`)."""

from __future__ import annotations

import numpy as np

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import NodeVerdict
from scheduler.framework.pod_info import PodInfo
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import Code


class NodeName:
    name = "NodeName"

    def filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> NodeVerdict:
        count = len(snapshot.nodes.names)
        wanted = pod.pod.spec.node_name
        if not wanted:
            return NodeVerdict(feasible=np.ones(count, dtype=np.bool_))
        feasible = np.zeros(count, dtype=np.bool_)
        row = snapshot.nodes.index.get(wanted)
        if row is not None:
            feasible[row] = True
        return NodeVerdict(
            feasible=feasible,
            reasons=(("node(s) didn't match the requested node name", ~feasible),),
            code=Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        )
