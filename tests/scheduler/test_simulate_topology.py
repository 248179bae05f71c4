"""Topology domains through `phalanx simulate` (issue 40): a PodGroup with `spec.schedulingConstraints.topology`
goes whole into one domain of the label, chosen as kube-scheduler 1.36 chooses (KEP-5732), and preempts inside
the domain whose victims cost least (KEP-5710's domain split)."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduler.api.node import Node
from scheduler.api.pod import Pod
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


def simulated(tmp_path: Path, capsys: pytest.CaptureFixture[str], *objects: object) -> dict:
    """`phalanx simulate -o json`'s report of these objects."""
    code, report, err = simulate(capsys, write(tmp_path, "s.yaml", yaml_documents(list(objects))))
    assert code == 0 and report is not None, err
    return report


def placed(tmp_path: Path, capsys: pytest.CaptureFixture[str], *objects: object) -> tuple[dict[str, str], dict]:
    report = simulated(tmp_path, capsys, *objects)
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


def test_each_rack_says_how_many_members_fit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 40 point 5. Rack a's nodes have room for a member each, but a3 is tainted: placed there, 3 fit (a count).
    Rack b's free CPU could hold 2 at most, rack c's none: passed over without placing a pod, each says its bound,
    and a bound of 0 is a count. Closest first."""
    objects: list[object] = []
    for i in range(4):
        node = make_node(f"a{i}").cap(cpu="3").label(RACK, "a")
        objects += [
            (node.taint("maintenance") if i == 3 else node).obj(),
            make_pod(f"busy-a{i}").req(cpu="1").on(f"a{i}").obj(),
        ]
    objects += [rack_node("b0", "b", "4"), rack_node("c0", "c", "2"), make_pod("busy-c0").req(cpu="1").on("c0").obj()]
    bound, pending = placed(tmp_path, capsys, *objects, *gang("train", 4, 4, "2", RACK))
    assert not any(pod.startswith("train") for pod in bound), bound
    assert (
        f"no topology domain can take 4 members ({RACK}=a: 3 of 4 members fit; {RACK}=b: at most 2 of 4 members fit;"
        f" {RACK}=c: 0 of 4 members fit)"
    ) in pending["train-0"], pending


def test_many_racks_name_the_closest_then_count_the_rest(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Seven racks of one node: the closest four are named (most members first, a count before a bound of the same
    number, then label order), the other three counted."""
    cpus = {"a": "2", "b": "6", "c": "4", "d": "2", "e": "6", "f": "2", "g": "2"}
    nodes = [rack_node(f"{rack}0", rack, cpu) for rack, cpu in cpus.items()]
    bound, pending = placed(tmp_path, capsys, *nodes, *gang("train", 4, 4, "2", RACK))
    assert bound == {}, bound
    assert (
        f"({RACK}=b: at most 3 of 4 members fit; {RACK}=e: at most 3 of 4 members fit;"
        f" {RACK}=c: at most 2 of 4 members fit; {RACK}=a: at most 1 of 4 members fit; 3 more domain(s), none closer)"
    ) in pending["train-0"], pending


def while_victims_terminate(nominations: list[str]) -> list[object]:
    """The issue's preemption case as it stands while the victims terminate: the priority-1000 gang preempted rack a's
    four priority-10 pods (30 s grace) and its members, as stored, are nominated to `nominations`; each of rack b's
    three nodes runs a priority-0 and a priority-20 pod."""
    objects: list[object] = [make_priority_class("low", 10).obj(), make_priority_class("high", 1000).obj()]
    for i, node in enumerate(("a0", "a0", "a1", "a1")):
        objects.append(make_pod(f"old-{i}").req(cpu="2").priority_class("low").on(node).terminating(grace=30).obj())
    for i in range(3):
        objects.append(make_pod(f"zero-{i}").req(cpu="2").priority(0).on(f"b{i}").obj())
        objects.append(make_pod(f"twenty-{i}").req(cpu="2").priority(20).on(f"b{i}").obj())
    group, *_ = gang("train", 0, 4, "2", RACK, priority="high")
    members = [
        make_pod(f"train-{i}").group("train").req(cpu="2").priority_class("high").nominated(node).stored().obj()
        for i, node in enumerate(nominations)
    ]
    return [*objects, group, *members]


def rack_now(objects: list[object], node: str) -> str | None:
    """The rack label of `node` as the scenario has it."""
    (found,) = [o for o in objects if isinstance(o, Node) and o.metadata.name == node]
    return found.metadata.labels.get(RACK)


def test_a_rack_relabelled_while_victims_terminate_is_decided_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 40 point 8: the gang preempted in rack a and is nominated to a0 and a1; a0 is now in rack b. The
    nominations hold it in no one rack: it says so, naming both, and never binds across the two (a0 and a1 had room
    for all four once the victims were gone). Once they are gone it decides again in one rack as labelled now."""
    nodes = [rack_node("a0", "b", "4"), rack_node("a1", "a", "4")] + [rack_node(f"b{i}", "b", "4") for i in range(3)]
    objects = [*nodes, *while_victims_terminate(["a0", "a0", "a1", "a1"])]
    path = write(tmp_path, "s.yaml", yaml_documents(objects))
    code, report, err = simulate(capsys, path, "--until", "10s")
    assert code == 0 and report is not None, err
    said = {p["pod"]: p["message"] for p in report["pending"]}["default/train-0"]
    assert f"its nominated nodes are in no one topology domain now ({RACK}=a, {RACK}=b)" in said, said
    code, report, err = simulate(capsys, path)
    assert code == 0 and report is not None, err
    bound = {b["pod"]: b["node"] for b in report["bindings"] if b["pod"].startswith("default/train")}
    assert len(bound) == 4, report["pending"]
    assert {rack_now(objects, node) for node in bound.values()} == {"b"}, bound


def test_a_rack_that_lost_a_node_while_victims_terminate_is_decided_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Node a0 is gone: rack a (a1) cannot hold the gang whatever is removed. Its preemption says so, naming the rack,
    clears the nominations, and decides again: the gang binds whole in rack b."""
    nodes = [rack_node("a1", "a", "4")] + [rack_node(f"b{i}", "b", "4") for i in range(3)]
    objects = [*nodes, *while_victims_terminate(["a0", "a0", "a1", "a1"])]
    objects = [o for o in objects if not (isinstance(o, Pod) and o.spec.node_name == "a0")]
    bound, pending = placed(tmp_path, capsys, *objects)
    train = {pod: node for pod, node in bound.items() if pod.startswith("train")}
    assert sorted(train) == [f"train-{i}" for i in range(4)], pending
    assert {rack_now(objects, node) for node in train.values()} == {"b"}, train


@pytest.mark.parametrize(
    ("racks", "want_node", "want_said"),
    [
        pytest.param(
            {"a0": "b", "a1": "a"},
            None,
            f"members already bound run in {RACK}=a and {RACK}=b: no topology domain holds them all",
            id="bound members split over two racks by a relabel wait naming both",
        ),
        pytest.param(
            {"a0": None, "a1": "a"},
            None,
            f"members already bound run in {RACK}=a and on a node without label '{RACK}': no topology domain holds them"
            " all",
            id="a bound member on a node that lost the label waits naming it",
        ),
        pytest.param(
            {"a0": "b", "a1": "b"},
            "b0",
            None,
            id="bound members all relabelled take the rest to their rack as it is now",
        ),
    ],
)
def test_members_relabelled_between_passes(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    racks: dict[str, str | None],
    want_node: str | None,
    want_said: str | None,
) -> None:
    """Issue 40 point 8: web-0 and web-1 of a basic group were bound in rack a, on a0 and a1, since relabelled as
    `racks`. web-2 fits on a0 or a1 by itself, and on c0 (rack c) or b0 (rack b) by rack: it goes to the rack of the
    bound members as it is now, or waits saying why; never anywhere as if the constraint were absent."""
    nodes = [
        (make_node(n).cap(cpu="3").label(RACK, rack) if rack else make_node(n).cap(cpu="3")).obj()
        for n, rack in racks.items()
    ]
    nodes += [rack_node("b0", "b", "8"), rack_node("c0", "c", "8")]
    group = make_podgroup("web").basic().spec_field("schedulingConstraints", {"topology": [{"key": RACK}]}).obj()
    running = [make_pod(f"web-{i}").group("web").req(cpu="1").on(f"a{i}").obj() for i in range(2)]
    bound, pending = placed(
        tmp_path, capsys, *nodes, group, *running, make_pod("web-2").group("web").req(cpu="1").obj()
    )
    assert bound.get("web-2") == want_node, (bound, pending)
    if want_said is not None:
        assert want_said in pending["web-2"], pending


def victims(tmp_path: Path, capsys: pytest.CaptureFixture[str], *objects: object) -> list[str]:
    return sorted(p["victim"].split("/")[1] for p in simulated(tmp_path, capsys, *objects)["preemptions"])


def test_one_rack_that_is_the_whole_cluster_takes_the_victims_the_unconstrained_search_takes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Three nodes, each with a priority-0 and a priority-20 pod of 2 CPU; a 4 x 2 CPU gang. Over the whole cluster
    the members placed one at a time cost the three 0s and one 20; the rack's own search keeps that plan too, where
    KEP-5710's alone took two 0s and two 20s."""
    nodes: list[object] = [make_priority_class("high", 1000).obj()]
    for i in range(3):
        nodes += [
            rack_node(f"b{i}", "b", "4"),
            make_pod(f"zero-{i}").req(cpu="2").priority(0).on(f"b{i}").obj(),
            make_pod(f"twenty-{i}").req(cpu="2").priority(20).on(f"b{i}").obj(),
        ]
    plain = victims(tmp_path, capsys, *nodes, *gang("train", 4, 4, "2", priority="high"))
    assert plain == ["twenty-0", "zero-0", "zero-1", "zero-2"]
    assert victims(tmp_path, capsys, *nodes, *gang("train", 4, 4, "2", RACK, priority="high")) == plain


def test_a_basic_group_placed_in_part_preempts_for_the_rest_in_its_rack(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Rack a has room for one of two members, and q (priority 30) to preempt for the other; rack b's r (priority
    10) is cheaper, but the member placed in a keeps the group there (the differential fuzz's fault)."""
    objects = [
        make_priority_class("high", 1000).obj(),
        rack_node("a0", "a", "4"),
        rack_node("b0", "b", "4"),
        make_pod("q").req(cpu="2").priority(30).on("a0").obj(),
        make_pod("r").req(cpu="4").priority(10).on("b0").obj(),
        make_podgroup("web")
        .basic()
        .priority_class("high")
        .spec_field("schedulingConstraints", {"topology": [{"key": RACK}]})
        .obj(),
        *(make_pod(f"web-{i}").group("web").req(cpu="2").priority_class("high").obj() for i in range(2)),
    ]
    assert victims(tmp_path, capsys, *objects) == ["q"]
    bound, pending = placed(tmp_path, capsys, *objects)
    assert not pending and bound == {"web-0": "a0", "web-1": "a0"}
