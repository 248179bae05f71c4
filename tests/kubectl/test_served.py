"""`kubectl phalanx` on a live cluster, through the CLI and the loopback API server: the scheduler's explain API
where an APIService serves it (found by discovery, whatever the release is called), else the answer computed here
from a LIST of the cluster, said in one line.

The loopback server answers the explain API with the scheduler's own routes and answers on what it stores
(`tests/chart/traces.py` does the same), or with what a test makes it answer (a refusal, an outage); the real
kube-apiserver in front of the real scheduler is `tests/e2e/test_explain_api.py`.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from phalanx.kubectl.cli import main
from scheduler.serve.answers import status
from tests.apiserver.server import ApiServer
from tests.builders import make_node, make_pod, make_podgroup
from tests.chart.traces import explain_api_of

API = "/apis/explain.phalanx.dev/v1alpha1"
NOT_INSTALLED = "Warning: the scheduler's explain API (explain.phalanx.dev) is not installed on this cluster"


@pytest.fixture
def cluster(apiserver: ApiServer) -> ApiServer:
    """ml/train, a gang of two that fits nowhere, and ml/solo, a lone pod that fits."""
    for namespace in ("ml", "default"):
        apiserver.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    apiserver.create(make_node("n0").cap(cpu="4").json())
    apiserver.create(make_node("n1").cap(cpu="4").label("app", "x").json())
    apiserver.create(make_podgroup("train").ns("ml").gang(2).json())
    for i in range(2):
        apiserver.create(make_pod(f"w{i}").ns("ml").req(cpu="8").group("train").json())
    apiserver.create(make_pod("solo").ns("ml").req(cpu="1").label("app", "x").json())
    return apiserver


def run(capsys: pytest.CaptureFixture[str], server: ApiServer, tmp_path: Path, *args: str) -> tuple[int, str, str]:
    code = main([*args, "--kubeconfig", str(server.kubeconfig(tmp_path / "kubeconfig"))])
    out, err = capsys.readouterr()
    return code, out, err


def lists(server: ApiServer) -> list[str]:
    """The collections the command listed itself."""
    return sorted({r.path for r in server.requests if r.method == "GET" and not r.path.startswith(API)} - {API})


def test_where_the_api_is_served_the_answer_is_the_schedulers(
    cluster: ApiServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster.aggregated[API] = explain_api_of(cluster)
    code, out, err = run(capsys, cluster, tmp_path, "explain", "podgroup", "train", "-n", "ml")
    assert (code, err) == (0, "")
    assert "Name:          ml/train\n" in out
    assert out.endswith("Answered by:   traced (leader), its cache at resourceVersion " + out.rsplit(" ", 1)[1])
    code, out, err = run(capsys, cluster, tmp_path, "status", "-n", "ml", "-l", "app=x", "-o", "json")
    assert (code, err) == (0, "")
    document = json.loads(out)
    assert [u["unit"] for u in document["units"]] == ["ml/solo"], "the selector is the scheduler's to apply"
    assert document["totals"] == {"units": 1, "pods": 1, "byQueue": {"": 1}, "byReason": {"Pending": 1}}
    assert lists(cluster) == [], "no ConfigMap, no LIST: nothing but the API"
    asked = [r.path for r in cluster.requests if r.path.startswith(API + "/")]
    assert asked == [f"{API}/namespaces/ml/podgroups/train/explanation", f"{API}/namespaces/ml/pendingwork"]
    assert [r.query for r in cluster.requests if r.path == f"{API}/namespaces/ml/pendingwork"] == [
        {"labelSelector": "app=x"}
    ]


def test_without_the_api_the_answer_is_computed_here_and_said_so(
    cluster: ApiServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, cluster, tmp_path, "explain", "podgroup", "train", "-n", "ml")
    assert code == 0
    first, second = err.splitlines()
    assert first.startswith(NOT_INSTALLED)
    assert second == (
        "Warning: configmaps phalanx-system/phalanx-scheduler not found: explaining with the default "
        "SchedulerConfiguration (name the scheduler's ConfigMap with --scheduler-config NAMESPACE/NAME, or give "
        "--config FILE)"
    )
    assert "Name:          ml/train\n" in out and "Answered by" not in out
    assert "/api/v1/pods" in lists(cluster)


def test_a_scheduler_configmap_the_user_may_not_read_is_a_warning(
    cluster: ApiServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster.fail("GET", "/api/v1/namespaces/phx-system/configmaps/phx-phalanx-scheduler", 403)
    code, _, err = run(
        capsys, cluster, tmp_path, "status", "-A", "--scheduler-config", "phx-system/phx-phalanx-scheduler"
    )
    assert code == 0
    assert err.splitlines()[1].startswith("Warning: configmaps phx-system/phx-phalanx-scheduler forbidden: ")


@pytest.mark.parametrize(
    ("answer", "args", "want_err"),
    [
        pytest.param(
            (503, status(503, "ServiceUnavailable", "service unavailable")),
            ["explain", "pod", "solo", "-n", "ml"],
            "Error from server (ServiceUnavailable): service unavailable: the scheduler's explain API (APIService "
            "v1alpha1.explain.phalanx.dev) is registered but no scheduler answers: are the scheduler's pods running "
            "and Ready?\n",
            id="registered but nobody answers",
        ),
        pytest.param(
            (403, status(403, "Forbidden", 'pendingwork.explain.phalanx.dev is forbidden: User "u" cannot list')),
            ["status", "-A"],
            'Error from server (Forbidden): pendingwork.explain.phalanx.dev is forbidden: User "u" cannot list; '
            "status -A needs list on pendingwork.explain.phalanx.dev in every namespace (the chart's viewer "
            "ClusterRole, bound by a ClusterRoleBinding); -n NAMESPACE asks for one namespace\n",
            id="the cluster's pending work without cluster-wide rights",
        ),
        pytest.param(
            (400, status(400, "BadRequest", "pod ml/x is not scheduled by phalanx-scheduler")),
            ["explain", "pod", "x", "-n", "ml"],
            "error: pod ml/x is not scheduled by phalanx-scheduler\n",
            id="another scheduler's pod, said as the local answer says it",
        ),
    ],
)
def test_what_the_api_refuses_is_one_kubectl_line(
    cluster: ApiServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    answer: tuple[int, dict[str, Any]],
    args: list[str],
    want_err: str,
) -> None:
    served = explain_api_of(cluster)

    def handle(path: str, query: dict[str, str]) -> tuple[int, dict[str, Any]]:
        return served(path, query) if path == API else answer

    cluster.aggregated[API] = handle if answer[0] != 503 else (lambda path, query: answer)
    code, out, err = run(capsys, cluster, tmp_path, *args)
    assert (code, out, err) == (1, "", want_err)


@pytest.mark.parametrize(
    ("message", "retry_after", "want_err"),
    [
        ("too many explanations at once", 1, ""),
        (
            "explanations are held back: the last ones took the scheduler's CPU",
            2,
            "Waiting 2s: explanations are held back: the last ones took the scheduler's CPU\n",
        ),
    ],
    ids=["a short wait, silent", "a wait long enough to notice, said"],
)
def test_too_many_at_once_is_tried_again_after_retry_after(
    cluster: ApiServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    message: str,
    retry_after: int,
    want_err: str,
) -> None:
    served = explain_api_of(cluster)
    refused = [status(429, "TooManyRequests", message, {"retryAfterSeconds": retry_after})]

    def handle(path: str, query: dict[str, str]) -> tuple[int, dict[str, Any]]:
        if path != API and refused:
            return 429, refused.pop()
        return served(path, query)

    cluster.aggregated[API] = handle
    started = time.monotonic()
    code, _, err = run(capsys, cluster, tmp_path, "explain", "pod", "solo", "-n", "ml")
    assert (code, err) == (0, want_err)
    assert time.monotonic() - started >= retry_after, "waited as long as the scheduler said"
    assert len([r for r in cluster.requests if r.path.endswith("/pods/solo/explanation")]) == 2


def kubeconfig(server: ApiServer, path: Path, user: dict[str, Any], namespace: str | None = None) -> Path:
    """A kubeconfig of two contexts for the loopback server: `plain` (the current one) and `other`, whose user is
    `user` and whose namespace is `namespace`."""
    context = {"cluster": "loopback", "user": "other"} | ({"namespace": namespace} if namespace else {})
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "loopback", "cluster": {"server": server.url}}],
        "users": [{"name": "plain", "user": {"token": "t"}}, {"name": "other", "user": user}],
        "contexts": [
            {"name": "plain", "context": {"cluster": "loopback", "user": "plain"}},
            {"name": "other", "context": context},
        ],
        "current-context": "plain",
    }
    path.write_text(json.dumps(config))
    return path


@pytest.mark.parametrize(
    "user",
    [
        pytest.param({"tokenFile": "token"}, id="plain credentials, read by the command"),
        pytest.param({"username": "u", "password": "p"}, id="basic auth: the client's loader"),
    ],
)
def test_the_contexts_namespace_and_credentials_are_kubectls(
    cluster: ApiServer, tmp_path: Path, capsys: pytest.CaptureFixture[str], user: dict[str, Any]
) -> None:
    cluster.aggregated[API] = explain_api_of(cluster)
    (tmp_path / "token").write_text("from-a-file\n")
    path = kubeconfig(cluster, tmp_path / "config", user, namespace="ml")
    code = main(["status", "--kubeconfig", str(path), "--context", "other", "-o", "json"])
    out, err = capsys.readouterr()
    assert (code, err) == (0, "")
    assert [u["unit"] for u in json.loads(out)["units"]] == ["ml/solo", "ml/train"], "the context's namespace"
    (request,) = [r for r in cluster.requests if r.path.startswith(API + "/")]
    assert request.path == f"{API}/namespaces/ml/pendingwork"
    code = main(["status", "--kubeconfig", str(path), "--context", "nope"])
    assert (code, capsys.readouterr().err) == (1, 'error: context "nope" does not exist\n')


def test_the_plugin_names_the_podgroup_kinds_as_the_models_do() -> None:
    """The plugin's module does not import the models (a served answer needs none of them): the same strings."""
    from phalanx.kubectl import cli
    from scheduler.api.pod_group import API_VERSION, NATIVE_API_VERSION

    assert (cli.API_VERSION, cli.NATIVE_API_VERSION) == (API_VERSION, NATIVE_API_VERSION)
