"""A lone pod and a PodGroup of the same name in one namespace are two scheduling units.

Pod names and PodGroup names are chosen apart (a controller may name its group after a pod it also runs alone);
the scheduler must neither take the pod for a member of the group nor spare the group's members as the pod's own.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from phalanx.cli import main
from tests.builders import make_node, make_pod, make_podgroup, make_priority_class, yaml_documents
from tests.scheduler.scenario import run

NOW = "2026-01-01T00:00:00Z"


def simulate(capsys: pytest.CaptureFixture[str], tmp_path: Path, *objects: Any) -> Any:
    """`phalanx simulate -o json` over the objects, for ten minutes."""
    path = tmp_path / "scenario.yaml"
    classes = [make_priority_class("low", 10), make_priority_class("high", 1000)]
    path.write_text(yaml_documents([o.json() for o in (*classes, *objects)]))
    assert main(["simulate", str(path), "--now", NOW, "--until", "10m", "-o", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_a_lone_pod_named_as_a_pending_gang_is_scheduled_beside_it() -> None:
    outcome = run(
        *(make_node(f"n{i}").cap(cpu="4").obj() for i in range(3)),
        make_podgroup("train").gang(2).obj(),
        make_pod("train-0").req(cpu="4").group("train").obj(),
        make_pod("train-1").req(cpu="4").group("train").obj(),
        make_pod("train").req(cpu="4").obj(),
    )
    assert sorted(outcome.bound) == ["default/train", "default/train-0", "default/train-1"]


def test_a_lone_pod_named_as_a_waiting_gang_is_not_held_with_it() -> None:
    outcome = run(
        make_node("n0").cap(cpu="4").obj(),
        make_podgroup("train").gang(3).obj(),
        make_pod("train-0").req(cpu="1").group("train").obj(),
        make_pod("train").req(cpu="1").obj(),
    )
    assert outcome.bound == {"default/train": "n0"}
    reason, message = outcome.pending("train-0") or ("", "")
    assert (reason, message) == ("WaitingForGang", "1/3 members exist, gang needs 3")


def test_a_lone_pod_preempts_the_members_of_a_lower_group_of_its_name(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    report = simulate(
        capsys,
        tmp_path,
        make_node("n0").cap(cpu="4"),
        make_podgroup("batch").basic().priority_class("low"),
        make_pod("batch-0").req(cpu="4").group("batch").on("n0"),
        make_pod("batch").req(cpu="4").priority_class("high"),
    )
    assert [p["victim"] for p in report["preemptions"]] == ["default/batch-0"]
    assert [(b["pod"], b["node"]) for b in report["bindings"]] == [("default/batch", "n0")]
    (decision,) = report["decisions"]
    assert (decision["preemptor"], [v["unit"] for v in decision["victims"]]) == ("default/batch", ["default/batch-0"])


def test_a_gang_preempts_a_lone_pod_of_its_name(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    report = simulate(
        capsys,
        tmp_path,
        make_node("n0").cap(cpu="4"),
        make_pod("train").req(cpu="4").priority_class("low").on("n0"),
        make_podgroup("train").gang(1).priority_class("high"),
        make_pod("train-0").req(cpu="4").group("train"),
    )
    assert [p["victim"] for p in report["preemptions"]] == ["default/train"]
    assert [(b["pod"], b["node"]) for b in report["bindings"]] == [("default/train-0", "n0")]
    (decision,) = report["decisions"]
    assert (decision["preemptor"], [v["unit"] for v in decision["victims"]]) == (
        "podgroup/default/train",
        ["default/train"],
    )
