from __future__ import annotations

import pytest

from tests.builders import PodWrapper, make_node, make_pod
from tests.scheduler.scenario import run


@pytest.mark.parametrize(
    ("effect", "pod", "want_bound"),
    [
        pytest.param("NoSchedule", make_pod("p"), False, id="untolerated NoSchedule taint rejects"),
        pytest.param("NoExecute", make_pod("p"), False, id="untolerated NoExecute taint rejects"),
        pytest.param("PreferNoSchedule", make_pod("p"), True, id="PreferNoSchedule does not filter"),
        pytest.param("NoSchedule", make_pod("p").toleration("gpu", "yes", "NoSchedule"), True, id="Equal toleration"),
        pytest.param("NoSchedule", make_pod("p").toleration("gpu", "no", "NoSchedule"), False, id="value mismatch"),
        pytest.param("NoSchedule", make_pod("p").toleration("gpu", operator="Exists"), True, id="Exists on the key"),
        pytest.param(
            "NoSchedule", make_pod("p").toleration(operator="Exists"), True, id="empty key Exists tolerates all"
        ),
        pytest.param("NoExecute", make_pod("p").toleration("gpu", "yes", "NoSchedule"), False, id="effect must match"),
    ],
)
def test_taint_toleration(effect: str, pod: PodWrapper, want_bound: bool) -> None:
    node = make_node("n1").taint("gpu", "yes", effect).obj()
    outcome = run(node, pod.req(cpu="1").obj())
    assert (outcome.node_of("p") == "n1") is want_bound
    if not want_bound:
        assert outcome.pending("p") == (
            "Unschedulable",
            "0/1 nodes are available: 1 node(s) had untolerated taint {gpu: yes}."
            " WorkloadPreemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.",
        )
