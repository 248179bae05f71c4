"""A scenario on the real API server, in its own pool, for kube-scheduler (native API) or for Phalanx (our CRDs).

The running pods are placed by the test itself, exactly where the scenario says: a lone pod is created
with `spec.nodeName`; a group member (which our webhook gates) is created pending under a scheduler
name nobody serves, ungated and bound with a Binding. Each then gets the status a kubelet would give
it (Running, Ready, `startTime` and `PodScheduled` at its start time), so PodDisruptionBudgets count
it healthy and both schedulers read the same start times. Victims have no grace period: a preempted
pod is gone at once, with no kubelet needed.

The preemptor is what differs. For kube-scheduler: a native `scheduling.k8s.io/v1alpha2` PodGroup and
pods with `spec.schedulingGroup` under its profile's scheduler name; our webhook gates native members
too (the stack renders the chart with `nativeWorkloadAPI`), so the test removes that gate, and
kube-scheduler's own gang scheduling holds a gang until `minCount` members exist. For Phalanx: our
PodGroup, created after its pods.

Either way the whole preemptor is handed over at once (`hand_over`), so the live scheduler sees every
member arrive together, as `phalanx simulate` does: a basic group binds what fits as its members
arrive, so members seen in two passes can preempt more than all of them seen at once (fuzz seed 7321
protected #18). Creating the pods before the PodGroup is not enough for Phalanx: pods and PodGroups
come on separate watches, so the PodGroup could reach the scheduler before the last members did, and
it ungated the members it knew of. So the members are created first, then a probe pod no node can
take; the scheduler watches all pods on one stream, in order, so once it has marked the probe
`Unschedulable` it knows every member, and only then are the PodGroups created: the scheduler lifts
our gate from every member in one pass and tries them together. For kube-scheduler, every member is
created gated, then the gates are removed all at once, one request per member in parallel: as close
to one arrival as the API allows from outside the scheduler.

A scenario's `constraint` (`scenario.py`) is written into the preemptor's pods and the running members
alike (`constrain`), with the label `SET_LABEL` its anti-affinity and spread constraint select; the nodes of
a spread scenario get their zone in `ZONE_LABEL`.

The nodes of a topology scenario get their rack in `RACK_LABEL`, as a value of their pool's own (`rack_value`), so
a domain never holds another run's nodes, whose allocation would move the placement scores. Both PodGroups, the
native one and ours, carry `spec.schedulingConstraints.topology` on that label. kube-scheduler 1.36.2 places such a
group in one rack but does not preempt for it, so each rack also gets a run of its own (`Run.rack`) where
kube-scheduler preempts for the same group unconstrained, its pods selecting that rack's nodes: what kube-scheduler
would have done had it preempted inside that domain, the reference Phalanx's victims are ranked against.

`settle` waits until every run has stayed unchanged for `QUIET_SECONDS` once its scheduler has either
bound all of its preemptor's pods or tried them all. Unchanged covers the victims too (marked or gone), so
a deletion sent after the last binding is counted; and the quiet period outlasts either scheduler's
longest backoff (`BACKOFF_SECONDS`: kube-scheduler is given Phalanx's), so no run is cut off mid-retry.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Protocol, TypeVar

from tests.e2e.control_plane import Api, Json, Response, collection_path
from tests.e2e.differential.ranking import Outcome
from tests.e2e.differential.scenario import MAX_SKEW, Group, Preemptor, Running, Scenario, Toleration
from tests.e2e.objects import NATIVE, PHALANX, SCHEDULER_NAME, Pool, priority_class
from tests.polling import wait_for

KUBE_SCHEDULER = "kube-scheduler"
PHALANX_SCHEDULER = "phalanx"
KUBE_SCHEDULER_NAME = "differential-kube-scheduler"
"""The profile the fuzz's kube-scheduler serves: it never takes a pod of another test."""
PLACED = "differential-placed"
"""The scheduler name of the running pods the test binds itself: no scheduler serves it."""
BUDGET_LABEL = "differential.phalanx.dev/budget"
QUEUE_LABEL = "scheduling.phalanx.dev/queue"
LAST_START = "scheduling.phalanx.dev/last-start-timestamp"
TOLERATION = "preemption-toleration.scheduling.sigs.k8s.io"
PROBE_LABEL = "differential.phalanx.dev/no-such-node"
"""A node label no node has: the probe `hand_over` creates is unschedulable wherever it goes."""
BACKOFF_SECONDS = 1.0
"""The longest pod backoff of both schedulers in the fuzz: Phalanx's `maxBackoffSeconds` in the suite's
configuration (`Stack.scheduler_config`), kube-scheduler's `podMaxBackoffSeconds` (`kube_scheduler.py`)."""
QUIET_SECONDS = 5.0
"""How long a run must stay unchanged, once its scheduler bound or tried the preemptor, to count as settled:
several of either scheduler's longest backoff, so a retry still due is seen."""
DISRUPTION_TARGET = "DisruptionTarget"
SET_LABEL = "differential.phalanx.dev/set"
"""The label of a scenario's constrained pods (the preemptor's and the running members): replicas of one set."""
HOSTNAME_LABEL = "kubernetes.io/hostname"
ZONE_LABEL = "topology.kubernetes.io/zone"
RACK_LABEL = "topology.example.com/rack"
"""The label of a topology scenario's racks, the key of its preemptor group's topology constraint."""
HOST_PORT = 8080


def constrain(doc: Json, constraint: str) -> Json:
    """A pod of the constrained set: its label, and the constraint (`scenario.CONSTRAINTS`) against that label."""
    doc["metadata"].setdefault("labels", {})[SET_LABEL] = "replicas"
    selector = {"matchLabels": {SET_LABEL: "replicas"}}
    spec = doc["spec"]
    if constraint == "anti-affinity":
        term = {"labelSelector": selector, "topologyKey": HOSTNAME_LABEL}
        spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    elif constraint == "spread":
        spec["topologySpreadConstraints"] = [
            {
                "maxSkew": MAX_SKEW,
                "topologyKey": ZONE_LABEL,
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": selector,
            }
        ]
    elif constraint == "host-port":
        spec["containers"][0]["ports"] = [{"containerPort": HOST_PORT, "hostPort": HOST_PORT, "protocol": "TCP"}]
    else:
        raise ValueError(f"unknown constraint {constraint!r}")
    return doc


def rack_value(pool: Pool, rack: str) -> str:
    """The value of `RACK_LABEL` for the scenario's `rack` in `pool`: racks of different runs are different domains."""
    return f"{pool.name}-{rack}"


_probes = itertools.count()


def rfc3339(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Classes:
    """The PriorityClasses scenarios use, one per (priority, toleration), made on first use and removed at the end."""

    def __init__(self, api: Api, probe_namespace: str) -> None:
        self.api = api
        self.probe_namespace = probe_namespace
        self.made: dict[tuple[int, Toleration | None], str] = {}

    def name(self, priority: int, toleration: Toleration | None = None) -> str:
        key = (priority, toleration)
        if key not in self.made:
            name = f"differential-p{priority}"
            annotations = None
            if toleration is not None:
                name += f"-t{toleration.minimum_priority}-{str(toleration.seconds).replace('-', 'm')}"
                annotations = {
                    f"{TOLERATION}/minimum-preemptable-priority": str(toleration.minimum_priority),
                    f"{TOLERATION}/toleration-seconds": str(toleration.seconds),
                }
            self.api.apply(priority_class(name, priority, annotations))
            self._wait_admitted(name)
            self.made[key] = name
        return self.made[key]

    def _wait_admitted(self, name: str) -> None:
        """The Priority admission plugin resolves classes from its own informer: wait until it knows this one."""
        probe = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "probe", "namespace": self.probe_namespace},
            "spec": {"priorityClassName": name, "containers": [{"name": "c", "image": "registry.example/app:1"}]},
        }
        path = f"{collection_path(probe)}?dryRun=All"
        wait_for(lambda: self.api.request("POST", path, probe).status != 403, what=f"admission to see {name}")

    def remove_all(self) -> None:
        for name in self.made.values():
            self.api.request("DELETE", f"/apis/scheduling.k8s.io/v1/priorityclasses/{name}")
        self.made.clear()


@dataclass(frozen=True, slots=True)
class Observation:
    bound: tuple[tuple[str, str], ...]
    preempted: frozenset[str]
    progress: tuple[tuple[str, str, str], ...]
    """Per preemptor pod: nominated node and PodScheduled reason, so a preemption under way counts as change."""
    tried: bool
    """Every preemptor pod is bound or was found unschedulable by its scheduler."""
    marked: frozenset[str] = frozenset()
    """Running pods marked `DisruptionTarget` and not yet deleted: victims on their way, a change too."""
    said: tuple[tuple[str, str], ...] = field(default=(), compare=False)
    """Per preemptor pod not bound: its PodScheduled message (not a change: its counts may move while it waits)."""

    def acted(self, pods: int) -> bool:
        """The scheduler bound all `pods` of the preemptor, or tried every one it did not bind."""
        return len(self.bound) == pods or self.tried


@dataclass(eq=False)
class Run:
    """One scenario in one pool for one scheduler; with `rack`, kube-scheduler confined to that rack instead of
    constrained to one (see the module's docstring)."""

    scenario: Scenario
    flavour: str
    pool: Pool
    classes: Classes
    rack: str | None = None
    started: datetime | None = None
    preemptor_docs: list[Json] = field(default_factory=list)

    @property
    def native(self) -> bool:
        return self.flavour == KUBE_SCHEDULER

    @property
    def label(self) -> str:
        return self.flavour if self.rack is None else f"{self.flavour} in rack {self.rack}"

    def queue(self, name: str) -> str:
        return f"{self.pool.name}-{name}"

    def group_class(self, group: Group) -> str:
        return self.classes.name(group.priority, group.toleration)

    def set_up(self, now: datetime) -> None:
        """Nodes, queues, groups, running pods (placed, with status) and budgets; then the budgets' status.
        The preemptor's PriorityClass is made here too, so the cluster dumped before it comes holds it."""
        scenario, pool = self.scenario, self.pool
        self.classes.name(scenario.preemptor.priority)
        for cpu in scenario.nodes:
            pool.add_nodes(1, cpu=str(cpu))
        for node, zone in zip(pool.nodes, scenario.zones, strict=False):
            self._label(node, ZONE_LABEL, zone)
        for node, rack in zip(pool.nodes, scenario.racks, strict=False):
            if rack:
                self._label(node, RACK_LABEL, rack_value(pool, rack))
        for queue in scenario.queues:
            spec = {"parentQueue": self.queue(queue.parent) if queue.parent else None}
            spec |= {"preemptMinRuntime": queue.preempt, "reclaimMinRuntime": queue.reclaim}
            made: Json = {"apiVersion": PHALANX, "kind": "Queue", "metadata": {"name": self.queue(queue.name)}}
            pool.cluster_object({**made, "spec": {k: v for k, v in spec.items() if v is not None}})
        for group in scenario.groups:
            policy: Json = {"basic": {}} if group.min_count is None else {"gang": {"minCount": group.min_count}}
            doc = pool.pod_group(
                group.name,
                policy,
                priority_class=self.group_class(group),
                disruption_mode=group.mode,
                api_version=NATIVE if self.native else PHALANX,
                queue=self.queue(group.queue) if group.queue and not self.native else None,
            )
            if not self.native:
                started = now - timedelta(minutes=group.started_minutes)
                doc["metadata"]["annotations"] = {LAST_START: rfc3339(started)}
            pool.create(doc)
        for pod in scenario.running:
            self._place(pod, now)
        for budget in scenario.budgets:
            pool.create(
                {
                    "apiVersion": "policy/v1",
                    "kind": "PodDisruptionBudget",
                    "metadata": {"name": budget.name, "namespace": pool.namespace},
                    "spec": {
                        "minAvailable": budget.min_available,
                        "selector": {"matchLabels": {BUDGET_LABEL: budget.name}},
                    },
                }
            )

    def _label(self, node: str, key: str, value: str) -> None:
        reply = self.pool.api.patch(f"/api/v1/nodes/{node}", {"metadata": {"labels": {key: value}}})
        assert reply.status == 200, reply.message

    def _place(self, pod: Running, now: datetime) -> None:
        pool = self.pool
        group = self.scenario.group(pod.group) if pod.group else None
        labels = {BUDGET_LABEL: pod.budget} if pod.budget else {}
        if pod.queue and not self.native:
            labels[QUEUE_LABEL] = self.queue(pod.queue)
        node = pool.nodes[pod.node]
        doc = pool.pod(
            pod.name,
            cpu=str(pod.cpu),
            priority_class=self.group_class(group) if group else self.classes.name(pod.priority, pod.toleration),
            group=pod.group if not self.native else None,
            native_group=pod.group if self.native else None,
            node=None if group else node,
            grace=0,
            labels=labels,
            scheduler_name=PLACED,
        )
        if pod.member:
            constrain(doc, self.scenario.constraint)
        pool.create(doc)
        path = f"/api/v1/namespaces/{pool.namespace}/pods/{pod.name}"
        if group:
            reply = pool.api.patch(
                path, [{"op": "remove", "path": "/spec/schedulingGates"}], "application/json-patch+json"
            )
            assert reply.status == 200, reply.message
            binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": pod.name}}
            pool.api.create(
                f"{path}/binding", {**binding, "target": {"apiVersion": "v1", "kind": "Node", "name": node}}
            )
        at = rfc3339(now - timedelta(minutes=pod.started_minutes))
        conditions = [{"type": kind, "status": "True", "lastTransitionTime": at} for kind in ("PodScheduled", "Ready")]
        status = {"status": {"phase": "Running", "startTime": at, "conditions": conditions}}
        reply = pool.api.patch(f"{path}/status", status, "application/strategic-merge-patch+json")
        assert reply.status == 200, reply.message

    def budgets_ready(self) -> bool:
        """The disruption controller has counted every budget's pods (both schedulers read its status)."""
        for budget in self.scenario.budgets:
            path = f"/apis/policy/v1/namespaces/{self.pool.namespace}/poddisruptionbudgets/{budget.name}"
            status = (self.pool.api.get(path) or {}).get("status", {})
            selected = sum(1 for p in self.scenario.running if p.budget == budget.name)
            if status.get("observedGeneration") != 1 or status.get("currentHealthy") != selected:
                return False
        return True

    def preemptor_manifests(self) -> list[Json]:
        """Kube-scheduler's PodGroup then its pods; (Phalanx) pods, then the PodGroup `release` creates."""
        pre, pool = self.scenario.preemptor, self.pool
        cls = self.classes.name(pre.priority)
        scheduler = KUBE_SCHEDULER_NAME if self.native else SCHEDULER_NAME
        constraint = self.scenario.constraint
        if pre.policy == "pod":
            doc = pool.pod("preemptor", cpu=str(pre.cpu), priority_class=cls, scheduler_name=scheduler)
            return [constrain(doc, constraint) if constraint else doc]
        pods = [
            pool.pod(
                name,
                cpu=str(pre.cpu),
                priority_class=cls,
                group=None if self.native else "preemptor",
                native_group="preemptor" if self.native else None,
                scheduler_name=scheduler,
            )
            for name in pre.names
        ]
        if constraint:
            pods = [constrain(doc, constraint) for doc in pods]
        group = pool.pod_group(
            "preemptor",
            _policy(pre),
            priority_class=cls,
            api_version=NATIVE if self.native else PHALANX,
            queue=self.queue(pre.queue) if pre.queue and not self.native else None,
        )
        if self.rack is not None:
            for doc in pods:
                doc["spec"]["nodeSelector"][RACK_LABEL] = rack_value(pool, self.rack)
        elif self.scenario.topology:
            group["spec"]["schedulingConstraints"] = {"topology": [{"key": RACK_LABEL}]}
        return [group, *pods] if self.native else [*pods, group]

    def start(self) -> None:
        """Create the preemptor's pods (and kube-scheduler's PodGroup): none can be scheduled before `release`."""
        self.started = datetime.now(UTC)
        self.preemptor_docs = self.preemptor_manifests()
        for doc in self.preemptor_docs:
            if self.native or doc["kind"] == "Pod":
                self.pool.create(doc)

    def release(self) -> None:
        """Let the scheduler take the preemptor's members (see `hand_over`); a lone pod is taken already."""
        if self.scenario.preemptor.policy == "pod":
            return
        if not self.native:
            (group,) = [doc for doc in self.preemptor_docs if doc["kind"] != "Pod"]
            self.pool.create(group)
            return
        with ThreadPoolExecutor(len(self.scenario.preemptor.names)) as workers:
            for reply in workers.map(self._ungate, self.scenario.preemptor.names):
                assert reply.status == 200, reply.message

    def _ungate(self, name: str) -> Response:
        path = f"/api/v1/namespaces/{self.pool.namespace}/pods/{name}"
        patch = [{"op": "remove", "path": "/spec/schedulingGates"}]
        return self.pool.api.patch(path, patch, "application/json-patch+json")

    def observe(self) -> Observation:
        pods = self.pool.pods()
        names = self.scenario.preemptor.names
        bound, progress, said = [], [], []
        tried = True
        for name in names:
            pod = pods.get(name, {})
            node = pod.get("spec", {}).get("nodeName")
            conditions = pod.get("status", {}).get("conditions", [])
            scheduled: Json = next((c for c in conditions if c["type"] == "PodScheduled"), {})
            reason = scheduled.get("reason", "")
            if node and not pod["metadata"].get("deletionTimestamp"):
                bound.append((name, node))
            else:
                said.append((name, scheduled.get("message", "")))
                if reason != "Unschedulable":
                    tried = False
            progress.append((name, pod.get("status", {}).get("nominatedNodeName", ""), reason))
        preempted = frozenset(
            p.name
            for p in self.scenario.running
            if p.name not in pods or pods[p.name]["metadata"].get("deletionTimestamp")
        )
        marked = frozenset(
            p.name
            for p in self.scenario.running
            if p.name not in preempted
            and any(c["type"] == DISRUPTION_TARGET for c in pods[p.name].get("status", {}).get("conditions", []))
        )
        return Observation(tuple(bound), preempted, tuple(progress), tried, marked, tuple(said))

    def outcome(self, observation: Observation) -> Outcome:
        index = {node: i for i, node in enumerate(self.pool.nodes)}
        bound = {name: index[node] for name, node in observation.bound}
        nominated = {name: index[node] for name, node, _ in observation.progress if name not in bound and node in index}
        return Outcome(bound, observation.preempted, nominated, dict(observation.said))


def _policy(pre: Preemptor) -> Json:
    return {"basic": {}} if pre.policy == "basic" else {"gang": {"minCount": pre.min_count}}


def hand_over(runs: Sequence[Run], api: Api, namespace: str) -> None:
    """Release every run's preemptor (created by `Run.start`); before Phalanx's PodGroups, make sure
    `phalanx scheduler` knows all their members: it has tried a probe pod created after them. The probe's
    `Unschedulable` is a best-effort write, held while other runs' preemptions are being sent (at most
    5 s): the groups then start that much later than the lone pods, in pools of their own."""
    if any(not r.native and r.scenario.preemptor.policy != "pod" for r in runs):
        name = f"arrivals-{next(_probes)}"
        path = f"/api/v1/namespaces/{namespace}/pods/{name}"
        probe = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "schedulerName": SCHEDULER_NAME,
                "nodeSelector": {PROBE_LABEL: "none"},
                "terminationGracePeriodSeconds": 0,
                "containers": [{"name": "c", "image": "registry.example/app:1"}],
            },
        }
        api.create(collection_path(probe), probe)
        try:
            wait_for(lambda: _unschedulable(api.get(path) or {}), timeout=60, what=f"{SCHEDULER_NAME} to try {name}")
        finally:
            api.request("DELETE", path)
    for r in runs:
        r.release()


def _unschedulable(pod: Json) -> bool:
    conditions = pod.get("status", {}).get("conditions", [])
    return any(c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable" for c in conditions)


class Settling(Protocol):
    """What `settle` watches: a `Run`, or anything else that observes a scenario's outcome."""

    scenario: Scenario
    flavour: str

    @property
    def label(self) -> str: ...

    def observe(self) -> Observation: ...

    def outcome(self, observation: Observation) -> Outcome: ...


R = TypeVar("R", bound=Settling)


def settle(runs: Iterable[R], timeout: float = 120.0, quiet: float = QUIET_SECONDS) -> dict[R, Outcome]:
    """Each run's outcome once nothing about it changed for `quiet` seconds (the preemptor's pods, their
    nominations and reasons, the victims marked or gone) after its scheduler bound or tried every pod of
    the preemptor. A run that binds everything waits too: a victim deleted after the last binding counts."""
    pending = list(runs)
    last: dict[R, Observation] = {}
    since: dict[R, float] = {}
    done: dict[R, Outcome] = {}
    deadline = time.monotonic() + timeout
    while pending:
        for run in list(pending):
            seen = run.observe()
            now = time.monotonic()
            if last.get(run) != seen:
                last[run], since[run] = seen, now
            if seen.acted(len(run.scenario.preemptor.names)) and now - since[run] >= quiet:
                done[run] = run.outcome(seen)
                pending.remove(run)
        if pending and time.monotonic() > deadline:
            names = ", ".join(f"{r.label} {r.scenario.name}: {last.get(r)}" for r in pending)
            raise AssertionError(f"not settled after {timeout:.0f}s: {names}")
        time.sleep(0.3)
    return done
