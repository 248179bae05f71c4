from __future__ import annotations

import pytest

from tests.builders import GPU, PodWrapper, make_node, make_pod
from tests.scheduler.scenario import run


@pytest.mark.parametrize(
    ("pod", "want_bound", "want_message"),
    [
        pytest.param(make_pod("p").req(cpu="4"), True, "", id="exactly the free cpu fits"),
        pytest.param(make_pod("p").req(cpu="4001m"), False, "1 Insufficient cpu", id="one millicore too many"),
        pytest.param(make_pod("p").req(memory="8Gi"), True, "", id="exactly the free memory fits"),
        pytest.param(make_pod("p").req(memory="8193Mi"), False, "1 Insufficient memory", id="memory short"),
        pytest.param(
            make_pod("p").req(ephemeral_storage="11Gi"), False, "1 Insufficient ephemeral-storage", id="disk short"
        ),
        pytest.param(make_pod("p").req(gpu=2), True, "", id="extended resource fits"),
        pytest.param(make_pod("p").req(gpu=3), False, f"1 Insufficient {GPU}", id="extended resource short"),
        pytest.param(
            make_pod("p").req(**{"example.com/fpga": "1"}),
            False,
            "1 Insufficient example.com/fpga",
            id="unknown resource",
        ),
        pytest.param(
            make_pod("p").req(cpu="1").init(cpu="5"), False, "1 Insufficient cpu", id="largest init container counts"
        ),
        pytest.param(
            make_pod("p").req(cpu="3").init(cpu="1", sidecar=True), True, "", id="sidecar adds to app containers"
        ),
        pytest.param(
            make_pod("p").req(cpu="3").init(cpu="2", sidecar=True), False, "1 Insufficient cpu", id="sidecar overflow"
        ),
        pytest.param(make_pod("p").req(cpu="3500m").overhead(cpu="600m"), False, "1 Insufficient cpu", id="overhead"),
    ],
)
def test_node_resources_fit(pod: PodWrapper, want_bound: bool, want_message: str) -> None:
    node = make_node("n1").cap(cpu="8", memory="16Gi", gpu=4, ephemeral_storage="20Gi").obj()
    running = make_pod("r").req(cpu="4", memory="8Gi", gpu=2, ephemeral_storage="10Gi").on("n1").obj()
    outcome = run(node, running, pod.obj())
    assert (outcome.node_of("p") == "n1") is want_bound
    if not want_bound:
        reason, message = outcome.pending("p") or ("", "")
        assert reason == "Unschedulable"
        assert message.startswith(f"0/1 nodes are available: {want_message}.")


@pytest.mark.parametrize(
    ("running", "want_time"),
    [
        pytest.param(
            make_pod("r").req(cpu="8").on("n1").terminating(grace=30),
            "2026-01-01T00:00:30Z",
            id="terminating pod holds room until its grace period ends",
        ),
        pytest.param(
            make_pod("r").req(cpu="8").on("n1").phase("Succeeded"),
            "2026-01-01T00:00:00Z",
            id="succeeded pod holds nothing",
        ),
        pytest.param(
            make_pod("r").req(cpu="8").on("n1").phase("Failed"), "2026-01-01T00:00:00Z", id="failed pod holds nothing"
        ),
    ],
)
def test_what_occupies_a_node(running: PodWrapper, want_time: str) -> None:
    outcome = run(make_node("n1").obj(), running.obj(), make_pod("p").req(cpu="1").obj())
    assert outcome.report["bindings"] == [{"pod": "default/p", "node": "n1", "time": want_time}]


def test_pod_count_limit() -> None:
    node = make_node("n1").cap(pods="2").obj()
    pods = [make_pod(f"p{i}").req(cpu="100m").obj() for i in range(3)]
    outcome = run(node, *pods)
    assert sorted(outcome.bound) == ["default/p0", "default/p1"]
    reason, message = outcome.pending("p2") or ("", "")
    assert (reason, message.split(" WorkloadPreemption")[0]) == (
        "Unschedulable",
        "0/1 nodes are available: 1 Too many pods.",
    )


def test_nominated_pod_holds_room_against_lower_priority() -> None:
    node = make_node("n1").cap(cpu="4").obj()
    nominated = make_pod("big").req(cpu="3").priority(100).nominated("n1").gate("example.com/hold").obj()
    low = make_pod("low").req(cpu="2").priority(10).obj()
    high = make_pod("high").req(cpu="2").priority(200).obj()
    assert run(node, nominated, low).node_of("low") is None
    assert run(node, nominated, high).node_of("high") == "n1"
