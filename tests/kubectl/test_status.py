"""`kubectl phalanx status` on a dump (`-f`), through the CLI: the table, totals, preemptions in flight, filters."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from phalanx.kubectl.cli import main
from tests.builders import make_node, make_pod, make_podgroup, yaml_documents

NOW = "2026-01-01T12:00:00Z"
MARK = {
    "type": "DisruptionTarget",
    "status": "True",
    "reason": "PreemptionByScheduler",
    "message": "phalanx-scheduler: preempting to accommodate a higher priority podgroup ml/train",
    "lastTransitionTime": "2026-01-01T11:58:30Z",
}


def status(capsys: pytest.CaptureFixture[str], tmp_path: Path, *args: str) -> tuple[int, str, str]:
    code = main(["status", "-f", cluster(tmp_path), "--now", NOW, *args])
    out, err = capsys.readouterr()
    return code, out, err


def cluster(tmp_path: Path) -> str:
    """ml/train preempting (nominated, a victim terminating), a gang waiting for members, a gated pod, a pod
    that fits nowhere with a reason the scheduler wrote, and bound pods that are not pending."""
    victim = make_pod("low").ns("batch").req(cpu="4").priority(10).on("n1").terminating().stored().json()
    victim["status"]["conditions"] = [MARK]
    unschedulable = make_pod("huge").ns("ml").req(cpu="64").priority(5).queue("research").stored().json()
    unschedulable["status"]["conditions"] = [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/2 nodes are available."}
    ]
    objects: list[Any] = [
        make_node("n1").cap(cpu="4").obj(),
        make_node("n2").cap(cpu="4").obj(),
        victim,
        make_pod("web").ns("batch").req(cpu="4").priority(10).on("n2").stored().obj(),
        make_podgroup("train").ns("ml").gang(1).priority(100).queue("research").stored().obj(),
        make_pod("w0").ns("ml").req(cpu="4").group("train").priority(100).nominated("n1").stored().obj(),
        make_podgroup("eval").ns("ml").gang(4).stored().obj(),
        *(make_pod(f"e{i}").ns("ml").req(cpu="1").group("eval").stored().obj() for i in range(2)),
        make_pod("held").ns("batch").req(cpu="1").gate("example.com/quota").stored().obj(),
        unschedulable,
    ]
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml_documents(objects))
    return str(path)


def test_every_pending_unit_in_one_table_with_totals_and_preemptions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = status(capsys, tmp_path, "-A")
    assert (code, err) == (0, "")
    table, queues, states, flights = out.split("\n\n")
    lines = table.splitlines()
    assert lines[0] == "NAMESPACE   NAME    KIND       PRIORITY   QUEUE      STATE             MEMBERS   AGE   REASON"
    assert [cells(line) for line in lines[1:]] == [
        ["batch", "held", "Pod", "0", "<none>", "SchedulingGated", "1/0/1", "12h", "waiting for scheduling gates: "
         "example.com/quota"],
        ["ml", "eval", "PodGroup", "0", "<none>", "WaitingForGang", "2/0/4", "12h", "2/4 members exist, gang needs 4"],
        ["ml", "huge", "Pod", "5", "research", "Unschedulable", "1/0/1", "12h", "0/2 nodes are available."],
        ["ml", "train", "PodGroup", "100", "research", "Preempting", "1/0/1", "12h", "1 member(s) nominated to n1"],
    ]  # fmt: skip
    assert all(line.index(" 12h ") == lines[0].index(" AGE ") for line in lines[1:]), "columns are aligned"
    assert [cells(line) for line in queues.splitlines()] == [
        ["QUEUE", "UNITS", "PODS"],
        ["<none>", "2", "3"],
        ["research", "2", "2"],
    ]
    assert [cells(line) for line in states.splitlines()] == [
        ["STATE", "UNITS", "PODS"],
        ["Preempting", "1", "1"],
        ["SchedulingGated", "1", "1"],
        ["Unschedulable", "1", "1"],
        ["WaitingForGang", "1", "2"],
    ]
    assert [cells(line) for line in flights.splitlines()] == [
        ["PREEMPTOR", "NOMINATED", "VICTIMS LEFT", "SINCE"],
        ["podgroup/ml/train", "1", "1", "90s"],
    ]


def cells(line: str) -> list[str]:
    """A `kubectl get` row's cells: columns are at least three spaces apart."""
    return re.split(r"\s{3,}", line.strip())


def test_json_has_the_same_rows_totals_and_preemptions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = status(capsys, tmp_path, "-A", "-o", "json")
    assert code == 0
    document: dict[str, Any] = json.loads(out)
    assert (document["apiVersion"], document["kind"]) == ("explain.phalanx.dev/v1alpha1", "PendingWork")
    assert [u["unit"] for u in document["units"]] == ["batch/held", "ml/eval", "ml/huge", "ml/train"]
    assert document["units"][1]["members"] == {"exist": 2, "bound": 0, "min": 4, "pending": 2}
    assert document["totals"] == {
        "units": 4,
        "pods": 5,
        "byQueue": {"": 2, "research": 2},
        "byReason": {"Preempting": 1, "SchedulingGated": 1, "Unschedulable": 1, "WaitingForGang": 1},
    }
    assert document["preemptions"] == [
        {
            "preemptor": "podgroup/ml/train",
            "nominated": 1,
            "victimsLeft": 1,
            "victims": ["batch/low"],
            "since": "2026-01-01T11:58:30Z",
        }
    ]


@pytest.mark.parametrize(
    ("args", "want_names"),
    [
        pytest.param(["-n", "ml"], ["eval", "huge", "train"], id="one namespace"),
        pytest.param(["-A", "--state", "Unschedulable", "--state", "Preempting"], ["huge", "train"], id="by state"),
        pytest.param(["-n", "ml", "--queue", "research"], ["huge", "train"], id="by queue"),
        pytest.param(
            ["-n", "ml", "-l", f"{'scheduling.phalanx.dev/queue'}=research"], ["huge"], id="label selector on members"
        ),
        pytest.param(["-n", "ml", "-l", "!scheduling.phalanx.dev/queue"], ["eval", "train"], id="selector: not set"),
    ],
)
def test_filters_and_sorting(
    args: list[str], want_names: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = status(capsys, tmp_path, *args, "--no-headers")
    assert code == 0
    names = [line.split()[1 if "-A" in args else 0] for line in out.splitlines()]
    assert names == want_names


def unordered(tmp_path: Path) -> str:
    """Three lone pods, none fits, whose priorities, ages and queues each sort them differently: sorted by one of
    those columns, the rows are neither in name order nor in reverse name order."""
    pods = [
        make_pod("a").priority(50).queue("zeta").created(datetime(2026, 1, 1, 9, tzinfo=UTC)),
        make_pod("b").priority(0).queue("alpha").created(datetime(2026, 1, 1, 11, tzinfo=UTC)),
        make_pod("c").priority(100).queue("mid").created(datetime(2026, 1, 1, 10, tzinfo=UTC)),
    ]
    objects: list[Any] = [make_node("n1").cap(cpu="1").obj()]
    objects += [pod.ns("sort").req(cpu="2").stored().obj() for pod in pods]
    path = tmp_path / "unordered.yaml"
    path.write_text(yaml_documents(objects))
    return str(path)


@pytest.mark.parametrize(
    ("sort_by", "want_names"),
    [
        pytest.param([], ["a", "b", "c"], id="by namespace then name by default"),
        pytest.param(["--sort-by", "name"], ["a", "b", "c"], id="by name"),
        pytest.param(["--sort-by", "priority"], ["b", "a", "c"], id="by priority, lowest first"),
        pytest.param(["--sort-by", "age"], ["a", "c", "b"], id="by age, oldest first"),
        pytest.param(["--sort-by", "queue"], ["b", "c", "a"], id="by queue"),
    ],
)
def test_sort_by_orders_rows_by_that_column(
    sort_by: list[str], want_names: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The data's orders differ column by column, so a flag that is ignored (name order) or reversed fails."""
    code = main(["status", "-f", unordered(tmp_path), "--now", NOW, "-n", "sort", *sort_by, "--no-headers"])
    out, err = capsys.readouterr()
    assert (code, err) == (0, "")
    names = [line.split()[0] for line in out.splitlines()]
    assert names == want_names


def test_nothing_pending_says_so_like_kubectl(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = status(capsys, tmp_path, "-n", "quiet")
    assert (code, out, err) == (0, "", "No pending units found in quiet namespace.\n")


def test_yaml_is_the_json_document(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = status(capsys, tmp_path, "-A", "-o", "yaml")
    assert code == 0
    _, again, _ = status(capsys, tmp_path, "-A", "-o", "json")
    assert yaml.safe_load(out) == json.loads(again)
