"""Watch expiry, restarts, API errors and timeouts: the back end retries and keeps scheduling."""

from __future__ import annotations

from pathlib import Path

import structlog

from tests.apiserver import ApiServer
from tests.builders import make_node, make_pod
from tests.kube.replica import Replica, fast_config, node_of
from tests.polling import wait_for

BINDING = "/api/v1/namespaces/default/pods/p/binding"
EVENTS = "/apis/events.k8s.io/v1/namespaces/default/events"


def started(server: ApiServer, kubeconfig: Path, replicas: list[Replica]) -> Replica:
    server.create(make_node("n0").cap(cpu="8", memory="8Gi").json())
    replica = Replica(server, kubeconfig, fast_config(), "a").start()
    replicas.append(replica)
    wait_for(lambda: all(i.synced.is_set() for i in replica.process.cluster.informers))
    return replica


def relists(replica: Replica, kind: str) -> float:
    value = replica.process.metrics.registry.get_sample_value(
        "phalanx_scheduler_informer_relists_total", {"kind": kind}
    )
    return value or 0.0


def test_restart_with_compaction_relists_and_keeps_scheduling(
    apiserver: ApiServer, kubeconfig: Path, replicas: list[Replica]
) -> None:
    replica = started(apiserver, kubeconfig, replicas)
    apiserver.restart(down_seconds=0.2, compact=True)
    wait_for(lambda: relists(replica, "pods") >= 2 and relists(replica, "podgroups") >= 2)
    apiserver.create(make_pod("p").req(cpu="1").json())
    wait_for(lambda: node_of(apiserver, "p"))


def test_writes_after_the_server_dropped_the_kept_connections_go_through_at_once(
    apiserver: ApiServer, kubeconfig: Path, replicas: list[Replica]
) -> None:
    """Every write worker keeps its connection (`kube.transport`). One the server closed while it sat idle, as a
    restarted or scaled-in API server does, is opened again before the next write, not found broken by it: a
    retry and its backoff for every worker, on every pod, after each API server restart."""
    replica = started(apiserver, kubeconfig, replicas)
    for i in range(24):  # at once: most Binding and Event workers open their connection
        apiserver.create(make_pod(f"before-{i}").req(cpu="10m").json())
    wait_for(lambda: all(node_of(apiserver, f"before-{i}") for i in range(24)))
    wait_for(lambda: len(apiserver.requests_matching("POST", EVENTS)) >= 24)
    apiserver.restart(compact=False)
    apiserver.create(make_node("after-restart").cap(cpu="1").json())
    head = str(apiserver.resource_version())
    wait_for(lambda: replica.process.cluster.pods.resource_version == head)  # watching again (a bookmark)
    with structlog.testing.capture_logs() as logs:
        for i in range(24):
            apiserver.create(make_pod(f"after-{i}").req(cpu="10m").json())
        wait_for(lambda: all(node_of(apiserver, f"after-{i}") for i in range(24)))
    retried = [e for e in logs if e["event"] == "api call retried" and e["operation"] in ("bind", "event")]
    assert retried == [], retried[:3]


def test_compaction_mid_watch_gives_410_then_relist(
    apiserver: ApiServer, kubeconfig: Path, replicas: list[Replica]
) -> None:
    replica = started(apiserver, kubeconfig, replicas)
    apiserver.compact()
    wait_for(lambda: relists(replica, "nodes") >= 2)
    apiserver.create(make_pod("p").req(cpu="1").json())
    wait_for(lambda: node_of(apiserver, "p"))


def test_watch_answered_with_http_410_relists(apiserver: ApiServer, kubeconfig: Path, replicas: list[Replica]) -> None:
    replica = started(apiserver, kubeconfig, replicas)
    gone = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Expired", "code": 410}
    apiserver.fail("GET", "/api/v1/nodes", 410, times=1, body=gone)
    apiserver.restart(compact=False)
    wait_for(lambda: relists(replica, "nodes") >= 2)
    apiserver.create(make_pod("p").req(cpu="1").json())
    wait_for(lambda: node_of(apiserver, "p"))


def test_bookmarks_move_an_idle_watch_to_the_head(
    apiserver: ApiServer, kubeconfig: Path, replicas: list[Replica]
) -> None:
    replica = started(apiserver, kubeconfig, replicas)
    for i in range(3):
        apiserver.create(make_node(f"extra-{i}").cap(cpu="1").json())
    head = str(apiserver.resource_version())
    wait_for(lambda: replica.process.cluster.pods.resource_version == head)


def test_list_errors_are_retried_until_synced(apiserver: ApiServer, kubeconfig: Path, replicas: list[Replica]) -> None:
    apiserver.fail("GET", "/api/v1/pods", 503, times=3)
    apiserver.fail("GET", "/apis/scheduling.phalanx.dev/v1alpha1/podgroups", 429, times=1, retry_after=1)
    apiserver.create(make_pod("p").req(cpu="1").json())
    started(apiserver, kubeconfig, replicas)
    wait_for(lambda: node_of(apiserver, "p"))
    assert len(apiserver.requests_matching("GET", "/api/v1/pods")) >= 4


def test_binding_errors_are_retried_and_bind_once(
    apiserver: ApiServer, kubeconfig: Path, replicas: list[Replica]
) -> None:
    apiserver.fail("POST", BINDING, 500, times=2)
    apiserver.fail("POST", BINDING, 429, times=1, retry_after=1)
    apiserver.create(make_pod("p").req(cpu="1").json())
    started(apiserver, kubeconfig, replicas)
    wait_for(lambda: node_of(apiserver, "p"))
    assert len(apiserver.requests_matching("POST", BINDING)) == 4


def test_binding_timeout_is_retried(apiserver: ApiServer, kubeconfig: Path, replicas: list[Replica]) -> None:
    apiserver.hang("POST", BINDING, seconds=3, times=1)
    apiserver.create(make_pod("p").req(cpu="1").json())
    started(apiserver, kubeconfig, replicas)
    wait_for(lambda: node_of(apiserver, "p"))
    assert len(apiserver.requests_matching("POST", BINDING)) == 2


def test_bound_elsewhere_meanwhile_is_not_bound_again(
    apiserver: ApiServer, kubeconfig: Path, replicas: list[Replica]
) -> None:
    """Someone binds the pod while our Binding is failing: our retry gets 409 and counts it as placed."""
    apiserver.fail("POST", BINDING, 503, times=1)
    apiserver.hang("POST", BINDING, seconds=2, times=1)
    apiserver.create(make_node("other").cap(cpu="8", memory="8Gi").json())
    apiserver.create(make_pod("p").req(cpu="1").json())
    started(apiserver, kubeconfig, replicas)
    wait_for(lambda: apiserver.requests_matching("POST", BINDING))
    pod = apiserver.get("pods", "p", "default")
    assert pod is not None
    pod["spec"]["nodeName"] = "other"
    apiserver.apply(pod)
    wait_for(lambda: len(apiserver.requests_matching("POST", BINDING)) >= 3)
    assert node_of(apiserver, "p") == "other"


def test_an_object_our_models_cannot_read_does_not_stop_its_informer(
    apiserver: ApiServer, kubeconfig: Path, replicas: list[Replica]
) -> None:
    """A pod the real server would refuse (ours accepts it) reaches the watch, and at the list after a restart:
    it is skipped with a warning, and pods created after it are still seen and bound."""
    started(apiserver, kubeconfig, replicas)
    odd = make_pod("odd").req(cpu="1").json()
    odd["spec"]["terminationGracePeriodSeconds"] = "soon"
    apiserver.create(odd)
    apiserver.create(make_pod("p").req(cpu="1").json())
    wait_for(lambda: node_of(apiserver, "p"))
    apiserver.restart(down_seconds=0.1, compact=True)
    apiserver.create(make_pod("q").req(cpu="1").json())
    wait_for(lambda: node_of(apiserver, "q"))
