"""The cyclic garbage collector kept off the scheduler's cache, and run on a clock rather than on allocations.

The informers' cache is most of the process (100,000 pods are millions of container objects) and holds no
cycles: refcounting frees each object when its informer replaces it. Left in the collector's sight, every
collection of the oldest generation walks all of it, taken by whichever pass or watch event crosses the
threshold: 0.3-0.8 s each at 100,000 pods. During the first LIST, each page's arrival triggered one more walk
of everything listed so far (8 walks, 0.95 s, at 10,000 pods). So what survives the young generations is frozen.

The collector's own thresholds are off too, from the first LIST on: the young generations are collected and
frozen at most once every `settle_every_seconds` (after a pass, or while waiting for changes). Collecting
them after every pass instead cost 7 % of the scheduler's CPU streaming pods at 10,000 nodes (py-spy, issue
23): a pass leaves young containers that hold the whole cache (the informers' copies of their tables, a
snapshot's rows), and a young collection reads every object they hold, ten times a second. Most of what a
pass makes is freed by refcounting before the next collection sees it; what is cyclic waits for it, so the
garbage cycles kept alive at once are at most what the process makes in `settle_every_seconds`. Seconds rather
than one: what lives a second or two (the last pass's snapshot, the informers' models of a pod bound and then
started, the writes in flight) is freed by refcounting before a collection reads it, and a drain's collections
read that much less.

What freezing costs: an object frozen while alive that later becomes part of an unreachable cycle is not
freed until the next full collection, which unfreezes everything first. That collection runs every
`full_every_seconds`, so such garbage (an exception's traceback kept past a pass, say) is bounded by what the
process makes in that time, and the pause it costs (a walk of everything) comes that often instead of several
times a minute.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable

FULL_EVERY_SECONDS = 600.0
SETTLE_EVERY_SECONDS = 5.0


class Heap:
    def __init__(
        self,
        full_every_seconds: float = FULL_EVERY_SECONDS,
        settle_every_seconds: float = SETTLE_EVERY_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.full_every_seconds = full_every_seconds
        self.settle_every_seconds = settle_every_seconds
        self._clock = clock
        self._last_full = self._last_settle = clock()

    def hold(self) -> None:
        """No collection but ours from now on: the caches are about to be listed."""
        gc.disable()

    def freeze(self) -> None:
        """Freeze everything as it is, without a collection: for what the informers have just listed, which
        holds no garbage cycles. Walking it first (1.7 s at 100,000 pods) only delayed the first pass; a cycle
        frozen with it is freed by the first full collection."""
        gc.freeze()
        self._last_settle = self._clock()

    def settle(self, full: bool = False) -> None:
        """Collect the young generations (everything, when `full` or when the last full collection is
        `full_every_seconds` old) and freeze what is left.

        Returns nothing: counting the frozen objects (`gc.get_freeze_count`) walks all of them, 58 ms at
        100,000 pods; done after every pass, it nearly doubled the scheduler's CPU per pod at that size."""
        now = self._clock()
        if full or now - self._last_full >= self.full_every_seconds:
            gc.unfreeze()
            gc.collect()
            self._last_full = now
        else:
            gc.collect(1)
        gc.freeze()
        self._last_settle = now

    def frozen(self) -> int:
        """How many objects are frozen: a walk of all of them, so for a log line once, not every pass."""
        return gc.get_freeze_count()

    def tick(self) -> None:
        """Settle if the last time was `settle_every_seconds` ago: after each pass, and while waiting for changes."""
        if self._clock() - self._last_settle >= self.settle_every_seconds:
            self.settle()
