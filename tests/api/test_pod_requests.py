"""A pod's effective request, computed as kube-scheduler does (containers, init containers, sidecars, overhead)."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.api.pod import Pod


def container(name: str, restart_policy: str | None = None, **requests: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"name": name, "resources": {"requests": dict(requests)}}
    if restart_policy:
        spec["restartPolicy"] = restart_policy
    return spec


@pytest.mark.parametrize(
    ("spec", "want"),
    [
        pytest.param(
            {"containers": [container("a", cpu="1"), container("b", cpu="500m", memory="1Gi")]},
            {"cpu": 1500, "memory": 2**30},
            id="containers are summed",
        ),
        pytest.param(
            {"containers": [container("a", cpu="1")], "initContainers": [container("init", cpu="3")]},
            {"cpu": 3000},
            id="a larger init container dominates",
        ),
        pytest.param(
            {
                "containers": [container("a", cpu="1")],
                "initContainers": [container("sidecar", "Always", cpu="1"), container("init", cpu="2")],
            },
            {"cpu": 3000},
            id="init container runs beside the sidecars started before it",
        ),
        pytest.param(
            {
                "containers": [container("a", cpu="2")],
                "initContainers": [container("sidecar", "Always", cpu="500m"), container("init", cpu="1")],
            },
            {"cpu": 2500},
            id="sidecars add to the app containers",
        ),
        pytest.param(
            {"containers": [container("a", cpu="1")], "overhead": {"cpu": "250m"}},
            {"cpu": 1250},
            id="overhead is added",
        ),
        pytest.param(
            {"containers": [{"name": "a", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
            {"nvidia.com/gpu": 1},
            id="limits stand in for missing requests",
        ),
    ],
)
def test_effective_requests(spec: dict[str, Any], want: dict[str, int]) -> None:
    pod = Pod.model_validate({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec})
    assert pod.effective_requests() == want
