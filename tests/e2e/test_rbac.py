"""Least privilege, proven against the real authorizer.

The scheduler and the webhook (with its certificate controller) run as the unprivileged `user`, bound
to exactly the Roles and ClusterRoles the chart renders, and the API server's audit log records every
request that identity makes. The whole suite must meet no 403, and every grant must have authorized at
least one request: take any grant away and that request is refused, which the first assertion catches.
Some paths are reached only by other tests (a look-up that misses the webhook's cache, a certificate
repaired, a write refused and retried), so this test runs last and reads the whole session's log.

`kubectl phalanx` runs as `user` too, which also holds the components' rights: its requests (told apart by
their user agent) must each be covered by the chart's viewer ClusterRole alone, and every grant of that role
must have been used by one of them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.chart.conftest import NAMESPACE
from tests.chart.rbac import Access, grants_of, role_grants
from tests.e2e.control_plane import Json, wait_for
from tests.e2e.objects import Pool
from tests.e2e.plugin import USER_AGENT, kubectl_phalanx
from tests.e2e.stack import Stack


def access_of(event: Json) -> Access:
    ref = event.get("objectRef", {})
    resource = "/".join(filter(None, (ref.get("resource"), ref.get("subresource"))))
    return Access(event["verb"], ref.get("apiGroup", ""), resource, ref.get("namespace", ""), ref.get("name", ""))


COMPONENT = "app.kubernetes.io/component"


def service_accounts(stack: Stack) -> dict[str, str]:
    """ServiceAccount -> the user agent of the component that runs as it (scheduler, webhook), for the two
    Deployments the suite runs (the uninstall hook's Job is not run here)."""
    return {
        d["spec"]["template"]["spec"]["serviceAccountName"]: f"phalanx-{d['metadata']['labels'][COMPONENT]}"
        for d in stack.of_kind("Deployment")
    }


def volumes(pool: Pool) -> None:
    """Two pods with claims of WaitForFirstConsumer classes on a node of their own: one is given a local volume
    (its claimRef patched), the other's claim is annotated with its node (and waits, as nothing provisions)."""
    [node] = pool.add_nodes(1, cpu="2")
    classes = {}
    for suffix, provisioner in (("local", "kubernetes.io/no-provisioner"), ("lazy", f"{pool.name}.example.com")):
        made = pool.cluster_object(
            {
                "apiVersion": "storage.k8s.io/v1",
                "kind": "StorageClass",
                "metadata": {"name": f"{pool.name}-{suffix}"},
                "provisioner": provisioner,
                "volumeBindingMode": "WaitForFirstConsumer",
            }
        )
        classes[suffix] = made["metadata"]["name"]
    hostname = {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}
    spec = {
        "capacity": {"storage": "1Gi"},
        "accessModes": ["ReadWriteOnce"],
        "storageClassName": classes["local"],
        "local": {"path": "/mnt/disk"},
        "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [hostname]}]}},
    }
    pool.cluster_object({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": pool.name}, "spec": spec})
    for suffix, storage_class in classes.items():
        claim_spec = {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": storage_class,
            "resources": {"requests": {"storage": "1Gi"}},
        }
        meta = {"name": suffix, "namespace": pool.namespace}
        pool.create({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta, "spec": claim_spec})
        made = pool.pod(f"vol-{suffix}")
        made["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": suffix}}]
        pool.create(made)
    pool.wait_bound(["vol-local"])

    def selected() -> bool:
        lazy = pool.api.get(f"/api/v1/namespaces/{pool.namespace}/persistentvolumeclaims/lazy") or {}
        return lazy.get("metadata", {}).get("annotations", {}).get("volume.kubernetes.io/selected-node") == node

    wait_for(selected, what="the lazy claim to name its node")


def full_run(pool: Pool) -> None:
    """Gates lifted, a gang bound, preemption of a PDB-covered pod with a grace period, Events and conditions,
    volumes bound and provisioning asked for, and `kubectl phalanx` explaining the gang and listing the namespace's
    pending work meanwhile."""
    volumes(pool)
    nodes = pool.add_nodes(2, cpu="4")
    low = pool.priority_class("low", 10)
    high = pool.priority_class("high", 100)
    for i, node in enumerate(nodes):
        pool.create(pool.pod(f"busy-{i}", cpu="4", priority_class=low, node=node, grace=30, labels={"app": "busy"}))
    pool.create(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "busy", "namespace": pool.namespace},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "busy"}}},
        }
    )
    pool.create(pool.pod_group("train", {"gang": {"minCount": 2}}, priority_class=high, disruption_mode="PodGroup"))
    pool.create(*(pool.pod(f"w{i}", cpu="4", group="train", priority_class=high) for i in range(2)))
    wait_for(lambda: len(pool.terminating()) == 2, what="both busy pods preempted")
    for args in (["explain", "podgroup", "train"], ["status"]):
        done = kubectl_phalanx(pool.plane, *args, "-n", pool.namespace)
        assert done.returncode == 0, done.stderr
    pool.finish_terminating()
    pool.wait_bound(["w0", "w1"])
    wait_for(lambda: pool.events("Scheduled"), what="Scheduled events")


def test_every_grant_is_used_and_nothing_is_forbidden(
    phalanx: Stack, pool: Pool, request: pytest.FixtureRequest
) -> None:
    here = Path(__file__).parent
    collected = {
        Path(str(item.fspath)).name for item in request.session.items if here in Path(str(item.fspath)).parents
    }
    if collected != {p.name for p in here.glob("test_*.py")}:
        pytest.skip("reads the audit log of the whole e2e suite: run all of tests/e2e")
    full_run(pool)
    plane = phalanx.plane
    forbidden = [str(access_of(e)) for e in plane.authorized("forbid")]
    assert forbidden == [], "requests RBAC refused our components:\n" + "\n".join(forbidden)
    # A look-up that finds nothing (404) or a write admission refuses needed its grant as much as a success.
    # Both components run as `user`: each one's requests are told apart by its user agent.
    allowed = plane.authorized("allow")
    unused: list[str] = []
    for account, component in service_accounts(phalanx).items():
        used = [access_of(e) for e in allowed if e.get("userAgent", "").startswith(f"{component}/")]
        assert used, f"no request with user agent {component}/..."
        unused += [
            f"{g} for {component}" for g in grants_of(phalanx.docs, NAMESPACE, account) if not any(map(g.covers, used))
        ]
    plugin = [access_of(e) for e in allowed if e.get("userAgent", "").startswith(USER_AGENT) and e.get("objectRef")]
    assert plugin, f"no request with user agent {USER_AGENT}..."
    viewer = role_grants(phalanx.viewer_role)
    beyond = sorted({str(a) for a in plugin if not any(g.covers(a) for g in viewer)})
    assert beyond == [], "kubectl phalanx asked for more than the viewer ClusterRole grants:\n" + "\n".join(beyond)
    unused += [f"{g} for kubectl phalanx" for g in viewer if not any(map(g.covers, plugin))]
    assert unused == [], "grants no request of the run needed:\n" + "\n".join(sorted(set(unused)))


def test_no_credential_reaches_a_log(phalanx: Stack) -> None:
    """Invariant 8 over everything the suite made our processes do, failures and retries included."""
    tokens = {phalanx.plane.env["KUBE_ADMIN_TOKEN"], phalanx.plane.user_token}
    logs = sorted(phalanx.work.glob("*.log"))
    assert logs, "the scheduler and webhook write their logs here"
    for log in logs:
        text = log.read_text(errors="replace")
        assert not [t for t in tokens if t in text], f"{log.name} holds a bearer token"
