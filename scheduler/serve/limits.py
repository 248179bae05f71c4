"""How much of the scheduler's CPU explanations may take: at most `concurrency` computed at once, and `rate` a
second on average (a token bucket holding `burst`). An explanation runs a dry run of the scheduler in the process
that schedules, so without a bound a loop of `kubectl phalanx` would slow scheduling itself; a request over either
bound is refused at once with 429 and a Retry-After, as API Priority and Fairness refuses, rather than queued.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable


class Limiter:
    def __init__(self, concurrency: int, rate: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        if concurrency < 1 or rate <= 0 or burst < 1:
            raise ValueError(f"explanation limits: concurrency {concurrency}, rate {rate}, burst {burst}: must be > 0")
        self.concurrency = concurrency
        self.rate = rate
        self.burst = burst
        self._clock = clock
        self._lock = threading.Lock()
        self._running = 0
        self._tokens = float(burst)
        self._at = clock()

    def acquire(self) -> int | None:
        """None when the caller may compute (it must `release()` after); else the seconds to wait (Retry-After)."""
        with self._lock:
            now = self._clock()
            self._tokens = min(float(self.burst), self._tokens + (now - self._at) * self.rate)
            self._at = now
            if self._running >= self.concurrency:
                return 1
            if self._tokens < 1.0:
                return max(1, math.ceil((1.0 - self._tokens) / self.rate))
            self._tokens -= 1.0
            self._running += 1
            return None

    def release(self) -> None:
        with self._lock:
            self._running -= 1
