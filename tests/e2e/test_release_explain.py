"""The explain API as a user installs it: `helm install phx` into `phx-system`, the chart's pods run by the pod runner.

The release is not called `phalanx`, and nothing but its own values says how its scheduler decides (bin-packing:
`scheduler.scoringStrategy.type=MostAllocated`). `kubectl phalanx` runs as `user`, bound to the release's viewer
ClusterRole in one namespace only: it finds the API by discovery, kube-apiserver forwards it to a scheduler pod
(the Service's endpoints, `--enable-aggregator-routing`) over TLS verified with the caBundle the webhook's
certificate controller injected, and the answer is that scheduler's. Killing the leader's pod interrupts nothing.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from importlib.metadata import version
from typing import Any

import pytest

from tests.chart.conftest import CHART, HELM_4, IMAGE_REPOSITORY, Helm, _extract_helm
from tests.e2e.control_plane import ControlPlane, Json
from tests.e2e.objects import Pool
from tests.e2e.plugin import kubectl_phalanx
from tests.e2e.runner import PodRunner
from tests.polling import wait_for

RELEASE = "phx"
NAMESPACE = "phx-system"
API_SERVICE = "/apis/apiregistration.k8s.io/v1/apiservices/v1alpha1.explain.phalanx.dev"
LEASE = f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases/{RELEASE}-phalanx-scheduler"


@pytest.fixture(scope="module")
def installed(cluster: ControlPlane, runner: PodRunner, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Helm]:
    helm = Helm(_extract_helm(tmp_path_factory.mktemp("helm4"), HELM_4), cluster.admin_kubeconfig)
    values = [
        *("--set", f"image.repository={IMAGE_REPOSITORY}", "--set", f"image.tag={version('phalanx')}"),
        *("--set", "scheduler.scoringStrategy.type=MostAllocated"),
    ]
    args = ("install", RELEASE, str(CHART), "--namespace", NAMESPACE, "--create-namespace", "--wait", *values)
    done = helm.run(*args, "--timeout", "3m", timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    try:
        yield helm
    finally:
        helm.run("uninstall", RELEASE, "--namespace", NAMESPACE, "--wait", timeout=180)


@pytest.fixture
def pool(cluster: ControlPlane, installed: Helm) -> Iterator[Pool]:
    made = Pool(cluster, "release-explain")
    made.api.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": made.namespace}})
    yield made
    made.teardown()


def allowed(api: Any, verb: str, resource: str, namespace: str = "", subresource: str = "", name: str = "") -> bool:
    """What the API server's own authorizer says of `user` doing this in `explain.phalanx.dev`: the served API must
    answer as it does (the suite's earlier tests on this control plane, such as the lifecycle's install as the
    unprivileged user, may have granted `user` more than this test does)."""
    attributes = {"group": "explain.phalanx.dev", "resource": resource, "verb": verb}
    attributes |= {k: v for k, v in (("namespace", namespace), ("subresource", subresource), ("name", name)) if v}
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {"user": "user", "resourceAttributes": attributes},
    }
    answer = api.create("/apis/authorization.k8s.io/v1/subjectaccessreviews", review)
    return bool(answer.get("status", {}).get("allowed"))


def available(api: Any) -> bool:
    conditions = ((api.get(API_SERVICE) or {}).get("status") or {}).get("conditions") or []
    return any(c["type"] == "Available" and c["status"] == "True" for c in conditions)


def explained(cluster: ControlPlane, namespace: str, *args: str) -> Any:
    done = kubectl_phalanx(cluster, "explain", "pod", "waiter", "-n", namespace, "-o", "json", *args)
    return json.loads(done.stdout) if done.returncode == 0 else None


def test_a_viewer_of_one_namespace_asks_the_releases_scheduler_through_the_api_server(
    cluster: ControlPlane, pool: Pool
) -> None:
    api = pool.api
    wait_for(lambda: available(api), timeout=90, what="kube-apiserver to find the explain API available")
    fuller, empty = pool.add_nodes(2, cpu="4")
    pool.create(
        pool.pod("keep", cpu="2", node=fuller),
        pool.pod("going-0", cpu="2", node=fuller, grace=600),
        pool.pod("going-1", cpu="4", node=empty, grace=600),
    )
    for name in ("going-0", "going-1"):  # nothing runs the pool's nodes: they stay Terminating
        assert api.delete(f"/api/v1/namespaces/{pool.namespace}/pods/{name}", grace_period_seconds=600).status == 200
    pool.create(pool.pod("waiter", cpu="2"))
    role = f"{RELEASE}-phalanx-viewer"
    api.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "viewer", "namespace": pool.namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "user"}],
        }
    )

    answer: Json = wait_for(lambda: explained(cluster, pool.namespace), timeout=60, what="an explanation for user")
    pods = {p["metadata"]["name"] for p in api.items(f"/api/v1/namespaces/{NAMESPACE}/pods")}
    assert answer["servedBy"]["replica"] in pods, "a pod of the release answered"
    assert answer["forecast"]["bound"] == [{"pod": f"{pool.namespace}/waiter", "node": fuller}], "MostAllocated"
    denied = kubectl_phalanx(cluster, "explain", "pod", "x", "-n", NAMESPACE)
    if allowed(api, "get", "pods", NAMESPACE, "explanation", "x"):  # granted by an earlier test: the pod is absent
        assert denied.returncode == 1 and 'pods "x" not found' in denied.stderr, denied.stderr
    else:
        assert denied.returncode == 1 and denied.stderr.startswith(
            'Error from server (Forbidden): pods.explain.phalanx.dev "x" is forbidden: User "user" cannot get resource '
            f'"pods/explanation" in API group "explain.phalanx.dev" in the namespace "{NAMESPACE}"'
        ), denied.stderr
    everywhere = kubectl_phalanx(cluster, "status", "-A")
    if allowed(api, "list", "pendingwork"):
        assert everywhere.returncode == 0 and f"{pool.namespace}" in everywhere.stdout, everywhere.stderr
    else:
        assert everywhere.returncode == 1 and "status -A needs list on pendingwork" in everywhere.stderr

    leader = (api.get(LEASE) or {}).get("spec", {}).get("holderIdentity")
    assert leader in pods
    killed = time.monotonic()
    api.delete(f"/api/v1/namespaces/{NAMESPACE}/pods/{leader}", grace_period_seconds=0)
    after: Json = wait_for(
        lambda: (a := explained(cluster, pool.namespace)) and a["servedBy"]["replica"] != leader and a,
        timeout=90,
        what="an explanation from another replica than the killed leader",
    )
    assert after["forecast"]["bound"] == answer["forecast"]["bound"]
    print(f"\nleader's pod killed -> answered by {after['servedBy']['replica']}: {time.monotonic() - killed:.1f} s")
