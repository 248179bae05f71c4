"""Configuration the scheduler ignores: treated as documented, and reported once where users look.

Through `phalanx simulate` (the Warnings table of `-o text`, log lines on stderr, JSON keys untouched)
and through the runner on the memory cluster (one Warning Event per finding, not one per pass).
PriorityClasses and Queues carry a resourceVersion, as read from a cluster: such objects predate
the webhook or slipped past it, so the scheduler must cope with them.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from phalanx.cli import main
from scheduler.api.config import SchedulerConfiguration
from scheduler.api.meta import ApiModel
from scheduler.cluster.memory import MemoryCluster
from scheduler.framework.runner import Scheduler
from scheduler.plugins import default_profile
from tests.builders import (
    make_config,
    make_node,
    make_pod,
    make_podgroup,
    make_priority_class,
    make_queue,
    yaml_documents,
)
from tests.scheduler.plugins.min_runtime.units import scheduled
from tests.scheduler.scenario import cluster_of

NOW = "2026-11-22T12:30:00Z"
NOW_DT = datetime(2026, 11, 22, 12, 30, tzinfo=UTC)
SIGS = "preemption-toleration.scheduling.sigs.k8s.io/"
XK8S = "preemption-toleration.scheduling.x-k8s.io/"


def simulate(capsys: pytest.CaptureFixture[str], path: Path, output: str) -> tuple[int, str, str]:
    code = main(["simulate", str(path), "--now", NOW, "--until", "30m", "-o", output])
    out, err = capsys.readouterr()
    return code, out, err


def squeeze(text: str) -> str:
    """Without whitespace: a table cell folded over several lines reads as one."""
    return "".join(text.split())


def warning_rows(out: str) -> list[list[str]]:
    """The Warnings table of `-o text` as (time, object, reason, message) rows, folded cells joined."""
    lines = out.splitlines()
    start = next((i for i, line in enumerate(lines) if line.strip().startswith("Warnings")), None)
    if start is None:
        return []
    rows: list[list[str]] = []
    for line in lines[start + 1 :]:
        if line.startswith("└"):
            break
        if not line.startswith("│"):
            continue
        cells = [c.strip() for c in line.strip().strip("│").split("│")]
        if cells[0]:
            rows.append(cells)
        else:
            rows[-1] = [f"{a} {b}".strip() for a, b in zip(rows[-1], cells, strict=True)]
    return rows


def write(tmp_path: Path, objects: list[Any]) -> Path:
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml_documents(objects))
    return path


def toleration_scenario(seconds: str) -> list[ApiModel]:
    """`sim` (class no-checkpoint) would tolerate a priority-5000 preemptor for `seconds` after 12:25:00Z."""
    return [
        make_priority_class("no-checkpoint", 1000)
        .annotate(SIGS + "minimum-preemptable-priority", "10000")
        .annotate(SIGS + "toleration-seconds", seconds)
        .stored("4711")
        .obj(),
        make_priority_class("batch-high", 5000).obj(),
        make_node("n1").cap(cpu="4").obj(),
        scheduled(
            make_pod("sim").ns("physics").req(cpu="4").priority_class("no-checkpoint"),
            NOW_DT - timedelta(minutes=5),
        ).obj(),
        make_pod("etl").ns("batch").req(cpu="4").priority_class("batch-high").obj(),
    ]


def test_unparsable_toleration_warns_once_and_protects_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = write(tmp_path, toleration_scenario("20m"))
    code, out, err = simulate(capsys, path, "text")
    assert code == 0
    rows = warning_rows(out)
    assert [row[:3] for row in rows] == [[NOW, "PriorityClass no-checkpoint", "InvalidPreemptionToleration"]]
    assert squeeze(rows[0][3]) == squeeze(
        f"metadata.annotations[{SIGS}toleration-seconds]: Invalid value: must be an int64 integer, got '20m'; "
        "treated as no toleration: pods of this class may be preempted by any higher priority"
    )
    assert err.count("InvalidPreemptionToleration") == 1, "one log line, not one per pass"

    code, out, err = simulate(capsys, path, "json")
    report = json.loads(out)
    assert set(report) == {"bindings", "preemptions", "pending", "nodes", "decisions"}
    assert {p["victim"]: p["time"] for p in report["preemptions"]} == {"physics/sim": NOW}
    assert [b["pod"] for b in report["bindings"]] == ["batch/etl"]
    assert err.count("InvalidPreemptionToleration") == 1


def test_valid_toleration_has_no_warning_and_protects(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The same scenario with a parsable value: the candidate is spared until 12:45:01Z, nothing is reported."""
    path = write(tmp_path, toleration_scenario("1200"))
    code, out, _ = simulate(capsys, path, "text")
    assert code == 0
    assert warning_rows(out) == []
    assert "Warnings" not in out
    _, out, _ = simulate(capsys, path, "json")
    assert {p["victim"]: p["time"] for p in json.loads(out)["preemptions"]} == {"physics/sim": "2026-11-22T12:45:01Z"}


def test_unparsable_toleration_written_by_hand_is_refused_as_the_webhook_would(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Without a resourceVersion the class is a CREATE: admission denies it, as on a cluster with the webhook."""
    objects = toleration_scenario("20m")
    objects[0].metadata.resource_version = None  # type: ignore[attr-defined]
    code, out, err = simulate(capsys, write(tmp_path, objects), "json")
    assert code == 2
    assert out == ""
    assert f"metadata.annotations[{SIGS}toleration-seconds]" in err


def min_runtime_scenario(where: str, value: str) -> list[Any]:
    """`sim` started 12:29:00Z; `etl` (higher priority, no queue) needs its node. `value` is a min-runtime
    on sim's queue (a reclaim) or in the SchedulerConfiguration defaults (a preempt: neither has a queue)."""
    objects: list[Any] = [
        make_priority_class("low", 1000).obj(),
        make_priority_class("batch-high", 5000).obj(),
        make_node("n1").cap(cpu="4").obj(),
        make_pod("etl").ns("batch").req(cpu="4").priority_class("batch-high").obj(),
    ]
    sim = make_pod("sim").ns("physics").req(cpu="4").priority_class("low")
    if where == "queue":
        objects.append(make_queue("research").reclaim_min_runtime(value).stored("77").obj())
        sim = sim.queue("research")
    else:
        objects.append(make_config(minRuntime={"preempt": value}).to_json())
    objects.append(scheduled(sim, NOW_DT - timedelta(minutes=1)).obj())
    return objects


@pytest.mark.parametrize(
    ("where", "value", "want_preempted_at", "want_rows"),
    [
        pytest.param("queue", "10m", "2026-11-22T12:39:00Z", [], id="queue duration protects 10m"),
        pytest.param(
            "queue",
            "-10m",
            NOW,
            [
                [
                    NOW,
                    "Queue research",
                    "InvalidMinRuntime",
                    "spec.reclaimMinRuntime: Invalid value: '-10m': '-10m' is negative: must be 0 or more; "
                    "treated as 0",
                ]
            ],
            id="negative queue duration is 0 with a warning",
        ),
        pytest.param(
            "queue",
            "ten minutes",
            NOW,
            [
                [
                    NOW,
                    "Queue research",
                    "InvalidMinRuntime",
                    "spec.reclaimMinRuntime: Invalid value: 'ten minutes': 'ten minutes' is not a duration: "
                    "expected e.g. 90s, 10m, 1h30m, 1.5h, 2d; treated as 0",
                ]
            ],
            id="unparsable queue duration is 0 with a warning",
        ),
        pytest.param("config", "10m", "2026-11-22T12:39:00Z", [], id="configured default protects 10m"),
        pytest.param(
            "config",
            "-10m",
            NOW,
            [
                [
                    NOW,
                    "SchedulerConfiguration",
                    "InvalidMinRuntime",
                    "SchedulerConfiguration minRuntime.preempt: Invalid value: '-10m': '-10m' is negative: "
                    "must be 0 or more; treated as 0",
                ]
            ],
            id="negative configured default is 0 with a warning",
        ),
    ],
)
def test_bad_min_runtime_is_zero_and_reported_once(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    where: str,
    value: str,
    want_preempted_at: str,
    want_rows: list[list[str]],
) -> None:
    path = write(tmp_path, min_runtime_scenario(where, value))
    code, out, err = simulate(capsys, path, "text")
    assert code == 0
    rows = warning_rows(out)
    assert [row[:3] for row in rows] == [row[:3] for row in want_rows]
    assert [squeeze(row[3]) for row in rows] == [squeeze(row[3]) for row in want_rows]
    assert err.count("InvalidMinRuntime") == len(want_rows)
    _, out, _ = simulate(capsys, path, "json")
    report = json.loads(out)
    assert set(report) == {"bindings", "preemptions", "pending", "nodes", "decisions"}
    assert {p["victim"]: p["time"] for p in report["preemptions"]} == {"physics/sim": want_preempted_at}


def warning_events(cluster: MemoryCluster) -> list[tuple[str, str, str]]:
    return [(e.regarding_kind, e.regarding, e.reason) for e in cluster.events if e.event_type == "Warning"]


def test_runner_records_each_finding_once_and_again_when_it_changes() -> None:
    """Events on the memory cluster across passes: a finding is new when it appears, when the object holding
    the bad value changes and is still wrong, or when it comes back after being fixed."""
    bad = make_priority_class("low", 100).annotate(XK8S + "toleration-seconds", "soon").stored("10")
    objects = cluster_of(
        [
            bad.obj(),
            make_priority_class("team", 100).obj(),
            make_node("n1").cap(cpu="4").obj(),
            make_podgroup("train").ns("ml").priority_class("team").priority(100).obj(),
            make_pod("t0").ns("ml").req(cpu="1").group("train").priority_class("team").on("n1").obj(),
            make_pod("t1").ns("ml").req(cpu="1").group("train").priority_class("team").on("n1").obj(),
        ]
    )
    cluster = MemoryCluster(objects, NOW_DT)
    scheduler = Scheduler(cluster, SchedulerConfiguration(), default_profile(SchedulerConfiguration()))
    first = scheduler.schedule_pending()
    assert [w.reason for w in first.warnings] == ["InvalidPreemptionToleration"]
    for _ in range(3):
        assert scheduler.schedule_pending().warnings == []
    assert warning_events(cluster) == [("PriorityClass", "low", "InvalidPreemptionToleration")]

    objects.priority_classes["low"] = bad.stored("11").obj()  # edited, still wrong
    del objects.priority_classes["team"]  # the group's class is deleted under it
    scheduler.schedule_pending()
    scheduler.schedule_pending()
    assert warning_events(cluster)[1:] == [
        ("PriorityClass", "low", "InvalidPreemptionToleration"),
        ("PodGroup", "ml/train", "PriorityClassNotFound"),
    ]
    event = cluster.events[-1]
    assert event.note == (
        "spec.priorityClassName: Not found: 'team': no PriorityClass with name team was found; "
        "ml/train is treated as having no preemption toleration"
    )

    objects.priority_classes["low"] = make_priority_class("low", 100).stored("12").obj()  # fixed
    objects.priority_classes["team"] = make_priority_class("team", 100).obj()  # restored
    assert scheduler.schedule_pending().warnings == []
    del objects.priority_classes["team"]  # gone again: users hear about it again
    assert [w.reason for w in scheduler.schedule_pending().warnings] == ["PriorityClassNotFound"]
    assert len(warning_events(cluster)) == 4
