"""DynamicResources: a pod's ResourceClaims allocated from the devices ResourceSlices publish, as kube-scheduler 1.36
allocates them (structured parameters), through the simulator (which plays the resource claim controller)."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.api.device_class import DeviceClass
from scheduler.api.resource_claim import ResourceClaim, ResourceClaimTemplate
from scheduler.api.resource_slice import ResourceSlice
from tests.builders import PodWrapper, make_node, make_pod, make_podgroup
from tests.scheduler.scenario import Outcome, run

DRIVER = "gpu.example.com"
NODES = [make_node(n).cap(cpu="8", memory="8Gi").obj() for n in ("n1", "n2")]
GPU = DeviceClass.model_validate(
    {"metadata": {"name": "gpu"}, "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}}
)


def model_is(model: str) -> dict[str, Any]:
    return {"cel": {"expression": f'device.attributes["{DRIVER}"].model == "{model}"'}}


def devices(
    node: str, *models: str, numa: tuple[int, ...] = (), tainted: tuple[int, ...] = (), slices: int = 1
) -> ResourceSlice:
    """A slice of `node`'s devices gpu-0.., one per model, on NUMA node `numa[i]` (0 when not given), those of
    `tainted` with a NoSchedule taint, in a pool that declares `slices` slices."""
    listed: list[dict[str, Any]] = [
        {"name": f"gpu-{i}", "attributes": {"model": {"string": m}, "numa": {"int": numa[i] if numa else 0}}}
        for i, m in enumerate(models)
    ]
    for i in tainted:
        listed[i]["taints"] = [{"key": "maintenance", "value": "true", "effect": "NoSchedule"}]
    pool = {"name": node, "generation": 1, "resourceSliceCount": slices}
    spec = {"driver": DRIVER, "nodeName": node, "pool": pool}
    return ResourceSlice.model_validate({"metadata": {"name": f"{node}-gpus"}, "spec": {**spec, "devices": listed}})


def request(name: str = "gpu", count: int = 1, *selectors: dict[str, Any], mode: str | None = None) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": "gpu", "count": count, "selectors": list(selectors)}
    if mode is not None:
        exactly = {"deviceClassName": "gpu", "allocationMode": mode, "selectors": list(selectors)}
    return {"name": name, "exactly": exactly}


def claim(name: str, *requests: dict[str, Any], constraints: list[dict[str, Any]] | None = None) -> ResourceClaim:
    spec = {"devices": {"requests": list(requests), "constraints": constraints or []}}
    return ResourceClaim.model_validate({"metadata": {"name": name, "namespace": "default"}, "spec": spec})


def template(name: str, *requests: dict[str, Any]) -> ResourceClaimTemplate:
    spec = {"spec": {"devices": {"requests": list(requests)}}}
    return ResourceClaimTemplate.model_validate({"metadata": {"name": name, "namespace": "default"}, "spec": spec})


def pod(name: str = "p") -> PodWrapper:
    return make_pod(name).req(cpu="1")


def allocated(outcome: Outcome, key: str) -> list[tuple[str, str, str]]:
    """(request, pool, device) of each device the claim `default/NAME` was given."""
    stored = outcome.objects.resource_claims[key if "/" in key else f"default/{key}"]
    allocation = stored.status.allocation
    return [(r.request, r.pool, r.device) for r in allocation.devices.results] if allocation else []


def run_with(*objects: Any) -> Outcome:
    return run(*NODES, GPU, *(o.obj() if hasattr(o, "obj") else o for o in objects))


@pytest.mark.parametrize(
    ("objects", "want_node", "want_devices", "want_message"),
    [
        pytest.param(
            [devices("n1", "h100", "h100"), devices("n2", "a100"), claim("c", request("gpu", 1, model_is("a100")))],
            "n2",
            [("gpu", "n2", "gpu-0")],
            "",
            id="a CEL selector takes the pod to the node of the only matching device",
        ),
        pytest.param(
            [devices("n1", "h100"), devices("n2", "h100", "h100"), claim("c", request("gpu", 2))],
            "n2",
            [("gpu", "n2", "gpu-0"), ("gpu", "n2", "gpu-1")],
            "",
            id="a count of two needs a node with two free devices",
        ),
        pytest.param(
            [devices("n1", "h100"), devices("n2", "a100"), claim("c", request("gpu", 3))],
            None,
            [],
            "2 cannot allocate all claims",
            id="a count no node has: cannot allocate all claims on every node",
        ),
        pytest.param(
            [devices("n1", "h100", "a100"), devices("n2", "h100"), claim("c", request("all", 0, mode="All"))],
            "n1",
            [("all", "n1", "gpu-0"), ("all", "n1", "gpu-1")],
            "",
            id="allocationMode All takes every matching device of the node",
        ),
        pytest.param(
            [devices("n1", "l4", "l4", slices=2), devices("n2", "l4"), claim("c", request("all", 0, mode="All"))],
            "n2",
            [("all", "n2", "gpu-0")],
            "",
            id="allocationMode All skips a pool whose slices are not all published",
        ),
        pytest.param(
            [devices("n1", "h100", "h100", tainted=(0, 1)), devices("n2", "h100"), claim("c", request("gpu", 1))],
            "n2",
            [("gpu", "n2", "gpu-0")],
            "",
            id="a device tainted NoSchedule is not allocated to a request that does not tolerate it",
        ),
        pytest.param(
            [
                devices("n1", "l4", "l4"),
                devices("n2", "a100"),
                claim(
                    "c",
                    {
                        "name": "gpu",
                        "firstAvailable": [
                            {"name": "big", "deviceClassName": "gpu", "selectors": [model_is("h100")]},
                            {"name": "small", "deviceClassName": "gpu", "count": 2, "selectors": [model_is("l4")]},
                        ],
                    },
                ),
            ],
            "n1",
            [("gpu/small", "n1", "gpu-0"), ("gpu/small", "n1", "gpu-1")],
            "",
            id="firstAvailable falls back to the next subrequest",
        ),
        pytest.param(
            [
                devices("n1", "l4", "l4", "l4", numa=(0, 1, 1)),
                claim("c", request("a", 1), request("b", 1), constraints=[{"matchAttribute": f"{DRIVER}/numa"}]),
            ],
            "n1",
            [("a", "n1", "gpu-1"), ("b", "n1", "gpu-2")],
            "",
            id="matchAttribute backtracks to two devices on the same NUMA node",
        ),
        pytest.param(
            [devices("n1", "l4"), claim("c", request("gpu", 1, {"cel": {"expression": "device.nope =="}}))],
            None,
            [],
            "cannot allocate all claims: request gpu: CEL compile error",
            id="a selector that does not compile is reported",
        ),
        pytest.param(
            [devices("n1", "l4"), {"claim": "missing"}],
            None,
            [],
            'resourceclaim.resource.k8s.io "missing" not found',
            id="a missing claim is said once for the pod",
        ),
        pytest.param(
            [
                devices("n1", "l4"),
                ResourceClaim.model_validate(
                    {
                        "metadata": {"name": "c", "namespace": "default"},
                        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "tpu"}}]}},
                    }
                ),
            ],
            None,
            [],
            "request gpu: device class tpu does not exist",
            id="a request of a missing class",
        ),
        pytest.param(
            [
                devices("n1", "l4", "l4"),
                claim("c", request("a", 1), request("b", 1), constraints=[{"distinctAttribute": f"{DRIVER}/numa"}]),
            ],
            None,
            [],
            "phalanx-scheduler does not support spec.devices.constraints[0].distinctAttribute of ResourceClaim "
            "default/c",
            id="what is not implemented is refused, never ignored",
        ),
    ],
)
def test_dynamic_resources(
    objects: list[Any], want_node: str | None, want_devices: list[tuple[str, str, str]], want_message: str
) -> None:
    named = next((o["claim"] for o in objects if isinstance(o, dict)), "c")
    outcome = run_with(*(o for o in objects if not isinstance(o, dict)), pod().named_claim("gpu", named))
    assert outcome.node_of("p") == want_node
    if want_node is not None:
        assert allocated(outcome, "c") == want_devices
        stored = outcome.objects.resource_claims["default/c"]
        assert [r.name for r in stored.status.reserved_for] == ["p"]
    else:
        _, message = outcome.pending("p") or ("", "")
        assert want_message in message, message
        assert all(c.status.allocation is None for c in outcome.objects.resource_claims.values())


def test_two_pods_never_get_one_device() -> None:
    outcome = run_with(
        devices("n1", "l4"),
        devices("n2", "l4"),
        template("one", request("gpu", 1)),
        *(pod(f"p{i}").resource_claim("gpu", "one") for i in range(3)),
    )
    given = [r for c in outcome.objects.resource_claims.values() for r in allocated(outcome, c.key)]
    assert sorted(outcome.bound.values()) == ["n1", "n2"]
    assert len(given) == len(set(given)) == 2
    _, message = outcome.pending("p2") or ("", "")
    assert "2 cannot allocate all claims" in message


def test_a_claim_made_from_a_template_is_owned_by_its_pod_and_named_in_its_status() -> None:
    outcome = run_with(devices("n1", "l4"), template("one", request("gpu", 1)), pod().resource_claim("gpu", "one"))
    assert outcome.node_of("p") == "n1"
    status = outcome.objects.pods["default/p"].status.resource_claim_statuses
    made = outcome.objects.resource_claims[f"default/{status[0].resource_claim_name}"]
    assert made.metadata.owner_references[0].name == "p"
    assert allocated(outcome, made.key) == [("gpu", "n1", "gpu-0")]


def test_a_shared_claim_is_allocated_once_and_its_pods_follow_it() -> None:
    outcome = run_with(
        devices("n1", "l4"),
        devices("n2", "l4"),
        claim("c", request("gpu", 1)),
        pod("a").named_claim("gpu", "c"),
        pod("b").named_claim("gpu", "c"),
    )
    assert outcome.node_of("a") == outcome.node_of("b") == "n1"
    assert allocated(outcome, "c") == [("gpu", "n1", "gpu-0")]
    assert [r.name for r in outcome.objects.resource_claims["default/c"].status.reserved_for] == ["a", "b"]


def test_a_gang_that_cannot_allocate_every_member_allocates_none() -> None:
    members = [pod(f"m{i}").group("g").resource_claim("gpu", "one").obj() for i in range(3)]
    outcome = run_with(
        devices("n1", "l4"),
        devices("n2", "l4"),
        template("one", request("gpu", 1)),
        make_podgroup("g").gang(3).obj(),
        *members,
    )
    assert outcome.bound == {}
    assert all(c.status.allocation is None for c in outcome.objects.resource_claims.values())
    _, message = outcome.pending("m0") or ("", "")
    assert "gang default/g needs 3 members, 2 can be placed" in message


def test_a_pod_group_claim_is_allocated_once_for_the_group() -> None:
    group = (
        make_podgroup("g").native().gang(2).spec_field("resourceClaims", [{"name": "net", "resourceClaimName": "c"}])
    )
    members = [make_pod(f"m{i}").req(cpu="6").scheduling_group("g").named_claim("net", "c") for i in range(2)]
    outcome = run_with(
        ResourceSlice.model_validate(
            {
                "metadata": {"name": "fabric"},
                "spec": {
                    "driver": DRIVER,
                    "allNodes": True,
                    "pool": {"name": "fabric", "generation": 1, "resourceSliceCount": 1},
                    "devices": [{"name": "channel-0", "attributes": {"model": {"string": "nvlink"}}}],
                },
            }
        ),
        claim("c", request("channel", 1)),
        group,
        *members,
    )
    assert sorted(outcome.bound.values()) == ["n1", "n2"]
    stored = outcome.objects.resource_claims["default/c"]
    assert allocated(outcome, "c") == [("channel", "fabric", "channel-0")]
    assert [(r.resource, r.name) for r in stored.status.reserved_for] == [("podgroups", "g")]
    assert stored.status.allocation is not None and stored.status.allocation.node_selector is None


def holding(name: str, node: str, *devices_held: str, pods: tuple[str, ...] = ()) -> ResourceClaim:
    """A claim for one device, allocated `devices_held` of `node`'s pool and reserved for `pods` (running)."""
    made = claim(name, request("gpu", len(devices_held)))
    results = [{"request": "gpu", "driver": DRIVER, "pool": node, "device": d} for d in devices_held]
    status = {
        "allocation": {"devices": {"results": results}},
        "reservedFor": [{"resource": "pods", "name": p, "uid": f"uid-{p}"} for p in pods],
    }
    return ResourceClaim.model_validate({**made.model_dump(by_alias=True), "status": status})


def running(name: str, node: str, claim_name: str, priority: int = 10) -> PodWrapper:
    return pod(name).priority(priority).on(node).uid(f"uid-{name}").named_claim("gpu", claim_name)


def test_a_victims_device_is_freed_for_the_preemptor() -> None:
    """The only a100 is held by a priority-10 pod: a priority-1000 pod that claims an a100 preempts it, and once the
    victim is gone (its claim deallocated, as the claim controller does) takes the device. The h100 node, with room
    and free devices, is no use to it."""
    outcome = run(
        *NODES,
        GPU,
        devices("n1", "h100", "h100"),
        devices("n2", "a100"),
        holding("low-gpu", "n2", "gpu-0", pods=("low",)),
        running("low", "n2", "low-gpu").obj(),
        claim("c", request("gpu", 1, model_is("a100"))),
        pod("p").priority(1000).named_claim("gpu", "c").obj(),
        preempt=True,
    )
    assert [p["victim"] for p in outcome.report["preemptions"]] == ["default/low"]
    assert outcome.node_of("p") == "n2"
    assert allocated(outcome, "c") == [("gpu", "n2", "gpu-0")]
    assert allocated(outcome, "low-gpu") == []


def test_a_device_shared_with_a_pod_that_stays_is_not_freed() -> None:
    """The a100's claim is shared by a priority-10 pod and a priority-5000 one: preempting the first frees nothing,
    so nothing is preempted."""
    outcome = run(
        *NODES,
        GPU,
        devices("n2", "a100"),
        holding("shared", "n2", "gpu-0", pods=("low", "keep")),
        running("low", "n2", "shared").obj(),
        running("keep", "n2", "shared", priority=5000).obj(),
        claim("c", request("gpu", 1, model_is("a100"))),
        pod("p").priority(1000).named_claim("gpu", "c").obj(),
        preempt=True,
    )
    assert outcome.report["preemptions"] == []
    _, message = outcome.pending("p") or ("", "")
    assert "cannot allocate all claims" in message, message


def test_a_gang_preempts_the_pods_that_hold_the_devices_its_members_need() -> None:
    """Two priority-10 pods each hold one of n1's h100 (n2 has an a100 only): a gang of two members that each claim
    an h100 takes both, whole."""
    members = [pod(f"m{i}").group("g").priority(1000).named_claim("gpu", f"c{i}").obj() for i in range(2)]
    outcome = run(
        *NODES,
        GPU,
        devices("n1", "h100", "h100"),
        devices("n2", "a100"),
        holding("a", "n1", "gpu-0", pods=("low-a",)),
        holding("b", "n1", "gpu-1", pods=("low-b",)),
        running("low-a", "n1", "a").obj(),
        running("low-b", "n1", "b").obj(),
        *(claim(f"c{i}", request("gpu", 1, model_is("h100"))) for i in range(2)),
        make_podgroup("g").gang(2).priority(1000).obj(),
        *members,
        preempt=True,
    )
    assert sorted(p["victim"] for p in outcome.report["preemptions"]) == ["default/low-a", "default/low-b"]
    assert outcome.bound == {"default/m0": "n1", "default/m1": "n1"}
    assert sorted(d for i in range(2) for _, _, d in allocated(outcome, f"c{i}")) == ["gpu-0", "gpu-1"]


def test_pods_of_equal_priority_are_not_preempted_for_a_device() -> None:
    outcome = run(
        *NODES,
        GPU,
        devices("n2", "a100"),
        holding("low-gpu", "n2", "gpu-0", pods=("low",)),
        running("low", "n2", "low-gpu", priority=1000).obj(),
        claim("c", request("gpu", 1, model_is("a100"))),
        pod("p").priority(1000).named_claim("gpu", "c").obj(),
        preempt=True,
    )
    assert outcome.report["preemptions"] == []
    assert outcome.pending("p") is not None
