"""The same 64-pod-gang decision as `preemption_decision.py`, through the PostFilter plugin.

Measures what the scheduler pays per preemption attempt on a real Snapshot: building the victim
units and columnar search input from the running pods, static masks, victim filters (toleration,
min-runtime) and the search. "cold" is a fresh plugin, which builds the running-pod columns from every
PodInfo; "next" is the plugin kept from the attempt before on the next snapshot (built with the same
cache, as the runner builds it) after `--changed` pods were replaced, so the columns are updated by
difference; "warm" is the next attempt on the same snapshot. Times in ms; "cpu" is the process's CPU
time, which other load on the machine inflates far less than wall time.
Run: `.venv/bin/python bench/preemption_plugin.py [--repeat 5] [--nodes 500 1000 5000 10000]`.

`--constraints` gives 30% of the running pods a role in the gang's placement, as a platform's services would:
on every node one pod is a service the members' required anti-affinity (hostname) excludes, and two hold a
required anti-affinity against the gang's pods; the members also repel each other on hostname and ask for a
host port. So the decision must clear those three pods on each node it uses, put one member a node, and still
take only the lowest class (5 victims a node).
"""

from __future__ import annotations

import argparse
import logging
import statistics
import time
from datetime import UTC, datetime

import structlog

from scheduler.api.config import SchedulerConfiguration
from scheduler.api.node import Node
from scheduler.api.pod import Pod
from scheduler.api.pod_group import PodGroup
from scheduler.api.priority_class import PriorityClass
from scheduler.framework.cluster import ClusterObjects
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import PostFilterPlugin
from scheduler.framework.pod_info import SchedulingUnit
from scheduler.framework.snapshot_builder import PodInfoCache, build_snapshot
from scheduler.plugins import default_profile

NOW = datetime(2026, 1, 1, 1, tzinfo=UTC)
LEVELS = 10
PODS_PER_NODE = 10
GANG = 64


HOSTNAME = "kubernetes.io/hostname"


def anti(**labels: str) -> dict[str, object]:
    """A required anti-affinity against pods with `labels`, per node."""
    term = {"labelSelector": {"matchLabels": labels}, "topologyKey": HOSTNAME}
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}


def objects(nodes: int, constraints: bool = False) -> ClusterObjects:
    """Full 32-CPU nodes, 10 pods each; node i's pods are of class i % 10 (as the decision bench)."""
    out = ClusterObjects()
    for level in range(LEVELS):
        name = f"c{level}"
        out.priority_classes[name] = PriorityClass.model_validate({"metadata": {"name": name}, "value": 1000 * level})
    out.priority_classes["train"] = PriorityClass.model_validate({"metadata": {"name": "train"}, "value": 1_000_000})
    for i in range(nodes):
        node = f"node-{i:05d}"
        out.nodes[node] = Node.model_validate(
            {
                "metadata": {"name": node, "labels": {HOSTNAME: node}},
                "status": {"allocatable": {"cpu": "32", "memory": "40Gi", "pods": "110"}},
            }
        )
        for j in range(PODS_PER_NODE):
            spec: dict[str, object] = {
                "nodeName": node,
                "priorityClassName": f"c{i % LEVELS}",
                "containers": [{"name": "m", "resources": {"requests": {"cpu": "3200m", "memory": "4Gi"}}}],
            }
            labels = {"app": "service" if constraints and j == 0 else "batch"}
            if constraints and j in (1, 2):
                spec["affinity"] = anti(app="gang")
            pod = Pod.model_validate(
                {
                    "metadata": {"name": f"p-{i}-{j}", "namespace": "bench", "labels": labels},
                    "spec": spec,
                    "status": {"phase": "Running", "startTime": "2026-01-01T00:00:00Z"},
                }
            )
            out.pods[pod.key] = pod
    group = {"schedulingPolicy": {"gang": {"minCount": GANG}}, "priorityClassName": "train"}
    out.pod_groups["bench/gang"] = PodGroup.model_validate(
        {"metadata": {"name": "gang", "namespace": "bench"}, "spec": group}
    )
    for m in range(GANG):
        container: dict[str, object] = {"name": "m", "resources": {"requests": {"cpu": "16", "memory": "20Gi"}}}
        member: dict[str, object] = {"priorityClassName": "train", "containers": [container]}
        if constraints:
            container["ports"] = [{"containerPort": 7000, "hostPort": 7000}]
            terms = [anti(app="service")["podAntiAffinity"], anti(app="gang")["podAntiAffinity"]]
            required = [t for rules in terms for t in rules["requiredDuringSchedulingIgnoredDuringExecution"]]
            member["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}}
        pod = Pod.model_validate(
            {
                "metadata": {
                    "name": f"gang-{m}",
                    "namespace": "bench",
                    "labels": {"scheduling.phalanx.dev/pod-group": "gang", "app": "gang"},
                },
                "spec": member,
            }
        )
        out.pods[pod.key] = pod
    return out


def measure(
    nodes: int, repeat: int, changed: int, constraints: bool = False
) -> tuple[dict[str, list[float]], dict[str, list[float]], int]:
    """Wall and CPU seconds of each kind of attempt ("cold", "next", "warm"), and the victims of the last."""
    config = SchedulerConfiguration.model_validate({})
    cluster = objects(nodes, constraints)
    cache = PodInfoCache()
    snapshot = build_snapshot(cluster, NOW, config, cache)
    wall: dict[str, list[float]] = {"cold": [], "next": [], "warm": []}
    cpu: dict[str, list[float]] = {"cold": [], "next": [], "warm": []}
    victims = 0
    step = 0

    def attempt(kind: str, plugin: PostFilterPlugin) -> None:
        nonlocal victims
        members = sorted((i for i in snapshot.pods.values() if i.group_key == "bench/gang"), key=lambda i: i.key)
        group = snapshot.groups["bench/gang"]
        unit = SchedulingUnit(tuple(members), group, GANG, members[0].priority, "PreemptLowerPriority")
        start, start_cpu = time.perf_counter(), time.process_time()
        result = plugin.post_filter(CycleState(), unit, snapshot, {})
        wall[kind].append(time.perf_counter() - start)
        cpu[kind].append(time.process_time() - start_cpu)
        victims = len(result.victims)

    for _ in range(repeat):
        plugin = default_profile(config).post_filters[0]
        attempt("cold", plugin)
        for _ in range(changed):  # a pod replaced by its next version, on a node the decision does not use
            key = f"bench/p-{nodes - 1 - step % nodes}-{step % PODS_PER_NODE}"
            cluster.pods[key] = cluster.pods[key].model_copy(update={"metadata": cluster.pods[key].metadata})
            step += 1
        snapshot = build_snapshot(cluster, NOW, config, cache)
        attempt("next", plugin)
        attempt("warm", plugin)
    return wall, cpu, victims


def percentiles(times: list[float]) -> tuple[float, float]:
    times = sorted(times)
    return statistics.median(times) * 1000, times[round(0.95 * (len(times) - 1))] * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--nodes", type=int, nargs="*", default=[500, 1000, 5000])
    parser.add_argument("--changed", type=int, default=10, help="pods replaced between snapshots ('next')")
    parser.add_argument("--constraints", action="store_true", help="anti-affinity and host ports in the way")
    args = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    kinds = ("cold", "next", "warm")
    header = ["nodes", "pods", "victims", *(f"{k} {h}" for k in kinds for h in ("p50", "p95", "cpu"))]
    print(" ".join(f"{h:>9}" for h in header))
    for nodes in args.nodes:
        wall, cpu, victims = measure(nodes, args.repeat, args.changed, args.constraints)
        cells = [c for k in kinds for c in (*percentiles(wall[k]), statistics.median(cpu[k]) * 1000)]
        print(f"{nodes:>9} {nodes * PODS_PER_NODE:>9} {victims:>9} " + " ".join(f"{c:>9.1f}" for c in cells))


if __name__ == "__main__":
    main()
