"""NodePorts: a pod's host ports must be free on the node, by protocol and host IP.

Source: kube-scheduler `plugins/nodeports` and `HostPortInfo.CheckConflict`: two uses of one protocol and port
conflict when either host IP is `0.0.0.0` or both are the same. Rejections are UNSCHEDULABLE: preempting the
pods that hold the port frees it, which the preemption search sees as one more column (`preemption_terms`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import chain

import numpy as np

from scheduler.api.pod import WILDCARD_IP, HostPort
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import Exclusion, NodeVerdict, PreemptionTerms
from scheduler.framework.pod_counts import Counted, counted
from scheduler.framework.pod_info import PodInfo
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import Code

REASON = "node(s) didn't have free ports for the requested pod ports"


def conflicts(wanted: HostPort, used: HostPort) -> bool:
    protocol, ip, port = wanted
    return port == used[2] and protocol == used[0] and (ip == used[1] or ip == WILDCARD_IP or used[1] == WILDCARD_IP)


def holds(pod: PodInfo, wanted: Sequence[HostPort]) -> bool:
    """Whether `pod` takes a port that one of `wanted` conflicts with."""
    return any(conflicts(w, used) for used in pod.host_ports for w in wanted)


def _using(snapshot: Snapshot, port: HostPort) -> Counted:
    """The pods on each node that take a port `port` conflicts with, kept by row (`pod_counts`): a preemption
    attempt then reads the rows that changed since the last, not every pod."""
    return counted(snapshot, ("NodePorts", port), lambda p: bool(p.host_ports) and holds(p, (port,)))


class NodePorts:
    name = "NodePorts"

    def skips(self, pod: PodInfo) -> bool:
        return not pod.host_ports

    def filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> NodeVerdict:
        wanted = pod.host_ports
        rows = len(snapshot.running)
        if not wanted:
            return NodeVerdict(feasible=np.ones(rows, dtype=np.bool_))
        taken = np.fromiter(
            (any(holds(p, wanted) for p in row if p.host_ports) for row in snapshot.running),
            dtype=np.bool_,
            count=rows,
        )
        return NodeVerdict(feasible=~taken, reasons=((REASON, taken),), code=Code.UNSCHEDULABLE)

    def preemption_terms(
        self,
        state: CycleState,
        members: Sequence[PodInfo],
        snapshot: Snapshot,
        removable: Callable[[PodInfo], bool],
    ) -> PreemptionTerms:
        """One column per port a member asks for: its holders on a node must all go, and members asking for the
        same port never share a node."""
        ports = sorted({port for m in members for port in m.host_ports})
        if not ports:
            return PreemptionTerms()
        exclusions = []
        for port in ports:
            holders = frozenset(chain.from_iterable(_using(snapshot, port).keys))
            needs = tuple(any(conflicts(port, own) for own in m.host_ports) for m in members)
            exclusions.append(Exclusion(needs=needs, holders=holders, capacity=1))
        return PreemptionTerms(exclusions=tuple(exclusions))
