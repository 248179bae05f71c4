"""Profile: the plugins one scheduler runs at each extension point, in order."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from scheduler.framework.interfaces import (
    ConfigurationCheck,
    FilterPlugin,
    PostFilterPlugin,
    PreEnqueuePlugin,
    ScenarioValidator,
    ScorePlugin,
    SnapshotHook,
    VictimFilter,
)


@dataclass(frozen=True, slots=True)
class Profile:
    """`static_filters` depend only on the pod's shape and the nodes (cached per shape); `filters`
    depend on what runs where (resources) and are evaluated every cycle."""

    pre_enqueue: Sequence[PreEnqueuePlugin]
    static_filters: Sequence[FilterPlugin]
    filters: Sequence[FilterPlugin]
    scores: Sequence[ScorePlugin]
    post_filters: Sequence[PostFilterPlugin] = ()
    victim_filters: Sequence[VictimFilter] = ()
    scenario_validators: Sequence[ScenarioValidator] = ()
    configuration_checks: Sequence[ConfigurationCheck] = ()
    snapshot_hooks: Sequence[SnapshotHook] = ()
