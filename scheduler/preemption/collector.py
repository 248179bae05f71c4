"""The cyclic garbage collector held off while a preemption decision is made.

A decision allocates thousands of small objects (spared units, reasons, victims), enough to trigger a
collection of the oldest generation, which walks every object of the process: at 100,000 pods that is a
pause several times the search itself, taken by whichever decision happens to cross the threshold (the
search's p99, issue 23). Nothing a decision makes is cyclic, so the collector loses nothing by waiting.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused() -> Iterator[None]:
    """Disable the cyclic collector for the block; re-enable it after unless it was already off (nests)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
