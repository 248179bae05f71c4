"""Victims protect themselves on the real API server: preemption toleration and min-runtime, on the wall clock.

Each protection is short (seconds), so a test sees the preemptor wait with a message that names the
protection, then preempt once it has run out. While it waits, `kubectl phalanx explain` must name the same
victims the scheduler then preempts, and the moment it prints the unit bound must be when it is bound (±5 s).
"""

from __future__ import annotations

import re
import subprocess
import urllib.request
from datetime import UTC, datetime
from pathlib import Path

from tests.e2e.control_plane import Json
from tests.e2e.objects import PHALANX, Pool
from tests.e2e.plugin import assert_agrees, explain, kubectl_phalanx
from tests.e2e.stack import Stack
from tests.polling import wait_for

AGREEMENT_SECONDS = 5.0
"""How far the bound time `explain` prints may be from when the unit is bound (issue 22)."""

TOLERATION = "preemption-toleration.scheduling.sigs.k8s.io"


def bound_at(pool: Pool, name: str) -> datetime:
    """When the pod was bound: its PodScheduled=True transition, which the Binding sets."""
    pod = pool.read_pod(name) or {}
    scheduled = next(c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled" and c["status"] == "True")
    return datetime.fromisoformat(scheduled["lastTransitionTime"].replace("Z", "+00:00"))


def predicted_at(explained: Json) -> datetime:
    at = explained["unblock"][0]["at"]
    assert at is not None, explained["unblock"]
    return datetime.fromisoformat(at.replace("Z", "+00:00"))


def pending_message(pool: Pool, name: str) -> str:
    pod = pool.read_pod(name) or {}
    condition = next((c for c in pod.get("status", {}).get("conditions", []) if c["type"] == "PodScheduled"), {})
    return str(condition.get("message", "")) if condition.get("reason") == "Unschedulable" else ""


def test_toleration_spares_the_victim_until_it_expires(phalanx: Stack, pool: Pool) -> None:
    (node,) = pool.add_nodes(1, cpu="4")
    tolerant = pool.priority_class(
        "tolerant",
        10,
        annotations={f"{TOLERATION}/minimum-preemptable-priority": "1000", f"{TOLERATION}/toleration-seconds": "6"},
    )
    pool.create(pool.pod("batch", cpu="4", priority_class=tolerant, node=node, grace=0))
    # The toleration counts from PodScheduled=True, which the kubelet-less server leaves to us.
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    scheduled = {"type": "PodScheduled", "status": "True", "lastTransitionTime": now}
    reply = pool.api.patch(
        f"/api/v1/namespaces/{pool.namespace}/pods/batch/status",
        {"status": {"conditions": [scheduled]}},
        "application/strategic-merge-patch+json",
    )
    assert reply.status == 200, reply.message
    high = pool.priority_class("high", 100)
    pool.create(pool.pod("urgent", cpu="4", priority_class=high))

    message = wait_for(lambda: pending_message(pool, "urgent"), what="urgent pending with a reason")
    assert "PreemptionToleration" in message or "tolerat" in message, message
    assert pool.bound(["batch"]) == {"batch": node}
    explained = explain(phalanx.plane, pool.namespace, "pod", "urgent")
    text = kubectl_phalanx(phalanx.plane, "explain", "pod", "urgent", "-n", pool.namespace).stdout
    assert f"  - when {pool.namespace}/batch's toleration ends at " in text, text

    assert pool.wait_bound(["urgent"], timeout=30) == {"urgent": node}
    assert pool.read_pod("batch") is None
    assert assert_agrees(pool, explained) == {"batch"}
    early = (bound_at(pool, "urgent") - predicted_at(explained)).total_seconds()
    assert abs(early) <= AGREEMENT_SECONDS, f"bound {early:+.1f}s from when explain said: {explained['unblock']}"


def test_min_runtime_protects_a_running_gang_then_yields(phalanx: Stack, pool: Pool) -> None:
    pool.add_nodes(2, cpu="4")
    queue = f"{pool.name}-team"
    pool.cluster_object(
        {"apiVersion": PHALANX, "kind": "Queue", "metadata": {"name": queue}, "spec": {"preemptMinRuntime": "8s"}}
    )
    low = pool.priority_class("low", 10)
    high = pool.priority_class("high", 100)
    pool.create(pool.pod_group("old", {"gang": {"minCount": 2}}, low, disruption_mode="PodGroup", queue=queue))
    pool.create(*(pool.pod(f"old-{i}", cpu="4", group="old", priority_class=low, grace=0) for i in range(2)))
    pool.wait_bound(["old-0", "old-1"])
    started = datetime.now(UTC)

    pool.create(pool.pod_group("new", {"gang": {"minCount": 2}}, high, queue=queue))
    pool.create(*(pool.pod(f"new-{i}", cpu="4", group="new", priority_class=high) for i in range(2)))
    message = wait_for(lambda: pending_message(pool, "new-0"), what="new-0 pending with a reason")
    assert "MinRuntime" in message or "min-runtime" in message, message
    assert f"(queues {queue}, the preemptor's too)" in message, "the queue path"
    assert len(pool.bound(["old-0", "old-1"])) == 2
    explained = explain(phalanx.plane, pool.namespace, "podgroup", "new")
    said_once_on_the_podgroup(phalanx, pool, queue, message)

    pool.wait_bound(["new-0", "new-1"], timeout=40)
    waited = (datetime.now(UTC) - started).total_seconds()
    assert waited >= 7, f"preempted {waited:.1f}s after the victims started, inside their 8s min-runtime"
    assert pool.bound(["old-0", "old-1"]) == {}
    assert assert_agrees(pool, explained) == {"old-0", "old-1"}
    early = (max(bound_at(pool, "new-0"), bound_at(pool, "new-1")) - predicted_at(explained)).total_seconds()
    assert abs(early) <= AGREEMENT_SECONDS, f"bound {early:+.1f}s from when explain said: {explained['unblock']}"
    warnings = [e for e in pool.events("FailedScheduling") if e["regarding"]["kind"] == "PodGroup"]
    assert [e["regarding"]["name"] for e in warnings] == ["new"], "the PodGroup's reason was said once"


def said_once_on_the_podgroup(stack: Stack, pool: Pool, queue: str, message: str) -> None:
    """Issue 22, part 2: the members' reason on the PodGroup's condition, a Warning Event on the PodGroup,
    `kubectl get podgroups` showing the reason, and the pending gauges on /metrics."""
    path = f"/apis/{PHALANX}/namespaces/{pool.namespace}/podgroups/new"
    condition = wait_for(
        lambda: next(
            (c for c in (pool.api.get(path) or {}).get("status", {}).get("conditions", []) if c["status"] == "False"),
            None,
        ),
        what="PodGroupScheduled=False on the PodGroup",
    )
    assert (condition["type"], condition["reason"]) == ("PodGroupScheduled", "Unschedulable")
    assert condition["message"] == message, "the same one-line reason as the members'"
    wait_for(
        lambda: [e for e in pool.events("FailedScheduling") if e["regarding"]["kind"] == "PodGroup"],
        what="a Warning Event on the PodGroup",
    )
    kubectl = [str(Path(stack.plane.env["KUBE_BIN"]) / "kubectl"), "--kubeconfig", str(stack.plane.admin_kubeconfig)]
    listed = subprocess.run(
        [*kubectl, "get", f"podgroups.{PHALANX.split('/')[0]}", "-n", pool.namespace],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    header, *rows = listed.splitlines()
    assert "REASON" in header.split(), listed
    assert any(row.split()[0] == "new" and "Unschedulable" in row.split() for row in rows), listed
    assert stack.scheduler is not None
    port = re.search(r"metrics on 127\.0\.0\.1:(\d+)", stack.scheduler.log())
    assert port is not None, "the scheduler prints where /metrics is"
    with urllib.request.urlopen(f"http://127.0.0.1:{port.group(1)}/metrics", timeout=10) as reply:
        metrics = reply.read().decode()
    assert f'phalanx_pending_units{{queue="{queue}",reason="Unschedulable"}} 1.0' in metrics
    assert re.search(r'phalanx_pending_pods\{state="unschedulable"\} [1-9]', metrics), "the members wait"
