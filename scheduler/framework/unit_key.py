"""What the scheduler knows a scheduling unit by: the queue, the pending pods, the reasons, the preemptions.

A lone pod's unit key is the pod's own key (`namespace/name`), a PodGroup's is `podgroup/namespace/name`. A pod
and a PodGroup may share a name in a namespace (a controller may name its group after a pod it also runs alone),
and they are two units: with one key for both, the lone pod was taken for a member of the group, waited in the
group's backoff and was spared or taken as one of its victims. A pod's key has a single `/`, so no pod's key is
ever a group's unit key. Messages and Events name the object (`SchedulingUnit.name`), not the unit key.
"""

from __future__ import annotations

GROUP_PREFIX = "podgroup/"


def group_unit(group_key: str) -> str:
    """The unit key of the PodGroup `group_key` (`namespace/name`)."""
    return GROUP_PREFIX + group_key


def unit_key(group_key: str | None, pod_key: str) -> str:
    """The unit key of a pod: its PodGroup's, or its own when it has none."""
    return group_unit(group_key) if group_key is not None else pod_key


def group_of(unit: str) -> str | None:
    """The PodGroup key (`namespace/name`) of a group's unit key; None for a lone pod's."""
    return unit[len(GROUP_PREFIX) :] if unit.startswith(GROUP_PREFIX) else None


def object_name(unit: str) -> str:
    """The `namespace/name` of the PodGroup or pod a unit key stands for, as messages name it."""
    return group_of(unit) or unit
