"""A scheduler killed in the middle of a preemption: its successor finishes the job, binds nothing twice, loses nothing.

Invariant 6 of docs/DESIGN.md, on the real API server: the first scheduler decides, nominates the members
and deletes the victims (which stay Terminating: they have a grace period), then dies by SIGKILL
without releasing its Lease. The successor takes the Lease, rebuilds everything from the API and
must neither preempt anyone else nor bind a member twice once the victims are gone.
"""

from __future__ import annotations

from collections import Counter

from tests.e2e.objects import Pool
from tests.e2e.stack import Stack
from tests.polling import wait_for


def test_successor_finishes_a_preemption_without_double_binding(phalanx: Stack, pool: Pool) -> None:
    nodes = pool.add_nodes(3, cpu="4")
    low = pool.priority_class("low", 10)
    high = pool.priority_class("high", 100)
    victims = [f"v{i}" for i in range(len(nodes))]
    for victim, node in zip(victims, nodes, strict=True):
        pool.create(pool.pod(victim, cpu="4", priority_class=low, node=node, grace=30))
    pool.create(pool.pod_group("train", {"gang": {"minCount": 2}}, priority_class=high, disruption_mode="PodGroup"))
    members = ["w0", "w1"]
    pool.create(*(pool.pod(m, cpu="4", group="train", priority_class=high) for m in members))

    terminating = wait_for(lambda: [p["metadata"]["name"] for p in pool.terminating()], what="victims marked")
    first = phalanx.scheduler
    assert first is not None
    first.kill()
    wait_for(lambda: len(pool.terminating()) == 2, what="the decision's two victims Terminating")
    marked = sorted(p["metadata"]["name"] for p in pool.terminating())
    assert set(terminating) <= set(marked)

    phalanx.start_scheduler()
    assert sorted(pool.finish_terminating()) == marked
    placed = pool.wait_bound(members)
    assert sorted(placed.values()) == sorted(n for v, n in zip(victims, nodes, strict=True) if v in marked)
    survivor = next(v for v in victims if v not in marked)
    assert pool.bound([survivor]) == {survivor: nodes[victims.index(survivor)]}, "nobody else was preempted"

    bindings = Counter(
        e["objectRef"]["name"]
        for e in phalanx.plane.audit_events()
        if e["verb"] == "create"
        and e.get("objectRef", {}).get("subresource") == "binding"
        and e["objectRef"].get("namespace") == pool.namespace
        and e.get("responseStatus", {}).get("code") == 201
    )
    assert bindings == Counter(members), "each member bound exactly once"
