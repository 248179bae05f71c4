"""Victims protect themselves on the real API server: preemption toleration and min-runtime, on the wall clock.

Each protection is short (seconds), so a test sees the preemptor wait with a message that names the
protection, then preempt once it has run out.
"""

from __future__ import annotations

from datetime import UTC, datetime

from tests.e2e.control_plane import wait_for
from tests.e2e.objects import PHALANX, Pool

TOLERATION = "preemption-toleration.scheduling.sigs.k8s.io"


def pending_message(pool: Pool, name: str) -> str:
    pod = pool.read_pod(name) or {}
    condition = next((c for c in pod.get("status", {}).get("conditions", []) if c["type"] == "PodScheduled"), {})
    return str(condition.get("message", "")) if condition.get("reason") == "Unschedulable" else ""


def test_toleration_spares_the_victim_until_it_expires(pool: Pool) -> None:
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

    assert pool.wait_bound(["urgent"], timeout=30) == {"urgent": node}
    assert pool.read_pod("batch") is None


def test_min_runtime_protects_a_running_gang_then_yields(pool: Pool) -> None:
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
    assert len(pool.bound(["old-0", "old-1"])) == 2

    pool.wait_bound(["new-0", "new-1"], timeout=40)
    waited = (datetime.now(UTC) - started).total_seconds()
    assert waited >= 7, f"preempted {waited:.1f}s after the victims started, inside their 8s min-runtime"
    assert pool.bound(["old-0", "old-1"]) == {}
