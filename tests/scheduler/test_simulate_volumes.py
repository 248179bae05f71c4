"""`phalanx simulate` and `explain -f` on storage: a real cluster's dump of claims, volumes, classes and CSI objects,
and hand-written claims admitted as a create would admit them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from phalanx.cli import main
from tests.builders import make_claim, make_node, make_pod, make_storage_class, make_volume, yaml_documents
from tests.recorded import RECORDED

NOW = "2026-12-01T00:00:00Z"
DUMP = RECORDED / "objects" / "storage-list-kubectl.json"
"""kube-apiserver 1.36.2 with the PV controller: claim `data` bound to local-1 (on node-1), `far` bound to a
volume no node matches, `lazy` and `eph-scratch` unbound WaitForFirstConsumer claims, `once` a ReadWriteOncePod
claim, `imm` an Immediate claim no volume fits (see tests/fixtures/recorded/README.md)."""


def simulate(capsys: pytest.CaptureFixture[str], *paths: str) -> dict[str, Any]:
    code = main(["simulate", "--now", NOW, "-o", "json", *paths])
    out, err = capsys.readouterr()
    assert code == 0, err
    report: dict[str, Any] = json.loads(out)
    return report


def test_a_dump_of_storage_places_pods_as_its_volumes_allow(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nodes = [make_node(n).cap(cpu="4").obj() for n in ("node-0", "node-1")]
    pods = [
        make_pod("db").req(cpu="1").claim("data").obj(),
        make_pod("far").req(cpu="1").claim("far").obj(),
        make_pod("lazy").req(cpu="1").claim("lazy").obj(),
        make_pod("imm").req(cpu="1").claim("imm").obj(),
        make_pod("orphan").req(cpu="1").claim("nope").obj(),
    ]
    scenario = tmp_path / "pods.yaml"
    scenario.write_text(yaml_documents([*nodes, *pods]))
    report = simulate(capsys, str(DUMP), str(scenario))
    # `lazy`'s class has a provisioner: the claim is provisioned where its pod goes (the emptier node)
    assert report["bindings"] == [
        {"pod": "default/db", "node": "node-1", "time": NOW},
        {"pod": "default/lazy", "node": "node-0", "time": NOW},
    ]
    pending = {p["pod"]: p["message"] for p in report["pending"]}
    assert pending["default/far"].startswith(
        "0/2 nodes are available: 2 node(s) didn't match PersistentVolume's node affinity."
    )
    assert pending["default/imm"].startswith(
        "0/2 nodes are available: pod has unbound immediate PersistentVolumeClaims."
    )
    assert pending["default/orphan"].startswith('0/2 nodes are available: persistentvolumeclaim "nope" not found.')


def test_a_new_claim_naming_no_class_gets_the_default_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """As the DefaultStorageClass admission plugin on a create: here the default class waits for its first consumer,
    so the scheduler binds the claim, not the PV controller; with no volume and no provisioner, the pod waits for a
    volume."""
    objects = [
        make_node("n1").obj(),
        make_storage_class("standard").wait_for_first_consumer().default().obj(),
        make_claim("data").obj(),
        make_pod("p").req(cpu="1").claim("data").obj(),
    ]
    scenario = tmp_path / "s.yaml"
    scenario.write_text(yaml_documents(objects))
    report = simulate(capsys, str(scenario))
    (pending,) = report["pending"]
    assert pending["message"].startswith(
        "0/1 nodes are available: 1 node(s) didn't find available persistent volumes to bind."
    )


def test_a_stored_claim_keeps_the_class_it_has(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A claim read from a cluster (it has a resourceVersion) is not admitted again: it names no class, so it
    binds immediately, and waits for the PV controller."""
    objects = [
        make_node("n1").obj(),
        make_storage_class("standard").wait_for_first_consumer().default().obj(),
        make_volume("pv").obj(),
        make_claim("data").stored().obj(),
        make_pod("p").req(cpu="1").claim("data").obj(),
    ]
    scenario = tmp_path / "s.yaml"
    scenario.write_text(yaml_documents(objects))
    report = simulate(capsys, str(scenario))
    (pending,) = report["pending"]
    assert pending["message"].startswith("0/1 nodes are available: pod has unbound immediate PersistentVolumeClaims.")


def test_explain_names_the_missing_claim_not_nodes_to_add(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scenario = tmp_path / "s.yaml"
    scenario.write_text(yaml_documents([make_node("n1").obj(), make_pod("p").req(cpu="1").claim("nope").obj()]))
    code = main(["explain", "-f", str(scenario), "--now", NOW, "pod", "p"])
    out = capsys.readouterr().out
    assert code == 0
    assert (
        'Placement now: 0 of 1 member(s) fit. 0/1 nodes are available: persistentvolumeclaim "nope" not found.' in out
    )
    assert 'no node can take it until the pod or the objects it names change: persistentvolumeclaim "nope"' in out
    assert "add 1 node" not in out


def test_the_volumes_example(capsys: pytest.CaptureFixture[str]) -> None:
    example = Path(__file__).resolve().parents[2] / "examples" / "volumes.yaml"
    report = simulate(capsys, str(example))
    assert {b["pod"]: b["node"] for b in report["bindings"]} == {
        "default/analytics": "node-2",
        "default/postgres-0": "node-2",
        "default/scratch": "node-1",
        "default/logs": "node-1",
    }
    pending = {p["pod"]: p["message"] for p in report["pending"]}
    assert sorted(pending) == ["default/cache", "default/postgres-1", "default/reports"]
    assert "2 node(s) didn't match PersistentVolume's node affinity" in pending["default/postgres-1"]
    assert "ReadWriteOncePod access mode already in-use by another pod" in pending["default/reports"]
