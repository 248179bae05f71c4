from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.apiserver.server import ApiServer
from tests.webhook.harness import Webhook, running, seed


@pytest.fixture(scope="module")
def cluster() -> Iterator[ApiServer]:
    api = ApiServer().start()
    seed(api)
    yield api
    api.stop()


@pytest.fixture(scope="module")
def webhook(cluster: ApiServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Webhook]:
    directory: Path = tmp_path_factory.mktemp("webhook")
    yield from running(cluster, directory)
