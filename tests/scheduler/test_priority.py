"""Priority resolution decides who gets the last slot: class, PodGroup, globalDefault, then age."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.builders import EPOCH, make_node, make_pod, make_podgroup, make_priority_class
from tests.scheduler.scenario import run

CLASSES = [
    make_priority_class("low", 10).obj(),
    make_priority_class("high", 1000).obj(),
]


@pytest.mark.parametrize(
    ("objects", "want_winner"),
    [
        pytest.param(
            [make_pod("a").priority_class("low"), make_pod("b").priority_class("high")],
            "default/b",
            id="higher PriorityClass is placed first",
        ),
        pytest.param(
            [make_pod("a").priority(5), make_pod("b").priority(7)], "default/b", id="spec.priority without a class"
        ),
        pytest.param(
            [make_pod("a").created(EPOCH), make_pod("b").created(EPOCH - timedelta(minutes=1))],
            "default/b",
            id="equal priority: the older pod first",
        ),
        pytest.param(
            [
                make_pod("a").priority_class("high"),
                make_pod("b").priority_class("low").group("g"),
                make_podgroup("g").priority(5000),
            ],
            "default/b",
            id="PodGroup priority overrides the member's own class",
        ),
        pytest.param(
            [
                make_pod("a").priority_class("high"),
                make_pod("b").group("g"),
                make_podgroup("g").priority_class("low"),
            ],
            "default/a",
            id="PodGroup class resolves the group priority",
        ),
        pytest.param(
            [make_pod("a").priority(500), make_pod("b"), make_priority_class("default", 600).global_default()],
            "default/b",
            id="globalDefault class applies to a pod without a class",
        ),
    ],
)
def test_priority_order(objects: list[object], want_winner: str) -> None:
    built = [o.obj() for o in objects]  # type: ignore[attr-defined]
    for pod in built:
        if getattr(pod, "kind", "") == "Pod":
            pod.spec.containers[0].resources.requests = {"cpu": "3"}  # type: ignore[attr-defined]
    outcome = run(make_node("n1").cap(cpu="4").obj(), *CLASSES, *built)
    assert list(outcome.bound) == [want_winner]
