"""TaintToleration: a node's NoSchedule and NoExecute taints must each be tolerated by the pod.

Source: kube-scheduler `plugins/tainttoleration` and `v1helper.TolerationsTolerateTaint`.
PreferNoSchedule taints only affect scoring upstream; they are ignored here (no preference scoring).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from scheduler.api.pod import Toleration
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import NodeVerdict
from scheduler.framework.pod_info import PodInfo
from scheduler.framework.snapshot import BoolArray, Snapshot
from scheduler.framework.status import Code

FILTERED_EFFECTS = ("NoSchedule", "NoExecute")


def tolerates(tolerations: Sequence[Toleration], key: str, value: str | None, effect: str) -> bool:
    """`Toleration.ToleratesTaint`: empty effect matches all; `Exists` with no key matches every taint."""
    for t in tolerations:
        if t.effect and t.effect != effect:
            continue
        if t.operator == "Exists":
            if not t.key or t.key == key:
                return True
            continue
        if t.key == key and (t.value or "") == (value or ""):
            return True
    return False


class TaintToleration:
    name = "TaintToleration"

    def filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> NodeVerdict:
        nodes = snapshot.nodes.nodes
        feasible = np.ones(len(nodes), dtype=np.bool_)
        untolerated: dict[str, BoolArray] = {}
        tolerations = pod.pod.spec.tolerations
        for row, node in enumerate(nodes):
            for taint in node.spec.taints:
                if taint.effect in FILTERED_EFFECTS and not tolerates(
                    tolerations, taint.key, taint.value, taint.effect
                ):
                    feasible[row] = False
                    label = f"{{{taint.key}: {taint.value}}}" if taint.value else f"{{{taint.key}}}"
                    untolerated.setdefault(label, np.zeros(len(nodes), dtype=np.bool_))[row] = True
                    break
        reasons = tuple((f"node(s) had untolerated taint {label}", mask) for label, mask in untolerated.items())
        return NodeVerdict(feasible=feasible, reasons=reasons, code=Code.UNSCHEDULABLE_AND_UNRESOLVABLE)
