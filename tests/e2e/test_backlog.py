"""A backlog on the real API server: a pass decides no more than the Binding lane can send in a few seconds.

Pods that all fit are pending before the scheduler starts, as after a restart or a failover. A scheduler that
decides the whole backlog in its first pass queues a Binding for every pod, and a pod created a moment later,
however high its priority, is bound only after all of them. With backpressure (`scheduler/cluster/kube/
backpressure.py`) a pass ends once a few seconds' worth of Bindings wait, the rest stay in the queue, and the
high-priority pod is decided at the next pass, ahead of the backlog still pending.

The pods go to a scheduler of the test's own, named after its pool (`schedulerName`), started once the backlog
exists; the suite's scheduler is stopped meanwhile (one Lease) and started again after.
"""

from __future__ import annotations

from tests.e2e.objects import Pool, create_all
from tests.e2e.stack import Stack
from tests.polling import wait_for

BACKLOG = 3_000
AHEAD = BACKLOG // 2
"""The high-priority pod must be bound before this many of the backlog's pods are: the Bindings queued ahead of
it are at most a few seconds' worth (hundreds), against all 3,000 without backpressure."""


def bound_count(pool: Pool) -> int:
    pods = pool.api.items(f"/api/v1/namespaces/{pool.namespace}/pods", labelSelector="backlog=true")
    return sum(1 for p in pods if p["spec"].get("nodeName"))


def test_a_pod_created_during_a_backlog_goes_by_priority_not_behind_every_binding(phalanx: Stack, pool: Pool) -> None:
    pool.add_nodes(40, cpu="32")  # 4,400 pod slots, 1,280 CPU: the whole backlog fits
    urgent = pool.priority_class("urgent", 1000)
    running = phalanx.scheduler
    assert running is not None
    running.stop()
    try:
        backlog = [
            pool.pod(f"b{i}", cpu="100m", labels={"backlog": "true"}, scheduler_name=pool.name) for i in range(BACKLOG)
        ]
        create_all(pool, backlog)
        phalanx.start_scheduler(schedulerName=pool.name)
        wait_for(lambda: bound_count(pool) > 0, timeout=60, what="the backlog's first Binding")
        pool.create(pool.pod("urgent", cpu="100m", priority_class=urgent, scheduler_name=pool.name))
        pool.wait_bound(["urgent"], timeout=120)
        ahead = bound_count(pool)
        print(f"\nbacklog pods bound when the urgent pod was: {ahead} of {BACKLOG}")
        assert ahead < AHEAD, f"the urgent pod waited behind {ahead} of the backlog's {BACKLOG} Bindings"
        wait_for(lambda: bound_count(pool) == BACKLOG, timeout=300, what="the whole backlog bound")
    finally:
        assert phalanx.scheduler is not None
        phalanx.scheduler.stop()
        phalanx.start_scheduler()
