"""How much of the scheduler's CPU explanations may take. An explanation runs a dry run of the scheduler in the
process that schedules, sharing its cores and its GIL, so without a bound a loop of `kubectl phalanx` would slow
scheduling itself. Three bounds, each refusing a request over it at once with 429 and a Retry-After, as API Priority
and Fairness refuses, rather than queueing it:

- `concurrency`: answers computed at once.
- `rate` a second on average, a token bucket holding `burst`: how often answers start, whatever each costs.
- `cpu_share` of one core on average while the replica schedules, owing at most `cpu_burst` CPU seconds: bounds what
  answers cost, which the count does not, since one answer over a large backlog dry-runs a whole scheduling pass.
  Each computed answer's CPU is owed (`release`) and paid back at `cpu_share` CPU seconds a second while `busy`
  (the leader has units to decide or Bindings on their way), at a whole core a second otherwise: an idle
  scheduler, or a standby, loses nothing to an answer, so a user's command there waits for none but its own. A
  request is let in only while no more than `cpu_burst` is owed; an answer's cost is known only once it is
  computed, so the requests after a costly one wait for it to be paid. Over a backlog the answers' CPU is thus
  about `cpu_share` of the time it takes, plus `cpu_burst` and the last answer's.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

AT_ONCE = "too many explanations at once: the scheduler computes them beside scheduling; try again later"
IDLE_SHARE = 1.0
"""What is owed is paid back at a whole core a second while the replica is not scheduling."""
CPU_TAKEN = (
    "explanations are held back: the last ones took the scheduler's CPU, which it schedules with; try again later"
)


@dataclass(frozen=True, slots=True)
class Refused:
    """A request not let in: the seconds to wait (Retry-After, at least 1) and why, for the user."""

    retry_after: int
    message: str


class Limiter:
    def __init__(
        self,
        concurrency: int,
        rate: float,
        burst: int,
        cpu_share: float = 0.02,
        cpu_burst: float = 0.25,
        busy: Callable[[], bool] = lambda: True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if concurrency < 1 or rate <= 0 or burst < 1:
            raise ValueError(f"explanation limits: concurrency {concurrency}, rate {rate}, burst {burst}: must be > 0")
        if not 0 < cpu_share <= 1 or cpu_burst <= 0:
            raise ValueError(
                f"explanation CPU: share {cpu_share} must be in (0, 1] and burst {cpu_burst} seconds must be > 0"
            )
        self.concurrency = concurrency
        self.rate = rate
        self.burst = burst
        self.cpu_share = cpu_share
        self.cpu_burst = cpu_burst
        self._busy = busy
        self._clock = clock
        self._lock = threading.Lock()
        self._running = 0
        self._tokens = float(burst)
        self._owed = 0.0
        self._at = clock()

    def acquire(self) -> Refused | None:
        """None when the caller may compute (it must `release()` after, with the CPU it took); else why not."""
        with self._lock:
            self._pay()
            if self._owed > self.cpu_burst:
                return Refused(max(1, math.ceil((self._owed - self.cpu_burst) / self._share())), CPU_TAKEN)
            if self._running >= self.concurrency:
                return Refused(1, AT_ONCE)
            if self._tokens < 1.0:
                return Refused(max(1, math.ceil((1.0 - self._tokens) / self.rate)), AT_ONCE)
            self._tokens -= 1.0
            self._running += 1
            return None

    def release(self, cpu: float) -> None:
        """The answer let in by `acquire` is computed; it took `cpu` seconds of CPU, owed from now on."""
        with self._lock:
            self._pay()
            self._running -= 1
            self._owed += max(0.0, cpu)

    def _pay(self) -> None:
        """Bring the bucket and what is owed up to now, the time since the last call paid at the share of now
        (requests come often while anyone is waiting for an answer). Called with the lock held."""
        now = self._clock()
        elapsed = max(0.0, now - self._at)
        self._at = now
        self._tokens = min(float(self.burst), self._tokens + elapsed * self.rate)
        if self._owed:
            self._owed = max(0.0, self._owed - elapsed * self._share())

    def _share(self) -> float:
        """The CPU seconds a second what is owed is paid back at now: `cpu_share` while the replica schedules."""
        return self.cpu_share if self._busy() else IDLE_SHARE
