"""KEP-5710 acceptance scenarios end to end through `phalanx simulate -o json` (issue 3, Acceptance)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from phalanx.cli import main
from tests.builders import make_node, make_pod, make_podgroup, make_priority_class, yaml_documents

NOW = "2026-01-01T01:00:00Z"
STARTED = datetime(2026, 1, 1, 0, 30, tzinfo=UTC)
CLASSES = [
    make_priority_class("low", 10).json(),
    make_priority_class("mid", 100).json(),
    make_priority_class("high", 1000).json(),
    make_priority_class("polite", 1000).never().json(),
]


def nodes(count: int, cpu: str = "4") -> list[dict[str, Any]]:
    return [make_node(f"n{i}").cap(cpu=cpu).json() for i in range(1, count + 1)]


def running(name: str, node: str, cpu: str, klass: str = "low", **labels: str) -> dict[str, Any]:
    pod = make_pod(name).req(cpu=cpu).priority_class(klass).on(node, started=STARTED)
    for key, value in labels.items():
        pod.label(key, value)
    return pod.json()


def gang(name: str, size: int, cpu: str, min_count: int | None = None, klass: str = "high") -> list[dict[str, Any]]:
    group = make_podgroup(name).gang(min_count or size).priority_class(klass).json()
    return [group, *(make_pod(f"{name}-{i}").req(cpu=cpu).group(name).json() for i in range(size))]


def pending_pod(name: str, cpu: str, klass: str = "high") -> dict[str, Any]:
    return make_pod(name).req(cpu=cpu).priority_class(klass).json()


def simulate(capsys: pytest.CaptureFixture[str], tmp_path: Path, objects: list[dict[str, Any]], *extra: str) -> Any:
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml_documents(CLASSES + objects))
    assert main(["simulate", str(path), "--now", NOW, "--until", "10m", *extra]) == 0
    out = capsys.readouterr().out
    return json.loads(out) if "json" in extra else out


def six_on_two_nodes() -> list[dict[str, Any]]:
    """Issue 11, defect 3: n1 runs 2 CPU at priority 10, n2 4 CPU at priority 5; six 1-CPU members
    need only the priority-5 pod gone (2 + 4 CPU)."""
    return [
        make_priority_class("lowest", 5).json(),
        *nodes(2),
        running("p10", "n1", "2"),
        running("p5", "n2", "4", "lowest"),
        *(make_pod(f"six-{i}").req(cpu="1").group("six").json() for i in range(6)),
    ]


@dataclass
class Case:
    objects: list[dict[str, Any]]
    want_preempted: set[str]
    want_bound: dict[str, str] = field(default_factory=dict)
    want_pending: dict[str, str] = field(default_factory=dict)
    want_kind: str | None = None


CASES = [
    pytest.param(
        Case(
            [
                *nodes(2),
                make_podgroup("old").gang(2).priority_class("low").disruption_mode("PodGroup").json(),
                make_pod("old-0").req(cpu="4").group("old").on("n1", STARTED).json(),
                make_pod("old-1").req(cpu="4").group("old").on("n2", STARTED).json(),
                *gang("train", 2, "4"),
            ],
            {"default/old-0", "default/old-1"},
            {"default/train-0": "", "default/train-1": ""},
            want_kind="PodGroup",
        ),
        id="full gang preemption: a gang preempts a whole PodGroup-mode gang",
    ),
    pytest.param(
        Case(
            [
                *nodes(1),
                running("low-a", "n1", "4"),
                make_podgroup("web").basic().priority_class("high").json(),
                make_pod("web-0").req(cpu="2").group("web").json(),
                make_pod("web-1").req(cpu="2").group("web").json(),
            ],
            {"default/low-a"},
            {"default/web-0": "n1", "default/web-1": "n1"},
        ),
        id="basic policy group preempts for its members",
    ),
    pytest.param(
        Case(
            [
                *nodes(2),
                running("a1", "n1", "1"),
                running("b1", "n1", "3"),
                running("a2", "n2", "1"),
                running("b2", "n2", "3"),
                *gang("train", 2, "3"),
            ],
            {"default/b1", "default/b2"},
            {"default/train-0": "", "default/train-1": ""},
        ),
        id="partial preemption across two nodes keeps the pods that still fit",
    ),
    pytest.param(
        Case(
            [
                *nodes(2),
                running("db-0", "n1", "4", app="db"),
                running("batch", "n2", "4"),
                {
                    "apiVersion": "policy/v1",
                    "kind": "PodDisruptionBudget",
                    "metadata": {"name": "db", "namespace": "default"},
                    "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}},
                },
                pending_pod("urgent", "4"),
            ],
            {"default/batch"},
            {"default/urgent": "n2"},
        ),
        id="PDB: the pod the budget protects is reprieved",
    ),
    pytest.param(
        Case(
            [*nodes(4), *(running(f"low-{i}", f"n{i}", "4") for i in range(1, 5)), *gang("train", 4, "4")],
            {f"default/low-{i}" for i in range(1, 5)},
            {f"default/train-{i}": "" for i in range(4)},
            want_kind="PodGroup",
        ),
        id="multi-node gang preempts one pod on each of four nodes",
    ),
    pytest.param(
        Case(
            [*nodes(2), running("low-1", "n1", "4"), running("low-2", "n2", "4"), *gang("train", 3, "4")],
            set(),
            want_pending={"default/train-0": "places 2 of 3 members; the gang needs 3"},
        ),
        id="insufficient resources: nothing is preempted",
    ),
    pytest.param(
        Case(
            [*nodes(2), running("mid-1", "n1", "4", "mid"), running("low-2", "n2", "4"), pending_pod("urgent", "4")],
            {"default/low-2"},
            {"default/urgent": "n2"},
            want_kind="Pod",
        ),
        id="the lower-priority victim is chosen over the higher-priority one",
    ),
    pytest.param(
        Case(
            [
                *nodes(2),
                make_podgroup("g").gang(2).priority_class("low").disruption_mode("PodGroup").json(),
                make_pod("g-0").req(cpu="4").group("g").on("n1", STARTED).json(),
                make_pod("g-1").req(cpu="4").group("g").on("n2", STARTED).json(),
                pending_pod("urgent", "4"),
            ],
            {"default/g-0", "default/g-1"},
            {"default/urgent": ""},
        ),
        id="a PodGroup-mode group is preempted whole although one pod would suffice",
    ),
    pytest.param(
        Case(
            [
                *nodes(1),
                make_podgroup("g").basic().priority_class("low").json(),
                make_pod("g-0").req(cpu="4").group("g").priority_class("high").on("n1", STARTED).json(),
                pending_pod("urgent", "4", "mid"),
            ],
            {"default/g-0"},
            {"default/urgent": "n1"},
        ),
        id="the PodGroup's low priority wins over its pod's high priority",
    ),
    pytest.param(
        Case(
            [
                *nodes(1),
                make_podgroup("g").basic().priority_class("high").json(),
                make_pod("g-0").req(cpu="4").group("g").priority_class("low").on("n1", STARTED).json(),
                pending_pod("urgent", "4", "mid"),
            ],
            set(),
            want_pending={"default/urgent": "no unit has a priority lower than 100"},
        ),
        id="the PodGroup's high priority wins over its pod's low priority",
    ),
    pytest.param(
        Case(
            [
                *nodes(2),
                make_podgroup("g").basic().priority_class("low").disruption_mode("Pod").json(),
                make_pod("g-0").req(cpu="4").group("g").on("n1", STARTED).json(),
                make_pod("g-1").req(cpu="4").group("g").on("n2", datetime(2026, 1, 1, 0, 40, tzinfo=UTC)).json(),
                pending_pod("urgent", "4"),
            ],
            {"default/g-1"},
            {"default/urgent": "n2"},
        ),
        id="a plain pod preempts one member of a Pod-mode group, the one started last",
    ),
    pytest.param(
        Case(
            [*nodes(2), running("a", "n1", "4"), running("b", "n2", "2"), *gang("train", 4, "2", min_count=2)],
            {"default/a", "default/b"},
            {f"default/train-{i}": "" for i in range(4)},
        ),
        id="reprieval never reduces how many gang members are placed",
    ),
    pytest.param(
        Case(
            [*nodes(1), running("low-1", "n1", "4"), pending_pod("polite", "4", "polite")],
            set(),
            want_pending={"default/polite": "preemptionPolicy is Never"},
        ),
        id="preemptionPolicy Never preempts nothing",
    ),
    pytest.param(
        Case(
            [
                *nodes(3),
                running("low-1", "n1", "4"),
                running("low-2", "n2", "4"),
                running("mid-3", "n3", "4", "high"),
                *gang("train", 3, "4"),
            ],
            set(),
            want_pending={"default/train-2": "places 2 of 3 members"},
        ),
        id="delayed preemption: a gang that cannot be fully placed deletes nothing",
    ),
    *(
        pytest.param(
            Case(
                [
                    *six_on_two_nodes(),
                    policy.priority_class("high").json(),
                ],
                {"default/p5"},
                {f"default/six-{i}": "" for i in range(6)},
            ),
            id=f"{name} group of six takes only the priority-5 pod: 2 + 4 CPU are enough (issue 11, defect 3)",
        )
        for name, policy in (("basic", make_podgroup("six").basic()), ("gang", make_podgroup("six").gang(6)))
    ),
]


@pytest.mark.parametrize("case", CASES)
def test_scenario(capsys: pytest.CaptureFixture[str], tmp_path: Path, case: Case) -> None:
    report = simulate(capsys, tmp_path, case.objects, "-o", "json")
    assert {p["victim"] for p in report["preemptions"]} == case.want_preempted
    bound = {b["pod"]: b["node"] for b in report["bindings"]}
    for pod, node in case.want_bound.items():
        assert pod in bound, report["pending"]
        assert not node or bound[pod] == node
    pending = {p["pod"]: p["message"] for p in report["pending"]}
    for pod, message in case.want_pending.items():
        assert message in pending[pod]
    if case.want_kind:
        assert {p["preemptorKind"] for p in report["preemptions"]} == {case.want_kind}
    for node in report["nodes"].values():
        assert all(not p.startswith("default/") or p not in case.want_preempted for p in node["pods"])


def test_retry_keeps_a_nomination_that_still_fits(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Victims take 120 s to go; every retry meanwhile keeps the nomination and preempts nothing more."""
    objects = [
        *nodes(2),
        make_pod("low-1").req(cpu="4").priority_class("low").grace(120).on("n1", STARTED).json(),
        make_pod("low-2").req(cpu="4").priority_class("low").grace(120).on("n2", STARTED).json(),
        pending_pod("urgent", "4"),
    ]
    report = simulate(capsys, tmp_path, objects, "-o", "json")
    (preemption,) = report["preemptions"]
    assert preemption["time"] == NOW
    (binding,) = report["bindings"]
    assert binding == {"pod": "default/urgent", "node": preemption["node"], "time": "2026-01-01T01:02:00Z"}


def test_restart_during_termination_waits(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """As after a scheduler restart: nominated to n1, its victim still terminating there until 01:00:20.

    The preemptor waits for it (another lower-priority pod on n2 is left alone) and binds on n1.
    """
    objects = [
        *nodes(2),
        make_pod("victim")
        .req(cpu="4")
        .priority_class("low")
        .on("n1", STARTED)
        .terminating(datetime(2026, 1, 1, 0, 59, 50, tzinfo=UTC), 30)
        .json(),
        running("other", "n2", "4"),
        make_pod("urgent").req(cpu="4").priority_class("high").nominated("n1").json(),
    ]
    report = simulate(capsys, tmp_path, objects, "-o", "json")
    assert report["preemptions"] == []
    assert report["bindings"] == [{"pod": "default/urgent", "node": "n1", "time": "2026-01-01T01:00:20Z"}]
    assert "default/other" in report["nodes"]["n2"]["pods"]


def test_retry_clears_a_nomination_that_no_longer_fits(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Nominated to n1, now held by a higher-priority pod: the search starts over and preempts on n2."""
    objects = [
        *nodes(2),
        running("vip", "n1", "4", "high"),
        running("low-2", "n2", "4"),
        make_pod("urgent").req(cpu="4").priority_class("mid").nominated("n1").json(),
    ]
    report = simulate(capsys, tmp_path, objects, "-o", "json")
    assert {p["victim"] for p in report["preemptions"]} == {"default/low-2"}
    assert {b["pod"]: b["node"] for b in report["bindings"]} == {"default/urgent": "n2"}


EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def run_example(capsys: pytest.CaptureFixture[str], name: str, output: str, *extra: str) -> str:
    argv = ["simulate", str(EXAMPLES / name), "--now", "2026-11-22T12:00:00Z", "-o", output, *extra]
    assert main(argv) == 0
    return capsys.readouterr().out


def test_text_output_explains_each_decision(capsys: pytest.CaptureFixture[str]) -> None:
    text = run_example(capsys, "preemption-pdb.yaml", "text")
    assert "preemptor ops/urgent (priority 1000): preempting 1 unit(s)" in text
    assert "victims: 1 unit (batch/report), 1 pod on 1 node; pods by priority: 10 (1); by namespace: batch (1)" in text
    assert "binary-search bound: priority 10" in text
    assert "spared 1 candidate: PodDisruptionBudget (1)" in text
    assert "preemptor ops/huge" not in text, "no node can hold it: not searched for victims, as kube-scheduler"
    assert "victim batch/report" not in text, "per-victim lines need -v"
    (huge,) = [p for p in json.loads(run_example(capsys, "preemption-pdb.yaml", "json"))["pending"]]
    assert (huge["pod"], huge["message"]) == (
        "ops/huge",
        "0/2 nodes are available: 2 Insufficient cpu. "
        "WorkloadPreemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.",
    )
    verbose = run_example(capsys, "preemption-pdb.yaml", "text", "-v")
    assert "victim batch/report (priority 10) on node-b" in verbose
    assert "spared data/db-0 (priority 10) by WorkloadPreemption: PodDisruptionBudget" in verbose


def test_gang_example_spares_above_the_bound_and_reprieves(capsys: pytest.CaptureFixture[str]) -> None:
    report = json.loads(run_example(capsys, "preemption-gang-over-pods.yaml", "json"))
    assert {p["victim"] for p in report["preemptions"]} == {"batch/batch-1", "batch/batch-2"}
    assert {b["pod"] for b in report["bindings"]} == {"ml/train-0", "ml/train-1", "ml/train-2"}
    text = run_example(capsys, "preemption-gang-over-pods.yaml", "text")
    assert "spared 3 candidates: AboveBinarySearchBound (2), Reprieved (1)" in text
    text = run_example(capsys, "preemption-gang-over-pods.yaml", "text", "-v")
    assert "spared batch/notebook (priority 10) by WorkloadPreemption: Reprieved" in text
    assert "spared dev/dev-1 (priority 100) by WorkloadPreemption: AboveBinarySearchBound" in text


def test_ties_example_keeps_the_tied_pod_whose_reprieval_costs_less(capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 20: of two victims of equal priority, the order that keeps the smaller one takes one pod, not two."""
    report = json.loads(run_example(capsys, "preemption-ties.yaml", "json"))
    assert {p["victim"] for p in report["preemptions"]} == {"batch/b"}
    assert {b["pod"]: b["node"] for b in report["bindings"]} == {"ops/urgent": "node-a"}


def test_a_protected_victim_is_replaced_by_the_next_cheapest(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Victim filters run on the chosen victims first: a protected pick is spared and the search reruns."""
    tolerant = (
        make_priority_class("tolerant", 10)
        .annotate("preemption-toleration.scheduling.sigs.k8s.io/minimum-preemptable-priority", "5000")
        .annotate("preemption-toleration.scheduling.sigs.k8s.io/toleration-seconds", "-1")
        .json()
    )
    objects = [
        tolerant,
        *nodes(2),
        running("calm", "n1", "4", "tolerant"),
        running("busy", "n2", "4", "mid"),
        pending_pod("urgent", "4"),
    ]
    report = simulate(capsys, tmp_path, objects, "-o", "json")
    assert {p["victim"] for p in report["preemptions"]} == {"default/busy"}
    text = simulate(capsys, tmp_path, objects, "-o", "text")
    assert "spared 1 candidate: Protected (1)" in text
    assert "protected by PreemptionToleration: default/calm tolerates preemption by priority 1000" in text
    text = simulate(capsys, tmp_path, objects, "-o", "text", "-v")
    assert "spared default/calm (priority 10) by PreemptionToleration: Protected" in text


def test_a_nomination_made_in_a_pass_holds_its_room_for_the_rest_of_the_pass(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """`urgent` preempts `v` on n1 and is nominated there; `later` (lower priority), tried in the same
    pass, must see that nomination (as kube-scheduler's nominator does) and preempt `w` on n2 at once,
    not pick `v` again and lose the race for n1 when `urgent` binds."""
    objects = [
        *nodes(2),
        running("v", "n1", "4"),
        running("w", "n2", "4"),
        pending_pod("urgent", "4", "high"),
        pending_pod("later", "4", "mid"),
    ]
    report = simulate(capsys, tmp_path, objects, "-o", "json")
    decided = [(d["time"], d["preemptor"], [v["unit"] for v in d["victims"]]) for d in report["decisions"]]
    assert decided == [(NOW, "default/urgent", ["default/v"]), (NOW, "default/later", ["default/w"])]
    assert {b["pod"]: b["time"] for b in report["bindings"]} == {
        "default/urgent": "2026-01-01T01:00:30Z",
        "default/later": "2026-01-01T01:00:30Z",
    }


def test_a_basic_group_decision_shows_its_binary_search_bound(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    objects = [*six_on_two_nodes(), make_podgroup("six").basic().priority_class("high").json()]
    (decision,) = simulate(capsys, tmp_path, objects, "-o", "json")["decisions"]
    assert (decision["preemptor"], decision["bound"]) == ("podgroup/default/six", 5)
    assert [v["unit"] for v in decision["victims"]] == ["default/p5"]
    assert decision["spared"] == [], "p10 is above the bound on a node no member needs: not a candidate"
    text = simulate(capsys, tmp_path, objects, "-o", "text")
    assert "preemptor podgroup/default/six (priority 1000): preempting 1 unit(s) to place 4 member(s)" in text
    assert "binary-search bound: priority 5 (no victim above it" in text


@pytest.mark.parametrize("grace", [pytest.param(0, id="victims vanish at once"), pytest.param(30, id="30 s grace")])
@pytest.mark.parametrize("preemptor", [pytest.param("gang", id="gang"), pytest.param("pod", id="lone pod")])
def test_deleted_victims_wake_the_preemptor(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, grace: int, preemptor: str
) -> None:
    """Any deletion, whatever its grace period, wakes the unit waiting for that room (issue 11, defect 2)."""
    victims = [
        make_pod(f"low-{i}").req(cpu="4").priority_class("low").grace(grace).on(f"n{i}", STARTED).json() for i in (1, 2)
    ]
    arrivals = gang("train", 2, "4") if preemptor == "gang" else [pending_pod("train-0", "4")]
    report = simulate(capsys, tmp_path, [*nodes(2), *victims, *arrivals], "-o", "json")
    want_victims = {"default/low-1", "default/low-2"} if preemptor == "gang" else {"default/low-1"}
    assert {p["victim"] for p in report["preemptions"]} == want_victims
    bound = {b["pod"]: b["time"] for b in report["bindings"]}
    members = {"default/train-0", "default/train-1"} if preemptor == "gang" else {"default/train-0"}
    assert set(bound) == members, report["pending"]
    assert report["pending"] == []


@pytest.mark.parametrize("grace", [pytest.param(0, id="victims vanish at once"), pytest.param(30, id="30 s grace")])
def test_lone_pod_binds_on_its_nomination_after_a_group_victim_on_two_nodes(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, grace: int
) -> None:
    """Fuzz seed 284884 protected #3: a `disruptionMode: PodGroup` gang runs on both nodes, so taking it frees
    room on both; a PDB keeps the other candidates. The pod is nominated to one node and binds there once all
    its victims are gone, as the live scheduler does (it is not retried while its deletions are in flight)."""

    def member(name: str, group: str, node: str, cpu: str, klass: str) -> dict[str, Any]:
        pod = make_pod(name).req(cpu=cpu).group(group).priority_class(klass).grace(grace).on(node, STARTED)
        return pod.label("budget", group).json()

    budget = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "g1", "namespace": "default"},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"budget": "g1"}}},
    }
    objects = [
        make_priority_class("lowest", 5).json(),
        make_node("n1").cap(cpu="8").json(),
        make_node("n2").cap(cpu="4").json(),
        make_podgroup("g0").gang(1).priority_class("low").disruption_mode("PodGroup").json(),
        make_podgroup("g1").gang(1).priority_class("lowest").json(),
        member("g0-0", "g0", "n2", "3", "low"),
        member("g0-1", "g0", "n1", "3", "low"),
        member("g0-2", "g0", "n1", "1", "low"),
        member("g1-0", "g1", "n1", "1", "lowest"),
        member("g1-1", "g1", "n1", "3", "lowest"),
        make_pod("p0").req(cpu="1").priority_class("low").grace(grace).on("n2", STARTED).json(),
        budget,
        pending_pod("urgent", "2"),
    ]
    report = simulate(capsys, tmp_path, objects, "-o", "json")
    assert {p["victim"] for p in report["preemptions"]} == {"default/g0-0", "default/g0-1", "default/g0-2"}
    (decision,) = [d for d in report["decisions"] if d["outcome"] == "Preempt"]
    (nomination,) = decision["nominations"]
    (binding,) = report["bindings"]
    assert binding["pod"] == "default/urgent" and binding["node"] == nomination["node"]


def test_basic_group_partly_placed_preempts_only_for_the_rest(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Issue 11, defect 1: m1 and m2 bind to n2 in the pass whose preemption makes room for m3 and m4.

    Preemption is for the members still pending: a pod bound in this pass is never nominated (the
    API server refuses `nominatedNodeName` on a bound pod, and so does the simulated one).
    """
    objects = [
        *nodes(2),
        running("victim", "n1", "3"),
        make_podgroup("basic").basic().priority_class("high").json(),
        *(make_pod(f"m{i}").req(cpu="2").group("basic").priority_class("high").json() for i in range(1, 5)),
    ]
    report = simulate(capsys, tmp_path, objects, "-o", "json")
    assert {p["victim"] for p in report["preemptions"]} == {"default/victim"}
    bound = {b["pod"]: b["node"] for b in report["bindings"]}
    assert bound == {"default/m1": "n2", "default/m2": "n2", "default/m3": "n1", "default/m4": "n1"}
    assert report["pending"] == []


def test_gang_member_beyond_min_count_preempts_for_itself(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Two members reach minCount on n1 in this pass; the third preempts on n2 as a gang of one more."""
    objects = [*nodes(2), running("low", "n2", "4"), *gang("train", 3, "2", min_count=2)]
    report = simulate(capsys, tmp_path, objects, "-o", "json")
    assert {p["victim"] for p in report["preemptions"]} == {"default/low"}
    bound = {b["pod"]: b["node"] for b in report["bindings"]}
    assert bound == {"default/train-0": "n1", "default/train-1": "n1", "default/train-2": "n2"}


def test_member_placed_on_its_nomination_holds_no_room_twice(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """m1 goes back to the node it was nominated to; preemption for m2 counts m1 there once, not twice."""
    objects = [
        *nodes(1),
        running("low-a", "n1", "2"),
        make_podgroup("basic").basic().priority_class("high").json(),
        make_pod("m1").req(cpu="2").group("basic").priority_class("high").nominated("n1").json(),
        make_pod("m2").req(cpu="2").group("basic").priority_class("high").json(),
    ]
    report = simulate(capsys, tmp_path, objects, "-o", "json")
    assert {p["victim"] for p in report["preemptions"]} == {"default/low-a"}
    assert {b["pod"]: b["node"] for b in report["bindings"]} == {"default/m1": "n1", "default/m2": "n1"}


def claimed_room(blocker: str) -> list[dict[str, Any]]:
    """Gang `low` has preempted n1 and n2 (nominated there, its victims terminating until 01:00:30); gang `high`
    completes without nominations; n3 and n4 each run one pod of class `blocker`."""
    leaving = datetime(2026, 1, 1, 1, 0, tzinfo=UTC)
    return [
        *nodes(4),
        make_podgroup("low").gang(2).priority_class("mid").json(),
        *(make_pod(f"low-{i}").req(cpu="4").group("low").nominated(f"n{i}").json() for i in (1, 2)),
        *(
            make_pod(f"gone-{i}").req(cpu="4").priority_class("low").on(f"n{i}", STARTED).terminating(leaving).json()
            for i in (1, 2)
        ),
        *(running(f"busy-{i}", f"n{i}", "4", blocker) for i in (3, 4)),
        *gang("high", 2, "4"),
    ]


def test_higher_gang_leaves_the_room_a_lower_gangs_preemption_claimed(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A higher gang that can make room elsewhere does not take the room a lower gang's victims are leaving;
    by priority alone it would, and the lower gang would decide again, on the very victims the higher one could
    have taken (4 gangs preempting at once on the real server, issue 23). Each gang decides once."""
    report = simulate(capsys, tmp_path, claimed_room("low"), "-o", "json")
    assert {(p["victim"], p["preemptor"]) for p in report["preemptions"]} == {
        ("default/busy-3", "default/high"),
        ("default/busy-4", "default/high"),
    }
    bound = {b["pod"]: b["node"] for b in report["bindings"]}
    assert bound == {"default/low-1": "n1", "default/low-2": "n2", "default/high-0": "n3", "default/high-1": "n4"}
    assert [d["preemptor"] for d in report["decisions"]] == ["podgroup/default/high"]


def test_higher_gang_takes_claimed_room_when_it_has_no_other(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The claim is a preference, not a reservation: a higher gang that can neither fit nor preempt anywhere else
    takes the room, as by kube-scheduler's rule (a lower nomination holds nothing against a higher pod)."""
    report = simulate(capsys, tmp_path, claimed_room("high"), "-o", "json")
    bound = {b["pod"]: b["node"] for b in report["bindings"]}
    assert {bound.get("default/high-0"), bound.get("default/high-1")} == {"n1", "n2"}
    assert "default/low-1" not in bound
