"""Profile: the plugins one scheduler runs at each extension point, in order."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from scheduler.framework.interfaces import (
    ConfigurationCheck,
    FilterPlugin,
    PermitPlugin,
    PlacementGeneratePlugin,
    PlacementPlugin,
    PlacementScorePlugin,
    PodConstraintFilter,
    PodScorePlugin,
    PostBindPlugin,
    PostFilterPlugin,
    PreBindPlugin,
    PreEnqueuePlugin,
    ReservePlugin,
    ScenarioValidator,
    ScorePlugin,
    SnapshotHook,
    UngatePlugin,
    VictimFilter,
)


@dataclass(frozen=True, slots=True)
class Profile:
    """`static_filters` depend only on the pod's shape and the nodes (cached per shape); `filters`
    depend on what runs on each node (resources, ports) and are evaluated every cycle on the rows that changed;
    `pod_constraints` depend on what runs on other nodes too (inter-pod affinity, topology spread) and are asked
    afresh for each pod."""

    pre_enqueue: Sequence[PreEnqueuePlugin]
    static_filters: Sequence[FilterPlugin]
    filters: Sequence[FilterPlugin]
    scores: Sequence[ScorePlugin]
    post_filters: Sequence[PostFilterPlugin] = ()
    victim_filters: Sequence[VictimFilter] = ()
    scenario_validators: Sequence[ScenarioValidator] = ()
    configuration_checks: Sequence[ConfigurationCheck] = ()
    snapshot_hooks: Sequence[SnapshotHook] = ()
    pod_constraints: Sequence[PodConstraintFilter] = ()
    pod_scores: Sequence[PodScorePlugin] = ()
    """Scores normalised over the feasible nodes, or read from other nodes' pods: asked afresh for each pod."""
    reserves: Sequence[ReservePlugin] = ()
    """Told of each pod placed in the pass (and of each placement undone), in order."""
    pre_binds: Sequence[PreBindPlugin] = ()
    """Asked to write what a pod needs before its Binding, in order."""
    ungates: Sequence[UngatePlugin] = ()
    """Asked whether the scheduler's own gate may come off a pending pod; it comes off once all agree."""
    placements: Sequence[PlacementPlugin] = ()
    """Asked in order for ways to place a unit before it is placed as it stands (`framework/placer.py`)."""
    placement_generators: Sequence[PlacementGeneratePlugin] = ()
    """Asked in order for the domains a pod group must go whole into; the first with a say decides."""
    placement_scores: Sequence[PlacementScorePlugin] = ()
    """Score each feasible domain's placement; the highest weighted total wins."""
    permits: Sequence[PermitPlugin] = ()
    """Asked in order whether a unit's placement may bind; the first rejection undoes it."""
    post_binds: Sequence[PostBindPlugin] = ()
    """Told in order of each unit whose members were just bound."""
