"""Which min-runtime protects a victim from a preemptor, found by walking the queue tree.

Source: KAI-Scheduler `pkg/scheduler/plugins/minruntime/resolver.go`. Between units of the same
leaf queue it is a *preempt*: the first `preemptMinRuntime` walking up from the victim's leaf.
Between leaf queues it is a *reclaim*: with `lca`, the `reclaimMinRuntime` of the child of the
lowest common ancestor on the victim's side, else walking up from there; with `queue`, walking up
from the victim's leaf. The node-pool defaults in `SchedulerConfiguration.minRuntime` apply when
no queue on the path sets a value. Units without a queue sit under a virtual root, so two of
them preempt each other and one reclaiming from a queue steps down to the victim's top queue.
A bad or negative duration counts as 0 (the webhook rejects it; the scheduler only warns).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Literal

import structlog

from scheduler.api.config import MinRuntimeDefaults
from scheduler.api.duration import DurationError, format_duration, parse_duration
from scheduler.api.pod_group import LAST_START_ANNOTATION, PodGroup
from scheduler.api.queue import Queue
from scheduler.framework.pod_info import PodInfo, SchedulingUnit, unit_queue
from scheduler.framework.snapshot import Snapshot
from scheduler.plugins.preemption_toleration import format_instant

log = structlog.get_logger(__name__)

Kind = Literal["preempt-min-runtime", "reclaim-min-runtime"]
PREEMPT: Kind = "preempt-min-runtime"
RECLAIM: Kind = "reclaim-min-runtime"


@dataclass(frozen=True, slots=True)
class Resolution:
    """The min-runtime that applies, and where it came from (a queue, or None for the node-pool default).

    The walk itself (the victim's queues leaf first, the preemptor's, their lowest common ancestor) is kept
    to tell users why that queue decides; it does not make two resolutions different.
    """

    kind: Kind
    duration: timedelta
    source: str | None
    victim_path: tuple[str, ...] = field(default=(), compare=False)
    preemptor_path: tuple[str, ...] = field(default=(), compare=False)
    lca: str | None = field(default=None, compare=False)

    def describe(self) -> str:
        where = f"queue {self.source}" if self.source else "node-pool default"
        return f"{self.kind} {format_duration(self.duration)} ({where})"

    def route(self) -> str:
        """`queues vision > research > org, the preemptor's nlp > research; lowest common ancestor research`."""
        victim = " > ".join(self.victim_path)
        if self.kind == PREEMPT:
            return f"queues {victim}, the preemptor's too" if victim else "neither unit has a queue"
        preemptor = " > ".join(self.preemptor_path) or "none"
        common = self.lca or "none (different trees)"
        return f"queues {victim or 'none'}, the preemptor's {preemptor}; lowest common ancestor {common}"


@dataclass(frozen=True, slots=True)
class Protection:
    resolution: Resolution
    until: datetime

    def message(self, subject: str, now: datetime) -> str:
        """`team-a/train-7 is protected by reclaim-min-runtime 10m (queue research) until 12:40:00Z (queues
        vision > research, the preemptor's nlp > research; lowest common ancestor research)`."""
        when = format_instant(self.until, now)
        return f"{subject} is protected by {self.resolution.describe()} until {when} ({self.resolution.route()})"


def duration_error(raw: str) -> str | None:
    """Why a configured min-runtime is unusable (treated as 0), or None when it is fine."""
    try:
        value = parse_duration(raw)
    except DurationError as err:
        return str(err)
    except OverflowError:
        return f"{raw!r} is out of range"
    if value < timedelta(0):
        return f"{raw!r} is negative: must be 0 or more"
    return None


@lru_cache(maxsize=1024)
def min_runtime(raw: str) -> timedelta:
    """A configured value; unusable ones count as 0 (`MinRuntime.warnings` reports them)."""
    if duration_error(raw) is not None:
        return timedelta(0)
    return parse_duration(raw)


def ancestry(queue: str | None, queues: dict[str, Queue]) -> list[str]:
    """`queue` and its ancestors, leaf first; stops at an unknown parent or a cycle (both warned about)."""
    path: list[str] = []
    current = queue
    while current is not None and current not in path:
        path.append(current)
        found = queues.get(current)
        current = found.spec.parent_queue if found is not None else None
    return path


def _walk(path: Sequence[str], queues: dict[str, Queue], kind: Kind, default: str) -> Resolution:
    for name in path:
        found = queues.get(name)
        if found is None:
            continue
        raw = found.spec.preempt_min_runtime if kind == PREEMPT else found.spec.reclaim_min_runtime
        if raw is not None:
            return Resolution(kind, min_runtime(raw), name)
    return Resolution(kind, min_runtime(default), None)


def resolve(
    preemptor_queue: str | None, victim_queue: str | None, queues: dict[str, Queue], defaults: MinRuntimeDefaults
) -> Resolution:
    """The min-runtime a victim in `victim_queue` has against a preemptor in `preemptor_queue`."""
    victim_path = ancestry(victim_queue, queues)
    if preemptor_queue == victim_queue:
        found = _walk(victim_path, queues, PREEMPT, defaults.preempt)
        return replace(found, victim_path=tuple(victim_path), preemptor_path=tuple(victim_path), lca=victim_queue)
    preemptor_path = ancestry(preemptor_queue, queues)
    preemptor_side = set(preemptor_path)
    lca = next((i for i, name in enumerate(victim_path) if name in preemptor_side), len(victim_path))
    if defaults.reclaim_resolve_method == "queue":
        found = _walk(victim_path, queues, RECLAIM, defaults.reclaim)
    else:
        found = _walk(victim_path[max(lca - 1, 0) :], queues, RECLAIM, defaults.reclaim)
    common = victim_path[lca] if lca < len(victim_path) else None
    return replace(found, victim_path=tuple(victim_path), preemptor_path=tuple(preemptor_path), lca=common)


def started_at(group: PodGroup | None, pods: Sequence[PodInfo]) -> datetime | None:
    """A group's `last-start-timestamp` annotation, a lone pod's scheduled time; None = never started."""
    if group is None:
        return pods[0].scheduled_at if pods else None
    raw = group.metadata.annotations.get(LAST_START_ANNOTATION)
    if raw is None:
        return None
    try:
        parsed = datetime.fromisoformat(raw)
    except ValueError:
        log.warning("start time ignored", group=group.key, annotation=LAST_START_ANNOTATION, value=raw)
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


class Resolver:
    """`resolve` memoised for one snapshot's queues and defaults, which a search asks about per victim.

    Preemption filters every running unit (tens of thousands): most share a handful of queue pairs,
    and most have run longer than any configured min-runtime, which `longest` settles without a walk.
    """

    __slots__ = ("_memo", "defaults", "longest", "queues")

    def __init__(self, queues: dict[str, Queue], defaults: MinRuntimeDefaults) -> None:
        self.queues = queues
        self.defaults = defaults
        self._memo: dict[tuple[str | None, str | None], Resolution] = {}
        values = [defaults.preempt, defaults.reclaim]
        for queue in queues.values():
            values.extend(v for v in (queue.spec.preempt_min_runtime, queue.spec.reclaim_min_runtime) if v is not None)
        self.longest = max(min_runtime(v) for v in values)

    @classmethod
    def of(cls, snapshot: Snapshot, previous: Resolver | None) -> Resolver:
        """`previous` when it was built from this snapshot's very queues and defaults, else a new one."""
        defaults = snapshot.config.min_runtime
        if previous is not None and previous.queues is snapshot.queues and previous.defaults is defaults:
            return previous
        return cls(snapshot.queues, defaults)

    def resolve(self, preemptor_queue: str | None, victim_queue: str | None) -> Resolution:
        key = (preemptor_queue, victim_queue)
        found = self._memo.get(key)
        if found is None:
            found = self._memo[key] = resolve(preemptor_queue, victim_queue, self.queues, self.defaults)
        return found

    def protection(
        self, preemptor: SchedulingUnit, group: PodGroup | None, pods: Sequence[PodInfo], now: datetime
    ) -> Protection | None:
        """The victim unit's min-runtime protection against the preemptor at `now`, or None."""
        start = started_at(group, pods)
        if start is None or now >= _after(start, self.longest):
            return None
        resolution = self.resolve(unit_queue(preemptor.group, preemptor.members), unit_queue(group, pods))
        until = _after(start, resolution.duration)
        return Protection(resolution, until) if now < until else None


def _after(start: datetime, duration: timedelta) -> datetime:
    """`start + duration`, saturating at the last representable instant (a min-runtime of 10,000 weeks)."""
    try:
        return start + duration
    except OverflowError:
        return datetime.max.replace(tzinfo=UTC)
