"""Why each unit is pending, said once: the reason the runner last gave each unit, and a budget for its Events.

kube-scheduler logs and records an Event for every failed attempt, and its Event recorder's spam filter
(client-go's `EventSourceObjectSpamFilter`: a burst of 25 Events per object, then one every 5 minutes)
keeps that from flooding the API server. Phalanx tries a parked unit again whenever the cluster changes,
so a gang waiting on one protection for an hour would say the same thing hundreds of times, and every
member would too. The runner therefore says a unit's reason when it changes: one log line, the
PodGroup's `PodGroupScheduled` condition and one Warning Event on the PodGroup. A unit tried again with
the same reason is counted (`PassReport.repeats`, the `phalanx_scheduler_repeated_reasons_total` metric)
instead of said again. Events also go through a per-unit token bucket with the spam filter's settings, so
a reason that changes on every pass cannot flood either.

The reasons are few and bounded, so that they can label a metric and total a `kubectl phalanx status`
table: the `PodScheduled` reasons kube-scheduler uses (`SchedulingGated`, `Unschedulable`,
`SchedulerError`), Phalanx's `WaitingForGang`, and `Preempting` for a unit whose victims are going.
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from datetime import datetime

EVENT_BURST = 25
"""Events a unit may get at once (client-go's `defaultSpamBurst`)."""
EVENT_REFILL_SECONDS = 300.0
"""One more Event per unit every this many seconds (client-go's `defaultSpamQPS`, 1/300)."""


class PendingReason(enum.StrEnum):
    SCHEDULING_GATED = "SchedulingGated"
    WAITING_FOR_GANG = "WaitingForGang"
    UNSCHEDULABLE = "Unschedulable"
    PREEMPTING = "Preempting"
    SCHEDULER_ERROR = "SchedulerError"


@dataclass(frozen=True, slots=True)
class UnitReason:
    """A pending unit's reason and its one-line message; `queue` is its Queue (`spec.queueName`), "" for none."""

    reason: PendingReason
    message: str
    queue: str = ""


@dataclass(slots=True)
class _Bucket:
    tokens: float
    at: datetime


class ReasonBook:
    """The reason each pending unit was last given, and each unit's Event budget."""

    def __init__(self, burst: int = EVENT_BURST, refill_seconds: float = EVENT_REFILL_SECONDS) -> None:
        self.burst = burst
        self.refill_seconds = refill_seconds
        self.current: dict[str, UnitReason] = {}
        """Changed by `say` and `keep` only, which keep `by_label` and `replaced` in step."""
        self.by_label: Counter[tuple[str, str]] = Counter()
        """How many units have each (queue, reason): the pending gauges, kept as reasons change, not counted
        again each pass over 11,000 units (issue 23)."""
        self._buckets: dict[str, _Bucket] = {}
        self._replaced: set[str] = set()
        """The units whose entry in `current` was replaced or removed since the last `replaced()`."""

    def replaced(self) -> set[str]:
        """The units whose reason changed or was forgotten since the last call: any other unit's entry in
        `current` is the same object (what `Reporter.held` kept from it is still true)."""
        replaced, self._replaced = self._replaced, set()
        return replaced

    def say(self, unit: str, reason: UnitReason) -> bool:
        """Record `reason` for `unit`; True when it differs from what the unit was last given (say it)."""
        before = self.current.get(unit)
        if before == reason:
            return False
        if before is not None:
            self._uncount(before)
        self.current[unit] = reason
        self._replaced.add(unit)
        self.by_label[reason.queue, reason.reason] += 1
        return True

    def _uncount(self, reason: UnitReason) -> None:
        label = (reason.queue, reason.reason)
        self.by_label[label] -= 1
        if not self.by_label[label]:
            del self.by_label[label]

    def may_record(self, unit: str, now: datetime) -> bool:
        """Take one Event from the unit's budget; False while it is spent."""
        bucket = self._buckets.get(unit)
        if bucket is None:
            bucket = self._buckets[unit] = _Bucket(float(self.burst), now)
        elapsed = max(0.0, (now - bucket.at).total_seconds())
        bucket.tokens = min(float(self.burst), bucket.tokens + elapsed / self.refill_seconds)
        bucket.at = now
        if bucket.tokens < 1.0:
            return False
        bucket.tokens -= 1.0
        return True

    def keep(self, pending: Collection[str], done: set[str]) -> None:
        """Forget the units not `pending` (bound or gone), and those `done` since `pending` was counted."""
        self.forget((self.current.keys() - pending) | (self._buckets.keys() - pending) | done)

    def forget(self, units: Iterable[str]) -> None:
        """Forget these units (bound or gone): one that comes back starts afresh."""
        for unit in units:
            reason = self.current.pop(unit, None)
            if reason is not None:
                self._uncount(reason)
                self._replaced.add(unit)
            self._buckets.pop(unit, None)
