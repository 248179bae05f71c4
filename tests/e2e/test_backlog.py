"""A backlog on the real API server: a pass decides no more than the Binding lane can send in a few seconds.

Pods that all fit are pending before the scheduler starts, as after a restart or a failover. A scheduler that
decides the whole backlog in its first pass queues a Binding for every pod, and a pod created a moment later,
however high its priority, is bound only after all of them. With backpressure (`scheduler/cluster/kube/
backpressure.py`) a pass ends once a few seconds' worth of Bindings wait, the rest stay in the queue, and the
high-priority pod is decided at the next pass, ahead of the backlog still pending.

The order of the Bindings is the API server's own: a watch on the namespace's pods delivers them in etcd's order,
so the test counts the backlog's Bindings before and after the urgent pod's without polling (a LIST of thousands
of pods, many times a second, would itself slow the server down).

The pods go to a scheduler of the test's own, named after its pool (`schedulerName`), started once the backlog
exists; the suite's scheduler is stopped meanwhile (one Lease) and started again after.
"""

from __future__ import annotations

import threading
import time

from tests.e2e.objects import Pool, create_all
from tests.e2e.stack import Stack
from tests.polling import wait_for

BACKLOG = 6_000
BEHIND = BACKLOG // 4
"""At least this many of the backlog's pods must be bound after the urgent pod. The Bindings ahead of it are those
of the pass under way and the few seconds' worth still queued (about four seconds of the write rate); without
backpressure they are all of the backlog's, and none is bound after it."""


class BindingOrder(threading.Thread):
    """The namespace's pods in the order the API server bound them, from a watch."""

    def __init__(self, pool: Pool, resource_version: str) -> None:
        super().__init__(daemon=True)
        self.pool = pool
        self.version = resource_version
        self.bound: list[str] = []
        self.created: dict[str, int] = {}
        """A pod's name: how many pods had been bound when the watch saw it created."""
        self.times: list[float] = []
        self._stop = threading.Event()

    def position(self, name: str) -> int | None:
        """How many pods were bound before `name`, once it is."""
        return self.bound.index(name) if name in self.bound else None

    def run(self) -> None:
        seen: set[str] = set()
        path = f"/api/v1/namespaces/{self.pool.namespace}/pods"
        while not self._stop.is_set():
            for event in self.pool.api.watch(path, self.version, timeout_seconds=10):
                pod = event["object"]
                self.version = pod["metadata"]["resourceVersion"]
                if event["type"] == "BOOKMARK":
                    continue
                name = pod["metadata"]["name"]
                if event["type"] == "ADDED":
                    self.created.setdefault(name, len(self.bound))
                if pod["spec"].get("nodeName") and name not in seen:
                    seen.add(name)
                    self.bound.append(name)
                    self.times.append(time.monotonic())

    def stop(self) -> None:
        self._stop.set()


def test_a_pod_created_during_a_backlog_goes_by_priority_not_behind_every_binding(phalanx: Stack, pool: Pool) -> None:
    pool.add_nodes(60, cpu="32")  # 6,600 pod slots, 1,920 CPU: the whole backlog fits
    urgent = pool.priority_class("urgent", 1000)
    running = phalanx.scheduler
    assert running is not None
    running.stop()
    order: BindingOrder | None = None
    try:
        backlog = [
            pool.pod(f"b{i}", cpu="100m", labels={"backlog": "true"}, scheduler_name=pool.name) for i in range(BACKLOG)
        ]
        create_all(pool, backlog)
        listed = pool.api.get(f"/api/v1/namespaces/{pool.namespace}/pods?limit=1")
        assert listed is not None
        order = BindingOrder(pool, listed["metadata"]["resourceVersion"])
        order.start()
        phalanx.start_scheduler(schedulerName=pool.name)
        wait_for(lambda: order.bound, timeout=60, what="the backlog's first Binding")
        pool.create(pool.pod("urgent", cpu="100m", priority_class=urgent, scheduler_name=pool.name))
        wait_for(lambda: order.position("urgent") is not None, timeout=120, what="the urgent pod's Binding")
        wait_for(lambda: len(order.bound) == BACKLOG + 1, timeout=300, what="the whole backlog bound")
        before = order.position("urgent")
        assert before is not None
        created = order.created["urgent"]
        seconds = order.times[-1] - order.times[0]
        print(
            f"\nbacklog Bindings: {created} before the urgent pod was created, {before - created} between its creation"
            f" and its Binding, {BACKLOG - before} after it ({BACKLOG / seconds:.0f} Bindings/s)"
        )
        assert BACKLOG - before >= BEHIND, (
            f"the urgent pod waited behind {before} of the backlog's {BACKLOG} Bindings ({before - created} of them"
            f" after it was created); at least {BEHIND} should have come after it"
        )
    finally:
        if order is not None:
            order.stop()
        assert phalanx.scheduler is not None
        phalanx.scheduler.stop()
        phalanx.start_scheduler()
