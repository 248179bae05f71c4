"""Events are best effort: past their lane's limit they are dropped, counted, and logged in a line now and then,
not one line each."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

from kube.client import api_client
from scheduler.cluster.kube import KubeCluster
from scheduler.cluster.kube.lanes import LANES
from tests.apiserver import ApiServer
from tests.builders import make_node, make_pod
from tests.kube.stored import stored_pod
from tests.polling import wait_for

EVENTS = "/apis/events.k8s.io/v1/namespaces/default/events"
WORKERS, LIMIT = next((workers, limit) for name, workers, limit in LANES if name == "events")


@pytest.fixture
def calls() -> Counter[tuple[str, str]]:
    """API calls by (operation, result), as the process's `api_requests` metric counts them."""
    return Counter()


@pytest.fixture
def cluster(apiserver: ApiServer, kubeconfig: Path, calls: Counter[tuple[str, str]]) -> Iterator[KubeCluster]:
    apiserver.create(make_node("n0").cap(cpu="8", memory="8Gi").json())
    apiserver.create(make_pod("p0").json())
    kube = KubeCluster(
        api_client(kubeconfig, "scheduler"),
        identity="events",
        request_timeout_seconds=30.0,
        on_api_call=lambda operation, result: calls.update([(operation, result)]),
    )
    kube.start()
    assert kube.wait_synced(10)
    yield kube
    kube.stop(deadline=time.monotonic())


def test_events_past_the_lane_limit_are_dropped_counted_and_logged_once(
    apiserver: ApiServer, cluster: KubeCluster, calls: Counter[tuple[str, str]]
) -> None:
    assert LIMIT is not None
    # Held long enough that queueing LIMIT + 50 Events ends first even on a loaded machine (2 s was not, under load).
    apiserver.delay("POST", EVENTS, seconds=15.0, times=WORKERS)
    pod = stored_pod(apiserver, "p0")
    for i in range(WORKERS):
        cluster.record_event(pod, "Normal", "Scheduled", f"held {i}")
    wait_for(lambda: len(apiserver.requests_matching("POST", EVENTS)) == WORKERS)  # every worker held: the rest queue
    extra = 50
    with structlog.testing.capture_logs() as logs:
        for i in range(LIMIT + extra):
            cluster.record_event(pod, "Normal", "Scheduled", f"note {i}")
    drops = [entry for entry in logs if "dropped" in entry["event"]]
    assert len(drops) == 1, drops[:3]
    assert drops[0]["count"] == 1 and drops[0]["last_reason"] == "Scheduled"
    assert drops[0]["log_level"] == "warning"
    assert calls[("event", "dropped")] == extra
