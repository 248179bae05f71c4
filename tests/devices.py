"""DRA objects (`resource.k8s.io/v1`) as JSON, for the tests that send them to a server (the loopback one or the
real one): one driver, `DRIVER`, whose devices are GPUs.

A node publishes its devices in a ResourceSlice of its own pool (named after the node). A device is `gpu-<i>`, with a
`model` string attribute and, for the models of `MEMORY`, a `memory` int attribute (GiB) and a `memory` capacity, so
that selectors can read the one device three ways.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

Json = dict[str, Any]

DRIVER = "gpu.example.com"
RESOURCE = "resource.k8s.io/v1"
MEMORY = {"l4": 24, "a100": 40, "h100": 80}
"""GiB of each model the tests know, published as the device's `memory` attribute and capacity."""


def model_is(model: str) -> str:
    """The CEL selector of one model."""
    return f'device.attributes["{DRIVER}"].model == "{model}"'


def device_class(name: str, *expressions: str) -> Json:
    """A DeviceClass of `DRIVER`'s devices, narrowed by `expressions`."""
    selectors = [{"cel": {"expression": e}} for e in (f'device.driver == "{DRIVER}"', *expressions)]
    return {"apiVersion": RESOURCE, "kind": "DeviceClass", "metadata": {"name": name}, "spec": {"selectors": selectors}}


def claim_spec(class_name: str, expressions: Sequence[str], count: int = 1) -> Json:
    """One request, `gpu`, for `count` devices of the class that all of `expressions` select."""
    exactly: Json = {"deviceClassName": class_name, "count": count}
    if expressions:
        exactly["selectors"] = [{"cel": {"expression": e}} for e in expressions]
    return {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}


def gpu_slice(node_name: str, models: Sequence[str]) -> Json:
    """The ResourceSlice of `node_name`'s pool: `gpu-<i>` of `models[i]`."""
    devices = []
    for i, model in enumerate(models):
        device: Json = {"name": f"gpu-{i}", "attributes": {"model": {"string": model}}}
        if model in MEMORY:
            device["attributes"]["memory"] = {"int": MEMORY[model]}
            device["capacity"] = {"memory": {"value": f"{MEMORY[model]}Gi"}}
        devices.append(device)
    pool = {"name": node_name, "generation": 1, "resourceSliceCount": 1}
    spec = {"driver": DRIVER, "nodeName": node_name, "pool": pool, "devices": devices}
    return {"apiVersion": RESOURCE, "kind": "ResourceSlice", "metadata": {"name": node_name}, "spec": spec}


def resource_claim(name: str, namespace: str, spec: Json) -> Json:
    """A ResourceClaim of `spec` (`claim_spec`)."""
    meta = {"name": name, "namespace": namespace}
    return {"apiVersion": RESOURCE, "kind": "ResourceClaim", "metadata": meta, "spec": spec}
