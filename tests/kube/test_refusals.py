"""A write the API server refuses fails only its own unit (docs/DESIGN.md, invariant 7; issue 11, defect 1).

The refused unit gets a Warning Event and is retried with backoff; the pass goes on, so other units
are scheduled meanwhile, and the refused one is placed once the server accepts the write again.
Refusals come from the loopback server's fault injection, with the bodies kube-apiserver sends.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.apiserver import ApiServer
from tests.apiserver.server import status_body
from tests.builders import make_node, make_pod, make_podgroup, make_priority_class
from tests.kube.replica import GATE, Replica, fast_config, node_of
from tests.polling import wait_for

FORBIDDEN = status_body(
    403,
    "Forbidden",
    "pods \"victim\" is forbidden: ValidatingAdmissionPolicy 'deny' with binding 'deny' denied request",
    {"name": "victim", "kind": "pods"},
)
INVALID = status_body(
    422,
    "Invalid",
    'Pod "victim" is invalid: status.conditions: Invalid value: "DisruptionTarget": refused by a test',
    {"name": "victim", "kind": "Pod"},
)
CONFLICT = status_body(
    409,
    "Conflict",
    'Operation cannot be fulfilled on pods "victim": the object has been modified',
    {"name": "victim", "kind": "pods"},
)


def start(server: ApiServer, kubeconfig: Path, replicas: list[Replica]) -> Replica:
    replica = Replica(server, kubeconfig, fast_config(), "a").start()
    replicas.append(replica)
    return replica


def events(server: ApiServer, namespace: str, name: str, reason: str, note: str = "") -> list[dict[str, Any]]:
    """Events about `name` with this reason whose note contains `note`."""
    found = server.list("events", namespace, group="events.k8s.io")
    return [e for e in found if e["regarding"]["name"] == name and e["reason"] == reason and note in e["note"]]


def nominations(server: ApiServer, namespace: str) -> list[str]:
    """Pods whose status patches set a `nominatedNodeName`, in request order."""
    prefix = f"/api/v1/namespaces/{namespace}/pods/"
    return [
        r.path.removeprefix(prefix).removesuffix("/status")
        for r in server.requests_matching("PATCH", prefix)
        if r.path.endswith("/status") and ((r.body or {}).get("status") or {}).get("nominatedNodeName")
    ]


def test_basic_group_partly_bound_nominates_only_pending_members(
    apiserver: ApiServer, kubeconfig: Path, replicas: list[Replica]
) -> None:
    """m1 and m2 bind in the pass whose preemption is for m3 and m4: only those two are nominated."""
    apiserver.create(make_priority_class("low", 10).json())
    apiserver.create(make_priority_class("high", 100).json())
    for i in range(2):
        apiserver.create(make_node(f"node-{i}").cap(cpu="4", memory="16Gi").json())
    apiserver.create(make_pod("victim").ns("d1").req(cpu="3").priority_class("low").on("node-0").json())
    apiserver.create(make_podgroup("basic").ns("d1").basic().priority_class("high").json())
    for i in range(1, 5):
        apiserver.create(make_pod(f"m{i}").ns("d1").req(cpu="2").group("basic").priority_class("high").json())
    start(apiserver, kubeconfig, replicas)
    wait_for(lambda: all(node_of(apiserver, f"m{i}", "d1") for i in range(1, 5)))
    assert {f"m{i}": node_of(apiserver, f"m{i}", "d1") for i in range(1, 5)} == {
        "m1": "node-1",
        "m2": "node-1",
        "m3": "node-0",
        "m4": "node-0",
    }
    assert sorted(set(nominations(apiserver, "d1"))) == ["m3", "m4"]
    assert apiserver.get("pods", "victim", "d1") is None


def urgent_and_small(apiserver: ApiServer) -> None:
    """`urgent` must preempt `victim` on n0 (n1 holds `keeper`); `small`, in another namespace, fits on n1 as is."""
    apiserver.create(make_priority_class("low", 10).json())
    apiserver.create(make_priority_class("high", 1000).json())
    apiserver.create(make_node("n0").cap(cpu="4", memory="8Gi").json())
    apiserver.create(make_node("n1").cap(cpu="4", memory="8Gi").json())
    apiserver.create(make_pod("victim").ns("a").req(cpu="4").priority_class("low").on("n0").json())
    apiserver.create(make_pod("keeper").ns("a").req(cpu="2").priority_class("high").on("n1").json())
    apiserver.create(make_pod("urgent").ns("a").req(cpu="4").priority_class("high").json())
    apiserver.create(make_pod("small").ns("b").req(cpu="1").json())


@pytest.mark.parametrize(
    ("status", "body"),
    [
        pytest.param(422, INVALID, id="422 Invalid"),
        pytest.param(403, FORBIDDEN, id="403 Forbidden (an admission policy)"),
        pytest.param(409, CONFLICT, id="409 Conflict"),
        pytest.param(503, None, id="503 after the client's retries"),
    ],
)
def test_refused_preemption_write_fails_only_its_unit(
    apiserver: ApiServer, kubeconfig: Path, replicas: list[Replica], status: int, body: dict[str, Any] | None
) -> None:
    """The victim's DisruptionTarget patch is refused: `urgent` waits with a Warning, `small` is bound meanwhile."""
    urgent_and_small(apiserver)
    refusal = apiserver.fail("PATCH", "/api/v1/namespaces/a/pods/victim/status", status, times=10_000, body=body)
    start(apiserver, kubeconfig, replicas)
    wait_for(lambda: node_of(apiserver, "small", "b") == "n1")
    warning = wait_for(lambda: events(apiserver, "a", "urgent", "FailedScheduling", "refused a write"))[0]
    assert warning["type"] == "Warning"
    assert f"set_condition a/victim: {status}" in warning["note"], warning["note"]
    wait_for(lambda: refusal.remaining < 10_000 - 12, timeout=15)  # retried, pass after pass
    assert node_of(apiserver, "urgent", "a") is None
    assert apiserver.get("pods", "victim", "a") is not None, "an unmarked victim is never deleted"

    def told_why() -> bool:
        urgent = apiserver.get("pods", "urgent", "a") or {}
        scheduled = next((c for c in urgent.get("status", {}).get("conditions", []) if c["type"] == "PodScheduled"), {})
        return (scheduled.get("status"), scheduled.get("reason")) == ("False", "SchedulerError")

    wait_for(told_why)  # between retries: each retry decides again (Unschedulable) before its write is refused
    refusal.remaining = 0
    wait_for(lambda: node_of(apiserver, "urgent", "a") == "n0")
    assert apiserver.get("pods", "victim", "a") is None


def test_refused_binding_is_retried_and_other_pods_bind(
    apiserver: ApiServer, kubeconfig: Path, replicas: list[Replica]
) -> None:
    """A Binding refused for good (403, not retried by the client) puts the pod back in the queue, never lost."""
    apiserver.create(make_node("n0").cap(cpu="4", memory="8Gi").json())
    apiserver.create(make_pod("p").req(cpu="1").json())
    apiserver.create(make_pod("q").req(cpu="1").json())
    body = status_body(403, "Forbidden", 'pods "p" is forbidden: bindings of p are refused by a test', {"name": "p"})
    refusal = apiserver.fail("POST", "/api/v1/namespaces/default/pods/p/binding", 403, times=3, body=body)
    start(apiserver, kubeconfig, replicas)
    wait_for(lambda: node_of(apiserver, "q") == "n0")
    wait_for(lambda: node_of(apiserver, "p") == "n0")
    assert refusal.remaining == 0
    warning = wait_for(lambda: events(apiserver, "default", "p", "FailedScheduling"))[0]
    assert warning["type"] == "Warning"
    assert warning["note"].startswith("Binding rejected: 403 Forbidden"), warning["note"]
    assert len(apiserver.requests_matching("POST", "/api/v1/namespaces/default/pods/p/binding")) == 4


def test_refused_gate_removal_backs_off_and_the_gang_binds_whole(
    apiserver: ApiServer, kubeconfig: Path, replicas: list[Replica]
) -> None:
    """w0's gate removal is refused: w0 is not left assumed (its Binding waited for the gate), the gang
    retries after a backoff rather than at once, and both members bind once the server accepts."""
    apiserver.create(make_node("n0").cap(cpu="8", memory="8Gi").json())
    apiserver.create(make_podgroup("train").gang(2).json())
    for i in range(2):
        apiserver.create(make_pod(f"w{i}").req(cpu="1").group("train").gate(GATE).json())
    body = status_body(403, "Forbidden", 'pods "w0" is forbidden: refused by a test', {"name": "w0", "kind": "pods"})
    refusal = apiserver.fail("PATCH", "/api/v1/namespaces/default/pods/w0", 403, times=10_000, body=body)
    start(apiserver, kubeconfig, replicas)
    warning = wait_for(lambda: events(apiserver, "default", "w0", "FailedScheduling", "Removing scheduling gate"))[0]
    assert warning["note"].startswith(f"Removing scheduling gate {GATE}: 403 Forbidden"), warning["note"]
    wait_for(lambda: 10_000 - refusal.remaining >= 2)  # retried
    time.sleep(2)
    attempts = 10_000 - refusal.remaining
    assert attempts < 40, f"{attempts} gate removals in 2 s: retried with backoff, not pass after pass"
    assert node_of(apiserver, "w0") is None
    refusal.remaining = 0
    wait_for(lambda: node_of(apiserver, "w0") and node_of(apiserver, "w1"))


def test_a_write_that_times_out_fails_only_its_unit(
    apiserver: ApiServer, kubeconfig: Path, replicas: list[Replica]
) -> None:
    """The victim's DisruptionTarget patch gets no answer (every retry of one attempt hangs past the
    client's timeout): `urgent` gets a Warning and is retried, `small` is bound in the same pass."""
    urgent_and_small(apiserver)
    hung = apiserver.hang("PATCH", "/api/v1/namespaces/a/pods/victim/status", seconds=2, times=10_000)
    start(apiserver, kubeconfig, replicas)
    warning = wait_for(lambda: events(apiserver, "a", "urgent", "FailedScheduling", "refused a write"), timeout=40)[0]
    assert "set_condition a/victim: no answer" in warning["note"], warning["note"]
    wait_for(lambda: node_of(apiserver, "small", "b") == "n1")
    hung.remaining = 0
    wait_for(lambda: node_of(apiserver, "urgent", "a") == "n0", timeout=40)
