"""Gang scheduling all-or-nothing, basic groups, and the scheduling gates around them."""

from __future__ import annotations

import pytest

from scheduler.api.config import DEFAULT_GATE_NAME
from tests.builders import make_node, make_pod, make_podgroup
from tests.scheduler.scenario import run

FOREIGN = "example.com/quota-check"


def members(count: int, cpu: str = "4", group: str = "train") -> list[object]:
    return [make_pod(f"{group}-{i}").req(cpu=cpu).group(group).obj() for i in range(count)]


@pytest.mark.parametrize(
    ("policy", "nodes", "want_bound", "want_message"),
    [
        pytest.param(("gang", 4), 4, 4, "", id="gang binds when every member fits"),
        pytest.param(
            ("gang", 4), 3, 0, "gang default/train needs 4 members, 3 can be placed", id="gang short of one binds none"
        ),
        pytest.param(("gang", 2), 3, 3, "", id="gang above minCount binds every member that fits"),
        pytest.param(("basic", 0), 3, 3, "", id="basic group binds what fits"),
    ],
)
def test_gang_all_or_nothing(policy: tuple[str, int], nodes: int, want_bound: int, want_message: str) -> None:
    group = make_podgroup("train")
    group = group.gang(policy[1]) if policy[0] == "gang" else group.basic()
    node_objs = [make_node(f"n{i}").cap(cpu="4").obj() for i in range(nodes)]
    outcome = run(*node_objs, group.obj(), *members(4))
    assert len(outcome.bound) == want_bound
    if want_message:
        for i in range(4):
            reason, message = outcome.pending(f"train-{i}") or ("", "")
            assert reason == "Unschedulable"
            assert message.startswith(want_message)


def test_gang_never_partially_bound_when_members_compete() -> None:
    """Two gangs of 3 on room for 4 pods: the first (older) gang binds whole, the second not at all."""
    nodes = [make_node(f"n{i}").cap(cpu="4").obj() for i in range(4)]
    a = make_podgroup("a").gang(3).obj()
    b = make_podgroup("b").gang(3).obj()
    outcome = run(*nodes, a, b, *members(3, group="a"), *members(3, group="b"))
    assert sorted(outcome.bound) == ["default/a-0", "default/a-1", "default/a-2"]


@pytest.mark.parametrize(
    ("pods", "group", "want_reason", "want_message", "want_gates"),
    [
        pytest.param(
            [make_pod("train-0").group("train").gate(DEFAULT_GATE_NAME)],
            make_podgroup("train").gang(2),
            "WaitingForGang",
            "1/2 members exist, gang needs 2",
            [DEFAULT_GATE_NAME],
            id="our gate stays until minCount members exist",
        ),
        pytest.param(
            [make_pod("train-0").group("train").gate(DEFAULT_GATE_NAME)],
            None,
            "WaitingForGang",
            "PodGroup default/train does not exist yet",
            [DEFAULT_GATE_NAME],
            id="our gate stays until the PodGroup exists",
        ),
        pytest.param(
            [make_pod("train-0").group("train").gate(FOREIGN), make_pod("train-1").group("train")],
            make_podgroup("train").gang(2),
            "SchedulingGated",
            f"waiting for scheduling gates: {FOREIGN}",
            [FOREIGN],
            id="foreign gate is never removed",
        ),
        pytest.param(
            [make_pod("train-0").group("train").gate(DEFAULT_GATE_NAME, FOREIGN), make_pod("train-1").group("train")],
            make_podgroup("train").gang(2),
            "SchedulingGated",
            f"waiting for scheduling gates: {FOREIGN}",
            [FOREIGN],
            id="ready gang loses our gate and keeps the foreign one",
        ),
        pytest.param(
            [make_pod("solo").gate(FOREIGN)], None, "SchedulingGated", f"waiting for scheduling gates: {FOREIGN}",
            [FOREIGN], id="lone pod with a foreign gate is parked",
        ),
    ],
)  # fmt: skip
def test_gates(pods: list[object], group: object, want_reason: str, want_message: str, want_gates: list[str]) -> None:
    objects = [make_node("n1").obj(), *(p.req(cpu="1").obj() for p in pods)]  # type: ignore[attr-defined]
    if group is not None:
        objects.append(group.obj())  # type: ignore[attr-defined]
    outcome = run(*objects)
    first = pods[0].raw["metadata"]["name"]  # type: ignore[attr-defined]
    assert outcome.pending(first) == (want_reason, want_message)
    assert outcome.gates(first) == want_gates


def test_ready_gang_loses_our_gate_and_binds() -> None:
    pods = [make_pod(f"train-{i}").req(cpu="1").group("train").gate(DEFAULT_GATE_NAME).obj() for i in range(3)]
    outcome = run(make_node("n1").obj(), make_podgroup("train").gang(3).obj(), *pods)
    assert len(outcome.bound) == 3
    assert all(outcome.gates(f"train-{i}") == [] for i in range(3))


def test_gated_member_holds_back_the_gang() -> None:
    """A gang needing every member cannot bind while one of them is held by a foreign gate."""
    pods = [
        make_pod("train-0").req(cpu="1").group("train").gate(FOREIGN).obj(),
        make_pod("train-1").req(cpu="1").group("train").obj(),
    ]
    outcome = run(make_node("n1").obj(), make_podgroup("train").gang(2).obj(), *pods)
    assert outcome.bound == {}
    reason, message = outcome.pending("train-1") or ("", "")
    assert (reason, message.split(".")[0]) == (
        "Unschedulable",
        "gang default/train needs 2 members, 1 can be placed (1 held back by scheduling gates)",
    )


@pytest.mark.parametrize(
    ("nodes", "want_status", "want_reason"),
    [
        pytest.param(2, "True", "Scheduled", id="bound gang is marked PodGroupScheduled"),
        pytest.param(1, "False", "Unschedulable", id="gang that cannot fit says why on the PodGroup"),
    ],
)
def test_pod_group_scheduled_condition(nodes: int, want_status: str, want_reason: str) -> None:
    node_objs = [make_node(f"n{i}").cap(cpu="4").obj() for i in range(nodes)]
    outcome = run(*node_objs, make_podgroup("train").gang(2).obj(), *members(2))
    group = outcome.objects.pod_groups["default/train"]
    condition = next(c for c in group.status.conditions if c.type == "PodGroupScheduled")
    assert (condition.status, condition.reason) == (want_status, want_reason)


def test_group_start_is_stamped_once_it_runs() -> None:
    """min-runtime counts from `last-start-timestamp`, written when the gang reaches minCount."""
    nodes = [make_node(f"n{i}").cap(cpu="4").obj() for i in range(2)]
    outcome = run(*nodes, make_podgroup("train").gang(2).obj(), *members(2))
    group = outcome.objects.pod_groups["default/train"]
    assert group.metadata.annotations["scheduling.phalanx.dev/last-start-timestamp"] == "2026-01-01T00:00:00Z"


def test_gang_waiting_for_its_victims_leaves_the_room_another_gangs_victims_left() -> None:
    """Two gangs preempted at once: the low one's victims are gone, the high one's still terminating. The high
    gang waits for its own nodes instead of taking the low gang's, which would make the low gang decide again
    (4 gangs preempting at once on the real server, issue 23)."""
    nodes = [make_node(f"n{i}").cap(cpu="4").obj() for i in range(4)]
    low = make_podgroup("low").gang(2).priority(100).obj()
    high = make_podgroup("high").gang(2).priority(1000).obj()
    low_members = [make_pod(f"low-{i}").req(cpu="4").group("low").nominated(f"n{i}").obj() for i in range(2)]
    high_members = [make_pod(f"high-{i}").req(cpu="4").group("high").nominated(f"n{i + 2}").obj() for i in range(2)]
    victims = [make_pod(f"v{i}").req(cpu="4").priority(0).on(f"n{i + 2}").terminating(grace=30).obj() for i in range(2)]
    outcome = run(*nodes, low, high, *low_members, *high_members, *victims)
    assert outcome.bound == {
        "default/low-0": "n0",
        "default/low-1": "n1",
        "default/high-0": "n2",
        "default/high-1": "n3",
    }


def test_gang_waiting_for_its_victims_keeps_its_own_nodes_against_lower_nominations() -> None:
    """On the nodes of its own nominations the priorities decide, as upstream: a lower pod nominated there
    too does not keep the waiting higher gang off them."""
    nodes = [make_node(f"n{i}").cap(cpu="4").obj() for i in range(3)]
    high = make_podgroup("high").gang(2).priority(1000).obj()
    high_members = [make_pod(f"high-{i}").req(cpu="4").group("high").nominated(f"n{i}").obj() for i in range(2)]
    low = make_pod("low").req(cpu="4").priority(100).nominated("n0").obj()
    blocker = make_pod("blocker").req(cpu="4").priority(5000).on("n2").obj()
    outcome = run(*nodes, high, *high_members, low, blocker)
    assert outcome.bound == {"default/high-0": "n0", "default/high-1": "n1"}
