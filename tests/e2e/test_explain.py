"""`kubectl phalanx explain|status` on the real API server, through kubectl's plugin mechanism, as the unprivileged
`user` bound to the chart's viewer ClusterRole: text and JSON, and bad input as one kubectl-style line.

The agreement of `explain`'s predictions with what the scheduler then does is checked in every preemption and
protection scenario (`test_preemption.py`, `test_protections.py`); the RBAC test proves the viewer role is
exactly what the plugin reads.
"""

from __future__ import annotations

import json

import yaml

from tests.e2e.objects import Pool
from tests.e2e.plugin import kubectl_phalanx
from tests.e2e.stack import Stack
from tests.polling import wait_for


def test_explain_and_status_tell_why_units_wait(phalanx: Stack, pool: Pool) -> None:
    (node,) = pool.add_nodes(1, cpu="4")
    low = pool.priority_class("low", 10)
    high = pool.priority_class("high", 100)
    pool.create(pool.pod("busy", cpu="4", priority_class=high, node=node, grace=0))
    pool.create(pool.pod_group("waiting", {"gang": {"minCount": 3}}, priority_class=low))
    pool.create(pool.pod("waiting-0", cpu="1", group="waiting", priority_class=low))
    pool.create(pool.pod_group("stuck", {"gang": {"minCount": 2}}, priority_class=low))
    pool.create(*(pool.pod(f"stuck-{i}", cpu="2", group="stuck", priority_class=low) for i in range(2)))
    pool.create(pool.pod("elsewhere", cpu="1", scheduler_name="default-scheduler"))
    plane, namespace = phalanx.plane, pool.namespace

    def stuck_said() -> bool:
        group = pool.api.get(f"/apis/scheduling.phalanx.dev/v1alpha1/namespaces/{namespace}/podgroups/stuck") or {}
        return any(c["reason"] == "Unschedulable" for c in group.get("status", {}).get("conditions", []))

    wait_for(stuck_said, what="the scheduler to say why stuck waits")

    done = kubectl_phalanx(plane, "status", "-n", namespace)
    assert done.returncode == 0, done.stderr
    table = done.stdout.split("\n\n")[0].splitlines()
    assert table[0].split() == ["NAME", "KIND", "PRIORITY", "QUEUE", "STATE", "MEMBERS", "AGE", "REASON"]
    rows = {line.split()[0]: line.split() for line in table[1:]}
    assert rows["stuck"][:6] == ["stuck", "PodGroup", "10", "<none>", "Unschedulable", "2/0/2"]
    assert rows["waiting"][:6] == ["waiting", "PodGroup", "10", "<none>", "WaitingForGang", "1/0/3"]
    assert "elsewhere" not in rows, "not ours: not Phalanx's pending work"
    listed = json.loads(kubectl_phalanx(plane, "-A", "status", "-o", "json").stdout)
    mine = {u["unit"]: u for u in listed["units"] if u["unit"].startswith(f"{namespace}/")}
    assert set(mine) == {f"{namespace}/stuck", f"{namespace}/waiting"}
    assert mine[f"{namespace}/stuck"]["message"].startswith(f"gang {namespace}/stuck needs 2 members, 0 can be placed")

    text = kubectl_phalanx(plane, "explain", "podgroup", "stuck", "-n", namespace).stdout
    assert f"Name:          {namespace}/stuck\n" in text
    assert "Placement now: 0 of 2 member(s) fit. 0/" in text
    assert "  - no unit below priority 10: raise the PodGroup's priority or add 1 node with 4 cpu free" in text, text
    explained = yaml.safe_load(kubectl_phalanx(plane, "explain", "pod/waiting-0", "-n", namespace, "-o", "yaml").stdout)
    assert explained["unit"]["key"] == f"{namespace}/waiting"
    assert explained["unblock"] == [{"message": "waiting for 2 more members: the gang needs 3", "at": None}]


def test_bad_input_is_one_kubectl_line_and_exit_1(phalanx: Stack, pool: Pool) -> None:
    pool.create(pool.pod("elsewhere", cpu="1", scheduler_name="default-scheduler"))
    plane, namespace = phalanx.plane, pool.namespace
    cases = [
        (["explain", "pod", "nope", "-n", namespace], 'Error from server (NotFound): pods "nope" not found'),
        (
            ["explain", "pod", "x", "-n", "no-such-namespace"],
            'Error from server (NotFound): namespaces "no-such-namespace" not found',
        ),
        (
            ["status", "-n", "no-such-namespace"],
            'Error from server (NotFound): namespaces "no-such-namespace" not found',
        ),
        (
            ["explain", "pod", "elsewhere", "-n", namespace],
            f"error: pod {namespace}/elsewhere is not scheduled by phalanx-scheduler (its spec.schedulerName is "
            "default-scheduler)",
        ),
    ]
    for args, want in cases:
        done = kubectl_phalanx(plane, *args)
        assert (done.returncode, done.stdout, done.stderr) == (1, "", want + "\n"), args
    # An identity without the viewer role (kube-scheduler's own) is refused, in one line.
    denied = kubectl_phalanx(plane, "status", "-A", kubeconfig=plane.dir / "scheduler.kubeconfig")
    assert denied.returncode == 1 and denied.stdout == "", denied
    assert denied.stderr.startswith("Error from server (Forbidden): ") and denied.stderr.count("\n") == 1, denied.stderr
    assert 'User "system:kube-scheduler" cannot' in denied.stderr
