"""Backpressure: the Bindings a pass may leave waiting to be sent, a few seconds' worth of the measured write rate.

A pass decides faster than the API server takes Bindings: tens of thousands a second against a few hundred. Left
alone, one pass decides a whole backlog and queues every Binding at once: a pod created meanwhile, whatever its
priority, waits behind all of them, and every pass after pays for the writes in flight, which the view overlays.
So the runner asks `full()` before each unit (`Cluster.writes_backed_up`), and the pass ends once the Bindings
queued or on the wire reach `bound()`: `SECONDS` of the rate at which the lane finished them lately, and never
fewer than `FLOOR` (the first pass, before any was sent, and a slow server must still keep every worker busy).
The next pass comes once they fell to a third of it (`room`): the workers still have a second's worth to send
while it decides the next two, and a pass costs something whatever it decides (its snapshot, the plugins'
caches), so fewer, larger passes cost less than many small ones.
"""

from __future__ import annotations

import threading
import time
from collections import deque

from scheduler.cluster.kube.lanes import Lane

SECONDS = 3.0
"""The Bindings left waiting, in seconds of the lane's measured rate."""
RESUME = 3
"""The next pass runs once the Bindings waiting fell to 1/RESUME of the bound."""
FLOOR = 256
"""The bound before any rate is known, and its least: 16 binding workers' worth of 16 writes each."""
WINDOW_SECONDS = 5.0
"""The rate is the lane's over about this long (samples older than it are dropped)."""
SAMPLE_SECONDS = 0.25


class Backpressure:
    def __init__(self, lane: Lane, seconds: float = SECONDS, floor: int = FLOOR) -> None:
        self.lane = lane
        self.seconds = seconds
        self.floor = floor
        self.room = threading.Event()
        """Set when the lane, once full, fell to a third of its bound: the next pass may decide more."""
        self.room.set()
        self._samples: deque[tuple[float, int]] = deque()
        self._bound = floor
        self._waiting = False
        lane.on_finished = self._finished

    def bound(self) -> int:
        """`seconds` of the lane's rate over the last `WINDOW_SECONDS`, at least `floor`; measured anew at most
        every `SAMPLE_SECONDS` (the runner asks before each unit)."""
        now = time.monotonic()
        samples = self._samples
        if samples and now - samples[-1][0] < SAMPLE_SECONDS:
            return self._bound
        samples.append((now, self.lane.finished))
        while len(samples) > 2 and now - samples[1][0] >= WINDOW_SECONDS:
            samples.popleft()
        began, first = samples[0]
        rate = (self.lane.finished - first) / (now - began) if now - began >= 0.5 else 0.0
        self._bound = max(self.floor, int(rate * self.seconds))
        return self._bound

    def full(self) -> bool:
        """Whether the lane holds `bound()` Bindings or more; if so, `room` is cleared until it drains to a third."""
        if self.lane.load() < self.bound():
            return False
        self.room.clear()
        self._waiting = True
        if self.lane.load() <= self._bound // RESUME:  # drained meanwhile, before `_finished` could see `_waiting`
            self._waiting = False
            self.room.set()
        return True

    def _finished(self, load: int) -> None:
        """In the lane's worker, after each Binding: set `room` once the lane fell to a third of its bound."""
        if self._waiting and load <= self._bound // RESUME:
            self._waiting = False
            self.room.set()
