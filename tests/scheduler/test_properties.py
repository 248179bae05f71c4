"""Invariants on random clusters, through the simulation driver (memory cluster, runner, preemption)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.api.quantity import parse_quantity, scheduling_units
from tests.builders import make_node, make_pod, make_podgroup
from tests.scheduler.scenario import Outcome, run

CPUS = ["500m", "1", "2", "4"]


@st.composite
def clusters(draw: st.DrawFn, priorities: bool) -> list[Any]:
    objects: list[Any] = []
    for n in range(draw(st.integers(1, 5))):
        node = make_node(f"n{n}").cap(cpu=str(draw(st.integers(1, 8))), gpu=draw(st.sampled_from([0, 2, 4])))
        objects.append(node.obj())
    for g in range(draw(st.integers(0, 3))):
        size = draw(st.integers(1, 5))
        group = make_podgroup(f"g{g}").gang(draw(st.integers(1, size)))
        if priorities:
            group = group.priority(draw(st.integers(0, 3)) * 100)
        objects.append(group.obj())
        gpu = draw(st.sampled_from([0, 1, 2]))
        cpu = draw(st.sampled_from(CPUS))
        objects += [make_pod(f"g{g}-{m}").group(f"g{g}").req(cpu=cpu, gpu=gpu or None).obj() for m in range(size)]
    for p in range(draw(st.integers(0, 8))):
        pod = make_pod(f"p{p}").req(cpu=draw(st.sampled_from(CPUS)))
        if priorities:
            pod = pod.priority(draw(st.integers(0, 3)) * 100)
        objects.append(pod.obj())
    return objects


def assert_no_node_overcommitted(outcome: Outcome) -> None:
    for name, node in outcome.report["nodes"].items():
        for resource, amount in node["allocated"].items():
            have = scheduling_units(resource, parse_quantity(node["allocatable"].get(resource, "0")))
            assert scheduling_units(resource, parse_quantity(amount)) <= have, f"{name} over-committed on {resource}"


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(priorities=False))
def test_gang_never_bound_below_min_count(objects: list[Any]) -> None:
    outcome = run(*objects)
    bound = Counter(pod.split("/")[1].rsplit("-", 1)[0] for pod in outcome.bound if "/g" in pod)
    for group in (o for o in objects if getattr(o, "kind", "") == "PodGroup"):
        count = bound.get(group.metadata.name, 0)
        assert count == 0 or count >= group.min_count, f"{group.metadata.name}: {count} < {group.min_count}"
    assert_no_node_overcommitted(outcome)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(priorities=True))
def test_no_node_overcommitted_with_preemption(objects: list[Any]) -> None:
    assert_no_node_overcommitted(run(*objects))
