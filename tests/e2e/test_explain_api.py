"""The scheduler's explain API through the real kube-apiserver: its configuration, each user's rights, the front proxy.

The stack registers the chart's APIService and the scheduler serves it (`tests/e2e/stack.py`); `kubectl phalanx`
finds it by discovery and asks it through kube-apiserver, which authenticates the user, authorizes the request and
forwards it with the user's identity over its front proxy. Every other e2e test that runs `kubectl phalanx` goes
through it too (the agreement of `explain`'s predictions with the scheduler's decisions: `test_preemption.py`,
`test_protections.py`, with a paused replica, a standby, answering).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import urllib3
import yaml

from tests.e2e.control_plane import Json
from tests.e2e.objects import Pool
from tests.e2e.plugin import explain, kubectl_phalanx
from tests.e2e.stack import LOOPBACK, Stack
from tests.polling import wait_for

API = "/apis/explain.phalanx.dev/v1alpha1"
MOST_ALLOCATED = {"type": "MostAllocated", "resources": {"cpu": 1, "memory": 1}}


def condition(pod: Json | None, kind: str) -> Json | None:
    return next((c for c in (pod or {}).get("status", {}).get("conditions", []) if c["type"] == kind), None)


def test_the_answer_is_the_running_schedulers_with_its_configuration(
    phalanx: Stack, pool: Pool, tmp_path: Path
) -> None:
    """A pod that fits once two terminating pods are gone: a node half full, and an empty one. The scheduler bin-packs
    (MostAllocated): the answer predicts the fuller node, where the default configuration says the empty one (the
    same objects, dumped and explained by the command), and the scheduler then binds it there."""
    assert phalanx.scheduler is not None
    phalanx.scheduler.stop()
    phalanx.start_scheduler(scoringStrategy=MOST_ALLOCATED)
    try:
        fuller, empty = pool.add_nodes(2, cpu="4")
        pool.create(
            pool.pod("keep", cpu="2", node=fuller),
            pool.pod("going-0", cpu="2", node=fuller, grace=600),
            pool.pod("going-1", cpu="4", node=empty, grace=600),
        )
        for name in ("going-0", "going-1"):
            reply = pool.api.delete(f"/api/v1/namespaces/{pool.namespace}/pods/{name}", grace_period_seconds=600)
            assert reply.status == 200, reply.message
        pool.create(pool.pod("waiter", cpu="2"))
        scheduled = lambda: condition(pool.read_pod("waiter"), "PodScheduled")  # noqa: E731
        wait_for(lambda: (scheduled() or {}).get("reason") == "Unschedulable", what="the scheduler to try the waiter")

        served = explain(phalanx.plane, pool.namespace, "pod", "waiter")
        assert served["servedBy"]["replica"] == phalanx.scheduler.name and served["servedBy"]["leader"] is True
        assert served["forecast"]["bound"] == [{"pod": f"{pool.namespace}/waiter", "node": fuller}]
        # the same objects, as `kubectl get -o yaml` dumps them, explained by the command with the default configuration
        default = tmp_path / "default.yaml"
        default.write_text("apiVersion: scheduling.phalanx.dev/v1alpha1\nkind: SchedulerConfiguration\n")
        nodes = [pool.api.get(f"/api/v1/nodes/{n}") for n in (fuller, empty)]
        dump = tmp_path / "dump.yaml"
        pods = [{"apiVersion": "v1", "kind": "Pod", **p} for p in pool.pods().values()]  # a list's items name neither
        dump.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [*nodes, *pods]}))
        args = ("-f", str(dump), "--now", served["time"], "--config", str(default))
        local = kubectl_phalanx(phalanx.plane, "explain", "pod", "waiter", "-n", pool.namespace, "-o", "json", *args)
        assert local.returncode == 0, local.stderr
        elsewhere = json.loads(local.stdout)
        assert elsewhere["forecast"]["bound"] == [{"pod": f"{pool.namespace}/waiter", "node": empty}], elsewhere
        assert "servedBy" not in elsewhere, "computed by the command, with that configuration"

        pool.finish_terminating()
        assert pool.wait_bound(["waiter"]) == {"waiter": fuller}, "the scheduler did what its answer said"
    finally:
        phalanx.scheduler.stop()
        phalanx.start_scheduler()


def test_a_user_reads_the_explanations_of_the_namespaces_rbac_lets_it_read(phalanx: Stack, pool: Pool) -> None:
    """kube-scheduler's identity, which may read every pod but nothing of the explain API, bound to the chart's
    viewer ClusterRole in the pool's namespace only: explanations there; 403 in another namespace and for the
    cluster's pending work, said plainly."""
    pool.create(pool.pod("solo", cpu="1"))
    role = phalanx.viewer_role["metadata"]["name"]
    other = f"{pool.namespace}-other"
    pool.api.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": other}})
    try:
        pool.create(pool.pod("solo", cpu="1") | {"metadata": {"name": "solo", "namespace": other}})
        kubeconfig = phalanx.plane.dir / "scheduler.kubeconfig"
        user = 'User "system:kube-scheduler" cannot'
        denied = kubectl_phalanx(phalanx.plane, "explain", "pod", "solo", "-n", pool.namespace, kubeconfig=kubeconfig)
        assert denied.returncode == 1 and user in denied.stderr, "not bound: nothing of the API"
        binding = {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "viewer", "namespace": pool.namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "system:kube-scheduler"}],
        }
        pool.api.apply(binding)

        def explained() -> Any:
            done = kubectl_phalanx(phalanx.plane, "explain", "pod", "solo", "-n", pool.namespace, kubeconfig=kubeconfig)
            return done if done.returncode == 0 else None

        assert "Answered by:" in wait_for(explained, what="the RoleBinding to take effect").stdout
        listed = kubectl_phalanx(phalanx.plane, "status", "-n", pool.namespace, kubeconfig=kubeconfig)
        assert listed.returncode == 0 and listed.stdout.splitlines()[1].split()[:2] == ["solo", "Pod"], listed
        there = kubectl_phalanx(phalanx.plane, "explain", "pod", "solo", "-n", other, kubeconfig=kubeconfig)
        assert there.returncode == 1
        assert there.stderr == (
            'Error from server (Forbidden): pods.explain.phalanx.dev "solo" is forbidden: User "system:kube-scheduler" '
            'cannot get resource "pods/explanation" in API group "explain.phalanx.dev" in the namespace '
            f'"{other}"\n'
        )
        everywhere = kubectl_phalanx(phalanx.plane, "status", "-A", kubeconfig=kubeconfig)
        assert everywhere.returncode == 1 and everywhere.stderr.count("\n") == 1
        assert everywhere.stderr.startswith("Error from server (Forbidden): pendingwork.explain.phalanx.dev is")
        assert everywhere.stderr.rstrip().endswith("-n NAMESPACE asks for one namespace")
    finally:
        pool.api.delete(f"/api/v1/namespaces/{other}")


@pytest.fixture
def front_proxy(phalanx: Stack) -> tuple[str, str]:
    """kube-apiserver's own front-proxy client certificate and key (`../shared/kube`'s `pki/`)."""
    pki = phalanx.plane.dir / "pki"
    return str(pki / "front-proxy-client.crt"), str(pki / "front-proxy-client.key")


def direct(phalanx: Stack, path: str, user: str | None, certificate: tuple[str, str] | None) -> tuple[int, Json]:
    """GET `path` of the scheduler's own port, as the front proxy would send it (or without its certificate)."""
    ca = phalanx.work / "webhook-certs" / "ca.crt"
    cert, key = certificate or (None, None)
    pool = urllib3.PoolManager(ca_certs=str(ca), cert_file=cert, key_file=key, retries=False)
    headers = {"X-Remote-User": user, "X-Remote-Group": "system:authenticated"} if user else {}
    reply = pool.request("GET", f"https://{LOOPBACK}:{phalanx.explain_port}{path}", headers=headers, timeout=30)
    return reply.status, json.loads(reply.data)


def test_the_scheduler_hears_only_the_front_proxy_and_asks_the_authorizer_itself(
    phalanx: Stack, pool: Pool, front_proxy: tuple[str, str]
) -> None:
    """Past kube-apiserver, as a caller on the pod network would reach it: without the front proxy's certificate,
    401; with it, the user it names is authorized again by a SubjectAccessReview: `user` (the viewer role) may,
    kube-scheduler's identity may not."""
    pool.create(pool.pod("solo", cpu="1"))
    path = f"{API}/namespaces/{pool.namespace}/pods/solo/explanation"
    code, body = direct(phalanx, path, "user", None)
    assert (code, body["reason"]) == (401, "Unauthorized")
    code, body = direct(phalanx, path, "system:kube-scheduler", front_proxy)
    assert (code, body["reason"]) == (403, "Forbidden")
    assert body["message"].startswith(
        'pods.explain.phalanx.dev "solo" is forbidden: User "system:kube-scheduler" cannot get resource '
        f'"pods/explanation" in API group "explain.phalanx.dev" in the namespace "{pool.namespace}"'
    )
    code, body = direct(phalanx, path, "user", front_proxy)
    assert code == 200 and body["unit"]["key"] == f"{pool.namespace}/solo"
