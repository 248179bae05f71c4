from __future__ import annotations

import pytest

from tests.builders import make_config, make_node, make_pod
from tests.scheduler.scenario import run


@pytest.mark.parametrize(
    ("strategy", "want_node"),
    [
        pytest.param({}, "empty", id="LeastAllocated by default spreads to the emptiest node"),
        pytest.param(
            {"scoringStrategy": {"type": "MostAllocated", "resources": {"nvidia.com/gpu": 1}}},
            "busy",
            id="MostAllocated on GPUs packs onto the busy node",
        ),
    ],
)
def test_scoring_strategy(strategy: dict[str, object], want_node: str) -> None:
    busy = make_node("busy").cap(gpu=8).obj()
    empty = make_node("empty").cap(gpu=8).obj()
    running = make_pod("r").req(cpu="1", gpu=4).on("busy").obj()
    outcome = run(busy, empty, running, make_pod("p").req(cpu="1", gpu=2).obj(), config=make_config(**strategy))
    assert outcome.node_of("p") == want_node
