"""Lanes: the worker threads that send the Kubernetes back end's writes, and the one rule for stopping them.

Each kind of write has a lane of its own, so no kind waits behind another: Bindings, gate removals,
preemption writes, PodScheduled conditions, PodGroup writes, Events. A lane's threads all exist before
its first task: `ThreadPoolExecutor` started a thread on each submit that found none idle, and a gang's
first preemption waited 0.12 s while 32 of them started one after another. They are daemon
threads, so a write stuck on an API server that stopped answering never keeps the process alive.

Stopping is one rule for every lane (`Lanes`): take no more work and drop what is only
queued; let what a worker already took, and what is owed, run to its end, by a deadline. What is
dropped is what the next leader derives again from the cluster: a PodScheduled message, an Event, a
Binding or a victim it decides anew. A task the next leader cannot derive is submitted `owed` and is
run even when queued: a gang's min-runtime start, written once, when the gang starts. With 10,000 pods
pending, the PodScheduled lane alone held thousands of writes; sending them before exiting took longer
than the 30 s Kubernetes gives a pod to stop.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")

_Task = tuple[Future[Any], Callable[..., Any], tuple[Any, ...], bool]
"""The future, the function, its arguments, and whether it is owed."""


class LaneFull(Exception):
    """The lane already holds as many queued tasks as its limit allows."""


class LaneStopped(RuntimeError):
    """The lane is stopping and takes no more work (a `RuntimeError`, as `ThreadPoolExecutor` raises after shutdown)."""


class Lane:
    """`workers` daemon threads taking tasks from one queue (a C `SimpleQueue`: a submit costs less than an
    executor's), with counts of what is queued and running, so stopping knows what it drops and waits for."""

    def __init__(self, name: str, workers: int, limit: int | None = None) -> None:
        self.name = name
        self._workers = workers
        self._limit = limit
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._queue: queue.SimpleQueue[_Task | None] = queue.SimpleQueue()
        self._queued = 0
        self._running = 0
        self.finished = 0
        """Tasks run to their end, ever: what the lane's write rate is measured from (`backpressure.py`)."""
        self.on_finished: Callable[[int], None] = lambda load: None
        """Called after each task with the tasks left queued or running."""
        self._stopping = False
        for i in range(workers):
            threading.Thread(target=self._work, name=f"{name}-{i}", daemon=True).start()

    def submit(self, fn: Callable[..., T], *args: Any, owed: bool = False) -> Future[T]:
        """Queue `fn(*args)` for the next free worker.

        Raises `LaneFull` past the lane's limit and `LaneStopped` once it is stopping.
        """
        future: Future[T] = Future()
        with self._lock:
            if self._stopping:
                raise LaneStopped(f"{self.name} is stopping")
            if self._limit is not None and self._queued >= self._limit:
                raise LaneFull(self.name)
            self._queued += 1
        self._queue.put((future, fn, args, owed))
        return future

    def _work(self) -> None:
        while (task := self._queue.get()) is not None:
            future, fn, args, _ = task
            with self._lock:
                self._queued -= 1
                self._running += 1
            try:
                if future.set_running_or_notify_cancel():
                    try:
                        result = fn(*args)
                    except BaseException as exc:  # the caller reads it from the future, as from an executor's
                        future.set_exception(exc)
                    else:
                        future.set_result(result)
            finally:
                with self._lock:
                    self._running -= 1
                    self.finished += 1
                    load = self._running + self._queued
                    if not load:
                        self._changed.notify_all()
                self.on_finished(load)

    def load(self) -> int:
        """Tasks queued or running."""
        return self._queued + self._running

    def stop(self) -> int:
        """Take no more work and drop every queued task not `owed` (its future is cancelled); returns how many."""
        with self._lock:
            if self._stopping:
                return 0
            self._stopping = True
        dropped: list[Future[Any]] = []
        kept: list[_Task] = []
        while True:
            try:
                task = self._queue.get_nowait()
            except queue.Empty:
                break
            if task is None:
                continue
            if task[3]:
                kept.append(task)
            else:
                dropped.append(task[0])
        with self._lock:
            self._queued -= len(dropped)
            if not (self._running or self._queued):
                self._changed.notify_all()
        for task in kept:
            self._queue.put(task)
        for _ in range(self._workers):
            self._queue.put(None)  # each worker ends once the owed tasks before it are done
        for future in dropped:
            future.cancel()  # runs its callbacks here
        return len(dropped)

    def wait(self, deadline: float) -> int:
        """Wait until every task queued (owed, once stopping) or running has ended, or until `deadline`
        (`time.monotonic()`); returns how many have not."""
        with self._lock:
            while left := self._queued + self._running:
                timeout = deadline - time.monotonic()
                if timeout <= 0:
                    return left
                self._changed.wait(timeout)
            return 0


@dataclass(frozen=True, slots=True)
class Stopped:
    """What stopping left behind, by lane name (lanes with nothing to report are left out)."""

    dropped: dict[str, int]
    """Queued tasks dropped."""
    unfinished: dict[str, int]
    """Tasks still running, or owed and not run, at the deadline: the process exits without them."""


class Lanes:
    """Every lane of a back end, stopped by the one rule, in two steps: the caller hands its Lease back
    between them, so the next leader need not wait for the writes still on the wire."""

    def __init__(self, *lanes: Lane) -> None:
        self._lanes = lanes
        self._dropped: dict[str, int] = {}

    def drop_queued(self) -> None:
        """Every lane takes no more work and drops its queue but for the owed tasks; nothing is waited for."""
        for lane in self._lanes:
            if dropped := lane.stop():
                self._dropped[lane.name] = self._dropped.get(lane.name, 0) + dropped

    def finish(self, deadline: float) -> Stopped:
        """`drop_queued` if not done yet, then let every task a worker took, and every owed one, run to its
        end, by `deadline`."""
        self.drop_queued()
        unfinished = {lane.name: count for lane in self._lanes if (count := lane.wait(deadline))}
        return Stopped(dict(self._dropped), unfinished)


LANES = (
    ("bindings", 16, None),
    ("volumes", 32, None),
    ("gate-removals", 4, None),
    ("preemption", 32, None),
    ("podgroup-conditions", 1, None),
    ("podgroup-starts", 4, None),
    ("pod-conditions", 1, None),
    ("events", 16, 10_000),
)
"""Lane, workers, queue limit. A volume worker waits for the PV controller (and a provisioner) to bind a pod's claims,
seconds or, with no provisioner running, until the bind timeout: 32 pods' claims wait at once, the next ones queue
behind them (their pods held on their nodes all the while). One worker for PodGroup conditions keeps the conditions
written to a group in order; one for PodScheduled writes (they only inform); four for min-runtime starts, apart from
the conditions: 200 gangs starting at once queued 400 writes on one thread, and a start written seconds late leaves
its gang without protection meanwhile. As many for Events (`events.py`) as for Bindings: each Binding is followed by
its `Scheduled` Event, and Events need no order. With one worker, a 10,000-node stream of ~300 pods a second filled
the lane and dropped three Events in four."""


def lanes_of(workers: dict[str, int]) -> dict[str, Lane]:
    """The back end's lanes, by name, with `workers` overriding `LANES`' counts."""
    return {name: Lane(name, workers.get(name, count), limit) for name, count, limit in LANES}
