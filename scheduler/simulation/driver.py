"""The simulation loop: run scheduler passes on the in-memory cluster, jumping the virtual clock.

After each pass the clock moves to the earliest moment something can change on its own: a deleted
pod finishing its grace period, or a parked unit's wake-up (backoff after a change, a protection
expiring). When neither exists, nothing more can happen and the simulation ends; `until` caps it.
A pass that removed pods at once (victims with a grace period of 0) changed the cluster after its
snapshot was taken: another pass runs at the same time to see it, as a watch's DELETED event wakes
the scheduler on a real cluster, so the units waiting for that room are woken.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime

import structlog

from scheduler.cluster.memory import MemoryCluster
from scheduler.framework.profile import Profile
from scheduler.framework.runner import Actuator, PassReport, Scheduler
from scheduler.framework.snapshot_builder import PodInfoCache
from scheduler.plugins import default_profile
from scheduler.simulation.scenario import Scenario

log = structlog.get_logger(__name__)

MAX_PASSES = 10_000
"""A guard against a plugin that keeps asking to be woken without anything changing."""


@dataclass(slots=True)
class Simulation:
    cluster: MemoryCluster
    scheduler: Scheduler
    start: datetime
    passes: list[PassReport] = field(default_factory=list)
    all_pending: bool = False
    cut: bool = False
    """The pass limit ended the run before nothing more could happen."""


def simulate(
    scenario: Scenario,
    now: datetime,
    until: datetime | None = None,
    all_pending: bool = False,
    actuator: Callable[[MemoryCluster], Actuator] | None = None,
    on_pass: Callable[[PassReport], None] | None = None,
    done: Callable[[], bool] | None = None,
    max_passes: int = MAX_PASSES,
    profile: Profile | None = None,
    cache: PodInfoCache | None = None,
    terminating: Iterable[str] | None = None,
    pass_ends: Callable[[MemoryCluster], bool] | None = None,
) -> Simulation:
    """Run to quiescence (or `until`, or `done()` true after a pass, or `max_passes`); `actuator` builds the
    preemption actuator for the cluster. `profile` and `cache`, a scheduler's plugins and snapshot caches, may come
    warm from an earlier run (`scheduler/explain/dry_run.py`): they bring themselves up to the objects. `terminating`:
    the bound pods being deleted, when the caller knows them, and `pass_ends`, when a pass may end before its last
    unit (`MemoryCluster`)."""
    cluster = MemoryCluster(scenario.objects, now, terminating, pass_ends)
    scheduler = Scheduler(
        cluster,
        scenario.config,
        profile or default_profile(scenario.config),
        actuator=actuator(cluster) if actuator else None,
        all_schedulers=all_pending,
        cache=cache,
    )
    run = Simulation(cluster, scheduler, now, all_pending=all_pending)
    for _ in range(max_passes):
        removed = cluster.removed
        report = scheduler.schedule_pending()
        run.passes.append(report)
        if on_pass is not None:
            on_pass(report)
        if done is not None and done():
            break
        if cluster.removed != removed:
            continue
        times = [t for t in (cluster.next_termination(), scheduler.next_wakeup()) if t is not None]
        if not times:
            break
        wake = max(min(times), cluster.now())
        if until is not None and wake > until:
            cluster.advance(until)
            break
        cluster.advance(wake)
    else:
        log.warning("simulation stopped", reason="pass limit", passes=max_passes)
        run.cut = True
    return run
