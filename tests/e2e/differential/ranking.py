"""How the differential fuzz compares two schedulers' outcomes on one scenario: kube-scheduler's own ranking.

kube-scheduler picks among candidate victim sets by `pickOneNodeForPreemption`: fewest PodDisruptionBudget
violations, then the lowest highest victim priority, the smallest sum of priorities, the fewest victims
(`pkg/scheduler/framework/preemption`). The fuzz ranks what each scheduler actually deleted that way,
after what matters more to the preemptor: how many of its pods were bound. A PDB's violations are the
pods it selects that were preempted beyond what it allowed.

A `disruptionMode: PodGroup` group is one unit (KEP-5710): preempting any of its pods disrupts all of
them, so all of them are counted, whoever preempted. Phalanx always takes such a group whole (docs/DESIGN.md,
invariant 3); kube-scheduler 1.36.2, preempting for a lone pod node by node, deletes only the member it
needs and leaves the rest of the unit running, and `compare` says so when it happens.

`broken` checks an outcome against the scenario's placement constraint, on either side: no node holds two
live pods of the set with a required anti-affinity on `kubernetes.io/hostname`, nor two holding the host
port; a preemptor pod bound under the spread constraint has its zone at most `MAX_SKEW` above the emptiest
zone, counted as kube-scheduler's filter counts (every node has a zone label; the pod itself left out of
the minimum). The minimum counts the preempted members as well: a member preempted for a later pod was
there when an earlier one was placed, so only a placement illegal at its own time is reported.

In a topology scenario `broken` asks that every member of the preemptor group bound or nominated sit in one rack:
on nodes of one value of the rack label, none on a node without it (`split`). kube-scheduler 1.36.2 places such a
group but does not preempt for it, saying `REFUSED`; what it leaves pending there is expected, and Phalanx is
ranked instead against the `reference`: the best of that outcome and of kube-scheduler preempting for the group,
unconstrained, inside each rack in turn (`live.Run.rack`). Phalanx must also take its victims inside the rack the
group went to, save the other members of a `disruptionMode: PodGroup` unit it takes whole (`outside`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

from tests.e2e.differential.scenario import MAX_SKEW, Scenario

Cost = tuple[int, int, int, int]
NOTHING: Cost = (0, 0, 0, 0)
REFUSED = "not eligible due to placement-based pod group scheduling limitation"
"""What kube-scheduler 1.36.2 says of preemption for a pod group with scheduling constraints: it does not try."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a scheduler did with the scenario: preemptor pod -> node index, and the running pods it removed."""

    bound: dict[str, int]
    preempted: frozenset[str]
    nominated: dict[str, int] = field(default_factory=dict)
    """Preemptor pods not bound but nominated to a node: room being made, or held, for them there."""
    said: dict[str, str] = field(default_factory=dict)
    """Preemptor pods not bound: their `PodScheduled` message."""

    @property
    def refused(self) -> bool:
        """kube-scheduler left pods pending, saying of each that it does not preempt for a constrained group."""
        return bool(self.said) and all(REFUSED in message for message in self.said.values())

    def same_as(self, other: Outcome) -> bool:
        """The same pods preempted and the same nodes used, how many times each: members of a group ask
        the same, so which member a node got is the order of events, not a decision."""
        return self.preempted == other.preempted and sorted(self.bound.values()) == sorted(other.bound.values())


def disrupted(scenario: Scenario, preempted: frozenset[str]) -> frozenset[str]:
    """The preempted pods and every pod of a `PodGroup`-mode group one of them belongs to."""
    broken = {p.group for p in scenario.running if p.name in preempted and p.group}
    whole = {g.name for g in scenario.groups if g.name in broken and g.mode == "PodGroup"}
    return preempted | {p.name for p in scenario.running if p.group in whole}


def cost(scenario: Scenario, preempted: frozenset[str], whole: bool = True) -> Cost:
    """(PDB violations, highest victim priority, sum of victim priorities, victims) of the pods disrupted
    (with `whole`) or only of those preempted; (0, 0, 0, 0) for none."""
    if whole:
        preempted = disrupted(scenario, preempted)
    victims = [p for p in scenario.running if p.name in preempted]
    if not victims:
        return NOTHING
    violations = 0
    for budget in scenario.budgets:
        selected = [p for p in scenario.running if p.budget == budget.name]
        allowed = max(0, len(selected) - budget.min_available)
        violations += max(0, sum(1 for p in selected if p.name in preempted) - allowed)
    return (violations, max(p.priority for p in victims), sum(p.priority for p in victims), len(victims))


@dataclass(frozen=True, slots=True)
class Verdict:
    """`same`, `better` or `worse` for Phalanx against kube-scheduler, and why, in one line."""

    kind: str
    why: str


def reference(
    scenario: Scenario, kube: Outcome, phalanx: Outcome, per_rack: Mapping[str, Outcome]
) -> tuple[str, Outcome]:
    """Who Phalanx is ranked against, and their outcome: kube-scheduler, or with `per_rack` (a topology scenario,
    kube-scheduler confined to each rack) the best of it and of some of them, most preemptor pods bound, then
    cheapest victims. Where kube-scheduler placed members without preempting, placement chose the rack (alike on
    both sides, but for ties) and preemption only makes room for the rest there: only Phalanx's rack is eligible.
    Where it placed none, the rack is preemption's choice, and every rack is."""
    if not per_rack:
        return "kube-scheduler", kube
    racks = {scenario.racks[node] for node in placed(phalanx).values()}
    eligible = per_rack.keys() & racks if kube.bound else per_rack.keys()
    runs = {"kube-scheduler": kube} | {f"kube-scheduler in rack {rack}": per_rack[rack] for rack in sorted(eligible)}
    return min(runs.items(), key=lambda run: (-len(run[1].bound), cost(scenario, run[1].preempted)))


def placed(outcome: Outcome) -> dict[str, int]:
    """The preemptor pods bound or nominated, and their nodes."""
    return {**outcome.nominated, **outcome.bound}


def compare(
    scenario: Scenario, kube: Outcome, phalanx: Outcome, per_rack: Mapping[str, Outcome] | None = None
) -> Verdict:
    """More preemptor pods bound wins; at equal counts the cheaper victims by kube-scheduler's ranking. With
    `per_rack`, against the `reference`."""
    who, kube = reference(scenario, kube, phalanx, per_rack or {})
    ours, theirs = cost(scenario, phalanx.preempted), cost(scenario, kube.preempted)
    detail = (
        f"bound {len(phalanx.bound)} vs {len(kube.bound)}; victims {sorted(phalanx.preempted)} {ours} "
        f"vs {who}'s {sorted(kube.preempted)} {theirs} (PDB violations, highest, sum, count)"
    )
    partial = sorted(disrupted(scenario, kube.preempted) - kube.preempted)
    if partial:
        detail += f"; kube-scheduler left {partial} of a disruptionMode PodGroup group running (counted as disrupted)"
    if len(phalanx.bound) != len(kube.bound):
        return Verdict("better" if len(phalanx.bound) > len(kube.bound) else "worse", detail)
    if ours != theirs:
        return Verdict("better" if ours < theirs else "worse", f"{_criterion(ours, theirs)}: {detail}")
    return Verdict("same", detail)


WHY_BETTER = {
    "pod": (
        "node by node, kube-scheduler puts pods of equal priority back in start-time order, which here kept "
        "the costlier set on a node (or spent a PDB's allowance on the costlier of two tied pods); Phalanx "
        "tries the orders of ties among equal priorities (scheduler/preemption/ties.py)"
    ),
    "basic": (
        "kube-scheduler preempts a basic group pod by pod, each pod's node chosen alone with ties by start "
        "time; Phalanx weighs the KEP's cluster-wide plan and a pod-by-pod plan whose members share the "
        "room a victim frees and whose ties are tried both ways"
    ),
    "gang": (
        "kube-scheduler places a gang with every candidate removed, by its scoring (which spreads), then "
        "reprieves; Phalanx's binary search bounds the victims' priority and its plans put members where "
        "their own victims cost least"
    ),
}
BROKE_A_UNIT = (
    "kube-scheduler deleted only the member it needed of a disruptionMode: PodGroup group, which KEP-5710 "
    "preempts whole; the rest of that unit is disrupted too, and counted whole its set costs more"
)


def why_better(
    scenario: Scenario, kube: Outcome, phalanx: Outcome, per_rack: Mapping[str, Outcome] | None = None
) -> str:
    """Which of the known reasons makes Phalanx's outcome better here (than the `reference`, with `per_rack`)."""
    _, kube = reference(scenario, kube, phalanx, per_rack or {})
    if len(phalanx.bound) > len(kube.bound):
        return "more of the preemptor's pods bound"
    if disrupted(scenario, kube.preempted) != kube.preempted:
        as_deleted = cost(scenario, kube.preempted, whole=False)
        if as_deleted <= cost(scenario, phalanx.preempted):
            return BROKE_A_UNIT
    return WHY_BETTER[scenario.preemptor.policy]


def _criterion(ours: Cost, theirs: Cost) -> str:
    names = ("PDB violations", "highest victim priority", "sum of victim priorities", "number of victims")
    at = next(i for i in range(len(ours)) if ours[i] != theirs[i])
    return f"{names[at]} {ours[at]} vs {theirs[at]}"


def split(scenario: Scenario, outcome: Outcome) -> list[str]:
    """The preemptor group's members, bound or nominated, on a node in no rack or in more than one rack."""
    found: list[str] = []
    racks: dict[str, list[str]] = {}
    for name, node in sorted(placed(outcome).items()):
        if not scenario.racks[node]:
            found.append(f"topology: {name} on node {node}, in no rack")
        else:
            racks.setdefault(scenario.racks[node], []).append(f"{name} on node {node}")
    if len(racks) > 1:
        found.append(f"topology: the group spread over racks {dict(sorted(racks.items()))}")
    return found


def outside(scenario: Scenario, outcome: Outcome) -> list[str]:
    """The victims outside the rack the preemptor group went to, but for the other members of a
    `disruptionMode: PodGroup` unit with a victim inside it (taken whole)."""
    racks = {scenario.racks[node] for node in placed(outcome).values()}
    if len(racks) != 1 or "" in racks or not outcome.preempted:
        return []  # `split` says what is wrong
    (rack,) = racks
    inside = {p.name for p in scenario.running if p.name in outcome.preempted and scenario.racks[p.node] == rack}
    taken = disrupted(scenario, frozenset(inside))
    return sorted(name for name in outcome.preempted if name not in taken)


def broken(scenario: Scenario, outcome: Outcome) -> list[str]:
    """The scenario's constraint broken by where the outcome left its pods (see the module's docstring)."""
    if scenario.topology:
        return split(scenario, outcome)
    if not scenario.constraint:
        return []
    members = {p.name: p.node for p in scenario.running if p.member and p.name not in outcome.preempted}
    members |= outcome.bound
    found = []
    if scenario.constraint in ("anti-affinity", "host-port"):
        per_node = Counter(members.values())
        for node, count in sorted(per_node.items()):
            if count > 1:
                names = sorted(name for name, at in members.items() if at == node)
                found.append(f"{scenario.constraint}: node {node} holds {names}")
        return found
    zones = scenario.zones
    alive = Counter(zones[node] for node in members.values())
    gone = Counter(zones[p.node] for p in scenario.running if p.member and p.name in outcome.preempted)
    for name, node in sorted(outcome.bound.items()):
        zone = zones[node]
        before = {z: alive[z] + gone[z] - (z == zone) for z in set(zones)}
        if alive[zone] - min(before.values()) > MAX_SKEW:
            found.append(f"spread: {name} on node {node} in {zone}, live members per zone {dict(alive)}")
    return found


def problems(
    scenario: Scenario, kube: Outcome, phalanx: Outcome, per_rack: Mapping[str, Outcome] | None = None
) -> list[str]:
    """The fuzz's hard checks on Phalanx, whatever the ranking says, and kube-scheduler's constraints (a
    placement of kube-scheduler's that breaks one is a harness error, and excuses Phalanx binding fewer). With
    `per_rack`, Phalanx's victims and bindings are held to the `reference`."""
    found = [f"broke {b}" for b in broken(scenario, phalanx)]
    theirs = broken(scenario, kube)
    found += [f"kube-scheduler broke {b}" for b in theirs]
    for rack, confined in sorted((per_rack or {}).items()):
        found += [f"kube-scheduler in rack {rack} broke {b}" for b in broken(scenario, confined)]
    if scenario.topology and (away := outside(scenario, phalanx)):
        found.append(f"preempted {away} outside the rack the group went to")
    if not phalanx.bound and phalanx.preempted:
        found.append(f"preempted {sorted(phalanx.preempted)} but bound nothing")
    who, best = reference(scenario, kube, phalanx, per_rack or {})
    if cost(scenario, best.preempted)[0] == 0 and cost(scenario, phalanx.preempted)[0] > 0:
        found.append(f"violated a PodDisruptionBudget where {who} violated none")
    if len(phalanx.bound) < len(best.bound) and not theirs:
        found.append(f"bound {len(phalanx.bound)} of the preemptor's pods, {who} {len(best.bound)}")
    return found
