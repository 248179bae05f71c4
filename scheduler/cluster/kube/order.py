"""The call table: how a call relates to an older one in flight for the same object (kube-scheduler's
`api_dispatcher` relevance table, for our calls).

One row per pair of kinds that relate at all (a pair not in the table is free: sent whenever a worker is free);
the dispatcher reads nothing else to order, coalesce or drop calls. A new kind of write that must wait for,
replace or drop another gets its rows here, beside its class in `calls.py`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from scheduler.cluster.kube.calls import (
    Binding,
    Call,
    ClaimAllocation,
    ClaimBinding,
    Deletion,
    GateRemoval,
    Nomination,
    PodCondition,
    PodGroupAnnotation,
    PodGroupCondition,
    PodScheduled,
)


class Order(Enum):
    """When a call is sent, against an older one in flight for the same object."""

    FREE = "free"
    """Sent whenever a worker is free."""
    AFTER = "after"
    """Sent once the older one has ended, however it ended."""
    REQUIRES = "requires"
    """Sent once the older one went through; not sent if it was refused (a Binding after its gate removal,
    a deletion after its DisruptionTarget)."""


class Repeats(Enum):
    """Whether the older call already makes the newer one, which is then not entered at all."""

    NO = "no"
    UNANSWERED = "unanswered"
    """While the older one has no answer yet (a gate removal: once answered, the next pass may need another)."""
    UNSEEN = "unseen"
    """Until the informer shows the older one done (a pod is bound once: a pass that sees it bound by the overlay,
    or makes the same Binding meanwhile, binds it no more)."""


@dataclass(frozen=True, slots=True)
class Rule:
    """How a newer call relates to an older one for the same object."""

    order: Order = Order.FREE
    repeats: Repeats = Repeats.NO
    merges: bool = False
    """The newer replaces the older while that one is only queued, when both write the same part (`Call.part`):
    its worker sends the newest, one write for both."""
    supersedes: bool = False
    """The older, while only queued, is not sent at all once the newer is made."""


FREE = Rule()

RULES: dict[tuple[type[Call], type[Call]], Rule] = {
    # newer, older
    (GateRemoval, GateRemoval): Rule(repeats=Repeats.UNANSWERED),
    (ClaimBinding, GateRemoval): Rule(Order.REQUIRES),
    (ClaimBinding, ClaimBinding): Rule(repeats=Repeats.UNSEEN),
    # Not after a queued PodScheduled, which the Binding that follows a PreBind supersedes: ended with it, the PreBind
    # would not be sent, and the Binding would.
    (ClaimAllocation, GateRemoval): Rule(Order.REQUIRES),
    (ClaimAllocation, ClaimBinding): Rule(Order.REQUIRES),
    (ClaimAllocation, ClaimAllocation): Rule(repeats=Repeats.UNSEEN),
    (Binding, GateRemoval): Rule(Order.REQUIRES),
    (Binding, ClaimBinding): Rule(Order.REQUIRES),
    (Binding, ClaimAllocation): Rule(Order.REQUIRES),
    (Binding, Binding): Rule(repeats=Repeats.UNSEEN),
    # A PodScheduled=False still queued is stale once the pod is bound: written after the Binding, it would turn the
    # bound pod's condition back to False and tell a scheduled pod it failed. One on the wire is waited for.
    (Binding, PodScheduled): Rule(Order.AFTER, supersedes=True),
    (Nomination, Nomination): Rule(Order.AFTER, merges=True),
    (PodCondition, PodCondition): Rule(Order.AFTER, merges=True),
    (PodCondition, PodScheduled): Rule(Order.AFTER, merges=True),
    (PodScheduled, PodCondition): Rule(Order.AFTER, merges=True),
    (PodScheduled, PodScheduled): Rule(Order.AFTER, merges=True),
    # As upstream's preemption executor: a victim is deleted only once its DisruptionTarget is written.
    (Deletion, PodCondition): Rule(Order.REQUIRES),
    (PodGroupCondition, PodGroupCondition): Rule(Order.AFTER, merges=True),
    (PodGroupAnnotation, PodGroupAnnotation): Rule(merges=True),
}


def rule(newer: Call, older: Call) -> Rule:
    """How `newer` relates to `older`, in flight for the same object."""
    return RULES.get((type(newer), type(older)), FREE)


def repeats(newer: Call, older: Call, answered: bool) -> bool:
    """`older`, in flight (`answered`: done, not yet seen by the informer), already makes `newer`."""
    how = rule(newer, older).repeats
    return how is Repeats.UNSEEN or (how is Repeats.UNANSWERED and not answered)


def merges(newer: Call, older: Call) -> bool:
    """`newer` takes the place of `older`, still queued."""
    return rule(newer, older).merges and newer.part == older.part
