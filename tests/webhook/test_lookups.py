"""The watch-backed look-up cache against the loopback API server, through the real `kubernetes` client."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

from kube.client import api_client
from tests.apiserver.server import ApiServer
from tests.builders import make_priority_class, make_queue
from tests.polling import wait_for
from tests.webhook.harness import fixture, seed
from webhook.errors import LookupFailed
from webhook.lookups import PRIORITY_CLASSES, QUEUES, KubeLookups, Resource

PC_PATH = "/apis/scheduling.k8s.io/v1/priorityclasses"


@pytest.fixture
def api() -> Iterator[ApiServer]:
    server = ApiServer(bookmark_interval=0.2).start()
    seed(server)
    yield server
    server.stop()


@pytest.fixture
def lookups(api: ApiServer, tmp_path: Path) -> Iterator[KubeLookups]:
    cache = KubeLookups(api_client(str(api.kubeconfig(tmp_path / "kubeconfig")), "webhook"), watch_seconds=5).start()
    assert cache.wait_synced(timeout=10)
    yield cache
    cache.stop()


def names(lookups: KubeLookups, resource: Resource) -> set[str]:
    return {key.rsplit("/", 1)[-1] for key in lookups.informers[resource].items()}


def test_synced_cache_answers_without_reading_the_api(api: ApiServer, lookups: KubeLookups) -> None:
    reads_before = len(api.requests_matching("GET", f"{PC_PATH}/"))
    high = lookups.priority_class("phalanx-high")
    assert high is not None and high.value == 100000
    assert {pc.metadata.name for pc in lookups.priority_classes()} == {"phalanx-high", "phalanx-default"}
    workload = lookups.workload("scheduling.k8s.io/v1alpha2", "ml-team", "training")
    assert workload is not None and workload.template("workers") is not None
    group = lookups.pod_group("scheduling.phalanx.dev/v1alpha1", "ml-team", "pg1")
    assert group is not None and group.spec.priority_class_name == "phalanx-high"
    assert lookups.queue("research") is not None
    assert len(api.requests_matching("GET", f"{PC_PATH}/")) == reads_before


def test_watch_adds_modifies_and_deletes(api: ApiServer, lookups: KubeLookups) -> None:
    api.create(make_priority_class("burst", 50).json())
    wait_for(lambda: "burst" in names(lookups, PRIORITY_CLASSES), timeout=10)
    api.apply(make_priority_class("burst", 60).json())
    wait_for(lambda: getattr(lookups.priority_class("burst"), "value", None) == 60, timeout=10)
    api.delete("priorityclasses", "burst", group="scheduling.k8s.io")
    wait_for(lambda: "burst" not in names(lookups, PRIORITY_CLASSES), timeout=10)


def test_miss_reads_the_api_directly(api: ApiServer, lookups: KubeLookups) -> None:
    assert lookups.queue("ghost") is None
    assert api.requests_matching("GET", "/apis/scheduling.phalanx.dev/v1alpha1/queues/ghost")


def test_api_failure_on_a_miss_is_lookup_failed(api: ApiServer, lookups: KubeLookups) -> None:
    api.fail("GET", "/apis/scheduling.phalanx.dev/v1alpha1/queues/ghost", 500)
    with pytest.raises(LookupFailed, match="HTTP 500"):
        lookups.queue("ghost")


def test_expired_watch_relists(api: ApiServer, lookups: KubeLookups) -> None:
    path = "/apis/scheduling.phalanx.dev/v1alpha1/queues"
    lists_before = len([r for r in api.requests_matching("GET", path) if "watch" not in r.query])
    api.compact()
    api.create(make_queue("after-compaction").parent("root").json())
    wait_for(lambda: "after-compaction" in names(lookups, QUEUES), timeout=10)
    assert len([r for r in api.requests_matching("GET", path) if "watch" not in r.query]) > lists_before


def test_cache_recovers_after_an_apiserver_restart(api: ApiServer, lookups: KubeLookups) -> None:
    api.restart(compact=True)
    api.create(make_queue("after-restart").parent("root").json())
    wait_for(lambda: "after-restart" in names(lookups, QUEUES), timeout=10)


def test_not_ready_until_the_api_answers(tmp_path: Path) -> None:
    down = ApiServer().start()
    kubeconfig = down.kubeconfig(tmp_path / "kubeconfig")
    down.fail("GET", PC_PATH, 503, times=1000)
    cache = KubeLookups(api_client(str(kubeconfig), "webhook")).start()
    try:
        assert not cache.wait_synced(timeout=1)
        assert not cache.synced()
        down.faults.clear()
        assert cache.wait_synced(timeout=10)
    finally:
        cache.stop()
        down.stop()


def test_a_resource_the_cluster_does_not_serve_counts_as_synced_and_empty(tmp_path: Path) -> None:
    api = ApiServer().start()
    api.fail("GET", "/apis/scheduling.k8s.io/v1alpha2/workloads", 404, times=1000)
    cache = KubeLookups(api_client(str(api.kubeconfig(tmp_path / "kubeconfig")), "webhook")).start()
    try:
        assert cache.wait_synced(timeout=10)
        assert cache.workload("scheduling.k8s.io/v1alpha2", "ml-team", "training") is None
    finally:
        cache.stop()
        api.stop()


def test_a_resource_served_after_the_start_is_seen_by_the_next_lookup(tmp_path: Path) -> None:
    """CRDs applied after the webhook started (`helm install --skip-crds`, a GitOps sync in any order):
    the next admission reads the object directly, and the informer lists the resource at once."""
    api = ApiServer().start()
    api.fail("GET", "/apis/scheduling.k8s.io/v1alpha2/workloads", 404, times=1000)
    cache = KubeLookups(api_client(str(api.kubeconfig(tmp_path / "kubeconfig")), "webhook")).start()
    try:
        assert cache.wait_synced(timeout=10)
        api.faults.clear()  # the CRD is established
        api.apply(fixture("objects/workload.json"))
        found = cache.workload("scheduling.k8s.io/v1alpha2", "ml-team", "training")
        assert found is not None and found.metadata.name == "training"
        # From now on only the informer can answer: woken by that read, it lists at once (not a minute later).
        api.fail("GET", "/apis/scheduling.k8s.io/v1alpha2/namespaces/ml-team/workloads/training", 500, times=1000)

        def cached() -> bool:
            try:
                return cache.workload("scheduling.k8s.io/v1alpha2", "ml-team", "training") is not None
            except LookupFailed:
                return False

        deadline = time.monotonic() + 5
        while not cached() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert cached()
    finally:
        cache.stop()
        api.stop()


def test_a_closed_log_stream_does_not_stop_the_cache(tmp_path: Path) -> None:
    closed = (tmp_path / "log").open("w")
    closed.close()
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(closed))
    api = ApiServer().start()
    api.fail("GET", PC_PATH, 503, times=3)
    cache = KubeLookups(api_client(str(api.kubeconfig(tmp_path / "kubeconfig")), "webhook")).start()
    try:
        assert cache.wait_synced(timeout=10)
    finally:
        cache.stop()
        api.stop()
        structlog.reset_defaults()
