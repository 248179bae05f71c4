"""The explained preemption Decision: who is preempted, who was spared and why, where members go.

Kueue's pattern: each victim carries a reason constant and each spared candidate the plugin and
reason that spared it, so the simulator's report and the Kubernetes Events are rendered from this
object, never from logs.
"""

from __future__ import annotations

import enum
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from scheduler.api.meta import rfc3339

SEARCH_PLUGIN = "WorkloadPreemption"
DECISION_SCHEMA = "phalanx.dev/decision/v2"
"""`schemaVersion` of `Decision.as_json`, the one schema of `simulate -o json`'s `decisions` and `explain -o json`'s
`decision`: fields may be added within a version; a field renamed, removed or changed in meaning makes a new one.
v2: `preemptor` and each victim's and spared candidate's `unit` are unit keys (`framework/unit_key.py`), a PodGroup's
`podgroup/namespace/name` (v1 wrote `namespace/name` for both kinds, and a pod and a PodGroup may share it)."""


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
class DomainCost:
    """What preempting in one topology domain costs, by kube-scheduler's ranking."""

    name: str
    pdb_violations: int
    highest: int
    total: int
    pods: int

    def __str__(self) -> str:
        return f"{self.name} (highest {self.highest}, sum {self.total}, {_count(self.pods, 'pod')})" + (
            f", {_count(self.pdb_violations, 'PDB violation')}" if self.pdb_violations else ""
        )


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
    bound: int | None = None
    """The binary search's priority bound: no victim is above it (None when nothing needs preempting)."""
    domains: tuple[DomainCost, ...] = ()
    """For a group kept in one topology domain: the domains searched, cheapest first (the chosen one first)."""
    domains_passed: int = 0
    """Domains not searched: no victims there could cost less than the chosen ones, or make room at all."""

    @property
    def victim_pods(self) -> tuple[str, ...]:
        return tuple(pod for victim in self.victims for pod in victim.pods)

    def explain(self, verbose: bool = False) -> list[str]:
        """The summary (a few lines however many victims), then with `verbose` one line per victim,
        spared candidate, nomination and pending member. An Event note takes the first lines."""
        return self.summary() + (self.details() if verbose else [])

    def summary(self) -> list[str]:
        """The preemptor and outcome; victims counted by priority and namespace; the binary-search
        bound; spared candidates counted by reason, with who protects them and until when; nominations."""
        lines = [f"preemptor {self.preemptor} (priority {self.preemptor_priority}): {self.message}"]
        pods = self.victim_pods
        if self.victims:
            nodes = {node for victim in self.victims for node in victim.nodes}
            by_priority: Counter[int] = Counter()
            for victim in self.victims:
                by_priority[victim.priority] += len(victim.pods)
            by_namespace = Counter(pod.partition("/")[0] for pod in pods)
            lines.append(
                f"  victims: {_count(len(self.victims), 'unit')} ({_names([v.key for v in self.victims])}), "
                f"{_count(len(pods), 'pod')} on {_count(len(nodes), 'node')}; "
                f"pods by priority: {_tally(sorted(by_priority.items()))}; "
                f"by namespace: {_tally(sorted(by_namespace.items(), key=lambda kv: (-kv[1], kv[0])))}"
            )
        if self.bound is not None:
            lines.append(
                f"  binary-search bound: priority {self.bound} (no victim above it: the lowest bound that places "
                "as many members as preempting every candidate)"
            )
        if self.spared:
            reasons = Counter(spared.reason.value for spared in self.spared)
            lines.append(f"  spared {_count(len(self.spared), 'candidate')}: {_tally(sorted(reasons.items()))}")
            protectors: dict[str, list[Spared]] = {}
            for spared in self.spared:
                if spared.reason == SpareReason.PROTECTED:
                    protectors.setdefault(spared.plugin, []).append(spared)
            for plugin, protected in sorted(protectors.items()):
                lines.append(f"    protected by {plugin}: {_protection(protected)}")
        if self.domains:
            shown = [str(d) for d in self.domains[:DOMAINS_SHOWN]]
            if len(self.domains) > DOMAINS_SHOWN:
                shown.append(f"+{len(self.domains) - DOMAINS_SHOWN} more searched")
            if self.domains_passed:
                shown.append(f"{self.domains_passed} passed over (no cheaper room there)")
            lines.append(f"  domains: {'; '.join(shown)}")
        if self.nominations:
            nominated = set(self.nominations.values())
            lines.append(f"  nominated: {_count(len(self.nominations), 'member')} on {_count(len(nominated), 'node')}")
        for why, count in sorted(Counter(self.pending.values()).items()):
            if why != self.message:  # a decision that cannot help gives every member its own message
                lines.append(f"  pending: {_count(count, 'member')}: {why}")
        return lines

    def details(self, pending: bool = True) -> list[str]:
        """One line per victim, spared candidate, nomination and (unless not `pending`) pending member: `explain`
        lists the members already, and the summary counts them by reason."""
        lines = []
        for victim in self.victims:
            lines.append(
                f"  victim {victim.key} (priority {victim.priority}) on {', '.join(victim.nodes)}: "
                f"{victim.reason}: {victim.message}"
            )
        for spared in self.spared:
            said = " until " in spared.message  # every plugin's message names its own end
            until = f" until {rfc3339(spared.until)}" if spared.until and not said else ""
            lines.append(
                f"  spared {spared.key} (priority {spared.priority}) by {spared.plugin}: "
                f"{spared.reason}: {spared.message}{until}"
            )
        for member, node in sorted(self.nominations.items()):
            lines.append(f"  nominated {member} -> {node}")
        if pending:
            lines += [f"  pending {member}: {why}" for member, why in sorted(self.pending.items())]
        return lines

    def as_json(self) -> dict[str, Any]:
        """The whole explanation as data: `simulate -o json`'s `decisions`, `explain -o json`'s `decision`."""
        return {
            "schemaVersion": DECISION_SCHEMA,
            "preemptor": self.preemptor,
            "preemptorPriority": self.preemptor_priority,
            "outcome": self.outcome.value,
            "message": self.message,
            "bound": self.bound,
            "victims": [
                {
                    "unit": v.key,
                    "priority": v.priority,
                    "pods": list(v.pods),
                    "nodes": list(v.nodes),
                    "reason": v.reason.value,
                    "message": v.message,
                }
                for v in self.victims
            ],
            "spared": [
                {
                    "unit": s.key,
                    "priority": s.priority,
                    "plugin": s.plugin,
                    "reason": s.reason.value,
                    "message": s.message,
                    "until": rfc3339(s.until) if s.until else None,
                }
                for s in self.spared
            ],
            "nominations": [{"pod": pod, "node": node} for pod, node in sorted(self.nominations.items())],
            "pending": [{"pod": pod, "message": why} for pod, why in sorted(self.pending.items())],
            "pdbViolations": self.pdb_violations,
            "until": rfc3339(self.until) if self.until else None,
            "domains": [
                {
                    "name": d.name,
                    "pdbViolations": d.pdb_violations,
                    "highest": d.highest,
                    "sum": d.total,
                    "pods": d.pods,
                }
                for d in self.domains
            ],
            "domainsPassedOver": self.domains_passed,
        }


DOMAINS_SHOWN = 3
"""Topology domains a summary names (the cheapest searched) before it counts the rest."""
NAMED = 5
"""Units a summary line names before it only counts the rest."""
TALLIED = 6
"""Entries a `by priority` / `by namespace` tally shows before it only counts the rest."""


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _names(keys: list[str]) -> str:
    shown = ", ".join(keys[:NAMED])
    return shown if len(keys) <= NAMED else f"{shown}, +{len(keys) - NAMED} more"


def _tally(items: list[tuple[Any, int]]) -> str:
    shown = ", ".join(f"{key} ({count})" for key, count in items[:TALLIED])
    return shown if len(items) <= TALLIED else f"{shown}, +{len(items) - TALLIED} more"


def _protection(protected: list[Spared]) -> str:
    """One protector's spared units: its own message for one unit, else the units and the first expiry."""
    if len(protected) == 1:
        return protected[0].message
    ends = sorted(s.until for s in protected if s.until is not None)
    when = f", the first until {rfc3339(ends[0])}" if ends else ""
    return f"{_count(len(protected), 'unit')} ({_names([s.key for s in protected])}){when}"
