"""A scenario: manifests read, admitted and checked, ready to become an in-memory cluster.

Everything is validated before anything runs, so bad input is one message naming the file, the
document and the field, and nothing is half-applied. Pending objects pass through the webhook's
admission rules, as a CREATE on a real cluster would (a pending gang member gets our gate, a denial
is an input error with the webhook's text). Pods that are already bound were admitted long ago on
the cluster they were dumped from, so they are taken as they are; so is every object that carries a
`resourceVersion` (read from a cluster): the API server never re-validates a stored object, so one
written before the webhook was installed may hold a value the webhook would now refuse, or name a
PriorityClass deleted since, and the scheduler must cope with it there as here (it keeps the stored
`spec.priority`, ignores the bad value and warns).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from scheduler.api.config import SchedulerConfiguration
from scheduler.api.manifest import ManifestError, Source, load_manifests
from scheduler.api.meta import ApiModel
from scheduler.api.namespace import Namespace
from scheduler.api.node import Node
from scheduler.api.pdb import PodDisruptionBudget
from scheduler.api.persistent_volume_claim import PersistentVolumeClaim
from scheduler.api.pod import Pod
from scheduler.api.pod_group import PodGroup
from scheduler.api.priority_class import PriorityClass, PriorityClassNotFound
from scheduler.api.queue import Queue
from scheduler.api.resource_claim import ResourceClaim, ResourceClaimTemplate
from scheduler.api.storage_class import StorageClass
from scheduler.api.workload import Workload
from scheduler.framework.cluster import ClusterObjects, device_table, storage_table
from scheduler.framework.snapshot_builder import effective_priority
from webhook.admission import admit
from webhook.errors import Denied
from webhook.rules.lookups import MemoryLookups
from webhook.rules.pod import PodSettings

Progress = Callable[[int, int], None]


@dataclass(slots=True)
class Scenario:
    objects: ClusterObjects
    config: SchedulerConfiguration
    warnings: list[str]


def _where(obj: ApiModel, source: Source) -> str:
    return source.describe(obj.to_json())


def _config(loaded: list[tuple[ApiModel, Source]], config_path: str | None) -> SchedulerConfiguration:
    """`--config` wins; else at most one SchedulerConfiguration document in the scenario."""
    if config_path is not None:
        given = [o for o, _ in load_manifests([config_path]) if isinstance(o, SchedulerConfiguration)]
        if len(given) != 1:
            raise ManifestError(f"{config_path}: expected exactly one SchedulerConfiguration document")
        return given[0]
    inline = [(o, s) for o, s in loaded if isinstance(o, SchedulerConfiguration)]
    if len(inline) > 1:
        raise ManifestError(f"{_where(*inline[1])}: kind: Duplicate value: only one SchedulerConfiguration allowed")
    return inline[0][0] if inline else SchedulerConfiguration()


def load_scenario(
    paths: Sequence[str], now: datetime, config_path: str | None = None, progress: Progress | None = None
) -> Scenario:
    """Read, admit and check every object; raises `ManifestError` on the first bad one."""
    loaded = load_manifests(paths)
    config = _config(loaded, config_path)
    lookups = MemoryLookups.of(o for o, _ in loaded)
    settings = PodSettings(scheduler_name=config.scheduler_name, gate_name=config.gate_name)
    objects = ClusterObjects()
    warnings: list[str] = []
    stored: set[tuple[type, str]] = set()
    for done, (obj, source) in enumerate(loaded, start=1):
        if progress is not None and done % 1000 == 0:
            progress(done, len(loaded))
        if isinstance(obj, SchedulerConfiguration):
            continue
        taken_as_stored = _stored(obj)
        if not taken_as_stored:
            try:
                admitted = admit(obj, lookups, settings)
            except Denied as err:
                raise ManifestError(f"{_where(obj, source)}: {err}") from None
            obj = admitted.object
            warnings.extend(f"{_where(obj, source)}: {w}" for w in admitted.warnings)
        if isinstance(obj, PersistentVolumeClaim) and not taken_as_stored:
            _default_class(obj, [o for o, _ in loaded if isinstance(o, StorageClass)])
        key = _store(objects, obj, now)
        if taken_as_stored:
            stored.add((type(obj), key))
        else:
            stored.discard((type(obj), key))
    sources = {o.key: s for o, s in loaded if isinstance(o, Pod | PodGroup)}
    _check_priorities(objects, sources, stored)
    return Scenario(objects, config, warnings)


def _stored(obj: ApiModel) -> bool:
    """Objects a cluster already holds, which admission would not see again (see the module doc)."""
    if isinstance(obj, Pod) and obj.spec.node_name:
        return True
    return getattr(obj, "metadata", None) is not None and obj.metadata.resource_version is not None  # type: ignore[attr-defined]


def _store(objects: ClusterObjects, obj: ApiModel, now: datetime) -> str:
    """File the object under its key (returned); a later document with the same identity replaces an earlier one."""
    meta = obj.metadata  # type: ignore[attr-defined]
    namespaced = (Pod, PodGroup, Workload, PodDisruptionBudget, PersistentVolumeClaim)
    if isinstance(obj, (*namespaced, ResourceClaim, ResourceClaimTemplate)) and not meta.namespace:
        meta.namespace = "default"
    if meta.creation_timestamp is None:
        meta.creation_timestamp = now
    if meta.uid is None:
        meta.uid = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{type(obj).__name__}/{meta.namespace}/{meta.name}"))
    key = f"{meta.namespace}/{meta.name}" if meta.namespace else meta.name
    if isinstance(obj, Pod):
        if obj.spec.node_name and obj.scheduled_time() is None:
            obj.status.start_time = now
        objects.pods[key] = obj
    elif isinstance(obj, Node):
        objects.nodes[key] = obj
    elif isinstance(obj, PodGroup):
        objects.pod_groups[key] = obj
    elif isinstance(obj, Workload):
        objects.workloads[key] = obj
    elif isinstance(obj, Queue):
        objects.queues[key] = obj
    elif isinstance(obj, PriorityClass):
        objects.priority_classes[key] = obj
    elif isinstance(obj, PodDisruptionBudget):
        objects.pdbs[key] = obj
    elif isinstance(obj, Namespace):
        objects.namespaces[key] = obj
    elif (table := storage_table(objects, obj)) is not None or (table := device_table(objects, obj)) is not None:
        table[key] = obj
    return key


def _default_class(claim: PersistentVolumeClaim, classes: list[StorageClass]) -> None:
    """What the DefaultStorageClass admission plugin does to a new claim that names no class: it gets the default
    class (the newest, when several are marked)."""
    if claim.spec.storage_class_name is not None or claim.storage_class:
        return
    defaults = [c for c in classes if c.is_default]
    if defaults:
        newest = max(
            defaults,
            key=lambda c: (c.metadata.creation_timestamp is not None, c.metadata.creation_timestamp, c.metadata.name),
        )
        claim.spec.storage_class_name = newest.metadata.name


def _check_priorities(objects: ClusterObjects, sources: dict[str, Source], stored: set[tuple[type, str]]) -> None:
    """A hand-written pod or PodGroup naming a PriorityClass that the scenario lacks is an input error.

    A stored one is not: its class may have been deleted after its priority was resolved, and it keeps
    that priority (see `effective_priority`); the scheduler warns about the missing class instead.
    """
    for key, group in objects.pod_groups.items():
        name = group.spec.priority_class_name
        if name and name not in objects.priority_classes and (PodGroup, key) not in stored:
            raise ManifestError(
                f"{sources[key].describe(group.to_json())}: spec.priorityClassName: Not found: "
                f'"{name}": no PriorityClass with name {name} was found'
            )
    for key, pod in objects.pods.items():
        if (Pod, key) in stored:
            continue
        try:
            effective_priority(pod, objects.pod_groups, objects.priority_classes)
            name = pod.spec.priority_class_name
            if name and name not in objects.priority_classes and pod.pod_group_name is None:
                raise PriorityClassNotFound(name)
        except PriorityClassNotFound as err:
            raise ManifestError(
                f'{sources[key].describe(pod.to_json())}: spec.priorityClassName: Not found: "{err.name}": {err}'
            ) from None
