"""Extension points: one-method Protocols, as kube-scheduler's framework/interface.go.

Filters and scores work on all nodes at once (a boolean mask / a score array per node) instead of
one (pod, node) pair per call: a 5,000-node cluster is then one numpy expression per plugin, not
5,000 Python calls. Victim filters and scenario validators come from KAI-Scheduler's session hooks,
but return a Status with a reason (and `until` when a protection expires) instead of a bool.
Configuration checks let a plugin whose hooks must stay pure name what it ignores; the runner
reports each finding once (a Warning Event and a log line).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from scheduler.api.meta import ApiModel
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.pod_info import PodInfo, SchedulingUnit, VictimUnit
from scheduler.framework.snapshot import BoolArray, Snapshot
from scheduler.framework.status import Code, Status


@dataclass(frozen=True, slots=True)
class NodeVerdict:
    """A filter's answer for every node: which pass, and why each rejected node was rejected.

    `code` applies to every rejected node: UNSCHEDULABLE when removing pods could help (resources),
    UNSCHEDULABLE_AND_UNRESOLVABLE when it cannot (taints, selectors, cordons).
    """

    feasible: BoolArray
    reasons: tuple[tuple[str, BoolArray], ...] = ()
    code: Code = Code.UNSCHEDULABLE


class Plugin(Protocol):
    name: str


class PreEnqueuePlugin(Plugin, Protocol):
    """Whether a pending pod may enter the queue. It reads only the pod, its PodGroup and how many members exist
    (`snapshot.groups`, `snapshot.members`): the runner keeps its answer while those are unchanged, as
    kube-scheduler runs PreEnqueue only when a pod is added or updated."""

    def pre_enqueue(self, pod: PodInfo, snapshot: Snapshot) -> Status: ...


class FilterPlugin(Plugin, Protocol):
    def filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> NodeVerdict: ...


class ScorePlugin(Plugin, Protocol):
    weight: int

    def score(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, feasible: BoolArray) -> object:
        """Scores 0..100 for every node as a float numpy array (entries of infeasible nodes ignored)."""
        ...


@dataclass(frozen=True, slots=True)
class PostFilterResult:
    """What a PostFilter (preemption) proposes: nominations for the unit's members and why."""

    status: Status
    nominations: dict[str, str]
    victims: tuple[VictimUnit, ...] = ()
    explanation: object = None


class PostFilterPlugin(Plugin, Protocol):
    def post_filter(
        self, state: CycleState, unit: SchedulingUnit, snapshot: Snapshot, statuses: dict[str, Status]
    ) -> PostFilterResult: ...


class SnapshotHook(Plugin, Protocol):
    """Told of each pass's snapshot before any unit is tried, as KAI's OnSessionOpen: a plugin brings the
    caches it keeps across passes up to date here, so the unit that needs them does not pay a full
    rebuild (at 100,000 pods, WorkloadPreemption's running-pod columns cost ~0.25 s from scratch)."""

    def snapshot_ready(self, snapshot: Snapshot) -> None: ...


class VictimFilter(Plugin, Protocol):
    """May `victim` be preempted by `preemptor` now? A rejection says who protects it and until when."""

    def filter_victim(self, preemptor: SchedulingUnit, victim: VictimUnit, snapshot: Snapshot) -> Status: ...


class ScenarioValidator(Plugin, Protocol):
    """May this whole set of victims be preempted together (e.g. an elastic group kept >= minCount)?"""

    def validate(self, preemptor: SchedulingUnit, victims: Sequence[VictimUnit], snapshot: Snapshot) -> Status: ...


@dataclass(frozen=True, slots=True)
class ConfigurationWarning:
    """A misconfiguration a plugin ignored, and what it does instead (`note`), for users to see once.

    `regarding` is the object to attach a Warning Event to (the PriorityClass with a bad annotation,
    the pod naming a missing class), or None for the scheduler's own configuration, which has no API
    object: that one is only logged (and listed by `simulate`). `version` says when the finding is
    new again: the resourceVersion of the object that holds the bad value, so an edit that leaves it
    wrong warns again; None when the note alone identifies it.
    """

    regarding: ApiModel | None
    reason: str
    note: str
    version: str | None = None


class ConfigurationCheck(Plugin, Protocol):
    """What in this snapshot the plugin ignores as misconfigured; the runner reports each finding once."""

    def warnings(self, snapshot: Snapshot) -> Sequence[ConfigurationWarning]: ...
