"""What `phalanx simulate` tells people and tools (issue 13): the demo, the summary per decision, the
per-victim detail behind `-v`, and the `decisions` list of `-o json`."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from phalanx.cli import main
from tests.builders import make_node, make_pod, make_podgroup, make_priority_class, yaml_documents

ROOT = Path(__file__).resolve().parents[2]
NOW = "2026-03-01T12:00:00Z"


def demo_path() -> Path:
    """The scenario `make demo` runs (the Makefile's DEMO), so the test follows the Makefile."""
    found = re.search(r"^DEMO \?= (\S+)$", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert found is not None, "the Makefile names its demo scenario in `DEMO ?= ...`"
    return ROOT / found.group(1)


def run(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(["simulate", "--now", NOW, *args]) == 0
    return capsys.readouterr().out


def flat(text: str) -> str:
    """Text output with table cells and wrapped lines joined, for phrase checks."""
    return " ".join(text.replace("│", " ").split())


def test_demo_shows_a_preemption_a_protected_unit_and_the_bindings_that_follow(
    capsys: pytest.CaptureFixture[str],
) -> None:
    text = run(capsys, str(demo_path()))
    lines = text.splitlines()
    assert lines[0] == f"Simulated {NOW} .. 2026-03-01T12:15:31Z: 7 bound, 6 preempted, 0 pending"
    assert f"{NOW} preemptor podgroup/ml/llama-finetune (priority 5000): preempting 4 unit(s)" in text
    assert (
        "victims: 4 units (podgroup/research/sweep, batch/etl-0, batch/etl-1, batch/etl-2), 5 pods on 2 nodes; "
        "pods by priority: 10 (3), 100 (2); by namespace: batch (3), research (2)"
    ) in text
    assert "binary-search bound: priority 100" in text
    assert "spared 2 candidates: Protected (1), Reprieved (1)" in text
    assert (
        "protected by PreemptionToleration: physics/sim-42 tolerates preemption by priority 5000 "
        "(PriorityClass no-checkpoint, minimum-preemptable-priority 10000) until 12:15:01Z"
    ) in text
    assert "2026-03-01T12:15:01Z preemptor ml/eval-harness (priority 3000): preempting 1 unit(s)" in text
    table = flat(text)
    assert "2026-03-01T12:00:30Z 6 2 ml/llama-finetune-0" in table, "the gang binds once its victims are gone"
    assert "2026-03-01T12:15:31Z 1 1 ml/eval-harness" in table, "the clock moves on to the toleration's end"
    report = json.loads(run(capsys, str(demo_path()), "-o", "json"))
    gone = {p["victim"]: p["time"] for p in report["preemptions"]}
    assert gone["research/sweep-0"] == gone["research/sweep-1"] == NOW
    assert gone["physics/sim-42"] == "2026-03-01T12:15:01Z"
    assert {b["time"] for b in report["bindings"] if b["pod"].startswith("ml/llama")} == {"2026-03-01T12:00:30Z"}


def test_json_decisions_carry_the_whole_explanation(capsys: pytest.CaptureFixture[str]) -> None:
    report = json.loads(run(capsys, str(demo_path()), "-o", "json"))
    first, second = report["decisions"]
    assert first["schemaVersion"] == "phalanx.dev/decision/v2"
    assert set(first) == {
        "schemaVersion",
        "time",
        "preemptor",
        "preemptorPriority",
        "outcome",
        "message",
        "bound",
        "victims",
        "spared",
        "nominations",
        "pending",
        "pdbViolations",
        "until",
        "domains",
        "domainsPassedOver",
    }
    assert (first["time"], first["preemptor"], first["outcome"], first["bound"]) == (
        NOW,
        "podgroup/ml/llama-finetune",
        "Preempt",
        100,
    )
    sweep = first["victims"][0]
    assert sweep == {
        "unit": "podgroup/research/sweep",
        "priority": 100,
        "pods": ["research/sweep-0", "research/sweep-1"],
        "nodes": ["gpu-1"],
        "reason": "DisruptionModePodGroup",
        "message": "disruptionMode PodGroup: its 2 pods are preempted together",
    }
    assert {v["unit"]: v["reason"] for v in first["victims"][1:]} == dict.fromkeys(
        ("batch/etl-0", "batch/etl-1", "batch/etl-2"), "LowerPriority"
    )
    spared = {s["unit"]: (s["plugin"], s["reason"], s["until"]) for s in first["spared"]}
    assert spared == {
        "physics/sim-42": ("PreemptionToleration", "Protected", "2026-03-01T12:15:01Z"),
        "batch/etl-3": ("WorkloadPreemption", "Reprieved", None),
    }
    assert len(first["nominations"]) == 6 and all(set(n) == {"pod", "node"} for n in first["nominations"])
    assert (second["preemptor"], [v["unit"] for v in second["victims"]]) == ("ml/eval-harness", ["physics/sim-42"])
    assert second["time"] == "2026-03-01T12:15:01Z"


def test_json_decisions_say_why_preemption_cannot_help(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(
        yaml_documents(
            [
                make_priority_class("high", 100).json(),
                make_priority_class("top", 1000).json(),
                make_node("n1").cap(cpu="2").json(),
                make_pod("vip").req(cpu="1").priority_class("top").on("n1").json(),
                make_pod("big").req(cpu="2").priority_class("high").json(),
            ]
        )
    )
    (decision,) = json.loads(run(capsys, str(path), "-o", "json"))["decisions"]
    assert (decision["preemptor"], decision["outcome"], decision["bound"], decision["victims"]) == (
        "default/big",
        "CannotHelp",
        None,
        [],
    )
    assert decision["pending"] == [{"pod": "default/big", "message": decision["message"]}]


def test_per_victim_detail_only_with_verbose(capsys: pytest.CaptureFixture[str]) -> None:
    text = run(capsys, str(demo_path()))
    assert "victim podgroup/research/sweep" not in text and "Preemptions" not in text
    assert "nominated ml/llama-finetune-0" not in text
    verbose = run(capsys, str(demo_path()), "-v")
    assert "  victim podgroup/research/sweep (priority 100) on gpu-1: DisruptionModePodGroup" in verbose
    assert "  spared batch/etl-3 (priority 10) by WorkloadPreemption: Reprieved" in verbose
    assert "  nominated ml/llama-finetune-0 -> gpu-0" in verbose
    assert "Preemptions" in verbose and "gpu-2" in verbose, "-v lists every preempted pod and every node"


def cluster_dump(pods_per_node: int, nodes: int, gang: int) -> list[dict[str, Any]]:
    """A busy GPU pool as a cluster dump (every running object stored) and one pending gang."""
    started = datetime(2026, 3, 1, 11, 0, tzinfo=UTC)
    objects: list[dict[str, Any]] = [
        make_priority_class(name, value).stored().json()
        for name, value in (("batch", 10), ("research", 100), ("serving", 10000), ("training", 1000))
    ]
    classes = {"batch-a": "batch", "batch-b": "batch", "research": "research", "serving": "serving"}
    for n in range(nodes):
        objects.append(make_node(f"node-{n:03d}").cap(cpu="32", gpu=8).stored().json())
        for i in range(pods_per_node):
            namespace = list(classes)[(n + i) % len(classes)]
            pod = make_pod(f"p-{n:03d}-{i}").ns(namespace).req(cpu="3", gpu=1 if i < 8 else 0)
            objects.append(pod.priority_class(classes[namespace]).on(f"node-{n:03d}", started).stored().json())
    objects.append(make_podgroup("train").ns("ml").gang(gang).priority_class("training").json())
    objects += [
        make_pod(f"train-{i}").ns("ml").req(cpu="4", gpu=4).group("train").priority_class("training").json()
        for i in range(gang)
    ]
    return objects


def test_a_what_if_on_a_cluster_dump_fits_a_screen(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A 64-pod gang against a 2,000-pod dump: 256 victims, yet one summary and grouped tables."""
    path = tmp_path / "dump.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": cluster_dump(10, 200, 64)}))
    text = run(capsys, str(path))
    assert len(text.splitlines()) <= 50, text
    assert "64 bound, 256 preempted, 0 pending" in text
    assert "victims: 256 units (" in text and "256 pods on 64 nodes; pods by priority: 10 (256)" in text
    assert "by namespace: batch-a (128), batch-b (128)" in text
    assert "binary-search bound: priority 10" in text
    verbose = run(capsys, str(path), "-v")
    assert sum(1 for line in verbose.splitlines() if line.startswith("  victim ")) == 256


def test_repeated_admission_warnings_are_capped_without_verbose(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Twelve members whose own class differs from their group's: ten warnings, then a count."""
    objects: list[Any] = [
        make_priority_class("high", 100).json(),
        make_priority_class("low", 10).json(),
        make_node("n1").cap(cpu="16").json(),
        make_podgroup("g").gang(12).priority_class("high").json(),
        *(make_pod(f"g-{i}").req(cpu="1").group("g").priority_class("low").json() for i in range(12)),
    ]
    path = tmp_path / "s.yaml"
    path.write_text(yaml_documents(objects))
    assert main(["simulate", "--now", NOW, str(path)]) == 0
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 11 and err[-1] == "Warning: 2 more admission warnings (-v shows all)"
    assert main(["simulate", "--now", NOW, "-v", str(path)]) == 0
    err = capsys.readouterr().err.splitlines()
    assert sum(1 for line in err if "differs from" in line) == 12
