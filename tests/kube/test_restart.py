"""Crash safety: a scheduler killed between deleting victims and binding is finished by its successor.

The successor rebuilds everything from the API (nominations, victims still terminating) and binds
the gang without preempting anything new.
"""

from __future__ import annotations

from pathlib import Path

from tests.apiserver import ApiServer
from tests.builders import make_node, make_pod, make_podgroup, make_priority_class
from tests.kube.replica import CliReplica, Replica, fast_config, node_of
from tests.polling import wait_for


def test_killed_after_deleting_victims_successor_binds_without_new_preemptions(
    apiserver: ApiServer, kubeconfig: Path, tmp_path: Path, replicas: list[Replica | CliReplica]
) -> None:
    apiserver.hold_terminating = True
    apiserver.create(make_priority_class("low", 100).json())
    apiserver.create(make_priority_class("high", 10000).json())
    for i in range(2):
        apiserver.create(make_node(f"n{i}").cap(cpu="4", memory="8Gi").json())
        for j in range(2):
            apiserver.create(make_pod(f"low-{i}-{j}").req(cpu="2").priority_class("low").on(f"n{i}").json())
    apiserver.create(make_pod("spare").req(cpu="1").priority_class("low").json())
    apiserver.create(make_podgroup("train").gang(2).priority_class("high").priority(10000).json())
    for i in range(2):
        apiserver.create(make_pod(f"hi-{i}").req(cpu="4").group("train").priority_class("high").json())
    apiserver.fail("POST", "/api/v1/namespaces/default/pods/hi-", 503, times=10_000)
    first = CliReplica(tmp_path, kubeconfig, fast_config(), "first").start()
    replicas.append(first)

    def victims_terminating() -> bool:
        lows = [p for p in apiserver.list("pods", "default") if p["metadata"]["name"].startswith("low-")]
        return len(lows) == 4 and all(p["metadata"].get("deletionTimestamp") for p in lows)

    wait_for(victims_terminating, timeout=20)
    first.kill()
    deletes = len(apiserver.requests_matching("DELETE", "/api/v1/namespaces/default/pods/"))
    marks = len(apiserver.requests_matching("PATCH", "/api/v1/namespaces/default/pods/low-"))
    assert deletes == 4
    assert not node_of(apiserver, "hi-0")
    for fault in apiserver.faults:
        fault.remaining = 0
    successor = Replica(apiserver, kubeconfig, fast_config(), "successor").start()
    replicas.append(successor)
    wait_for(lambda: all(i.synced.is_set() for i in successor.process.cluster.informers))
    apiserver.hold_terminating = False
    wait_for(lambda: node_of(apiserver, "hi-0") and node_of(apiserver, "hi-1"), timeout=15)
    assert len(apiserver.requests_matching("DELETE", "/api/v1/namespaces/default/pods/")) == deletes
    assert len(apiserver.requests_matching("PATCH", "/api/v1/namespaces/default/pods/low-")) == marks
    assert apiserver.get("pods", "spare", "default") is not None
    bindings = apiserver.requests_matching("POST", "/api/v1/namespaces/default/pods/hi-")
    assert len({r.path for r in bindings if r.path.endswith("/binding")}) == 2
