"""`kubectl phalanx explain` of a pod that claims a device (DRA), answered by the scheduler's explain API from its
informers on the real API server, against what the scheduler then does.

Two GPU nodes of the pool (`DeviceSide`, as `test_devices.py` makes them): `h100` publishes two h100, `a100` one a100.
A pod whose claim selects an a100 is explained by a paused replica before it can act (`explained_before_it_acts`): the
explanation names the device the dry run allocates, and the scheduler, let go, writes that device into the claim. A
second pod that wants the a100 is then explained: its claim cannot be allocated, for the request `explain` names, and
the scheduler leaves it pending for that reason.
"""

from __future__ import annotations

import re

from tests.devices import DRIVER, device_class
from tests.e2e.control_plane import Json
from tests.e2e.devices import DeviceSide
from tests.e2e.objects import SCHEDULER_NAME, Pool
from tests.e2e.plugin import explain, explained_before_it_acts
from tests.e2e.stack import Stack
from tests.polling import wait_for

CANNOT = re.compile(r"0/(\d+) nodes are available: \1 cannot allocate all claims: request gpu\.")
"""Every node refuses the claim, for its one request."""


def scheduled(side: DeviceSide, name: str) -> Json | None:
    pod = side.pods().get(name, {})
    return next((c for c in pod.get("status", {}).get("conditions", []) if c["type"] == "PodScheduled"), None)


def test_explain_names_the_device_the_scheduler_allocates_and_why_another_claim_waits(
    phalanx: Stack, pool: Pool
) -> None:
    gpus = pool.cluster_object(device_class(f"{pool.name}-gpu"))["metadata"]["name"]
    side = DeviceSide(pool, "phalanx", SCHEDULER_NAME, pool.namespace, gpus)
    side.add_gpu_node("h100", "h100", "h100", cpu="16")
    a100 = side.add_gpu_node("a100", "a100", cpu="4")
    for name in ("train", "second"):
        side.create_claim(name, "a100")

    explained = explained_before_it_acts(
        phalanx, pool, lambda: side.create(side.gpu_pod("train", claim="train")), "pod", "train"
    )
    (claim,) = explained["claims"]
    want = {"request": "gpu", "driver": DRIVER, "pool": a100, "device": "gpu-0"}
    assert (claim["claim"], claim["allocated"], claim["forecast"], claim["message"]) == (
        f"{pool.namespace}/train",
        False,
        [want],
        None,
    ), claim
    assert explained["forecast"]["bound"] == [{"pod": f"{pool.namespace}/train", "node": a100}]
    (allocation,) = side.wait_allocated(["train"]).values()
    assert allocation == ([("gpu", DRIVER, "a100", "gpu-0")], ["pods/train"], "a100"), "the device explain named"

    side.create(side.gpu_pod("second", claim="second"))
    said = wait_for(
        lambda: (s := scheduled(side, "second")) is not None and s.get("reason") == "Unschedulable" and s["message"],
        what="the scheduler to try the second pod",
    )
    assert "cannot allocate all claims" in said, said
    (waiting,) = explain(phalanx.plane, pool.namespace, "pod", "second")["claims"]
    assert (waiting["allocated"], waiting["forecast"]) == (False, []), waiting
    assert CANNOT.fullmatch(waiting["message"] or ""), waiting
    assert side.allocation("second") is None, "the scheduler allocated nothing to it"
