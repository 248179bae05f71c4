"""What `phalanx simulate` says a bound pod's ResourceClaims were given (issue 39): each binding names the devices
its claims hold at the end of the run, in the JSON and in the text, so a what-if answers "which GPUs" without
reading the claims back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from phalanx.cli import main
from tests.builders import make_node, make_pod, make_podgroup, yaml_documents

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "devices.yaml"
NOW = "2026-03-01T09:00:00Z"
DRIVER = "gpu.example.com"


def simulate(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    code = main(["simulate", "--now", NOW, *args])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def devices_by_pod(report: dict[str, Any]) -> dict[str, list[tuple[str, str, str, str, str]]]:
    return {
        b["pod"]: [(d["claim"], d["request"], d["driver"], d["pool"], d["device"]) for d in b.get("devices", [])]
        for b in report["bindings"]
    }


def rows(text: str, edge: str = "│") -> list[list[str]]:
    """The text's table rows as lists of cells (`edge="┃"`: the header rows)."""
    return [[c.strip() for c in line.strip(edge).split(edge)] for line in text.splitlines() if line.startswith(edge)]


def test_the_example_names_the_device_each_pod_got(capsys: pytest.CaptureFixture[str]) -> None:
    report = json.loads(simulate(capsys, str(EXAMPLE), "-o", "json"))
    got = devices_by_pod(report)
    assert got["ml/train-a100"] == [("ml/a100", "gpu", DRIVER, "dn2", "gpu-0")], "the only a100"
    assert got["ml/render-0"] == got["ml/render-1"] == [("ml/shared-l4", "gpu", DRIVER, "dn3", "gpu-0")], (
        "a shared claim names its device for each pod that uses it"
    )
    (made,) = {c for c, *_ in got["ml/wants-h100-else-l4"]}
    assert made.startswith("ml/wants-h100-else-l4-gpu-"), "the claim the controller made from the template"
    assert [(r, p, d) for _, r, _, p, d in got["ml/wants-h100-else-l4"]] == [
        ("gpu/l4", "dn3", "gpu-1"),
        ("gpu/l4", "dn3", "gpu-2"),
    ], "the subrequest and the two l4 of NUMA node 1"
    h100 = sorted((p, d) for pod in ("ml/h100-a", "ml/h100-b") for *_, p, d in got[pod])
    assert h100 == [("dn1", "gpu-0"), ("dn1", "gpu-1")], "one h100 each: dn1's two"
    assert {b["pod"] for b in report["bindings"]}.isdisjoint({"ml/pair-of-h100", "ml/no-template"})

    verbose_text = simulate(capsys, str(EXAMPLE), "-v")
    assert ["pod", "node", "time", "devices"] in rows(verbose_text, "┃")
    verbose = rows(verbose_text)
    assert ["ml/train-a100", "dn2", NOW, "dn2/gpu-0"] in verbose
    assert ["ml/wants-h100-else-l4", "dn3", NOW, "dn3/gpu-1, dn3/gpu-2"] in verbose

    short = " ".join(simulate(capsys, str(EXAMPLE)).replace("│", " ").split())
    h100_a = ", ".join(f"{p}/{d}" for *_, p, d in got["ml/h100-a"])
    assert f"ml/h100-a ({h100_a})" in short, "the default text names the devices of the pods it names"


def test_a_pod_group_claim_is_named_for_each_member(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fabric = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": "fabric"},
        "spec": {
            "driver": DRIVER,
            "allNodes": True,
            "pool": {"name": "fabric", "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "channel-0"}],
        },
    }
    device_class = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "fabric"},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
    }
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "channel", "namespace": "default"},
        "spec": {"spec": {"devices": {"requests": [{"name": "link", "exactly": {"deviceClassName": "fabric"}}]}}},
    }
    shared = [{"name": "net", "resourceClaimTemplateName": "channel"}]
    group = make_podgroup("g").native().gang(2).spec_field("resourceClaims", shared).obj()
    members = [
        make_pod(f"m{i}").req(cpu="6").scheduling_group("g").resource_claim("net", "channel").obj() for i in (0, 1)
    ]
    plain = make_pod("plain").req(cpu="1").obj()
    nodes = [make_node(n).cap(cpu="8").obj() for n in ("n1", "n2")]
    scenario = tmp_path / "group.yaml"
    scenario.write_text(yaml_documents([*nodes, device_class, fabric, template, group, *members, plain]))

    report = json.loads(simulate(capsys, str(scenario), "-o", "json"))
    got = devices_by_pod(report)
    assert set(got) == {"default/m0", "default/m1", "default/plain"}
    (claim, request, driver, pool, device), *more = got["default/m0"]
    assert claim.startswith("default/g-net-"), "the group's claim, named in the PodGroup's status"
    assert (request, driver, pool, device, more) == ("link", DRIVER, "fabric", "channel-0", [])
    assert got["default/m1"] == got["default/m0"]
    assert "devices" not in next(b for b in report["bindings"] if b["pod"] == "default/plain"), (
        "a pod without claims keeps the binding's shape"
    )


def test_text_without_devices_has_no_devices_column(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    scenario = tmp_path / "plain.yaml"
    scenario.write_text(yaml_documents([make_node("n1").cap(cpu="4").obj(), make_pod("a").req(cpu="1").obj()]))
    verbose = simulate(capsys, str(scenario), "-v")
    assert ["pod", "node", "time"] in rows(verbose, "┃")
    assert "devices" not in verbose
    assert "(" not in " ".join(r[-1] for r in rows(simulate(capsys, str(scenario))) if "default/a" in r[-1])
