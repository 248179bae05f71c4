"""SchedulerConfiguration: the one document that configures the scheduler and the simulator."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from scheduler.api.meta import ApiModel, ObjectMeta
from scheduler.api.pod_group import API_VERSION

DEFAULT_SCHEDULER_NAME = "phalanx-scheduler"
DEFAULT_GATE_NAME = "scheduling.phalanx.dev/gang"


class ScoringStrategy(ApiModel):
    """LeastAllocated spreads; MostAllocated bin-packs (keeps whole GPU nodes free for gangs)."""

    type: Literal["LeastAllocated", "MostAllocated"] = "LeastAllocated"
    resources: dict[str, int] = Field(default_factory=lambda: {"cpu": 1, "memory": 1})


class MinRuntimeDefaults(ApiModel):
    """Node-pool level min-runtime defaults, used when no queue on the path sets a value."""

    preempt: str = "0s"
    reclaim: str = "0s"
    reclaim_resolve_method: Literal["lca", "queue"] = "lca"


class LeaderElection(ApiModel):
    """kube-scheduler's leaderElection block: replicas compete for one Lease so only one schedules."""

    leader_elect: bool = False
    resource_name: str = DEFAULT_SCHEDULER_NAME
    resource_namespace: str = ""  # empty: the namespace the pod runs in
    lease_duration_seconds: float = 15.0
    renew_deadline_seconds: float = 10.0
    retry_period_seconds: float = 2.0


class SchedulerConfiguration(ApiModel):
    api_version: str = API_VERSION
    kind: str = "SchedulerConfiguration"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    scheduler_name: str = DEFAULT_SCHEDULER_NAME
    gate_name: str = DEFAULT_GATE_NAME
    scoring_strategy: ScoringStrategy = Field(default_factory=ScoringStrategy)
    min_runtime: MinRuntimeDefaults = Field(default_factory=MinRuntimeDefaults)
    leader_election: LeaderElection = Field(default_factory=LeaderElection)
    backoff_seconds: float = 1.0
    max_backoff_seconds: float = 10.0
