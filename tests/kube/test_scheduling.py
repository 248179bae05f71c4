"""End to end on the loopback API server: gates removed, gangs bound, foreign pods counted, preemption."""

from __future__ import annotations

from pathlib import Path

from tests.apiserver import ApiServer
from tests.builders import make_node, make_pod, make_podgroup, make_priority_class
from tests.kube.replica import GATE, PG_GROUP, Replica, fast_config, node_of
from tests.polling import wait_for


def start(server: ApiServer, kubeconfig: Path, replicas: list[Replica], identity: str = "a") -> Replica:
    replica = Replica(server, kubeconfig, fast_config(), identity).start()
    replicas.append(replica)
    return replica


def test_gang_is_ungated_and_bound_end_to_end(apiserver: ApiServer, kubeconfig: Path, replicas: list[Replica]) -> None:
    for i in range(2):
        apiserver.create(make_node(f"n{i}").cap(cpu="4", memory="8Gi").json())
    apiserver.create(make_podgroup("train").gang(3).json())
    for i in range(2):
        apiserver.create(make_pod(f"w{i}").req(cpu="2").group("train").gate(GATE).json())
    start(apiserver, kubeconfig, replicas)
    wait_for(lambda: apiserver.requests_matching("GET", "/apis/scheduling.phalanx.dev/v1alpha1/queues"))
    assert all(node_of(apiserver, f"w{i}") is None for i in range(2)), "a gang below minCount must stay gated"
    apiserver.create(make_pod("w2").req(cpu="2").group("train").gate(GATE).json())
    wait_for(lambda: all(node_of(apiserver, f"w{i}") for i in range(3)))
    pods = [apiserver.get("pods", f"w{i}", "default") for i in range(3)]
    assert all(p is not None and "schedulingGates" not in p["spec"] for p in pods)
    assert len(apiserver.requests_matching("POST", "/api/v1/namespaces/default/pods/w")) == 3

    def scheduled() -> set[str]:
        events = apiserver.list("events", "default", group="events.k8s.io")
        return {e["regarding"]["name"] for e in events if e["reason"] == "Scheduled"}

    wait_for(lambda: scheduled() == {"w0", "w1", "w2"})


def test_pods_of_other_schedulers_and_nominations_count_on_nodes(
    apiserver: ApiServer, kubeconfig: Path, replicas: list[Replica]
) -> None:
    apiserver.create(make_node("full").cap(cpu="4", memory="8Gi").json())
    apiserver.create(make_node("held").cap(cpu="4", memory="8Gi").json())
    apiserver.create(make_node("free").cap(cpu="4", memory="8Gi").json())
    apiserver.create(make_pod("theirs").req(cpu="3").scheduler("default-scheduler").on("full").json())
    apiserver.create(make_priority_class("high", 1000).json())
    nominee = apiserver.create(make_pod("nominee").req(cpu="3").priority_class("high").json())
    nominee["status"]["nominatedNodeName"] = "held"
    apiserver.apply(nominee)
    for i in range(2):
        apiserver.create(make_pod(f"p{i}").req(cpu="2").json())
    start(apiserver, kubeconfig, replicas)
    wait_for(lambda: node_of(apiserver, "p0") and node_of(apiserver, "p1") and node_of(apiserver, "nominee"))
    assert node_of(apiserver, "nominee") == "held"
    assert {node_of(apiserver, "p0"), node_of(apiserver, "p1")} == {"free"}


def test_unschedulable_pod_gets_condition_and_one_event(
    apiserver: ApiServer, kubeconfig: Path, replicas: list[Replica]
) -> None:
    apiserver.create(make_node("small").cap(cpu="1", memory="1Gi").json())
    apiserver.create(make_pod("big").req(cpu="8").json())
    start(apiserver, kubeconfig, replicas)

    def unschedulable() -> bool:
        pod = apiserver.get("pods", "big", "default") or {}
        conditions = pod.get("status", {}).get("conditions", [])
        return any(c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable" for c in conditions)

    wait_for(unschedulable)
    apiserver.create(make_node("other").cap(cpu="1", memory="1Gi").label("x", "y").json())
    events = wait_for(
        lambda: [
            e for e in apiserver.list("events", "default", group="events.k8s.io") if e["reason"] == "FailedScheduling"
        ]
    )
    assert events[0]["type"] == "Warning"
    assert events[0]["regarding"]["name"] == "big"


def test_preemption_marks_deletes_victims_then_binds_gang(
    apiserver: ApiServer, kubeconfig: Path, replicas: list[Replica]
) -> None:
    apiserver.create(make_priority_class("low", 100).json())
    apiserver.create(make_priority_class("high", 10000).json())
    for i in range(2):
        apiserver.create(make_node(f"n{i}").cap(cpu="4", memory="8Gi").json())
        for j in range(2):
            apiserver.create(make_pod(f"low-{i}-{j}").req(cpu="2").priority_class("low").on(f"n{i}").grace(5).json())
    apiserver.create(make_podgroup("train").gang(2).priority_class("high").priority(10000).json())
    for i in range(2):
        apiserver.create(make_pod(f"hi-{i}").req(cpu="4").group("train").priority_class("high").json())
    start(apiserver, kubeconfig, replicas)
    wait_for(lambda: node_of(apiserver, "hi-0") and node_of(apiserver, "hi-1"), timeout=15)
    assert not [p for p in apiserver.list("pods", "default") if p["metadata"]["name"].startswith("low-")]
    writes = [
        (r.method, r.path.rsplit("/", 2)[-2:]) for r in apiserver.requests if r.method in ("PATCH", "DELETE", "POST")
    ]
    deletes = [i for i, (m, _) in enumerate(writes) if m == "DELETE"]
    marks = [i for i, (m, p) in enumerate(writes) if m == "PATCH" and p[-1] == "status" and p[0].startswith("low-")]
    binds = [i for i, (m, p) in enumerate(writes) if m == "POST" and p[-1] == "binding"]
    assert len(deletes) == 4
    assert max(marks) < max(deletes) < min(binds), "victims are marked, then deleted, then the gang binds"
    wait_for(
        lambda: (
            len([e for e in apiserver.list("events", "default", group="events.k8s.io") if e["reason"] == "Preempted"])
            == 4
        )
    )
    group = apiserver.get("podgroups", "train", "default", group=PG_GROUP)
    assert group is not None
