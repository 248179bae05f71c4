"""Exponential backoff with full jitter, and the retry policy for API calls.

Jitter keeps a fleet of replicas (or informers) that failed together from retrying together.
Retried: 429 (honouring Retry-After), 5xx, timeouts and dropped connections. Not retried: the
answers that carry meaning (404, 409, 422), which the caller maps to outcomes.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

import structlog
import urllib3
from kubernetes.client.exceptions import ApiException

log = structlog.get_logger(__name__)

T = TypeVar("T")

_RNG = random.Random()
"""Shared: seeding a generator per call (from os.urandom) cost more than the jitter it drew."""

RETRIED_STATUS = frozenset({429, 500, 502, 503, 504})


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


def retry_after(exc: ApiException) -> float:
    headers = exc.headers or {}
    value = headers.get("Retry-After") if hasattr(headers, "get") else None
    try:
        return float(value) if value is not None else 0.0
    except ValueError:
        return 0.0


def is_transient(exc: BaseException) -> bool:
    if isinstance(exc, ApiException):
        return exc.status in RETRIED_STATUS or exc.status == 0
    return isinstance(exc, urllib3.exceptions.HTTPError | ConnectionError | TimeoutError)


def call_with_retry(
    operation: str,
    call: Callable[[], T],
    stop: threading.Event,
    attempts: int = 6,
    backoff: Backoff | None = None,
    on_retry: Callable[[str], None] | None = None,
) -> T:
    """Run `call`, retrying transient failures with jittered backoff; the last failure propagates."""
    backoff = backoff or Backoff()
    for attempt in range(1, attempts + 1):
        try:
            return call()
        except Exception as exc:
            if not is_transient(exc) or attempt == attempts or stop.is_set():
                raise
            floor = retry_after(exc) if isinstance(exc, ApiException) else 0.0
            delay = backoff.next_delay(floor)
            status = exc.status if isinstance(exc, ApiException) else type(exc).__name__
            log.warning("api call retried", operation=operation, attempt=attempt, status=status, delay=round(delay, 3))
            if on_retry is not None:
                on_retry(operation)
            stop.wait(delay)
    raise AssertionError("unreachable")
