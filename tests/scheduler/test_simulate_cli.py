"""`phalanx simulate` end to end: input forms, output contract, flags, examples and bad input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from phalanx.cli import main
from scheduler.api.manifest import KINDS
from tests.builders import make_node, make_pod, make_podgroup, make_priority_class, yaml_documents

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
NOW = "2026-01-01T00:00:00Z"


def simulate(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any] | None, str]:
    code = main(["simulate", "--now", NOW, "-o", "json", *args])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if out.strip() else None), err


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_json_has_exactly_the_documented_keys(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scenario = yaml_documents(
        [make_node("n1").cap(cpu="1").obj(), make_pod("a").req(cpu="1").obj(), make_pod("b").req(cpu="1").obj()]
    )
    code, report, _ = simulate(capsys, write(tmp_path, "s.yaml", scenario))
    assert code == 0 and report is not None
    assert set(report) == {"bindings", "preemptions", "pending", "nodes", "decisions"}
    assert report["bindings"] == [{"pod": "default/a", "node": "n1", "time": NOW}]
    assert report["preemptions"] == []
    assert [set(p) for p in report["pending"]] == [{"pod", "reason", "message"}]
    assert report["nodes"]["n1"] == {
        "pods": ["default/a"],
        "allocatable": {"cpu": "1", "memory": "32Gi", "pods": "110"},
        "allocated": {"cpu": "1", "pods": "1"},
    }


def test_kind_list_as_kubectl_emits_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    listing = {
        "apiVersion": "v1",
        "kind": "List",
        "items": [make_node("n1").json(), make_pod("p").req(cpu="1").json()],
        "metadata": {"resourceVersion": ""},
    }
    typed = {"apiVersion": "v1", "kind": "PodList", "items": [make_pod("q").req(cpu="1").json()]}
    for item in typed["items"]:
        del item["kind"]
    path = write(tmp_path, "dump.yaml", yaml.safe_dump(listing))
    code, report, _ = simulate(capsys, path, write(tmp_path, "pods.json", json.dumps(typed)))
    assert code == 0 and report is not None
    assert {b["pod"] for b in report["bindings"]} == {"default/p", "default/q"}


def test_quantities_are_exact(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Eight 250m pods fill a 2-CPU node exactly; 1.5Gi holds three 512Mi pods, not a fourth."""
    objects: list[Any] = [make_node("cpu").cap(cpu="2", memory="1e12").obj(), make_node("mem").cap(cpu="0.5").obj()]
    objects.append(make_node("mem2").cap(cpu="100", memory="1.5Gi").label("kind", "mem").obj())
    objects += [
        make_pod(f"c{i}").req(cpu="250m").node_selector(**{"kubernetes.io/hostname": "cpu"}).obj() for i in range(9)
    ]
    objects += [make_pod(f"m{i}").req(memory="512Mi").node_selector(kind="mem").obj() for i in range(4)]
    code, report, _ = simulate(capsys, write(tmp_path, "q.yaml", yaml_documents(objects)))
    assert code == 0 and report is not None
    assert report["nodes"]["cpu"]["allocated"]["cpu"] == "2"
    assert report["nodes"]["mem2"]["allocated"]["memory"] == "1536Mi"
    assert {p["pod"] for p in report["pending"]} == {"default/c8", "default/m3"}


@pytest.mark.parametrize(
    ("documents", "want_parts"),
    [
        pytest.param(
            "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n---\n"
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n"
            "  - name: c\n    resources: {requests: {cpu: two}}\n",
            ["document 2", "Pod p", "spec.containers[0].resources.requests", "cpu", "'two' is not a quantity"],
            id="unparsable quantity names file, document and field",
        ),
        pytest.param(
            "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n---\n"
            "apiVersion: apps/v1\nkind: Frobnicator\nmetadata: {name: x}\n",
            ["document 2", "kind: Unsupported value: apps/v1/Frobnicator"],
            id="unknown kind",
        ),
        pytest.param(
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n"
            "spec: {priorityClassName: gold, containers: [{name: c}]}\n",
            ["document 1", "Pod", "spec.priorityClassName", "gold"],
            id="pod naming a missing PriorityClass",
        ),
        pytest.param(
            "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n---\nkind: Pod\nmetadata: {name: [unclosed\n",
            ["document 2", "not valid YAML"],
            id="broken YAML document",
        ),
        pytest.param(
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n"
            "spec: {containers: [{name: c}], schedulingGates: [{name: a.io/x}, {name: a.io/x}]}\n",
            ["document 1", "Pod", "spec.schedulingGates[1].name", "Duplicate value"],
            id="admission denial is an input error",
        ),
    ],
)
def test_bad_input_exits_2_and_applies_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], documents: str, want_parts: list[str]
) -> None:
    path = write(tmp_path, "bad.yaml", documents)
    code, report, err = simulate(capsys, path)
    assert code == 2
    assert report is None
    assert len(err.strip().splitlines()) == 1
    assert err.startswith(f"phalanx simulate: {path}: ")
    for part in want_parts:
        assert part in err


def test_until_stops_the_virtual_clock(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    objects = [
        make_node("n1").cap(cpu="1").obj(),
        make_pod("old").req(cpu="1").on("n1").terminating(grace=60).obj(),
        make_pod("new").req(cpu="1").obj(),
    ]
    path = write(tmp_path, "s.yaml", yaml_documents(objects))
    code, report, _ = simulate(capsys, path, "--until", "30s")
    assert code == 0 and report is not None
    assert report["bindings"] == []
    code, report, _ = simulate(capsys, path)
    assert report is not None
    assert report["bindings"] == [{"pod": "default/new", "node": "n1", "time": "2026-01-01T00:01:00Z"}]


def test_all_pending_places_other_schedulers_pods(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    objects = [make_node("n1").obj(), make_pod("web").scheduler("default-scheduler").req(cpu="1").obj()]
    path = write(tmp_path, "s.yaml", yaml_documents(objects))
    _, report, _ = simulate(capsys, path)
    assert report is not None
    assert report["pending"][0]["pod"] == "default/web"
    assert report["pending"][0]["reason"] == "OtherScheduler"
    _, report, _ = simulate(capsys, path, "--all-pending")
    assert report is not None
    assert [b["pod"] for b in report["bindings"]] == ["default/web"]


@pytest.mark.parametrize("inline", [pytest.param(False, id="--config file"), pytest.param(True, id="config document")])
def test_scoring_strategy_from_configuration(tmp_path: Path, capsys: pytest.CaptureFixture[str], inline: bool) -> None:
    config = {
        "apiVersion": "scheduling.phalanx.dev/v1alpha1",
        "kind": "SchedulerConfiguration",
        "scoringStrategy": {"type": "MostAllocated", "resources": {"cpu": 1}},
    }
    objects: list[Any] = [make_node("a").obj(), make_node("b").obj(), make_pod("r").req(cpu="4").on("b").obj()]
    objects.append(make_pod("p").req(cpu="1").obj())
    args = []
    if inline:
        objects.append(config)
    else:
        args = ["--config", write(tmp_path, "config.yaml", yaml.safe_dump(config))]
    _, report, _ = simulate(capsys, write(tmp_path, "s.yaml", yaml_documents(objects)), *args)
    assert report is not None
    assert report["bindings"][0]["node"] == "b"


def test_directory_input_and_admission_gates_gang_members(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Members get our gate at admission; the scheduler lifts it once the whole gang exists."""
    (tmp_path / "nodes.yaml").write_text(yaml_documents([make_node("n1").obj()]))
    members = [make_pod(f"t{i}").req(cpu="1").group("train").obj() for i in range(2)]
    (tmp_path / "train.yaml").write_text(
        yaml_documents([make_priority_class("p", 5).obj(), make_podgroup("train").gang(2).obj(), *members])
    )
    code, report, _ = simulate(capsys, str(tmp_path))
    assert code == 0 and report is not None
    assert sorted(b["pod"] for b in report["bindings"]) == ["default/t0", "default/t1"]


@pytest.mark.parametrize(
    ("example", "args", "want_bound", "want_reasons"),
    [
        pytest.param(
            "training-gang-busy-pool.yaml",
            [],
            {f"ml/llama-finetune-{i}" for i in range(8)},
            {"ml/bert-sweep-0": "Unschedulable", "ml/eval-harness-0": "WaitingForGang"},
            id="training gang binds whole on a busy pool",
        ),
        pytest.param(
            "multi-host-inference.yaml",
            [],
            {f"serving/llm-70b-{r}-{m}" for r in (0, 1) for m in ("leader", "worker-1", "worker-2", "worker-3")}
            | {"serving/router-0"},
            {"serving/llm-70b-2-leader": "Unschedulable"},
            id="two inference replicas fit, the third waits whole",
        ),
        pytest.param(
            "foreign-scheduling-gate.yaml",
            [],
            {"data/etl-1"},
            {"data/etl-0": "SchedulingGated", "data/spark-job-driver": "Unschedulable", "web/web-0": "OtherScheduler"},
            id="foreign gates hold pods and their gang",
        ),
        pytest.param(
            "cluster-dump-list.yaml",
            ["--all-pending"],
            {"shop/api-7d9f8-j7k8l", "shop/api-7d9f8-m9n0p"},
            {"shop/reports-6f7a8-t3u4v": "Unschedulable", "shop/search-indexer-5c6d7-q1r2s": "Unschedulable"},
            id="what-if on a kubectl List dump places every pending pod",
        ),
        pytest.param(
            "devices.yaml",
            [],
            {f"ml/{p}" for p in ("train-a100", "h100-a", "h100-b", "render-0", "render-1", "wants-h100-else-l4")},
            {"ml/pair-of-h100": "Unschedulable", "ml/no-template": "Unschedulable"},
            id="devices allocated through DRA, and two claims that cannot be",
        ),
    ],
)
def test_examples(
    capsys: pytest.CaptureFixture[str],
    example: str,
    args: list[str],
    want_bound: set[str],
    want_reasons: dict[str, str],
) -> None:
    code, report, _ = simulate(capsys, str(EXAMPLES / example), *args)
    assert code == 0 and report is not None
    assert {b["pod"] for b in report["bindings"]} == want_bound
    reasons = {p["pod"]: p["reason"] for p in report["pending"]}
    assert {k: reasons.get(k) for k in want_reasons} == want_reasons


def test_text_output_for_people(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["simulate", "--now", NOW, str(EXAMPLES / "foreign-scheduling-gate.yaml")])
    out = capsys.readouterr().out
    assert code == 0
    for heading in ("Bindings", "Pending", "Node usage"):
        assert heading in out
    assert "SchedulingGated" in out


@pytest.mark.parametrize(
    ("args", "want"),
    [
        pytest.param(["--now", "yesterday"], "--now: Invalid value: 'yesterday'", id="bad --now"),
        pytest.param(["--until", "5x"], "--until: Invalid value: '5x' is not a duration", id="bad --until"),
        pytest.param(["missing.yaml"], "missing.yaml: no such file or directory", id="missing file"),
    ],
)
def test_bad_flags_exit_2(capsys: pytest.CaptureFixture[str], args: list[str], want: str) -> None:
    paths = [] if args[0] == "missing.yaml" else [str(EXAMPLES / "foreign-scheduling-gate.yaml")]
    code = main(["simulate", *paths, *args])
    err = capsys.readouterr().err
    assert code == 2
    assert want in err


@pytest.mark.parametrize(
    ("legacy_priority", "want_preempted"),
    [
        pytest.param(50, ["default/old"], id="spec.priority 50 is below the preemptor's 100: preempted"),
        pytest.param(5000, [], id="spec.priority 5000 is above the preemptor's 100: kept, not taken as 0"),
    ],
)
def test_dump_with_a_deleted_priority_class_runs_on_stored_priorities(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], legacy_priority: int, want_preempted: list[str]
) -> None:
    """Issue 11, defect 4: a `kubectl get -A -o yaml` dump whose running pod names a deleted class.

    Stored objects (with a resourceVersion) are not admitted again: the pod's `spec.priority` is its
    priority, as kube-scheduler has it, and the Warnings table says the class is missing.
    """
    items = [
        make_priority_class("high", 100).stored().json(),
        make_node("n1").cap(cpu="1").stored().json(),
        make_pod("old").req(cpu="1").priority_class("legacy").priority(legacy_priority).on("n1").stored().json(),
        make_pod("new").req(cpu="1").priority_class("high").priority(100).stored().json(),
    ]
    dump = write(tmp_path, "dump.yaml", yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
    code, report, err = simulate(capsys, dump)
    assert code == 0, err
    assert report is not None
    assert [p["victim"] for p in report["preemptions"]] == want_preempted
    code = main(["simulate", "--now", NOW, dump])
    text = capsys.readouterr().out
    assert code == 0
    assert "Warnings" in text and "PriorityClassNotFound" in text
    assert "no PriorityClass with name legacy was found" in " ".join(text.split())


def test_help_gives_a_kubectl_command_for_every_kind_simulate_reads(capsys: pytest.CaptureFixture[str]) -> None:
    """The what-if recipe names each kind `simulate` parses, ours group-qualified: on a cluster serving
    `scheduling.k8s.io/v1alpha2`, plain `podgroups` would read the native PodGroups, not ours."""
    with pytest.raises(SystemExit):
        main(["simulate", "--help"])
    text = capsys.readouterr().out
    (command,) = [line for line in text.splitlines() if line.strip().startswith("kubectl get ")]
    asked = set(command.split()[2].split(","))
    native = "scheduling.k8s.io/v1alpha2"
    for api_version, kind in KINDS:
        if kind == "SchedulerConfiguration":
            continue
        plural = kind.lower() + ("es" if kind.endswith("s") else "s")
        group = api_version.rpartition("/")[0]
        if api_version == native:
            assert f"{plural}.{group}" in text, f"the help says how to add native {kind}s"
        elif group == "scheduling.phalanx.dev":
            assert f"{plural}.{group}" in asked, f"{kind} ({api_version}) must be read group-qualified"
        else:
            assert plural in asked, f"{kind} ({api_version}) is read by simulate but not fetched by the recipe"
