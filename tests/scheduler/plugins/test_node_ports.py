"""NodePorts: a host port is free on a node, by protocol and host IP (kube-scheduler's `HostPortInfo`)."""

from __future__ import annotations

import pytest

from tests.builders import PodWrapper, make_node, make_pod, make_podgroup, make_priority_class
from tests.scheduler.scenario import run

REASON = "node(s) didn't have free ports for the requested pod ports"


@pytest.mark.parametrize(
    ("running", "pod", "want_bound"),
    [
        pytest.param(make_pod("r").host_port(8080), make_pod("p").host_port(8080), False, id="same port taken"),
        pytest.param(make_pod("r").host_port(8080), make_pod("p").host_port(8081), True, id="another port is free"),
        pytest.param(
            make_pod("r").host_port(8080, protocol="UDP"), make_pod("p").host_port(8080), True, id="UDP and TCP differ"
        ),
        pytest.param(
            make_pod("r").host_port(8080, ip="10.0.0.1"),
            make_pod("p").host_port(8080, ip="10.0.0.2"),
            True,
            id="two host IPs share a port",
        ),
        pytest.param(
            make_pod("r").host_port(8080, ip="10.0.0.1"),
            make_pod("p").host_port(8080),
            False,
            id="0.0.0.0 conflicts with any IP",
        ),
        pytest.param(
            make_pod("r").host_port(8080),
            make_pod("p").host_port(8080, ip="10.0.0.2"),
            False,
            id="any IP conflicts with 0.0.0.0",
        ),
        pytest.param(
            make_pod("r").host_network(8080),
            make_pod("p").host_port(8080),
            False,
            id="hostNetwork takes container ports",
        ),
        pytest.param(make_pod("r").req(cpu="1"), make_pod("p").host_port(8080), True, id="no port in use"),
    ],
)
def test_node_ports(running: PodWrapper, pod: PodWrapper, want_bound: bool) -> None:
    outcome = run(make_node("n1").obj(), running.req(cpu="1").on("n1").obj(), pod.req(cpu="1").obj())
    assert (outcome.node_of("p") == "n1") is want_bound
    if not want_bound:
        reason, message = outcome.pending("p") or ("", "")
        assert (reason, f"1 {REASON}" in message) == ("Unschedulable", True), message


def test_two_pods_asking_for_one_port_go_to_two_nodes() -> None:
    outcome = run(
        make_node("n1").obj(),
        make_node("n2").obj(),
        *(make_pod(f"p{i}").req(cpu="1").host_port(9000).obj() for i in range(3)),
    )
    assert sorted(outcome.bound.values()) == ["n1", "n2"]
    _, message = outcome.pending("p2") or ("", "")
    assert f"0/2 nodes are available: 2 {REASON}." in message


def test_preemption_frees_a_host_port_and_spares_the_rest() -> None:
    """The only node holds the port in a priority-10 pod: a priority-1000 pod preempts that pod alone."""
    outcome = run(
        make_priority_class("low", 10).obj(),
        make_priority_class("high", 1000).obj(),
        make_node("n1").obj(),
        make_pod("holder").priority_class("low").priority(10).req(cpu="1").host_port(8080).on("n1").obj(),
        make_pod("bystander").priority_class("low").priority(10).req(cpu="1").on("n1").obj(),
        make_pod("p").priority_class("high").req(cpu="1").host_port(8080).obj(),
        preempt=True,
    )
    assert outcome.node_of("p") == "n1"
    assert [v["victim"] for v in outcome.report["preemptions"]] == ["default/holder"]


def test_gang_preempts_the_port_holders_and_puts_one_member_a_node() -> None:
    """Two members want host port 8080; each node runs a priority-10 pod on that port and one without it. The gang
    takes only the two holders, and never two members on one node."""
    members = [make_pod(f"m{i}").group("g").priority_class("high").req(cpu="1").host_port(8080) for i in range(2)]
    running = [
        make_pod(f"{kind}-{node}").priority_class("low").priority(10).req(cpu="1").on(node)
        for node in ("n1", "n2")
        for kind in ("holder", "bystander")
    ]
    for pod in running[::2]:
        pod.host_port(8080)
    outcome = run(
        make_priority_class("low", 10).obj(),
        make_priority_class("high", 1000).obj(),
        make_podgroup("g").gang(2).priority_class("high").obj(),
        make_node("n1").obj(),
        make_node("n2").obj(),
        *(p.obj() for p in running),
        *(m.obj() for m in members),
        preempt=True,
    )
    assert sorted(v["victim"] for v in outcome.report["preemptions"]) == ["default/holder-n1", "default/holder-n2"]
    assert sorted(outcome.bound.values()) == ["n1", "n2"]
