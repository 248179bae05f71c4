from __future__ import annotations

import pytest

from tests.builders import make_node, make_pod
from tests.scheduler.scenario import run

NODES = [
    make_node("a").label("zone", "z1").label("gen", "3").obj(),
    make_node("b").label("zone", "z2").label("gen", "5").label("ssd", "true").obj(),
]


@pytest.mark.parametrize(
    ("pod", "want_node"),
    [
        pytest.param(make_pod("p").node_selector(zone="z2"), "b", id="nodeSelector picks the labelled node"),
        pytest.param(
            make_pod("p").node_selector(zone="z9"), None, id="nodeSelector matching no node leaves pod pending"
        ),
        pytest.param(make_pod("p").node_affinity_in("zone", "z1"), "a", id="In matches a listed value"),
        pytest.param(make_pod("p").node_affinity_in("zone", "z1", operator="NotIn"), "b", id="NotIn excludes a value"),
        pytest.param(make_pod("p").node_affinity_in("ssd", operator="Exists"), "b", id="Exists needs the label"),
        pytest.param(make_pod("p").node_affinity_in("ssd", operator="DoesNotExist"), "a", id="DoesNotExist forbids it"),
        pytest.param(make_pod("p").node_affinity_in("gen", "4", operator="Gt"), "b", id="Gt compares integers"),
        pytest.param(make_pod("p").node_affinity_in("gen", "4", operator="Lt"), "a", id="Lt compares integers"),
        pytest.param(
            make_pod("p").node_affinity_in("zone", "x", operator="Gt"), None, id="Gt on a non-integer matches nothing"
        ),
        pytest.param(
            make_pod("p").node_affinity_in("zone", "z9").node_affinity_in("zone", "z2"), "b", id="terms are ORed"
        ),
        pytest.param(
            make_pod("p").node_selector(zone="z1").node_affinity_in("ssd", operator="Exists"),
            None,
            id="nodeSelector and affinity must both hold",
        ),
    ],
)
def test_node_affinity(pod: object, want_node: str | None) -> None:
    outcome = run(*NODES, pod.req(cpu="1").obj())  # type: ignore[attr-defined]
    assert outcome.node_of("p") == want_node
    if want_node is None:
        reason, message = outcome.pending("p") or ("", "")
        assert reason == "Unschedulable"
        assert "2 node(s) didn't match Pod's node affinity/selector" in message
