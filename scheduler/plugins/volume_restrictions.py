"""VolumeRestrictions: a ReadWriteOncePod claim serves one pod, and an inline disk one writer per node.

Source: kube-scheduler 1.36 `plugins/volumerestrictions/volume_restrictions.go`. Its PreFilter needs every claim
the pod names directly (`persistentVolumeClaim`) to exist, said once for the pod; a claim with the
`ReadWriteOncePod` access mode already used by a pod on any node rejects every node. Its Filter rejects a node
where a pod uses the same inline disk (GCE PD unless both read-only, AWS EBS, iSCSI unless both read-only, Ceph
RBD sharing a monitor, pool and image unless both read-only). Both rejections are UNSCHEDULABLE: preempting the
pod that holds the claim or the disk frees it (`preemption_terms`, on the holder's node, as kube-scheduler's
preemption removes victims node by node).

A pod placed on one node changes the verdict on every other (the claim is then in use), so this is a pod
constraint (`Profile.pod_constraints`), asked afresh for each pod, and None for a pod without such volumes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from scheduler.api.persistent_volume_claim import READ_WRITE_ONCE_POD
from scheduler.api.pod_volume import Volume
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import Exclusion, NodeVerdict, PreemptionTerms
from scheduler.framework.pod_info import PodInfo
from scheduler.framework.snapshot import BoolArray, Snapshot
from scheduler.framework.status import Code
from scheduler.framework.storage import INLINE_CONFLICTS, volumes_on

DISK_CONFLICT = "node(s) had no available disk"
READ_WRITE_ONCE_POD_CONFLICT = (
    "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by another pod"
)


def disk_conflict(volume: Volume, other: Volume) -> bool:
    """`isVolumeConflict` for one pair of volumes."""
    if volume.gce_persistent_disk is not None and other.gce_persistent_disk is not None:
        a, b = volume.gce_persistent_disk, other.gce_persistent_disk
        if a.pd_name == b.pd_name and not (a.read_only and b.read_only):
            return True
    ebs, other_ebs = volume.aws_elastic_block_store, other.aws_elastic_block_store
    if ebs is not None and other_ebs is not None and ebs.volume_id == other_ebs.volume_id:
        return True
    if volume.iscsi is not None and other.iscsi is not None:
        c, d = volume.iscsi, other.iscsi
        if c.iqn == d.iqn and not (c.read_only and d.read_only):
            return True
    if volume.rbd is not None and other.rbd is not None:
        e, f = volume.rbd, other.rbd
        if (
            set(e.monitors) & set(f.monitors)
            and e.pool == f.pool
            and e.image == f.image
            and not (e.read_only and f.read_only)
        ):
            return True
    return False


def inline_disks(pod: PodInfo) -> list[Volume]:
    return [v for v in pod.pod.spec.volumes if any(getattr(v, source) is not None for source in INLINE_CONFLICTS)]


class VolumeRestrictions:
    name = "VolumeRestrictions"

    def filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> NodeVerdict | None:
        if not pod.pod.spec.volumes:
            return None
        count = len(snapshot.running)
        wanted, missing = self._once_pod_claims(pod, snapshot)
        if missing is not None:
            return NodeVerdict(
                feasible=np.zeros(count, dtype=np.bool_),
                code=Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                message=f'persistentvolumeclaim "{missing}" not found',
            )
        disks = inline_disks(pod)
        if not wanted and not disks:
            return None
        taken: BoolArray = np.zeros(count, dtype=np.bool_)
        if disks:
            taken = np.array([bool(self._disk_holders(snapshot, row, disks)) for row in range(count)], dtype=np.bool_)
        in_use: BoolArray = np.zeros(count, dtype=np.bool_)
        if wanted and self._claim_holders(snapshot, wanted):
            in_use = ~taken
        reasons = ((DISK_CONFLICT, taken), (READ_WRITE_ONCE_POD_CONFLICT, in_use))
        return NodeVerdict(feasible=~(taken | in_use), reasons=reasons, code=Code.UNSCHEDULABLE)

    @staticmethod
    def _once_pod_claims(pod: PodInfo, snapshot: Snapshot) -> tuple[set[str], str | None]:
        """The keys of the pod's ReadWriteOncePod claims, or the name of a claim that does not exist."""
        wanted: set[str] = set()
        for volume in pod.pod.spec.volumes:
            if volume.persistent_volume_claim is None:
                continue
            name = volume.persistent_volume_claim.claim_name
            claim = snapshot.storage.claims.get(f"{pod.namespace}/{name}")
            if claim is None:
                return wanted, name
            if READ_WRITE_ONCE_POD in claim.spec.access_modes:
                wanted.add(claim.key)
        return wanted, None

    @staticmethod
    def _disk_holders(snapshot: Snapshot, row: int, disks: list[Volume]) -> list[PodInfo]:
        """The pods on the node whose inline disks conflict with one of `disks`."""
        on_node = volumes_on(snapshot.indexes, snapshot.running[row], int(snapshot.versions[row]))
        return [info for info, volume in on_node.inline if any(disk_conflict(d, volume) for d in disks)]

    @staticmethod
    def _claim_holders(snapshot: Snapshot, claims: set[str]) -> dict[str, list[tuple[int, PodInfo]]]:
        """Claim key -> the (row, pod) on a node that use it, for `claims` that some pod uses (`IsPVCUsedByPods`)."""
        holders: dict[str, list[tuple[int, PodInfo]]] = {}
        for row, pods in enumerate(snapshot.running):
            for info, key in volumes_on(snapshot.indexes, pods, int(snapshot.versions[row])).claims:
                if key in claims:
                    holders.setdefault(key, []).append((row, info))
        return holders

    def preemption_terms(
        self,
        state: CycleState,
        members: Sequence[PodInfo],
        snapshot: Snapshot,
        removable: Callable[[PodInfo], bool],
    ) -> PreemptionTerms:
        """A member whose ReadWriteOncePod claim is in use may only go where its holders run, once they are gone;
        an inline disk's holders on a node must go for a member that needs it there, and members that need one
        never share a node."""
        if not any(m.pod.spec.volumes for m in members):
            return PreemptionTerms()
        count = len(snapshot.running)
        masks: BoolArray = np.ones((len(members), count), dtype=np.bool_)
        exclusions: list[Exclusion] = []
        for i, member in enumerate(members):
            if not member.pod.spec.volumes:
                continue
            wanted, missing = self._once_pod_claims(member, snapshot)
            if missing is not None:
                masks[i] = False
                continue
            for key, holders in self._claim_holders(snapshot, wanted).items():
                rows = np.zeros(count, dtype=np.bool_)
                rows[[row for row, _ in holders]] = True
                masks[i] &= rows
                needs = tuple(j == i or key in self._once_pod_claims(m, snapshot)[0] for j, m in enumerate(members))
                exclusions.append(Exclusion(needs=needs, holders=frozenset(p.key for _, p in holders), capacity=1))
            for disk in inline_disks(member):
                holders_of = frozenset(p.key for row in range(count) for p in self._disk_holders(snapshot, row, [disk]))
                needs = tuple(
                    j == i or any(disk_conflict(disk, other) for other in inline_disks(m))
                    for j, m in enumerate(members)
                )
                exclusions.append(Exclusion(needs=needs, holders=holders_of, capacity=1))
        unique = tuple(dict.fromkeys(exclusions))
        return PreemptionTerms(masks=masks, exclusions=unique)
