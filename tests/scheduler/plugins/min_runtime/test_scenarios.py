"""Protections end to end through `phalanx simulate -o json`: who waits, why, and when the clock lets them in."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from phalanx.cli import main
from tests.builders import make_node, make_pod, make_podgroup, make_priority_class, make_queue, yaml_documents
from tests.scheduler.plugins.min_runtime.units import scheduled

EXAMPLES = Path(__file__).resolve().parents[4] / "examples"
NOW = "2026-11-22T12:30:00Z"
NOW_DT = datetime(2026, 11, 22, 12, 30, tzinfo=UTC)
TOLERATION = "preemption-toleration.scheduling.sigs.k8s.io/"


def simulate(capsys: pytest.CaptureFixture[str], path: Path, until: str) -> dict[str, Any]:
    assert main(["simulate", str(path), "--now", NOW, "--until", until, "-o", "json"]) == 0
    report: dict[str, Any] = json.loads(capsys.readouterr().out)
    return report


def bound(report: dict[str, Any]) -> dict[str, str]:
    return {b["pod"]: b["time"] for b in report["bindings"]}


def preempted(report: dict[str, Any]) -> dict[str, str]:
    return {p["victim"]: p["time"] for p in report["preemptions"]}


def pending(report: dict[str, Any]) -> dict[str, str]:
    return {p["pod"]: p["message"] for p in report["pending"]}


def test_min_runtime_makes_the_gang_wait_until_the_protection_ends(capsys: pytest.CaptureFixture[str]) -> None:
    report = simulate(capsys, EXAMPLES / "protection-min-runtime.yaml", "15m")
    assert preempted(report) == {
        "research-vision/finetune-0": "2026-11-22T12:35:00Z",
        "research-vision/finetune-1": "2026-11-22T12:35:00Z",
    }
    times = bound(report)
    assert set(times) == {"prod/train-0", "prod/train-1"}
    assert all(t >= "2026-11-22T12:35:00Z" for t in times.values())


def test_until_stops_the_clock_before_the_protection_ends(capsys: pytest.CaptureFixture[str]) -> None:
    report = simulate(capsys, EXAMPLES / "protection-min-runtime.yaml", "4m")
    assert report["preemptions"] == []
    assert report["bindings"] == []
    assert set(pending(report)) == {"prod/train-0", "prod/train-1"}


def test_elastic_victim_gives_up_only_members_above_min_count(capsys: pytest.CaptureFixture[str]) -> None:
    report = simulate(capsys, EXAMPLES / "protection-elastic.yaml", "10m")
    victims = preempted(report)
    assert len(victims) == 2
    assert all(v.startswith("inference/llm-serve-") for v in victims)
    assert set(bound(report)) == {"ml/train-0", "ml/train-1"}
    still_running = [p for node in report["nodes"].values() for p in node["pods"] if p.startswith("inference/")]
    assert len(still_running) == 2


def test_elastic_group_never_drops_below_min_count_while_protected(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A gang wanting every replica takes the two above minCount now and the rest at 12:58:00Z, when the
    group's min-runtime ends; the group never runs fewer than minCount replicas while protected."""
    docs = list(yaml.safe_load_all((EXAMPLES / "protection-elastic.yaml").read_text()))
    member = next(d for d in docs if d["kind"] == "Pod" and d["metadata"]["name"] == "train-0")
    for i in (2, 3):
        docs.append({**member, "metadata": {**member["metadata"], "name": f"train-{i}"}})
    scenario = tmp_path / "greedy.yaml"
    scenario.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    report = simulate(capsys, scenario, "40m")
    times = sorted(preempted(report).values())
    assert times == ["2026-11-22T12:30:00Z"] * 2 + ["2026-11-22T12:58:00Z"] * 2
    assert len(bound(report)) == 4


def test_toleration_holds_the_preemptor_until_the_window_is_over(capsys: pytest.CaptureFixture[str]) -> None:
    report = simulate(capsys, EXAMPLES / "protection-toleration.yaml", "30m")
    assert preempted(report) == {"physics/sim-42": "2026-11-22T12:40:01Z"}
    assert set(bound(report)) == {"batch/etl"}


def test_pending_gang_names_the_min_runtime_protection(capsys: pytest.CaptureFixture[str]) -> None:
    report = simulate(capsys, EXAMPLES / "protection-min-runtime.yaml", "4m")
    assert (
        "research-vision/finetune is protected by reclaim-min-runtime 10m (queue research) until 12:35:00Z"
        in pending(report)["prod/train-0"]
    )


def test_pending_pod_names_the_toleration(capsys: pytest.CaptureFixture[str]) -> None:
    report = simulate(capsys, EXAMPLES / "protection-toleration.yaml", "5m")
    assert (
        "physics/sim-42 tolerates preemption by priority 5000 (PriorityClass no-checkpoint, "
        "minimum-preemptable-priority 10000) until 12:40:01Z" in pending(report)["batch/etl"]
    )


def test_preemptor_at_minimum_preemptable_priority_preempts_at_once(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    scenario = tmp_path / "critical.yaml"
    scenario.write_text(
        yaml_documents(
            [
                make_priority_class("no-checkpoint", 1000)
                .annotate(TOLERATION + "minimum-preemptable-priority", "10000")
                .annotate(TOLERATION + "toleration-seconds", "-1")
                .obj(),
                make_priority_class("critical", 10000).obj(),
                make_node("n1").cap(cpu="4").obj(),
                scheduled(make_pod("sim").ns("physics").req(cpu="4").priority_class("no-checkpoint"), NOW_DT).obj(),
                make_pod("urgent").ns("ops").req(cpu="4").priority_class("critical").obj(),
            ]
        )
    )
    report = simulate(capsys, scenario, "10m")
    assert preempted(report) == {"physics/sim": NOW}
    assert set(bound(report)) == {"ops/urgent"}


def test_gang_bound_during_the_run_is_protected_from_its_binding(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """`big` waits for `old` (protected 9 more minutes); meanwhile `small` binds at 12:30:00Z, so `big` may take
    both nodes only when `small`'s own reclaim-min-runtime (10m) ends at 12:40:00Z, not when `old`'s does."""
    objects = [
        make_priority_class("low", 100).obj(),
        make_priority_class("mid", 1000).obj(),
        make_priority_class("high", 6000).obj(),
        make_queue("a").reclaim_min_runtime("10m").obj(),
        make_queue("b").obj(),
        make_node("n1").cap(cpu="4").obj(),
        make_node("n2").cap(cpu="4").obj(),
        scheduled(make_pod("old").req(cpu="4").priority_class("low").queue("a"), NOW_DT - timedelta(minutes=1)).obj(),
        make_podgroup("small").gang(1).priority_class("mid").queue("a").obj(),
        make_pod("small-0").req(cpu="4").priority_class("mid").group("small").obj(),
        make_podgroup("big").gang(2).priority_class("high").queue("b").obj(),
        make_pod("big-0").req(cpu="4").priority_class("high").group("big").obj(),
        make_pod("big-1").req(cpu="4").priority_class("high").group("big").obj(),
    ]
    scenario = tmp_path / "chain.yaml"
    scenario.write_text(yaml_documents(objects))
    report = simulate(capsys, scenario, "30m")
    assert bound(report)["default/small-0"] == NOW
    assert preempted(report)["default/small-0"] >= "2026-11-22T12:40:00Z"
