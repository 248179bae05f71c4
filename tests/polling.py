"""Waiting in tests for what another process or thread does: poll a predicate until it holds."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def wait_for(predicate: Callable[[], Any], timeout: float = 30.0, interval: float = 0.05, what: str = "") -> Any:
    """The first truthy value of `predicate`, polled (at least once); fails the test with `what` after
    `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(
                f"timed out after {timeout:g}s waiting for {what or getattr(predicate, '__name__', predicate)}"
            )
        time.sleep(interval)
