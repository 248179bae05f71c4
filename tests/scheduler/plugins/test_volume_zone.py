from __future__ import annotations

import pytest

from scheduler.api.meta import ApiModel
from tests.builders import NodeWrapper, VolumeWrapper, make_claim, make_node, make_pod, make_volume
from tests.scheduler.scenario import run

ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"


def node(name: str) -> NodeWrapper:
    return make_node(name).cap(cpu="4", memory="8Gi")


ZONED = [node("n1").label(ZONE, "a").label(REGION, "r1"), node("n2").label(ZONE, "b").label(REGION, "r1")]


@pytest.mark.parametrize(
    ("nodes", "volume", "want_node", "want_message"),
    [
        pytest.param(ZONED, make_volume("pv").label(ZONE, "b"), "n2", "", id="the volume's zone picks the node"),
        pytest.param(
            ZONED, make_volume("pv").label(BETA_ZONE, "b"), "n2", "", id="a beta zone label matches the node's GA one"
        ),
        pytest.param(
            [node("n1").label(BETA_ZONE, "a"), node("n2").label(BETA_ZONE, "b")],
            make_volume("pv").label(BETA_ZONE, "b"),
            "n2",
            "",
            id="beta labels on both sides match",
        ),
        pytest.param(ZONED, make_volume("pv").label(ZONE, "c__b"), "n2", "", id="zones joined by __ are each allowed"),
        pytest.param(
            ZONED,
            make_volume("pv").label(ZONE, "a").label(REGION, "r2"),
            None,
            "2 node(s) had no available volume zone",
            id="the region must match too",
        ),
        pytest.param(
            ZONED,
            make_volume("pv").label(ZONE, "c"),
            None,
            "2 node(s) had no available volume zone",
            id="a zone no node is in fits nowhere",
        ),
        pytest.param(
            [node("n1").label(ZONE, "a"), node("n2")],
            make_volume("pv").label(ZONE, "c"),
            "n2",
            "",
            id="a node with no zone label accepts any volume",
        ),
        pytest.param(
            ZONED,
            make_volume("pv").label(ZONE, "x__").label(BETA_ZONE, "b"),
            "n2",
            "",
            id="an unparsable zone label is ignored, the others still apply",
        ),
    ],
)
def test_volume_zone(nodes: list[NodeWrapper], volume: VolumeWrapper, want_node: str | None, want_message: str) -> None:
    claim = make_claim("data").bound("pv")
    pod = make_pod("p").req(cpu="1").claim("data")
    objects: list[ApiModel] = [*(n.obj() for n in nodes), volume.obj(), claim.obj(), pod.obj()]
    outcome = run(*objects)
    assert outcome.node_of("p") == want_node
    if want_node is None:
        reason, message = outcome.pending("p") or ("", "")
        assert reason == "Unschedulable"
        assert message.startswith(f"0/2 nodes are available: {want_message}."), message


def test_a_bound_claims_missing_volume_is_named() -> None:
    objects: list[ApiModel] = [
        *(n.obj() for n in ZONED),
        make_claim("data").bound("gone").obj(),
        make_pod("p").req(cpu="1").claim("data").obj(),
    ]
    outcome = run(*objects)
    assert outcome.pending("p") == (
        "Unschedulable",
        '0/2 nodes are available: persistentvolume "gone" not found.'
        " WorkloadPreemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.",
    )
