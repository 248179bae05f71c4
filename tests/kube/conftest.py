"""Fixtures for the Kubernetes back end tests: a kubeconfig for the loopback server and replicas to run."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.apiserver import ApiServer
from tests.kube.replica import CliReplica, Replica


@pytest.fixture
def kubeconfig(apiserver: ApiServer, tmp_path: Path) -> Path:
    return apiserver.kubeconfig(tmp_path / "kubeconfig")


@pytest.fixture
def replicas() -> Iterator[list[Replica | CliReplica]]:
    """Started replicas are registered here and stopped (or killed) at teardown, even on failure."""
    started: list[Replica | CliReplica] = []
    yield started
    for replica in started:
        if isinstance(replica, Replica):
            replica.stop()
        elif replica.proc is not None and replica.proc.poll() is None:
            replica.kill()
