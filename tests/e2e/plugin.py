"""`kubectl phalanx`, run the way kubectl runs a plugin: the real kubectl 1.36.2 finds `kubectl-phalanx` on PATH.

Run as the unprivileged `user` by default (bound to the chart's viewer ClusterRole by the stack), so the RBAC
test sees every request the plugin makes in the audit log, under its user agent `kubectl-phalanx/<version>`. The
stack registers the scheduler's explain API, so the answers are the running scheduler's, through kube-apiserver.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from tests.e2e.control_plane import ROOT, ControlPlane, Json
from tests.e2e.objects import Pool
from tests.e2e.stack import Stack
from tests.polling import wait_for

USER_AGENT = "kubectl-phalanx/"
"""How the audit log tells the plugin's requests from the scheduler's and the webhook's (same `user`)."""


def kubectl_phalanx(
    plane: ControlPlane, *args: str, kubeconfig: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """`kubectl phalanx ARGS` with `user`'s kubeconfig (or `kubeconfig`); the completed process."""
    kubectl = Path(plane.env["KUBE_BIN"]) / "kubectl"
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": str(ROOT),
        "KUBECONFIG": str(kubeconfig or plane.user_kubeconfig),
    }
    return subprocess.run(
        [str(kubectl), "phalanx", *args], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120, check=False
    )


def explain(plane: ControlPlane, namespace: str, kind: str, name: str) -> Json:
    """`kubectl phalanx explain KIND NAME -n NAMESPACE -o json`, which must succeed."""
    done = kubectl_phalanx(plane, "explain", kind, name, "-n", namespace, "-o", "json")
    assert done.returncode == 0, f"kubectl phalanx explain {kind} {name}: {done.stderr}"
    document: Json = json.loads(done.stdout)
    return document


def predicted_victims(explanation: Json) -> set[str]:
    """The pod names the decision `explain` printed would preempt (the first decision of the dry run that
    preempted for the unit: now, or when a protection ends)."""
    decision = explanation["decision"]
    if decision is None or decision["outcome"] != "Preempt":
        decision = explanation["forecast"]["preemption"]
    assert decision is not None, f"explain predicts no preemption: {explanation['unblock']}"
    return {pod.split("/", 1)[1] for victim in decision["victims"] for pod in victim["pods"]}


def explained_before_it_acts(stack: Stack, pool: Pool, arrive: Callable[[], object], kind: str, name: str) -> Json:
    """What `explain` predicts before the scheduler can act: the scheduler paused (a replica that waits as a standby
    behind a held Lease, answering the explain API from its informers), the unit created (`arrive`), explained
    through the API server once that replica's cache holds every pod of the pool, then the Lease let go: the same
    replica leads and decides for real."""
    stack.pause()
    arrive()
    want = max(int(p["metadata"]["resourceVersion"]) for p in pool.pods().values())

    def seen() -> Json | None:
        done = kubectl_phalanx(stack.plane, "explain", kind, name, "-n", pool.namespace, "-o", "json")
        if done.returncode != 0:  # not in that replica's cache yet
            return None
        explained: Json = json.loads(done.stdout)
        return explained if int(explained["servedBy"]["resourceVersion"]) >= want else None

    explained: Json = wait_for(seen, timeout=30, interval=0.2, what=f"the explanation to see the pool at {want}")
    assert explained["servedBy"] == {
        "replica": stack.scheduler.name if stack.scheduler else "",
        "leader": False,
        "resourceVersion": explained["servedBy"]["resourceVersion"],
    }, "answered by the paused replica, a standby"
    stack.resume()
    return explained


def preempted(pool: Pool) -> set[str]:
    """The pods the scheduler preempted in the pool: each got a `Preempted` Event naming its preemptor."""
    return {e["regarding"]["name"] for e in pool.events("Preempted")}


def assert_agrees(pool: Pool, explanation: Json) -> set[str]:
    """The victims `explain` predicted are the ones the scheduler preempted (returned)."""
    want = predicted_victims(explanation)
    with contextlib.suppress(AssertionError):  # the comparison below says what was preempted instead
        wait_for(lambda: preempted(pool) >= want, timeout=30, what=f"the predicted victims {sorted(want)} preempted")
    found = preempted(pool)
    assert found == want, f"explain predicted {sorted(want)}, the scheduler preempted {sorted(found)}"
    return want
