"""InterPodAffinity: required pod affinity and anti-affinity, in both directions, as kube-scheduler filters them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from phalanx.cli import main
from tests.builders import (
    PodWrapper,
    make_namespace,
    make_node,
    make_pod,
    make_podgroup,
    make_priority_class,
    yaml_documents,
)
from tests.scheduler.scenario import run

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
AFFINITY = "node(s) didn't match pod affinity rules"
ANTI = "node(s) didn't match pod anti-affinity rules"
EXISTING = "node(s) didn't satisfy existing pods anti-affinity rules"


def nodes() -> list[object]:
    """n1 and n2 in zone a, n3 in zone b, n4 without a zone."""
    return [
        make_node("n1").label(ZONE, "a").obj(),
        make_node("n2").label(ZONE, "a").obj(),
        make_node("n3").label(ZONE, "b").obj(),
        make_node("n4").obj(),
    ]


def namespaces() -> list[object]:
    """`default` (env=prod), team-a (team=a) and team-b (team=b); `other` has no Namespace object."""
    return [
        make_namespace("default").label("env", "prod").obj(),
        make_namespace("team-a").label("team", "a").obj(),
        make_namespace("team-b").label("team", "b").obj(),
    ]


TEAM_A = {"matchLabels": {"team": "a"}}


@pytest.mark.parametrize(
    ("running", "pod", "want_nodes", "want_reason"),
    [
        pytest.param(
            [make_pod("db").label("app", "db").on("n1")],
            make_pod("p").pod_affinity(HOST, app="db"),
            {"n1"},
            AFFINITY,
            id="affinity on hostname joins the matching pod",
        ),
        pytest.param(
            [make_pod("db").label("app", "db").on("n1")],
            make_pod("p").pod_affinity(ZONE, app="db"),
            {"n1", "n2"},
            AFFINITY,
            id="affinity on zone allows the whole zone",
        ),
        pytest.param(
            [make_pod("db").label("app", "db").on("n1")],
            make_pod("p").pod_affinity(HOST, anti=True, app="db"),
            {"n2", "n3", "n4"},
            ANTI,
            id="anti-affinity on hostname avoids the node",
        ),
        pytest.param(
            [make_pod("db").label("app", "db").on("n1")],
            make_pod("p").pod_affinity(ZONE, anti=True, app="db"),
            {"n3", "n4"},
            ANTI,
            id="anti-affinity on zone avoids the zone; a node without the label is in no zone",
        ),
        pytest.param(
            [make_pod("db").label("app", "db").pod_affinity(ZONE, anti=True, app="web").on("n1")],
            make_pod("p").label("app", "web"),
            {"n3", "n4"},
            EXISTING,
            id="a running pod's anti-affinity keeps the pod out of its zone",
        ),
        pytest.param(
            [make_pod("db").ns("other").label("app", "db").on("n1")],
            make_pod("p").pod_affinity(HOST, anti=True, app="db"),
            {"n1", "n2", "n3", "n4"},
            None,
            id="a term looks in the pod's own namespace by default",
        ),
        pytest.param(
            [make_pod("db").ns("other").label("app", "db").on("n1")],
            make_pod("p").pod_affinity(HOST, anti=True, namespaces=["other"], app="db"),
            {"n2", "n3", "n4"},
            ANTI,
            id="namespaces names where the term looks",
        ),
        pytest.param(
            [make_pod("db").ns("other").label("app", "db").on("n1")],
            make_pod("p").pod_affinity(HOST, anti=True, namespace_selector={}, app="db"),
            {"n2", "n3", "n4"},
            ANTI,
            id="an empty namespaceSelector looks in every namespace",
        ),
        pytest.param(
            [make_pod("db").ns("team-a").label("app", "db").on("n1")],
            make_pod("p").pod_affinity(HOST, anti=True, namespace_selector=TEAM_A, app="db"),
            {"n2", "n3", "n4"},
            ANTI,
            id="anti-affinity with a namespaceSelector avoids the pods in the namespaces it selects",
        ),
        pytest.param(
            [make_pod("db").ns("team-b").label("app", "db").on("n1")],
            make_pod("p").pod_affinity(HOST, anti=True, namespace_selector=TEAM_A, app="db"),
            {"n1", "n2", "n3", "n4"},
            None,
            id="a namespaceSelector does not look in a namespace whose labels it does not match",
        ),
        pytest.param(
            [make_pod("db").ns("team-a").label("app", "db").on("n1")],
            make_pod("p").pod_affinity(HOST, namespace_selector=TEAM_A, app="db"),
            {"n1"},
            AFFINITY,
            id="affinity with a namespaceSelector joins a pod in a namespace it selects",
        ),
        pytest.param(
            [
                make_pod("db").ns("other").label("app", "db").on("n1"),
                make_pod("db").ns("team-a").label("app", "db").on("n3"),
            ],
            make_pod("p").pod_affinity(HOST, anti=True, namespaces=["other"], namespace_selector=TEAM_A, app="db"),
            {"n2", "n4"},
            ANTI,
            id="a term looks in the namespaces it lists and those its namespaceSelector selects",
        ),
        pytest.param(
            [make_pod("db").ns("other").label("app", "db").on("n1")],
            make_pod("p").pod_affinity(
                HOST,
                anti=True,
                namespace_selector={"matchExpressions": [{"key": "team", "operator": "DoesNotExist"}]},
                app="db",
            ),
            {"n2", "n3", "n4"},
            ANTI,
            id="a namespace without a Namespace object has no labels",
        ),
        pytest.param(
            [
                make_pod("db")
                .ns("team-a")
                .label("app", "db")
                .pod_affinity(ZONE, anti=True, namespace_selector={"matchLabels": {"env": "prod"}}, app="web")
                .on("n1")
            ],
            make_pod("p").label("app", "web"),
            {"n3", "n4"},
            EXISTING,
            id="a running pod's anti-affinity with a namespaceSelector keeps out the pods of the namespaces it selects",
        ),
        pytest.param(
            [
                make_pod("db")
                .ns("team-a")
                .label("app", "db")
                .pod_affinity(ZONE, anti=True, namespace_selector={"matchLabels": {"team": "b"}}, app="web")
                .on("n1")
            ],
            make_pod("p").label("app", "web"),
            {"n1", "n2", "n3", "n4"},
            None,
            id="a running pod's anti-affinity with a namespaceSelector lets in the pods of other namespaces",
        ),
        pytest.param(
            [],
            make_pod("p").label("app", "web").pod_affinity(ZONE, app="web"),
            {"n1", "n2", "n3"},
            AFFINITY,
            id="the first pod of a set with affinity to itself goes where the label is",
        ),
        pytest.param(
            [],
            make_pod("p").label("app", "web").pod_affinity(ZONE, app="db"),
            set(),
            AFFINITY,
            id="affinity to pods that do not exist places nothing",
        ),
        pytest.param(
            [
                make_pod("a").label("app", "web").label("rev", "1").on("n1"),
                make_pod("b").label("app", "web").label("rev", "2").on("n3"),
            ],
            make_pod("p").label("rev", "2").pod_affinity(HOST, match_label_keys=["rev"], app="web"),
            {"n3"},
            AFFINITY,
            id="matchLabelKeys adds the pod's own value",
        ),
        pytest.param(
            [
                make_pod("a").label("app", "web").label("rev", "1").on("n1"),
                make_pod("b").label("app", "web").label("rev", "2").on("n3"),
            ],
            make_pod("p").label("rev", "2").pod_affinity(HOST, anti=True, mismatch_label_keys=["rev"], app="web"),
            {"n2", "n3", "n4"},
            ANTI,
            id="mismatchLabelKeys excludes the pod's own value",
        ),
    ],
)
def test_inter_pod_affinity(
    running: list[PodWrapper], pod: PodWrapper, want_nodes: set[str], want_reason: str | None
) -> None:
    """Each node the filter allows is tried with its neighbours full; a rejected node is charged to the rule."""
    for node in ("n1", "n2", "n3", "n4"):
        objects = [*nodes(), *namespaces(), *(r.req(cpu="1").obj() for r in running)]
        fillers = [make_pod(f"fill-{n}").req(cpu="8").on(n).obj() for n in ("n1", "n2", "n3", "n4") if n != node]
        outcome = run(*objects, *fillers, pod.req(cpu="1").obj())
        bound = outcome.node_of("p")
        assert (bound == node) is (node in want_nodes), (node, bound, outcome.pending("p"))
        if node not in want_nodes:
            _, message = outcome.pending("p") or ("", "")
            assert f"1 {want_reason}" in message, message


def test_replicas_with_anti_affinity_spread_over_nodes() -> None:
    replicas = [make_pod(f"web-{i}").label("app", "web").pod_affinity(HOST, anti=True, app="web") for i in range(3)]
    outcome = run(make_node("n1").obj(), make_node("n2").obj(), *(r.req(cpu="1").obj() for r in replicas))
    assert sorted(outcome.bound.values()) == ["n1", "n2"]
    assert len(set(outcome.bound.values())) == 2
    pending = [p for p in outcome.report["pending"]]
    assert len(pending) == 1 and f"0/2 nodes are available: 2 {ANTI}." in pending[0]["message"]


def test_gang_members_placed_together_see_each_other() -> None:
    """A gang whose members repel each other on hostname is placed one member a node, or not at all."""
    members = [
        make_pod(f"m{i}").group("g").label("app", "g").pod_affinity(HOST, anti=True, app="g").req(cpu="1")
        for i in range(3)
    ]
    group = make_podgroup("g").gang(3).obj()
    spread = run(group, *(make_node(f"n{i}").obj() for i in range(3)), *(m.obj() for m in members))
    assert sorted(spread.bound.values()) == ["n0", "n1", "n2"]
    held = run(group, *(make_node(f"n{i}").obj() for i in range(2)), *(m.obj() for m in members))
    assert held.bound == {}
    _, message = held.pending("m0") or ("", "")
    assert "gang default/g needs 3 members, 2 can be placed" in message


def test_a_pod_without_terms_sees_the_terms_of_a_pod_placed_before_it_in_the_pass() -> None:
    """The filter and the score pass over a pod with no term of its own only while no running pod holds one
    against it: `db`, placed first in the pass, keeps `web` off the emptier node, and draws `cache` to the fuller."""
    high = make_priority_class("high", 1000).obj()
    kept_out = run(
        high,
        make_node("n1").obj(),
        make_node("n2").obj(),
        make_pod("busy").req(cpu="3").on("n2").obj(),
        make_pod("db").priority_class("high").req(cpu="1").pod_affinity(HOST, anti=True, app="web").obj(),
        make_pod("web").label("app", "web").req(cpu="1").obj(),
    )
    assert kept_out.bound == {"default/db": "n1", "default/web": "n2"}
    drawn = run(
        high,
        make_node("n1").label("disk", "ssd").obj(),
        make_node("n2").obj(),
        make_pod("busy").req(cpu="2").on("n1").obj(),
        make_pod("db")
        .priority_class("high")
        .req(cpu="1")
        .node_selector(disk="ssd")
        .pod_affinity(HOST, weight=100, app="cache")
        .obj(),
        make_pod("cache").label("app", "cache").req(cpu="1").obj(),
    )
    assert drawn.bound == {"default/db": "n1", "default/cache": "n1"}


def test_preemption_removes_the_pod_the_anti_affinity_excludes() -> None:
    """kube-scheduler 1.36.2 on the real server: a priority-1000 pod whose anti-affinity excludes a priority-10
    pod on the only node preempts it, and only it."""
    outcome = run(
        make_priority_class("low", 10).obj(),
        make_priority_class("high", 1000).obj(),
        make_node("n1").obj(),
        make_pod("db").label("app", "db").priority_class("low").priority(10).req(cpu="1").on("n1").obj(),
        make_pod("other").label("app", "x").priority_class("low").priority(10).req(cpu="1").on("n1").obj(),
        make_pod("p").priority_class("high").req(cpu="1").pod_affinity(HOST, anti=True, app="db").obj(),
        preempt=True,
    )
    assert outcome.node_of("p") == "n1"
    assert [v["victim"] for v in outcome.report["preemptions"]] == ["default/db"]


def test_preemption_removes_a_running_pod_whose_anti_affinity_excludes_the_preemptor() -> None:
    outcome = run(
        make_priority_class("low", 10).obj(),
        make_priority_class("high", 1000).obj(),
        make_node("n1").obj(),
        make_pod("db")
        .priority_class("low")
        .priority(10)
        .req(cpu="1")
        .pod_affinity(HOST, anti=True, app="web")
        .on("n1")
        .obj(),
        make_pod("p").label("app", "web").priority_class("high").req(cpu="1").obj(),
        preempt=True,
    )
    assert outcome.node_of("p") == "n1"
    assert [v["victim"] for v in outcome.report["preemptions"]] == ["default/db"]


def test_preemption_never_removes_the_pod_an_affinity_needs() -> None:
    """The only pod the preemptor's affinity matches is a candidate victim: taking it would break the
    affinity, so it stays and the preemptor waits."""
    outcome = run(
        make_priority_class("low", 10).obj(),
        make_priority_class("high", 1000).obj(),
        make_node("n1").cap(cpu="2").obj(),
        make_pod("db").label("app", "db").priority_class("low").priority(10).req(cpu="2").on("n1").obj(),
        make_pod("p").priority_class("high").req(cpu="1").pod_affinity(HOST, app="db").obj(),
        preempt=True,
    )
    assert outcome.report["preemptions"] == []
    assert outcome.node_of("p") is None


def test_anti_affinity_in_another_namespace_with_a_namespace_selector_waits_with_kube_schedulers_reason() -> None:
    """The pod's anti-affinity selects team-a by its labels, where the only node runs a matching pod."""
    outcome = run(
        make_node("n1").obj(),
        make_namespace("team-a").label("team", "a").obj(),
        make_pod("db").ns("team-a").label("app", "db").req(cpu="1").on("n1").obj(),
        make_pod("p").req(cpu="1").pod_affinity(HOST, anti=True, namespace_selector=TEAM_A, app="db").obj(),
    )
    reason, message = outcome.pending("p") or ("", "")
    assert reason == "Unschedulable"
    assert message.startswith(f"0/1 nodes are available: 1 {ANTI}.")


def test_simulate_reads_namespaces_from_a_dump_and_by_hand(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`kubectl get namespaces -o yaml` lists each with the label the API server gives it,
    `kubernetes.io/metadata.name`; a hand-written Namespace without that label reads the same. Each pod's
    anti-affinity selects a namespace by its labels and keeps the pod off the node of the pod running there."""
    dumped = {
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {
                    "name": "team-a",
                    "uid": "5e0c4b49-5f4f-4a55-9a43-5b6f0c1d2e3f",
                    "resourceVersion": "412",
                    "creationTimestamp": "2026-01-01T00:00:00Z",
                    "labels": {"kubernetes.io/metadata.name": "team-a", "team": "a"},
                },
                "spec": {"finalizers": ["kubernetes"]},
                "status": {"phase": "Active"},
            }
        ],
    }
    team_b = {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["team-b"]}]}
    objects = [
        make_node("n1").cap(cpu="4").obj(),
        make_node("n2").cap(cpu="4").obj(),
        make_namespace("team-b").obj(),
        make_pod("a").ns("team-a").label("app", "db").req(cpu="1").on("n1").obj(),
        make_pod("b").ns("team-b").label("app", "web").req(cpu="1").on("n2").obj(),
        make_pod("p").req(cpu="1").pod_affinity(HOST, anti=True, namespace_selector=TEAM_A, app="db").obj(),
        make_pod("q").req(cpu="1").pod_affinity(HOST, anti=True, namespace_selector=team_b, app="web").obj(),
    ]
    (tmp_path / "namespaces.yaml").write_text(yaml.safe_dump(dumped))
    (tmp_path / "pods.yaml").write_text(yaml_documents(objects))
    code = main(["simulate", "-o", "json", str(tmp_path / "namespaces.yaml"), str(tmp_path / "pods.yaml")])
    out, err = capsys.readouterr()
    assert code == 0, err
    report = json.loads(out)
    assert {b["pod"]: b["node"] for b in report["bindings"]} == {"default/p": "n2", "default/q": "n1"}
