"""The explained preemption Decision: who is preempted, who was spared and why, where members go.

Kueue's pattern: each victim carries a reason constant and each spared candidate the plugin and
reason that spared it, so the simulator's report and the Kubernetes Events are rendered from this
object, never from logs.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime

SEARCH_PLUGIN = "WorkloadPreemption"


class VictimReason(enum.StrEnum):
    LOWER_PRIORITY = "LowerPriority"
    WHOLE_GROUP = "DisruptionModePodGroup"


class SpareReason(enum.StrEnum):
    ABOVE_BOUND = "AboveBinarySearchBound"
    PDB = "PodDisruptionBudget"
    REPRIEVED = "Reprieved"
    PROTECTED = "Protected"


class Outcome(enum.StrEnum):
    PREEMPT = "Preempt"
    CANNOT_HELP = "CannotHelp"


@dataclass(frozen=True, slots=True)
class Victim:
    key: str
    pods: tuple[str, ...]
    priority: int
    nodes: tuple[str, ...]
    reason: VictimReason
    message: str


@dataclass(frozen=True, slots=True)
class Spared:
    key: str
    priority: int
    plugin: str
    reason: SpareReason
    message: str
    until: datetime | None = None


@dataclass(frozen=True, slots=True)
class Decision:
    """`nominations` maps member `namespace/name` to node; `pending` gives why other members wait."""

    preemptor: str
    preemptor_priority: int
    outcome: Outcome
    message: str
    victims: tuple[Victim, ...] = ()
    spared: tuple[Spared, ...] = ()
    nominations: dict[str, str] = field(default_factory=dict)
    pending: dict[str, str] = field(default_factory=dict)
    pdb_violations: int = 0
    until: datetime | None = None
    rejected: tuple[str, ...] = ()
    """When every placement was refused by a scenario validator: the victims of the first one."""

    @property
    def victim_pods(self) -> tuple[str, ...]:
        return tuple(pod for victim in self.victims for pod in victim.pods)

    def explain(self) -> list[str]:
        """Human-readable lines: the preemptor, each victim, each spared candidate, what stays pending."""
        lines = [f"preemptor {self.preemptor} (priority {self.preemptor_priority}): {self.message}"]
        for victim in self.victims:
            lines.append(
                f"  victim {victim.key} (priority {victim.priority}) on {', '.join(victim.nodes)}: "
                f"{victim.reason}: {victim.message}"
            )
        for spared in self.spared:
            until = f" until {spared.until.isoformat()}" if spared.until else ""
            lines.append(
                f"  spared {spared.key} (priority {spared.priority}) by {spared.plugin}: "
                f"{spared.reason}: {spared.message}{until}"
            )
        for member, node in sorted(self.nominations.items()):
            lines.append(f"  nominated {member} -> {node}")
        for member, why in sorted(self.pending.items()):
            lines.append(f"  pending {member}: {why}")
        return lines
