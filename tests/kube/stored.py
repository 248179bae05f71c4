"""A pod as the test server stores it, read into our model: what the scheduler's writes left there."""

from __future__ import annotations

from scheduler.api.pod import Pod
from tests.apiserver import ApiServer


def stored_pod(server: ApiServer, name: str, namespace: str = "default") -> Pod:
    raw = server.get("pods", name, namespace)
    assert raw is not None, f"pod {namespace}/{name} is not stored"
    return Pod.model_validate(raw)
