"""Storage as a pass sees it: claims, volumes, classes and CSINodes, and which claims the pods on each node use.

The volume plugins (VolumeBinding, VolumeRestrictions, VolumeZone, NodeVolumeLimits) read the same tables and
resolve a pod's volumes to claims the same way, as kube-scheduler's listers and `ephemeral.VolumeClaimName` do.
The tables are the back end's own (a few hundred objects where a cluster has thousands of pods), shared with the
snapshot, never copied. What the pods of a node use is kept per row version (`Snapshot.versions`), so a filter
over many nodes reads each node's pods once, and again only when that node's pods change (`volumes_on`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from scheduler.api.csi import CSINode
from scheduler.api.persistent_volume import MIGRATED_SOURCES, PersistentVolume
from scheduler.api.persistent_volume_claim import PersistentVolumeClaim
from scheduler.api.pod import Pod
from scheduler.api.pod_volume import Volume, claim_name
from scheduler.api.storage_class import StorageClass
from scheduler.framework.pod_info import PodInfo

if TYPE_CHECKING:
    from scheduler.framework.snapshot import IntArray

INLINE_CONFLICTS = ("gce_persistent_disk", "aws_elastic_block_store", "iscsi", "rbd")
"""The inline sources two pods on one node may conflict over (VolumeRestrictions' `needsRestrictionsCheck`)."""


@dataclass(frozen=True, slots=True)
class PodVolumes:
    """What a pod's unbound WaitForFirstConsumer claims get on the node it was given (kube-scheduler's
    `PodVolumes`), for PreBind to write: each claim bound to the static volume chosen for it, and the claims to be
    provisioned on that node. The objects are as the pass saw them (their resourceVersions guard the writes)."""

    bindings: tuple[tuple[PersistentVolumeClaim, PersistentVolume], ...] = ()
    provisions: tuple[PersistentVolumeClaim, ...] = ()


@dataclass(slots=True)
class Assumed:
    """kube-scheduler's assume cache, for one pass: each volume Reserve gave a claim, shown with its claimRef, and
    each claim it chose a node to provision on, shown with `volume.kubernetes.io/selected-node`, as PreBind will
    write them. So no other pod placed later in the pass is given the same volume. The next pass reads the back
    end's view, which shows those writes while they are in flight."""

    volumes: dict[str, PersistentVolume] = field(default_factory=dict)
    claims: dict[str, PersistentVolumeClaim] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Storage:
    """The storage objects of one pass: claims keyed `namespace/name`, the others by name (a CSINode by its
    node's), and what the pass assumed of them (`claim`, `volume`)."""

    claims: Mapping[str, PersistentVolumeClaim] = field(default_factory=dict)
    volumes: Mapping[str, PersistentVolume] = field(default_factory=dict)
    classes: Mapping[str, StorageClass] = field(default_factory=dict)
    csi_nodes: Mapping[str, CSINode] = field(default_factory=dict)
    assumed: Assumed = field(default_factory=Assumed)
    by_class: dict[str, tuple[str, ...]] = field(default_factory=dict, compare=False, repr=False)
    """The volumes of each class by name, made on first use (`class_volumes`)."""

    def sighting(self) -> tuple[tuple[object, ...], ...]:
        """The objects as they are now, for the queue to tell that one was added, removed or replaced (every
        back end replaces an object it changes)."""
        return tuple(tuple(table.values()) for table in (self.claims, self.volumes, self.classes, self.csi_nodes))

    def claim(self, key: str) -> PersistentVolumeClaim | None:
        """The claim `namespace/name`, as this pass assumed it."""
        return self.assumed.claims.get(key) or self.claims.get(key)

    def volume(self, name: str) -> PersistentVolume | None:
        """The volume, as this pass assumed it."""
        return self.assumed.volumes.get(name) or self.volumes.get(name)

    def class_volumes(self, class_name: str) -> tuple[str, ...]:
        """The names of the volumes of a class, in order (assuming a volume never changes its class)."""
        if not self.by_class and self.volumes:
            grouped: dict[str, list[str]] = {}
            for name in sorted(self.volumes):
                grouped.setdefault(self.volumes[name].storage_class, []).append(name)
            self.by_class.update((name, tuple(names)) for name, names in grouped.items())
        return self.by_class.get(class_name, ())


@dataclass(frozen=True, slots=True)
class PodClaim:
    """A volume of a pod that uses a claim: `spec.volumes[index]`, the claim's name and the claim (None: absent)."""

    index: int
    volume: Volume
    name: str
    ephemeral: bool
    claim: PersistentVolumeClaim | None


def pod_claims(pod: Pod, storage: Storage) -> list[PodClaim]:
    """The pod's volumes that use a claim, in `spec.volumes` order."""
    namespace = pod.metadata.namespace or "default"
    found = []
    for index, volume in enumerate(pod.spec.volumes):
        name = claim_name(pod.metadata.name, volume)
        if name is not None:
            claim = storage.claim(f"{namespace}/{name}")
            found.append(PodClaim(index, volume, name, volume.ephemeral is not None, claim))
    return found


@dataclass(frozen=True, slots=True)
class NodeVolumes:
    """What the pods on one node use: `(pod, claim key)` for each claim volume (`ephemeral` for the generic
    ephemeral ones), and `(pod, volume)` for each inline volume that may conflict (`INLINE_CONFLICTS`) or is
    counted against a CSI driver it is migrated to (`MIGRATED_SOURCES`)."""

    claims: tuple[tuple[PodInfo, str], ...] = ()
    ephemeral: tuple[tuple[PodInfo, str], ...] = ()
    inline: tuple[tuple[PodInfo, Volume], ...] = ()


NO_VOLUMES = NodeVolumes()
ROWS_KEY = "storage.NodeVolumes"
"""This module's entry in `Snapshot.indexes`: NodeVolumes by row version."""


def node_volumes(pods: list[PodInfo]) -> NodeVolumes:
    claims: list[tuple[PodInfo, str]] = []
    ephemeral: list[tuple[PodInfo, str]] = []
    inline: list[tuple[PodInfo, Volume]] = []
    for info in pods:
        volumes = info.pod.spec.volumes
        if not volumes:
            continue
        for volume in volumes:
            if volume.persistent_volume_claim is not None:
                claims.append((info, f"{info.namespace}/{volume.persistent_volume_claim.claim_name}"))
            elif volume.ephemeral is not None:
                ephemeral.append((info, f"{info.namespace}/{info.pod.metadata.name}-{volume.name}"))
            elif any(getattr(volume, source) is not None for source in INLINE_CONFLICTS) or (
                volume.model_extra and any(key in MIGRATED_SOURCES for key in volume.model_extra)
            ):
                inline.append((info, volume))
    if not (claims or ephemeral or inline):
        return NO_VOLUMES
    return NodeVolumes(tuple(claims), tuple(ephemeral), tuple(inline))


def volumes_on(indexes: dict[object, object], row_pods: list[PodInfo], version: int) -> NodeVolumes:
    """`node_volumes` of a row, kept in `indexes` (a snapshot's) by the row's version: a row of the same version
    holds the same pods (`Snapshot.versions`). The entries of rows replaced since are dropped once they are as many
    as the kept ones."""
    kept = indexes.get(ROWS_KEY)
    if not isinstance(kept, dict):
        kept = indexes[ROWS_KEY] = {}
    found = kept.get(version)
    if found is None:
        found = kept[version] = node_volumes(row_pods)
    return found


def prune_volumes(indexes: dict[object, object], versions: IntArray) -> None:
    """Forget the rows of `indexes` whose version is not among `versions` (a snapshot's), once they dominate."""
    kept = indexes.get(ROWS_KEY)
    if not isinstance(kept, dict):
        return
    current = set(versions.tolist())
    if len(kept) > 2 * len(current) + 64:
        for version in [v for v in kept if v not in current]:
            del kept[version]
