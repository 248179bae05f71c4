"""A cluster's pods filed as `explain` and `status` read them: by unit, the units waiting for this scheduler (and
those of them nominated to a node), and the bound pods being deleted; kept from one read of the pods to the next by
difference.

`units_of` needs every pod's unit and which units have a pod this scheduler has to place, `in_flight` the pods
being deleted and the units with nominated pods: found in every pod, that is a walk of every pod per answer. The
served API reads the same objects every time (the informers' own, replaced when they change, never changed in
place), so an index kept between answers compares the table it is given with the last by identity and files again
only the pods that differ. Built from nothing, it is that walk.
"""

from __future__ import annotations

from scheduler.api.config import SchedulerConfiguration
from scheduler.api.pod import Pod
from scheduler.framework.cluster import unit_of
from scheduler.framework.runner import DEFAULT_SCHEDULER
from scheduler.framework.unit_key import group_of


def is_ours(pod: Pod, config: SchedulerConfiguration) -> bool:
    return (pod.spec.scheduler_name or DEFAULT_SCHEDULER) == config.scheduler_name


def waits_for_us(pod: Pod, config: SchedulerConfiguration) -> bool:
    """Not bound, not being deleted, and placed by this scheduler: its unit is pending."""
    return not pod.spec.node_name and pod.metadata.deletion_timestamp is None and is_ours(pod, config)


class PodIndex:
    """The pods of one table (`refresh`), filed; the objects are the table's, never copied. A lone pod is its own
    unit, found by its key: only PodGroups' members are filed by unit (a dictionary per lone pod would be 12 MB at
    50,000 pods, kept as long as the index)."""

    def __init__(self, config: SchedulerConfiguration) -> None:
        self.config = config
        self.waiting: dict[str, int] = {}
        """The units with pods that wait for this scheduler (`waits_for_us`): how many."""
        self.nominated: dict[str, int] = {}
        """Among those, the units with waiting pods nominated to a node (a preemption's): how many."""
        self.terminating: dict[str, Pod] = {}
        """The bound pods being deleted, terminal or not (where a preemption's victims are)."""
        self._pods: dict[str, Pod] = {}
        """The table as last read: a copy of the caller's dict (which may change in place), the same objects."""
        self._groups: dict[str, dict[str, Pod]] = {}
        """Each PodGroup's member pods that are not terminal, by unit key (`framework/unit_key.py`)."""

    def members(self, unit: str) -> list[Pod]:
        """The unit's pods that are not terminal, bound or not."""
        if group_of(unit) is not None:
            return list(self._groups.get(unit, {}).values())
        pod = self._pods.get(unit)
        return [pod] if pod is not None and not pod.is_terminal and unit_of(pod) == unit else []

    def refresh(self, pods: dict[str, Pod]) -> None:
        """File the pods of `pods` that are not the objects last filed under their key, and forget those gone."""
        last = self._pods
        changed = [key for key, pod in pods.items() if last.get(key) is not pod]
        kept = len(pods) - sum(1 for key in changed if key not in last)
        if kept != len(last):  # some pod is gone: a set difference, in C, only then
            changed += last.keys() - pods.keys()
        for key in changed:
            was = last.get(key)
            if was is not None:
                self._file(key, was, -1)
            now = pods.get(key)
            if now is not None:
                self._file(key, now, 1)
        self._pods = dict(pods)

    def _file(self, key: str, pod: Pod, by: int) -> None:
        """File `pod` (`by` 1) or take it out (-1)."""
        if pod.metadata.deletion_timestamp is not None and pod.spec.node_name:
            if by > 0:
                self.terminating[key] = pod
            else:
                del self.terminating[key]
        if pod.is_terminal:
            return
        unit = unit_of(pod)
        if group_of(unit) is not None:
            if by > 0:
                self._groups.setdefault(unit, {})[key] = pod
            else:
                members = self._groups[unit]
                del members[key]
                if not members:
                    del self._groups[unit]
        if waits_for_us(pod, self.config):
            _count(self.waiting, unit, by)
            if pod.status.nominated_node_name:
                _count(self.nominated, unit, by)


def _count(counts: dict[str, int], unit: str, by: int) -> None:
    left = counts.get(unit, 0) + by
    if left:
        counts[unit] = left
    else:
        del counts[unit]
