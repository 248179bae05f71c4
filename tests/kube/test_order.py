"""The call table (`scheduler/cluster/kube/order.py`): how a newer call relates to an older one for the same pod."""

from __future__ import annotations

import pytest

from scheduler.api.meta import Condition
from scheduler.cluster.kube.calls import (
    Binding,
    Call,
    ClaimAllocation,
    ClaimBinding,
    Deletion,
    GateRemoval,
    Nomination,
    PodCondition,
    PodScheduled,
)
from scheduler.cluster.kube.order import Order, merges, repeats, rule
from tests.builders import make_pod

POD = make_pod("p").obj()
KEY = "default/p"
GATE = GateRemoval(KEY, KEY, pod=POD, gate="g")
VOLUMES = ClaimBinding(KEY, KEY, pod=POD, node="n0")
CLAIMS = ClaimAllocation(KEY, KEY, pod=POD, node="n0")
BIND = Binding(KEY, KEY, pod=POD, node="n0")
UNSCHEDULABLE = PodScheduled(KEY, KEY, pod=POD, condition=Condition(type="PodScheduled", status="False"))
TARGET = PodCondition(KEY, KEY, pod=POD, condition=Condition(type="DisruptionTarget", status="True"))
DELETE = Deletion(KEY, KEY, pod=POD)
NOMINATE = Nomination(KEY, KEY, pod=POD, node="n0")


@pytest.mark.parametrize(
    ("newer", "older", "want_order"),
    [
        pytest.param(BIND, GATE, Order.REQUIRES, id="a Binding is sent only once its gate removal went through"),
        pytest.param(BIND, VOLUMES, Order.REQUIRES, id="a Binding is sent only once its volumes are bound"),
        pytest.param(BIND, CLAIMS, Order.REQUIRES, id="a Binding is sent only once its claims are allocated"),
        pytest.param(BIND, UNSCHEDULABLE, Order.AFTER, id="a Binding waits for a PodScheduled write on the wire"),
        pytest.param(BIND, TARGET, Order.FREE, id="a Binding does not wait for a DisruptionTarget"),
        pytest.param(CLAIMS, VOLUMES, Order.REQUIRES, id="claims are allocated once the volumes are bound"),
        pytest.param(CLAIMS, UNSCHEDULABLE, Order.FREE, id="a PreBind does not wait for a PodScheduled write"),
        pytest.param(DELETE, TARGET, Order.REQUIRES, id="a victim is deleted once its DisruptionTarget is written"),
        pytest.param(DELETE, UNSCHEDULABLE, Order.FREE, id="a deletion does not wait for a PodScheduled write"),
        pytest.param(TARGET, UNSCHEDULABLE, Order.AFTER, id="pod conditions are written in order"),
        pytest.param(NOMINATE, NOMINATE, Order.AFTER, id="nominations are written in order"),
    ],
)
def test_what_a_call_follows(newer: Call, older: Call, want_order: Order) -> None:
    assert rule(newer, older).order is want_order


def test_a_binding_supersedes_a_queued_pod_scheduled_write_and_nothing_else() -> None:
    assert rule(BIND, UNSCHEDULABLE).supersedes
    assert not any(rule(BIND, older).supersedes for older in (GATE, VOLUMES, CLAIMS, TARGET, NOMINATE))


def test_a_condition_merges_only_with_one_of_its_type() -> None:
    newer = PodScheduled(KEY, KEY, pod=POD, condition=Condition(type="PodScheduled", status="False", message="b"))
    assert merges(newer, UNSCHEDULABLE)
    assert not merges(TARGET, UNSCHEDULABLE)
    assert merges(NOMINATE, Nomination(KEY, KEY, pod=POD, node="n1"))


def test_a_binding_repeats_one_until_seen_a_gate_removal_only_until_answered() -> None:
    assert repeats(BIND, BIND, answered=True)
    assert repeats(GATE, GATE, answered=False)
    assert not repeats(GATE, GATE, answered=True)
    assert not repeats(BIND, GATE, answered=False)
