"""Scheduling throughput: pods placed per second by one `schedule_pending` pass on the memory cluster.

The issue-2 scenario: 5,000 nodes, 50,000 pending pods (a handful of Deployment-like shapes, some
with node selectors and tolerations) plus 200 gangs of 16 GPU pods, all placed in one pass, timed
end to end (snapshot build, PreEnqueue, filter, score, bind through the Cluster API). Then the
same load scaled with the node count from 500 to 10,000 nodes (10 pending pods per node).

    .venv/bin/python bench/scheduling_throughput.py            # headline + curve
    .venv/bin/python bench/scheduling_throughput.py --quick    # headline only
    .venv/bin/python bench/scheduling_throughput.py --steady 10000
    .venv/bin/python bench/scheduling_throughput.py --steady 10000 --per-pass 20
    .venv/bin/python bench/scheduling_throughput.py --steady 1000 --backlog 10000:1000
    .venv/bin/python bench/scheduling_throughput.py --steady 10000 --per-pass 20 --node-churn 5
    .venv/bin/python bench/scheduling_throughput.py --drain 10000:100000 --per-pass 500

`--steady NODES`: the fixed cost of a pass once NODES nodes run 10 pods each. After the pass that binds them
all, each pass has one new pod to place: its CPU time is what every pass pays for the cluster's size (the
snapshot, the queue's hints, the plugins' caches), the cost a real cluster's event-driven passes repeat.
The clock moves 0.1 s between passes (`PASS_INTERVAL`), so backoffs and timers end as on a real cluster.
The memory cluster numbers its pod writes (`ClusterObjects.pod_feed`), as the kube back end's informer does.

`--per-pass N`: N new pods each pass instead of one, as a real stream's passes find several (20-60 in the
`stream` workload of `bench/real_apiserver.py`).

`--steady NODES --backlog PODS:GANGS`: the same with a backlog that never fits pending beside the running pods,
as the `backlog` workload of `bench/real_apiserver.py` has it (PODS pods of 100 CPU, GANGS gangs of minCount 4
with 2 members), each pass placing `--per-pass` new pods (20 unless given): what the pending pods cost a pass
that cannot help them (issue 23, target 4), beside the same passes without them.

`--drain NODES:PODS`: a backlog of PODS pods of 100m, all pending before the first pass, decided in one pass and
then in passes of `--per-pass` Bindings each (500 unless given), as backpressure paces the kube back end's passes
(`scheduler/cluster/kube/backpressure.py`): what a backlog costs a pod when a pass may not decide it all at once.

`--node-churn N`: N Node objects replaced (same content, new objects) before each pass, as a real cluster's
kubelets report Node status: ~33 Nodes a second at 10,000 nodes, each every 5 minutes when nothing changes.
"""

from __future__ import annotations

import argparse
import gc
import logging
import time
from datetime import UTC, datetime, timedelta

import structlog

from scheduler.api.config import SchedulerConfiguration
from scheduler.api.node import Node
from scheduler.api.pod import POD_GROUP_LABEL, Pod
from scheduler.api.pod_group import PodGroup
from scheduler.cluster.memory import MemoryCluster
from scheduler.framework.cluster import ClusterObjects
from scheduler.framework.runner import Scheduler
from scheduler.plugins import default_profile

NOW = datetime(2026, 1, 1, tzinfo=UTC)
SHAPES = [("500m", "1Gi"), ("1", "2Gi"), ("2", "4Gi"), ("250m", "512Mi"), ("1500m", "3Gi")]


def cluster(nodes: int, pods: int, gangs: int, gang_size: int) -> ClusterObjects:
    objects = ClusterObjects()
    gpu_nodes = max(1, gangs * gang_size * 2 // 8 * 5 // 4)
    for i in range(nodes):
        allocatable = {"cpu": "32", "memory": "128Gi", "pods": "110"}
        labels = {"kubernetes.io/hostname": f"node-{i}", "zone": f"z{i % 3}"}
        taints = []
        if i < gpu_nodes:
            allocatable["nvidia.com/gpu"] = "8"
            labels["pool"] = "gpu"
            taints = [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]
        objects.nodes[f"node-{i}"] = Node.model_validate(
            {
                "metadata": {"name": f"node-{i}", "labels": labels},
                "spec": {"taints": taints},
                "status": {"allocatable": allocatable},
            }
        )
    for i in range(pods):
        cpu, memory = SHAPES[i % len(SHAPES)]
        spec: dict[str, object] = {
            "schedulerName": "phalanx-scheduler",
            "containers": [{"name": "app", "resources": {"requests": {"cpu": cpu, "memory": memory}}}],
        }
        if i % 10 == 0:
            spec["nodeSelector"] = {"zone": f"z{i % 3}"}
        name = f"web-{i}"
        objects.pods[f"default/{name}"] = Pod.model_validate(
            {"metadata": {"name": name, "namespace": "default", "uid": name, "creationTimestamp": NOW}, "spec": spec}
        )
    for g in range(gangs):
        group = f"train-{g}"
        objects.pod_groups[f"ml/{group}"] = PodGroup.model_validate(
            {
                "metadata": {"name": group, "namespace": "ml"},
                "spec": {"schedulingPolicy": {"gang": {"minCount": gang_size}}, "priority": 1000},
            }
        )
        for m in range(gang_size):
            name = f"{group}-{m}"
            objects.pods[f"ml/{name}"] = Pod.model_validate(
                {
                    "metadata": {
                        "name": name,
                        "namespace": "ml",
                        "uid": name,
                        "creationTimestamp": NOW,
                        "labels": {POD_GROUP_LABEL: group},
                    },
                    "spec": {
                        "schedulerName": "phalanx-scheduler",
                        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                        "containers": [
                            {
                                "name": "w",
                                "resources": {"requests": {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "2"}},
                            }
                        ],
                    },
                }
            )
    return objects


def measure(nodes: int, pods: int, gangs: int, gang_size: int = 16) -> tuple[int, int, float, float]:
    """(pods pending, pods bound, wall seconds, CPU seconds) for one pass.

    CPU seconds are reported too because the reference machine is shared: wall time includes
    whatever else runs, CPU time is what the pass itself cost.
    """
    objects = cluster(nodes, pods, gangs, gang_size)
    pending = len(objects.pods)
    memory = MemoryCluster(objects, NOW)
    config = SchedulerConfiguration()
    scheduler = Scheduler(memory, config, default_profile(config))
    gc.collect()
    gc.freeze()  # as `phalanx simulate` does once the scenario is loaded
    started, cpu = time.perf_counter(), time.process_time()
    report = scheduler.schedule_pending()
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    gc.unfreeze()
    return pending, len(report.bindings), elapsed, cpu


def plain_pod(name: str, cpu: str = "100m", group: str | None = None) -> Pod:
    """One container asking only for `cpu`; a member of PodGroup `group` when given (by our label)."""
    labels = {POD_GROUP_LABEL: group} if group else {}
    return Pod.model_validate(
        {
            "metadata": {"name": name, "namespace": "default", "uid": name, "creationTimestamp": NOW, "labels": labels},
            "spec": {
                "schedulerName": "phalanx-scheduler",
                "containers": [{"name": "app", "resources": {"requests": {"cpu": cpu}}}],
            },
        }
    )


def backlog(objects: ClusterObjects, pods: int, gangs: int) -> None:
    """Pods that fit no node (100 CPU), and gangs that wait for members that never come (minCount 4, 2 members)."""
    for i in range(pods):
        objects.pods[f"default/big-{i}"] = plain_pod(f"big-{i}", cpu="100")
    for g in range(gangs):
        name = f"waiting-{g}"
        objects.pod_groups[f"default/{name}"] = PodGroup.model_validate(
            {
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"schedulingPolicy": {"gang": {"minCount": 4}}},
            }
        )
        for m in range(2):
            objects.pods[f"default/{name}-{m}"] = plain_pod(f"{name}-{m}", group=name)


BACKLOG_PASSES = 300
"""`--backlog`: passes measured, 30 s on the clock: the parked units' old-rule counts come due several times."""
PASS_INTERVAL = timedelta(seconds=0.1)
"""`--steady`: the clock between two passes, as a real stream's ~10 passes a second: backoffs end, and the
parked units' timers come due, as they do there."""


def steady(
    nodes: int, passes: int = 20, per_pass: int = 1, pending: tuple[int, int] = (0, 0), node_churn: int = 0
) -> float:
    """CPU milliseconds of a pass that places `per_pass` new pods, `nodes` nodes running 10 pods each and the
    `pending` backlog (pods, gangs) parked, after `node_churn` Nodes were replaced."""
    objects = cluster(nodes, nodes * 10, 0, 16)
    backlog(objects, *pending)
    memory = MemoryCluster(objects, NOW)
    config = SchedulerConfiguration()
    scheduler = Scheduler(memory, config, default_profile(config))
    scheduler.schedule_pending()
    gc.collect()
    gc.freeze()
    spent = 0.0
    names = sorted(objects.nodes)
    for i in range(passes + 3):
        memory.advance(memory.now() + PASS_INTERVAL)
        for j in range(per_pass):
            memory.create(plain_pod(f"late-{i}-{j}"))
        for k in range(node_churn):
            name = names[(i * node_churn + k) % len(names)]
            objects.nodes[name] = objects.nodes[name].model_copy()
        cpu = time.process_time()
        scheduler.schedule_pending()
        if i >= 3:  # the first passes after the big one warm the caches
            spent += time.process_time() - cpu
    gc.unfreeze()
    return 1000 * spent / passes


class PacedCluster(MemoryCluster):
    """The memory back end as a backed-up kube back end paces a pass: `writes_backed_up` once `per_pass` Bindings
    were made since `next_pass()` (the kube back end's bound is a few seconds of the API server's write rate)."""

    def __init__(self, objects: ClusterObjects, now: datetime, per_pass: int) -> None:
        super().__init__(objects, now)
        self.per_pass = per_pass
        self.made = 0

    def next_pass(self) -> None:
        self.made = 0

    def bind(self, pod: Pod, node_name: str, unit: str | None = None) -> None:
        super().bind(pod, node_name, unit)
        self.made += 1

    def writes_backed_up(self) -> bool:
        return self.made >= self.per_pass


def drain(nodes: int, pods: int, per_pass: int | None) -> tuple[int, float, float]:
    """A backlog of `pods` pods of 100m on `nodes` nodes, all pending before the first pass, bound `per_pass` a
    pass (None: in one pass): (passes, CPU ms a pod, the largest pass's CPU ms)."""
    objects = cluster(nodes, 0, 0, 16)
    for i in range(pods):
        objects.pods[f"default/drain-{i}"] = plain_pod(f"drain-{i}")
    memory = PacedCluster(objects, NOW, per_pass or pods + 1)
    config = SchedulerConfiguration()
    scheduler = Scheduler(memory, config, default_profile(config))
    gc.collect()
    gc.freeze()
    spent, largest, passes, bound = 0.0, 0.0, 0, 0
    while bound < pods:
        memory.next_pass()
        cpu = time.process_time()
        report = scheduler.schedule_pending()
        took = time.process_time() - cpu
        spent, largest, passes = spent + took, max(largest, took), passes + 1
        bound += len(report.bindings)
        if not report.bindings:
            raise RuntimeError(f"a pass bound nothing with {pods - bound} pods left")
    gc.unfreeze()
    return passes, 1000 * spent / pods, 1000 * largest


def positive(text: str) -> int:
    """A whole number of at least 1."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {text!r}")
    return int(text)


def backlog_size(text: str) -> tuple[int, int]:
    """`PODS:GANGS`, both whole numbers of at least 0."""
    pods, sep, gangs = text.partition(":")
    if not sep or not pods.isdigit() or not gangs.isdigit():
        raise argparse.ArgumentTypeError(f"expected PODS:GANGS, two whole numbers (e.g. 10000:1000), got {text!r}")
    return int(pods), int(gangs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="only the 5,000-node headline")
    parser.add_argument("--steady", type=int, metavar="NODES", help="the CPU of a steady pass at NODES nodes")
    parser.add_argument("--per-pass", type=positive, metavar="N", help="with --steady: N new pods each pass")
    parser.add_argument(
        "--node-churn", type=positive, metavar="N", help="with --steady: N Node objects replaced before each pass"
    )
    parser.add_argument(
        "--backlog", type=backlog_size, metavar="PODS:GANGS", help="with --steady: the passes beside this backlog"
    )
    parser.add_argument(
        "--drain",
        type=backlog_size,
        metavar="NODES:PODS",
        help="a backlog of PODS pods drained in one pass, and in passes of --per-pass (default 500) Bindings",
    )
    args = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    if args.drain:
        nodes, pods = args.drain
        per_pass = args.per_pass or 500
        print(f"| {nodes:,} nodes, {pods:,} pods pending | passes | CPU ms a pod | largest pass ms |")
        for label, limit in (("one pass", None), (f"{per_pass} Bindings a pass", per_pass)):
            passes, per_pod, largest = drain(nodes, pods, limit)
            print(f"| {label} | {passes} | {per_pod:.3f} | {largest:.0f} |", flush=True)
        return
    if (args.backlog or args.per_pass or args.node_churn) and not args.steady:
        parser.error("--backlog, --per-pass and --node-churn need --steady NODES")
    if args.steady:
        nodes, per_pass = args.steady, args.per_pass or (20 if args.backlog else 1)
        size = f"{nodes:,} nodes, {nodes * 10:,} pods: a {per_pass}-pod pass costs"
        if args.backlog:
            pods, gangs = args.backlog
            bare = steady(nodes, passes=BACKLOG_PASSES, per_pass=per_pass)
            full = steady(nodes, passes=BACKLOG_PASSES, per_pass=per_pass, pending=args.backlog)
            print(f"{size} {bare:.1f} ms CPU alone,")
            backlog_note = f"{pods:,} pods that fit nowhere and {gangs:,} waiting gangs pending"
            print(f"{full:.1f} ms with {backlog_note} ({full / bare:.2f}x)")
            return
        bare = steady(nodes, per_pass=per_pass)
        if args.node_churn:
            churned = steady(nodes, per_pass=per_pass, node_churn=args.node_churn)
            print(f"{size} {bare:.1f} ms CPU, {churned:.1f} ms with {args.node_churn} Nodes replaced before each")
            return
        print(f"{size} {bare:.1f} ms CPU")
        return
    print("| nodes | pending pods | bound | wall s | pods/s (wall) | CPU s | pods/s (CPU) |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    runs = [(5_000, 50_000, 200)]
    if not args.quick:
        runs += [(nodes, nodes * 10, nodes // 25) for nodes in (500, 1_000, 2_000, 5_000, 10_000)]
    for nodes, pods, gangs in runs:
        pending, bound, wall, cpu = measure(nodes, pods, gangs)
        rates = f"{wall:.1f} | {bound / wall:,.0f} | {cpu:.1f} | {bound / cpu:,.0f}"
        print(f"| {nodes:,} | {pending:,} | {bound:,} | {rates} |", flush=True)


if __name__ == "__main__":
    main()
