"""The pods waiting for this scheduler, their PreEnqueue answers and their units, kept by difference between passes.

With 10,000 pods that fit nowhere and 1,000 waiting gangs pending, walking every pending pod each pass to find
ours, admit it again and group it into its unit was most of a pass that places 20 pods (issue 23).
kube-scheduler keeps its queue from events; this keeps ours from the pods a snapshot says its build changed
(`Snapshot.changed`), the PodGroups replaced since, and the units whose preemption started or ended: only the
units those belong to are looked at again. A snapshot that does not say what changed (a first build, a new node
table) or a build this missed has every unit looked at again; so does a pass that failed half-way through.

A unit's pods are admitted as before (`Admission`, kept while the pod, its PodGroup and the group's member count
stay as they were); what changes is only which units are visited.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Iterable, KeysView, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from scheduler.api.pod import Pod
from scheduler.api.pod_group import PodGroup
from scheduler.framework.pod_info import PodInfo, SchedulingUnit
from scheduler.framework.reasons import UnitReason
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import Code, Status
from scheduler.framework.unit_key import group_unit, unit_key

PENDING_REASONS = {"SchedulingGates": "SchedulingGated", "GangScheduling": "WaitingForGang"}
"""PreEnqueue plugin -> the `PodScheduled=False` reason users see (kube-scheduler's wording)."""
HELD = {"SchedulingGated": "gated", "WaitingForGang": "waiting"}
"""A held pod's PodScheduled reason -> its state in `PassReport.pods`."""


@dataclass(frozen=True, slots=True)
class Pending:
    """A pending pod as a pass reports it: the reason and message of its PodScheduled condition."""

    pod: str
    reason: str
    message: str


@dataclass(slots=True)
class Admission:
    """A pending pod's PreEnqueue answer and what it was given for: the pod (its PodInfo), its PodGroup and how
    many members existed. PreEnqueue plugins read nothing else, as kube-scheduler runs them only when a pod is
    added or updated."""

    info: PodInfo
    group: PodGroup | None
    members: int
    reason: str | None
    """The `PodScheduled=False` reason of a pod held back (`PENDING_REASONS`); None for one admitted."""
    message: str
    said: Pending | None = None
    """What the pod's PodScheduled condition already says, as reported: the same object pass after pass."""
    unit: SchedulingUnit | None = None
    """A lone pod's unit, built once: the queue then knows it unchanged by identity."""

    @classmethod
    def of(cls, info: PodInfo, group: PodGroup | None, members: int, status: Status) -> Admission:
        if status.is_success:
            return cls(info, group, members, None, "")
        reason = "SchedulerError" if status.code == Code.ERROR else PENDING_REASONS.get(status.plugin, "Unschedulable")
        return cls(info, group, members, reason, status.message())


PreEnqueue = Callable[[PodInfo, Snapshot], Status]
"""The profile's PreEnqueue plugins, in order: the first refusal, or success."""
Tell = Callable[[PodInfo, str, str], Pending | None]
"""Report a held pod pending with a reason and message, writing its condition if it says otherwise: the Pending
reported when the condition already said it, None when it had to be written."""


@dataclass(slots=True)
class Admitted:
    """One pass's answer: the units to try, and the pods held back."""

    units: Mapping[str, SchedulingUnit]
    """Read-only views of what `PendingPods` keeps, valid until its next `admit`: a copy of 10,000 units cost a
    pass 2 ms on the real server (issue 23)."""
    looked: set[str]
    """The units looked at again: any other is the same object as at the last pass."""
    members: int
    """The pods in `units`."""
    held: Mapping[str, str]
    """Each pod PreEnqueue held back, or whose unit's preemption is still being sent: `gated`, `waiting` or
    `nominated`."""
    pending: list[Pending]
    """The held pods' Pendings, to report."""


ToldUnit = tuple[Pending, PodGroup | None, UnitReason]
"""A held unit told nothing new: the Pending and PodGroup it was told from, and what was said."""


class Told:
    """The held units told nothing new, and how many by reason, kept in step: each pass counts them all as
    repeated, and counting 1,000 of them took a backlog pass 1 ms on the real server (issue 23)."""

    __slots__ = ("_units", "by_reason")

    def __init__(self) -> None:
        self._units: dict[str, ToldUnit] = {}
        self.by_reason: Counter[str] = Counter()

    def keys(self) -> KeysView[str]:
        return self._units.keys()

    def put(self, unit: str, told: ToldUnit) -> None:
        self._units[unit] = told
        self.by_reason[told[2].reason] += 1

    def take(self, units: Iterable[str]) -> dict[str, ToldUnit]:
        """Remove these units (each one held); what each was told."""
        taken = {unit: self._units.pop(unit) for unit in units}
        for told in taken.values():
            self.by_reason[told[2].reason] -= 1
            if not self.by_reason[told[2].reason]:
                del self.by_reason[told[2].reason]
        return taken


class PendingPods:
    """The unbound pods a snapshot shows, ours among them, and what PreEnqueue said of each, by unit."""

    def __init__(self, is_ours: Callable[[Pod], bool], gate: str) -> None:
        self._is_ours = is_ours
        self._gate = gate
        self._build = -1
        self._all = True
        """Every unit must be looked at again (nothing is known, or the last look failed half-way)."""
        self._pods: dict[str, PodInfo] = {}
        """Our pending pods: without a node, not being deleted."""
        self._ours: dict[str, dict[str, PodInfo]] = {}
        """Our pending pods by unit key (`framework/unit_key.py`)."""
        self._gated: dict[str, PodInfo] = {}
        """Those of our pending pods that carry our gate, in the snapshot's order."""
        self._dirty: set[str] = set()
        """Units to look at again at the next `admit`."""
        self._departed: set[str] = set()
        self._departed_all = True
        """The units left with no pod of ours pending since the last `departed`, or True: not known."""
        self._groups: dict[str, PodGroup] = {}
        """The PodGroups at the last `admit`: a replaced one may change an answer."""
        self._changed_groups: set[str] = set()
        """The PodGroups whose members changed since the last `admit` (`Snapshot.changed_groups`): their member
        count may have, which may change an answer."""
        self._preempting: set[str] = set()
        self.admitted: dict[str, Admission] = {}
        """Each pending pod's last PreEnqueue answer, of the units not preempting."""
        self._held: dict[str, str] = {}
        """`Admitted.held`, kept."""
        self._said: dict[str, Pending] = {}
        """The held pods whose condition says why already: reported each pass without a look."""
        self._unsaid: set[str] = set()
        """Units with a held pod whose condition had to be written: told again at each pass until it shows."""
        self._visited: dict[str, list[str]] = {}
        """The pods each unit's last look recorded answers for."""
        self._units: dict[str, SchedulingUnit] = {}
        self._members = 0
        """`Admitted.units` and `Admitted.members`, kept."""
        self.first_held: dict[str, Pending] = {}
        """Each unit's first pod held gated or waiting for its gang (`HELD`), as reported: what the unit is told."""
        self.told = Told()
        """The held units the last pass told nothing new (`Reporter.held`)."""

    def update(self, snapshot: Snapshot) -> None:
        """Bring the unbound pods up to `snapshot` (call it after every build from the scheduler's cache)."""
        changed = snapshot.changed
        if changed is None or snapshot.build != self._build + 1:
            self._pods, self._ours, self._gated = {}, {}, {}
            self._all = self._departed_all = True
            for info in snapshot.unbound:
                self._add(info)
        else:
            pods = snapshot.pods
            for key in changed:
                old = self._pods.pop(key, None)
                if old is not None:
                    self._remove(old)
                now = pods.get(key)
                if now is not None and now.node_name is None:
                    self._add(now)
            self._changed_groups.update(snapshot.changed_groups)  # a member bound, added or gone
        self._build = snapshot.build

    def _add(self, info: PodInfo) -> None:
        pod = info.pod
        if pod.metadata.deletion_timestamp is not None or not self._is_ours(pod):
            return
        self._pods[info.key] = info
        unit = unit_key(info.group_key, info.key)
        self._ours.setdefault(unit, {})[info.key] = info
        self._dirty.add(unit)
        if any(g.name == self._gate for g in pod.spec.scheduling_gates):
            self._gated[info.key] = info

    def _remove(self, info: PodInfo) -> None:
        unit = unit_key(info.group_key, info.key)
        pods = self._ours[unit]
        del pods[info.key]
        if not pods:
            del self._ours[unit]
            self._departed.add(unit)
        self._dirty.add(unit)
        self._gated.pop(info.key, None)

    def gated(self) -> list[PodInfo]:
        """Our pending pods that carry our gate."""
        return list(self._gated.values())

    def units_pending(self) -> Collection[str]:
        """The units with a pod of ours pending."""
        return self._ours.keys()

    def departed(self) -> set[str] | None:
        """The units with no pod of ours pending any more since the last call; None when not known (every
        pending pod was looked at again since)."""
        gone = None if self._departed_all else {unit for unit in self._departed if unit not in self._ours}
        self._departed, self._departed_all = set(), False
        return gone

    def pods_of(self, unit: str) -> Collection[str]:
        """The unit's pods of ours pending."""
        pods = self._ours.get(unit)
        return pods.keys() if pods is not None else ()

    def admit(self, snapshot: Snapshot, preempting: set[str], pre_enqueue: PreEnqueue, tell: Tell) -> Admitted:
        """PreEnqueue the pods of the units that changed, and group the admitted ones into units. Units in
        `preempting` wait, as upstream's PreEnqueue holds them, until their preemption's deletions show."""
        groups = snapshot.groups
        if self._all:
            dirty = set(self._ours) | set(self._visited)
        else:
            dirty = self._dirty | self._unsaid | (preempting ^ self._preempting)
            dirty.update(group_unit(key) for key in self._changed_groups)
            last = self._groups
            if groups != last:  # the same objects compare at C speed: most passes
                dirty.update(group_unit(key) for key, group in groups.items() if last.get(key) is not group)
                dirty.update(group_unit(key) for key in last if key not in groups)
        self._all = True  # until this look is done: one that fails half-way is done again in full
        # Every unit's last answers are forgotten before any is looked at: a pod that moved between two of them
        # (its group label changed, or it was made again under its name) is answered under its new unit only.
        known = self._forget(dirty)
        told: list[Pending] = []
        for unit in sorted(dirty):
            told += self._look(unit, snapshot, unit in preempting, known, pre_enqueue, tell)
        self._groups, self._preempting, self._dirty, self._changed_groups = dict(groups), set(preempting), set(), set()
        self._all = False
        return Admitted(
            MappingProxyType(self._units),
            dirty,
            self._members,
            MappingProxyType(self._held),
            [*told, *self._said.values()],
        )

    def _forget(self, units: Iterable[str]) -> dict[str, Admission]:
        """Drop what the last looks at these units recorded; the answers they gave, by pod, to keep those whose
        inputs are the same."""
        known: dict[str, Admission] = {}
        for unit in units:
            for key in self._visited.pop(unit, ()):
                previous = self.admitted.pop(key, None)
                if previous is not None:
                    known[key] = previous
                self._held.pop(key, None)
                self._said.pop(key, None)
            gone = self._units.pop(unit, None)
            self._members -= len(gone.members) if gone is not None else 0
            self._unsaid.discard(unit)
            self.first_held.pop(unit, None)
        return known

    def _look(
        self,
        unit: str,
        snapshot: Snapshot,
        preempting: bool,
        known: Mapping[str, Admission],
        pre_enqueue: PreEnqueue,
        tell: Tell,
    ) -> list[Pending]:
        """Answer again for one unit's pods (each answer in `known` kept while its inputs are the same); returns
        the Pendings reported for held pods whose condition had to be written."""
        pods = self._ours.get(unit)
        if not pods:
            return []
        visited = list(pods)
        self._visited[unit] = visited
        if preempting:
            for key in visited:
                self._held[key] = "nominated"
            return []
        told: list[Pending] = []
        members: list[PodInfo] = []
        for key, info in pods.items():
            group = snapshot.groups.get(info.group_key) if info.group_key is not None else None
            count = len(snapshot.members.get(info.group_key, ())) if info.group_key is not None else 0
            answer = known.get(key)
            if answer is None or answer.info is not info or answer.group is not group or answer.members != count:
                answer = Admission.of(info, group, count, pre_enqueue(info, snapshot))
            self.admitted[key] = answer
            if answer.reason is not None:
                self._held[key] = HELD.get(answer.reason, "gated")
                if answer.said is None:
                    answer.said = tell(info, answer.reason, answer.message)
                pending = answer.said
                if pending is None:
                    pending = Pending(key, answer.reason, answer.message)
                    told.append(pending)
                    self._unsaid.add(unit)
                else:
                    self._said[key] = pending
                if answer.reason in HELD and unit not in self.first_held:
                    self.first_held[unit] = pending
            elif info.group_key is None:
                if answer.unit is None:
                    answer.unit = SchedulingUnit((info,), None, 1, info.priority, info.preemption_policy)
                self._units[unit] = answer.unit
                self._members += 1
            else:
                members.append(info)
        if members and group is not None:  # admitted members: their PodGroup exists (`GangScheduling`)
            ordered = tuple(sorted(members, key=lambda m: (m.created_at, m.key)))
            first = ordered[0]
            self._units[unit] = SchedulingUnit(ordered, group, group.min_count, first.priority, first.preemption_policy)
            self._members += len(ordered)
        return told
