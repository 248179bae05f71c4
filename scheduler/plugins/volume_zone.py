"""VolumeZone: the zone and region labels of a pod's bound volumes must match the node's.

Source: kube-scheduler 1.36 `plugins/volumezone/volume_zone.go`. Only claims named directly
(`persistentVolumeClaim`) count. A volume's `topology.kubernetes.io/zone` and `/region` labels, and their
`failure-domain.beta.kubernetes.io` forms, each hold one value or several joined by `__`; a node with none of
these four labels accepts every volume (a single-zone cluster), any other must carry each label the volumes do
(a beta label may be matched by the node's GA one) with one of its values. The PreFilter's messages are said once
for the pod: a claim or volume that does not exist, an unbound claim of an `Immediate` class (VolumeBinding
says so first), a class that does not exist.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from scheduler.api.node import Node
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.feasibility import NEUTRAL_VOLUMES
from scheduler.framework.interfaces import NodeVerdict, PreemptionTerms, as_it_stands
from scheduler.framework.pod_info import PodInfo
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import Code
from scheduler.framework.storage import Storage, pod_claims

REASON = "node(s) had no available volume zone"
BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
BETA_REGION = "failure-domain.beta.kubernetes.io/region"
ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
TOPOLOGY_LABELS = (BETA_ZONE, BETA_REGION, ZONE, REGION)
GA = {BETA_ZONE: ZONE, BETA_REGION: REGION}
ZONE_SEPARATOR = "__"

Topology = tuple[str, frozenset[str]]
"""A volume's label and the values it allows."""


def label_values(value: str) -> frozenset[str] | None:
    """`volumehelpers.LabelZonesToSet`: the `__`-separated values; None (the label is ignored) when one is empty."""
    values = [part.strip() for part in value.split(ZONE_SEPARATOR)]
    return None if any(not v for v in values) else frozenset(values)


def pod_topologies(pod: PodInfo, storage: Storage) -> tuple[list[Topology], str | None]:
    """The topology of each bound volume of the pod's claims, or the PreFilter's message."""
    found: list[Topology] = []
    for used in pod_claims(pod.pod, storage):
        if used.ephemeral:
            continue
        if not used.name:
            return [], "PersistentVolumeClaim had no name"
        claim = used.claim
        if claim is None:
            return [], f'persistentvolumeclaim "{used.name}" not found'
        volume_name = claim.spec.volume_name
        if not volume_name:
            class_name = claim.storage_class
            if not class_name:
                return [], "PersistentVolumeClaim had no pv name and storageClass name"
            storage_class = storage.classes.get(class_name)
            if storage_class is None:
                return [], f'storageclass.storage.k8s.io "{class_name}" not found'
            if storage_class.waits_for_first_consumer:
                continue
            return [], "PersistentVolume had no name"
        volume = storage.volumes.get(volume_name)
        if volume is None:
            return [], f'persistentvolume "{volume_name}" not found'
        for key in TOPOLOGY_LABELS:
            value = volume.metadata.labels.get(key)
            values = label_values(value) if value is not None else None
            if values is not None:
                found.append((key, values))
    return found, None


def node_fits(node: Node, topologies: list[Topology]) -> bool:
    labels = node.metadata.labels
    if not any(key in labels for key in TOPOLOGY_LABELS):
        return True
    for key, values in topologies:
        value = labels.get(key)
        if value is None:
            value = labels.get(GA.get(key, key))
        if value is None or value not in values:
            return False
    return True


class VolumeZone:
    name = "VolumeZone"

    def skips(self, pod: PodInfo) -> bool:
        """No volume that could be bound to a zone."""
        return all(NEUTRAL_VOLUMES.issuperset(v.sources()) for v in pod.pod.spec.volumes)

    def filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> NodeVerdict:
        nodes = snapshot.nodes.nodes
        count = len(nodes)
        if not pod.pod.spec.volumes:
            return NodeVerdict(feasible=np.ones(count, dtype=np.bool_))
        topologies, problem = pod_topologies(pod, snapshot.storage)
        if problem is not None:
            return NodeVerdict(
                feasible=np.zeros(count, dtype=np.bool_), code=Code.UNSCHEDULABLE_AND_UNRESOLVABLE, message=problem
            )
        if not topologies:
            return NodeVerdict(feasible=np.ones(count, dtype=np.bool_))
        feasible = np.fromiter((node_fits(n, topologies) for n in nodes), dtype=np.bool_, count=count)
        return NodeVerdict(feasible=feasible, reasons=((REASON, ~feasible),), code=Code.UNSCHEDULABLE_AND_UNRESOLVABLE)

    def preemption_terms(
        self,
        state: CycleState,
        members: Sequence[PodInfo],
        snapshot: Snapshot,
        removable: Callable[[PodInfo], bool],
    ) -> PreemptionTerms:
        """Where each member's volumes' zones let it go: removing pods never changes that."""
        if not any(m.pod.spec.volumes for m in members):
            return PreemptionTerms()
        return as_it_stands(self.filter, state, members, snapshot)
