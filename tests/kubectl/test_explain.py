"""`kubectl phalanx explain` on a dump (`-f`), through the CLI: text, JSON, every kind of pending, bad input.

The live cluster is read the same way into the same objects (tests/e2e/test_explain.py covers that path on
the real API server); a dump makes the answer exact, at a fixed `--now`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from phalanx.cli import main as phalanx
from phalanx.kubectl.cli import main
from scheduler.api.pod_group import LAST_START_ANNOTATION
from tests.builders import PodGroupWrapper, make_node, make_pod, make_podgroup, make_queue, yaml_documents

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
DEMO = str(EXAMPLES / "training-gang-preemption.yaml")
DEMO_NOW = "2026-03-01T12:00:00Z"
NOW = "2026-01-01T12:00:00Z"
TOLERATION = "preemption-toleration.scheduling.sigs.k8s.io"


def explain(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["explain", *args])
    out, err = capsys.readouterr()
    return code, out, err


def as_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    code, out, err = explain(capsys, *args, "-o", "json")
    assert code == 0, err
    document: dict[str, Any] = json.loads(out)
    return document


def dump(tmp_path: Path, objects: list[Any]) -> str:
    path = tmp_path / "dump.yaml"
    path.write_text(yaml_documents(objects))
    return str(path)


def started(group: PodGroupWrapper, at: str = NOW) -> dict[str, Any]:
    """A running group as stored, started (min-runtime counts from) `at`."""
    stored = group.stored().json()
    stored["metadata"]["annotations"] = {LAST_START_ANNOTATION: at}
    return stored


def gpu_pool(nodes: int = 1) -> list[Any]:
    return [make_node(f"gpu-{i}").cap(cpu="32", gpu=8).obj() for i in range(nodes)]


def test_a_gang_that_preempts_now_shows_the_decision_and_when_it_binds(capsys: pytest.CaptureFixture[str]) -> None:
    code, text, err = explain(capsys, "podgroup", "llama-finetune", "-n", "ml", "-f", DEMO, "--now", DEMO_NOW)
    assert code == 0, err
    assert "Name:          ml/llama-finetune\n" in text
    assert (
        "Kind:          PodGroup (scheduling.phalanx.dev/v1alpha1): gang, minCount 6, disruptionMode PodGroup\n" in text
    )
    assert "Placement now: 0 of 6 member(s) fit. 0/4 nodes are available: 4 Insufficient nvidia.com/gpu." in text
    assert "  preemptor podgroup/ml/llama-finetune (priority 5000): preempting 4 unit(s) to place 6 member(s)" in text
    assert "binary-search bound: priority 100" in text
    assert "protected by PreemptionToleration: physics/sim-42 tolerates preemption by priority 5000" in text
    assert "Dry run:       bound at 2026-03-01T12:00:30Z (6 member(s) on gpu-0, gpu-1)" in text
    assert (
        "  - preemption places all 6 members now: the scheduler preempts 4 units (5 pods) on its next try "
        "(bound at 12:00:30Z in the dry run)"
    ) in text
    document = as_json(capsys, "pg", "llama-finetune", "-n", "ml", "-f", DEMO, "--now", DEMO_NOW)
    decision = document["decision"]
    assert (document["apiVersion"], document["kind"]) == ("explain.phalanx.dev/v1alpha1", "Explanation")
    assert decision["schemaVersion"] == "phalanx.dev/decision/v2"
    assert {v["unit"] for v in decision["victims"]} == {
        "podgroup/research/sweep",
        "batch/etl-0",
        "batch/etl-1",
        "batch/etl-2",
    }
    assert {(s["unit"], s["reason"], s["until"]) for s in decision["spared"]} == {
        ("physics/sim-42", "Protected", "2026-03-01T12:15:01Z"),
        ("batch/etl-3", "Reprieved", None),
    }
    assert document["placement"] == {
        "nodes": 4,
        "fit": 0,
        "needed": 6,
        "message": "0/4 nodes are available: 4 Insufficient nvidia.com/gpu.",
    }
    assert document["forecast"]["boundAt"] == "2026-03-01T12:00:30Z"
    assert document["unblock"][0]["at"] == "2026-03-01T12:00:30Z"


def test_the_decision_has_simulates_schema(capsys: pytest.CaptureFixture[str]) -> None:
    """One schema: the decision `explain` predicts is the first one `simulate` takes, key for key."""
    document = as_json(capsys, "pg", "llama-finetune", "-n", "ml", "-f", DEMO, "--now", DEMO_NOW)
    assert phalanx(["simulate", DEMO, "--now", DEMO_NOW, "-o", "json"]) == 0
    simulated = json.loads(capsys.readouterr().out)["decisions"][0]
    assert document["decision"] == simulated


def test_a_protected_victim_names_who_protects_it_and_when_the_unit_binds(capsys: pytest.CaptureFixture[str]) -> None:
    code, text, err = explain(capsys, "pod/eval-harness", "-n", "ml", "-f", DEMO, "--now", DEMO_NOW)
    assert code == 0, err
    assert "Tried first:   podgroup/ml/llama-finetune: they take room before it" in text
    assert (
        "  - when physics/sim-42's toleration ends at 12:15:01Z, preemption places the pod "
        "(bound at 12:15:31Z in the dry run)"
    ) in text
    document = as_json(capsys, "po", "eval-harness", "-n", "ml", "-f", DEMO, "--now", DEMO_NOW)
    assert document["unblock"] == [
        {
            "message": "when physics/sim-42's toleration ends at 12:15:01Z, preemption places the pod "
            "(bound at 12:15:31Z in the dry run)",
            "at": "2026-03-01T12:15:31Z",
        }
    ]
    assert document["decision"]["outcome"] == "CannotHelp"
    assert document["forecast"]["preemption"]["time"] == "2026-03-01T12:15:01Z"


def test_min_runtime_names_the_queue_path_and_lowest_common_ancestor(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    objects = [
        make_queue("org").obj(),
        make_queue("research").parent("org").reclaim_min_runtime("10m").obj(),
        make_queue("vision").parent("research").obj(),
        make_queue("nlp").parent("research").obj(),
        *gpu_pool(),
        started(make_podgroup("old").ns("team-a").gang(1).priority(10).disruption_mode("PodGroup").queue("vision")),
        make_pod("old-0").ns("team-a").req(gpu=8).group("old").priority(10).on("gpu-0").stored().obj(),
        make_podgroup("new").ns("team-b").gang(1).priority(100).queue("nlp").stored().obj(),
        make_pod("new-0").ns("team-b").req(gpu=8).group("new").priority(100).stored().obj(),
    ]
    path = dump(tmp_path, objects)
    document = as_json(capsys, "pg", "new", "-n", "team-b", "-f", path, "--now", NOW)
    old = next(s for s in document["decision"]["spared"] if s["unit"] == "podgroup/team-a/old")
    assert old["plugin"] == "MinRuntime"
    assert old["message"] == (
        "podgroup/team-a/old is protected by reclaim-min-runtime 10m (queue research) until 12:10:00Z (queues vision > "
        "research > org, the preemptor's nlp > research > org; lowest common ancestor research)"
    )


def test_waiting_for_members(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    objects = [
        *gpu_pool(),
        make_podgroup("train").gang(4).obj(),
        *(make_pod(f"w{i}").req(gpu=1).group("train").obj() for i in range(2)),
    ]
    code, text, err = explain(capsys, "pod", "w1", "-f", dump(tmp_path, objects), "--now", NOW)
    assert code == 0, err
    assert "Pod:           default/w1 (a member: explaining its PodGroup)\n" in text
    assert "State:         WaitingForGang\nReason:        2/4 members exist, gang needs 4\n" in text
    assert text.endswith("What would unblock it:\n  - waiting for 2 more members: the gang needs 4\n")


def test_a_foreign_gate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    objects = [*gpu_pool(), make_pod("held").req(gpu=1).gate("example.com/quota").obj()]
    document = as_json(capsys, "pod", "held", "-f", dump(tmp_path, objects), "--now", NOW)
    assert (document["unit"]["reason"], document["unit"]["message"]) == (
        "SchedulingGated",
        "waiting for scheduling gates: example.com/quota",
    )
    assert document["members"][0]["state"] == "Gated"
    assert document["unblock"][0]["message"].startswith("remove the scheduling gate(s) example.com/quota from 1 member")


def test_nothing_below_it_asks_for_priority_or_nodes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    objects = [
        *gpu_pool(2),
        make_pod("busy-0").req(gpu=8).priority(1000).on("gpu-0").stored().obj(),
        make_pod("busy-1").req(gpu=4).priority(1000).on("gpu-1").stored().obj(),
        make_podgroup("train").gang(4).priority(100).stored().obj(),
        *(make_pod(f"w{i}").req(gpu=4).group("train").priority(100).stored().obj() for i in range(4)),
    ]
    document = as_json(capsys, "pg", "train", "-f", dump(tmp_path, objects), "--now", NOW)
    assert document["placement"]["fit"] == 1
    assert [u["message"] for u in document["unblock"]] == [
        "no unit below priority 100: raise the PodGroup's priority or add 2 nodes with 8 nvidia.com/gpu free"
    ]
    assert document["forecast"]["boundAt"] is None


def test_a_preemption_under_way_is_in_flight(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    mark = {
        "type": "DisruptionTarget",
        "status": "True",
        "reason": "PreemptionByScheduler",
        "message": "phalanx-scheduler: preempting to accommodate a higher priority podgroup default/train",
        "lastTransitionTime": "2026-01-01T11:59:00Z",
    }
    victim = make_pod("low").req(gpu=8).priority(10).on("gpu-0").terminating().stored().json()
    victim["status"]["conditions"] = [mark]
    objects = [
        *gpu_pool(),
        victim,
        make_podgroup("train").gang(1).priority(100).stored().obj(),
        make_pod("w0").req(gpu=8).group("train").priority(100).nominated("gpu-0").stored().obj(),
    ]
    code, text, err = explain(capsys, "pg", "train", "-f", dump(tmp_path, objects), "--now", NOW)
    assert code == 0, err
    assert "State:         Preempting\n" in text
    flight = (
        "  podgroup/default/train: 1 member(s) nominated to gpu-0; 1 victim(s) still terminating since "
        "2026-01-01T11:59:00Z"
    )
    assert flight in text
    assert "  - its preemption is under way: 1 victim still terminating since 11:59:00Z" in text


def test_a_rivals_preemption_under_way_on_the_room_a_pod_wants_is_in_flight(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The gang `train` (priority 100) is taking gpu-0, the only node: a pod of priority 50 that wants it is told so,
    though nothing of the gang's is its own."""
    victim = make_pod("low").req(gpu=8).priority(10).on("gpu-0").terminating().stored().json()
    victim["status"]["conditions"] = [
        {
            "type": "DisruptionTarget",
            "status": "True",
            "reason": "PreemptionByScheduler",
            "message": "phalanx-scheduler: preempting to accommodate a higher priority podgroup default/train",
            "lastTransitionTime": "2026-01-01T11:59:00Z",
        }
    ]
    objects = [
        *gpu_pool(),
        victim,
        make_podgroup("train").gang(1).priority(100).stored().obj(),
        make_pod("w0").req(gpu=8).group("train").priority(100).nominated("gpu-0").stored().obj(),
        make_pod("solo").req(gpu=8).priority(50).stored().obj(),
    ]
    code, text, err = explain(capsys, "pod", "solo", "-f", dump(tmp_path, objects), "--now", NOW)
    assert code == 0, err
    assert "In flight:\n  podgroup/default/train: 1 member(s) nominated to gpu-0; 1 victim(s) still terminating" in text


@pytest.mark.parametrize(
    ("args", "want_error"),
    [
        pytest.param(
            ["pod", "nope", "-n", "ml"], 'Error from server (NotFound): pods "nope" not found', id="unknown pod"
        ),
        pytest.param(
            ["pg", "nope", "-n", "ml"],
            'Error from server (NotFound): podgroups.scheduling.phalanx.dev "nope" not found',
            id="unknown podgroup",
        ),
        pytest.param(
            ["podgroups.scheduling.k8s.io/llama-finetune", "-n", "ml"],
            'Error from server (NotFound): podgroups.scheduling.k8s.io "llama-finetune" not found',
            id="the native kind is another kind",
        ),
        pytest.param(
            ["pod", "chat-api-0", "-n", "serving"],
            "error: pod serving/chat-api-0 is not scheduled by phalanx-scheduler (its spec.schedulerName is "
            "default-scheduler)",
            id="a pod not ours",
        ),
        pytest.param(
            ["deployment", "x"], 'error: the server doesn\'t have a resource type "deployment"', id="bad type"
        ),
        pytest.param(["pod"], "error: you must specify the name of the pod to explain", id="no name"),
    ],
)
def test_bad_input_is_one_kubectl_line_and_exit_1(
    args: list[str], want_error: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = explain(capsys, *args, "-f", DEMO, "--now", DEMO_NOW)
    assert (code, out) == (1, "")
    assert err.startswith(want_error) and err.count("\n") == 1, err


def test_now_is_for_dumps_only(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = explain(capsys, "pod", "x", "--now", NOW, "--kubeconfig", "/nonexistent")
    assert code == 1
    assert err == "error: --now only applies to a dump (-f): a live cluster is explained as it is now\n"


def test_a_broken_dump_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"}, "spec": 3}))
    code, _, err = explain(capsys, "pod", "x", "-f", str(path), "--now", NOW)
    assert code == 1 and err.startswith(f"error: {path}: document 1 (Pod x): spec:") and err.count("\n") == 1


def test_yaml_is_the_json_document(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    objects = [*gpu_pool(), make_podgroup("train").gang(4).obj(), make_pod("w0").req(gpu=1).group("train").obj()]
    path = dump(tmp_path, objects)
    code, out, err = explain(capsys, "pod/w0", "-f", path, "--now", NOW, "-o", "yaml")
    assert code == 0, err
    assert yaml.safe_load(out) == as_json(capsys, "pod/w0", "-f", path, "--now", NOW)


def test_a_pod_and_a_podgroup_of_one_name_are_explained_apart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`pod/train` is the lone pod, `podgroup/train` the gang waiting for members: neither takes the other's
    members, state or reason."""
    path = dump(
        tmp_path,
        [
            make_node("n0").cap(cpu="4").obj(),
            make_podgroup("train").gang(3).obj(),
            make_pod("train-0").req(cpu="1").group("train").obj(),
            make_pod("train").req(cpu="1").obj(),
        ],
    )
    pod = as_json(capsys, "pod/train", "-f", path, "--now", NOW)
    group = as_json(capsys, "podgroup/train", "-f", path, "--now", NOW)
    assert (pod["unit"]["kind"], pod["unit"]["reason"]) == ("Pod", "Pending")
    assert [m["pod"] for m in pod["members"]] == ["default/train"]
    assert pod["forecast"]["bound"] == [{"pod": "default/train", "node": "n0"}]
    assert (group["unit"]["kind"], group["unit"]["reason"]) == ("PodGroup", "WaitingForGang")
    assert [m["pod"] for m in group["members"]] == ["default/train-0"]


def test_a_pod_whose_affinity_needs_a_pod_that_does_not_run_is_told_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Adding nodes would not help a pod whose required affinity matches no running pod: `explain` says what would."""
    web = make_pod("web").req(cpu="1").pod_affinity("kubernetes.io/hostname", app="db")
    code, out, _ = explain(capsys, "pod", "web", "-f", dump(tmp_path, [make_node("n1").json(), web.json()]))
    assert code == 0
    assert "0/1 nodes are available: 1 node(s) didn't match pod affinity rules" in out
    assert "a pod its required pod affinity matches must run first" in out
    assert "add " not in out.partition("What would unblock it:")[2]


@pytest.mark.parametrize(
    ("labels", "running", "want_said"),
    [
        pytest.param(
            {"n0": {}},
            [],
            "no nodes found with topology label 'example.com/rack'",
            id="a topology label no node has",
        ),
        pytest.param(
            {"n0": {"example.com/rack": "a"}, "n1": {"example.com/rack": "b"}},
            ["n0", "n1"],
            "members already bound run in example.com/rack=a and example.com/rack=b: no topology domain holds them all",
            id="bound members in two racks",
        ),
    ],
)
def test_a_topology_group_no_domain_can_exist_for_says_why_once(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    labels: dict[str, dict[str, str]],
    running: list[str],
    want_said: str,
) -> None:
    """Issue 40 point 5: the placement's FitError is the reason itself, said once (as a PreFilter rejection), and
    what would unblock it says no node added would."""
    nodes = []
    for name, rack in labels.items():
        made = make_node(name).cap(cpu="4")
        for key, value in rack.items():
            made = made.label(key, value)
        nodes.append(made.obj())
    group = (
        make_podgroup("web").basic().spec_field("schedulingConstraints", {"topology": [{"key": "example.com/rack"}]})
    )
    members = [make_pod(f"web-{i}").req(cpu="1").group("web").on(node).stored().obj() for i, node in enumerate(running)]
    pending = make_pod(f"web-{len(running)}").req(cpu="1").group("web").stored().obj()
    path = dump(tmp_path, [*nodes, group.stored().obj(), *members, pending])
    code, text, err = explain(capsys, "pg", "web", "-f", path, "--now", NOW)
    assert code == 0, err
    fit = f"{len(running)} of {len(running) + 1} member(s) fit"
    assert f"Placement now: {fit}. 0/{len(nodes)} nodes are available: {want_said}.\n" in text
    assert f"  - no node can take it until the pod or the objects it names change: {want_said}\n" in text


def test_a_topology_group_no_domain_can_take_says_what_each_could(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 40 point 5: "Placement now" names the closest racks and how many members each could take, as the members'
    reason does; the JSON has every rack (`atMost`: a bound, the rack passed over without placing a pod). Rack a has
    room for a member on each node but one is tainted: placed there, 3 fit."""
    rack = "example.com/rack"
    objects: list[Any] = []
    for i in range(4):
        node = make_node(f"a{i}").cap(cpu="3").label(rack, "a")
        objects += [
            (node.taint("maintenance") if i == 3 else node).obj(),
            make_pod(f"busy-a{i}").req(cpu="1").on(f"a{i}").stored().obj(),
        ]
    objects += [
        make_node("b0").cap(cpu="4").label(rack, "b").obj(),
        make_node("c0").cap(cpu="1").label(rack, "c").obj(),
    ]
    group = make_podgroup("train").gang(4).spec_field("schedulingConstraints", {"topology": [{"key": rack}]})
    objects += [group.stored().obj(), *(make_pod(f"w{i}").req(cpu="2").group("train").stored().obj() for i in range(4))]
    path = dump(tmp_path, objects)
    code, text, err = explain(capsys, "pg", "train", "-f", path, "--now", NOW)
    assert code == 0, err
    assert (
        "Placement now: 3 of 4 member(s) fit. no topology domain can take 4 members (example.com/rack=a: 3 of 4 members"
        " fit; example.com/rack=b: at most 2 of 4 members fit; example.com/rack=c: 0 of 4 members fit); 0/6 nodes are"
        " available: 1 node(s) had untolerated taint {maintenance}, 4 Insufficient cpu.\n"
    ) in text
    placement = as_json(capsys, "pg", "train", "-f", path, "--now", NOW)["placement"]
    assert placement["domains"] == [
        {"name": "example.com/rack=a", "fit": 3, "needed": 4, "atMost": False},
        {"name": "example.com/rack=b", "fit": 2, "needed": 4, "atMost": True},
        {"name": "example.com/rack=c", "fit": 0, "needed": 4, "atMost": False},
    ]
