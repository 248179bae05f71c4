"""KEP-5710's domain split for a group that must stay in one topology domain (issue 40): the search runs in each
domain, frees room only there, and takes the domain whose victims cost least by kube-scheduler's ranking."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.preemption.decision import Decision, Outcome
from scheduler.preemption.search import SearchDomain, SearchInput, search
from tests.scheduler.preemption.plain_cluster import PlainCluster


def racks(inp: SearchInput, layout: dict[str, list[str]], level: int = 0) -> SearchInput:
    names = list(inp.node_names)
    domains = tuple(
        SearchDomain(np.array(sorted(names.index(n) for n in nodes), dtype=np.int64), f"rack={rack}", level)
        for rack, nodes in layout.items()
    )
    return replace(inp, domains=inp.domains + domains)


def issue_cluster() -> PlainCluster:
    """The issue's second case: rack a runs a priority-10 gang of 4 x 2 CPU (Pod mode: each member its own
    unit), rack b three priority-0 and three priority-20 pods; every node has 4 CPU."""
    cluster = PlainCluster()
    for name in ("a0", "a1", "b0", "b1", "b2"):
        cluster.node(name, 4000)
    for i, node in enumerate(("a0", "a0", "a1", "a1")):
        cluster.pod(f"ns/gang-a-{i}", node, 2000, 10)
    for i, node in enumerate(("b0", "b1", "b2")):
        cluster.pod(f"ns/zero-{i}", node, 2000, 0)
        cluster.pod(f"ns/twenty-{i}", node, 2000, 20)
    return cluster


RACKS = {"a": ["a0", "a1"], "b": ["b0", "b1", "b2"]}


def test_the_rack_whose_victims_cost_least_wins() -> None:
    """Rack b could free room for the gang only by taking priority-20 pods; rack a's highest victim is 10."""
    decision = search(racks(issue_cluster().search_input([2000] * 4, 1000, min_count=4), RACKS))
    assert decision.outcome == Outcome.PREEMPT
    assert sorted(v.key for v in decision.victims) == [f"ns/gang-a-{i}" for i in range(4)]
    assert sorted(decision.nominations.values()) == ["a0", "a0", "a1", "a1"]
    assert decision.message.endswith("in rack=a")


def test_without_domains_the_gang_spreads_over_the_cheapest_victims() -> None:
    """The same cluster with the constraint removed: the whole cluster is one domain, and the three priority-0
    pods and one priority-10 pod make room across both racks, as the issue saw Phalanx do."""
    decision = search(issue_cluster().search_input([2000] * 4, 1000, min_count=4))
    racks_used = {node[0] for node in decision.nominations.values()}
    assert racks_used == {"a", "b"}


def test_a_domain_never_counts_room_freed_elsewhere() -> None:
    """Rack b alone is too small for the gang whatever is removed: only rack a's victims are chosen, though b's
    are cheaper."""
    cluster = PlainCluster()
    for name in ("a0", "a1", "b0"):
        cluster.node(name, 4000)
    cluster.pod("ns/a-0", "a0", 4000, 10)
    cluster.pod("ns/a-1", "a1", 4000, 10)
    cluster.pod("ns/b-0", "b0", 4000, 0)
    decision = search(racks(cluster.search_input([2000] * 4, 1000, min_count=4), {"a": ["a0", "a1"], "b": ["b0"]}))
    assert sorted(v.key for v in decision.victims) == ["ns/a-0", "ns/a-1"]


def test_a_wider_level_is_searched_only_when_no_narrower_domain_helps() -> None:
    cluster = PlainCluster()
    for name in ("a0", "b0"):
        cluster.node(name, 4000)
    cluster.pod("ns/a-0", "a0", 4000, 10)
    cluster.pod("ns/b-0", "b0", 4000, 10)
    inp = cluster.search_input([2000] * 4, 1000, min_count=4)
    narrow = racks(inp, {"a": ["a0"], "b": ["b0"]})
    assert search(narrow).outcome != Outcome.PREEMPT
    both = racks(narrow, {"x": ["a0", "b0"]}, level=1)
    decision = search(both)
    assert sorted(v.key for v in decision.victims) == ["ns/a-0", "ns/b-0"]
    assert decision.message.endswith("in rack=x")


CPUS = st.sampled_from([1000, 2000, 3000])
PRIORITIES = st.sampled_from([1, 5, 10, 50])


@st.composite
def rack_scenarios(draw: st.DrawFn) -> SearchInput:
    """Up to 3 racks of up to 3 nodes, lone pods and PodGroup-mode groups that may span racks, and a gang."""
    count = draw(st.integers(1, 3))
    layout = {f"r{r}": [f"r{r}n{i}" for i in range(draw(st.integers(1, 3)))] for r in range(count)}
    cluster = PlainCluster()
    nodes = [n for members in layout.values() for n in members]
    room = {}
    for node in nodes:
        room[node] = draw(st.sampled_from([2000, 4000]))
        cluster.node(node, room[node])
    for u in range(draw(st.integers(0, 10))):
        placements = []
        for _ in range(draw(st.integers(1, 3))):
            node, cpu = draw(st.sampled_from(nodes)), draw(CPUS)
            if room[node] >= cpu:
                room[node] -= cpu
                placements.append((node, cpu))
        if len(placements) > 1:
            cluster.group(f"ns/g{u}", placements, draw(PRIORITIES), started=float(u))
        elif placements:
            cluster.pod(f"ns/p{u}", placements[0][0], placements[0][1], draw(PRIORITIES), started=float(u))
    members = draw(st.lists(CPUS, min_size=2, max_size=4))
    inp = cluster.search_input(members, 100, min_count=draw(st.integers(1, len(members))))
    return racks(inp, layout)


def cost(inp: SearchInput, victims: list[str]) -> tuple[int, int, int]:
    """kube-scheduler's ranking of a victim set, by unit: highest priority, sum of pod priorities, pods."""
    keys = list(inp.units.keys)
    units = [keys.index(v) for v in victims]
    sizes = np.bincount(inp.pod_unit, minlength=len(keys))
    priority = inp.units.priority
    top = max((int(priority[u]) for u in units), default=-(2**62))
    return top, sum(int(priority[u] * sizes[u]) for u in units), sum(int(sizes[u]) for u in units)


@settings(max_examples=400, deadline=None)
@given(rack_scenarios())
def test_the_chosen_rack_costs_the_least_of_each_racks_own_result(inp: SearchInput) -> None:
    """Brute force: search each rack alone; the decision over all of them preempts inside one rack, places as many
    members as the rack whose own result places most, and its victims cost what the cheapest such result costs."""
    decision = search(inp)
    alone = [search(replace(inp, domains=(domain,))) for domain in inp.domains]
    helped = [d for d in alone if d.outcome == Outcome.PREEMPT]
    assert (decision.outcome == Outcome.PREEMPT) == bool(helped)
    if not helped:
        return
    names = list(inp.node_names)
    rows = {d.name: set(d.nodes.tolist()) for d in inp.domains}
    used = {names.index(node) for node in decision.nominations.values()}
    assert any(used <= nodes for nodes in rows.values()), decision.nominations

    def rank(d: Decision) -> tuple[int, tuple[int, int, int]]:
        return -len(d.nominations), cost(inp, [v.key for v in d.victims])

    assert rank(decision) == min(rank(d) for d in helped)
