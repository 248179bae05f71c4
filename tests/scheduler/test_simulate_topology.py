"""Topology domains through `phalanx simulate` (issue 40): a PodGroup with `spec.schedulingConstraints.topology`
goes whole into one domain of the label, chosen as kube-scheduler 1.36 chooses (KEP-5732), and preempts inside
the domain whose victims cost least (KEP-5710's domain split)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.builders import make_node, make_pod, make_podgroup, make_priority_class, yaml_documents
from tests.scheduler.test_simulate_cli import EXAMPLES, simulate, write

RACK = "topology.example.com/rack"
BLOCK = "topology.example.com/block"


def rack_node(name: str, rack: str, cpu: str, block: str | None = None) -> object:
    node = make_node(name).cap(cpu=cpu).label(RACK, rack)
    return (node.label(BLOCK, block) if block else node).obj()


def gang(name: str, members: int, min_count: int, cpu: str, *keys: str, priority: str | None = None) -> list[object]:
    group = (
        make_podgroup(name)
        .gang(min_count)
        .spec_field("schedulingConstraints", {"topology": [{"key": k} for k in keys]})
    )
    if priority:
        group = group.priority_class(priority)
    pods = []
    for i in range(members):
        pod = make_pod(f"{name}-{i}").group(name).req(cpu=cpu)
        pods.append((pod.priority_class(priority) if priority else pod).obj())
    return [group.obj(), *pods]


def placed(tmp_path: Path, capsys: pytest.CaptureFixture[str], *objects: object) -> tuple[dict[str, str], dict]:
    code, report, err = simulate(capsys, write(tmp_path, "s.yaml", yaml_documents(list(objects))))
    assert code == 0 and report is not None, err
    bound = {b["pod"].split("/")[1]: b["node"] for b in report["bindings"]}
    return bound, {p["pod"].split("/")[1]: p["message"] for p in report["pending"]}


def test_a_gang_goes_whole_into_the_rack_it_packs_best(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The issue's first case, where kube-scheduler 1.36.2 put the gang whole into rack a."""
    nodes = [rack_node(f"a{i}", "a", "4") for i in range(2)] + [rack_node(f"b{i}", "b", "4") for i in range(3)]
    bound, pending = placed(tmp_path, capsys, *nodes, *gang("train", 4, 4, "2", RACK))
    assert not pending
    assert sorted(node[0] for node in bound.values()) == ["a"] * 4


def test_the_rack_that_takes_more_members_wins(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """minCount 2 of 4: rack a takes two, rack b all four (PodGroupPodsCount); both are full with what they take."""
    nodes = [rack_node(f"a{i}", "a", "2") for i in range(2)] + [rack_node(f"b{i}", "b", "2") for i in range(4)]
    bound, pending = placed(tmp_path, capsys, *nodes, *gang("train", 4, 2, "2", RACK))
    assert not pending
    assert sorted(node[0] for node in bound.values()) == ["b"] * 4


def test_no_rack_can_hold_the_gang_and_nothing_binds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nodes = [rack_node("a0", "a", "4"), rack_node("b0", "b", "4")]
    bound, pending = placed(tmp_path, capsys, *nodes, *gang("train", 4, 4, "2", RACK))
    assert bound == {}
    assert "rack=a" in pending["train-0"] and "rack=b" in pending["train-0"], pending


def test_a_label_no_node_has_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bound, pending = placed(tmp_path, capsys, rack_node("a0", "a", "4"), *gang("train", 2, 2, "1", "no-such-label"))
    assert bound == {}
    assert "no nodes found with topology label 'no-such-label'" in pending["train-0"], pending


def test_a_member_already_bound_keeps_the_group_in_its_rack(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One member of a basic group runs in rack b; the next goes to b, though rack a would pack better."""
    nodes = [rack_node("a0", "a", "2"), rack_node("b0", "b", "8"), rack_node("b1", "b", "8")]
    group = make_podgroup("web").basic().spec_field("schedulingConstraints", {"topology": [{"key": RACK}]}).obj()
    running = make_pod("web-0").group("web").req(cpu="1").on("b0").obj()
    bound, pending = placed(tmp_path, capsys, *nodes, group, running, make_pod("web-1").group("web").req(cpu="2").obj())
    assert not pending
    assert bound["web-1"].startswith("b")


def test_two_levels_widen_to_the_block_when_no_rack_fits(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Our kind's extension: rack first, else block. No rack takes four 2-CPU members; block x (racks a and b)
    does, block y (rack c) does not."""
    nodes = [
        rack_node("a0", "a", "4", block="x"),
        rack_node("b0", "b", "4", block="x"),
        rack_node("c0", "c", "4", block="y"),
    ]
    bound, pending = placed(tmp_path, capsys, *nodes, *gang("train", 4, 4, "2", RACK, BLOCK))
    assert not pending
    assert sorted(bound.values()) == ["a0", "a0", "b0", "b0"]


def test_the_example_preempts_in_the_rack_whose_victims_cost_least(capsys: pytest.CaptureFixture[str]) -> None:
    code, report, err = simulate(capsys, str(EXAMPLES / "topology.yaml"))
    assert code == 0 and report is not None, err
    bound = {b["pod"]: b["node"] for b in report["bindings"]}
    assert sorted(bound[f"ml/llama-{i}"] for i in range(4)) == ["a0", "a0", "a1", "a1"]
    assert sorted(bound[f"ml/eval-{i}"][0] for i in range(2)) == ["c", "c"]
    assert sorted(p["victim"] for p in report["preemptions"]) == [f"ml/old-run-{i}" for i in range(4)]
    (decision,) = [d for d in report["decisions"] if d["preemptor"] == "podgroup/ml/llama"]
    assert decision["message"].endswith("in topology.example.com/rack=a"), decision["message"]
    assert decision["domains"] == [{"name": f"{RACK}=a", "pdbViolations": 0, "highest": 10, "sum": 40, "pods": 4}], (
        decision["domains"]
    )
    assert decision["domainsPassedOver"] == 2  # rack b costs at least a priority-20 pod; rack c cannot make room


def test_preemption_says_what_each_rack_could_take(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Each rack holds two of the three members even with its priority-10 pod gone: nothing is preempted, and the
    reason says so per rack."""
    objects: list[object] = [make_priority_class("low", 10).obj(), make_priority_class("high", 1000).obj()]
    for rack in ("a", "b"):
        objects += [
            rack_node(f"{rack}0", rack, "4"),
            make_pod(f"low-{rack}").req(cpu="2").priority_class("low").on(f"{rack}0").obj(),
        ]
    bound, pending = placed(tmp_path, capsys, *objects, *gang("train", 3, 3, "2", RACK, priority="high"))
    assert bound == {}, bound
    assert (
        "no topology domain can take 3 members even with every lower-priority unit in it removed"
        f" ({RACK}=a: 2 of 3; {RACK}=b: 2 of 3)"
    ) in pending["train-0"], pending
