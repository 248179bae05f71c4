"""GPUs through DRA (`resource.k8s.io/v1`, structured parameters) on the real API server, beside kube-scheduler
1.36.2 (issue 39): a claim whose CEL selector only one node's device satisfies, a claim the resourceclaim controller
makes from a template, two pods that want the one device, and gangs whose members each claim a device.

As in `test_constraints.py`, each scenario is made twice, once per scheduler, each side in its own namespace and on
its own nodes (`SIDE_KEY`). Each node publishes its devices in a ResourceSlice of its own pool (the pool is named
after the node), all of one driver, `gpu.example.com`, and one DeviceClass of the test selects that driver. Both
schedulers must bind the same pods to the same nodes and write the same allocation into each claim's status (the
pool, hence the node, and the device; `reservedFor` naming the pod), or leave the same pods pending for the same
reasons and the same claims unallocated.

Without DynamicResources a pod's claims would not be read at all: every pod would bind where scoring puts it (the
node with more free CPU, which is not the a100 node) and no claim would be allocated.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator, Sequence

import pytest

from tests.devices import DRIVER
from tests.e2e.devices import DeviceSide, device_sides
from tests.e2e.differential.kube_scheduler import KubeScheduler
from tests.e2e.objects import NATIVE, Pool
from tests.e2e.sides import QUIET_SECONDS, Settled, Side, settled
from tests.polling import wait_for

CANNOT_ALLOCATE = "cannot allocate all claims"
FIT_ERROR = re.compile(r"0/\d+ nodes are available: [^.]*")
"""The part of a PodScheduled message that says why each node was rejected."""


@pytest.fixture
def sides(pool: Pool, kube_scheduler: KubeScheduler) -> Iterator[dict[str, DeviceSide]]:
    with device_sides(pool) as made:
        yield made


def settled_on_both(sides: dict[str, DeviceSide], names: Sequence[str]) -> dict[str, Settled]:
    as_sides: dict[str, Side] = dict(sides)
    return settled(as_sides, names)


def gpu_nodes(side: DeviceSide) -> None:
    """Two h100 on one node, one a100 on another with less CPU: scoring alone puts a pod on the h100 node."""
    side.add_gpu_node("h100", "h100", "h100", cpu="16")
    side.add_gpu_node("a100", "a100", cpu="4")


def test_a_claim_for_an_a100_takes_its_pod_to_the_a100_node_and_is_allocated_there(
    sides: dict[str, DeviceSide],
) -> None:
    for side in sides.values():
        gpu_nodes(side)
        side.create_claim("a100", "a100")
    for side in sides.values():
        side.create(side.gpu_pod("train", claim="a100"))
    result = settled_on_both(sides, ["train"])
    for tag, (placed, said) in result.items():
        assert placed == {"train": "a100"}, f"{tag}: {placed} {said}"
    for tag, side in sides.items():
        (allocation,) = side.wait_allocated(["a100"]).values()
        assert allocation == ([("gpu", DRIVER, "a100", "gpu-0")], ["pods/train"], "a100"), f"{tag}: {allocation}"
        sides[tag].check_written("a100", "train")


def test_a_claim_made_from_a_template_is_waited_for_then_allocated(sides: dict[str, DeviceSide]) -> None:
    """The resourceclaim controller (kube-controller-manager) makes `<pod>-gpu-<suffix>` and names it in the pod's
    `status.resourceClaimStatuses`; each scheduler waits for that, then allocates one h100 to it."""
    for side in sides.values():
        gpu_nodes(side)
        side.create_template("one-h100", "h100")
    for side in sides.values():
        side.create(side.gpu_pod("train", template="one-h100"))
    result = settled_on_both(sides, ["train"])
    for tag, side in sides.items():
        placed, said = result[tag]
        assert placed == {"train": "h100"}, f"{tag}: {placed} {said}"
        claim = side.claim_of("train")
        assert claim is not None and claim.startswith("train-gpu-"), f"{tag}: {claim}"
        (owner,) = side.claims()[claim]["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["name"]) == ("Pod", "train")
        (allocation,) = side.wait_allocated([claim]).values()
        results, reserved, node = allocation
        ((request, driver, role, device),) = results
        assert (request, driver, role, reserved, node) == ("gpu", DRIVER, "h100", ["pods/train"], "h100"), allocation
        assert device in ("gpu-0", "gpu-1")
        side.check_written(claim, "train")


def test_two_pods_that_want_the_one_a100_bind_one_and_the_other_cannot_allocate(
    sides: dict[str, DeviceSide],
) -> None:
    """Each pod has a claim of its own for an a100, and there is one: one pod gets it, the other waits, saying that
    its claims cannot be allocated on either GPU node, and its claim stays unallocated."""
    names = ["first", "second"]
    for side in sides.values():
        gpu_nodes(side)
        for name in names:
            side.create_claim(name, "a100")
    for side in sides.values():
        side.create(*(side.gpu_pod(name, claim=name) for name in names))
    result = settled_on_both(sides, names)
    for tag, side in sides.items():
        placed, said = result[tag]
        assert list(placed.values()) == ["a100"], f"{tag}: {placed} {said}"
        (winner,) = placed
        (waiting,) = said
        assert f"2 {CANNOT_ALLOCATE}" in said[waiting], f"{tag}: {said}"
        time.sleep(QUIET_SECONDS)
        allocated = side.allocated(names)
        assert allocated == {winner: ([("gpu", DRIVER, "a100", "gpu-0")], [f"pods/{winner}"], "a100")}, tag
    assert list(result["phalanx"][1].values()) == list(result["kube"][1].values())


def gang(side: DeviceSide, members: int, min_count: int) -> list[str]:
    """A native PodGroup whose members each claim one h100 (Phalanx serves `scheduling.k8s.io/v1alpha2` PodGroups
    too). Our webhook gates every member of a PodGroup; for kube-scheduler's side the test lifts that gate, as the
    gang's own scheduler would."""
    group = side.pool.pod_group("train", {"gang": {"minCount": min_count}}, api_version=NATIVE)
    group["metadata"]["namespace"] = side.namespace
    side.pool.api.create(f"/apis/{NATIVE}/namespaces/{side.namespace}/podgroups", group)
    names = [f"w{i}" for i in range(members)]
    for name in names:
        side.create_claim(name, "h100")
        side.create(side.gpu_pod(name, claim=name, schedulingGroup={"podGroupName": "train"}))
    side.hand_over(names)
    return names


def test_a_gang_whose_members_each_claim_an_h100_binds_on_the_two_h100(sides: dict[str, DeviceSide]) -> None:
    members: dict[str, list[str]] = {}
    for tag, side in sides.items():
        gpu_nodes(side)
        members[tag] = gang(side, 2, 2)
    result = settled_on_both(sides, ["w0", "w1"])
    for tag, side in sides.items():
        placed, said = result[tag]
        assert sorted(placed.values()) == ["h100", "h100"], f"{tag}: {placed} {said}"
        allocated = side.wait_allocated(members[tag])
        devices = sorted(device for results, _, _ in allocated.values() for _, _, _, device in results)
        assert devices == ["gpu-0", "gpu-1"], f"{tag}: {allocated}"
        for name, (results, reserved, node) in allocated.items():
            assert ([r[:3] for r in results], reserved, node) == ([("gpu", DRIVER, "h100")], [f"pods/{name}"], "h100")


def test_a_gang_with_more_members_than_h100_binds_none_and_allocates_no_claim(sides: dict[str, DeviceSide]) -> None:
    """Three members, each claiming one h100, and two h100: all or nothing, so nothing; not a member bound, not a
    claim allocated, though two of them could have been."""
    members: dict[str, list[str]] = {}
    for tag, side in sides.items():
        gpu_nodes(side)
        members[tag] = gang(side, 3, 3)

    def tried(side: DeviceSide) -> bool:
        return any(side.unschedulable(n) or n in side.placed([n]) for n in members[side.tag])

    def all_tried() -> bool:
        return all(tried(side) for side in sides.values())

    wait_for(all_tried, what="each scheduler to try the gang")
    deadline = time.monotonic() + QUIET_SECONDS * 2
    while time.monotonic() < deadline:
        for tag, side in sides.items():
            assert side.placed(members[tag]) == {}, f"{tag}: a member bound"
            assert side.allocated(members[tag]) == {}, f"{tag}: a claim allocated"
        time.sleep(0.5)
    # The member that found no device says so in the same words on both sides (Phalanx after the gang's own reason,
    # kube-scheduler's others say they wait for the gang's quorum).
    said = {tag: {n: side.unschedulable(n) or "" for n in members[tag]} for tag, side in sides.items()}
    fit_errors = {
        tag: sorted({e for m in messages.values() for e in FIT_ERROR.findall(re.split(r"[Pp]reemption: ", m)[0])})
        for tag, messages in said.items()
    }
    assert len(fit_errors["phalanx"]) == 1 and f"2 {CANNOT_ALLOCATE}" in fit_errors["phalanx"][0], said
    assert fit_errors["phalanx"] == fit_errors["kube"], said


def test_a_pod_that_needs_the_a100_preempts_the_pod_holding_it_where_kube_scheduler_does_not(
    pool: Pool, sides: dict[str, DeviceSide]
) -> None:
    """A priority-10 pod holds the a100; a priority-1000 pod claims an a100. Phalanx preempts the holder, the
    resourceclaim controller deallocates its claim once it is gone, and the preemptor gets the device. kube-scheduler
    1.36.2 does not preempt for devices (issue 39 asks Phalanx to): it says preemption is not helpful."""
    low = pool.priority_class("low", 10)
    high = pool.priority_class("high", 1000)
    for side in sides.values():
        gpu_nodes(side)
        side.create_claim("held", "a100")
        side.create(side.gpu_pod("holder", claim="held", priority_class=low))
    for tag, side in sides.items():
        assert settled_on_both({tag: side}, ["holder"])[tag][0] == {"holder": "a100"}
        side.wait_allocated(["held"])
    for side in sides.values():
        side.create_claim("wanted", "a100")
        side.create(side.gpu_pod("new", claim="wanted", priority_class=high))
    phalanx, kube = sides["phalanx"], sides["kube"]

    def preemptor_bound() -> bool:
        return phalanx.placed(["new"]) == {"new": "a100"}

    wait_for(preemptor_bound, timeout=60, what="Phalanx's preemptor bound on the a100 node")
    assert "holder" not in phalanx.pods(), "the holder is still there"
    (allocation,) = phalanx.wait_allocated(["wanted"]).values()
    assert allocation == ([("gpu", DRIVER, "a100", "gpu-0")], ["pods/new"], "a100"), allocation
    assert phalanx.allocation("held") is None, "the victim's claim is still allocated"

    said = wait_for(lambda: kube.unschedulable("new"), what="kube-scheduler to find the preemptor unschedulable")
    time.sleep(QUIET_SECONDS)
    assert kube.placed(["holder", "new"]) == {"holder": "a100"}, "kube-scheduler preempted for a device"
    assert f"2 {CANNOT_ALLOCATE}" in said and "Preemption is not helpful" in said, said
