"""One node's victims: kube-scheduler's per-node selection, in the cheapest order of its ties.

kube-scheduler chooses a node's victims in `SelectVictimsOnNode` (`pkg/scheduler/framework/plugins/
defaultpreemption`): every lower-priority pod goes; the pods whose eviction would exceed a
PodDisruptionBudget, counted most important first (`filterPodsWithPDBViolation`), are put back first,
then the others, most important first, each if the preemptor still fits. On one node that is KEP-5710's
order (PDB step, then the binary search over priorities, then the reprieval), as the KEP says: putting
back from the top keeps everything above the lowest bound that fits, and the bound's search only
spares the work.

Pods of equal priority are ordered by start time (`MoreImportantPod`), which is arbitrary for pods
started together, and the order decides both which pod counts as PDB-violating and which one stays:
keeping a large pod can cost two smaller ones below it (issue 20: a 4-CPU and a 2-CPU pod at priority
30 over a 1-CPU pod at 20). So after the pass in the given order, every single change of order inside
a tie that split (part of it kept, part preempted) is tried as well: one unit moved to the front of its
tie or to its back (the front keeps a unit first, unless a PDB selects it: then the front uses up the
allowance and it goes back last). The cheapest set by kube-scheduler's own ranking
(`pickOneNodeForPreemption`: PDB violations, highest priority, sum of priorities, number of pods) wins,
and the search repeats from it while it improves. With two tied units that covers both orders, so the
result is never costlier than either; with more, every order one move away. A tie whose units all ask
the same and no PDB selects is skipped: no order of it changes the cost (every node of a uniform
cluster has one); a tie a PDB selects in is tried even when none of it stays, since its order decides
which unit uses the allowance. The cost is a few passes over one node's candidates, in plain integers.

Which pods count as PDB-violating depends as much on the order the allowances are used up in. Counted most
important first, as upstream, the allowance goes to the costliest pod the PDB selects, the cheaper ones are
violating and so put back first, and the victim can end up a costlier pod outside the PDB (fuzz seed 885950: a
priority-50 pod, where the priority-20 pod the PDB selects and allows was enough). So each order is also tried
with the allowances used up least important first, and the cheaper of the two kept: never costlier than
upstream's.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

ROUNDS = 4
"""Improvements applied one after another at most: each needs a strictly cheaper set, so few are ever found."""

Cost = tuple[int, int, int, int]
NONE: Cost = (0, -(1 << 62), 0, 0)
"""The cost of preempting nothing: below any real one."""


@dataclass(frozen=True, slots=True)
class Unit:
    """A candidate on the node: what its pods there ask, what preempting it costs (all its pods go), and
    the PDBs that select its pods (index, pods selected)."""

    request: tuple[int, ...]
    priority: int
    pods: int
    covered: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True, slots=True)
class Outcome:
    """Which units stay, which of them counted as PDB-violating, and what the others cost."""

    kept: list[bool]
    violating: list[bool]
    cost: Cost


def select(
    room: Sequence[int],
    units: Sequence[Unit],
    order: Sequence[int],
    allowed: Sequence[int],
    counted: Sequence[int] | None = None,
) -> Outcome:
    """kube-scheduler's selection with `units` in `order` (most important first) against `room`, what is
    left with every unit gone; `allowed` is what each PDB still allows. The PDBs' allowances are used up in
    `counted` order (kube-scheduler's: `order`)."""
    left = list(allowed)
    violating = [False] * len(units)
    for at in order if counted is None else counted:
        for pdb, pods in units[at].covered:
            left[pdb] -= pods
            violating[at] = violating[at] or left[pdb] < 0
    free = list(room)
    kept = [False] * len(units)
    for at in [at for at in order if violating[at]] + [at for at in order if not violating[at]]:
        need = units[at].request
        if all(have >= want for have, want in zip(free, need, strict=True)):
            free = [have - want for have, want in zip(free, need, strict=True)]
            kept[at] = True
    return Outcome(kept, violating, cost(units, kept, allowed))


def cost(units: Sequence[Unit], kept: Sequence[bool], allowed: Sequence[int]) -> Cost:
    """kube-scheduler's ranking of the units not kept, lowest first: the pods they take beyond what the
    PDBs still allow, the highest priority, the sum of priorities, the pods."""
    victims = [unit for unit, back in zip(units, kept, strict=True) if not back]
    if not victims:
        return NONE
    used = [0] * len(allowed)
    for unit in victims:
        for pdb, pods in unit.covered:
            used[pdb] += pods
    return (
        sum(max(0, n - max(0, left)) for n, left in zip(used, allowed, strict=True)),
        max(unit.priority for unit in victims),
        sum(unit.priority * unit.pods for unit in victims),
        sum(unit.pods for unit in victims),
    )


def cheapest(room: Sequence[int], units: Sequence[Unit], allowed: Sequence[int] = ()) -> Outcome:
    """The selection with `units` in their given order, or in a cheaper one of its tie orders, each with the
    PDBs' allowances used up most important first or least important first (module doc)."""
    order = list(range(len(units)))
    both = any(unit.covered for unit in units)
    best = _either(room, units, order, allowed, both)
    for _ in range(ROUNDS):
        found: tuple[list[int], Outcome] | None = None
        for trial in _single_moves(order, best.kept, units):
            outcome = _either(room, units, trial, allowed, both)
            if outcome.cost < (found[1] if found else best).cost:
                found = (trial, outcome)
        if found is None:
            break
        order, best = found
    return best


def _either(
    room: Sequence[int], units: Sequence[Unit], order: list[int], allowed: Sequence[int], both: bool
) -> Outcome:
    """The cheaper of the selection in `order` with the allowances used up in that order (kube-scheduler's) and,
    when a PDB selects a candidate, in the reverse one."""
    outcome = select(room, units, order, allowed)
    if not both:
        return outcome
    reverse = select(room, units, order, allowed, order[::-1])
    return reverse if reverse.cost < outcome.cost else outcome


def _single_moves(order: list[int], kept: list[bool], units: Sequence[Unit]) -> Iterator[list[int]]:
    """Each order that moves one unit of a tie to its front or to its back: of a tie that split, unless its
    units all ask the same, and of any tie a PDB selects in (its order decides which unit uses the
    allowance, and so which is put back first, even when all of them go)."""
    start = 0
    while start < len(order):
        first = units[order[start]]
        end = start + 1
        while end < len(order) and units[order[end]].priority == first.priority:
            end += 1
        tie = order[start:end]
        split = any(kept[at] for at in tie) and not all(kept[at] for at in tie)
        uniform = all((units[at].request, units[at].pods) == (first.request, first.pods) for at in tie)
        covered = any(units[at].covered for at in tie)
        if len(tie) > 1 and ((split and not uniform) or covered):
            for at in tie:
                rest = [other for other in tie if other != at]
                for moved in ([at, *rest], [*rest, at]):
                    if moved != tie:
                        yield order[:start] + moved + order[end:]
        start = end
