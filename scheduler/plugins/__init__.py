"""The plugin registry: which plugins the default profile runs, in order, at each extension point."""

from __future__ import annotations

from scheduler.api.config import SchedulerConfiguration
from scheduler.framework.profile import Profile
from scheduler.plugins.dynamic_resources import DynamicResources
from scheduler.plugins.gang_scheduling import GangScheduling
from scheduler.plugins.image_locality import ImageLocality
from scheduler.plugins.inter_pod_affinity import InterPodAffinity
from scheduler.plugins.min_runtime import ElasticMinRuntime, MinRuntime
from scheduler.plugins.node_affinity import NodeAffinity
from scheduler.plugins.node_name import NodeName
from scheduler.plugins.node_ports import NodePorts
from scheduler.plugins.node_resources_allocated import NodeResourcesAllocated
from scheduler.plugins.node_resources_balanced_allocation import NodeResourcesBalancedAllocation
from scheduler.plugins.node_resources_fit import NodeResourcesFit
from scheduler.plugins.node_unschedulable import NodeUnschedulable
from scheduler.plugins.node_volume_limits import NodeVolumeLimits
from scheduler.plugins.pod_group_pods_count import PodGroupPodsCount
from scheduler.plugins.pod_topology_spread import PodTopologySpread
from scheduler.plugins.preemption_toleration import PreemptionToleration
from scheduler.plugins.scheduling_gates import SchedulingGates
from scheduler.plugins.taint_toleration import TaintToleration
from scheduler.plugins.topology_placement import TopologyPlacement
from scheduler.plugins.volume_binding import VolumeBinding
from scheduler.plugins.volume_restrictions import VolumeRestrictions
from scheduler.plugins.volume_zone import VolumeZone
from scheduler.plugins.workload_preemption import WorkloadPreemption


def static_filters() -> tuple[NodeUnschedulable, NodeName, NodeAffinity, TaintToleration]:
    """Filters whose verdict depends only on the pod's shape and the nodes, never on running pods."""
    return (NodeUnschedulable(), NodeName(), NodeAffinity(), TaintToleration())


def default_profile(config: SchedulerConfiguration) -> Profile:
    statics = static_filters()
    node_affinity, taints = statics[2], statics[3]
    gang, min_runtime = GangScheduling(), MinRuntime()
    victim_filters = (PreemptionToleration(), min_runtime)
    validators = (ElasticMinRuntime(),)
    ports, spread, affinity = NodePorts(), PodTopologySpread(), InterPodAffinity()
    binding = VolumeBinding()
    volumes = (NodeVolumeLimits(), binding, VolumeZone())
    restrictions = VolumeRestrictions()
    fit = NodeResourcesFit(config.scoring_strategy)
    devices = DynamicResources()
    preemption = WorkloadPreemption(
        statics, victim_filters, validators, constraints=(ports, affinity, spread, restrictions, *volumes, devices)
    )
    return Profile(
        pre_enqueue=(gang, SchedulingGates()),
        static_filters=statics,
        filters=(ports, fit, *volumes),
        pod_constraints=(binding.claims, devices, restrictions, spread, affinity),
        scores=(NodeResourcesAllocated(config.scoring_strategy), NodeResourcesBalancedAllocation()),
        pod_scores=(taints, node_affinity, spread, affinity, ImageLocality()),
        post_filters=(preemption,),
        victim_filters=victim_filters,
        scenario_validators=validators,
        configuration_checks=victim_filters,
        snapshot_hooks=(preemption,),
        reserves=(binding, devices),
        pre_binds=(binding, devices),
        ungates=(gang,),
        placements=(preemption,),
        placement_generators=(TopologyPlacement(),),
        placement_scores=(fit, PodGroupPodsCount()),
        permits=(gang,),
        post_binds=(min_runtime,),
    )
