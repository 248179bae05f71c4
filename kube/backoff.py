"""Exponential backoff with full jitter, and the retry policy for API calls.

Jitter keeps a fleet of replicas (or informers) that failed together from retrying together.
Retried: `TooManyRequests` (honouring Retry-After) and `Unavailable` (5xx, timeouts, dropped
connections). Not retried: the answers that carry meaning (`NotFound`, `Conflict`, `Invalid`), which
the caller maps to outcomes. These are the only retries: the client's own (urllib3's, three more tries of
a GET, PUT or DELETE that timed out) are off (`kube.client`).
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

import structlog

from kube.errors import api_error, retried

log = structlog.get_logger(__name__)

T = TypeVar("T")

_RNG = random.Random()
"""Shared: seeding a generator per call (from os.urandom) cost more than the jitter it drew."""


@dataclass(slots=True)
class Backoff:
    initial: float = 0.05
    maximum: float = 5.0
    attempt: int = 0
    rng: random.Random = field(default=_RNG)

    def next_delay(self, floor: float = 0.0) -> float:
        """The next wait: uniform in [0, min(max, initial * 2^attempt)], at least `floor` (Retry-After)."""
        ceiling = min(self.maximum, self.initial * (2**self.attempt))
        self.attempt += 1
        return max(floor, self.rng.uniform(0.0, ceiling))

    def reset(self) -> None:
        self.attempt = 0


def call_with_retry(
    operation: str,
    call: Callable[[], T],
    stop: threading.Event,
    attempts: int = 6,
    backoff: Backoff | None = None,
    on_retry: Callable[[str], None] | None = None,
) -> T:
    """Run `call`, retrying `TooManyRequests` and `Unavailable` with jittered backoff; the last failure propagates."""
    backoff = backoff or Backoff()
    for attempt in range(1, attempts + 1):
        try:
            return call()
        except Exception as exc:
            err = api_error(exc)
            if err is None or not retried(err) or attempt == attempts or stop.is_set():
                raise
            delay = backoff.next_delay(err.retry_after)
            status = err.status or type(exc).__name__
            log.warning("api call retried", operation=operation, attempt=attempt, status=status, delay=round(delay, 3))
            if on_retry is not None:
                on_retry(operation)
            stop.wait(delay)
    raise AssertionError("unreachable")
