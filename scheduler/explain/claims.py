"""A pending unit's ResourceClaims (DRA): the devices each has, those the dry run gives it, and why one cannot be
allocated, in the DynamicResources plugin's words.

Each claim of the unit's pending members is listed once, with the members that use it, as the plugin resolves a
pod's `spec.resourceClaims` entry (a named claim, or the one the resource claim controller made from a template and
named in the pod's or its PodGroup's status). Its devices are those its `status.allocation` names, else those the
dry run allocated to it (the copy as the run left it). One no node can take now is said as kube-scheduler's FitError
says the plugin's verdict on that claim alone: `0/3 nodes are available: 3 cannot allocate all claims.`, or the
reason said once for the pod (`resourceclaim.resource.k8s.io "c" not found`). Each node where the claim cannot be
allocated is charged to a request that cannot be allocated there by itself, the one that cannot on the most nodes
first (`3 cannot allocate all claims: request gpu`), so the counts still add up to the nodes; those where each request
can, but not all of them together, keep the plugin's reason.

It is judged on the devices free when the scheduler tries the unit in the dry run's first pass: the cluster's, less
those the units tried before it took (`DryRun.claims_before`). The claims of several members are judged one by one,
each on all the free devices; when they cannot all have devices at once (a gang's members take them first), the
claims of the member left without, which the scheduler then found unallocatable, carry its FitError from that try
(the placement's: `0/2 nodes are available: 2 cannot allocate all claims.`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from scheduler.api.config import SchedulerConfiguration
from scheduler.api.pod import Pod, PodResourceClaim
from scheduler.api.resource_claim import ResourceClaim
from scheduler.explain.dry_run import DryRun
from scheduler.explain.units import Unit
from scheduler.framework.cluster import ClusterObjects
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.feasibility import describe
from scheduler.framework.interfaces import NodeVerdict
from scheduler.framework.pod_info import PodInfo
from scheduler.framework.snapshot import BoolArray, Snapshot
from scheduler.framework.snapshot_builder import build_snapshot
from scheduler.plugins.dynamic_resources.allocator import Problem, Search
from scheduler.plugins.dynamic_resources.inventory import inventory_of, taken_of
from scheduler.plugins.dynamic_resources.plugin import CANNOT_ALLOCATE, DynamicResources, pod_claims, problem_of


@dataclass(frozen=True, slots=True)
class Device:
    """One device of an allocation, as `status.allocation.devices.results` names it."""

    request: str
    driver: str
    pool: str
    device: str

    def as_json(self) -> dict[str, str]:
        return {"request": self.request, "driver": self.driver, "pool": self.pool, "device": self.device}


@dataclass(frozen=True, slots=True)
class Claim:
    name: str
    """The entry's name in its pods' `spec.resourceClaims`."""
    key: str | None
    """The ResourceClaim's `namespace/name`; None while the resource claim controller has not made it."""
    pods: tuple[str, ...]
    """The pending members that use it."""
    devices: tuple[Device, ...]
    """Its allocation now; empty when it has none."""
    forecast: tuple[Device, ...]
    """What the dry run allocated to it, when it has no allocation now."""
    message: str | None
    """Why no node can take it now (a FitError, see the module docstring); None when some node can."""

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "claim": self.key,
            "pods": list(self.pods),
            "allocated": bool(self.devices),
            "devices": [d.as_json() for d in self.devices],
            "forecast": [d.as_json() for d in self.forecast],
            "message": self.message,
        }


def claims_of(
    unit: Unit, run: DryRun, objects: ClusterObjects, config: SchedulerConfiguration, now: datetime
) -> list[Claim]:
    """Each claim of `unit`'s pending members, in their order and `spec.resourceClaims` order (see the module
    docstring); empty for a unit whose pending members claim no device."""
    pods = [m.pod for m in unit.pending_members if m.pod.spec.resource_claims]
    if not pods:
        return []
    plugin = DynamicResources()
    tried = _snapshot(objects, pods, {**objects.resource_claims, **run.claims_before}, config, now)
    end, later = run.end, None
    found: dict[str, Claim] = {}
    for pod in pods:
        for entry in pod.spec.resource_claims:
            one = _entry(tried.pods[pod.key], entry)
            used = pod_claims(one, tried)
            if not isinstance(used, str) and not used:
                continue  # the controller found that the entry needs no claim
            claim = None if isinstance(used, str) else used[0].claim
            key = claim.key if claim is not None else f"{pod.key}/{entry.name}"
            if key in found:
                found[key] = replace(found[key], pods=(*found[key].pods, pod.key))
                continue
            devices = _devices(claim)
            forecast: tuple[Device, ...] = ()
            if not devices and end is not None and pod.key in end.pods:
                later = later or _snapshot(
                    end, [end.pods[p.key] for p in pods if p.key in end.pods], end.resource_claims, config, now
                )
                gave = pod_claims(_entry(later.pods[pod.key], entry), later)
                forecast = _devices(gave[0].claim) if not isinstance(gave, str) and gave else ()
            message = _why(plugin, one, claim, tried)
            if message is None and not devices:
                message = _refused(run, pod.key)
            named = claim.key if claim is not None else None
            found[key] = Claim(entry.name, named, (pod.key,), devices, forecast, message)
    return list(found.values())


def _why(plugin: DynamicResources, one: PodInfo, claim: ResourceClaim | None, snapshot: Snapshot) -> str | None:
    """The plugin's verdict on the claim of `one` (a pod with that claim only), when no node can take it."""
    verdict = plugin.filter(CycleState(), one, snapshot)
    if verdict is None or verdict.feasible.any():
        return None
    count = len(snapshot.nodes.names)
    return describe(_by_request(verdict, claim, snapshot, plugin, count), count)


def _refused(run: DryRun, pod: str) -> str | None:
    """The FitError of `pod` when the scheduler tried the unit, when it was the first member that fit nowhere because
    its claims could not be allocated (the FitError of the unit's placement is the one of its pending message)."""
    fit_error = run.attempt.fit_error if run.attempt is not None else ""
    return fit_error if CANNOT_ALLOCATE in fit_error and fit_error in run.messages.get(pod, "") else None


def _snapshot(
    objects: ClusterObjects,
    pods: list[Pod],
    claims: Mapping[str, ResourceClaim],
    config: SchedulerConfiguration,
    now: datetime,
) -> Snapshot:
    """A snapshot of the nodes and devices of `objects` with the claims `claims`, whose only pods are `pods`: the
    plugin reads the devices from the claims, not from the pods."""
    small = ClusterObjects(
        nodes=objects.nodes,
        pods={p.key: p for p in pods},
        pod_groups=objects.pod_groups,
        priority_classes=objects.priority_classes,
        device_classes=objects.device_classes,
        resource_slices=objects.resource_slices,
        resource_claims=dict(claims),
    )
    return build_snapshot(small, now, config)


def _entry(info: PodInfo, entry: PodResourceClaim) -> PodInfo:
    """The pod as if `entry` were its only claim: the plugin's verdict on that claim alone."""
    spec = info.pod.spec.model_copy(update={"resource_claims": (entry,)})
    return replace(info, pod=info.pod.model_copy(update={"spec": spec}))


def _devices(claim: ResourceClaim | None) -> tuple[Device, ...]:
    allocation = claim.status.allocation if claim is not None else None
    if allocation is None:
        return ()
    return tuple(Device(r.request, r.driver, r.pool, r.device) for r in allocation.devices.results)


def _by_request(
    verdict: NodeVerdict, claim: ResourceClaim | None, snapshot: Snapshot, plugin: DynamicResources, count: int
) -> NodeVerdict:
    """`verdict` with each node where the claim cannot be allocated charged to a request that cannot be allocated there
    by itself: first the one that cannot on the most nodes, and so on."""
    reasons = [(reason, mask) for reason, mask in verdict.reasons if mask.any()]  # the plugin's may charge no node
    failed = next((mask for reason, mask in reasons if reason == CANNOT_ALLOCATE), None)
    problem = problem_of([claim], snapshot) if failed is not None and claim is not None else None
    if failed is None or not isinstance(problem, Problem):
        return replace(verdict, reasons=tuple(reasons))
    inventory = inventory_of(snapshot)
    free = taken_of(snapshot, inventory).free()
    alone: list[tuple[str, BoolArray]] = []
    for request in problem.requests:
        constraints = tuple(c for c in problem.constraints if c.covers(request.claim, request.name))
        search = Search(Problem(problem.claims, (request,), constraints), inventory, plugin.selectors, free)
        alone.append((request.name, failed & ~search.feasible_nodes(count)))
    left: BoolArray = failed.copy()
    reasons = [(reason, mask) for reason, mask in reasons if reason != CANNOT_ALLOCATE]
    for name, cannot in sorted(alone, key=lambda a: -int(a[1].sum())):  # stable: request order breaks ties
        charged = left & cannot
        if charged.any():
            reasons.append((f"{CANNOT_ALLOCATE}: request {name}", charged))
        left &= ~charged
    if left.any():
        reasons.append((CANNOT_ALLOCATE, left))
    return replace(verdict, reasons=tuple(reasons))
