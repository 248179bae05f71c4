"""VolumeBinding: every claim a pod uses must exist and be bound, or be bindable on the node: a bound claim's volume
usable from the node, an unbound claim of a `WaitForFirstConsumer` class given a volume there, or provisioned there.

Source: kube-scheduler 1.36 `plugins/volumebinding` (`volume_binding.go` PreFilter, Filter, Reserve, Unreserve and
PreBind; `binder.go` `GetPodVolumeClaims`, `FindPodVolumes`, `AssumePodVolumes`, `BindPodVolumes`) and
`component-helpers/storage/volume` (`FindMatchingVolume`, `GetBindVolumeToClaim`).

- PreFilter, said once for the pod (`NodeVerdict.message`), in its order: a missing claim (a plain claim before a
  generic ephemeral one, as VolumeRestrictions' PreFilter runs first), a lost or deleting claim, an ephemeral
  claim the pod does not own, then an unbound claim of an `Immediate` class (or of none, or of a missing one, or
  one that names its volume already: the PV controller binds those).
- Filter, bound claims: the volume must exist and its `spec.nodeAffinity.required` match the node.
- Filter, the claims to bind (unbound, of a `WaitForFirstConsumer` class): a claim annotated
  `volume.kubernetes.io/selected-node` fits only that node, and only if it can be provisioned there. The others,
  smallest request first, each take on the node the volume `FindMatchingVolume` picks: one already bound to the
  claim (its claimRef), else the smallest Available one of the claim's class whose access modes, capacity, volume
  mode, volume attributes class, label selector and node affinity fit, not claimed by another claim, not being
  deleted, and not taken on that node by an earlier claim of the pod. A claim no volume fits must be provisionable
  there: its class names a provisioner (not `kubernetes.io/no-provisioner`) whose `allowedTopologies` the node
  matches. A node where a claim fails is `node(s) didn't find available persistent volumes to bind`.
- Reserve: the volumes chosen on the pod's node are assumed claimed and the claims to provision assumed annotated
  with that node, until the pass ends (upstream's assume cache, `Storage.assumed`): no pod placed later in the
  pass is given the same volume. Unreserve gives them back (a gang that could not be placed whole).
- PreBind: when its unit binds, each pod's choices are written (`Cluster.bind_volumes`): the volume's claimRef and
  the claim's selected node; the back end sends the pod's Binding once the PV controller (and the provisioner) bound
  every claim, as upstream waits in PreBind (up to its 600 s bind timeout). A pod whose claims are all bound writes
  nothing.

Two kinds of filter (docs/DESIGN.md, "Filters and scores"): `VolumeBinding` itself is a per-node filter for the
bound claims (kept per pod shape and row), and `VolumeBinding.claims` a pod constraint for the claims to bind, asked
afresh for each pod (None for a pod without any): its verdict changes with each volume the pass reserves. So a node
that both fails a claim to bind and VolumeZone is charged to VolumeZone, where upstream charges VolumeBinding.

Divergences: storage capacity is not checked (CSIStorageCapacity: `node(s) did not have enough free storage`), so a
claim to provision fits wherever its class's topology allows; an in-tree volume's node affinity is read as written,
not as its CSI translation; between volumes of the same size the first by name is taken (upstream: the order of its
cache). Nothing is scored (upstream's volume scoring is an alpha feature, off by default).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from scheduler.api.node import Node
from scheduler.api.persistent_volume import PersistentVolume, bound_to_claim
from scheduler.api.persistent_volume_claim import ANN_SELECTED_NODE, PersistentVolumeClaim, with_selected_node
from scheduler.api.pod import NodeSelector, NodeSelectorRequirement
from scheduler.api.pod_volume import owned_by
from scheduler.framework.cluster import Cluster
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import NodeVerdict, PreemptionTerms
from scheduler.framework.pod_info import PodInfo
from scheduler.framework.snapshot import BoolArray, IntArray, Snapshot
from scheduler.framework.status import SUCCESS, Code, Status, error
from scheduler.framework.storage import PodClaim, PodVolumes, Storage, pod_claims
from scheduler.framework.topology import domains
from scheduler.plugins.node_affinity import requirement_matches

NODE_CONFLICT = "node(s) didn't match PersistentVolume's node affinity"
VOLUME_MISSING = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
FILESYSTEM = "Filesystem"
MASKS_KEY = "VolumeBinding.masks"
"""Where the volumes' node masks are kept in `Snapshot.indexes`."""
KEPT_MASKS = 4096
"""Volume masks kept while the nodes stay the same; past this they are dropped and made again as needed."""


def requirement_mask(snapshot: Snapshot, requirement: NodeSelectorRequirement) -> BoolArray:
    """The nodes whose labels meet `requirement`: it is asked of each value the label takes (a node's domain,
    `framework/topology.py`), not of each node."""
    found = domains(snapshot, requirement.key)
    if not found.values:
        return np.full(len(found.ids), requirement_matches(requirement, {}), dtype=np.bool_)
    allowed = np.fromiter(
        (requirement_matches(requirement, {requirement.key: v}) for v in found.values),
        dtype=np.bool_,
        count=len(found.values),
    )
    return np.where(found.labelled, allowed[np.maximum(found.ids, 0)], requirement_matches(requirement, {}))


def selector_mask(snapshot: Snapshot, selector: NodeSelector) -> BoolArray:
    """`volume.CheckNodeAffinity` for every node: some non-empty term matches the node's labels (match fields see a
    node with no name, as upstream gives it only the labels)."""
    count = len(snapshot.nodes.names)
    found: BoolArray = np.zeros(count, dtype=np.bool_)
    no_name = {"metadata.name": ""}
    for term in selector.node_selector_terms:
        if not term.match_expressions and not term.match_fields:
            continue
        if not all(requirement_matches(r, no_name) for r in term.match_fields):
            continue
        matched: BoolArray = np.ones(count, dtype=np.bool_)
        for requirement in term.match_expressions:
            matched &= requirement_mask(snapshot, requirement)
        found |= matched
    return found


def node_fits(volume: PersistentVolume, node: Node) -> bool:
    """`volume.CheckNodeAffinity` for one node (`selector_mask` is the same for every node at once)."""
    affinity = volume.spec.node_affinity
    if affinity is None or affinity.required is None:
        return True
    labels = node.metadata.labels
    no_name = {"metadata.name": ""}
    return any(
        (term.match_expressions or term.match_fields)
        and all(requirement_matches(r, labels) for r in term.match_expressions)
        and all(requirement_matches(r, no_name) for r in term.match_fields)
        for term in affinity.required.node_selector_terms
    )


@dataclass(slots=True)
class _Masks:
    """Each volume's node mask, with the node affinity it was made from, for one tuple of Node objects."""

    nodes: tuple[Node, ...]
    by_volume: dict[str, tuple[NodeSelector, BoolArray]] = field(default_factory=dict)


def volume_mask(snapshot: Snapshot, volume: PersistentVolume) -> BoolArray | None:
    """The nodes the volume's node affinity admits; None when it has none (every node). Kept in the snapshot's
    indexes until a Node or the volume's affinity is replaced."""
    affinity = volume.spec.node_affinity
    required = affinity.required if affinity is not None else None
    if required is None:
        return None
    masks = snapshot.indexes.get(MASKS_KEY)
    if not isinstance(masks, _Masks) or masks.nodes is not snapshot.nodes.nodes:
        masks = snapshot.indexes[MASKS_KEY] = _Masks(snapshot.nodes.nodes)
    name = volume.metadata.name
    kept = masks.by_volume.get(name)
    if kept is not None and kept[0] is required:
        return kept[1]
    if len(masks.by_volume) >= KEPT_MASKS:
        masks.by_volume.clear()
    mask = selector_mask(snapshot, required)
    masks.by_volume[name] = (required, mask)
    return mask


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
    if any(used.claim is not None and not used.claim.is_bound and not _delayed(used.claim, storage) for used in claims):
        return UNBOUND_IMMEDIATE
    return None


def _delayed(claim: PersistentVolumeClaim, storage: Storage) -> bool:
    """`IsDelayBindingMode` and no volume named yet: the scheduler binds it (a claim to bind)."""
    storage_class = storage.classes.get(claim.storage_class) if claim.storage_class else None
    return storage_class is not None and storage_class.waits_for_first_consumer and not claim.spec.volume_name


def claims_to_bind(claims: Sequence[PodClaim], storage: Storage) -> list[PersistentVolumeClaim]:
    """The pod's unbound claims of a `WaitForFirstConsumer` class, in `spec.volumes` order (once each)."""
    found: dict[str, PersistentVolumeClaim] = {}
    for used in claims:
        claim = used.claim
        if claim is not None and not claim.is_bound and _delayed(claim, storage):
            found.setdefault(claim.key, claim)
    return list(found.values())


def _candidates(claim: PersistentVolumeClaim, storage: Storage) -> list[PersistentVolume]:
    """`FindMatchingVolume`'s tests that do not depend on the node, over the volumes of the claim's class, in the
    order it walks them."""
    request = claim.requested_storage()
    mode = claim.spec.volume_mode or FILESYSTEM
    attributes = claim.spec.volume_attributes_class_name or ""
    found = []
    for name in storage.class_volumes(claim.storage_class):
        volume = storage.volume(name)
        if volume is None or (volume.spec.claim_ref is not None and not volume.bound_to(claim)):
            continue
        spec = volume.spec
        if volume.capacity < request or (spec.volume_mode or FILESYSTEM) != mode:
            continue
        if (spec.volume_attributes_class_name or "") != attributes or volume.metadata.deletion_timestamp is not None:
            continue
        found.append(volume)
    return found


def _eligible(claim: PersistentVolumeClaim, volumes: list[PersistentVolume]) -> list[PersistentVolume]:
    """The volumes free for the claim (not pre-bound to it), smallest first (the first by name among equals)."""
    selector = claim.spec.selector
    wanted = set(claim.spec.access_modes)
    found = [
        v
        for v in volumes
        if v.available
        and (selector is None or selector.matches(v.metadata.labels))
        and wanted <= set(v.spec.access_modes)
    ]
    return sorted(found, key=lambda v: v.capacity)


def _pick(snapshot: Snapshot, volumes: list[PersistentVolume], taken: dict[str, BoolArray]) -> IntArray:
    """Per node, the index of the first of `volumes` that fits it and no earlier claim of the pod took there; -1 for
    none."""
    count = len(snapshot.nodes.names)
    picks: IntArray = np.full(count, -1, dtype=np.int64)
    open_: BoolArray = np.ones(count, dtype=np.bool_)
    for i, volume in enumerate(volumes):
        mask = volume_mask(snapshot, volume)
        fits = open_.copy() if mask is None else open_ & mask
        held = taken.get(volume.metadata.name)
        if held is not None:
            fits &= ~held
        picks[fits] = i
        open_ &= ~fits
        if not open_.any():
            break
    return picks


def provision_mask(snapshot: Snapshot, claim: PersistentVolumeClaim, storage: Storage) -> BoolArray:
    """The nodes the claim's volume may be provisioned for (`checkVolumeProvisions`, without storage capacity): its
    class names a provisioner, and the node matches one of the class's `allowedTopologies` terms (any node when it
    has none)."""
    count = len(snapshot.nodes.names)
    storage_class = storage.classes.get(claim.storage_class)
    if storage_class is None or not storage_class.provisions:
        return np.zeros(count, dtype=np.bool_)
    terms = storage_class.allowed_topologies
    if not terms:
        return np.ones(count, dtype=np.bool_)
    found: BoolArray = np.zeros(count, dtype=np.bool_)
    for term in terms:
        if not term.match_label_expressions:
            continue
        matched: BoolArray = np.ones(count, dtype=np.bool_)
        for expression in term.match_label_expressions:
            requirement = NodeSelectorRequirement(key=expression.key, operator="In", values=expression.values)
            matched &= requirement_mask(snapshot, requirement)
        found |= matched
    return found


@dataclass(frozen=True, slots=True)
class _Choice:
    """One claim to bind: the volumes `picks` indexes, and per node the one it takes (-1: provisioned there)."""

    claim: PersistentVolumeClaim
    volumes: tuple[PersistentVolume, ...]
    picks: IntArray


@dataclass(frozen=True, slots=True)
class Found:
    """`FindPodVolumes` for every node at once: where the claims to bind fit, and what each takes on each node."""

    feasible: BoolArray
    choices: tuple[_Choice, ...]

    def at(self, row: int) -> PodVolumes:
        """What the claims get on the node of `row` (which must be feasible)."""
        bindings = []
        provisions = []
        for choice in self.choices:
            pick = int(choice.picks[row])
            if pick >= 0:
                bindings.append((choice.claim, choice.volumes[pick]))
            else:
                provisions.append(choice.claim)
        return PodVolumes(tuple(bindings), tuple(provisions))


def find_volumes(snapshot: Snapshot, claims: Sequence[PersistentVolumeClaim]) -> Found:
    """Where the claims to bind fit, and with what (see the module docstring)."""
    storage = snapshot.storage
    count = len(snapshot.nodes.names)
    feasible: BoolArray = np.ones(count, dtype=np.bool_)
    choices: list[_Choice] = []
    matching = []
    for claim in claims:
        selected = claim.metadata.annotations.get(ANN_SELECTED_NODE)
        if selected is None:
            matching.append(claim)
            continue
        on: BoolArray = np.zeros(count, dtype=np.bool_)
        row = snapshot.nodes.index.get(selected)
        if row is not None:
            on[row] = True
        feasible &= on & provision_mask(snapshot, claim, storage)
        choices.append(_Choice(claim, (), np.full(count, -1, dtype=np.int64)))
    taken: dict[str, BoolArray] = {}
    for claim in sorted(matching, key=lambda c: c.requested_storage()):
        candidates = _candidates(claim, storage)
        prebound = next((v for v in candidates if v.bound_to(claim)), None)
        volumes = [prebound] if prebound is not None else _eligible(claim, candidates)
        picks = _pick(snapshot, volumes, taken)
        for index in np.unique(picks[picks >= 0]).tolist():
            name = volumes[index].metadata.name
            chosen = picks == index
            taken[name] = taken[name] | chosen if name in taken else chosen
        feasible &= (picks >= 0) | provision_mask(snapshot, claim, storage)
        choices.append(_Choice(claim, tuple(volumes), picks))
    return Found(feasible, tuple(choices))


def _pod_claims_to_bind(pod: PodInfo, storage: Storage) -> list[PersistentVolumeClaim]:
    """The pod's claims to bind, once its PreFilter passes (none otherwise: it fits nowhere anyway)."""
    if not pod.pod.spec.volumes:
        return []
    claims = pod_claims(pod.pod, storage)
    if not claims or claim_problem(pod, claims, storage) is not None:
        return []
    return claims_to_bind(claims, storage)


class ClaimsToBind:
    """VolumeBinding's Filter for the claims to bind, a pod constraint (see the module docstring)."""

    name = "VolumeBinding"

    def filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> NodeVerdict | None:
        claims = _pod_claims_to_bind(pod, snapshot.storage)
        if not claims:
            return None
        feasible = find_volumes(snapshot, claims).feasible
        return NodeVerdict(
            feasible=feasible, reasons=((BIND_CONFLICT, ~feasible),), code=Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        )


@dataclass(slots=True)
class _Reserved:
    """Per pod of a unit: what Reserve gave its claims (for PreBind), and the volumes and claims it assumed."""

    volumes: dict[str, PodVolumes] = field(default_factory=dict)
    assumed: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = field(default_factory=dict)

    def clone(self) -> _Reserved:
        return _Reserved(dict(self.volumes), dict(self.assumed))


class VolumeBinding:
    name = "VolumeBinding"

    def __init__(self) -> None:
        self.claims = ClaimsToBind()
        """The pod constraint for the claims to bind: registered apart (`Profile.pod_constraints`)."""

    def skips(self, pod: PodInfo) -> bool:
        """No volume that uses a claim (upstream's PreFilter returns Skip)."""
        return not any(v.persistent_volume_claim is not None or v.ephemeral is not None for v in pod.pod.spec.volumes)

    def filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> NodeVerdict:
        """The PreFilter's message, or the bound claims' volumes on each node (the claims to bind: `claims`)."""
        count = len(snapshot.nodes.names)
        storage = snapshot.storage
        claims = pod_claims(pod.pod, storage)
        if not claims:
            return NodeVerdict(feasible=np.ones(count, dtype=np.bool_))
        problem = claim_problem(pod, claims, storage)
        if problem is not None:
            return NodeVerdict(
                feasible=np.zeros(count, dtype=np.bool_), code=Code.UNSCHEDULABLE_AND_UNRESOLVABLE, message=problem
            )
        undecided: BoolArray = np.ones(count, dtype=np.bool_)
        conflict: BoolArray = np.zeros(count, dtype=np.bool_)
        missing: BoolArray = np.zeros(count, dtype=np.bool_)
        for used in claims:
            if used.claim is None or not used.claim.is_bound:
                continue
            volume = storage.volume(used.claim.spec.volume_name or "")
            if volume is None:
                missing = undecided.copy()
                break
            fits = volume_mask(snapshot, volume)
            if fits is None:
                continue
            conflict |= undecided & ~fits
            undecided &= fits
        feasible = ~(conflict | missing)
        reasons = tuple((reason, mask) for reason, mask in ((NODE_CONFLICT, conflict), (VOLUME_MISSING, missing)))
        return NodeVerdict(feasible=feasible, reasons=reasons, code=Code.UNSCHEDULABLE_AND_UNRESOLVABLE)

    def reserve(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, row: int) -> Status:
        """`AssumePodVolumes` on the pod's node: what its claims to bind take there, assumed until the pass ends."""
        storage = snapshot.storage
        claims = _pod_claims_to_bind(pod, storage)
        if not claims:
            return SUCCESS
        node = snapshot.nodes.names[row]
        found = find_volumes(snapshot, claims)
        if not found.feasible[row]:
            return error(f'no pod volumes found for node "{node}"')
        volumes = found.at(row)
        assumed_volumes = []
        for claim, volume in volumes.bindings:
            bound = bound_to_claim(volume, claim)
            if bound is not volume:
                storage.assumed.volumes[volume.metadata.name] = bound
                assumed_volumes.append(volume.metadata.name)
        assumed_claims = []
        for claim in volumes.provisions:
            annotated = with_selected_node(claim, node)
            if annotated is not claim:
                storage.assumed.claims[claim.key] = annotated
                assumed_claims.append(claim.key)
        reserved = state.read(self.name, _Reserved) or _Reserved()
        reserved.volumes[pod.key] = volumes
        reserved.assumed[pod.key] = (tuple(assumed_volumes), tuple(assumed_claims))
        state.write(self.name, reserved)
        return SUCCESS

    def unreserve(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, row: int) -> None:
        """`RevertAssumedPodVolumes`: what this pod assumed is free again for the pods placed after it."""
        reserved = state.read(self.name, _Reserved)
        if reserved is None:
            return
        reserved.volumes.pop(pod.key, None)
        names, keys = reserved.assumed.pop(pod.key, ((), ()))
        for name in names:
            snapshot.storage.assumed.volumes.pop(name, None)
        for key in keys:
            snapshot.storage.assumed.claims.pop(key, None)

    def pre_bind(self, state: CycleState, pod: PodInfo, node: str, cluster: Cluster, unit: str) -> None:
        """`BindPodVolumes`: the pod's choices written, and its Binding held until they are bound (the back end)."""
        reserved = state.read(self.name, _Reserved)
        volumes = reserved.volumes.get(pod.key) if reserved is not None else None
        if volumes is not None and (volumes.bindings or volumes.provisions):
            cluster.bind_volumes(pod.pod, node, volumes, unit=unit)

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
        masks = []
        for member in members:
            mask = self.filter(state, member, snapshot).feasible
            to_bind = self.claims.filter(state, member, snapshot)
            masks.append(mask if to_bind is None else mask & to_bind.feasible)
        return PreemptionTerms(masks=np.array(masks))
