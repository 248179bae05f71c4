"""Gangs on the real API server: gated at admission, bound together once minCount members fit."""

from __future__ import annotations

from tests.e2e.control_plane import Json
from tests.e2e.objects import GATE, Pool
from tests.polling import wait_for


def test_gang_is_gated_until_complete_then_bound_as_one(pool: Pool) -> None:
    pool.add_nodes(2, cpu="4")
    pool.create(pool.pod_group("train", {"gang": {"minCount": 4}}))
    members = [f"w{i}" for i in range(4)]
    pool.create(*(pool.pod(m, cpu="2", group="train") for m in members[:3]))

    created = pool.read_pod("w0")
    assert created is not None
    assert [g["name"] for g in created["spec"].get("schedulingGates", [])] == [GATE]
    assert created["spec"]["schedulerName"] == "phalanx-scheduler"
    assert pool.bound(members) == {}, "no member may bind before the gang is complete"

    pool.create(pool.pod(members[3], cpu="2", group="train"))
    placed = pool.wait_bound(members)
    assert sorted(placed.values()) == sorted(pool.nodes * 2)
    for name in members:
        pod = pool.read_pod(name)
        assert pod is not None and not pod["spec"].get("schedulingGates")
    path = f"/apis/scheduling.phalanx.dev/v1alpha1/namespaces/{pool.namespace}/podgroups/train"

    def scheduled() -> Json | None:
        conditions = (pool.api.get(path) or {}).get("status", {}).get("conditions", [])
        return next((c for c in conditions if c["type"] == "PodGroupScheduled" and c["status"] == "True"), None)

    group = wait_for(scheduled, what="PodGroupScheduled=True on the PodGroup")
    assert group["reason"] == "Scheduled"
    assert len(pool.events("Scheduled")) == 4


def test_gang_that_cannot_fit_binds_nothing_and_says_why(pool: Pool) -> None:
    pool.add_nodes(1, cpu="4")
    pool.create(pool.pod_group("big", {"gang": {"minCount": 3}}))
    members = ["b0", "b1", "b2"]
    pool.create(*(pool.pod(m, cpu="2", group="big") for m in members))

    def unschedulable() -> str | None:
        pod = pool.read_pod("b0") or {}
        condition = next((c for c in pod.get("status", {}).get("conditions", []) if c["type"] == "PodScheduled"), {})
        return condition.get("message") if condition.get("reason") == "Unschedulable" else None

    message = wait_for(unschedulable, what="PodScheduled=False/Unschedulable on b0")
    assert "gang" in message and "needs 3" in message
    assert pool.bound(members) == {}
