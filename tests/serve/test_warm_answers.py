"""The explain API keeps what its answers derive from the cluster (`scheduler/explain/warm.py`) from one request to
the next: after any change to the cluster, the next answer is the one computed from nothing.

A small cluster is changed at random, as a cluster changes (every change replaces objects, never alters one: the
informers the scheduler answers from do the same), and after each change the served API is asked over HTTPS for
the pending work and for explanations; each answer must be, code and body, what a new `Answers` (nothing kept)
computes from the same objects at the same moment.
"""

from __future__ import annotations

import gc
import random
import weakref
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from itertools import count
from pathlib import Path
from typing import Any

import pytest
import structlog

from scheduler.api.config import SchedulerConfiguration
from scheduler.api.namespace import Namespace
from scheduler.api.pod import Pod
from scheduler.framework.cluster import ClusterObjects
from scheduler.serve.answers import REFRESH_SECONDS, Answer, Answers, Replica, Seen
from scheduler.serve.routes import Explain, Pending
from tests.apiserver.server import ApiServer
from tests.builders import PodWrapper, make_node, make_pod, make_podgroup, make_priority_class
from tests.polling import wait_for
from tests.serve.served import GROUP, PREFIX, served_answers

NOW = datetime(2026, 1, 1, 12, tzinfo=UTC)
NS = "ml"
CLASSES = {"low": 10, "mid": 50, "high": 100, "top": 1000}
GANGS = {"train": (3, "2", "high"), "big": (2, "4", "top")}
"""PodGroup -> its minCount, each member's CPU, its PriorityClass."""
STEPS = 30
MARK = "phalanx-scheduler: preempting to accommodate a higher priority"


class Cluster:
    """A few full nodes with running pods of every class, two gangs and some lone pods pending, changed at random
    (`change`) the way a cluster changes."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.serial = count()
        self.objects = ClusterObjects()
        self.objects.namespaces[NS] = Namespace.model_validate({"metadata": {"name": NS}})
        for name, value in CLASSES.items():
            self.objects.priority_classes[name] = make_priority_class(name, value).obj()
        for n in range(4):
            self.objects.nodes[f"n{n}"] = make_node(f"n{n}").cap(cpu=("4", "8")[n % 2]).obj()
            for _ in range(2):
                self._put(self._running(f"n{n}"))
        for group, (min_count, cpu, priority_class) in GANGS.items():
            made = make_podgroup(group).ns(NS).gang(min_count).priority_class(priority_class)
            self.objects.pod_groups[f"{NS}/{group}"] = made.priority(CLASSES[priority_class]).obj()
            for _ in range(min_count):
                self._put(self._pod("w").req(cpu=cpu).group(group).priority_class(priority_class).obj())
        for _ in range(3):
            self._put(self._lone())

    def change(self) -> str:
        """One change at random; what it was."""
        changes: list[Callable[[], str]] = [
            self.delete_pod,
            self.add_node,
            self.remove_node,
            self.change_pod_class,
            self.change_class_value,
            self.add_pod,
            self.terminate,
            self.bind,
            self.nominate,
            self.change_gang,
            self.replace_unchanged,
        ]
        return self.rng.choice(changes)()

    def delete_pod(self) -> str:
        if len(self.objects.pods) < 4:
            return self.add_pod()
        key = self.rng.choice(sorted(self.objects.pods))
        del self.objects.pods[key]
        return f"deleted pod {key}"

    def add_node(self) -> str:
        name = f"n{next(self.serial)}"
        self.objects.nodes[name] = make_node(name).cap(cpu=self.rng.choice(["2", "4", "8"])).obj()
        return f"added node {name}"

    def remove_node(self) -> str:
        if len(self.objects.nodes) < 2:
            return self.add_node()
        name = self.rng.choice(sorted(self.objects.nodes))
        del self.objects.nodes[name]
        return f"removed node {name}"

    def change_pod_class(self) -> str:
        pod = self._any_pod()
        name = self.rng.choice(sorted(CLASSES))
        spec: dict[str, Any] = {"priorityClassName": name, "priority": CLASSES[name]}
        self._replace(pod, spec=spec)
        return f"pod {pod.key} now of class {name}"

    def change_class_value(self) -> str:
        name = self.rng.choice(sorted(CLASSES))
        value = self.rng.choice([5, 20, 60, 200, 2000])
        self.objects.priority_classes[name] = make_priority_class(name, value).obj()
        return f"class {name} now {value}"

    def add_pod(self) -> str:
        choice = self.rng.randrange(3)
        if choice == 0:
            pod = self._running(self.rng.choice(sorted(self.objects.nodes)))
        elif choice == 1:
            group = self.rng.choice(sorted(GANGS))
            _, cpu, priority_class = GANGS[group]
            pod = self._pod("w").req(cpu=cpu).group(group).priority_class(priority_class).obj()
        else:
            pod = self._lone()
        self._put(pod)
        return f"added pod {pod.key}"

    def terminate(self) -> str:
        """A running pod marked as a preemption's victim (of a pending unit, or of none known) and being deleted."""
        pod = self._any_pod(bound=True)
        preemptor = self.rng.choice([f"podgroup {NS}/train", f"podgroup {NS}/big", "pod ml/solo-0", "nobody"])
        mark = {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}
        mark["message"] = f"{MARK} {preemptor}" if preemptor != "nobody" else "preempted"
        mark["lastTransitionTime"] = "2026-01-01T11:59:00Z"
        status = {"conditions": [*pod.model_dump(mode="json", by_alias=True)["status"].get("conditions", []), mark]}
        meta = {"deletionTimestamp": "2026-01-01T11:59:00Z", "deletionGracePeriodSeconds": 30}
        self._replace(pod, metadata=meta, status=status)
        return f"pod {pod.key} terminating for {preemptor}"

    def bind(self) -> str:
        pod = self._any_pod(bound=False)
        node = self.rng.choice(sorted(self.objects.nodes))
        self._replace(pod, spec={"nodeName": node}, status={"phase": "Running"})
        return f"bound {pod.key} to {node}"

    def nominate(self) -> str:
        pod = self._any_pod(bound=False)
        node = self.rng.choice(sorted(self.objects.nodes))
        self._replace(pod, status={"nominatedNodeName": node})
        return f"nominated {pod.key} to {node}"

    def change_gang(self) -> str:
        key = self.rng.choice(sorted(self.objects.pod_groups))
        group = self.objects.pod_groups[key]
        min_count, priority = self.rng.randint(1, 4), self.rng.choice([50, 100, 1000])
        made = make_podgroup(group.metadata.name).ns(NS).gang(min_count).priority(priority)
        self.objects.pod_groups[key] = made.priority_class(group.spec.priority_class_name or "high").obj()
        return f"PodGroup {key} now of {min_count} at {priority}"

    def replace_unchanged(self) -> str:
        """The same pod, another object (a resync, a status write that changed nothing we read)."""
        pod = self._any_pod()
        self.objects.pods[pod.key] = pod.model_copy(deep=True)
        return f"pod {pod.key} replaced unchanged"

    def _pod(self, prefix: str) -> PodWrapper:
        return make_pod(f"{prefix}-{next(self.serial)}").ns(NS).created(NOW - timedelta(minutes=self.rng.randint(1, 9)))

    def _running(self, node: str) -> Pod:
        name = self.rng.choice(sorted(CLASSES))
        made = self._pod("r").req(cpu=self.rng.choice(["1", "2"])).priority_class(name)
        if self.rng.random() < 0.5:
            made = made.priority(CLASSES[name])  # stored, as admission resolves it; else resolved from the class
        return made.scheduler(self.rng.choice(["default-scheduler", "phalanx-scheduler"])).on(node, NOW).obj()

    def _lone(self) -> Pod:
        made = self._pod("solo").req(cpu=self.rng.choice(["1", "3"])).priority_class("mid")
        return made.scheduler(self.rng.choice(["phalanx-scheduler", "phalanx-scheduler", "default-scheduler"])).obj()

    def _put(self, pod: Pod) -> None:
        self.objects.pods[pod.key] = pod

    def _any_pod(self, bound: bool | None = None) -> Pod:
        pods = [p for _, p in sorted(self.objects.pods.items()) if bound is None or bool(p.spec.node_name) == bound]
        return self.rng.choice(pods or sorted(self.objects.pods.values(), key=lambda p: p.key))

    def _replace(self, pod: Pod, **fields: dict[str, Any]) -> None:
        raw = pod.model_dump(mode="json", by_alias=True, exclude_none=True)
        for part, changes in fields.items():
            raw.setdefault(part, {}).update(changes)
        self._put(Pod.model_validate(raw))


def asked(cluster: Cluster) -> list[Explain | Pending]:
    """The pending work, each gang's explanation and one pod's, chosen at random, then the first gang's again (its
    dry run after another's, and after its own)."""
    pod = cluster.rng.choice(sorted(cluster.objects.pods))
    gangs = [Explain("podgroups", NS, group) for group in cluster.rng.sample(sorted(GANGS), len(GANGS))]
    return [Pending(None), Pending(NS), *gangs, Explain("pods", NS, pod.partition("/")[2]), gangs[0], gangs[0]]


def path(ask: Explain | Pending) -> str:
    if isinstance(ask, Pending):
        return f"{PREFIX}/pendingwork" if ask.namespace is None else f"{PREFIX}/namespaces/{ask.namespace}/pendingwork"
    return f"{PREFIX}/namespaces/{ask.namespace}/{ask.resource}/{ask.name}/explanation"


def answers_of(cluster: Cluster, now: Callable[[], datetime] = lambda: NOW, **kwargs: Any) -> Answers:
    config = SchedulerConfiguration()
    return Answers(lambda: Seen(cluster.objects, "7"), config, lambda: Replica("r0", True), now, **kwargs)


def computed(answers: Answers, ask: Explain | Pending) -> Answer:
    return answers.explanation(ask) if isinstance(ask, Explain) else answers.pending(ask)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_after_each_change_the_served_answer_is_the_one_computed_from_nothing(
    apiserver: ApiServer, tmp_path: Path, seed: int
) -> None:
    """After some changes no answer comes for a minute, and the server's loop brings the caches up in between."""
    cluster = Cluster(seed)
    idle = random.Random(seed)
    for resource in ("pods/explanation", "podgroups/explanation"):
        apiserver.allow("alice", "get", GROUP, resource, NS)
    apiserver.allow("alice", "list", GROUP, "pendingwork")
    clock = [0.0]
    answers = answers_of(cluster, clock=lambda: clock[0])
    with served_answers(apiserver, tmp_path, answers) as served:
        changes = ["none"]
        for step in range(STEPS):
            for ask in asked(cluster):
                code, body, _ = served.get(path(ask))
                cold = computed(answers_of(cluster), ask)  # a new Answers keeps nothing
                assert (code, body) == (cold.code, cold.body), f"seed {seed}, step {step}, {ask}, after: {changes}"
            changes.append(cluster.change())
            if idle.random() < 0.5:
                clock[0] += REFRESH_SECONDS
                answers.refresh_idle()  # as the server's loop does (whichever of the two comes first)
                changes.append("an idle minute")


def served_lines(logs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [entry for entry in logs if entry["event"] == "explanation served"]


def resync(cluster: Cluster) -> list[weakref.ref[Pod]]:
    """A bound pod, a pending gang member and a pending lone pod replaced by equal objects, as the informers' resync
    replaces them; the old objects, which only what the answers keep may still hold."""
    pods = sorted(cluster.objects.pods.values(), key=lambda p: p.key)
    chosen = [
        next(p for p in pods if p.spec.node_name),
        next(p for p in pods if not p.spec.node_name and p.pod_group_name),
        next(p for p in pods if not p.spec.node_name and not p.pod_group_name),
    ]
    for pod in chosen:
        cluster.objects.pods[pod.key] = pod.model_copy(deep=True)
    return [weakref.ref(pod) for pod in chosen]


def freed(old: list[weakref.ref[Pod]]) -> bool:
    gc.collect()
    return all(ref() is None for ref in old)


def test_an_answer_after_an_idle_minute_is_computed_with_the_kept_caches(apiserver: ApiServer, tmp_path: Path) -> None:
    """A user's commands come minutes apart: what the answers keep is not dropped when idle but brought up to the
    informers' objects in the background, so the next answer is computed warm (the `explanation served` line says),
    and is the one computed from nothing."""
    cluster = Cluster(5)
    apiserver.allow("alice", "list", GROUP, "pendingwork")
    apiserver.allow("alice", "get", GROUP, "podgroups/explanation", NS)
    clock = [0.0]

    def now() -> datetime:  # the idle minute passes for the cluster too
        return NOW + timedelta(seconds=clock[0])

    with (
        structlog.testing.capture_logs() as logs,
        served_answers(apiserver, tmp_path, answers_of(cluster, now, clock=lambda: clock[0])) as served,
    ):
        assert served.get(f"{PREFIX}/pendingwork")[0] == 200
        wait_for(lambda: served_lines(logs), what="the first answer logged")
        old = resync(cluster)
        cluster.change()
        clock[0] += REFRESH_SECONDS
        wait_for(lambda: freed(old), what="the replaced pods let go of after the idle minute")
        ask = Explain("podgroups", NS, "train")
        code, body, _ = served.get(path(ask))
        lines = wait_for(lambda: served_lines(logs)[1:], what="the second answer logged")
        assert lines[0]["warm"] is True, "computed with the caches kept over the idle minute"
        cold = computed(answers_of(cluster, now), ask)
        assert (code, body) == (cold.code, cold.body)


def test_the_kept_caches_let_go_of_replaced_pods_once_brought_up_in_the_background(
    apiserver: ApiServer, tmp_path: Path
) -> None:
    """Kept for good, they would hold every pod the informers replaced since the last answer; brought up to the
    informers' objects once no answer came for `REFRESH_SECONDS`, and again every `REFRESH_SECONDS` while none
    comes, they hold none of those after."""
    cluster = Cluster(4)
    apiserver.allow("alice", "list", GROUP, "pendingwork")
    apiserver.allow("alice", "get", GROUP, "podgroups/explanation", NS)
    clock = [0.0]
    with served_answers(apiserver, tmp_path, answers_of(cluster, clock=lambda: clock[0])) as served:
        assert served.get(f"{PREFIX}/pendingwork")[0] == 200
        assert served.get(f"{PREFIX}/namespaces/{NS}/podgroups/train/explanation")[0] == 200
        for minute in (1, 2):
            old = resync(cluster)
            gc.collect()
            assert all(ref() is not None for ref in old), "the old objects are the kept caches' alone..."
            clock[0] += REFRESH_SECONDS
            wait_for(lambda old=old: freed(old), what=f"the pods replaced before idle minute {minute} let go of")


def test_the_caches_are_made_before_the_first_answer(apiserver: ApiServer, tmp_path: Path) -> None:
    """Once the informers are synced the server's loop makes the caches, so the first answer is warm too."""
    cluster = Cluster(6)
    apiserver.allow("alice", "list", GROUP, "pendingwork")
    with (
        structlog.testing.capture_logs() as logs,
        served_answers(apiserver, tmp_path, answers_of(cluster)) as served,
    ):
        wait_for(lambda: [e for e in logs if e["event"] == "explain caches made"], what="the caches made")
        assert served.get(f"{PREFIX}/pendingwork")[0] == 200
        lines = wait_for(lambda: served_lines(logs), what="the answer logged")
        assert lines[0]["warm"] is True


def test_a_failed_refresh_drops_the_caches_and_the_server_answers_on(apiserver: ApiServer, tmp_path: Path) -> None:
    """A refresh that fails is logged and leaves nothing kept: the next answer starts from nothing, the one after is
    warm again."""
    cluster = Cluster(7)
    apiserver.allow("alice", "list", GROUP, "pendingwork")
    clock = [0.0]
    failing = [False]

    def seen() -> Seen:
        if failing[0]:
            raise RuntimeError("informers gone")
        return Seen(cluster.objects, "7")

    answers = Answers(seen, SchedulerConfiguration(), lambda: Replica("r0", True), lambda: NOW, clock=lambda: clock[0])
    with structlog.testing.capture_logs() as logs, served_answers(apiserver, tmp_path, answers) as served:
        assert served.get(f"{PREFIX}/pendingwork")[0] == 200
        failing[0] = True
        clock[0] += REFRESH_SECONDS
        dropped = wait_for(
            lambda: [e for e in logs if e["event"] == "explain caches dropped"], what="the refresh failed"
        )
        assert dropped[0]["log_level"] == "warning"
        assert "informers gone" in dropped[0]["error"]
        failing[0] = False
        for _ in range(2):
            assert served.get(f"{PREFIX}/pendingwork")[0] == 200
        wait_for(lambda: served_lines(logs)[2:], what="the answers logged")
        assert [line["warm"] for line in served_lines(logs)[1:]] == [False, True], "made again, then kept"
