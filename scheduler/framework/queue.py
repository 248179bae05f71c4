"""The scheduling queue: which units a pass tries, in which order, and when a parked unit wakes up.

As kube-scheduler's PriorityQueue, with pools: *active* (tried this pass, highest priority first,
then oldest), *backoff* (failed, an event since could help it, waiting out an exponential backoff),
*unschedulable* (failed, waiting for an event that could help it or for a PostFilter's `until`) and
*gated* (rejected by a PreEnqueue plugin, asked again when the pod, its PodGroup or the group's members
change: `pending.py`). Which events could help which unit is decided by queueing hints (`hints.py`), as
kube-scheduler's: a binding at the unit's priority or above wakes nothing, so 10,000 pods that fit nowhere
are not retried each time a pod that fits is bound (issue 23), and a pass that changes nothing wakes
nothing: the simulator can tell when nothing more can happen. A unit one of whose writes the API server
refused waits out its backoff and is then retried, change or not. A unit waiting for the victims of its own
preemption is retried at any change.

Nor are the parked units that cannot be ready looked at: a pass looks at the units that changed, those never
parked, and those woken or waiting for a time (`_file`).

Each pass counts its retries by the event that woke the unit, and the retries the hints avoided: parked
units the old rule (any change to the nodes, their pods, the nominations or the groups, once the backoff
is over) would have retried, with nothing since that could help them (`PassReport.retries`). The units asleep
are counted by cohort (`_Cohort`), never one by one: 10,000 pods that fit nowhere cost a pass one cohort's count.
"""

from __future__ import annotations

import heapq
import itertools
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from scheduler.framework.hints import Changes, Sighting, changes, unchanged_pods
from scheduler.framework.pod_info import PodInfo, SchedulingUnit
from scheduler.framework.unit_key import group_unit

NEVER = "Never"


@dataclass(slots=True)
class _Parked:
    attempts: int
    failed_at: datetime
    until: datetime | None
    backoff: bool
    priority: int
    may_preempt: bool
    members: tuple[PodInfo, ...]
    woken_by: str | None = None
    """The first event since the unit was parked that could help it (`hints.py`); None: none yet."""
    epoch: int = 0
    """The old rule: the cluster's change count when the unit was parked (or the old rule last retried it)."""
    old_attempts: int = 0
    old_due: datetime | None = None
    """The old rule's retries of the unit, and when its backoff ends, to count the retries the hints avoided: as if
    each had failed again. While the unit is asleep its `cohort` holds these three instead."""
    cohort: _Cohort | None = None
    """The asleep units it is counted with; None while it is awake (or not parked)."""
    refused: bool = False
    unresolvable: bool = False
    """No node could take it whatever pods were removed (kube-scheduler's UnschedulableAndUnresolvable): only a
    node added or changed, or storage, can help, never room freed or a nomination dropped."""
    constrained: bool = False
    """Its pods have pod affinity or topology spread constraints: a pod placed anywhere may help them (a pod
    its affinity needs, or one that raises the least loaded domain), as kube-scheduler's pod-add hints."""


@dataclass(slots=True, eq=False)
class _Cohort:
    """Asleep parked units with the same old-rule state (the change count they were last counted against, the
    old rule's retries, when its backoff ends): the old rule would have retried them all at once, so they are
    counted at once, and filing a unit in or out is all it costs on its own."""

    epoch: int
    attempts: int
    due: datetime
    units: int = 0

    @property
    def state(self) -> tuple[int, int, datetime]:
        return self.epoch, self.attempts, self.due


class SchedulingQueue:
    def __init__(self, backoff_seconds: float, max_backoff_seconds: float) -> None:
        self._initial = backoff_seconds
        self._max = max_backoff_seconds
        self._parked: dict[str, _Parked] = {}
        self._refused: dict[str, tuple[int, datetime]] = {}
        """Units one of whose writes was refused: refusals in a row, and when the unit may be retried (its gates
        are kept until then)."""
        self._last_pass: datetime | None = None
        self._seen: Sighting | None = None
        """The cluster as the queue last sighted it: events are what changed since."""
        self._epoch = 0
        """Sightings that found any change, as the old rule saw changes (`Changes.any`)."""
        self._failed_this_pass: list[str] = []
        self._priorities: Counter[int] = Counter()
        self._preemptors: Counter[int] = Counter()
        self._constrained = 0
        """Parked units whose pods have pod affinity or spread constraints (`_Parked.constrained`)."""
        """The priorities of the parked units, and of those that may preempt: which events can wake anyone."""
        self.retries: Counter[str] = Counter()
        """The last `pop_order`'s retries of parked units, by the event that woke each."""
        self.avoided = 0
        """Parked units the last `pop_order` did not retry where the old rule would have."""
        self._awake: set[str] = set()
        """Parked units a `pop_order` must look at: woken, waiting for a time or their own victims, or refused."""
        self._cohorts: list[_Cohort] = []
        """The other parked units, asleep until an event wakes them, in cohorts for the old rule's count."""
        self._joinable: dict[tuple[int, int, datetime], _Cohort] = {}
        """A cohort by its state, for a unit filed asleep with that state to join."""
        self._popped: set[str] = set()
        """The units the last pass took from the active pool: with the pool's, the only ones a pass can leave
        not parked."""
        self._active: list[tuple[tuple[int, datetime, str], int, SchedulingUnit]] = []
        """The active pool, a heap in `unit_order`, kept from pass to pass: a pass that ends early (its back end's
        writes are backed up) leaves the rest here, and the next takes its units from the top instead of sorting
        100,000 again. An entry whose unit is no longer `_queued[key]` is stale and skipped."""
        self._queued: dict[str, SchedulingUnit] = {}
        """Unit key -> the unit the active pool holds for it."""
        self._pushes = itertools.count()
        """Breaks the heap's ties between a unit and its stale entry (same order, same key)."""
        self._queued_pods: dict[str, int] = {}
        """The pods of `_queued`'s units that were not parked too when queued (a parked unit woken stays parked
        until tried, and counts in its pool)."""
        self._queued_total = 0
        """The sum of `_queued_pods`."""
        self._backoffs: dict[int, timedelta] = {}
        self._put_since: set[str] | None = None
        """Units parked since the last `pop_order`: with its `changed`, the only parked ones that may have left.
        None before the first, which looks at every unit."""

    def _seconds(self, attempts: int) -> timedelta:
        """The backoff after `attempts` failures, made once: the old rule's count asks for it ~100 times a
        backlog's pass (issue 23)."""
        backoff = self._backoffs.get(attempts)
        if backoff is None:
            backoff = self._backoffs[attempts] = timedelta(seconds=min(self._initial * 2 ** (attempts - 1), self._max))
        return backoff

    def _backoff_until(self, parked: _Parked) -> datetime:
        if not parked.backoff:
            return parked.failed_at
        return parked.failed_at + self._seconds(parked.attempts)

    def _put(self, key: str, parked: _Parked) -> None:
        self._drop(key)
        self._unqueue(key)
        self._parked[key] = parked
        if self._put_since is not None:
            self._put_since.add(key)
        self._priorities[parked.priority] += 1
        if parked.may_preempt:
            self._preemptors[parked.priority] += 1
        self._constrained += parked.constrained
        self._file(key, parked)

    def _file(self, key: str, parked: _Parked) -> None:
        """Note whether `pop_order` must look at a parked unit at every pass (something other than an event it
        waits for could make it ready), or never until an event wakes it (asleep, in a cohort)."""
        if parked.woken_by is not None or parked.until is not None or not parked.backoff or parked.refused:
            self._leave(parked)
            self._awake.add(key)
            return
        self._awake.discard(key)
        if parked.cohort is not None:
            return
        if parked.old_due is None:
            parked.old_attempts = parked.attempts
            parked.old_due = self._backoff_until(parked)
        state = (parked.epoch, parked.old_attempts, parked.old_due)
        cohort = self._joinable.get(state)
        if cohort is None:
            cohort = self._joinable[state] = _Cohort(*state)
            self._cohorts.append(cohort)
        cohort.units += 1
        parked.cohort = cohort

    def _leave(self, parked: _Parked) -> None:
        """Take an asleep unit out of its cohort, with the cohort's old-rule state as its own."""
        cohort = parked.cohort
        if cohort is None:
            return
        parked.epoch, parked.old_attempts, parked.old_due = cohort.state
        cohort.units -= 1
        parked.cohort = None

    def _count_old_rule(self, now: datetime) -> None:
        """Count the retries the old rule would make now: each cohort whose backoff is over and that was last
        counted before the latest change, all its units at once; its next backoff starts now."""
        epoch = self._epoch
        kept: list[_Cohort] = []
        for cohort in self._cohorts:
            due = cohort.units and cohort.epoch != epoch and now >= cohort.due
            if (not cohort.units or due) and self._joinable.get(cohort.state) is cohort:
                del self._joinable[cohort.state]
            if not cohort.units:
                continue
            kept.append(cohort)
            if due:
                self.avoided += cohort.units
                cohort.epoch, cohort.attempts = epoch, cohort.attempts + 1
                cohort.due = now + self._seconds(cohort.attempts)
                self._joinable.setdefault(cohort.state, cohort)
        self._cohorts = kept

    def _drop(self, key: str) -> None:
        parked = self._parked.pop(key, None)
        if parked is None:
            return
        self._leave(parked)
        self._awake.discard(key)
        self._constrained -= parked.constrained
        for counter in (self._priorities, self._preemptors) if parked.may_preempt else (self._priorities,):
            counter[parked.priority] -= 1
            if not counter[parked.priority]:
                del counter[parked.priority]

    def sight(self, sighting: Sighting, placed: Iterable[PodInfo] | None = None) -> None:
        """Record the cluster as a snapshot shows it now, waking the parked units the changes since the last
        sighting could help (`hints.py`). `placed`: the pods this pass placed since its first sighting, which
        ends the pass: the units that failed in it are then parked against this sighting, as to the old rule."""
        if self._seen is not None:
            found = changes(self._seen, sighting, placed)
            self._epoch += found.any
            self._wake(found)
        self._seen = sighting
        if placed is not None:
            for key in self._failed_this_pass:
                parked = self._parked.get(key)
                if parked is not None:  # parked against the cluster with this pass's own changes
                    self._leave(parked)
                    parked.epoch = self._epoch
                    self._file(key, parked)
            self._failed_this_pass.clear()

    def _wake(self, found: Changes) -> None:
        """Mark the parked units `found` could help; a loop over them only when some event can help some."""
        event: str | None = "node" if found.node else "room" if found.room else "storage" if found.storage else None
        wakes = event is not None
        if not wakes and any(p <= found.nomination for p in self._priorities):
            wakes = True
        if not wakes and found.victim is not None and any(p > found.victim for p in self._preemptors):
            wakes = True
        if not wakes and (found.policy or found.terminating) and self._preemptors:
            wakes = True
        placed = found.victim is not None
        if not wakes and placed and self._constrained:
            wakes = True
        relabelled = found.namespaces
        wakes = wakes or bool(relabelled and self._parked)
        for key, parked in self._parked.items() if wakes else ():
            if parked.woken_by is not None:
                continue
            woken: str | None = None
            if parked.constrained and placed:
                woken = "placed"
            elif relabelled and any(m.pod_affinity or m.namespace in relabelled for m in parked.members):
                woken = "namespace"
            elif parked.unresolvable and event not in ("node", "storage"):
                continue
            elif event is not None:
                woken = event
            elif parked.priority <= found.nomination:
                woken = "nomination"
            elif parked.may_preempt and found.victim is not None and parked.priority > found.victim:
                woken = "victim"
            elif parked.may_preempt and found.terminating:
                woken = "terminating"
            elif parked.may_preempt and found.policy:
                woken = "policy"
            if woken is None and parked.cohort is not None:
                continue  # asleep, and nothing here can help it
            self._leave(parked)
            parked.woken_by = woken
            self._awake.add(key)
        for key in map(group_unit, found.groups):
            own = self._parked.get(key)
            if own is not None and own.woken_by is None:
                self._leave(own)
                own.woken_by = "group"
                self._awake.add(key)

    def pop_order(
        self,
        units: Mapping[str, SchedulingUnit],
        changed: Collection[str],
        now: datetime,
        until: Callable[[], bool] = lambda: False,
    ) -> Iterator[SchedulingUnit]:
        """The active pool: units never tried, or whose wait is over; priority desc, then age, then key.

        `units` by key; `changed`: the keys of the units added, removed or not the same object since the last
        `pop_order`, or at least as many keys as `units` for a full look (every unit may be new). Only those, the
        units never parked, and the parked ones `_file` says may be ready are looked at: with 10,000 parked units
        that fit nowhere, a walk over all of them cost a pass 6 ms, and the two set differences that found the
        units gone and those never parked 2.6 ms on the real server.

        The units come one at a time from the top of the pool; those the pass does not take stay in it, in order,
        for the next pass (a pass ends early when its back end's writes are backed up). A unit created meanwhile
        with a higher priority is then taken before them, as in kube-scheduler's activeQ."""
        self.retries = Counter()
        self.avoided = 0
        parked_now = self._parked
        queued = self._queued
        if self._put_since is None or len(changed) >= len(units):  # a full look: every unit may be new
            gone: Iterable[str] = (parked_now.keys() | queued.keys()) - units.keys()
            fresh = units.keys() - parked_now.keys()
        else:
            gone = [k for k in (*changed, *self._put_since) if (k in parked_now or k in queued) and k not in units]
            fresh = {k for k in (*changed, *self._popped) if k in units and k not in parked_now}
        for key in gone:
            self._drop(key)
            self._unqueue(key)
        self._put_since = set()
        fresh.difference_update(k for k in list(fresh) if queued.get(k) is units[k])  # in the pool as it is
        looks = fresh | self._awake
        looks.update(changed)
        self._count_old_rule(now)
        parked_of = self._parked.get
        ready: list[SchedulingUnit] = []
        for key in looks:
            unit = units.get(key)
            if unit is None or queued.get(key) is unit:
                continue
            parked = parked_of(key)
            if parked is not None and parked.cohort is not None and parked.members is unit.members:
                continue  # asleep with the same pods (a lone pod's unit is kept): nothing to look at
            if parked is not None:
                self._leave(parked)
            if self._ready(unit, now):
                ready.append(unit)
                if parked is not None:  # tried next: parked again or done, unless the pass ends first
                    self._awake.add(key)
            elif parked is not None:
                self._file(key, parked)
        if len(ready) > len(self._active):  # a first pass, or a burst: one heapify, not a push each
            for unit in ready:
                self._enqueue(unit, push=False)
            self._active += ((unit_order(unit), next(self._pushes), unit) for unit in ready)
            heapq.heapify(self._active)
        else:
            for unit in ready:
                self._enqueue(unit)
        self._popped = set()
        return self._take(until)

    def _enqueue(self, unit: SchedulingUnit, push: bool = True) -> None:
        """Put `unit` in the active pool (replacing the key's older unit); `push` False: the caller pushes it."""
        self._unqueue(unit.key)
        self._queued[unit.key] = unit
        if unit.key not in self._parked:
            self._queued_pods[unit.key] = len(unit.members)
            self._queued_total += len(unit.members)
        if not push:
            return
        if len(self._active) > 2 * len(self._queued) + 1024:  # mostly stale entries: keep the heap the pool's size
            self._active = [entry for entry in self._active if self._queued.get(entry[2].key) is entry[2]]
            heapq.heapify(self._active)
        heapq.heappush(self._active, (unit_order(unit), next(self._pushes), unit))

    def _unqueue(self, key: str) -> None:
        """Take `key`'s unit out of the active pool (its heap entry goes stale)."""
        self._queued.pop(key, None)
        self._queued_total -= self._queued_pods.pop(key, 0)
        if not self._queued:
            self._active.clear()

    def _take(self, until: Callable[[], bool]) -> Iterator[SchedulingUnit]:
        """The active pool's units from the top, each leaving the pool as it is taken, until `until()` says stop."""
        active, queued = self._active, self._queued
        while active and not until():
            *_, unit = heapq.heappop(active)
            if queued.get(unit.key) is not unit:
                continue  # stale: replaced or gone since it was pushed
            self._unqueue(unit.key)
            self._popped.add(unit.key)
            yield unit

    @property
    def active(self) -> int:
        """Units in the active pool: left by a pass that ended early, or ready since."""
        return len(self._queued)

    def _ready(self, unit: SchedulingUnit, now: datetime) -> bool:
        parked = self._parked.get(unit.key)
        if parked is None:
            return True
        if parked.woken_by is None and parked.members != unit.members:  # the same PodInfos compare at C speed
            if unchanged_pods(parked.members, unit.members):
                parked.members = unit.members
            else:
                parked.woken_by = "pod"
        event: str | None = None
        if parked.until is not None and now >= parked.until:
            event = "refused" if parked.refused else "timer"
        elif not parked.backoff:
            event = "preempting" if parked.epoch != self._epoch or parked.woken_by is not None else None
        elif parked.woken_by is not None and now >= self._backoff_until(parked):
            event = parked.woken_by
        if event is not None:
            self.retries[event] += 1
            return True
        if parked.epoch != self._epoch and not parked.refused:
            if parked.old_due is None:
                parked.old_attempts = parked.attempts
                parked.old_due = self._backoff_until(parked)
            if now >= parked.old_due:
                self.avoided += 1
                parked.epoch = self._epoch
                parked.old_attempts += 1
                parked.old_due = now + self._seconds(parked.old_attempts)
        return False

    def failed(
        self,
        unit: SchedulingUnit,
        now: datetime,
        until: datetime | None,
        backoff: bool = True,
        unresolvable: bool = False,
    ) -> None:
        """Park `unit`, tried on the cluster as last sighted. With `backoff` False (it waits for the victims of its
        own preemption), any change to the cluster makes it ready again at once: each victim that goes may be
        the last one it needed, and a backoff grown while they terminate would delay its binding by seconds
        (issue 12). An `unresolvable` unit (no node could take it whatever was removed) waits for a node or
        storage change only: a pod larger than every node costs a pass nothing while pods come and go."""
        previous = self._parked.get(unit.key)
        attempts = previous.attempts + 1 if previous else 1
        if until is not None and until <= now:
            until = None  # "retry at a time already past" would retry every pass with nothing changed
        self._put(
            unit.key,
            _Parked(
                attempts,
                now,
                until,
                backoff,
                unit.priority,
                unit.preemption_policy != NEVER,
                unit.members,
                epoch=self._epoch,
                unresolvable=unresolvable,
                constrained=any(m.pod_affinity or m.pod.spec.topology_spread_constraints for m in unit.members),
            ),
        )
        self._failed_this_pass.append(unit.key)

    def back_off(self, key: str, now: datetime, attempts: int) -> datetime:
        """A write for unit `key` was refused: retry it once the backoff for `attempts` has passed
        (returned), whether or not the cluster changes meanwhile (docs/DESIGN.md, invariant 7)."""
        previous = self._parked.get(key)
        until = now + self._seconds(attempts)
        parked = _Parked(
            attempts,
            now,
            until,
            True,
            previous.priority if previous else 0,
            previous.may_preempt if previous else True,
            previous.members if previous else (),
            refused=True,
            epoch=self._epoch,
        )
        self._put(key, parked)
        return until

    def refused(self, key: str, now: datetime) -> datetime:
        """A write for unit `key` was refused: it waits out a backoff that doubles with each refusal in a row,
        until its members are all bound (`keep_refusals`). Returns when it may be retried."""
        attempts = self._refused[key][0] + 1 if key in self._refused else 1
        until = self.back_off(key, now, attempts)
        self._refused[key] = (attempts, until)
        return until

    def backing_off(self, key: str, now: datetime) -> bool:
        """Whether unit `key` still waits out the backoff of a refused write."""
        refused = self._refused.get(key)
        return refused is not None and refused[1] > now

    def keep_refusals(self, pending: Collection[str], now: datetime) -> None:
        """Forget the refusals of the units with no pending pod left (their writes went through), once their
        backoff is over."""
        self._last_pass = now
        for key in [k for k, (_, until) in self._refused.items() if k not in pending and until <= now]:
            del self._refused[key]

    def done(self, unit: SchedulingUnit) -> None:
        self._drop(unit.key)
        self._unqueue(unit.key)

    def pool_of(self, key: str) -> str | None:
        """`backoff` or `unschedulable` for a parked unit; None for one not parked."""
        parked = self._parked.get(key)
        if parked is None:
            return None
        return "backoff" if parked.refused or parked.woken_by is not None else "unschedulable"

    def pools(self, gated: int) -> dict[str, int]:
        """Sizes of the backoff and unschedulable pools, and of the gated one: the `gated` pods PreEnqueue held
        back. Only the awake units can be backing off (`_file`)."""
        backoff = sum(1 for key in self._awake if self.pool_of(key) == "backoff")
        return {"backoff": backoff, "unschedulable": len(self._parked) - backoff, "gated": gated}

    def pods_by_pool(self, units: Mapping[str, SchedulingUnit], pods: int) -> Counter[str | None]:
        """The `pods` of the last `pop_order`'s `units` by the pool of their unit (`pool_of`), counted from the few
        units not parked (those the pass took, and the active pool's) or backing off: the rest are unschedulable."""
        counted: Counter[str | None] = Counter()
        taken = sum(len(units[key].members) for key in self._popped if key in units and key not in self._parked)
        counted[None] = taken + self._queued_total
        counted["backoff"] = sum(
            len(units[key].members) for key in self._awake if key in units and self.pool_of(key) == "backoff"
        )
        counted["unschedulable"] = pods - counted[None] - counted["backoff"]
        return counted

    def next_wakeup(self) -> datetime | None:
        """Earliest time a parked unit becomes ready without any further change to the cluster.

        A time at or before the last pass means "ready now": the cluster changed during that pass.
        """
        last = self._last_pass
        times = [until for _, until in self._refused.values() if last is None or until > last]
        for parked in map(self._parked.__getitem__, self._awake):  # the others wait for an event
            if parked.until is not None:
                times.append(parked.until)
            if parked.woken_by is not None or (not parked.backoff and parked.epoch != self._epoch):
                times.append(self._backoff_until(parked))
        return min(times) if times else None


def unit_order(unit: SchedulingUnit) -> tuple[int, datetime, str]:
    """Priority (highest first), then the oldest member's creation time, then the key: deterministic."""
    return (-unit.priority, min(m.created_at for m in unit.members), unit.key)
