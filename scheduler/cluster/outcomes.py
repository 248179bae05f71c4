"""The outcome of a write, as kube-scheduler tells it: the Events both back ends record for their writes.

kube-scheduler records `Scheduled` ("Successfully assigned NS/POD to NODE") once a Binding went through,
`FailedScheduling` with the unit's message when it finds a pod unschedulable (here: when the pod's PodScheduled
condition is written Unschedulable, so a message repeated pass after pass is told once), and `FailedScheduling`
when a write of its binding cycle is refused. One implementation for both back ends, so `phalanx simulate` and
`explain -f` record what the scheduler records on a cluster. The framework's own Events (a PodGroup's reason,
a preemption's) are recorded through `Cluster.record_event`.
"""

from __future__ import annotations

from typing import Protocol

from scheduler.api.meta import ApiModel, Condition
from scheduler.api.pod import Pod


class Recorder(Protocol):
    def __call__(self, regarding: ApiModel, event_type: str, reason: str, note: str) -> None:
        """Record one Event (best effort)."""


class OutcomeEvents:
    """`framework.cluster.Outcomes` as Events."""

    def __init__(self, record: Recorder) -> None:
        self._record = record

    def bound(self, pod: Pod, node_name: str) -> None:
        self._record(pod, "Normal", "Scheduled", f"Successfully assigned {pod.key} to {node_name}")

    def refused(self, pod: Pod, message: str) -> None:
        self._record(pod, "Warning", "FailedScheduling", message)

    def condition_written(self, pod: Pod, condition: Condition) -> None:
        if (condition.type, condition.status, condition.reason) == ("PodScheduled", "False", "Unschedulable"):
            self._record(pod, "Warning", "FailedScheduling", condition.message or "")
