"""What one API write costs the process that sends it, through the scheduler's own transport (issue 23).

Every pod a scheduler places costs it at least a Binding and a `Scheduled` Event. This times those two writes
(and the pod creation before them) on the real API server of `../shared/kube`, sent through `kube.transport`
exactly as the scheduler's write workers send them: the same client settings (`kube.client.api_client`), the
same pool, orjson, TLS. CPU is this process's (user + system) over the sends, so the figure is the floor a
Python scheduler pays a pod before any scheduling, to set against a target of CPU a pod.

Run: `.venv/bin/python bench/request_cost.py [--count 3000] [--threads 1,16]` (~1 min).
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import shutil
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kube.client import api_client
from kube.routes import CoreV1Api, EventsV1Api, Route
from kube.transport import Transport

KUBE = Path(__file__).resolve().parents[2] / "shared" / "kube"
NAMESPACE = "default"


class BenchCoreV1Api:
    """The route of the bench's own write, a pod create, which the scheduler never sends (`kube.routes` has the
    scheduler's)."""

    create_namespaced_pod = Route()


def event(name: str) -> dict[str, Any]:
    """A `Scheduled` Event as the scheduler writes it (`EventCall.of`)."""
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": f"{name}.{uuid.uuid4().hex[:16]}", "namespace": NAMESPACE},
        "eventTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "reportingController": "phalanx.dev/scheduler",
        "reportingInstance": "request-cost",
        "action": "Binding",
        "reason": "Scheduled",
        "note": f"Successfully assigned {NAMESPACE}/{name} to node-0",
        "type": "Normal",
        "regarding": {"apiVersion": "v1", "kind": "Pod", "name": name, "namespace": NAMESPACE},
    }


def pod(name: str) -> dict[str, Any]:
    container = {"name": "c", "image": "pause", "resources": {"requests": {"cpu": "1m", "memory": "1Mi"}}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": {"containers": [container]}}


def binding(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": name},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "node-0"},
    }


def timed(send: Callable[[int], None], first: int, count: int, threads: int) -> tuple[float, float]:
    """Writes a second and CPU milliseconds a write, `count` writes from `threads` threads."""
    todo: queue.SimpleQueue[int] = queue.SimpleQueue()
    for i in range(first, first + count):
        todo.put(i)

    def work() -> None:
        while True:
            try:
                send(todo.get_nowait())
            except queue.Empty:
                return

    workers = [threading.Thread(target=work) for _ in range(threads)]
    cpu, wall = time.process_time(), time.perf_counter()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return count / wall, 1000 * cpu / count


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=3000, help="writes of each kind at each thread count")
    parser.add_argument("--threads", default="1,16", help="thread counts, comma-separated")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="phalanx-request-cost-"))
    env = {**os.environ, "KUBE_CONTROLLER_MANAGER": "0", "KUBE_SCHEDULER": "0", "KUBE_OWNER_PID": str(os.getpid())}
    subprocess.run([str(KUBE / "up.sh"), str(folder)], check=True, env=env, capture_output=True)
    try:
        settings = json.loads((folder / "env.json").read_text())
        subprocess.run(
            ["python3", str(KUBE / "nodes.py"), str(folder), "--count", "1", "--cpu", "100000", "--pods", "1000000"],
            check=True,
            capture_output=True,
        )
        wire = Transport(api_client(settings["KUBECONFIG"], "scheduler"), 30)
        pods = f"/api/v1/namespaces/{NAMESPACE}/pods"
        writes: dict[str, Callable[[int], None]] = {
            "pod create": lambda i: wire.request(BenchCoreV1Api.create_namespaced_pod, pods, pod(f"p{i}")),
            "Binding": lambda i: wire.request(
                CoreV1Api.create_namespaced_pod_binding, f"{pods}/p{i}/binding", binding(f"p{i}")
            ),
            "Event": lambda i: wire.request(
                EventsV1Api.create_namespaced_event,
                f"/apis/events.k8s.io/v1/namespaces/{NAMESPACE}/events",
                event(f"p{i}"),
            ),
        }
        for send in writes.values():  # warm the pool and the server
            timed(send, 10**7, 100, 1)
        print("| write | threads | writes/s | this process's CPU a write |")
        print("|---|---:|---:|---:|")
        first = 0
        for threads in (int(t) for t in args.threads.split(",")):
            for kind, send in writes.items():
                rate, cpu = timed(send, first, args.count, threads)
                print(f"| {kind} | {threads} | {rate:,.0f} | {cpu:.3f} ms |", flush=True)
            first += args.count
    finally:
        subprocess.run([str(KUBE / "down.sh"), str(folder)], check=False, capture_output=True)
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
