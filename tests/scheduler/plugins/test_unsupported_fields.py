"""UnsupportedFields: a pod asking for what phalanx-scheduler does not implement waits and says so, never placed as
if the field were absent, and nothing is preempted for it."""

from __future__ import annotations

import pytest

from tests.builders import make_node, make_pod, make_podgroup, make_priority_class
from tests.scheduler.scenario import run


@pytest.mark.parametrize(
    ("objects", "want_field"),
    [
        pytest.param(
            [
                make_podgroup("g")
                .native()
                .gang(1)
                .spec_field("schedulingConstraints", {"topology": [{"key": "rack"}]}),
                make_pod("p").req(cpu="1").scheduling_group("g"),
            ],
            "spec.schedulingConstraints.topology of PodGroup default/g",
            id="a PodGroup's topology constraint",
        ),
    ],
)
def test_unsupported_field_waits_with_a_reason(objects: list[object], want_field: str) -> None:
    outcome = run(
        make_priority_class("low", 10).obj(),
        make_node("n1").cap(cpu="1").obj(),
        make_pod("victim").priority_class("low").priority(10).req(cpu="1").on("n1").obj(),
        *(o.obj() for o in objects),  # type: ignore[attr-defined]
        preempt=True,
    )
    assert outcome.node_of("p") is None
    assert outcome.report["preemptions"] == []
    reason, message = outcome.pending("p") or ("", "")
    assert reason == "Unschedulable"
    assert f"0/1 nodes are available: phalanx-scheduler does not support {want_field}." in message
