"""Devices in preemption: the devices a victim's claims hold come free when it goes, as columns the victim search
clears (`Exclusion`, docs/DESIGN.md "Filters and scores").

A member whose unallocated claims are plain (each request `exactly` `count` devices, ExactCount, no admin access, no
constraint) needs `count` devices of the request's selection on its node. Each selection is one column: per node,
the matching devices that are free, coming free, or held by claims a single running pod's removal releases; that pod
(a holder) gives back the devices its claims hold there when it is preempted. A claim is released with a pod when
it is reserved for that pod alone (the resourceclaim controller then removes the reservation and deallocates the
claim); one shared with another pod that stays, or reserved for a PodGroup, is freed by no victim. A claim whose
consumers are all gone or terminating is on its way back: its devices count as free, so a preemptor whose victims
went waits for the controller rather than preempting again.

kube-scheduler 1.36 does not preempt for devices (its DynamicResources filter is UnschedulableAndUnresolvable, and
the real server says `Preemption is not helpful for scheduling`); the issue asks for it (issue 39, "Preemption").

Taken as it stands (the member may go only where its claims can be allocated now): `firstAvailable`, `All`,
`matchAttribute`, admin access, a selection with devices several nodes may use, and two selections that match some
devices in common but not all (their columns would count those devices twice).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np

from scheduler.api.resource_claim import EXACT_COUNT, ResourceClaim
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import Exclusion, NodeVerdict, PreemptionTerms
from scheduler.framework.pod_info import PodInfo
from scheduler.framework.snapshot import BoolArray, IntArray, Snapshot
from scheduler.plugins.dynamic_resources.allocator import Alternative, Problem, Search
from scheduler.plugins.dynamic_resources.inventory import Inventory, allocated_ids, inventory_of, nodes_mask, taken_of
from scheduler.plugins.dynamic_resources.selectors import Selectors

Verdict = Callable[[CycleState, PodInfo, Snapshot], NodeVerdict | None]


def _plain(alternative: Alternative) -> bool:
    return alternative.mode == EXACT_COUNT and not alternative.admin


def _releaser(claim: ResourceClaim, snapshot: Snapshot) -> str | None:
    """Who releases the claim's devices: "" when its consumers are all gone or terminating (they are coming back),
    the key of the one running pod it is reserved for, or None (shared, a PodGroup's, unreserved, or a pod not yet
    running: no victim frees them)."""
    consumers = claim.status.reserved_for
    if not consumers or any(c.resource != "pods" or c.api_group for c in consumers):
        return None
    namespace = claim.metadata.namespace or "default"
    found = [snapshot.pods.get(f"{namespace}/{consumer.name}") for consumer in consumers]
    staying = [
        info
        for info, consumer in zip(found, consumers, strict=True)
        if info is not None
        and (info.pod.metadata.uid or "") in ("", consumer.uid)
        and info.pod.metadata.deletion_timestamp is None
    ]
    if not staying:
        return ""
    if len(staying) > 1 or staying[0].node_name is None:
        return None
    return staying[0].key


def _columns(
    masks: dict[Alternative, BoolArray], needs: dict[Alternative, list[int]]
) -> list[tuple[BoolArray, list[int]]] | None:
    """One column per distinct selection (equal selections summed), or None when two overlap in part."""
    columns: list[tuple[BoolArray, list[int]]] = []
    for alternative, mask in masks.items():
        for known, summed in columns:
            if np.array_equal(known, mask):
                summed[:] = [a + b for a, b in zip(summed, needs[alternative], strict=True)]
                break
            if (known & mask).any():
                return None
        else:
            columns.append((mask, list(needs[alternative])))
    return columns


def device_terms(
    verdict: Verdict,
    selectors: Selectors,
    state: CycleState,
    members: Sequence[PodInfo],
    snapshot: Snapshot,
    problem_of: Callable[[Sequence[ResourceClaim], Snapshot], Problem | str],
    claims_of: Callable[[PodInfo, Snapshot], list[ResourceClaim] | str],
) -> PreemptionTerms:
    """The members' masks and device columns (the module docstring)."""
    nodes = len(snapshot.nodes.names)
    masks: BoolArray = np.ones((len(members), nodes), dtype=np.bool_)
    inventory = inventory_of(snapshot)
    taken = taken_of(snapshot, inventory)
    search = Search(Problem((), (), ()), inventory, selectors, taken.free())
    wanted: dict[Alternative, BoolArray] = {}
    needs: dict[Alternative, list[int]] = {}
    for i, member in enumerate(members):
        claims = claims_of(member, snapshot)
        if isinstance(claims, str):
            masks[i] = False
            continue
        pending = []
        for claim in claims:
            allocation = claim.status.allocation
            if allocation is None:
                pending.append(claim)
            elif allocation.node_selector is not None:
                masks[i] &= nodes_mask(snapshot, allocation.node_selector)
        if not pending:
            continue
        problem = problem_of(pending, snapshot)
        if isinstance(problem, str):
            masks[i] = False
            continue
        alternatives = [r.alternatives[0] for r in problem.requests if len(r.alternatives) == 1]
        plain = (
            not problem.constraints and len(alternatives) == len(problem.requests) and all(map(_plain, alternatives))
        )
        if plain:
            selection = [replace(a, name="", count=0) for a in alternatives]
            matching = {s: search.matching(s) for s in selection}
            plain = all((inventory.rows[np.flatnonzero(m)] >= 0).all() for m in matching.values())
        if not plain:
            found = verdict(state, member, snapshot)
            if found is not None:
                masks[i] &= found.feasible
            continue
        for alternative, key in zip(alternatives, selection, strict=True):
            wanted[key] = matching[key]
            needs.setdefault(key, [0] * len(members))[i] += alternative.count
    if not wanted:
        return PreemptionTerms(masks=masks)
    columns = _columns(wanted, needs)
    if columns is None:
        for i, member in enumerate(members):
            found = verdict(state, member, snapshot)
            if found is not None:
                masks[i] &= found.feasible
        return PreemptionTerms(masks=masks)
    held = _held(snapshot, inventory)
    exclusions = tuple(_exclusion(mask, need, inventory, taken.counts, held, snapshot) for mask, need in columns)
    return PreemptionTerms(masks=masks, exclusions=exclusions)


def _held(snapshot: Snapshot, inventory: Inventory) -> dict[int, str | None]:
    """Per device held by a claim: who releases it (`_releaser`; None when another claim holding it is not
    released, or by another pod)."""
    held: dict[int, str | None] = {}
    for claim in snapshot.devices.all_claims():
        ids = allocated_ids(claim)
        if not ids:
            continue
        releaser = _releaser(claim, snapshot)
        for ident in ids:
            d = inventory.index.get(ident)
            if d is None:
                continue
            if d in held and held[d] != releaser:
                held[d] = None
            else:
                held[d] = releaser
    return held


def _exclusion(
    mask: BoolArray,
    need: list[int],
    inventory: Inventory,
    counts: IntArray,
    held: dict[int, str | None],
    snapshot: Snapshot,
) -> Exclusion:
    """A selection's column: per node the devices it may have once the holders are gone, and each holder's share
    (a holder counts on its own node: a device of another node that it holds is freed by no victim here)."""
    room: IntArray = np.zeros(len(snapshot.nodes.names), dtype=np.int64)
    amounts: dict[str, int] = {}
    for d in np.flatnonzero(mask).tolist():
        row = int(inventory.rows[d])
        releaser = held.get(d) if counts[d] else ""
        if releaser is None:
            continue
        if releaser:
            info = snapshot.pods[releaser]
            if snapshot.nodes.index.get(info.node_name or "") != row:
                continue
            amounts[releaser] = amounts.get(releaser, 0) + 1
        room[row] += 1
    return Exclusion(needs=tuple(need), holders=frozenset(amounts), capacity=0, room=room, amounts=amounts)
