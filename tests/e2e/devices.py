"""Devices (DRA, `resource.k8s.io/v1`) for the end-to-end tests: GPU nodes that publish ResourceSlices (as
`tests/devices.py` makes them), claims with CEL selectors, and what the API server says each claim was given.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from tests.devices import RESOURCE, Json, claim_spec, device_class, gpu_slice, model_is, resource_claim
from tests.e2e.differential.live import KUBE_SCHEDULER_NAME
from tests.e2e.objects import SCHEDULER_NAME, Pool
from tests.e2e.sides import Side
from tests.polling import wait_for

SEED = int(os.environ.get("PHALANX_DEVICE_FUZZ_SEED") or time.time_ns() % 1_000_000)
"""The random device scenarios' and failovers' seed (`test_devices_fuzz.py`, `test_devices_failover.py`), printed by
each and given back with `PHALANX_DEVICE_FUZZ_SEED=N`."""
FINALIZER = "resource.kubernetes.io/delete-protection"

Allocation = tuple[list[tuple[str, str, str, str]], list[str], str | None]
"""A claim's allocation as the tests compare it: `[(request, driver, node role of the pool, device)]`, the
`resource/name` of each consumer it is reserved for, and the role of the one node its node selector admits."""


@dataclass(slots=True)
class DeviceSide(Side):
    """A side whose nodes publish GPUs and whose pods claim them (by default of the DeviceClass `device_class`)."""

    device_class: str = ""
    slices: dict[str, list[str]] = field(default_factory=dict)
    """node role -> the model of each of its devices, `gpu-0` first."""

    def add_gpu_node(self, role: str, *models: str, cpu: str = "16", **labels: str) -> str:
        """A node with one device per model (`gpu-0`, `gpu-1`, ...), in a pool named after it."""
        name = self.add_node(role, cpu=cpu, **labels)
        self.pool.cluster_object(gpu_slice(name, models))
        self.slices[role] = list(models)
        return name

    def claim_spec(self, model: str) -> Json:
        return claim_spec(self.device_class, [model_is(model)])

    def create_claim(self, name: str, model: str | None = None, spec: Json | None = None) -> None:
        """A ResourceClaim for one device of `model`, or of `spec`."""
        made = spec if spec is not None else self.claim_spec(str(model))
        claim = resource_claim(name, self.namespace, made)
        self.pool.api.create(f"/apis/{RESOURCE}/namespaces/{self.namespace}/resourceclaims", claim)

    def create_template(self, name: str, model: str | None = None, spec: Json | None = None) -> None:
        meta = {"name": name, "namespace": self.namespace}
        template = {"apiVersion": RESOURCE, "kind": "ResourceClaimTemplate", "metadata": meta}
        template["spec"] = {"spec": spec if spec is not None else self.claim_spec(str(model))}
        self.pool.api.create(f"/apis/{RESOURCE}/namespaces/{self.namespace}/resourceclaimtemplates", template)

    def gpu_pod(
        self,
        name: str,
        claim: str | None = None,
        template: str | None = None,
        priority_class: str | None = None,
        **spec: object,
    ) -> Json:
        """A pod whose container uses one claim, `gpu`: the named ResourceClaim, or one made from `template`."""
        source = {"resourceClaimName": claim} if claim is not None else {"resourceClaimTemplateName": template}
        made = self.pod(name, priority_class=priority_class)
        made["spec"] |= {"resourceClaims": [{"name": "gpu", **source}], **spec}
        made["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
        return made

    def wait_allocated(self, names: Sequence[str]) -> dict[str, Allocation]:
        """The allocation of each of `names`, once all are allocated."""

        def all_allocated() -> dict[str, Allocation] | None:
            found = self.allocated(names)
            return found if len(found) == len(names) else None

        found: dict[str, Allocation] = wait_for(all_allocated, what=f"{self.tag}'s claims {list(names)} allocated")
        return found

    def claims(self) -> dict[str, Json]:
        path = f"/apis/{RESOURCE}/namespaces/{self.namespace}/resourceclaims"
        return {c["metadata"]["name"]: c for c in self.pool.api.items(path)}

    def claim_of(self, pod_name: str, pods: dict[str, Json] | None = None) -> str | None:
        """The claim the resourceclaim controller made for `pod_name`'s template, once it said so in the pod."""
        pod = (pods if pods is not None else self.pods()).get(pod_name, {})
        statuses = pod.get("status", {}).get("resourceClaimStatuses", [])
        return next((s.get("resourceClaimName") for s in statuses if s["name"] == "gpu"), None)

    def allocation(self, claim_name: str, claims: dict[str, Json] | None = None) -> Allocation | None:
        """A claim's `Allocation`, or None while it has none."""
        claim = (claims if claims is not None else self.claims()).get(claim_name)
        if claim is None or not claim.get("status", {}).get("allocation"):
            return None
        status = claim["status"]
        results = [
            (r["request"], r["driver"], self.role(r["pool"]), r["device"])
            for r in status["allocation"]["devices"]["results"]
        ]
        reserved = [f"{r['resource']}/{r['name']}" for r in status.get("reservedFor", [])]
        terms = status["allocation"].get("nodeSelector", {}).get("nodeSelectorTerms", [])
        fields = [f for t in terms for f in t.get("matchFields", [])]
        node = self.role(fields[0]["values"][0]) if len(fields) == 1 and fields[0]["key"] == "metadata.name" else None
        return results, reserved, node

    def allocated(self, names: Sequence[str] | None = None) -> dict[str, Allocation]:
        """The allocation of each of `names` (every claim of the side when None) that has one."""
        claims = self.claims()
        return {n: a for n in (names if names is not None else claims) if (a := self.allocation(n, claims)) is not None}

    def check_written(self, claim_name: str, pod_name: str) -> None:
        """What an `Allocation` leaves out: `reservedFor` names the pod by its uid too, the allocation says when it
        was made, and the claim holds the finalizer that keeps it while in use."""
        claim = self.claims()[claim_name]
        pod = self.pods()[pod_name]
        assert claim["status"]["reservedFor"] == [{"resource": "pods", "name": pod_name, "uid": pod["metadata"]["uid"]}]
        assert claim["status"]["allocation"].get("allocationTimestamp"), claim["status"]
        assert FINALIZER in claim["metadata"].get("finalizers", []), claim["metadata"]


@contextmanager
def device_sides(pool: Pool, *classes: Json) -> Iterator[dict[str, DeviceSide]]:
    """Both schedulers' sides (`sides.py`) of the test's pool, and its DeviceClasses (`classes`, the first the
    sides' default; when none, one of all `DRIVER`'s devices, `<pool>-gpu`). kube-scheduler's namespace and pods
    go at the end, the pool's with the pool."""
    kube_namespace = f"{pool.namespace}-kube"
    pool.api.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": kube_namespace}})
    for made_class in classes or (device_class(f"{pool.name}-gpu"),):
        pool.cluster_object(made_class)
    default = classes[0]["metadata"]["name"] if classes else f"{pool.name}-gpu"
    made = {
        "phalanx": DeviceSide(pool, "phalanx", SCHEDULER_NAME, pool.namespace, default),
        "kube": DeviceSide(pool, "kube", KUBE_SCHEDULER_NAME, kube_namespace, default),
    }
    try:
        yield made
    finally:
        pool.api.request("DELETE", f"/api/v1/namespaces/{kube_namespace}")
        for name in made["kube"].pods():
            pool.api.delete(f"/api/v1/namespaces/{kube_namespace}/pods/{name}", grace_period_seconds=0)
