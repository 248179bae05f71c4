"""Pod constraints on the real API server, beside kube-scheduler 1.36.2 (issue 38, "tried as a new user would"):
anti-affinity from either side, topology spread, host ports, preemption that clears an anti-affinity conflict,
and a pod no preemption can help. Each scenario makes the same nodes and pods twice, once per scheduler, and
checks that both schedulers do the same thing and that it is the right thing.

Each scheduler's copy is a `Side` (`sides.py`): its namespace and nodes, which the other cannot see.

Without its constraint each placement would come out differently: the node a constraint must keep a pod off is
the one scoring prefers (more free CPU, so `LeastAllocated` and `BalancedAllocation` both pick it).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from tests.e2e.control_plane import Json
from tests.e2e.objects import Pool
from tests.e2e.sides import QUIET_SECONDS, Side, on_both, preemption_words, settled
from tests.polling import wait_for

HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"
PORTS = "node(s) didn't have free ports for the requested pod ports"
NOT_HELPFUL = "Preemption is not helpful for scheduling"


def anti_affinity(app: str) -> Json:
    term = {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": HOSTNAME}
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}


def host_port(pod: Json, port: int) -> Json:
    pod["spec"]["containers"][0]["ports"] = [{"containerPort": port, "hostPort": port, "protocol": "TCP"}]
    return pod


def ha_replicas(side: Side) -> list[Json]:
    return [side.pod(f"web-{i}", app="web", affinity=anti_affinity("web")) for i in range(2)]


def port_replicas(side: Side) -> list[Json]:
    return [host_port(side.pod(f"web-{i}", app="web"), 8080) for i in range(2)]


@pytest.mark.parametrize(
    ("replicas", "roles", "want_roles", "want_reason"),
    [
        pytest.param(ha_replicas, ("big", "small"), ["big", "small"], None, id="anti-affine replicas split"),
        pytest.param(ha_replicas, ("big",), ["big"], f"1 {ANTI_AFFINITY}", id="anti-affine replica waits on one node"),
        pytest.param(port_replicas, ("big", "small"), ["big", "small"], None, id="same host port splits"),
        pytest.param(port_replicas, ("big",), ["big"], f"1 {PORTS}", id="same host port waits on one node"),
    ],
)
def test_two_replicas_that_exclude_each_other(
    sides: dict[str, Side],
    replicas: Callable[[Side], list[Json]],
    roles: tuple[str, ...],
    want_roles: list[str],
    want_reason: str | None,
) -> None:
    """The big node has room for both and is where scoring puts both: only the constraint keeps one off it."""
    for side in sides.values():
        for role in roles:
            side.add_node(role, cpu="8" if role == "big" else "2")
    for side in sides.values():
        side.create(*replicas(side))
    names = ["web-0", "web-1"]
    result = settled(sides, names)
    for tag, (placed, said) in result.items():
        assert sorted(placed.values()) == want_roles, f"{tag}: {placed}"
        if want_reason is not None:
            assert len(said) == 1 and want_reason in next(iter(said.values())), f"{tag}: {said}"
    assert sorted(result["phalanx"][1].values()) == sorted(result["kube"][1].values())


def test_running_pods_anti_affinity_keeps_web_pods_off_its_node(sides: dict[str, Side]) -> None:
    """A running `guard` repels app=web from the big node: one web pod goes to the small node, the other, which
    the small node has no room left for, waits, named by both schedulers for the same reasons."""
    for side in sides.values():
        side.add_node("big", cpu="8")
        side.add_node("small", cpu="2")
        side.create(side.pod("guard", app="guard", on="big", affinity=anti_affinity("web")))
    for side in sides.values():
        side.create(*(side.pod(f"web-{i}", cpu="1500m", app="web") for i in range(2)))
    result = settled(sides, ["web-0", "web-1"])
    for tag, (placed, said) in result.items():
        assert list(placed.values()) == ["small"], f"{tag}: {placed}"
        (message,) = said.values()
        assert f"1 {EXISTING_ANTI_AFFINITY}" in message and "1 Insufficient cpu" in message, f"{tag}: {message}"
    assert list(result["phalanx"][1].values()) == list(result["kube"][1].values())


def test_topology_spread_over_two_zones_places_two_and_two(sides: dict[str, Side]) -> None:
    """Zone a's node is four times zone b's: scoring alone would put three or four pods there."""
    spread = {
        "maxSkew": 1,
        "topologyKey": ZONE,
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "spread"}},
    }
    for side in sides.values():
        side.add_node("a", cpu="16", **{ZONE: "zone-a"})
        side.add_node("b", cpu="4", **{ZONE: "zone-b"})
    names = [f"s-{i}" for i in range(4)]
    for side in sides.values():
        side.create(*(side.pod(n, app="spread", topologySpreadConstraints=[spread]) for n in names))
    result = settled(sides, names)
    for tag, (placed, _) in result.items():
        assert sorted(placed.values()) == ["a", "a", "b", "b"], f"{tag}: {placed}"


def test_preemption_removes_only_the_pod_the_anti_affinity_excludes(pool: Pool, sides: dict[str, Side]) -> None:
    """The only node has room for the preemptor: what stops it is `db`, which its anti-affinity excludes. Both
    schedulers preempt `db` (priority 10) and no other, keep `cache` (priority 10 too), and bind the preemptor."""
    low = pool.priority_class("low", 10)
    high = pool.priority_class("high", 1000)
    for side in sides.values():
        side.add_node("only", cpu="4")
        side.create(
            side.pod("db", app="db", priority_class=low, on="only"),
            side.pod("cache", app="cache", priority_class=low, on="only"),
        )
    for side in sides.values():
        side.create(side.pod("new", priority_class=high, affinity=anti_affinity("db")))

    def done(side: Side) -> dict[str, str] | None:
        placed = side.placed(["db", "cache", "new"])
        return placed if "new" in placed else None

    wait_for(lambda: all(on_both(sides, done).values()), what="the preemptor bound on both sides")
    for tag, side in sides.items():
        assert side.placed(["db", "cache", "new"]) == {"cache": "only", "new": "only"}, tag
        assert "db" not in side.pods(), f"{tag}: db still there"


def test_pod_larger_than_every_node_waits_and_preempts_nothing(pool: Pool, sides: dict[str, Side]) -> None:
    """Every node is 4 CPUs, half taken by a priority-10 pod; an 8-CPU pod of priority 1000 fits nowhere even with
    every pod gone: both schedulers leave it pending, nominate nothing and delete nothing."""
    low = pool.priority_class("low", 10)
    high = pool.priority_class("high", 1000)
    running = ["low-0", "low-1"]
    for side in sides.values():
        for i, name in enumerate(running):
            side.add_node(f"n{i}", cpu="4")
            side.create(side.pod(name, cpu="2", priority_class=low, on=f"n{i}"))
    for side in sides.values():
        side.create(side.pod("huge", cpu="8", priority_class=high))
    result = settled(sides, ["huge"])
    time.sleep(QUIET_SECONDS)  # time for a preemption that should not happen
    said = {}
    for tag, side in sides.items():
        assert side.placed(running) == {"low-0": "n0", "low-1": "n1"}, f"{tag}: a running pod was preempted"
        huge = side.pods()["huge"]
        where = (huge["spec"].get("nodeName"), huge["status"].get("nominatedNodeName"))
        assert where == (None, None), f"{tag}: huge bound to, nominated to {where}"
        said[tag] = side.unschedulable("huge") or ""
    assert result["phalanx"][1] == result["kube"][1]
    assert "2 Insufficient cpu" in result["phalanx"][1]["huge"]
    assert NOT_HELPFUL in said["phalanx"], said["phalanx"]
    assert preemption_words(said["phalanx"]) == preemption_words(said["kube"]), said


def test_anti_affinity_with_a_namespace_selector_avoids_only_the_namespaces_it_selects(
    pool: Pool, sides: dict[str, Side]
) -> None:
    """`db` runs on the big node in a namespace labelled for the side, and on the small node in an unlabelled one:
    the new pod's anti-affinity selects namespaces by that label, so both schedulers keep it off the big node
    (where scoring puts it) and place it beside the other `db`."""
    select = "e2e.phalanx.dev/selected-by"
    made: list[tuple[str, str]] = []
    try:
        for tag, side in sides.items():
            side.add_node("big", cpu="8")
            side.add_node("small", cpu="4")
            for suffix, role, labels in (("sel", "big", {select: tag}), ("unsel", "small", {})):
                namespace = f"{side.namespace}-{suffix}"
                pool.api.apply(
                    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace, "labels": labels}}
                )
                db = side.pod("db", app="db", on=role)
                db["metadata"]["namespace"] = namespace
                pool.api.create(f"/api/v1/namespaces/{namespace}/pods", db)
                made.append((namespace, "db"))
        for tag, side in sides.items():
            term = {
                "labelSelector": {"matchLabels": {"app": "db"}},
                "namespaceSelector": {"matchLabels": {select: tag}},
                "topologyKey": HOSTNAME,
            }
            affinity = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
            side.create(side.pod("new", affinity=affinity))
        result = settled(sides, ["new"])
        for tag, (placed, said) in result.items():
            assert placed == {"new": "small"}, f"{tag}: {placed} {said}"
    finally:
        for namespace, name in made:
            pool.api.delete(f"/api/v1/namespaces/{namespace}/pods/{name}", grace_period_seconds=0)
            pool.api.request("DELETE", f"/api/v1/namespaces/{namespace}")
