"""Least privilege, proven against the real authorizer.

The scheduler and the webhook (with its certificate controller) run as the unprivileged `user`, bound
to exactly the Roles and ClusterRoles the chart renders, and the API server's audit log records every
request that identity makes. The whole suite must meet no 403, and every grant must have authorized at
least one request: take any grant away and that request is refused, which the first assertion catches.
Some paths are reached only by other tests (a look-up that misses the webhook's cache, a certificate
repaired, a write refused and retried), so this test runs last and reads the whole session's log.

The API server also authorizes some writes a second time, from inside: a change of a ResourceClaim's allocation or
reservations is checked on `resourceclaims/binding`, at cluster scope, and the audit log records only the request's
own check. `checks_of` (shared with the chart's test) adds that check to the status write that caused it, and
`test_a_claims_allocation_needs_resourceclaims_binding_at_cluster_scope` shows the server asks for it as said.

`kubectl phalanx` runs as `user` too, which also holds the components' rights: its requests (told apart by
their user agent) must each be covered by the chart's viewer ClusterRole alone, and every grant of that role
must have been used by one of them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.chart.conftest import NAMESPACE
from tests.chart.rbac import Access, checks_of, grants_of, role_grants
from tests.e2e.control_plane import Json
from tests.e2e.objects import Pool
from tests.e2e.plugin import USER_AGENT, kubectl_phalanx
from tests.e2e.stack import Stack
from tests.polling import wait_for


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


RESOURCE = "resource.k8s.io/v1"
DRIVER = "gpu.example.com"


def claim_for_one(device_class: str) -> Json:
    """A ResourceClaim's spec asking for one device of `device_class`."""
    return {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": device_class}}]}}


def devices(pool: Pool) -> None:
    """A pod whose ResourceClaim asks for the one device a node of its own publishes: DynamicResources' PreBind
    gives the claim its finalizer, then its allocation and reservation (checked on `resourceclaims/binding` too)."""
    [node] = pool.add_nodes(1, cpu="2")
    made = pool.cluster_object(
        {"apiVersion": RESOURCE, "kind": "DeviceClass", "metadata": {"name": f"{pool.name}-gpu"}, "spec": {}}
    )
    device_class = made["metadata"]["name"]
    spec = {
        "driver": DRIVER,
        "nodeName": node,
        "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
        "devices": [{"name": "gpu-0"}],
    }
    pool.cluster_object({"apiVersion": RESOURCE, "kind": "ResourceSlice", "metadata": {"name": node}, "spec": spec})
    meta = {"name": "gpu", "namespace": pool.namespace}
    pool.create(
        {"apiVersion": RESOURCE, "kind": "ResourceClaim", "metadata": meta, "spec": claim_for_one(device_class)}
    )
    made = pool.pod("gpu")
    made["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "gpu"}]
    pool.create(made)
    pool.wait_bound(["gpu"])
    claim = pool.api.get(f"/apis/{RESOURCE}/namespaces/{pool.namespace}/resourceclaims/gpu") or {}
    assert [r["name"] for r in claim.get("status", {}).get("reservedFor", [])] == ["gpu"], claim.get("status")


def full_run(pool: Pool) -> None:
    """Gates lifted, a gang bound, preemption of a PDB-covered pod with a grace period, Events and conditions,
    volumes bound and provisioning asked for, a device allocated, and `kubectl phalanx` explaining the gang and
    listing the namespace's pending work meanwhile."""
    volumes(pool)
    devices(pool)
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
        used = [
            c for e in allowed if e.get("userAgent", "").startswith(f"{component}/") for c in checks_of(access_of(e))
        ]
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


RBAC = "rbac.authorization.k8s.io"


def rbac_object(kind: str, name: str, namespace: str | None = None, **fields: Any) -> Json:
    meta = {"name": name} if namespace is None else {"name": name, "namespace": namespace}
    return {"apiVersion": f"{RBAC}/v1", "kind": kind, "metadata": meta, **fields}


def test_a_claims_allocation_needs_resourceclaims_binding_at_cluster_scope(phalanx: Stack, pool: Pool) -> None:
    """The check `checks_of` adds, as the real authorizer makes it: an identity holding the chart's `resource.k8s.io`
    rules but `resourceclaims/binding` cannot write the allocation the scheduler writes (the server's words below),
    nor with that right granted by a Role in the claim's namespace; with the chart's rules it can."""
    (role,) = [
        d
        for d in phalanx.of_kind("ClusterRole")
        if any("resource.k8s.io" in r.get("apiGroups", []) for r in d.get("rules") or [])
    ]
    rules = [r for r in role["rules"] if "resource.k8s.io" in r.get("apiGroups", [])]
    assert any("resourceclaims/binding" in r["resources"] for r in rules), rules
    without = [{**r, "resources": [x for x in r["resources"] if x != "resourceclaims/binding"]} for r in rules]
    probe = f"{pool.name}-probe"
    subject = {"kind": "User", "apiGroup": RBAC, "name": probe}
    pool.cluster_object(rbac_object("ClusterRole", probe, rules=without))
    ref = {"apiGroup": RBAC, "kind": "ClusterRole", "name": probe}
    pool.cluster_object(rbac_object("ClusterRoleBinding", probe, roleRef=ref, subjects=[subject]))
    meta = {"name": "probe", "namespace": pool.namespace}
    pool.create({"apiVersion": RESOURCE, "kind": "ResourceClaim", "metadata": meta, "spec": claim_for_one("gpu")})
    path = f"/apis/{RESOURCE}/namespaces/{pool.namespace}/resourceclaims/probe/status"
    as_probe = pool.plane.api_impersonating(probe)
    result = {"request": "gpu", "driver": DRIVER, "pool": "somewhere", "device": "gpu-0"}
    allocation = {"status": {"allocation": {"devices": {"results": [result]}}}}

    def answer(allowed: bool) -> str | None:
        """The refusal's message once the status write is no longer refused by its own check (403), or "" once it
        went through; None meanwhile."""
        reply = as_probe.patch(path, allocation)
        if reply.status == 200:
            return "" if allowed else None
        return reply.message if reply.status != 403 and not allowed else None

    refused = 'requires resource="resourceclaims/binding", verb="patch" permission'
    assert refused in wait_for(lambda: answer(False), what="the probe's ClusterRole in force")

    namespaced = {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims/binding"], "verbs": ["patch"]}
    pool.create(rbac_object("Role", probe, pool.namespace, rules=[namespaced]))
    pool.create(rbac_object("RoleBinding", probe, pool.namespace, roleRef={**ref, "kind": "Role"}, subjects=[subject]))
    attributes = {"namespace": pool.namespace, "group": "resource.k8s.io", "verb": "patch"}
    attributes |= {"resource": "resourceclaims", "subresource": "binding"}
    review: Json = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview"}
    review["spec"] = {"resourceAttributes": attributes}
    reviews = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
    wait_for(lambda: as_probe.create(reviews, review)["status"].get("allowed"), what="the probe's Role in force")
    assert refused in (answer(False) or ""), "a Role in the claim's namespace was enough"

    pool.api.apply(rbac_object("ClusterRole", probe, rules=rules))
    wait_for(lambda: answer(True) == "", what="the chart's rules to allow the allocation")
