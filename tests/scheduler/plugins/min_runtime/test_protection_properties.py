"""Invariant 5 on random clusters, through `phalanx simulate`: nothing is preempted while protected.

The oracle restates the rules for a flat queue layout (queues `a` and `b` under no parent), where
the LCA step lands on the victim's own queue, so it stays independent of the resolver's tree walk.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from phalanx.cli import main
from scheduler.api.meta import ApiModel
from tests.builders import (
    make_config,
    make_node,
    make_pod,
    make_podgroup,
    make_priority_class,
    make_queue,
    yaml_documents,
)
from tests.scheduler.plugins.min_runtime.units import last_start, scheduled

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
TOLERATION = "preemption-toleration.scheduling.sigs.k8s.io/"
PRIORITY = {"low": 100, "tolerant": 100, "mid": 1000, "high": 6000}
TOLERATES_BELOW = 5000
PREEMPT = {"a": timedelta(minutes=5)}
RECLAIM = {"a": timedelta(minutes=10)}
DEFAULT_PREEMPT = timedelta(minutes=2)


@dataclass(frozen=True)
class Running:
    name: str
    cpu: int
    node: int
    klass: str
    queue: str | None
    age: timedelta
    grouped: bool = False
    """Run as the only member of a `PodGroup`-mode gang: class, queue and start come from the group."""


@dataclass(frozen=True)
class Incoming:
    name: str
    cpu: int
    klass: str
    queue: str | None


queues = st.sampled_from(["a", "b", None])
running = st.builds(
    Running,
    name=st.just(""),
    cpu=st.integers(1, 2),
    node=st.integers(0, 1),
    klass=st.sampled_from(["low", "tolerant"]),
    queue=queues,
    age=st.integers(0, 20 * 60).map(lambda s: timedelta(seconds=s)),
    grouped=st.booleans(),
)
incoming = st.builds(
    Incoming, name=st.just(""), cpu=st.integers(1, 4), klass=st.sampled_from(["mid", "high"]), queue=queues
)


def manifests(victims: list[Running], preemptors: list[Incoming], seconds: int) -> list[ApiModel]:
    objects: list[ApiModel] = [
        make_config(minRuntime={"preempt": "2m", "reclaim": "0s"}),
        make_priority_class("low", 100).obj(),
        make_priority_class("tolerant", 100)
        .annotate(TOLERATION + "minimum-preemptable-priority", str(TOLERATES_BELOW))
        .annotate(TOLERATION + "toleration-seconds", str(seconds))
        .obj(),
        make_priority_class("mid", 1000).obj(),
        make_priority_class("high", 6000).obj(),
        make_queue("a").preempt_min_runtime("5m").reclaim_min_runtime("10m").obj(),
        make_queue("b").obj(),
        make_node("n0").cap(cpu="4").obj(),
        make_node("n1").cap(cpu="4").obj(),
    ]
    for v in victims:
        pod = make_pod(v.name).req(cpu=str(v.cpu)).priority_class(v.klass).grace(0)
        if v.grouped:
            group = make_podgroup(v.name).gang(1).disruption_mode("PodGroup").priority_class(v.klass)
            objects.append(last_start(group.queue(v.queue) if v.queue else group, NOW - v.age).obj())
            pod.group(v.name)
        elif v.queue:
            pod.queue(v.queue)
        objects.append(scheduled(pod, NOW - v.age, node=f"n{v.node}").obj())
    for p in preemptors:
        pod = make_pod(p.name).req(cpu=str(p.cpu)).priority_class(p.klass)
        objects.append((pod.queue(p.queue) if p.queue else pod).obj())
    return objects


def earliest_preemption(victim: Running, preemptor: Incoming, seconds: int) -> datetime | None:
    """When `preemptor` may first preempt `victim` under both protections; None = never."""
    started = NOW - victim.age
    if preemptor.queue == victim.queue:
        runtime = PREEMPT.get(victim.queue or "", DEFAULT_PREEMPT)
    else:
        runtime = RECLAIM.get(victim.queue or "", timedelta(0))
    earliest = started + runtime
    if victim.klass == "tolerant" and PRIORITY[preemptor.klass] < TOLERATES_BELOW:
        if seconds < 0:
            return None
        earliest = max(earliest, started + timedelta(seconds=seconds + 1))
    return earliest


def fits(victims: list[Running]) -> bool:
    return all(sum(v.cpu for v in victims if v.node == n) <= 4 for n in (0, 1))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    victims=st.lists(running, min_size=1, max_size=6).filter(fits),
    preemptors=st.lists(incoming, min_size=1, max_size=3),
    seconds=st.sampled_from([-1, 0, 60, 600]),
)
@example(  # a preemptor bound during the run is preempted in turn by a later, higher one
    victims=[Running("", 1, 0, "low", "a", timedelta(0))],
    preemptors=[Incoming("", 1, "mid", "a"), Incoming("", 1, "high", "a"), Incoming("", 4, "high", "a")],
    seconds=-1,
)
def test_nothing_is_preempted_while_protected(
    tmp_path_factory: pytest.TempPathFactory,
    capsys: pytest.CaptureFixture[str],
    victims: list[Running],
    preemptors: list[Incoming],
    seconds: int,
) -> None:
    victims = [Running(f"v{i}", v.cpu, v.node, v.klass, v.queue, v.age, v.grouped) for i, v in enumerate(victims)]
    preemptors = [Incoming(f"p{i}", p.cpu, p.klass, p.queue) for i, p in enumerate(preemptors)]
    scenario: Path = tmp_path_factory.mktemp("protection") / "cluster.yaml"
    scenario.write_text(yaml_documents(manifests(victims, preemptors, seconds)))
    assert main(["simulate", str(scenario), "--now", NOW.isoformat(), "--until", "30m", "-o", "json"]) == 0
    report: dict[str, Any] = json.loads(capsys.readouterr().out)
    by_victim = {f"default/{v.name}": v for v in victims}
    by_preemptor = {f"default/{p.name}": p for p in preemptors}
    for binding in report["bindings"]:
        # A preemptor bound during the run may itself be preempted later, protected from its binding on.
        bound = by_preemptor[binding["pod"]]
        age = NOW - datetime.fromisoformat(binding["time"])
        by_victim[binding["pod"]] = Running(bound.name, bound.cpu, 0, bound.klass, bound.queue, age)
    for entry in report["preemptions"]:
        victim = by_victim[entry["victim"]]
        allowed = earliest_preemption(victim, by_preemptor[entry["preemptor"]], seconds)
        when = datetime.fromisoformat(entry["time"])
        assert allowed is not None and when >= allowed, (entry, victim, allowed)
