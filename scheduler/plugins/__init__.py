"""The plugin registry: which plugins the default profile runs, in order, at each extension point."""

from __future__ import annotations

from collections.abc import Sequence

from scheduler.api.config import SchedulerConfiguration
from scheduler.framework.interfaces import FilterPlugin
from scheduler.framework.profile import Profile
from scheduler.plugins.gang_readiness import GangReadiness
from scheduler.plugins.min_runtime import ElasticMinRuntime, MinRuntime
from scheduler.plugins.node_affinity import NodeAffinity
from scheduler.plugins.node_name import NodeName
from scheduler.plugins.node_resources_allocated import NodeResourcesAllocated
from scheduler.plugins.node_resources_fit import NodeResourcesFit
from scheduler.plugins.node_unschedulable import NodeUnschedulable
from scheduler.plugins.preemption_toleration import PreemptionToleration
from scheduler.plugins.scheduling_gates import SchedulingGates
from scheduler.plugins.taint_toleration import TaintToleration
from scheduler.plugins.workload_preemption import WorkloadPreemption


def static_filters() -> Sequence[FilterPlugin]:
    """Filters whose verdict depends only on the pod's shape and the nodes, never on running pods."""
    return (NodeUnschedulable(), NodeName(), NodeAffinity(), TaintToleration())


def default_profile(config: SchedulerConfiguration) -> Profile:
    statics = static_filters()
    victim_filters = (PreemptionToleration(), MinRuntime())
    validators = (ElasticMinRuntime(),)
    preemption = WorkloadPreemption(statics, victim_filters, validators)
    return Profile(
        pre_enqueue=(GangReadiness(), SchedulingGates()),
        static_filters=statics,
        filters=(NodeResourcesFit(),),
        scores=(NodeResourcesAllocated(config.scoring_strategy),),
        post_filters=(preemption,),
        victim_filters=victim_filters,
        scenario_validators=validators,
        configuration_checks=victim_filters,
        snapshot_hooks=(preemption,),
    )
