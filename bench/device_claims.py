"""The DRA objects of `real_apiserver.py`'s `devices` and `devices-preempt` workloads, and the check of what the
schedulers allocated (issue 39).

Each node `node-i` publishes one ResourceSlice of its own pool, `node-i`, of `gpu-0 .. gpu-(n-1)` (h100s of
`tests/devices.py`'s driver); the DeviceClass CLASS selects the driver by CEL. Every pod has a ResourceClaim of its
own, named after it, for one device of the class, referenced by `resourceClaimName` (no controller manager runs, so
nothing would make a claim from a template).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.devices import DRIVER, RESOURCE, claim_spec, device_class, gpu_slice, resource_claim

CLASS = "bench-gpu"
REQUEST = "gpu"
"""The one request of every claim (`claim_spec`'s)."""
CLAIMS = f"/apis/{RESOURCE}/namespaces/{{ns}}/resourceclaims"
SLICES = f"/apis/{RESOURCE}/resourceslices"
CLASSES = f"/apis/{RESOURCE}/deviceclasses"
Device = tuple[str, str]
"""A device as the checks name it: its pool (the node's name) and its name."""


def the_class() -> dict[str, Any]:
    return device_class(CLASS)


def node_slice(node: str, devices: int) -> dict[str, Any]:
    return gpu_slice(node, ["h100"] * devices)


def claim(name: str, namespace: str) -> dict[str, Any]:
    """A claim for one device of CLASS, with no selector of its own."""
    return resource_claim(name, namespace, claim_spec(CLASS, []))


def claim_fields(name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """What a pod using claim `name` adds: to its spec (`resourceClaims`) and to its container's `resources`."""
    return {"resourceClaims": [{"name": REQUEST, "resourceClaimName": name}]}, {"claims": [{"name": REQUEST}]}


def allocated(node: str, device: str, pod: str, uid: str) -> dict[str, Any]:
    """The status of a claim given `device` of `node`'s pool and reserved for the bound pod `pod` (`uid`), as a
    scheduler writes it: the bench fills nodes this way."""
    result = {"request": REQUEST, "driver": DRIVER, "pool": node, "device": device}
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
    return {
        "status": {
            "allocation": {"devices": {"results": [result]}, "nodeSelector": {"nodeSelectorTerms": [term]}},
            "reservedFor": [{"resource": "pods", "name": pod, "uid": uid}],
        }
    }


RELEASED: dict[str, Any] = {"status": {"reservedFor": None, "allocation": None}}
"""The merge patch of the resourceclaim controller once a claim's only consumer is gone: no reservation, and the
claim deallocated (kube-controller-manager's `syncClaim`), so its device is free again."""


def device_of(claim_object: Mapping[str, Any]) -> tuple[list[Device], list[str], list[str]]:
    """A claim's devices, the pods it is reserved for, and the nodes its allocation's node selector names."""
    status = claim_object.get("status") or {}
    allocation = status.get("allocation") or {}
    results = (allocation.get("devices") or {}).get("results") or []
    devices = [(r.get("pool", ""), r.get("device", "")) for r in results if r.get("driver") == DRIVER]
    pods = [r.get("name", "") for r in status.get("reservedFor") or [] if r.get("resource") == "pods"]
    terms = (allocation.get("nodeSelector") or {}).get("nodeSelectorTerms") or []
    nodes = [
        v for t in terms for f in t.get("matchFields") or [] if f.get("key") == "metadata.name" for v in f["values"]
    ]
    return devices, pods, nodes


def allocation_problems(
    claims: Iterable[Mapping[str, Any]], placed: Mapping[str, str], freed: set[Device] | None = None
) -> list[str]:
    """What is wrong in the allocations: a device in two of `claims`; and for each pod of `placed` (bound, to the node
    the bench's watch saw; its claim is named after it) a claim not allocated exactly one device, not reserved for the
    pod alone, or for another node than the pod's (its device's pool, its node selector), or, with `freed` (the
    devices preemption freed), given a device not among them."""
    problems: list[str] = []
    holders: dict[Device, list[str]] = {}
    seen = set()
    for found in claims:
        name = found["metadata"]["name"]
        devices, pods, nodes = device_of(found)
        for device in devices:
            holders.setdefault(device, []).append(name)
        if name not in placed:
            continue
        seen.add(name)
        node = placed[name]
        if len(devices) != 1:
            problems.append(f"claim {name} allocated {len(devices)} devices")
        if pods != [name]:
            problems.append(f"claim {name} reserved for {pods}")
        if any(pool != node for pool, _ in devices) or nodes != [node]:
            problems.append(f"pod {name} on {node}, its claim's devices {devices} for nodes {nodes}")
        if freed is not None:
            problems += [
                f"pod {name} got {pool}/{device}, no victim's"
                for pool, device in devices
                if (pool, device) not in freed
            ]
    problems += [f"claim of {name} missing" for name in placed if name not in seen]
    problems += [f"{pool}/{device} in claims {names}" for (pool, device), names in holders.items() if len(names) > 1]
    return problems


def problems_note(problems: list[str], limit: int = 3) -> str:
    """How many problems were found, and the first `limit` of them."""
    return f"{len(problems)} problems, e.g. " + "; ".join(problems[:limit]) if problems else ""
