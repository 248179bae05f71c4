"""The scheduling queue: which units a pass tries, in which order, and when a parked unit wakes up.

As kube-scheduler's PriorityQueue, with pools: *active* (tried this pass, highest priority first,
then oldest), *backoff* (failed, the cluster changed since, waiting out an exponential backoff),
*unschedulable* (failed, waiting for the cluster to change or for a PostFilter's `until`) and
*gated* (rejected by a PreEnqueue plugin, re-checked every pass). A unit one of whose writes the
API server refused waits out its backoff and is then retried, change or not. "The cluster changed" is a
fingerprint of the nodes and of what is placed on them, so a pass that changes nothing does not
wake anything: the simulator can tell when nothing more can happen.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from scheduler.framework.pod_info import SchedulingUnit


@dataclass(slots=True)
class _Parked:
    attempts: int
    failed_at: datetime
    fingerprint: int
    until: datetime | None
    backoff: bool = True


class SchedulingQueue:
    def __init__(self, backoff_seconds: float, max_backoff_seconds: float) -> None:
        self._initial = backoff_seconds
        self._max = max_backoff_seconds
        self._parked: dict[str, _Parked] = {}
        self.gated: set[str] = set()
        self._failed_this_pass: set[str] = set()
        self._fingerprint = 0
        self._refused: dict[str, tuple[int, datetime]] = {}
        """Units one of whose writes was refused: refusals in a row, and when the unit may be retried (its gates
        are kept until then)."""
        self._last_pass: datetime | None = None

    def _backoff_until(self, parked: _Parked) -> datetime:
        if not parked.backoff:
            return parked.failed_at
        seconds = min(self._initial * 2 ** (parked.attempts - 1), self._max)
        return parked.failed_at + timedelta(seconds=seconds)

    def pop_order(self, units: Iterable[SchedulingUnit], now: datetime, fingerprint: int) -> list[SchedulingUnit]:
        """The active pool: units never tried, or whose wait is over; priority desc, then age, then key."""
        self._fingerprint = fingerprint
        live = {u.key for u in units}
        for key in [k for k in self._parked if k not in live]:
            del self._parked[key]
        return sorted((u for u in units if self._ready(u.key, now, fingerprint)), key=unit_order)

    def _ready(self, key: str, now: datetime, fingerprint: int) -> bool:
        parked = self._parked.get(key)
        if parked is None:
            return True
        if parked.until is not None and now >= parked.until:
            return True
        return parked.fingerprint != fingerprint and now >= self._backoff_until(parked)

    def failed(
        self, unit: SchedulingUnit, now: datetime, fingerprint: int, until: datetime | None, backoff: bool = True
    ) -> None:
        """Park `unit`. With `backoff` False (it waits for the victims of its own preemption), any change
        to the cluster makes it ready again at once: each victim that goes may be the last one it needed,
        and a backoff grown while they terminate would delay its binding by seconds (issue 12)."""
        previous = self._parked.get(unit.key)
        attempts = previous.attempts + 1 if previous else 1
        if until is not None and until <= now:
            until = None  # "retry at a time already past" would retry every pass with nothing changed
        self._parked[unit.key] = _Parked(attempts, now, fingerprint, until, backoff)
        self._failed_this_pass.add(unit.key)

    def back_off(self, key: str, now: datetime, attempts: int) -> datetime:
        """A write for unit `key` was refused: retry it once the backoff for `attempts` has passed
        (returned), whether or not the cluster changes meanwhile (docs/DESIGN.md, invariant 7)."""
        parked = _Parked(attempts, now, self._fingerprint, None)
        parked.until = self._backoff_until(parked)
        self._parked[key] = parked
        return parked.until

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

    def settle(self, fingerprint: int) -> None:
        """Record the cluster as the pass left it, so `next_wakeup` only counts changes made after.

        Units that failed during the pass saw only less room appear after them (lower priorities
        placed later), so they are parked against the final state too.
        """
        for key in self._failed_this_pass:
            self._parked[key].fingerprint = fingerprint
        self._failed_this_pass.clear()
        self._fingerprint = fingerprint

    def done(self, unit: SchedulingUnit) -> None:
        self._parked.pop(unit.key, None)
        self._failed_this_pass.discard(unit.key)

    def pool(self, key: str) -> str | None:
        """`backoff` or `unschedulable` for a parked unit, as `pools` counts it; None when it is not parked."""
        parked = self._parked.get(key)
        if parked is None:
            return None
        return "backoff" if parked.fingerprint != self._fingerprint else "unschedulable"

    def pools(self) -> dict[str, int]:
        """Sizes of the backoff, unschedulable and gated pools after the last pass."""
        backoff = sum(1 for p in self._parked.values() if p.fingerprint != self._fingerprint)
        return {"backoff": backoff, "unschedulable": len(self._parked) - backoff, "gated": len(self.gated)}

    def next_wakeup(self) -> datetime | None:
        """Earliest time a parked unit becomes ready without any further change to the cluster.

        A time at or before the last pass means "ready now": the cluster changed during that pass.
        """
        last = self._last_pass
        times = [until for _, until in self._refused.values() if last is None or until > last]
        for parked in self._parked.values():
            if parked.until is not None:
                times.append(parked.until)
            if parked.fingerprint != self._fingerprint:
                times.append(self._backoff_until(parked))
        return min(times) if times else None


def unit_order(unit: SchedulingUnit) -> tuple[int, datetime, str]:
    """Priority (highest first), then the oldest member's creation time, then the key: deterministic."""
    return (-unit.priority, min(m.created_at for m in unit.members), unit.key)
