"""The `apiserver` pytest fixture: a fresh loopback API server per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.apiserver.server import ApiServer


@pytest.fixture
def apiserver() -> Iterator[ApiServer]:
    server = ApiServer(bookmark_interval=0.5).start()
    try:
        yield server
    finally:
        server.stop()
