"""The scheduler process against a cluster: informers, leader election, the pass loop, metrics.

A pass runs when the informers report a change or when the runner's `next_wakeup()` is due, once
the changes have settled: 20 ms without a new one, or 50 ms after the first, so a burst of watch
events costs one pass, not hundreds, and a steady stream of them (pods created one after another)
at most twenty passes a second, each placing what arrived meanwhile. Each time this
replica becomes leader it starts from a fresh `Scheduler` built on the informer cache: everything
(bound pods, nominations, victims still terminating) is rebuilt from the API, never remembered. Only the
snapshot's caches, which a standby keeps up with its informers, are handed over, so the new leader's first
pass does not parse every pod again.

A pass that finds the Bindings backed up ends early (`backpressure.py`); the next one then waits for them to
drain to a third, not for the next watch event.

Stopping (SIGTERM, issue 24) takes at most `stop_seconds`, whatever is pending: the pass under way
ends before its next unit; the writes only queued are dropped, but for the owed ones
(`KubeCluster.stop_writing`); the Lease is handed back, so a standby takes over without waiting for
anything else; then the writes already on the wire, and the owed ones, are finished
(`KubeCluster.stop`). One line is logged when stopping begins, one when it ends, with what was
dropped. With 10,000 pods pending it used to send every PodScheduled write still queued first, one at
a time, for longer than the 30 s Kubernetes waits before SIGKILL.
"""

from __future__ import annotations

import socket
import threading
import time
import uuid
from datetime import datetime
from typing import Any

import numpy.ma  # noqa: F401  numpy imports it on the first np.unique: ~15 ms inside the first preemption decision
import structlog
from kubernetes import client

from scheduler.api.config import SchedulerConfiguration
from scheduler.cluster.kube.cluster import KubeCluster
from scheduler.cluster.kube.heap import Heap
from scheduler.cluster.kube.leader_election import LeaderElector
from scheduler.framework.cluster import PassAborted
from scheduler.framework.runner import PassReport, Scheduler
from scheduler.framework.snapshot_builder import PodInfoCache, build_snapshot
from scheduler.metrics import SchedulerMetrics, record_pending
from scheduler.plugins import default_profile
from scheduler.preemption.actuator import PreemptionActuator

log = structlog.get_logger(__name__)

WARM_SECONDS = 2.0
"""How often a standby brings its snapshot caches up to its informers (`_warm`)."""
STOP_SECONDS = 4.0
"""How long a stop may take once it began: the Lease release, the writes on the wire and the owed ones all
end by then. A stop takes well under a second while the API server answers; this bound is for when it
does not (a request on the wire would otherwise wait for its own timeout, 10 s)."""
BUSY_SECONDS = 5.0
"""How long after a pass that tried, deferred or bound a unit the leader still counts as scheduling (`busy`)."""
EXIT_SECONDS = 9.0
"""`phalanx scheduler` ends this long after SIGTERM at the latest, whatever is stuck (`phalanx.signals`); the
chart's `terminationGracePeriodSeconds` is above it."""


def default_identity() -> str:
    return f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"


class SchedulerProcess:
    def __init__(
        self,
        api: client.ApiClient,
        config: SchedulerConfiguration,
        metrics: SchedulerMetrics | None = None,
        identity: str | None = None,
        lease_namespace: str = "kube-system",
        settle_seconds: float = 0.02,
        max_settle_seconds: float = 0.05,
        idle_seconds: float = 30.0,
        watch_timeout_seconds: int = 300,
        request_timeout_seconds: float = 10.0,
        lease_owner: dict[str, Any] | None = None,
        stop_seconds: float = STOP_SECONDS,
    ) -> None:
        self.config = config
        self.stop_seconds = stop_seconds
        self.metrics = metrics or SchedulerMetrics()
        self.identity = identity or default_identity()
        self.settle_seconds = settle_seconds
        self.max_settle_seconds = max_settle_seconds
        self.idle_seconds = idle_seconds
        self.last_pass: float = 0.0
        self.last_work: float = -BUSY_SECONDS
        """When a pass last tried, deferred or bound a unit (`time.monotonic`)."""
        self.heap = Heap()
        election = config.leader_election
        self.elector: LeaderElector | None = None
        if election.leader_elect:
            self.elector = LeaderElector(
                api,
                election.resource_namespace or lease_namespace,
                election.resource_name,
                self.identity,
                lease_duration=election.lease_duration_seconds,
                renew_deadline=election.renew_deadline_seconds,
                retry_period=election.retry_period_seconds,
                on_change=lambda leader: self.metrics.leader.set(1 if leader else 0),
                owner=lease_owner,
            )
        elector = self.elector
        self.cluster = KubeCluster(
            api,
            identity=self.identity,
            may_write=elector.is_leader if elector is not None else lambda: True,
            watch_timeout_seconds=watch_timeout_seconds,
            request_timeout_seconds=request_timeout_seconds,
            on_api_call=lambda op, result: self.metrics.api_requests.labels(op, result).inc(),
            on_relist=lambda kind: self.metrics.relists.labels(kind).inc(),
        )
        self.metrics.bindings_waiting.set_function(self.cluster.backpressure.lane.load)

    def busy(self) -> bool:
        """Whether this replica is scheduling: it leads, and a pass had units to decide lately or its Bindings are
        still on their way. What it serves beside (explanations, `serve/limits.py`) then yields to it."""
        if not self.cluster.may_write():
            return False
        return self.cluster.backpressure.lane.load() > 0 or time.monotonic() - self.last_work < BUSY_SECONDS

    def healthy(self) -> bool:
        """Synced informers and a loop that is not wedged (a standby that waits is healthy)."""
        synced = all(i.synced.is_set() for i in self.cluster.informers)
        return synced and time.monotonic() - self.last_pass < max(60.0, 3 * self.idle_seconds)

    def run(self, stop: threading.Event) -> int:
        """Schedule until `stop` is set, then stop within `stop_seconds`; returns the exit status."""
        self.heap.hold()
        self.cluster.start()
        self.last_pass = time.monotonic()
        try:
            while not self.cluster.wait_synced(1.0):
                if stop.is_set():
                    return 0
            self.heap.freeze()
            log.info("caches synced", identity=self.identity, frozen_objects=self.heap.frozen())
            if self.elector is not None:
                self.elector.start()
            else:
                self.metrics.leader.set(1)
            self._loop(stop)
        finally:
            self._stop()
        return 0

    def _stop(self) -> None:
        began = time.monotonic()
        deadline = began + self.stop_seconds
        log.info("stopping", identity=self.identity, leader=self.cluster.may_write())
        self.cluster.stop_writing()
        if self.elector is not None:
            self.elector.stop(release=True, deadline=deadline)
        stopped = self.cluster.stop(deadline)
        log.info(
            "stopped",
            identity=self.identity,
            seconds=round(time.monotonic() - began, 3),
            dropped=stopped.dropped,
            unfinished=stopped.unfinished,
        )

    def _loop(self, stop: threading.Event) -> None:
        scheduler: Scheduler | None = None
        cache = PodInfoCache()
        warmed = 0.0
        while not stop.is_set():
            self.last_pass = time.monotonic()
            if self.elector is not None and not self.elector.is_leader():
                if scheduler is not None:  # it led: nothing of that leadership is kept
                    scheduler, cache = None, PodInfoCache()
                if time.monotonic() - warmed >= WARM_SECONDS:
                    self._warm(cache)
                    warmed = time.monotonic()
                self.elector.became_leader.wait(0.2)
                self.heap.tick()
                continue
            if scheduler is None:
                scheduler = Scheduler(
                    self.cluster,
                    self.config,
                    default_profile(self.config),
                    actuator=PreemptionActuator(self.cluster),
                    interrupted=lambda: stop.is_set() or not self.cluster.may_write(),
                    cache=cache,
                )
                log.info("scheduling started", identity=self.identity)
            self.cluster.changed.clear()
            started = time.perf_counter()
            try:
                report = scheduler.schedule_pending()
            except PassAborted:
                if not stop.is_set():
                    log.info("lease lost, writes stopped", identity=self.identity)
                scheduler = None
                continue
            except Exception:
                log.exception("scheduling pass failed")
                self.metrics.scheduling_attempt_duration.labels("error").observe(time.perf_counter() - started)
                stop.wait(1.0)
                continue
            finally:
                self.heap.tick()
            self.metrics.scheduling_attempt_duration.labels("success").observe(time.perf_counter() - started)
            self._record(report)
            if report.units_tried or report.deferred or report.bindings:
                self.last_work = time.monotonic()
            if report.deferred:
                self._wait_room(stop)
            else:
                self._wait(scheduler, stop)

    def _warm(self, cache: PodInfoCache) -> None:
        """A standby keeps the snapshot's caches as warm as its informers: a new leader's first pass then builds
        its snapshot by difference, not by parsing every pod's requests again (seconds at 100,000 pods). The
        cache is made from the informers' objects alone, as the first pass would make it; a failed build only
        leaves it colder."""
        try:
            build_snapshot(self.cluster.objects(), self.cluster.now(), self.config, cache)
        except Exception as err:  # never a reason for a standby to stop: the leader's first pass builds it anew
            log.warning("standby snapshot failed", error=repr(err))

    def _wait_room(self, stop: threading.Event) -> None:
        """The pass ended with units left because the Bindings were backed up: the next runs once they drained to
        a third (`backpressure.py`), not at the next watch event, which would find them still backed up and decide
        nothing for the price of a pass. Checked every 0.1 s, so losing the Lease or stopping is seen."""
        room = self.cluster.backpressure.room
        while not stop.is_set() and not room.wait(0.1):
            self.heap.tick()
            if self.elector is not None and not self.elector.is_leader():
                return

    def _wait(self, scheduler: Scheduler, stop: threading.Event) -> None:
        wakeup = scheduler.next_wakeup()
        timeout = self.idle_seconds
        if wakeup is not None:
            timeout = min(timeout, max(0.0, (wakeup - self.cluster.now()).total_seconds()))
        if self.elector is not None:
            timeout = min(timeout, self.elector.retry_period)
        deadline = time.monotonic() + timeout
        while not stop.is_set() and not self.cluster.changed.wait(min(0.1, max(0.0, deadline - time.monotonic()))):
            self.heap.tick()
            if time.monotonic() >= deadline:
                break
        settled = time.monotonic() + self.max_settle_seconds
        while not stop.is_set():
            self.cluster.changed.clear()
            stop.wait(min(self.settle_seconds, max(0.0, settled - time.monotonic())))
            if not self.cluster.changed.is_set() or time.monotonic() >= settled:
                break

    def _record(self, report: PassReport) -> None:
        metrics = self.metrics
        for binding in report.bindings:
            pod = self.cluster.pods.get(binding.pod)
            created: datetime | None = pod.metadata.creation_timestamp if pod is not None else None
            if created is not None:
                metrics.e2e_scheduling_duration.observe(max(0.0, (binding.time - created).total_seconds()))
        metrics.bindings.inc(len(report.bindings))
        for _, result in report.post_filter:
            if result.victims:
                metrics.preemption_attempts.inc()
                metrics.preemption_victims.observe(sum(len(v.pods) for v in result.victims))
        pools = report.pools
        for queue, size in pools.items():
            metrics.pending_pods.labels(queue).set(size)
        metrics.pending_pods.labels("active").set(max(0, len(report.pending) - sum(pools.values())))
        record_pending(metrics, report)
