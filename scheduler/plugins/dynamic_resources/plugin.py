"""DynamicResources: every ResourceClaim a pod uses must exist and be allocated, or be allocatable on the node, with
structured parameters (DRA, `resource.k8s.io/v1`).

Source: kube-scheduler 1.36 `plugins/dynamicresources` (PreFilter, Filter, Reserve, Unreserve, PreBind) and
`dynamic-resource-allocation/structured` (the allocator, `allocator.py`) and `resourceclaim` (`Name`, `IsForPod`).

- PreFilter, said once for the pod (`NodeVerdict.message`), in its order: a claim from a template the controller has
  not made yet (`pod "ns/p": ResourceClaim not created yet`: the pod waits for it), a missing claim, one being
  deleted, one made for another pod, one whose `reservedFor` is full (`resourceclaim in use`), a request naming a
  missing DeviceClass, and what Phalanx does not implement (`phalanx-scheduler does not support ...`).
- Filter: an allocated claim fits the nodes its `allocation.nodeSelector` admits (`resourceclaim not available on
  the node`); the pod's unallocated claims must be allocatable together on the node, from the devices no other claim
  holds (`cannot allocate all claims`). Both are UnschedulableAndUnresolvable, as upstream's, unless another claim
  holds a device the pod's requests select: then Unschedulable, so preemption may free it (`preemption.py`; a
  divergence: kube-scheduler 1.36 does not preempt for devices).
- Reserve: the allocation found on the pod's node is assumed (`Devices.assumed`), with the pod (or its PodGroup,
  for the group's claims) in `reservedFor`: no pod placed later in the pass gets those devices, and a pod sharing the
  claim finds it allocated (a claim shared by several pods, or by a PodGroup's members, is allocated once).
  Unreserve gives them back (a gang that could not be placed whole).
- PreBind: when its unit binds, each pod's claims are written (`Cluster.allocate_claims`), before its Binding.
- Preemption (`preemption.py`): the devices a victim's claims hold come free with it.

A PodGroup's `spec.resourceClaims` (1.36): a member's entry of the same name and reference is the group's claim,
reserved for the PodGroup, and its allocation's node selector limits every member.

A pod constraint (docs/DESIGN.md, "Filters and scores"): asked afresh for each pod with claims (None for the others),
since its verdict changes with each allocation the pass reserves.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from scheduler.api.meta import ObjectMeta
from scheduler.api.pod import NodeSelector, NodeSelectorTerm, PodResourceClaim
from scheduler.api.pod_group import PodGroup
from scheduler.api.resource_claim import (
    ALL,
    EXACT_COUNT,
    RESERVED_FOR_MAX,
    AllocationResult,
    DeviceAllocationConfiguration,
    DeviceAllocationResult,
    DeviceRequestAllocationResult,
    ResourceClaim,
    ResourceClaimConsumerReference,
)
from scheduler.framework.cluster import Cluster
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.devices import ClaimWrite
from scheduler.framework.interfaces import NodeVerdict, PreemptionTerms
from scheduler.framework.pod_info import PodInfo
from scheduler.framework.snapshot import BoolArray, Snapshot
from scheduler.framework.status import SUCCESS, Code, Status, unresolvable
from scheduler.plugins.dynamic_resources.allocator import Alternative, Chosen, Constraint, Problem, Request, Search
from scheduler.plugins.dynamic_resources.inventory import (
    Inventory,
    allocated_ids,
    inventory_of,
    node_name_selector,
    nodes_mask,
    taken_of,
)
from scheduler.plugins.dynamic_resources.preemption import device_terms
from scheduler.plugins.dynamic_resources.selectors import Selectors

CANNOT_ALLOCATE = "cannot allocate all claims"
NOT_AVAILABLE = "resourceclaim not available on the node"
IN_USE = "resourceclaim in use"
NOT_SUPPORTED = "phalanx-scheduler does not support"


@dataclass(frozen=True, slots=True)
class UsedClaim:
    """A claim of the pod: the claim as the pass sees it, and who it is reserved for (the pod, or its PodGroup)."""

    claim: ResourceClaim
    consumer: ResourceClaimConsumerReference


def _consumer_of_pod(info: PodInfo) -> ResourceClaimConsumerReference:
    meta = info.pod.metadata
    return ResourceClaimConsumerReference(resource="pods", name=meta.name, uid=meta.uid or "")


def _consumer_of_group(group: PodGroup) -> ResourceClaimConsumerReference:
    api_group = group.api_version.partition("/")[0]
    meta = group.metadata
    return ResourceClaimConsumerReference(api_group=api_group, resource="podgroups", name=meta.name, uid=meta.uid or "")


def _group_entry(group: PodGroup | None, entry: PodResourceClaim) -> PodResourceClaim | None:
    """The PodGroup's claim the pod's entry names: same name, same reference."""
    if group is None:
        return None
    for shared in group.spec.resource_claims:
        if (shared.name, shared.resource_claim_name, shared.resource_claim_template_name) == (
            entry.name,
            entry.resource_claim_name,
            entry.resource_claim_template_name,
        ):
            return shared
    return None


def _owned_by(meta: ObjectMeta, uid: str | None) -> bool:
    return any(ref.controller and ref.uid == (uid or "") for ref in meta.owner_references)


def pod_claims(info: PodInfo, snapshot: Snapshot) -> list[UsedClaim] | str:
    """The pod's claims in `spec.resourceClaims` order (each once), or why it cannot be scheduled (PreFilter)."""
    pod = info.pod
    group = snapshot.groups.get(info.group_key) if info.group_key is not None else None
    found: dict[str, UsedClaim] = {}
    for entry in pod.spec.resource_claims:
        shared = _group_entry(group, entry)
        owner = group if shared is not None and group is not None else pod
        if entry.resource_claim_name is not None:
            name: str | None = entry.resource_claim_name
            check_owner = False
        else:
            statuses = owner.status.resource_claim_statuses
            status = next((s for s in statuses if s.name == entry.name), None)
            if status is None:
                what = "podgroup" if owner is group else "pod"
                return f'{what} "{info.namespace}/{owner.metadata.name}": ResourceClaim not created yet'
            name, check_owner = status.resource_claim_name, True
        if name is None:
            continue  # the controller found no claim was needed
        claim = snapshot.devices.claim(f"{info.namespace}/{name}")
        if claim is None:
            return f'resourceclaim.resource.k8s.io "{name}" not found'
        if claim.metadata.deletion_timestamp is not None:
            return f'resourceclaim "{name}" is being deleted'
        if check_owner and not _owned_by(claim.metadata, owner.metadata.uid):
            what = "PodGroup" if owner is group else "pod"
            return (
                f"ResourceClaim {claim.key} was not created for {what} {info.namespace}/{owner.metadata.name} "
                f"({what} is not owner)"
            )
        consumer = _consumer_of_group(group) if owner is group and group is not None else _consumer_of_pod(info)
        if len(claim.status.reserved_for) >= RESERVED_FOR_MAX and not claim.reserved_for(consumer):
            return IN_USE
        found.setdefault(claim.key, UsedClaim(claim, consumer))
    return list(found.values())


def _held_by_others(problem: Problem, search: Search) -> bool:
    """Some device a request selects is held by another claim: preemption may free it."""
    return any(
        (search.matching(alternative) & ~search.free).any()
        for request in problem.requests
        for alternative in request.alternatives
    )


def _claims_of(info: PodInfo, snapshot: Snapshot) -> list[ResourceClaim] | str:
    claims = pod_claims(info, snapshot)
    return claims if isinstance(claims, str) else [used.claim for used in claims]


def problem_of(claims: Sequence[ResourceClaim], snapshot: Snapshot) -> Problem | str:
    """The allocation problem of the unallocated claims, or why it cannot be posed (a missing class, a field not
    implemented)."""
    requests: list[Request] = []
    constraints: list[Constraint] = []
    classes = snapshot.devices.classes
    for index, claim in enumerate(claims):
        devices = claim.spec.devices
        where = f"of ResourceClaim {claim.key}"
        for i, request in enumerate(devices.requests):
            path = f"spec.devices.requests[{i}]"
            if request.exactly is not None:
                subrequests: list[tuple[str, object]] = [(request.name, request.exactly)]
            elif request.first_available:
                subrequests = [(f"{request.name}/{sub.name}", sub) for sub in request.first_available]
            else:
                return f"{NOT_SUPPORTED} {path} without exactly or firstAvailable {where}"
            alternatives = []
            for name, sub in subrequests:
                if sub.capacity is not None and sub.capacity.requests:  # type: ignore[attr-defined]
                    return f"{NOT_SUPPORTED} {path} capacity requests {where}"
                mode = sub.allocation_mode or EXACT_COUNT  # type: ignore[attr-defined]
                if mode not in (EXACT_COUNT, ALL):
                    return f"{NOT_SUPPORTED} {path} allocationMode {mode} {where}"
                class_name = sub.device_class_name  # type: ignore[attr-defined]
                device_class = classes.get(class_name)
                if device_class is None:
                    return f"request {name}: device class {class_name} does not exist"
                expressions = tuple(
                    s.cel.expression
                    for s in (*device_class.spec.selectors, *sub.selectors)  # type: ignore[attr-defined]
                    if s.cel is not None
                )
                alternatives.append(
                    Alternative(
                        name=name,
                        class_name=class_name,
                        expressions=expressions,
                        mode=mode,
                        count=sub.count or 1 if mode == EXACT_COUNT else 0,  # type: ignore[attr-defined]
                        admin=bool(getattr(sub, "admin_access", None)),
                        tolerations=tuple(sub.tolerations),  # type: ignore[attr-defined]
                    )
                )
            requests.append(Request(index, request.name, tuple(alternatives)))
        for j, constraint in enumerate(devices.constraints):
            if constraint.distinct_attribute is not None:
                return f"{NOT_SUPPORTED} spec.devices.constraints[{j}].distinctAttribute {where}"
            if constraint.match_attribute is None:
                continue
            constraints.append(Constraint(index, frozenset(constraint.requests), constraint.match_attribute))
    return Problem(tuple(claims), tuple(requests), tuple(constraints))


def allocation_of(
    claim_index: int, problem: Problem, chosen: Chosen, inventory: Inventory, snapshot: Snapshot, node: str
) -> AllocationResult:
    """The `status.allocation` of one claim: its devices in the order taken, the configuration of their classes
    (`FromClass`) and of the claim (`FromClaim`), and the nodes that may use them."""
    claim = problem.claims[claim_index]
    results: list[DeviceRequestAllocationResult] = []
    config: list[DeviceAllocationConfiguration] = []
    classes_used: dict[str, list[str]] = {}
    local = False
    terms: list[NodeSelectorTerm] = []
    for c, d, name, admin in chosen:
        if c != claim_index:
            continue
        driver, pool, device = inventory.ids[d]
        results.append(
            DeviceRequestAllocationResult(
                request=name, driver=driver, pool=pool, device=device, admin_access=True if admin else None
            )
        )
        alternative = next(a for r in problem.requests if r.claim == c for a in r.alternatives if a.name == name)
        requests = classes_used.setdefault(alternative.class_name, [])
        if name not in requests:
            requests.append(name)
        spec = inventory.slice_of[d].spec
        device_spec = inventory.devices[d]
        if spec.node_name is not None or device_spec.node_name is not None:
            local = True
        selector = device_spec.node_selector or spec.node_selector
        if selector is not None and selector.node_selector_terms:
            terms.append(selector.node_selector_terms[0])
    for class_name, requests in classes_used.items():
        device_class = snapshot.devices.classes.get(class_name)
        for entry in device_class.spec.config if device_class is not None else ():
            config.append(DeviceAllocationConfiguration(source="FromClass", requests=requests, opaque=entry.opaque))
    for claim_entry in claim.spec.devices.config:
        config.append(
            DeviceAllocationConfiguration(source="FromClaim", requests=claim_entry.requests, opaque=claim_entry.opaque)
        )
    node_selector: NodeSelector | None = None
    if local:
        node_selector = node_name_selector(node)
    elif terms:
        merged = NodeSelectorTerm(
            match_expressions=[r for t in terms for r in t.match_expressions],
            match_fields=[r for t in terms for r in t.match_fields],
        )
        node_selector = NodeSelector(node_selector_terms=[merged])
    return AllocationResult(devices=DeviceAllocationResult(results=results, config=config), node_selector=node_selector)


@dataclass(slots=True)
class _Reserved:
    """Per pod of a unit: the claim writes for PreBind, and what Reserve assumed (to give back)."""

    writes: dict[str, tuple[ClaimWrite, ...]] = field(default_factory=dict)
    assumed: dict[str, list[tuple[str, ResourceClaim | None, ResourceClaim]]] = field(default_factory=dict)

    def clone(self) -> _Reserved:
        return _Reserved(dict(self.writes), dict(self.assumed))


class DynamicResources:
    name = "DynamicResources"

    def __init__(self) -> None:
        self.selectors = Selectors()
        """Compiled CEL expressions by their text: configuration-like, kept for the process's life."""

    def filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> NodeVerdict | None:
        if not pod.pod.spec.resource_claims:
            return None
        count = len(snapshot.nodes.names)
        claims = pod_claims(pod, snapshot)
        if isinstance(claims, str):
            return self._nowhere(count, claims)
        feasible: BoolArray = np.ones(count, dtype=np.bool_)
        elsewhere: BoolArray = np.zeros(count, dtype=np.bool_)
        pending: list[ResourceClaim] = []
        for used in claims:
            allocation = used.claim.status.allocation
            if allocation is None:
                pending.append(used.claim)
            elif allocation.node_selector is not None:
                mask = nodes_mask(snapshot, allocation.node_selector)
                elsewhere |= feasible & ~mask
                feasible &= mask
        reasons: list[tuple[str, BoolArray]] = [(NOT_AVAILABLE, elsewhere)]
        code = Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        if pending:
            problem = problem_of(pending, snapshot)
            if isinstance(problem, str):
                return self._nowhere(count, problem)
            search = self._search(problem, snapshot)
            fits = search.feasible_nodes(count)
            failed = feasible & ~fits
            feasible &= fits
            if not feasible.any() and search.errors:
                return self._nowhere(count, f"{CANNOT_ALLOCATE}: {search.errors[0]}")
            reasons.append((CANNOT_ALLOCATE, failed))
            if failed.any() and _held_by_others(problem, search):
                code = Code.UNSCHEDULABLE  # a victim's claims may give the devices back (`preemption.py`)
        return NodeVerdict(feasible=feasible, reasons=tuple(reasons), code=code)

    @staticmethod
    def _nowhere(count: int, message: str) -> NodeVerdict:
        return NodeVerdict(
            feasible=np.zeros(count, dtype=np.bool_), code=Code.UNSCHEDULABLE_AND_UNRESOLVABLE, message=message
        )

    def _search(self, problem: Problem, snapshot: Snapshot) -> Search:
        inventory = inventory_of(snapshot)
        return Search(problem, inventory, self.selectors, taken_of(snapshot, inventory).free())

    def reserve(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, row: int) -> Status:
        """The claims' allocation on the pod's node, and the pod (or its PodGroup) in their `reservedFor`, assumed
        until the pass ends."""
        if not pod.pod.spec.resource_claims:
            return SUCCESS
        claims = pod_claims(pod, snapshot)
        if isinstance(claims, str):
            return unresolvable(claims)
        node = snapshot.nodes.names[row]
        allocations: dict[str, AllocationResult] = {}
        pending = [u.claim for u in claims if u.claim.status.allocation is None]
        inventory = inventory_of(snapshot)
        if pending:
            problem = problem_of(pending, snapshot)
            if isinstance(problem, str):
                return unresolvable(problem)
            chosen = self._search(problem, snapshot).at(row)
            if chosen is None:
                return unresolvable(CANNOT_ALLOCATE)
            for index, claim in enumerate(problem.claims):
                allocations[claim.key] = allocation_of(index, problem, chosen, inventory, snapshot, node)
        writes: list[ClaimWrite] = []
        assumed: list[tuple[str, ResourceClaim | None, ResourceClaim]] = []
        taken = taken_of(snapshot, inventory)
        for used in claims:
            claim = used.claim
            allocation = claim.status.allocation or allocations[claim.key]
            write = ClaimWrite(claim, allocation, used.consumer)
            made = write.applied(claim)
            if made is None:
                return unresolvable(CANNOT_ALLOCATE)
            if made is not claim:
                previous = snapshot.devices.assumed.get(claim.key)
                snapshot.devices.assumed[claim.key] = made
                assumed.append((claim.key, previous, made))
                if claim.status.allocation is None:
                    taken.add(allocated_ids(made), 1)
                writes.append(write)
        reserved = state.read(self.name, _Reserved) or _Reserved()
        reserved.writes[pod.key] = tuple(writes)
        reserved.assumed[pod.key] = assumed
        state.write(self.name, reserved)
        return SUCCESS

    def unreserve(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, row: int) -> None:
        """What this pod assumed is given back, latest first."""
        reserved = state.read(self.name, _Reserved)
        if reserved is None:
            return
        reserved.writes.pop(pod.key, None)
        assumed = reserved.assumed.pop(pod.key, [])
        if not assumed:
            return
        taken = taken_of(snapshot, inventory_of(snapshot))
        for key, previous, made in reversed(assumed):
            before = previous or snapshot.devices.claims.get(key)
            if before is None or before.status.allocation is None:
                taken.add(allocated_ids(made), -1)
            if previous is None:
                snapshot.devices.assumed.pop(key, None)
            else:
                snapshot.devices.assumed[key] = previous

    def pre_bind(self, state: CycleState, pod: PodInfo, node: str, cluster: Cluster, unit: str) -> None:
        """The claims' allocation and reservation written before the pod's Binding (the back end holds the
        Binding until they went through)."""
        reserved = state.read(self.name, _Reserved)
        writes = reserved.writes.get(pod.key) if reserved is not None else None
        if writes:
            cluster.allocate_claims(pod.pod, node, writes, unit=unit)

    def preemption_terms(
        self,
        state: CycleState,
        members: Sequence[PodInfo],
        snapshot: Snapshot,
        removable: Callable[[PodInfo], bool],
    ) -> PreemptionTerms:
        """The devices each member needs, and those its victims' claims give back (`preemption.py`)."""
        if not any(m.pod.spec.resource_claims for m in members):
            return PreemptionTerms()
        return device_terms(self.filter, self.selectors, state, members, snapshot, problem_of, _claims_of)
