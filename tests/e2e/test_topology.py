"""Topology domains on the real API server, beside kube-scheduler 1.36.2 with `TopologyAwareWorkloadScheduling`:
a native PodGroup with `spec.schedulingConstraints.topology` goes whole into one domain of the label, the same one
kube-scheduler picks where the placement scores differ (issue 40, "tried as a new user would").

Each scheduler gets its own copy of each scenario (`test_constraints.Side`): its namespace, its nodes, and its own
values of the rack label (`phalanx-a`, `kube-a`), so a domain never holds the other side's nodes, whose allocation
would move the placement scores. Without the constraint each gang would spread: the rack the constraint must keep it
out of is where pod-by-pod scoring (LeastAllocated) sends the first members.
"""

from __future__ import annotations

import time

from tests.e2e.objects import Pool, node
from tests.e2e.sides import QUIET_SECONDS, Side, settled
from tests.polling import wait_for

RACK = "e2e.phalanx.dev/rack"
NATIVE = "scheduling.k8s.io/v1alpha2"


def racks(side: Side, layout: dict[str, list[str]]) -> None:
    """`layout`: rack -> the CPUs of its nodes; each node labelled with the side's own value of the rack."""
    for rack, cpus in layout.items():
        for i, cpu in enumerate(cpus):
            side.add_node(f"{rack}{i}", cpu=cpu, **{RACK: f"{side.tag}-{rack}"})


def gang(
    side: Side, name: str, members: int, min_count: int, cpu: str, key: str = RACK, priority_class: str | None = None
) -> list[str]:
    group = side.pool.pod_group(name, {"gang": {"minCount": min_count}}, priority_class, api_version=NATIVE)
    group["metadata"]["namespace"] = side.namespace
    group["spec"]["schedulingConstraints"] = {"topology": [{"key": key}]}
    side.pool.api.create(f"/apis/{NATIVE}/namespaces/{side.namespace}/podgroups", group)
    names = [f"{name}-{i}" for i in range(members)]
    pods = (side.pod(n, cpu=cpu, priority_class=priority_class, schedulingGroup={"podGroupName": name}) for n in names)
    side.create(*pods)
    side.hand_over(names)
    return names


def rack_of(role: str) -> str:
    return role.rstrip("0123456789")


def test_a_gang_goes_whole_into_the_rack_it_packs_best(sides: dict[str, Side]) -> None:
    """The issue's case: rack a has two 4-CPU nodes, rack b three. Four 2-CPU members fit in either; NodeResourcesFit
    scores a full rack a (100 %) over two thirds of b, as kube-scheduler does. Pod by pod, LeastAllocated would put
    the first members in b's empty nodes."""
    for side in sides.values():
        racks(side, {"a": ["4", "4"], "b": ["4", "4", "4"]})
    names = {tag: gang(side, "train", 4, 4, "2") for tag, side in sides.items()}
    result = settled(sides, names["phalanx"])
    for tag, (placed, said) in result.items():
        assert not said, f"{tag}: {said}"
        assert sorted(rack_of(r) for r in placed.values()) == ["a"] * 4, f"{tag}: {placed}"


def test_a_gang_no_single_rack_can_hold_waits_whole(sides: dict[str, Side]) -> None:
    """Two racks of one 4-CPU node: four 2-CPU members fit in the cluster but in no rack. Neither scheduler binds
    any member (kube-scheduler 1.36 does not preempt for a constrained group, nor, yet, does Phalanx)."""
    for side in sides.values():
        racks(side, {"a": ["4"], "b": ["4"]})
    names = {tag: gang(side, "train", 4, 4, "2") for tag, side in sides.items()}

    def pending(side: Side) -> bool:
        return all(side.unschedulable(n) for n in names[side.tag])

    wait_for(lambda: all(pending(s) for s in sides.values()), what="every member Unschedulable on both sides")
    time.sleep(QUIET_SECONDS)
    for tag, side in sides.items():
        assert side.placed(names[tag]) == {}, f"{tag}: {side.placed(names[tag])}"
    message = sides["phalanx"].unschedulable(names["phalanx"][0]) or ""
    assert "no topology domain can take 4 members" in message, message


def test_a_gang_preempts_in_the_rack_whose_victims_cost_least(pool: Pool, sides: dict[str, Side]) -> None:
    """The issue's preemption case. Rack a runs four priority-10 pods; each of rack b's three nodes a priority-0
    and a priority-20 pod. A priority-1000 gang of four 2-CPU members fits in neither rack. kube-scheduler 1.36.2
    does not preempt for a constrained group and leaves it pending; Phalanx frees rack a, whose highest victim (10)
    is below what rack b would cost (20), and binds the gang there. Preempting over the whole cluster would have
    taken b's three 0s and one 10, and spread the gang over both racks."""
    ten, zero, twenty = (
        pool.priority_class("ten", 10),
        pool.priority_class("zero", 0),
        pool.priority_class("twenty", 20),
    )
    urgent = pool.priority_class("urgent", 1000)
    for side in sides.values():
        racks(side, {"a": ["4", "4"], "b": ["4", "4", "4"]})
        running = [side.pod(f"ten-{i}", cpu="2", priority_class=ten, on=f"a{i // 2}") for i in range(4)]
        for i in range(3):
            running.append(side.pod(f"zero-{i}", cpu="2", priority_class=zero, on=f"b{i}"))
            running.append(side.pod(f"twenty-{i}", cpu="2", priority_class=twenty, on=f"b{i}"))
        side.create(*running)
    names = {tag: gang(side, "train", 4, 4, "2", priority_class=urgent) for tag, side in sides.items()}
    phalanx, kube = sides["phalanx"], sides["kube"]
    wait_for(lambda: len(phalanx.placed(names["phalanx"])) == 4, timeout=60, what="Phalanx's gang bound")
    assert sorted(rack_of(r) for r in phalanx.placed(names["phalanx"]).values()) == ["a"] * 4
    gone = sorted(n for n in (f"ten-{i}" for i in range(4)) if n not in phalanx.pods())
    assert gone == [f"ten-{i}" for i in range(4)], gone
    left = {n for n in phalanx.pods() if n.startswith(("zero", "twenty"))}
    assert len(left) == 6, left
    wait_for(lambda: kube.unschedulable(names["kube"][0]), what="kube-scheduler's gang Unschedulable")
    time.sleep(QUIET_SECONDS)
    assert kube.placed(names["kube"]) == {}
    assert len([n for n in kube.pods() if not n.startswith("train")]) == 10, "kube-scheduler preempted something"
    said = kube.unschedulable(names["kube"][0]) or ""
    assert "preemption: not eligible due to placement-based pod group scheduling limitation" in said, said


def test_a_label_no_node_has_keeps_the_gang_pending_saying_so(sides: dict[str, Side]) -> None:
    """Both leave the gang pending; Phalanx names the label (kube-scheduler 1.36.2 says "no feasible placements
    found")."""
    for side in sides.values():
        racks(side, {"a": ["4", "4"]})
    names = {tag: gang(side, "train", 2, 2, "1", key="e2e.phalanx.dev/no-such-label") for tag, side in sides.items()}

    def said(side: Side) -> str | None:
        return side.unschedulable(names[side.tag][0])

    wait_for(lambda: all(said(s) for s in sides.values()), what="the first member Unschedulable on both sides")
    for tag, side in sides.items():
        assert side.placed(names[tag]) == {}, tag
    assert "no nodes found with topology label 'e2e.phalanx.dev/no-such-label'" in (said(sides["phalanx"]) or "")
    assert "no feasible placements found" in (said(sides["kube"]) or "")


def rack_nodes(pool: Pool, layout: dict[str, str]) -> dict[str, str]:
    """`layout`: node role -> rack; 4-CPU nodes of the pool, each in the pool's own value of the rack label. Returns
    role -> node name."""
    names = {}
    for role, rack in layout.items():
        made = node(f"{pool.name}-{role}", pool.name, "4")
        made["metadata"]["labels"][RACK] = f"{pool.name}-{rack}"
        pool.cluster_object(made)
        names[role] = made["metadata"]["name"]
    return names


def relabel(pool: Pool, name: str, rack: str | None) -> None:
    """Move a node to another rack of the pool (None: take the label off)."""
    value = None if rack is None else f"{pool.name}-{rack}"
    reply = pool.api.patch(f"/api/v1/nodes/{name}", {"metadata": {"labels": {RACK: value}}})
    assert reply.status == 200, reply.message


def racks_now(pool: Pool, nodes: list[str]) -> set[str | None]:
    """The rack label of each of `nodes` as the API server has it now."""
    return {((pool.api.get(f"/api/v1/nodes/{n}") or {})["metadata"]["labels"]).get(RACK) for n in nodes}


def scheduled_message(pool: Pool, pod: str) -> str:
    conditions = ((pool.read_pod(pod) or {}).get("status") or {}).get("conditions") or []
    return next((c.get("message") or "" for c in conditions if c["type"] == "PodScheduled"), "")


def test_a_rack_relabelled_while_victims_terminate_is_decided_again(pool: Pool) -> None:
    """Issue 40 point 8. The gang preempts rack a's priority-10 pods (rack b would cost a priority-20 pod) and its
    members are nominated to a0 and a1. While the victims terminate, a0 moves to rack b: the nominations hold the gang
    in no one rack, and it says so, naming both. Once the victims are gone, a0 and a1 could take all four members, but
    that would split the gang over two racks: it goes whole into rack b as labelled now (a0 beside b's free room)."""
    ten, twenty, urgent = (pool.priority_class(n, v) for n, v in (("ten", 10), ("twenty", 20), ("urgent", 1000)))
    nodes = rack_nodes(pool, {"a0": "a", "a1": "a", "b0": "b", "b1": "b", "b2": "b"})
    running = [pool.pod(f"ten-{i}", cpu="2", priority_class=ten, node=nodes[f"a{i // 2}"], grace=30) for i in range(4)]
    running += [pool.pod(f"twenty-{i}", cpu="2", priority_class=twenty, node=nodes[f"b{i}"]) for i in range(3)]
    pool.create(*running)
    group = pool.pod_group("train", {"gang": {"minCount": 4}}, urgent)
    group["spec"]["schedulingConstraints"] = {"topology": [{"key": RACK}]}
    members = [f"train-{i}" for i in range(4)]
    pool.create(group, *(pool.pod(m, cpu="2", priority_class=urgent, group="train") for m in members))

    def nominated() -> set[str]:
        return {(pool.read_pod(m) or {}).get("status", {}).get("nominatedNodeName") for m in members} - {None}

    wait_for(lambda: nominated() == {nodes["a0"], nodes["a1"]}, what="the gang nominated to rack a")
    assert sorted(p["metadata"]["name"] for p in pool.terminating()) == [f"ten-{i}" for i in range(4)]
    relabel(pool, nodes["a0"], "b")
    said = f"its nominated nodes are in no one topology domain now ({RACK}={pool.name}-a, {RACK}={pool.name}-b)"
    wait_for(lambda: said in scheduled_message(pool, members[0]), what=f"train-0 saying {said!r}")
    assert pool.bound(members) == {}
    pool.finish_terminating()
    bound = pool.wait_bound(members, timeout=60)
    assert racks_now(pool, list(bound.values())) == {f"{pool.name}-b"}, bound
    assert [n for n in pool.pods() if n.startswith("twenty")] == [f"twenty-{i}" for i in range(3)], "nothing else went"


def test_bound_members_split_by_a_relabel_keep_the_rest_waiting(pool: Pool) -> None:
    """Issue 40 point 8. web-0 and web-1 of a basic group bind in rack a, one a node (3 of 4 CPUs each); then a0
    moves to rack b, beside an empty b0. web-2 fits on any node by itself: it waits, naming both racks, and binds
    once a0 is back in rack a, into rack a."""
    nodes = rack_nodes(pool, {"a0": "a", "a1": "a"})
    group = pool.pod_group("web", {"basic": {}})
    group["spec"]["schedulingConstraints"] = {"topology": [{"key": RACK}]}
    pool.create(group, *(pool.pod(f"web-{i}", cpu="3", group="web") for i in range(2)))
    assert sorted(pool.wait_bound(["web-0", "web-1"]).values()) == [nodes["a0"], nodes["a1"]]
    rack_nodes(pool, {"b0": "b"})
    relabel(pool, nodes["a0"], "b")
    pool.create(pool.pod("web-2", cpu="1", group="web"))
    said = f"members already bound run in {RACK}={pool.name}-a and {RACK}={pool.name}-b"
    wait_for(lambda: said in scheduled_message(pool, "web-2"), what=f"web-2 saying {said!r}")
    time.sleep(QUIET_SECONDS)
    assert pool.bound(["web-2"]) == {}
    relabel(pool, nodes["a0"], "a")
    bound = pool.wait_bound(["web-2"])
    assert racks_now(pool, list(bound.values())) == {f"{pool.name}-a"}, bound
