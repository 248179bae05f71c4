"""Extension points: one-method Protocols, as kube-scheduler's framework/interface.go.

Filters and scores work on all nodes at once (a boolean mask / a score array per node) instead of
one (pod, node) pair per call: a 5,000-node cluster is then one numpy expression per plugin, not
5,000 Python calls. Victim filters and scenario validators come from KAI-Scheduler's session hooks,
but return a Status with a reason (and `until` when a protection expires) instead of a bool.
Configuration checks let a plugin whose hooks must stay pure name what it ignores; the runner
reports each finding once (a Warning Event and a log line).

A unit (a lone pod, or a PodGroup's pending members) is placed, permitted and bound as a whole: the placement,
Permit and PostBind points take the unit's `Placement`, as kube-scheduler's workload scheduling cycle
(KEP-4671) treats a pod group as one, rather than one pod at a time.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from scheduler.api.meta import ApiModel
from scheduler.api.pod_group import PodGroup
from scheduler.framework.cluster import Cluster
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.pod_group_placement import Domain, DomainFit, Proposal, Refusal
from scheduler.framework.pod_info import PodInfo, SchedulingUnit, VictimUnit
from scheduler.framework.snapshot import BoolArray, IntArray, Snapshot
from scheduler.framework.status import SUCCESS, Code, Status


@dataclass(frozen=True, slots=True)
class NodeVerdict:
    """A filter's answer for every node: which pass, and why each rejected node was rejected.

    `code` applies to every rejected node: UNSCHEDULABLE when removing pods could help (resources),
    UNSCHEDULABLE_AND_UNRESOLVABLE when it cannot (taints, selectors, cordons).
    """

    feasible: BoolArray
    reasons: tuple[tuple[str, BoolArray], ...] = ()
    code: Code = Code.UNSCHEDULABLE
    hard: BoolArray | None = None
    message: str | None = None
    """Why the pod fits no node at all, said once rather than counted per node (kube-scheduler's PreFilter
    message): `0/3 nodes are available: phalanx-scheduler does not support spec.resourceClaims.`"""
    """Rejected nodes that removing pods cannot help even when `code` is UNSCHEDULABLE: a filter with reasons of
    both kinds (InterPodAffinity: a missing affinity match is unresolvable, an anti-affinity conflict is not)."""


class Plugin(Protocol):
    name: str


class PreEnqueuePlugin(Plugin, Protocol):
    """Whether a pending pod may enter the queue. It reads only the pod, its PodGroup and how many members exist
    (`snapshot.groups`, `snapshot.members`): the runner keeps its answer while those are unchanged, as
    kube-scheduler runs PreEnqueue only when a pod is added or updated."""

    def pre_enqueue(self, pod: PodInfo, snapshot: Snapshot) -> Status: ...


class FilterPlugin(Plugin, Protocol):
    """A per-node filter may also define `skips(pod) -> bool`: true when it has nothing to say about the pod
    (upstream's PreFilter returning Skip), so the placement memo never asks it about that pod's shape."""

    def filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> NodeVerdict: ...


class PodConstraintFilter(Plugin, Protocol):
    """A filter whose verdict on a node may change when a pod is placed on another node (inter-pod affinity,
    topology spread): asked afresh for every pod, never kept per pod shape or row. None when the pod has no such
    constraint and no running pod constrains it, which is most pods, so they pay nothing."""

    def filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> NodeVerdict | None: ...


@dataclass(frozen=True, slots=True)
class Exclusion:
    """A conflict a node sheds only by losing pods, as preemption sees it: a column the search treats as one more
    resource. Each of the `holders` (running pods' keys) on a node takes `capacity` of it and each member in
    `needs` (one flag per member) takes 1, so a member fits a node only once every holder there is gone, and at
    most `capacity` members share one (1 when the members exclude each other too: the same host port, an
    anti-affinity the members match)."""

    needs: tuple[int, ...]
    """Per member, how much of the column it takes: a flag (1) for a conflict, a count for devices."""
    holders: frozenset[str]
    capacity: int
    room: IntArray | None = None
    """Instead of `capacity`: per node, how many holders and needing members it may keep (topology spread: the
    node's domain may grow to maxSkew above the smallest); each holder removed gives 1 back."""
    amounts: Mapping[str, int] | None = None
    """With `room`: per holder, how much of the column it holds and gives back when removed, instead of 1 (the
    devices a running pod's claims hold)."""


@dataclass(frozen=True, slots=True)
class PreemptionTerms:
    """What a constraint plugin tells preemption about a unit's members: `masks` (members x nodes, or None)
    where a member may go at all once lower-priority pods are removed, and the `exclusions` those removals
    must clear."""

    masks: BoolArray | None = None
    exclusions: tuple[Exclusion, ...] = ()


def as_it_stands(
    verdict: Callable[[CycleState, PodInfo, Snapshot], NodeVerdict | None],
    state: CycleState,
    members: Sequence[PodInfo],
    snapshot: Snapshot,
) -> PreemptionTerms:
    """The members' masks from a filter's verdict now: for a constraint removing pods never changes (a volume's zone)
    or that preemption takes as it stands (topology spread)."""
    rows = len(snapshot.running)
    verdicts = [verdict(state, m, snapshot) for m in members]
    if all(v is None for v in verdicts):
        return PreemptionTerms()
    return PreemptionTerms(
        masks=np.array([v.feasible if v is not None else np.ones(rows, dtype=np.bool_) for v in verdicts])
    )


class PreemptionConstraint(Plugin, Protocol):
    """A filter beyond resources that preemption must respect (kube-scheduler re-runs every filter with the
    victims removed; the columnar search asks each such plugin once per decision instead). `removable` says
    whether a running pod may be a victim of this unit."""

    def preemption_terms(
        self,
        state: CycleState,
        members: Sequence[PodInfo],
        snapshot: Snapshot,
        removable: Callable[[PodInfo], bool],
    ) -> PreemptionTerms: ...


class ScorePlugin(Plugin, Protocol):
    """A score of each node from that node alone (its row), so it is kept per pod shape and recomputed only on
    the rows that changed (`framework/placement.py`)."""

    weight: int

    def score(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, feasible: BoolArray) -> object:
        """Scores 0..100 for every node as a float numpy array (entries of infeasible nodes ignored)."""
        ...


class PodScorePlugin(Plugin, Protocol):
    """A score kube-scheduler normalises over the feasible nodes (NormalizeScore), or that reads other nodes'
    pods (inter-pod affinity, topology spread): asked afresh for each pod, as `PodConstraintFilter`."""

    weight: int

    def pod_score(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, feasible: BoolArray) -> object:
        """Normalised scores 0..100 for every node as a float numpy array (entries of infeasible nodes ignored),
        or None when every feasible node scores the same, so most pods pay nothing."""
        ...


class ReservePlugin(Plugin, Protocol):
    """Holds what a pod placed in the pass takes beyond its node's resources, until the pass ends (kube-scheduler's
    Reserve): the volumes VolumeBinding chose for its claims, which no pod placed later may be given. `unreserve`
    gives them back when the placement is undone (a gang that could not place `minCount` members). The runner
    reserves right after it assumes a pod on a node; a reservation that fails undoes the placement, and that pod
    fails with the Status."""

    def reserve(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, row: int) -> Status: ...

    def unreserve(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, row: int) -> None: ...


class PreBindPlugin(Plugin, Protocol):
    """Writes what must hold before a pod's Binding (kube-scheduler's PreBind): VolumeBinding's claims bound to their
    volumes. Called only when the unit binds, for each pod just before its Binding, with the unit the writes are
    for; the back end sends that Binding only once these writes went through (a refused write is `WriteRefused`
    here, or a refusal in the back end's ledger, and the Binding is not sent)."""

    def pre_bind(self, state: CycleState, pod: PodInfo, node: str, cluster: Cluster, unit: str) -> None: ...


class Explanation(Protocol):
    """Why a PostFilter proposed what it did, as far as the framework reads it: the PodDisruptionBudgets its
    victims break, and lines for an Event. Preemption's is its `Decision`, which the simulator and `explain`
    read whole."""

    @property
    def pdb_violations(self) -> int: ...

    def explain(self, verbose: bool = False) -> list[str]: ...


@dataclass(frozen=True, slots=True)
class PostFilterResult:
    """What a PostFilter (preemption) proposes: nominations for the unit's members and why."""

    status: Status
    nominations: dict[str, str]
    victims: tuple[VictimUnit, ...] = ()
    explanation: Explanation | None = None


@dataclass(frozen=True, slots=True)
class Placement:
    """A unit's trial placement on the snapshot: its members assumed on their nodes with their reservations made,
    nothing written yet. `unit` is the unit as placed (sparing other groups' claims or not: its preemption follows
    the same rule)."""

    unit: SchedulingUnit
    placed: tuple[tuple[PodInfo, int], ...]
    """Each member placed, with its node's row."""
    failures: Mapping[str, tuple[Status, NodeVerdict | None]]
    """Each member that fit nowhere (or failed its Reserve), why, and the filters' verdict when they rejected it."""
    bound_before: int
    """Members of its PodGroup bound before this cycle."""
    note: str = ""
    """What the placement step says of the unit as a whole, which each member that failed says already: for a
    topology group that no domain could take, what each domain could."""
    domains: tuple[DomainFit, ...] = ()
    """For a topology group that no domain could take: how many members each domain could, closest first."""


@dataclass(frozen=True, slots=True)
class PermitResult:
    """A Permit plugin's answer: SUCCESS lets the unit bind what was placed; a rejection undoes the placement and
    fails every member with the status, each member's own failure after it. `needs` is how many members, those bound
    before included, the plugin needs placed (None: it needs no number, and the unit needs all its members)."""

    status: Status = SUCCESS
    needs: int | None = None


class PlacementPlugin(Plugin, Protocol):
    """Ways to place a unit to try before the unit as it stands, best first (upstream's PlacementGenerate): each the
    unit as it would then be placed (sparing the room other groups' preemptions claimed, `spares_claims`). The
    placement step takes the first that binds or whose preemption would nominate, else the unit as it stands
    (`framework/placer.py`)."""

    def placements(self, state: CycleState, unit: SchedulingUnit, snapshot: Snapshot) -> Sequence[SchedulingUnit]: ...


class PlacementGeneratePlugin(Plugin, Protocol):
    """The domains a pod group must go whole into, one of them (upstream's PlacementGenerate, KEP-5732): None when
    the plugin has no say over the group, a `Refusal` when no domain can exist (`framework/pod_group_placement.py`)."""

    def generate_placements(self, group: PodGroup, snapshot: Snapshot) -> list[Domain] | Refusal | None: ...


class PlacementScorePlugin(Plugin, Protocol):
    """Scores a feasible domain's placement of a pod group, 0-100 once normalised (upstream's PlacementScore); the
    highest weighted total wins."""

    weight: int

    def score_placement(self, group: PodGroup, proposal: Proposal, snapshot: Snapshot) -> int: ...


@runtime_checkable
class NormalizePlacementScore(Protocol):
    """A PlacementScore plugin's scores of all feasible domains, normalised together (upstream's
    NormalizePlacementScore)."""

    def normalize_placement_scores(self, scores: list[int]) -> list[int]: ...


class PermitPlugin(Plugin, Protocol):
    """Whether a unit may bind what its placement placed, asked once for the unit as a whole (upstream's Permit, which
    holds a gang's pods until enough are assumed; here every pending member is placed in the same cycle, so the
    answer never waits). A rejection is undone as a failed Reserve is (Unreserve, then forget)."""

    def permit(self, state: CycleState, placement: Placement, snapshot: Snapshot) -> PermitResult: ...


class PostBindPlugin(Plugin, Protocol):
    """Told once a unit's permitted members were bound (their Bindings sent), with the placement they came from
    (upstream's PostBind): what starts when a unit starts running is written here."""

    def post_bind(self, state: CycleState, placement: Placement, snapshot: Snapshot, cluster: Cluster) -> None: ...


class UngatePlugin(Plugin, Protocol):
    """Whether the scheduler's own scheduling gate may come off a pending pod that carries it: the runner removes it
    once every such plugin agrees, before the pod is admitted (a gated pod is invisible to every scheduler, so a
    gang's members stay out of the way until they may be placed together). A foreign gate is never removed."""

    def ungate(self, pod: PodInfo, snapshot: Snapshot) -> bool: ...


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
