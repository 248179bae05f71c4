"""The allocator: devices for a pod's unallocated claims on one node, as `structured.Allocator` searches them.

Requests are taken in order (claim by claim, request by request); an `exactly` request takes `count` devices, or
`All` the matching devices the node may use (at least one, none held by another claim, none of a pool being
updated); a `firstAvailable` request takes its first subrequest that leads to a whole allocation. Devices are tried
in the inventory's order, and the search backtracks when a later request or a `matchAttribute` constraint cannot be
met, as upstream's does. A device matches when its class's selectors and the request's all hold, its taints are
tolerated, and no other claim holds it (admin access may use a held device, and holds none).

Every node at once (`feasible_nodes`): the matching free devices are counted per node by numpy; when that count
decides (one request, `exactly` subrequests, no constraint) nothing else runs, else the search runs on the nodes the
counts leave.

Divergence: the search gives up after `STEP_LIMIT` steps on a node (upstream: when the scheduling cycle's context
ends), and that node counts as one where the claims cannot be allocated.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from scheduler.api.resource_claim import ALL, DeviceToleration, ResourceClaim
from scheduler.api.resource_slice import Device, DeviceTaint
from scheduler.framework.snapshot import BoolArray, IntArray
from scheduler.plugins.dynamic_resources.inventory import Inventory
from scheduler.plugins.dynamic_resources.selectors import Selectors

STEP_LIMIT = 100_000


@dataclass(frozen=True, slots=True)
class Alternative:
    """An `exactly` request, or one subrequest of a `firstAvailable` one: `name` as the allocation result names it
    (`request` or `request/subrequest`)."""

    name: str
    class_name: str
    expressions: tuple[str, ...]
    mode: str
    count: int
    admin: bool
    tolerations: tuple[DeviceToleration, ...]


@dataclass(frozen=True, slots=True)
class Request:
    claim: int
    name: str
    alternatives: tuple[Alternative, ...]


@dataclass(frozen=True, slots=True)
class Constraint:
    """`matchAttribute`: the devices of `requests` (every request of the claim when empty) share the attribute."""

    claim: int
    requests: frozenset[str]
    attribute: str

    def covers(self, claim: int, name: str) -> bool:
        if claim != self.claim:
            return False
        return not self.requests or name in self.requests or name.split("/")[0] in self.requests


@dataclass(frozen=True, slots=True)
class Problem:
    claims: tuple[ResourceClaim, ...]
    requests: tuple[Request, ...]
    constraints: tuple[Constraint, ...]


Chosen = list[tuple[int, int, str, bool]]
"""The allocation found: (claim, device, request name, admin access) in the order taken."""


def tolerates(tolerations: Sequence[DeviceToleration], taint: DeviceTaint) -> bool:
    """`DeviceToleration.ToleratesTaint`, as a pod toleration of a node taint."""
    for t in tolerations:
        if t.effect and t.effect != taint.effect:
            continue
        if t.key and t.key != taint.key:
            continue
        if (t.operator or "Equal") == "Exists":
            return True
        if (t.value or "") == (taint.value or "") and (t.key or not taint.key):
            return True
    return False


def usable(device: Device, alternative: Alternative) -> bool:
    """Its taints (NoSchedule, NoExecute) are tolerated by the request."""
    return all(
        taint.effect not in ("NoSchedule", "NoExecute") or tolerates(alternative.tolerations, taint)
        for taint in device.taints
    )


class Search:
    """One pod's problem over an inventory, with the devices free now; `at(row)` searches one node."""

    __slots__ = ("_masks", "errors", "free", "inventory", "problem", "selectors")

    def __init__(self, problem: Problem, inventory: Inventory, selectors: Selectors, free: BoolArray) -> None:
        self.problem = problem
        self.inventory = inventory
        self.selectors = selectors
        self.free = free
        self.errors: list[str] = []
        self._masks: dict[Alternative, BoolArray] = {}

    def matching(self, alternative: Alternative) -> BoolArray:
        """The devices that match the alternative's selectors and tolerate its taints, whether free or not."""
        mask = self._masks.get(alternative)
        if mask is None:
            found, problem = self.inventory.match(alternative.expressions, self.selectors)
            if problem is not None:
                self.errors.append(f"request {alternative.name}: {problem}")
            mask = found.copy()
            devices = self.inventory.devices
            for d in self.inventory.tainted:
                if mask[d] and not usable(devices[d], alternative):
                    mask[d] = False
            self._masks[alternative] = mask
        return mask

    def _per_node(self, mask: BoolArray, nodes: int) -> IntArray:
        rows = self.inventory.rows
        local = mask & (rows >= 0)
        counts: IntArray = np.bincount(rows[local], minlength=nodes).astype(np.int64)
        for d, reach in self.inventory.reach.items():
            if mask[d]:
                counts += reach
        return counts

    def feasible_nodes(self, nodes: int) -> BoolArray:
        """Where every claim of the problem can be allocated."""
        possible: BoolArray = np.ones(nodes, dtype=np.bool_)
        decided = len(self.problem.requests) == 1 and not self.problem.constraints
        for request in self.problem.requests:
            some: BoolArray = np.zeros(nodes, dtype=np.bool_)
            for alternative in request.alternatives:
                matching = self.matching(alternative)
                if alternative.mode == ALL:
                    decided = False
                    some |= self._per_node(matching, nodes) > 0
                    continue
                takeable = matching if alternative.admin else matching & self.free
                some |= self._per_node(takeable, nodes) >= alternative.count
            possible &= some
        if decided:
            return possible
        for row in np.flatnonzero(possible).tolist():
            possible[row] = self.at(row) is not None
        return possible

    def at(self, row: int) -> Chosen | None:
        """The devices the claims get on the node of `row`, or None."""
        on_node = self.inventory.on_node(row)
        candidates = {
            a: [d for d in on_node if self.matching(a)[d] and (a.admin or self.free[d])]
            for r in self.problem.requests
            for a in r.alternatives
        }
        chosen: Chosen = []
        used: set[int] = set()
        steps = [0]
        requests = self.problem.requests

        def fits(claim: int, name: str, device: int) -> bool:
            for constraint in self.problem.constraints:
                if not constraint.covers(claim, name):
                    continue
                value = self._attribute(device, constraint.attribute)
                if value is None:
                    return False
                for c, d, n, _ in chosen:
                    if constraint.covers(c, n) and self._attribute(d, constraint.attribute) != value:
                        return False
            return True

        def step(i: int) -> bool:
            if i == len(requests):
                return True
            request = requests[i]
            for alternative in request.alternatives:
                if alternative.mode == ALL:
                    if take_all(i, request.claim, alternative, on_node):
                        return True
                elif pick(i, request.claim, alternative, candidates[alternative], 0, alternative.count):
                    return True
            return False

        def take_all(i: int, claim: int, alternative: Alternative, on_node: list[int]) -> bool:
            devices = [d for d in on_node if self.matching(alternative)[d]]
            if not devices or any(d in used for d in devices):
                return False
            if not alternative.admin and not all(self.free[d] for d in devices):
                return False
            if any(self.inventory.ids[d][:2] in self.inventory.incomplete for d in devices):
                return False
            if not all(fits(claim, alternative.name, d) for d in devices):
                return False
            for d in devices:
                chosen.append((claim, d, alternative.name, alternative.admin))
                used.add(d)
            if step(i + 1):
                return True
            for d in devices:
                chosen.pop()
                used.discard(d)
            return False

        def pick(i: int, claim: int, alternative: Alternative, devices: list[int], start: int, need: int) -> bool:
            if need == 0:
                return step(i + 1)
            for k in range(start, len(devices) - need + 1):
                steps[0] += 1
                if steps[0] > STEP_LIMIT:
                    return False
                d = devices[k]
                if d in used or not fits(claim, alternative.name, d):
                    continue
                chosen.append((claim, d, alternative.name, alternative.admin))
                used.add(d)
                if pick(i, claim, alternative, devices, k + 1, need - 1):
                    return True
                chosen.pop()
                used.discard(d)
            return False

        return chosen if step(0) else None

    def _attribute(self, device: int, qualified: str) -> object:
        driver = self.inventory.ids[device][0]
        attributes = self.inventory.devices[device].attributes
        found = attributes.get(qualified)
        domain, _, short = qualified.rpartition("/")
        if found is None and domain == driver:
            found = attributes.get(short)
        return found.value() if found is not None else None
