"""Workload-aware preemption on the real API server: the victims chosen, how they go, and the preemptor bound.

Without a kubelet a pod deleted with a grace period stays Terminating: where the victims have one,
the test plays the kubelet and removes them (grace 0, uid precondition) once the scheduler marked them.

Every scenario is also the agreement test of `kubectl phalanx explain` (issue 22): the preemptor arrives while
the scheduler is stopped, `explain` predicts its victims, and the scheduler started again must preempt exactly
those.
"""

from __future__ import annotations

import pytest

from tests.e2e.control_plane import Json
from tests.e2e.objects import Pool
from tests.e2e.plugin import assert_agrees, explained_before_it_acts
from tests.e2e.stack import Stack
from tests.polling import wait_for


def condition(pod: Json | None, kind: str) -> Json | None:
    return next((c for c in (pod or {}).get("status", {}).get("conditions", []) if c["type"] == kind), None)


def busy_pool(pool: Pool, grace: int) -> dict[str, int]:
    """Three full 4-CPU nodes, two 2-CPU pods each, at priorities 10, 20 and 30 by node: victim -> priority."""
    nodes = pool.add_nodes(3, cpu="4")
    priorities = {}
    for value, node in zip((10, 20, 30), nodes, strict=True):
        cls = pool.priority_class(f"p{value}", value)
        for i in range(2):
            name = f"v{value}-{i}"
            pool.create(pool.pod(name, cpu="2", priority_class=cls, node=node, grace=grace))
            priorities[name] = value
    return priorities


@pytest.mark.parametrize("grace", [0, 30], ids=["victims-vanish-at-once", "victims-terminate-gracefully"])
def test_gang_preempts_the_lowest_units_then_binds(phalanx: Stack, pool: Pool, grace: int) -> None:
    victims = busy_pool(pool, grace)
    high = pool.priority_class("high", 1000)
    members = [f"w{i}" for i in range(4)]

    def arrive() -> None:
        pool.create(pool.pod_group("train", {"gang": {"minCount": 4}}, priority_class=high))
        pool.create(*(pool.pod(m, cpu="2", group="train", priority_class=high) for m in members))

    explained = explained_before_it_acts(phalanx, pool, arrive, "podgroup", "train")
    want_preempted = {"v10-0", "v10-1", "v20-0", "v20-1"}
    assert explained["decision"]["bound"] == 20, "the binary-search bound"

    def marked() -> set[str]:
        pods = pool.pods()
        gone = {v for v in victims if v not in pods}
        terminating = {v for v, p in pods.items() if v in victims and p["metadata"].get("deletionTimestamp")}
        return gone | terminating

    wait_for(lambda: marked() == want_preempted, what="the four lowest-priority pods preempted")
    if grace:
        for name in want_preempted:
            pod = pool.read_pod(name)
            target = condition(pod, "DisruptionTarget")
            assert target is not None and target["reason"] == "PreemptionByScheduler", pod
        assert pool.bound(members) == {}, "members bind only once their victims are gone"
        nominated = {p["status"].get("nominatedNodeName") for n, p in pool.pods().items() if n in members}
        assert nominated == set(pool.nodes[:2])
        assert sorted(pool.finish_terminating()) == sorted(want_preempted)
    placed = pool.wait_bound(members)
    assert set(placed.values()) == set(pool.nodes[:2])
    assert set(pool.bound(["v30-0", "v30-1"])) == {"v30-0", "v30-1"}
    assert assert_agrees(pool, explained) == want_preempted
    wait_for(
        lambda: {e["regarding"]["name"] for e in pool.events("Scheduled")} >= set(members),
        what="a Scheduled Event for every member",
    )
    for member in members:  # a stale PodScheduled=False, written after the Binding, would turn it back
        scheduled = condition(pool.read_pod(member), "PodScheduled")
        assert scheduled is not None and scheduled["status"] == "True", scheduled


@pytest.mark.parametrize("grace", [0, 30], ids=["victim-vanishes-at-once", "victim-terminates-gracefully"])
def test_lone_pod_preempts_on_one_node_only(phalanx: Stack, pool: Pool, grace: int) -> None:
    nodes = pool.add_nodes(2, cpu="4")
    low = pool.priority_class("low", 10)
    lower = pool.priority_class("lower", 5)
    pool.create(
        pool.pod("a0", cpu="2", priority_class=low, node=nodes[0], grace=grace),
        pool.pod("a1", cpu="2", priority_class=low, node=nodes[0], grace=grace),
        pool.pod("b0", cpu="3", priority_class=lower, node=nodes[1], grace=grace),
    )
    high = pool.priority_class("high", 100)
    explained = explained_before_it_acts(
        phalanx, pool, lambda: pool.create(pool.pod("big", cpu="3", priority_class=high)), "pod", "big"
    )

    if grace:
        wait_for(lambda: [p["metadata"]["name"] for p in pool.terminating()] == ["b0"], what="b0 preempted")
        big = pool.read_pod("big") or {}
        assert big.get("status", {}).get("nominatedNodeName") == nodes[1]
        assert pool.finish_terminating() == ["b0"]
    placed = pool.wait_bound(["big"])
    assert placed == {"big": nodes[1]}
    assert set(pool.bound(["a0", "a1"])) == {"a0", "a1"}, "the other node's pods are untouched"
    assert pool.read_pod("b0") is None
    assert assert_agrees(pool, explained) == {"b0"}


def test_pdb_protected_pods_are_reprieved(phalanx: Stack, pool: Pool) -> None:
    nodes = pool.add_nodes(2, cpu="4")
    low = pool.priority_class("low", 10)
    for node, app in zip(nodes, ("guarded", "free"), strict=True):
        for i in range(2):
            pod = pool.pod(f"{app}-{i}", cpu="2", priority_class=low, node=node, grace=0, labels={"app": app})
            pool.create(pod)
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "guarded", "namespace": pool.namespace},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "guarded"}}},
    }
    pool.create(pdb)
    path = f"/apis/policy/v1/namespaces/{pool.namespace}/poddisruptionbudgets/guarded"
    wait_for(lambda: (pool.api.get(path) or {}).get("status", {}).get("expectedPods") == 2, what="PDB status")
    high = pool.priority_class("high", 100)
    explained = explained_before_it_acts(
        phalanx, pool, lambda: pool.create(pool.pod("big", cpu="4", priority_class=high)), "pod", "big"
    )

    assert pool.wait_bound(["big"]) == {"big": nodes[1]}
    assert set(pool.bound(["guarded-0", "guarded-1"])) == {"guarded-0", "guarded-1"}
    assert assert_agrees(pool, explained) == {"free-0", "free-1"}
    assert {s["unit"] for s in explained["decision"]["spared"]} >= {f"{pool.namespace}/guarded-0"}


def test_basic_group_partly_bound_preempts_for_the_rest(phalanx: Stack, pool: Pool) -> None:
    """Members that fit bind at once; the others nominate and preempt; no write is refused (defect 1)."""
    nodes = pool.add_nodes(2, cpu="4")
    low = pool.priority_class("low", 10)
    high = pool.priority_class("high", 100)
    pool.create(pool.pod("victim", cpu="3", priority_class=low, node=nodes[0], grace=30))
    members = [f"m{i}" for i in range(4)]

    def arrive() -> None:  # all pending when the scheduler looks: one pass binds some and preempts for the rest
        pool.create(pool.pod_group("basic", {"basic": {}}, priority_class=high))
        pool.create(*(pool.pod(m, cpu="2", group="basic", priority_class=high) for m in members))

    explained = explained_before_it_acts(phalanx, pool, arrive, "podgroup", "basic")
    assert explained["placement"]["fit"] == 2, "two members fit without preempting"

    wait_for(lambda: len(pool.bound(members)) == 2, what="the two members that fit bound")
    wait_for(lambda: pool.terminating(), what="the victim marked and deleted")
    nominated = {n: p["status"].get("nominatedNodeName") for n, p in pool.pods().items() if n in members}
    assert sorted(v for v in nominated.values() if v) == [nodes[0], nodes[0]]
    pool.finish_terminating()
    pool.wait_bound(members)
    assert phalanx.plane.refused(422, pool.namespace) == []
    assert assert_agrees(pool, explained) == {"victim"}
