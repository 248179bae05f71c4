"""Pod group placements (KEP-5732): the sets of nodes a group is tried in as a whole.

A PodGroup with `schedulingConstraints.topology` must go whole into one domain of a node label (one rack, one
block). kube-scheduler 1.36 does it in three steps, and so does the placement step (`placer.py`), at the same
extension points:

1. **PlacementGenerate** plugins split the nodes into candidate placements, one per domain (`TopologyPlacement`).
2. The unit is placed in each as it would be on the whole cluster, on that domain's nodes only; a domain is
   feasible when the Permit plugins accept what it takes (a gang's `minCount`), and at least one member fits.
3. **PlacementScore** plugins score the feasible ones (`NodeResourcesFit` packs, `PodGroupPodsCount` counts), each
   normalised if it says how, times its weight; the highest total wins.

Ties: kube-scheduler breaks them at random; here the first domain in the generator's order wins (domains in order
of their label value), so `phalanx simulate` and the scheduler always agree. Domains come in levels
(`Domain.level`, Phalanx's two-level extension on its own kind): a level is tried only when no domain of the levels
before it is feasible, and preemption (`preemption/search.py`) likewise.

A group without the constraint gets no domain from any generator, and is placed on the whole cluster as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.pod_info import PodInfo
from scheduler.framework.snapshot import BoolArray


@dataclass(frozen=True, slots=True)
class Domain:
    """A candidate placement in KEP-5732's words: the nodes of one value of a topology label."""

    name: str
    """`LABEL=VALUE`, as reasons and decisions name it."""
    rows: BoolArray
    """The node rows the group may use in this domain."""
    level: int = 0
    """Which of the group's topology labels made it: 0 the narrowest."""


@dataclass(frozen=True, slots=True)
class Refusal:
    """No domain can exist for the group (a label no node has): the unit waits with `message`."""

    message: str


@dataclass(frozen=True, slots=True)
class Proposal:
    """The unit placed in one domain: which member goes to which row, beside the members already bound."""

    domain: Domain
    assignments: tuple[tuple[PodInfo, int], ...]
    scheduled: int


@dataclass(frozen=True, slots=True)
class DomainFit:
    """How many of a group's members one domain could take of the `needed` it must hold, those bound before included,
    when none could take enough: counted by placing them there, or, for a domain whose free resources summed over its
    nodes could not hold enough (passed over without placing a pod), at most the members whose cheapest requests that
    sum covers."""

    name: str
    fit: int
    needed: int
    exact: bool = True

    def say(self) -> str:
        """`rack=a: 2 of 4 members fit`, or `rack=c: at most 1 of 4 members fit` for a bound."""
        return f"{self.name}: {'' if self.exact else 'at most '}{self.fit} of {self.needed} members fit"


SHORTFALLS_SHOWN = 4
"""Domains named in a reason when none can take a group (the closest); the rest are counted."""


def closest_first(fits: Sequence[DomainFit]) -> list[DomainFit]:
    """Most members first, a count before a bound of the same number, then the generator's order (label order)."""
    return sorted(fits, key=lambda f: (-f.fit, not f.exact))


def shortfalls(fits: Sequence[DomainFit]) -> str:
    """`no topology domain can take 4 members (rack=a: 2 of 4 members fit; rack=b: ...; 3 more domain(s), none
    closer)`: `fits`, one group's (at least one), closest first; the first `SHORTFALLS_SHOWN` named."""
    named = [f.say() for f in fits[:SHORTFALLS_SHOWN]]
    rest = len(fits) - SHORTFALLS_SHOWN
    if rest > 0:
        named.append(f"{rest} more domain(s), none closer")
    return f"no topology domain can take {fits[0].needed} members ({'; '.join(named)})"


@dataclass(frozen=True, slots=True)
class Tried:
    """The domains a unit was placed in this cycle (CycleState): where its PostFilter may preempt, and nowhere
    else."""

    domains: tuple[Domain, ...]


TRIED_KEY = "PodGroupPlacement/tried"


def tried_domains(state: CycleState) -> tuple[Domain, ...]:
    """The domains the placement step tried for this cycle's unit; empty when it was free to go anywhere."""
    tried = state.read(TRIED_KEY, Tried)
    return tried.domains if tried is not None else ()
