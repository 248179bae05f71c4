"""Events in to bindings out: `SchedulerProcess` on the real client against the loopback API server.

1,000 nodes (16 CPU each) are listed at start; then 10,000 pods arrive at once (9,000 lone pods and
125 gated gangs of 8), and we time until the scheduler's own watch has seen every pod bound. The
API server runs in a child process, so it does not share the scheduler's GIL. The loop thread runs
under cProfile, which shows where a pass spends its time (API writes vs. snapshot vs. placement).

CPU seconds over the timed window are printed too (the scheduler process and each of its thread
pools, the API server), as the machine is shared. The scheduler's threads share one GIL: with the default wall-clock
profile, the time the loop waits for the GIL is charged to whatever it was running, mostly numpy calls
that release it (placement's `_rows`, scores, `any`, `argmax`). `--timer cpu` profiles the loop
thread's own CPU time instead (slower: one system call per profiled call).

Run: `PYTHONPATH=. .venv/bin/python bench/kube_events_to_bindings.py [--nodes 1000] [--pods 10000]`.
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import io
import logging
import multiprocessing
import pstats
import re
import tempfile
import threading
import time
from multiprocessing.connection import Connection
from pathlib import Path

import structlog

from kube.client import api_client
from scheduler.api.config import SchedulerConfiguration
from scheduler.cluster.kube import SchedulerProcess
from tests.apiserver import ApiServer
from tests.builders import make_node, make_pod, make_podgroup

GANG = 8
GATE = "scheduling.phalanx.dev/gang"


def serve(conn: Connection, nodes: int, pods: int, kubeconfig: str) -> None:
    """Child process: the API server; creates the pods when told, reports its CPU seconds since then when asked."""
    server = ApiServer(history_limit=1_000_000, bookmark_interval=5.0)
    server.record_requests = False
    server.start()
    for i in range(nodes):
        server.create(make_node(f"node-{i:04d}").cap(cpu="16", memory="64Gi").json())
    server.kubeconfig(kubeconfig)
    conn.send("ready")
    conn.recv()
    cpu = time.process_time()
    gangs = pods // 10 // GANG
    for g in range(gangs):
        server.create(make_podgroup(f"gang-{g}").gang(GANG).json())
        for m in range(GANG):
            server.create(make_pod(f"gang-{g}-{m}").req(cpu="1", memory="1Gi").group(f"gang-{g}").gate(GATE).json())
    for i in range(pods - gangs * GANG):
        server.create(make_pod(f"pod-{i:05d}").req(cpu="1", memory="1Gi").json())
    conn.send("created")
    conn.recv()
    conn.send(time.process_time() - cpu)
    conn.recv()
    server.stop()


def thread_cpu() -> dict[int, tuple[str, float]]:
    """CPU seconds of each live thread of this process by ident, with its name (pool suffix dropped)."""
    found: dict[int, tuple[str, float]] = {}
    for thread in threading.enumerate():
        if thread.ident is None:
            continue
        try:
            seconds = time.clock_gettime(time.pthread_getcpuclockid(thread.ident))
        except OSError:  # ended meanwhile
            continue
        found[thread.ident] = (re.sub(r"_\d+$", "", thread.name), seconds)
    return found


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--top", type=int, default=18, help="profile lines to print")
    parser.add_argument("--sort", default="tottime", help="profile order: tottime or cumulative")
    parser.add_argument("--timer", choices=("wall", "cpu"), default="wall", help="profile the loop's wall or CPU time")
    args = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    kubeconfig = str(Path(tempfile.mkdtemp()) / "kubeconfig")
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    server = ctx.Process(target=serve, args=(child, args.nodes, args.pods, kubeconfig), daemon=True)
    server.start()
    assert parent.recv() == "ready"

    process = SchedulerProcess(api_client(kubeconfig, "scheduler"), SchedulerConfiguration(), identity="bench")
    stop = threading.Event()
    profile = cProfile.Profile(time.thread_time) if args.timer == "cpu" else cProfile.Profile()

    def run() -> None:
        profile.enable()
        process.run(stop)
        profile.disable()

    thread = threading.Thread(target=run, daemon=True, name="loop")
    thread.start()
    while not all(i.synced.is_set() for i in process.cluster.informers):
        time.sleep(0.05)

    started, cpu, threads = time.perf_counter(), time.process_time(), thread_cpu()
    parent.send("create")
    created_at: float | None = None
    seen_all_at: float | None = None
    unbound: set[str] | None = None  # once all are seen, only these are looked at: polling shares the GIL too
    while True:
        if created_at is None and parent.poll():
            parent.recv()
            created_at = time.perf_counter()
        pods = process.cluster.pods.items()
        if unbound is None and len(pods) >= args.pods:
            seen_all_at, unbound = time.perf_counter(), set(pods)
        if unbound is not None:
            unbound = {key for key in unbound if not pods[key].spec.node_name}
            if not unbound:
                break
        time.sleep(0.05)
    elapsed = time.perf_counter() - started
    cpu, before, threads = time.process_time() - cpu, threads, collections.Counter()
    for ident, (name, seconds) in thread_cpu().items():
        threads[name] += seconds - before.get(ident, (name, 0.0))[1]
    if created_at is None:
        parent.recv()
    parent.send("cpu")
    server_cpu = parent.recv()
    stop.set()
    thread.join(timeout=30)
    parent.send("done")

    registry = process.metrics.registry
    passes = registry.get_sample_value(
        "phalanx_scheduler_scheduling_attempt_duration_seconds_count", {"result": "success"}
    )
    pass_seconds = registry.get_sample_value(
        "phalanx_scheduler_scheduling_attempt_duration_seconds_sum", {"result": "success"}
    )
    binds = registry.get_sample_value(
        "phalanx_scheduler_api_requests_total", {"operation": "bind", "result": "success"}
    )
    gates = registry.get_sample_value(
        "phalanx_scheduler_api_requests_total", {"operation": "remove_gate", "result": "success"}
    )
    print(f"nodes={args.nodes} pods={args.pods}")
    print(f"pods created by the server in {(created_at or started) - started:.2f} s (in the child process)")
    print(f"all pods seen by the scheduler's watch after {(seen_all_at or started) - started:.2f} s")
    print(f"all pods bound (seen via watch) after {elapsed:.2f} s: {args.pods / elapsed:.0f} pods/s")
    print(f"passes={passes:.0f} time in passes={pass_seconds:.2f} s bindings={binds:.0f} gate removals={gates:.0f}")
    per_pod = 1000 * cpu / args.pods
    print(
        f"CPU until all bound: scheduler process {cpu:.2f} s ({per_pod:.2f} ms per pod), API server {server_cpu:.2f} s"
    )
    print(
        "  by thread:", ", ".join(f"{name} {seconds:.2f}" for name, seconds in threads.most_common() if seconds >= 0.01)
    )
    out = io.StringIO()
    stats = pstats.Stats(profile, stream=out).sort_stats(args.sort)
    stats.print_stats(args.top)
    print("\n".join(line for line in out.getvalue().splitlines() if line.strip())[:6000])


if __name__ == "__main__":
    main()
