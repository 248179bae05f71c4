"""The cluster as one replica's informers hold it, for an answer of the served API.

Each informer's table is taken as `Informer.items()` gives it (one `dict.copy` under its lock: ~1 ms at 100,000
pods), so the objects are the caches' own, shared and never copied; the watches go on meanwhile. The tables are those
a scheduling pass reads, DRA's included (DeviceClasses, ResourceSlices, ResourceClaims), so the dry run allocates
devices as the scheduler does. The writes this replica has in flight are not overlaid (only the scheduling pass reads
`KubeView.objects()`, which keeps state between calls): a Binding, a claim's allocation or a victim's deletion the
watch has not delivered yet is not seen, for the few milliseconds until it is. The pods cache's resourceVersion says
how fresh the answer is.
"""

from __future__ import annotations

from scheduler.api.pod_group import PodGroup
from scheduler.cluster.kube.view import KubeView
from scheduler.framework.cluster import ClusterObjects
from scheduler.serve.answers import Seen


def seen(view: KubeView) -> Seen:
    version = view.pods.resource_version
    groups: dict[str, PodGroup] = {}
    if view.native_pod_groups is not None:
        groups.update(view.native_pod_groups.items())
    groups.update(view.pod_groups.items())  # ours wins a name both use, as the scheduler's view has it
    objects = ClusterObjects(
        nodes=view.nodes.items(),
        pods=view.pods.items(),
        pod_groups=groups,
        workloads=view.workloads.items(),
        queues=view.queues.items(),
        priority_classes=view.priority_classes.items(),
        pdbs=view.pdbs.items(),
        persistent_volume_claims=view.claims.items(),
        persistent_volumes=view.volumes.items(),
        storage_classes=view.storage_classes.items(),
        csi_nodes=view.csi_nodes.items(),
        device_classes=view.device_classes.items(),
        resource_slices=view.resource_slices.items(),
        resource_claims=view.resource_claims.items(),
        namespaces=view.namespaces.items(),
    )
    return Seen(objects, version)
