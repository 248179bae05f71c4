"""The scheduling queue: which units a pass tries, in which order, and when a parked unit wakes up.

As kube-scheduler's PriorityQueue, with pools: *active* (tried this pass, highest priority first,
then oldest), *backoff* (failed, an event since could help it, waiting out an exponential backoff),
*unschedulable* (failed, waiting for an event that could help it or for a PostFilter's `until`) and
*gated* (rejected by a PreEnqueue plugin, re-checked every pass). Which events could help which unit is
decided by queueing hints (`hints.py`), as kube-scheduler's: a binding at the unit's priority or above
wakes nothing, so 10,000 pods that fit nowhere are not retried each time a pod that fits is bound
(issue 23), and a pass that changes nothing wakes nothing: the simulator can tell when nothing more can
happen. A unit one of whose writes the API server refused waits out its backoff and is then retried,
change or not. A unit waiting for the victims of its own preemption is retried at any change.

Each pass counts its retries by the event that woke the unit, and the retries the hints avoided: parked
units the old rule (any change to the nodes, their pods, the nominations or the groups, once the backoff
is over) would have retried, with nothing since that could help them (`PassReport.retries`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from scheduler.framework.hints import Changes, Sighting, changes, unchanged_pods
from scheduler.framework.pod_info import PodInfo, SchedulingUnit

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
    each had failed again."""
    refused: bool = False


class SchedulingQueue:
    def __init__(self, backoff_seconds: float, max_backoff_seconds: float) -> None:
        self._initial = backoff_seconds
        self._max = max_backoff_seconds
        self._parked: dict[str, _Parked] = {}
        self.gated: set[str] = set()
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
        """The priorities of the parked units, and of those that may preempt: which events can wake anyone."""
        self.retries: Counter[str] = Counter()
        """The last `pop_order`'s retries of parked units, by the event that woke each."""
        self.avoided = 0
        """Parked units the last `pop_order` did not retry where the old rule would have."""

    def _seconds(self, attempts: int) -> timedelta:
        return timedelta(seconds=min(self._initial * 2 ** (attempts - 1), self._max))

    def _backoff_until(self, parked: _Parked) -> datetime:
        if not parked.backoff:
            return parked.failed_at
        return parked.failed_at + self._seconds(parked.attempts)

    def _put(self, key: str, parked: _Parked) -> None:
        self._drop(key)
        self._parked[key] = parked
        self._priorities[parked.priority] += 1
        if parked.may_preempt:
            self._preemptors[parked.priority] += 1

    def _drop(self, key: str) -> None:
        parked = self._parked.pop(key, None)
        if parked is None:
            return
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
                if key in self._parked:
                    self._parked[key].epoch = self._epoch
            self._failed_this_pass.clear()

    def _wake(self, found: Changes) -> None:
        """Mark the parked units `found` could help; a loop over them only when some event can help some."""
        event: str | None = "node" if found.node else "room" if found.room else None
        wakes = event is not None
        if not wakes and any(p <= found.nomination for p in self._priorities):
            wakes = True
        if not wakes and found.victim is not None and any(p > found.victim for p in self._preemptors):
            wakes = True
        if not wakes and (found.policy or found.terminating) and self._preemptors:
            wakes = True
        for parked in self._parked.values() if wakes else ():
            if parked.woken_by is not None:
                continue
            if event is not None:
                parked.woken_by = event
            elif parked.priority <= found.nomination:
                parked.woken_by = "nomination"
            elif parked.may_preempt and found.victim is not None and parked.priority > found.victim:
                parked.woken_by = "victim"
            elif parked.may_preempt and found.terminating:
                parked.woken_by = "terminating"
            elif parked.may_preempt and found.policy:
                parked.woken_by = "policy"
        for key in found.groups:
            own = self._parked.get(key)
            if own is not None and own.woken_by is None:
                own.woken_by = "group"

    def pop_order(self, units: Iterable[SchedulingUnit], now: datetime) -> list[SchedulingUnit]:
        """The active pool: units never tried, or whose wait is over; priority desc, then age, then key."""
        self.retries = Counter()
        self.avoided = 0
        units = list(units)
        live = {u.key for u in units}
        for key in self._parked.keys() - live:
            self._drop(key)
        parked_of, epoch = self._parked.get, self._epoch
        ready: list[SchedulingUnit] = []
        for unit in units:
            parked = parked_of(unit.key)
            if (  # asleep, the same pods (a lone pod's unit is kept), nothing the old rule would count: skip at once
                parked is not None
                and parked.woken_by is None
                and parked.until is None
                and parked.backoff
                and parked.members is unit.members
                and (parked.epoch == epoch or (parked.old_due is not None and now < parked.old_due))
            ):
                continue
            if self._ready(unit, now):
                ready.append(unit)
        return sorted(ready, key=unit_order)

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

    def failed(self, unit: SchedulingUnit, now: datetime, until: datetime | None, backoff: bool = True) -> None:
        """Park `unit`, tried on the cluster as last sighted. With `backoff` False (it waits for the victims of its
        own preemption), any change to the cluster makes it ready again at once: each victim that goes may be
        the last one it needed, and a backoff grown while they terminate would delay its binding by seconds
        (issue 12)."""
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

    def keep_refusals(self, pending: set[str], now: datetime) -> None:
        """Forget the refusals of the units with no pending pod left (their writes went through), once their
        backoff is over."""
        self._last_pass = now
        for key in [k for k, (_, until) in self._refused.items() if k not in pending and until <= now]:
            del self._refused[key]

    def done(self, unit: SchedulingUnit) -> None:
        self._drop(unit.key)

    def pools_by_unit(self) -> dict[str, str]:
        """`backoff` or `unschedulable` for each parked unit: one walk a pass, read per pod by the summary."""
        return {
            key: "backoff" if parked.refused or parked.woken_by is not None else "unschedulable"
            for key, parked in self._parked.items()
        }

    def pools(self, by_unit: dict[str, str]) -> dict[str, int]:
        """Sizes of the backoff, unschedulable and gated pools, from `pools_by_unit`."""
        counted = Counter(by_unit.values())
        return {"backoff": counted["backoff"], "unschedulable": counted["unschedulable"], "gated": len(self.gated)}

    def next_wakeup(self) -> datetime | None:
        """Earliest time a parked unit becomes ready without any further change to the cluster.

        A time at or before the last pass means "ready now": the cluster changed during that pass.
        """
        last = self._last_pass
        times = [until for _, until in self._refused.values() if last is None or until > last]
        for parked in self._parked.values():
            if parked.until is not None:
                times.append(parked.until)
            if parked.woken_by is not None or (not parked.backoff and parked.epoch != self._epoch):
                times.append(self._backoff_until(parked))
        return min(times) if times else None


def unit_order(unit: SchedulingUnit) -> tuple[int, datetime, str]:
    """Priority (highest first), then the oldest member's creation time, then the key: deterministic."""
    return (-unit.priority, min(m.created_at for m in unit.members), unit.key)
