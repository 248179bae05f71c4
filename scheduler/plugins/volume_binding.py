"""VolumeBinding: every claim a pod uses must exist, be bound, and be usable from the node.

Source: kube-scheduler 1.36 `plugins/volumebinding` (`volume_binding.go` PreFilter and Filter, `binder.go`
`GetPodVolumeClaims` and `checkBoundClaims`). The pod-level checks are its PreFilter's, said once for the pod
(`NodeVerdict.message`), in its order: a missing claim (a plain claim before a generic ephemeral one, as
VolumeRestrictions' PreFilter runs first), a lost or deleting claim, an ephemeral claim the pod does not own, then
an unbound claim of an `Immediate` class (or of none, or of a missing one). On each node, the volume of every
bound claim must exist and its `spec.nodeAffinity.required` match the node's labels.

Divergence: a claim whose class is `WaitForFirstConsumer` and that is not bound yet would be bound by
kube-scheduler in PreBind (a static volume chosen, or the `volume.kubernetes.io/selected-node` annotation for
dynamic provisioning). Phalanx does not write to claims or volumes yet: such a pod waits, UnschedulableAndUnresolvable,
with `phalanx-scheduler does not support WaitForFirstConsumer volume binding yet`, rather than be placed as if
the volume did not matter. Nothing is preempted for it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from scheduler.api.node import Node
from scheduler.api.persistent_volume import PersistentVolume
from scheduler.api.pod import NodeSelector
from scheduler.api.pod_volume import owned_by
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import NodeVerdict, PreemptionTerms
from scheduler.framework.pod_info import PodInfo
from scheduler.framework.snapshot import BoolArray, Snapshot
from scheduler.framework.status import Code
from scheduler.framework.storage import PodClaim, Storage, pod_claims
from scheduler.plugins.node_affinity import requirement_matches

NODE_CONFLICT = "node(s) didn't match PersistentVolume's node affinity"
VOLUME_MISSING = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
WAIT_FOR_FIRST_CONSUMER = "phalanx-scheduler does not support WaitForFirstConsumer volume binding yet"


def selector_matches(selector: NodeSelector, node: Node) -> bool:
    """`volume.CheckNodeAffinity`: some term matches the node's labels (match fields see a node with no name)."""
    labels = node.metadata.labels
    no_name = {"metadata.name": ""}
    for term in selector.node_selector_terms:
        if not term.match_expressions and not term.match_fields:
            continue
        if all(requirement_matches(r, labels) for r in term.match_expressions) and all(
            requirement_matches(r, no_name) for r in term.match_fields
        ):
            return True
    return False


def volume_fits(volume: PersistentVolume, node: Node) -> bool:
    affinity = volume.spec.node_affinity
    if affinity is None or affinity.required is None:
        return True
    return selector_matches(affinity.required, node)


def claim_problem(pod: PodInfo, claims: Sequence[PodClaim], storage: Storage) -> str | None:
    """Why the pod cannot be scheduled anywhere because of its claims (its PreFilter's message), or None."""
    for used in claims:
        if used.claim is None and not used.ephemeral:
            return f'persistentvolumeclaim "{used.name}" not found'
    meta = pod.pod.metadata
    for used in claims:
        claim = used.claim
        if claim is None:
            return f'waiting for ephemeral volume controller to create the persistentvolumeclaim "{used.name}"'
        if claim.status.phase == "Lost":
            return (
                f'persistentvolumeclaim "{used.name}" bound to non-existent persistentvolume '
                f'"{claim.spec.volume_name or ""}"'
            )
        if claim.metadata.deletion_timestamp is not None:
            return f'persistentvolumeclaim "{used.name}" is being deleted'
        if used.ephemeral and not owned_by(claim.metadata.owner_references, meta.name, meta.uid):
            return (
                f"PVC {claim.metadata.namespace or 'default'}/{claim.metadata.name} was not created for pod "
                f"{pod.namespace}/{meta.name} (pod is not owner)"
            )
    waiting = False
    for used in claims:
        claim = used.claim
        if claim is None or claim.is_bound:
            continue
        storage_class = storage.classes.get(claim.storage_class) if claim.storage_class else None
        if storage_class is None or not storage_class.waits_for_first_consumer or claim.spec.volume_name:
            return UNBOUND_IMMEDIATE
        waiting = True
    return WAIT_FOR_FIRST_CONSUMER if waiting else None


class VolumeBinding:
    name = "VolumeBinding"

    def filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> NodeVerdict:
        nodes = snapshot.nodes.nodes
        count = len(nodes)
        claims = pod_claims(pod.pod, snapshot.storage)
        if not claims:
            return NodeVerdict(feasible=np.ones(count, dtype=np.bool_))
        problem = claim_problem(pod, claims, snapshot.storage)
        if problem is not None:
            return NodeVerdict(
                feasible=np.zeros(count, dtype=np.bool_), code=Code.UNSCHEDULABLE_AND_UNRESOLVABLE, message=problem
            )
        undecided: BoolArray = np.ones(count, dtype=np.bool_)
        conflict: BoolArray = np.zeros(count, dtype=np.bool_)
        missing: BoolArray = np.zeros(count, dtype=np.bool_)
        for used in claims:
            volume = snapshot.storage.volumes.get(used.claim.spec.volume_name or "") if used.claim else None
            if volume is None:
                missing = undecided.copy()
                break
            if volume.spec.node_affinity is None:
                continue
            fits = np.fromiter((volume_fits(volume, n) for n in nodes), dtype=np.bool_, count=count)
            conflict |= undecided & ~fits
            undecided &= fits
        feasible = ~(conflict | missing)
        reasons = tuple((reason, mask) for reason, mask in ((NODE_CONFLICT, conflict), (VOLUME_MISSING, missing)))
        return NodeVerdict(feasible=feasible, reasons=reasons, code=Code.UNSCHEDULABLE_AND_UNRESOLVABLE)

    def preemption_terms(
        self,
        state: CycleState,
        members: Sequence[PodInfo],
        snapshot: Snapshot,
        removable: Callable[[PodInfo], bool],
    ) -> PreemptionTerms:
        """Where each member's volumes let it go: removing pods never changes that."""
        if not any(m.pod.spec.volumes for m in members):
            return PreemptionTerms()
        return PreemptionTerms(masks=np.array([self.filter(state, m, snapshot).feasible for m in members]))
