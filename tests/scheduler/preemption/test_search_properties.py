"""Invariants 3 and 4 of docs/DESIGN.md and delayed preemption's premise, on random clusters."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.preemption.decision import Outcome
from scheduler.preemption.search import SearchInput, search
from tests.scheduler.preemption.plain_cluster import PlainCluster

CPUS = st.sampled_from([500, 1000, 2000, 3000])
PRIORITIES = st.sampled_from([1, 5, 10, 50, 100])


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[SearchInput, int]:
    nodes = draw(st.integers(1, 5))
    cluster = PlainCluster()
    for n in range(nodes):
        cluster.node(f"n{n}", draw(st.sampled_from([2000, 4000, 8000])))
    room = dict(cluster.nodes)
    for u in range(draw(st.integers(0, 12))):
        size = draw(st.integers(1, 3)) if draw(st.booleans()) else 1
        placements = []
        for _ in range(size):
            node = f"n{draw(st.integers(0, nodes - 1))}"
            cpu = draw(CPUS)
            if room[node] >= cpu:
                room[node] -= cpu
                placements.append((node, cpu))
        if not placements:
            continue
        priority = draw(PRIORITIES)
        if size > 1:
            cluster.group(f"ns/g{u}", placements, priority, started=float(u))
        else:
            cluster.pod(f"ns/p{u}", placements[0][0], placements[0][1], priority, started=float(u))
    members = draw(st.lists(CPUS, min_size=1, max_size=4))
    min_count = draw(st.integers(1, len(members))) if len(members) > 1 else None
    policy = draw(st.sampled_from(["PreemptLowerPriority", "PreemptLowerPriority", "Never"]))
    priority = draw(PRIORITIES)
    return cluster.search_input(members, priority, min_count=min_count, policy=policy), priority


@settings(max_examples=150, deadline=None)
@given(scenarios())
def test_group_units_go_whole_or_not_at_all(scenario: tuple[SearchInput, int]) -> None:
    inp, _ = scenario
    decision = search(inp)
    for victim in decision.victims:
        index = next(i for i, u in enumerate(inp.units) if u.key == victim.key)
        want = tuple(inp.pod_keys[r] for r in np.flatnonzero(inp.pod_unit == index).tolist())
        assert victim.pods == want


@settings(max_examples=150, deadline=None)
@given(scenarios())
def test_nothing_preempted_by_equal_or_lower_priority(scenario: tuple[SearchInput, int]) -> None:
    inp, priority = scenario
    decision = search(inp)
    assert all(v.priority < priority for v in decision.victims)
    if inp.preemptor.preemption_policy == "Never":
        assert decision.outcome == Outcome.CANNOT_HELP
        assert not decision.victims


@settings(max_examples=150, deadline=None)
@given(scenarios())
def test_victims_only_for_a_placement_that_exists(scenario: tuple[SearchInput, int]) -> None:
    """Remove the victims from a copy, bind the nominations on it: nothing over-commits, >= minCount placed."""
    inp, _ = scenario
    decision = search(inp)
    if decision.outcome != Outcome.PREEMPT:
        assert not decision.victims
        return
    free = inp.free.copy()
    names = list(inp.node_names)
    victim_pods = set(decision.victim_pods)
    for row, key in enumerate(inp.pod_keys):
        if key in victim_pods:
            free[inp.pod_node[row]] += inp.pod_requests[row]
    for member, node in decision.nominations.items():
        index = inp.preemptor.members.index(member)
        assert inp.preemptor.masks[index][names.index(node)]
        free[names.index(node)] -= inp.preemptor.requests[index]
    assert (free >= 0).all()
    assert len(decision.nominations) >= inp.preemptor.min_count
