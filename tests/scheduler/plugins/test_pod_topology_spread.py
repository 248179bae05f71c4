"""PodTopologySpread: DoNotSchedule constraints keep the skew between domains within maxSkew."""

from __future__ import annotations

from collections import Counter

import pytest

from tests.builders import PodWrapper, make_config, make_node, make_pod, make_podgroup, make_priority_class
from tests.scheduler.scenario import run

ZONE = "topology.kubernetes.io/zone"
SKEW = "node(s) didn't match pod topology spread constraints"
MISSING = "node(s) didn't match pod topology spread constraints (missing required label)"


def zones(**counts: int) -> list[object]:
    """`zones(a=2, b=1)`: nodes a-0, a-1 in zone a, b-0 in zone b."""
    return [make_node(f"{zone}-{i}").label(ZONE, zone).obj() for zone, n in counts.items() for i in range(n)]


def web(name: str, **spread: object) -> PodWrapper:
    return make_pod(name).label("app", "web").req(cpu="1").spread(ZONE, app="web", **spread)  # type: ignore[arg-type]


def test_four_replicas_spread_over_two_zones_even_when_scoring_packs() -> None:
    packing = make_config(scoringStrategy={"type": "MostAllocated"})
    outcome = run(*zones(a=2, b=2), *(web(f"w{i}").obj() for i in range(4)), config=packing)
    assert Counter(node[0] for node in outcome.bound.values()) == {"a": 2, "b": 2}


def test_a_zone_without_room_holds_the_skew() -> None:
    """Zone b is full: one pod goes to a (skew 1), the second would make skew 2 and waits."""
    outcome = run(
        *zones(a=1, b=1),
        make_pod("full").req(cpu="8").on("b-0").obj(),
        web("w0").obj(),
        web("w1").obj(),
    )
    assert sorted(outcome.bound.values()) == ["a-0"]
    pending = next(p for p in outcome.report["pending"])
    assert f"1 {SKEW}" in pending["message"] and "1 Insufficient cpu" in pending["message"]


@pytest.mark.parametrize(
    ("running", "pod", "want_node"),
    [
        pytest.param(
            [web("r0").on("a-0")], web("p", max_skew=1), "b-0", id="the emptier zone takes the pod at maxSkew 1"
        ),
        pytest.param(
            [web("r0").on("a-0")],
            web("p", max_skew=2).node_selector(**{ZONE: "a"}),
            "a-0",
            id="nodeAffinityPolicy Honor counts only the zones the pod may go to",
        ),
        pytest.param(
            [web("r0").on("a-0")],
            web("p", max_skew=1, node_affinity_policy="Ignore").node_selector(**{ZONE: "a"}),
            None,
            id="nodeAffinityPolicy Ignore counts the other zone too",
        ),
        pytest.param(
            [web("r0").on("a-0"), web("r1").on("b-0")],
            web("p", max_skew=1),
            "a-0",
            id="two zones even take one more",
        ),
        pytest.param(
            [web("r0").on("a-0"), web("r1").on("b-0")],
            web("p", max_skew=1, min_domains=3),
            None,
            id="fewer domains than minDomains make the smallest count 0",
        ),
        pytest.param(
            [make_pod("other").label("app", "db").req(cpu="1").on("a-0")],
            web("p", max_skew=1).node_selector(**{ZONE: "a"}),
            "a-0",
            id="pods the selector does not match do not count",
        ),
        pytest.param(
            [web("r0").terminating().on("a-0")],
            web("p", max_skew=1).node_selector(**{ZONE: "a"}),
            "a-0",
            id="terminating pods do not count",
        ),
        pytest.param(
            [web("r0").on("a-0")],
            web("p", max_skew=1, when="ScheduleAnyway").node_selector(**{ZONE: "a"}),
            "a-0",
            id="ScheduleAnyway does not filter",
        ),
        pytest.param(
            [web("r0").label("rev", "1").on("a-0")],
            web("p", max_skew=1, match_label_keys=["rev"]).label("rev", "2").node_selector(**{ZONE: "a"}),
            "a-0",
            id="matchLabelKeys counts only the same revision",
        ),
    ],
)
def test_pod_topology_spread(running: list[PodWrapper], pod: PodWrapper, want_node: str | None) -> None:
    outcome = run(*zones(a=1, b=1), *(r.obj() for r in running), pod.obj())
    assert outcome.node_of("p") == want_node
    if want_node is None:
        _, message = outcome.pending("p") or ("", "")
        assert SKEW in message, message


def test_a_node_without_the_key_is_rejected_as_missing_the_label() -> None:
    outcome = run(make_node("bare").obj(), web("p").obj())
    _, message = outcome.pending("p") or ("", "")
    assert f"0/1 nodes are available: 1 {MISSING}." in message


def test_a_gang_counts_the_members_placed_in_its_cycle() -> None:
    group = make_podgroup("g").gang(4).obj()
    members = [
        make_pod(f"m{i}").group("g").label("app", "g").req(cpu="1").spread(ZONE, app="g").obj() for i in range(4)
    ]
    outcome = run(group, *zones(a=1, b=1), *members)
    assert Counter(outcome.bound.values()) == {"a-0": 2, "b-0": 2}


def test_preemption_removes_the_matching_pods_that_skew_the_node_and_spares_the_rest() -> None:
    """As kube-scheduler: zone b is held by pods of higher priority, zone a's node runs two priority-10 web pods
    (skew 2 with b's 0) beside a priority-10 pod of another app. A priority-1000 web pod, maxSkew 1, preempts the two
    web pods on a-0, which brings zone a back to 0, and spares the other pod."""
    outcome = run(
        make_priority_class("low", 10).obj(),
        make_priority_class("high", 1000).obj(),
        *zones(a=1, b=1),
        *(web(f"r{i}").priority_class("low").priority(10).on("a-0").obj() for i in range(2)),
        make_pod("other").label("app", "db").req(cpu="1").priority_class("low").priority(10).on("a-0").obj(),
        make_pod("vip").req(cpu="8").priority_class("high").priority(1000).on("b-0").obj(),
        web("p").priority_class("high").obj(),
        preempt=True,
    )
    assert sorted(v["victim"] for v in outcome.report["preemptions"]) == ["default/r0", "default/r1"]
    assert outcome.node_of("p") == "a-0"
