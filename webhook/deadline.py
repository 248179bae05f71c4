"""The time a review has left before the API server gives up on it.

The API server sends its webhook timeout with every call (`POST /mutate?timeout=5s`) and, past it, fails the
request with "context deadline exceeded": under `failurePolicy: Fail` the pod is not created, and nothing says
why. A review's reads of the cluster (`webhook/lookups.py`) therefore stop at this deadline: a best-effort
check is skipped, a required one answers with what could not be read. `SPARE_SECONDS` of the timeout are kept
for the answer's way back.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from contextvars import ContextVar

from scheduler.api.duration import DurationError, parse_duration

SPARE_SECONDS = 1.0
_deadline: ContextVar[float | None] = ContextVar("review_deadline", default=None)


@contextmanager
def review_within(timeout: str | None) -> Iterator[None]:
    """Run a review against the API server's `timeout` query parameter (absent or unreadable: no deadline)."""
    seconds = 0.0
    with suppress(DurationError):
        seconds = parse_duration(timeout or "0").total_seconds()
    deadline = time.monotonic() + max(0.0, seconds - SPARE_SECONDS) if seconds > 0 else None
    token = _deadline.set(deadline)
    try:
        yield
    finally:
        _deadline.reset(token)


def seconds_left() -> float | None:
    """Seconds until the current review must answer; None outside a review or without a timeout."""
    deadline = _deadline.get()
    return None if deadline is None else deadline - time.monotonic()
