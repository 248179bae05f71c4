"""docs/DESIGN.md invariants 1, 3 and 4 end to end: random clusters run through `phalanx simulate -o json`."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from phalanx.cli import main
from tests.builders import make_node, make_pod, make_podgroup, make_priority_class, yaml_documents

CLASSES = {"low": 10, "mid": 100, "high": 1000}


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[dict[str, Any]], dict[str, int], dict[str, str]]:
    """Objects, each pod's effective priority, and each PodGroup-mode member's group."""
    objects: list[dict[str, Any]] = [make_priority_class(k, v).json() for k, v in CLASSES.items()]
    nodes = draw(st.integers(1, 3))
    objects += [make_node(f"n{i}").cap(cpu="4").json() for i in range(nodes)]
    room = [4] * nodes
    priority: dict[str, int] = {}
    whole: dict[str, str] = {}
    for g in range(draw(st.integers(0, 4))):
        klass = draw(st.sampled_from(list(CLASSES)))
        size = draw(st.integers(1, 3))
        running = draw(st.booleans())
        mode = draw(st.sampled_from(["Pod", "PodGroup"]))
        objects.append(make_podgroup(f"g{g}").gang(size).priority_class(klass).disruption_mode(mode).json())
        for m in range(size):
            cpu = draw(st.integers(1, 2))
            pod = make_pod(f"g{g}-{m}").req(cpu=str(cpu)).group(f"g{g}")
            free = [i for i in range(nodes) if room[i] >= cpu]
            if running and free:
                node = draw(st.sampled_from(free))
                room[node] -= cpu
                pod.on(f"n{node}")
            objects.append(pod.json())
            priority[f"default/g{g}-{m}"] = CLASSES[klass]
            if mode == "PodGroup":
                whole[f"default/g{g}-{m}"] = f"g{g}"
    for p in range(draw(st.integers(0, 4))):
        klass = draw(st.sampled_from(list(CLASSES)))
        cpu = draw(st.integers(1, 4))
        pod = make_pod(f"p{p}").req(cpu=str(cpu)).priority_class(klass)
        free = [i for i in range(nodes) if room[i] >= cpu]
        if draw(st.booleans()) and free:
            node = draw(st.sampled_from(free))
            room[node] -= cpu
            pod.on(f"n{node}")
        objects.append(pod.json())
        priority[f"default/p{p}"] = CLASSES[klass]
    return objects, priority, whole


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(clusters())
def test_invariants_hold_on_random_clusters(
    capsys: pytest.CaptureFixture[str], cluster: tuple[list[dict[str, Any]], dict[str, int], dict[str, str]]
) -> None:
    objects, priority, whole = cluster
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "scenario.yaml"
        path.write_text(yaml_documents(objects))
        assert main(["simulate", str(path), "--now", "2026-01-01T01:00:00Z", "--until", "30m", "-o", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    preempted = {p["victim"] for p in report["preemptions"]}
    for entry in report["preemptions"]:
        preemptor = entry["preemptor"]
        group_member = next((k for k in priority if k.startswith(f"{preemptor}-")), None)
        preemptor_priority = priority.get(preemptor, priority.get(group_member or "", 0))
        assert priority[entry["victim"]] < preemptor_priority
    running = {f"default/{o['metadata']['name']}" for o in objects if o.get("spec", {}).get("nodeName")}
    for group in set(whole.values()):
        members = {k for k, g in whole.items() if g == group} & running
        assert not members & preempted or members <= preempted, "a PodGroup-mode group was split"
    for node in report["nodes"].values():
        cpu = node["allocated"].get("cpu", "0")
        assert float(cpu.rstrip("m")) / (1000 if cpu.endswith("m") else 1) <= 4
