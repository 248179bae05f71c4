"""The webhook's Prometheus metrics, correct across several gunicorn worker processes.

prometheus-client's multiprocess mode keeps each worker's values in files under
`PROMETHEUS_MULTIPROC_DIR`; `/metrics` merges them, whichever worker answers the scrape. The variable must
be set before `prometheus_client` is first imported, which `webhook/server.py` arranges. Without it (tests
in one process) the default registry is used.
"""

from __future__ import annotations

import os

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector

REQUESTS = Counter(
    "phalanx_webhook_requests_total",
    "Admission requests answered, by endpoint, kind, operation and outcome.",
    ["endpoint", "kind", "operation", "outcome"],
)
LATENCY = Histogram(
    "phalanx_webhook_request_duration_seconds",
    "Time to answer an admission request, from body read to response built.",
    ["endpoint"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
)


def render() -> tuple[bytes, str]:
    """The exposition text and its content type, merged over workers when multiprocess mode is on."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        return generate_latest(registry), CONTENT_TYPE_LATEST
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST
