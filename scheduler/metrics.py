"""The scheduler process's Prometheus metrics and its `/metrics` + `/healthz` endpoint.

Names follow issue 7 and issue 22 where they fix them (`scheduler_pending_pods`, the
`phalanx_podgroup_preemption_*` pair, `phalanx_pending_units` and `phalanx_pending_pods`) and STYLE.md
otherwise (`phalanx_scheduler_<what>_<unit>`). `record_pending` sets the pending gauges from a pass.
Each `SchedulerMetrics` owns its registry, so two replicas in one test process do not share gauges.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from scheduler.framework.reporter import POD_STATES, PassReport

LATENCY_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)


class SchedulerMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.pending_pods = Gauge("scheduler_pending_pods", "Pending pods by scheduling queue.", ["queue"], registry=r)
        self.scheduling_attempt_duration = Histogram(
            "phalanx_scheduler_scheduling_attempt_duration_seconds",
            "Duration of one scheduling pass (snapshot, filter, score, preemption, API writes).",
            ["result"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.e2e_scheduling_duration = Histogram(
            "phalanx_scheduler_e2e_scheduling_duration_seconds",
            "From pod creation to its Binding by this scheduler.",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.bindings = Counter("phalanx_scheduler_bindings_total", "Pods bound.", registry=r)
        self.preemption_attempts = Counter(
            "phalanx_podgroup_preemption_attempts_total", "Preemptions proposed for a unit.", registry=r
        )
        self.preemption_victims = Histogram(
            "phalanx_podgroup_preemption_victims",
            "Victim pods per preemption.",
            buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512),
            registry=r,
        )
        self.leader = Gauge("phalanx_scheduler_leader", "1 while this replica holds the Lease.", registry=r)
        self.api_requests = Counter(
            "phalanx_scheduler_api_requests_total",
            "API writes by operation and result.",
            ["operation", "result"],
            registry=r,
        )
        self.relists = Counter("phalanx_scheduler_informer_relists_total", "Informer LISTs.", ["kind"], registry=r)
        self.pending_units = Gauge(
            "phalanx_pending_units",
            "Pending scheduling units (a pod, or a PodGroup's pending members) by Queue and reason.",
            ["queue", "reason"],
            registry=r,
        )
        self.pending_pods_by_state = Gauge(
            "phalanx_pending_pods",
            "Pending pods by what they wait for: gated, waiting (for their gang), unschedulable, backoff, nominated.",
            ["state"],
            registry=r,
        )
        self.repeated_reasons = Counter(
            "phalanx_scheduler_repeated_reasons_total",
            "Units tried again with an unchanged pending reason: said (logged, evented) once, counted here.",
            ["reason"],
            registry=r,
        )
        self.queue_retries = Counter(
            "phalanx_scheduler_queue_retries_total",
            "Parked units tried again, by the event that woke them (node, room, nomination, victim, terminating, "
            "policy, storage, placed, namespace, group, pod, preempting) or the time that did (timer: a PostFilter's "
            "until; refused: a refused write's backoff).",
            ["event"],
            registry=r,
        )
        self.explain_requests = Counter(
            "phalanx_scheduler_explain_requests_total",
            "Requests answered by the explain API (explain.phalanx.dev), by resource and HTTP code.",
            ["resource", "code"],
            registry=r,
        )
        self.explain_duration = Histogram(
            "phalanx_scheduler_explain_request_duration_seconds",
            "From an explain API request's first byte to its answer sent (authorization, dry run, encoding).",
            ["resource"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.queue_retries_avoided = Counter(
            "phalanx_scheduler_queue_retries_avoided_total",
            "Parked units not tried again because no event since could help them, where retrying at any change "
            "to the cluster once the backoff is over (the rule before queueing hints) would have.",
            registry=r,
        )
        self.backpressure_passes = Counter(
            "phalanx_scheduler_backpressure_passes_total",
            "Passes ended before their last unit because the Bindings waiting to be sent reached a few seconds' worth "
            "of the write rate; the units left wait in the queue for the next pass.",
            registry=r,
        )
        self.bindings_waiting = Gauge(
            "phalanx_scheduler_bindings_waiting", "Bindings queued or on the wire.", registry=r
        )


def record_pending(metrics: SchedulerMetrics, report: PassReport) -> None:
    """Set the pending gauges from what a pass left pending; count its repeated reasons and its queue's retries,
    made and avoided."""
    metrics.pending_units.clear()
    for (queue, code), count in report.units.items():
        metrics.pending_units.labels(queue, str(code)).set(count)
    for state in {*POD_STATES, *report.pods}:
        metrics.pending_pods_by_state.labels(state).set(report.pods.get(state, 0))
    for code, count in report.repeats.items():
        metrics.repeated_reasons.labels(code).inc(count)
    for event, count in report.retries.items():
        metrics.queue_retries.labels(event).inc(count)
    metrics.queue_retries_avoided.inc(report.retries_avoided)
    if report.deferred:
        metrics.backpressure_passes.inc()


def serve(metrics: SchedulerMetrics, host: str, port: int, healthy: Callable[[], bool]) -> ThreadingHTTPServer:
    """Serve `/metrics`, `/healthz` and `/readyz` in a daemon thread; returns the server (port 0: any)."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            """Scrapes are not worth a log line."""

        def do_GET(self) -> None:
            if self.path.startswith("/metrics"):
                code, body, kind = 200, generate_latest(metrics.registry), CONTENT_TYPE_LATEST
            elif self.path.startswith(("/healthz", "/readyz", "/livez")):
                ok = healthy()
                code, body, kind = (200 if ok else 503), (b"ok" if ok else b"not ready"), "text/plain"
            else:
                code, body, kind = 404, b"not found", "text/plain"
            self.send_response(code)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    return server
