"""Fixtures for every suite: the loopback API server, and structlog put back after each test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import structlog

pytest_plugins = ["tests.apiserver.fixtures"]


@pytest.fixture(autouse=True)
def quiet_logs() -> Iterator[None]:
    """Undo process-wide structlog set-up (`phalanx` commands configure it to print to the stderr pytest
    captured for that test), so a later test never logs to a closed capture."""
    yield
    structlog.reset_defaults()
