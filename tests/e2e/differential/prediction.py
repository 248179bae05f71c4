"""What `phalanx simulate` predicts for a live run: the pool dumped just before the preemptor came, plus it.

The dump is what README's what-if recipe reads from a cluster (nodes, pods, PriorityClasses,
PodDisruptionBudgets, our PodGroups and Queues, as stored, `resourceVersion` and status included); the
preemptor is the same manifests the live run created, which simulate admits as the webhook did; the
SchedulerConfiguration is the live scheduler's. The simulator starts at the moment the preemptor was
created and runs one virtual minute: every protection in the scenarios is either over long before or
holds for much longer, so the few seconds a live run takes cannot change what it may preempt.

Simulate sees the whole preemptor arrive at once; so does the live scheduler (`hand_over`). Should
that ever fail, `arrivals` reads in the scheduler's log how many passes lifted our gate from the
members, and the failure says so: a race of the harness, not a wrong prediction.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from tests.e2e.control_plane import ROOT, Json
from tests.e2e.differential.live import Run, rfc3339
from tests.e2e.differential.ranking import Outcome
from tests.e2e.objects import PHALANX
from tests.e2e.stack import Process

ARRIVALS = ("gate removed", "pass done")

LISTED = (("v1", "Pod", "/api/v1"), ("policy/v1", "PodDisruptionBudget", "/apis/policy/v1"))


def dump(run: Run) -> list[Json]:
    """The run's cluster as stored: its nodes, namespace objects, the classes and queues it uses."""
    api, pool = run.pool.api, run.pool
    docs: list[Json] = [api.get(f"/api/v1/nodes/{node}") or {} for node in pool.nodes]
    for api_version, kind, prefix in (*LISTED, (PHALANX, "PodGroup", f"/apis/{PHALANX}")):
        plural = kind.lower() + "s"
        for item in api.items(f"{prefix}/namespaces/{pool.namespace}/{plural}"):
            docs.append({"apiVersion": api_version, "kind": kind, **item})
    for name in run.classes.made.values():
        docs.append(api.get(f"/apis/scheduling.k8s.io/v1/priorityclasses/{name}") or {})
    for queue in run.scenario.queues:
        docs.append(api.get(f"/apis/{PHALANX}/queues/{run.queue(queue.name)}") or {})
    return [doc for doc in docs if doc]


def predict(run: Run, before: list[Json], config: Json, work: Path) -> tuple[Outcome, Any]:
    """Simulate `before` plus the run's preemptor from its start; the outcome and the whole JSON report."""
    assert run.started is not None
    path = work / f"{run.pool.name}.yaml"
    path.write_text(yaml.safe_dump_all([*before, *run.preemptor_docs, config]))
    command = [sys.executable, "-m", "phalanx.cli", "simulate", str(path), "--now", rfc3339(run.started)]
    done = subprocess.run(
        [*command, "--until", "1m", "-o", "json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0, f"phalanx simulate {path}: {done.stderr[-3000:]}"
    report = json.loads(done.stdout)
    names = set(run.scenario.preemptor.names)
    index = {node: i for i, node in enumerate(run.pool.nodes)}
    bound = {}
    for binding in report["bindings"]:
        name = binding["pod"].split("/", 1)[1]
        if name in names:
            bound[name] = index[binding["node"]]
    preempted = frozenset(p["victim"].split("/", 1)[1] for p in report["preemptions"])
    return Outcome(bound, preempted), report


def arrivals(scheduler: Process | None, run: Run) -> int:
    """In how many passes the live scheduler lifted our gate from the run's preemptor group (1: all at once)."""
    group = f"{run.pool.namespace}/preemptor"
    done, passes = 0, set()
    for entry in scheduler.records(*ARRIVALS) if scheduler is not None else []:
        if entry["event"] == "pass done":
            done += 1
        elif entry.get("group") == group:
            passes.add(done)
    return len(passes)
