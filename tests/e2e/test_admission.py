"""The webhook's rules through real admission: what kube-apiserver stores, what it refuses, and the message."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml

from tests.e2e.control_plane import Json, collection_path
from tests.e2e.objects import GATE, NATIVE, PHALANX, Pool
from tests.e2e.stack import Stack
from tests.polling import wait_for

GROUPS = "/apis/scheduling.phalanx.dev/v1alpha1/namespaces/{ns}/podgroups"


def group_path(pool: Pool, name: str, api_version: str = PHALANX) -> str:
    return f"/apis/{api_version}/namespaces/{pool.namespace}/podgroups/{name}"


def test_member_pod_gets_gate_and_scheduler_name(pool: Pool) -> None:
    pool.create(pool.pod_group("g", {"gang": {"minCount": 2}}))
    pod = pool.pod("p", group="g", scheduler_name=None)
    (created,) = pool.create(pod)
    assert created["spec"]["schedulerName"] == "phalanx-scheduler"
    assert [g["name"] for g in created["spec"]["schedulingGates"]] == [GATE]

    lone = pool.pod("lone", scheduler_name=None)
    (plain,) = pool.create(lone)
    assert plain["spec"]["schedulerName"] == "default-scheduler", "pods outside pod groups are left alone"
    assert "schedulingGates" not in plain["spec"]


def test_pod_group_priority_defaults_from_the_global_default_class(pool: Pool) -> None:
    default = pool.priority_class("default", 4242, globalDefault=True)
    group = pool.pod_group("g", {"gang": {"minCount": 1}})
    # the webhook learns of new PriorityClasses from its watch, as the Priority admission plugin does: wait for it
    dry_run = f"{collection_path(group)}?dryRun=All"
    wait_for(
        lambda: pool.api.request("POST", dry_run, group).body.get("spec", {}).get("priorityClassName") == default,
        what=f"the webhook to see {default}",
    )
    (made,) = pool.create(group)
    assert made["spec"]["priorityClassName"] == default
    assert made["spec"]["priority"] == 4242
    assert made["spec"]["disruptionMode"] == "Pod"


def test_pod_group_spec_is_immutable_but_status_is_not(pool: Pool) -> None:
    pool.create(pool.pod_group("g", {"gang": {"minCount": 2}}))
    path = group_path(pool, "g")
    reply = pool.api.patch(path, {"spec": {"schedulingPolicy": {"gang": {"minCount": 3}}}})
    assert reply.status in (400, 403, 422), reply.body
    assert "spec" in reply.message and "immutable" in reply.message, reply.message
    status = {
        "status": {
            "conditions": [
                {
                    "type": "PodGroupScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": "m",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                }
            ]
        }
    }
    assert pool.api.patch(path + "/status", status).status == 200


def test_invalid_pod_group_is_denied_naming_the_field(pool: Pool) -> None:
    bad = pool.pod_group("bad", {"gang": {"minCount": 2}, "basic": {}})
    reply = pool.api.request("POST", GROUPS.format(ns=pool.namespace), bad)
    assert reply.status in (400, 403, 422), reply.body
    assert "spec.schedulingPolicy" in reply.message, reply.message


def test_gates_only_go_and_membership_never_changes(pool: Pool) -> None:
    pool.create(pool.pod_group("g", {"gang": {"minCount": 2}}))
    pool.create(pool.pod("p", group="g"))
    path = f"/api/v1/namespaces/{pool.namespace}/pods/p"
    relabel = pool.api.patch(path, {"metadata": {"labels": {"scheduling.phalanx.dev/pod-group": "other"}}})
    assert relabel.status in (400, 403, 422) and "pod-group" in relabel.message, relabel.message
    add_gate = pool.api.patch(
        path,
        [{"op": "add", "path": "/spec/schedulingGates/-", "value": {"name": "example.com/new"}}],
        "application/json-patch+json",
    )
    assert add_gate.status == 422 and "schedulingGates" in add_gate.message, add_gate.message
    remove = pool.api.patch(
        path, [{"op": "replace", "path": "/spec/schedulingGates", "value": []}], "application/json-patch+json"
    )
    assert remove.status == 200, remove.message


def test_apply_burst_is_never_falsely_denied(phalanx: Stack, pool: Pool, tmp_path: Path) -> None:
    """kubectl apply of a new class, a child and parent Queue (the child first, as a folder sorted by file
    name may have it) and a PodGroup using them, in one go."""
    parent, child, cls = f"{pool.name}-org", f"{pool.name}-team", f"{pool.name}-burst"
    docs: list[Json] = [
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": cls}, "value": 777},
        {"apiVersion": PHALANX, "kind": "Queue", "metadata": {"name": child}, "spec": {"parentQueue": parent}},
        {"apiVersion": PHALANX, "kind": "Queue", "metadata": {"name": parent}, "spec": {"reclaimMinRuntime": "1m"}},
        {
            "apiVersion": PHALANX,
            "kind": "PodGroup",
            "metadata": {"name": "burst", "namespace": pool.namespace},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 1}}, "priorityClassName": cls, "queueName": child},
        },
    ]
    manifest = tmp_path / "burst.yaml"
    manifest.write_text(yaml.safe_dump_all(docs))
    for doc in docs[:3]:
        pool._cluster_objects.append(doc)
    kubectl = Path(phalanx.plane.env["KUBE_BIN"]) / "kubectl"
    done = subprocess.run(
        [str(kubectl), "--kubeconfig", str(phalanx.plane.admin_kubeconfig), "apply", "-f", str(manifest)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert f'Queue "{parent}" was not found' in done.stderr, done.stderr  # kubectl shows the warning
    made = pool.api.get(group_path(pool, "burst"))
    assert made is not None and made["spec"]["priority"] == 777


def test_native_pod_group_and_scheduling_group_pods(pool: Pool) -> None:
    """scheduling.k8s.io/v1alpha2 PodGroup, members by `spec.schedulingGroup` only: gated, then bound as a gang."""
    pool.add_nodes(1, cpu="4")
    high = pool.priority_class("high", 500)
    group = pool.pod_group("native", {"gang": {"minCount": 2}}, priority_class=high, api_version=NATIVE)
    (made,) = pool.create(group)
    assert made["spec"]["priority"] == 500
    members = ["n0", "n1"]
    created = pool.create(*(pool.pod(m, cpu="2", native_group="native", scheduler_name=None) for m in members))
    for pod in created:
        assert pod["spec"]["schedulerName"] == "phalanx-scheduler"
        assert GATE in [g["name"] for g in pod["spec"].get("schedulingGates", [])]
    pool.wait_bound(members)

    def scheduled() -> bool:
        conditions = (pool.api.get(group_path(pool, "native", NATIVE)) or {}).get("status", {}).get("conditions", [])
        return any(c["type"] == "PodGroupScheduled" and c["status"] == "True" for c in conditions)

    wait_for(scheduled, what="PodGroupScheduled=True on the native PodGroup")


def test_references_to_missing_objects(pool: Pool) -> None:
    """What admission looks up and does not find: denied when the object cannot be right, else a warning.

    Each look-up misses the webhook's caches and reads the API directly, under the webhook's RBAC.
    """
    missing_class = pool.pod_group("c", {"gang": {"minCount": 1}}, priority_class=f"{pool.name}-nope")
    reply = pool.api.request("POST", GROUPS.format(ns=pool.namespace), missing_class)
    assert reply.status in (400, 403, 422), reply.body
    assert "spec.priorityClassName" in reply.message and "no PriorityClass" in reply.message, reply.message

    # Ours: a warning (controllers create the two in either order). Native: kube-apiserver itself refuses it.
    for api_version, want_status in ((PHALANX, 201), (NATIVE, 403)):
        templated = pool.pod_group(f"t-{api_version.split('.')[0]}", {"gang": {"minCount": 1}}, api_version=api_version)
        templated["spec"]["podGroupTemplateRef"] = {"workload": {"workloadName": "w", "podGroupTemplateName": "t"}}
        reply = pool.api.request("POST", f"/apis/{api_version}/namespaces/{pool.namespace}/podgroups", templated)
        assert reply.status == want_status, reply.message
        assert any("workloadName" in w and "not found" in w for w in reply.warnings), reply.warnings

    orphan = pool.api.request("POST", f"/api/v1/namespaces/{pool.namespace}/pods", pool.pod("orphan", group="none"))
    assert orphan.status == 201, orphan.message
    native_orphan = pool.pod("native-orphan", native_group="none", scheduler_name=None)
    reply = pool.api.request("POST", f"/api/v1/namespaces/{pool.namespace}/pods", native_orphan)
    assert reply.status == 201, reply.message
    assert [g["name"] for g in reply.body["spec"]["schedulingGates"]] == [GATE]

    child = {"apiVersion": PHALANX, "kind": "Queue", "metadata": {"name": f"{pool.name}-child"}}
    child["spec"] = {"parentQueue": f"{pool.name}-absent"}
    reply = pool.api.request("POST", "/apis/scheduling.phalanx.dev/v1alpha1/queues", child)
    if reply.status == 201:
        pool._cluster_objects.append(child)
    assert reply.status == 201, reply.message  # a tree applied in any order is never refused
    assert any("spec.parentQueue" in w and "was not found" in w for w in reply.warnings), reply.warnings
