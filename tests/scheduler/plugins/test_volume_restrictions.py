from __future__ import annotations

from typing import Any

import pytest

from scheduler.api.meta import ApiModel
from scheduler.plugins.volume_restrictions import READ_WRITE_ONCE_POD_CONFLICT
from tests.builders import PodWrapper, make_claim, make_node, make_pod, make_volume
from tests.scheduler.scenario import run

NODES = [make_node(n).cap(cpu="4", memory="8Gi").obj() for n in ("n1", "n2")]
ONCE = [make_volume("pv").obj(), make_claim("data").access("ReadWriteOncePod").bound("pv").obj()]
SHARED = [make_volume("pv").obj(), make_claim("data").access("ReadWriteMany").bound("pv").obj()]


def iscsi(iqn: str, read_only: bool = False) -> dict[str, Any]:
    return {"iscsi": {"targetPortal": "10.0.0.1:3260", "iqn": iqn, "lun": 0, "readOnly": read_only}}


def rbd(monitors: list[str], image: str, read_only: bool = False) -> dict[str, Any]:
    return {"rbd": {"monitors": monitors, "image": image, "readOnly": read_only}}


def on_n1(**volume: Any) -> ApiModel:
    """A pod on n1 (the node the new pod would otherwise take) using `volume`."""
    return make_pod("running").req(cpu="1").on("n1").volume("disk", **volume).obj()


def on_n2() -> ApiModel:
    """Load on n2, so that n1 is the node the scheduler prefers."""
    return make_pod("heavy").req(cpu="2").on("n2").obj()


@pytest.mark.parametrize(
    ("pod", "cluster", "want_node", "want_message"),
    [
        pytest.param(
            make_pod("p").claim("data"),
            [*ONCE, make_pod("holder").req(cpu="1").on("n2").claim("data").obj()],
            None,
            f"2 {READ_WRITE_ONCE_POD_CONFLICT}",
            id="a ReadWriteOncePod claim in use on one node rejects every node",
        ),
        pytest.param(
            make_pod("p").claim("data").volume("disk", **iscsi("iqn.a")),
            [*ONCE, on_n1(**iscsi("iqn.a")), on_n2()],
            "n2",
            "",
            id="a ReadWriteOncePod claim no pod uses is free",
        ),
        pytest.param(
            make_pod("p").claim("data").volume("disk", **iscsi("iqn.a")),
            [*SHARED, on_n1(**iscsi("iqn.a")), make_pod("holder").req(cpu="2").on("n2").claim("data").obj()],
            "n2",
            "",
            id="a ReadWriteMany claim is shared",
        ),
        pytest.param(
            make_pod("p").volume("disk", **iscsi("iqn.a")),
            [on_n1(**iscsi("iqn.a")), on_n2()],
            "n2",
            "",
            id="an iSCSI disk written on a node is not available there",
        ),
        pytest.param(
            make_pod("p").volume("disk", **iscsi("iqn.a", read_only=True)),
            [
                make_pod("reader").req(cpu="2").on("n1").volume("disk", **iscsi("iqn.a", read_only=True)).obj(),
                make_pod("writer").req(cpu="1").on("n2").volume("disk", **iscsi("iqn.a")).obj(),
            ],
            "n1",
            "",
            id="an iSCSI disk read-only on both sides is shared, not one written",
        ),
        pytest.param(
            make_pod("p").volume("disk", **rbd(["m1", "m2"], "img")),
            [on_n1(**rbd(["m2", "m3"], "img")), on_n2()],
            "n2",
            "",
            id="an RBD image reached through a shared monitor conflicts",
        ),
        pytest.param(
            make_pod("p").volume("disk", **iscsi("iqn.a")),
            [on_n1(**iscsi("iqn.a")), make_pod("other").req(cpu="1").on("n2").volume("disk", **iscsi("iqn.a")).obj()],
            None,
            "2 node(s) had no available disk",
            id="a disk written on every node fits nowhere",
        ),
    ],
)
def test_volume_restrictions(
    pod: PodWrapper, cluster: list[ApiModel], want_node: str | None, want_message: str
) -> None:
    outcome = run(*NODES, *cluster, pod.req(cpu="1").obj())
    assert outcome.node_of("p") == want_node
    if want_node is None:
        reason, message = outcome.pending("p") or ("", "")
        assert reason == "Unschedulable"
        assert message.startswith(f"0/2 nodes are available: {want_message}."), message


def test_two_pending_pods_of_one_read_write_once_pod_claim_bind_one() -> None:
    """The first placed takes the claim: the second is then rejected everywhere, within the same pass."""
    pods = [make_pod(name).req(cpu="1").claim("data").obj() for name in ("a", "b")]
    outcome = run(*NODES, *ONCE, *pods)
    assert outcome.node_of("a") is not None
    assert outcome.node_of("b") is None
    reason, message = outcome.pending("b") or ("", "")
    assert reason == "Unschedulable"
    assert message.startswith(f"0/2 nodes are available: 2 {READ_WRITE_ONCE_POD_CONFLICT}."), message


def test_preemption_takes_the_claims_holder() -> None:
    holder = make_pod("holder").req(cpu="1").priority(1).on("n2").claim("data").obj()
    preemptor = make_pod("p").req(cpu="1").priority(100).claim("data").obj()
    outcome = run(*NODES, *ONCE, holder, preemptor, preempt=True)
    assert [p["victim"] for p in outcome.report["preemptions"]] == ["default/holder"]
    assert outcome.node_of("p") == "n2"
