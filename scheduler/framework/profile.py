"""Profile: the plugins one scheduler runs at each extension point, in order."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from scheduler.framework.interfaces import (
    ConfigurationCheck,
    FilterPlugin,
    PodConstraintFilter,
    PodScorePlugin,
    PostFilterPlugin,
    PreBindPlugin,
    PreEnqueuePlugin,
    ReservePlugin,
    ScenarioValidator,
    ScorePlugin,
    SnapshotHook,
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
