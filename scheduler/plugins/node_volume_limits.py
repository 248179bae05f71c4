"""NodeVolumeLimits: a node attaches at most `allocatable.count` volumes of each CSI driver (its CSINode says).

Source: kube-scheduler 1.36 `plugins/nodevolumelimits/csi.go`. A volume is known by its driver and handle: a
bound claim's CSI volume, or for a claim not bound (or bound to a volume that is gone) its class's provisioner
and the claim itself. The volumes of the pods already on the node are counted once each, a volume the new pod
shares with one of them is not counted again, and the node is rejected, UNSCHEDULABLE, when a driver would go over
its limit (`node(s) exceed max volume count`). The limit is the CSINode's, else the node's legacy
`attachable-volumes-csi-<driver>` allocatable.

The in-tree sources kube-scheduler counts only through their CSI translation (`awsElasticBlockStore`,
`gcePersistentDisk`, ... on a node whose CSINode lists the plugin as migrated) are counted for the pods already
on a node, known by their source; a pod that asks for one, inline or through its claim's volume, waits with
`phalanx-scheduler does not support FIELD`, as does one with a volume source Kubernetes 1.36 does not define:
its limits cannot be counted, and it is never placed as if the volume were absent.

Divergences: VolumeAttachments are not read (kube-scheduler 1.36 also counts a volume still attached to the node
by no pod), and the alpha VolumeLimitScaling checks are not made. Preemption only places a member where its
volumes fit without removing pods (`preemption_terms`): it never preempts to free attach slots.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Callable, Sequence

import numpy as np

from scheduler.api.csi import ANN_MIGRATED_PLUGINS, CSINode
from scheduler.api.persistent_volume import MIGRATED_SOURCES
from scheduler.api.persistent_volume_claim import PersistentVolumeClaim
from scheduler.api.pod_volume import SOURCES, Volume, owned_by
from scheduler.api.quantity import parse_quantity
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.feasibility import NEUTRAL_VOLUMES
from scheduler.framework.interfaces import NodeVerdict, PreemptionTerms, as_it_stands
from scheduler.framework.pod_info import PodInfo
from scheduler.framework.snapshot import BoolArray, Snapshot
from scheduler.framework.status import Code
from scheduler.framework.storage import Storage, pod_claims, prune_volumes, volumes_on

REASON = "node(s) exceed max volume count"
LIMIT_PREFIX = "attachable-volumes-csi-"
RESOURCE_NAME_LIMIT = 63
IN_TREE_PLUGINS: dict[str, str] = {
    "awsElasticBlockStore": "kubernetes.io/aws-ebs",
    "gcePersistentDisk": "kubernetes.io/gce-pd",
    "azureDisk": "kubernetes.io/azure-disk",
    "azureFile": "kubernetes.io/azure-file",
    "cinder": "kubernetes.io/cinder",
    "vsphereVolume": "kubernetes.io/vsphere-volume",
    "portworxVolume": "kubernetes.io/portworx-volume",
}
"""Each source of `MIGRATED_SOURCES` and the in-tree plugin name a CSINode lists once it is migrated."""
MIGRATED_PROVISIONERS: dict[str, str] = {IN_TREE_PLUGINS[source]: driver for source, driver in MIGRATED_SOURCES.items()}

VolumeId = tuple[str, str]
"""(driver, unique volume name)."""
UNSUPPORTED = ("", "")


def limit_key(driver: str) -> str:
    """`volumeutil.GetCSIAttachLimitKey`: the resource name of a driver's attach limit."""
    if len(LIMIT_PREFIX) + len(driver) >= RESOURCE_NAME_LIMIT:
        return LIMIT_PREFIX + driver[:23] + hashlib.sha1(driver.encode()).hexdigest()[:16]  # upstream hashes with SHA-1
    return LIMIT_PREFIX + driver


def unsupported_volume(volume: Volume, index: int) -> str | None:
    """The field of `spec.volumes[index]` whose attach limit cannot be counted, or None."""
    for source in volume.sources():
        if source in MIGRATED_SOURCES or source not in SOURCES:
            return f"spec.volumes[{index}].{source}"
    return None


def _source(volume_source: object) -> str:
    return json.dumps(volume_source.model_dump(mode="json") if hasattr(volume_source, "model_dump") else volume_source)


def in_tree_volume(sources: dict[str, object], csi_node: CSINode | None) -> VolumeId | None:
    """An in-tree source counted against the CSI driver it is migrated to, when the node says it is migrated."""
    migrated = set((csi_node.metadata.annotations.get(ANN_MIGRATED_PLUGINS, "") if csi_node else "").split(","))
    for source, value in sources.items():
        if value is not None and source in MIGRATED_SOURCES and IN_TREE_PLUGINS[source] in migrated:
            driver = MIGRATED_SOURCES[source]
            return driver, f"{driver}/{source}:{_source(value)}"
    return None


def claim_volume(claim: PersistentVolumeClaim, storage: Storage, csi_node: CSINode | None) -> VolumeId | None:
    """The driver and unique name a claim's volume is counted by (`getCSIDriverInfo`); None: not counted;
    `UNSUPPORTED`: bound to an in-tree volume this plugin cannot count for a new pod."""
    volume = storage.volumes.get(claim.spec.volume_name) if claim.spec.volume_name else None
    if volume is not None:
        if volume.spec.csi is not None:
            return volume.spec.csi.driver, f"{volume.spec.csi.driver}/{volume.spec.csi.volume_handle}"
        extra = volume.spec.model_extra or {}
        if volume.migrated_source() is None:
            return None
        return in_tree_volume(extra, csi_node) or UNSUPPORTED
    class_name = claim.storage_class
    storage_class = storage.classes.get(class_name) if class_name else None
    if storage_class is None:
        return None
    driver = MIGRATED_PROVISIONERS.get(storage_class.provisioner, storage_class.provisioner)
    return driver, f"{driver}/~claim/{claim.key}"


class NodeVolumeLimits:
    name = "NodeVolumeLimits"

    def skips(self, pod: PodInfo) -> bool:
        """No volume that could be attached (or that could not be counted) to check."""
        return all(NEUTRAL_VOLUMES.issuperset(v.sources()) for v in pod.pod.spec.volumes)

    def filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> NodeVerdict:
        names = snapshot.nodes.names
        count = len(names)
        feasible: BoolArray = np.ones(count, dtype=np.bool_)
        volumes = pod.pod.spec.volumes
        if not volumes:
            return NodeVerdict(feasible=feasible)
        for index, volume in enumerate(volumes):
            field = unsupported_volume(volume, index)
            if field is not None:
                return _unsupported(count, field)
        storage = snapshot.storage
        wanted: dict[str, str] = {}
        for used in pod_claims(pod.pod, storage):
            if used.claim is None:
                continue  # VolumeBinding says so
            found = claim_volume(used.claim, storage, None)
            if found == UNSUPPORTED:
                bound = storage.volumes[used.claim.spec.volume_name or ""]
                return _unsupported(count, f"spec.{bound.migrated_source()} of PersistentVolume {bound.metadata.name}")
            if found is not None:
                wanted[found[1]] = found[0]
        if not wanted:
            return NodeVerdict(feasible=feasible)
        drivers = set(wanted.values())
        for row, name in enumerate(names):
            limits = _limits(snapshot, row, storage.csi_nodes.get(name), drivers)
            if limits:
                feasible[row] = _fits(wanted, limits, _attached(snapshot, row, storage.csi_nodes.get(name)))
        if count == len(snapshot.versions):
            prune_volumes(snapshot.indexes, snapshot.versions)
        return NodeVerdict(feasible=feasible, reasons=((REASON, ~feasible),), code=Code.UNSCHEDULABLE)

    def preemption_terms(
        self,
        state: CycleState,
        members: Sequence[PodInfo],
        snapshot: Snapshot,
        removable: Callable[[PodInfo], bool],
    ) -> PreemptionTerms:
        """Where each member's volumes fit now (see the module docstring)."""
        if not any(m.pod.spec.volumes for m in members):
            return PreemptionTerms()
        return as_it_stands(self.filter, state, members, snapshot)


def _unsupported(count: int, field: str) -> NodeVerdict:
    return NodeVerdict(
        feasible=np.zeros(count, dtype=np.bool_),
        code=Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        message=f"phalanx-scheduler does not support {field}",
    )


def _limits(snapshot: Snapshot, row: int, csi_node: CSINode | None, drivers: set[str]) -> dict[str, int]:
    """`getVolumeLimits` for `drivers`: the node's legacy allocatable limits, overridden by its CSINode's."""
    limits: dict[str, int] = {}
    allocatable = snapshot.nodes.nodes[row].status.allocatable
    if allocatable:
        for driver in drivers:
            value = allocatable.get(limit_key(driver))
            if value is not None:
                limits[driver] = int(parse_quantity(value))
    if csi_node is not None:
        limits.update((d, c) for d, c in csi_node.limits().items() if d in drivers)
    return limits


def _fits(wanted: dict[str, str], limits: dict[str, int], attached: dict[str, str]) -> bool:
    """Whether the volumes `wanted` (unique name -> driver) that are not `attached` yet keep every driver within
    its limit."""
    new = Counter(driver for unique, driver in wanted.items() if unique not in attached)
    if not new:
        return True
    used = Counter(attached.values())
    return all(used[driver] + count <= limits[driver] for driver, count in new.items() if driver in limits)


def _attached(snapshot: Snapshot, row: int, csi_node: CSINode | None) -> dict[str, str]:
    """Unique volume name -> driver, for the volumes of the pods already on the node (`filterAttachableVolumes`
    of each): a claim that is gone, or an ephemeral one its pod does not own, is not counted."""
    on_node = volumes_on(snapshot.indexes, snapshot.running[row], int(snapshot.versions[row]))
    storage = snapshot.storage
    attached: dict[str, str] = {}
    for owned, pairs in ((False, on_node.claims), (True, on_node.ephemeral)):
        for info, key in pairs:
            claim = storage.claims.get(key)
            if claim is None:
                continue
            meta = info.pod.metadata
            if owned and not owned_by(claim.metadata.owner_references, meta.name, meta.uid):
                continue
            found = claim_volume(claim, storage, csi_node)
            if found is not None and found != UNSUPPORTED:
                attached[found[1]] = found[0]
    for _, volume in on_node.inline:
        found = in_tree_volume({**(volume.model_extra or {}), **_declared(volume)}, csi_node)
        if found is not None:
            attached[found[1]] = found[0]
    return attached


def _declared(volume: Volume) -> dict[str, object]:
    """The in-tree sources `Volume` declares, by wire name."""
    return {"gcePersistentDisk": volume.gce_persistent_disk, "awsElasticBlockStore": volume.aws_elastic_block_store}
