"""Run objects built with `tests.builders` through the simulation driver and read its JSON report.

The same path `phalanx simulate` takes after parsing (memory cluster, runner, virtual clock, report),
without writing files: plugin tables stay short and fast.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from scheduler.api.config import SchedulerConfiguration
from scheduler.api.meta import ApiModel
from scheduler.api.namespace import Namespace
from scheduler.api.node import Node
from scheduler.api.pod import Pod
from scheduler.api.pod_group import PodGroup
from scheduler.api.priority_class import PriorityClass
from scheduler.api.queue import Queue
from scheduler.framework.cluster import ClusterObjects, device_table, object_key, storage_table
from scheduler.preemption.actuator import PreemptionActuator
from scheduler.simulation.driver import simulate
from scheduler.simulation.report import build_report
from scheduler.simulation.scenario import Scenario
from tests.builders import EPOCH


@dataclass
class Outcome:
    report: dict[str, Any]
    objects: ClusterObjects

    def gates(self, pod: str) -> list[str]:
        key = pod if "/" in pod else f"default/{pod}"
        return [g.name for g in self.objects.pods[key].spec.scheduling_gates]

    def node_of(self, pod: str) -> str | None:
        key = pod if "/" in pod else f"default/{pod}"
        return next((b["node"] for b in self.report["bindings"] if b["pod"] == key), None)

    def pending(self, pod: str) -> tuple[str, str] | None:
        key = pod if "/" in pod else f"default/{pod}"
        return next(((p["reason"], p["message"]) for p in self.report["pending"] if p["pod"] == key), None)

    @property
    def bound(self) -> dict[str, str]:
        return {b["pod"]: b["node"] for b in self.report["bindings"]}


def cluster_of(objects: list[ApiModel]) -> ClusterObjects:
    cluster = ClusterObjects()
    for obj in objects:
        if isinstance(obj, Pod):
            cluster.pods[obj.key] = obj
        elif isinstance(obj, Node):
            cluster.nodes[obj.metadata.name] = obj
        elif isinstance(obj, PodGroup):
            cluster.pod_groups[obj.key] = obj
        elif isinstance(obj, PriorityClass):
            cluster.priority_classes[obj.metadata.name] = obj
        elif isinstance(obj, Queue):
            cluster.queues[obj.metadata.name] = obj
        elif isinstance(obj, Namespace):
            cluster.namespaces[obj.metadata.name] = obj
        elif (table := storage_table(cluster, obj)) is not None or (table := device_table(cluster, obj)) is not None:
            table[object_key(obj)] = obj
        else:
            raise TypeError(f"unsupported object {type(obj).__name__}")
    return cluster


def run(
    *objects: ApiModel,
    config: SchedulerConfiguration | None = None,
    now: datetime = EPOCH,
    all_pending: bool = False,
    preempt: bool = False,
) -> Outcome:
    """`preempt`: act on preemption decisions as `phalanx simulate` does (victims deleted, then the preemptor
    bound); without it, decisions are only reported."""
    scenario = Scenario(cluster_of(list(objects)), config or SchedulerConfiguration(), [])
    result = simulate(scenario, now, all_pending=all_pending, actuator=PreemptionActuator if preempt else None)
    return Outcome(build_report(result), result.cluster.objects())
