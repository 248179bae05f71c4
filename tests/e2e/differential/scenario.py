"""Preemption scenarios as plain data: what the differential fuzz generates, runs and prints back.

A `Scenario` is a small full cluster (2-5 nodes, whole CPUs) with running lone pods and pod groups
of both policies and disruption modes, PodDisruptionBudgets over some pods, and a preemptor (a lone
pod, a basic group or a gang). `protections` adds what kube-scheduler has no equivalent for:
preemption toleration on PriorityClasses and min-runtime on a Queue tree. `random_scenario` draws one
from a `random.Random`, so a seed reproduces a run; `Scenario.code()` prints it as the Python
expression that builds it, to be pasted into `tests/e2e/test_differential.py` as a regression case.

Given `constraints`, 30% of the scenarios (`CONSTRAINED_SHARE`) add one of kube-scheduler's placement constraints
(`CONSTRAINTS`) to the preemptor's pods and to some running pods, its `members`: a required pod
anti-affinity on `kubernetes.io/hostname` against the members' own label (replicas), a `DoNotSchedule`
topology spread constraint over a zone label every node gets (`zones`), or a host port. Running members
start legal (at most one per node for anti-affinity and the port); some of these scenarios leave room, so
the constraint alone decides, others are full and it shapes the preemption.

A topology scenario (`random_scenario(..., topology=True)`; `topology_picks` chooses which of a fuzz run's are)
puts its 3-5 nodes in two or three racks, sometimes leaving one node out of every rack (no label), and makes the
preemptor a group (basic or gang) that must go whole into one rack (`spec.schedulingConstraints.topology`); it has
no other `constraint`. Half of them leave room, so the placement alone decides, the others are full and the group
needs a rack's victims.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, fields, replace
from typing import Any

PRIORITIES = (10, 20, 30, 50)
"""Few values, so that ties (the arbitrary part of kube-scheduler's order) are common."""
CONSTRAINTS = ("anti-affinity", "spread", "host-port")
"""What a scenario's `constraint` may be ("" for none)."""
CONSTRAINED_SHARE = 0.3
POLICIES = ("pod", "pod", "basic", "gang")
"""The preemptor's policy, drawn from these (a lone pod half the time); a topology scenario's is a group."""
RACK_NAMES = ("a", "b", "c")
MAX_SKEW = 1
"""The spread constraint's `maxSkew`."""
TOPOLOGY_SHARE = 0.2
"""The share of a fuzz run's scenarios that are topology scenarios (at least one a run)."""
STARTED_MINUTES = (5, 30, 120)
"""How long ago running pods started: few values, so that equal start times are common too."""


@dataclass(frozen=True, slots=True)
class Toleration:
    """A PriorityClass's preemption-toleration policy (`toleration-seconds` < 0: forever)."""

    minimum_priority: int
    seconds: int


@dataclass(frozen=True, slots=True)
class Group:
    """A running pod group; its members are the `Running` pods naming it, at its priority. Only a gang may
    have `disruptionMode: PodGroup` (the webhook refuses it on a basic group)."""

    name: str
    priority: int
    min_count: int | None = None
    """None: a `basic` group; else a gang of this minCount."""
    mode: str = "Pod"
    queue: str | None = None
    toleration: Toleration | None = None
    started_minutes: int = 30


@dataclass(frozen=True, slots=True)
class Running:
    """A pod bound to `nodes[node]`, started `started_minutes` ago."""

    name: str
    node: int
    cpu: int
    priority: int
    group: str | None = None
    budget: str | None = None
    """The PodDisruptionBudget that selects it."""
    toleration: Toleration | None = None
    queue: str | None = None
    """A lone pod's queue (label `scheduling.phalanx.dev/queue`)."""
    started_minutes: int = 30
    member: bool = False
    """It carries the scenario's `constraint` (and its label), as the preemptor's pods do."""


@dataclass(frozen=True, slots=True)
class Budget:
    name: str
    min_available: int


@dataclass(frozen=True, slots=True)
class Queue:
    name: str
    parent: str | None = None
    preempt: str | None = None
    reclaim: str | None = None


@dataclass(frozen=True, slots=True)
class Preemptor:
    """`policy` is `pod` (one lone pod), `basic` or `gang`; every pod asks for `cpu` CPUs."""

    policy: str
    pods: int
    cpu: int
    priority: int
    min_count: int = 1
    queue: str | None = None

    @property
    def names(self) -> list[str]:
        return ["preemptor"] if self.policy == "pod" else [f"m{i}" for i in range(self.pods)]


@dataclass(frozen=True, slots=True)
class Scenario:
    nodes: tuple[int, ...]
    running: tuple[Running, ...]
    preemptor: Preemptor
    groups: tuple[Group, ...] = ()
    budgets: tuple[Budget, ...] = ()
    queues: tuple[Queue, ...] = ()
    name: str = ""
    constraint: str = ""
    """One of `CONSTRAINTS`, on the preemptor's pods and the running `member`s; "" for none."""
    zones: tuple[str, ...] = ()
    """Per node, its zone label (a spread constraint's topology); () for no zone label."""
    racks: tuple[str, ...] = ()
    """Per node, its rack ("" for a node in no rack); given, the preemptor (a group) must go whole into one rack."""

    @property
    def protections(self) -> bool:
        """Whether it uses toleration or min-runtime, which only Phalanx (and its simulator) know."""
        return bool(self.queues) or any(p.toleration for p in self.running) or any(g.toleration for g in self.groups)

    @property
    def topology(self) -> bool:
        """Whether the preemptor group carries a topology constraint on the racks."""
        return bool(self.racks)

    def group(self, name: str) -> Group:
        return next(g for g in self.groups if g.name == name)

    def members(self, group: str) -> list[Running]:
        return [p for p in self.running if p.group == group]

    def code(self) -> str:
        """The Python expression that builds this scenario, fields at their defaults left out."""
        return _code(self, 0)


def _code(value: Any, depth: int) -> str:
    pad = "    " * (depth + 1)
    if isinstance(value, tuple):
        if not value:
            return "()"
        items = [_code(v, depth + 1) for v in value]
        if all(not isinstance(v, (tuple, Scenario)) for v in value) and len(", ".join(items)) < 80:
            return f"({', '.join(items)}{',' if len(items) == 1 else ''})"
        return "(\n" + "".join(f"{pad}{item},\n" for item in items) + "    " * depth + ")"
    if hasattr(value, "__dataclass_fields__"):
        given = [(f.name, getattr(value, f.name)) for f in fields(value) if getattr(value, f.name) != f.default]
        args = [f"{name}={_code(v, depth + 1)}" for name, v in given]
        flat = f"{type(value).__name__}({', '.join(args)})"
        if len(flat) + len(pad) <= 110 and "\n" not in flat:
            return flat
        return f"{type(value).__name__}(\n" + "".join(f"{pad}{arg},\n" for arg in args) + "    " * depth + ")"
    return repr(value)


def topology_picks(rng: random.Random, count: int) -> frozenset[int]:
    """Which of a run's `count` scenarios are topology scenarios: `TOPOLOGY_SHARE` of them, at least one."""
    if count == 0:
        return frozenset()
    return frozenset(rng.sample(range(count), max(1, round(TOPOLOGY_SHARE * count))))


def random_scenario(
    rng: random.Random,
    name: str,
    protections: bool = False,
    constraints: tuple[str, ...] = (),
    topology: bool = False,
) -> Scenario:
    """A full (or nearly full) cluster and a preemptor that needs room; `protections` adds toleration and
    min-runtime. Group members share their group's priority; budgets select lone pods or members. A share
    of them (`CONSTRAINED_SHARE`) add one of `constraints` (of `CONSTRAINTS`), about half of those with room left.
    `topology` makes it a topology scenario instead (the module's docstring); the other scenarios make no draw for
    it, so a seed gives the same ones whether a run has topology scenarios or not."""
    nodes = tuple(rng.choice((4, 8)) for _ in range(rng.randint(3, 5) if topology else rng.randint(2, 5)))
    constraint = ""
    if not topology and constraints and rng.random() < CONSTRAINED_SHARE:
        constraint = rng.choice(constraints)
    fill = 0.5 if (constraint or topology) and rng.random() < 0.5 else 0.9
    room = list(nodes)
    groups: list[Group] = []
    running: list[Running] = []
    queues = _queues(rng) if protections else ()
    leaves = [q.name for q in queues if q.name != "root"]
    tolerations = _tolerations(rng) if protections else {}
    for g in range(rng.choice((0, 1, 1, 2))):
        size = rng.randint(2, 3)
        priority = rng.choice(PRIORITIES)
        placed = 0
        for _ in range(size):
            node = rng.randrange(len(nodes))
            cpu = rng.randint(1, 3)
            if room[node] >= cpu:
                room[node] -= cpu
                running.append(Running(f"g{g}-{placed}", node, cpu, priority, group=f"g{g}"))
                placed += 1
        if placed:
            gang = rng.random() < 0.5
            groups.append(
                Group(
                    f"g{g}",
                    priority,
                    min_count=rng.randint(1, placed) if gang else None,
                    mode=rng.choice(("Pod", "PodGroup")) if gang else "Pod",
                    queue=rng.choice([None, *leaves]) if leaves else None,
                    toleration=tolerations.get(priority),
                    started_minutes=rng.choice(STARTED_MINUTES),
                )
            )
    started = {g.name: g.started_minutes for g in groups}
    running = [replace(p, started_minutes=started[p.group or ""]) for p in running]
    count = 0
    for node, capacity in enumerate(nodes):
        while room[node] > 0 and (room[node] == capacity or rng.random() < fill):
            cpu = rng.randint(1, min(4, room[node]))
            priority = rng.choice(PRIORITIES)
            running.append(
                Running(
                    f"p{count}",
                    node,
                    cpu,
                    priority,
                    toleration=tolerations.get(priority),
                    queue=rng.choice([None, *leaves]) if leaves and rng.random() < 0.3 else None,
                    started_minutes=rng.choice(STARTED_MINUTES),
                )
            )
            room[node] -= cpu
            count += 1
    budgets: list[Budget] = []
    for b in range(rng.choice((0, 0, 1, 1, 2))):
        free = [p for p in running if p.budget is None]
        if not free:
            break
        chosen = {p.name for p in rng.sample(free, rng.randint(1, min(3, len(free))))}
        budgets.append(Budget(f"b{b}", len(chosen) - rng.choice((0, 0, 1))))
        running = [replace(p, budget=f"b{b}") if p.name in chosen else p for p in running]
    zones: tuple[str, ...] = ()
    if constraint:
        running, zones = _members(rng, constraint, running, len(nodes))
    racks = _racks(rng, len(nodes)) if topology else ()
    return Scenario(
        nodes=nodes,
        running=tuple(running),
        preemptor=_preemptor(rng, max(nodes), leaves, ("basic", "gang") if topology else POLICIES),
        groups=tuple(groups),
        budgets=tuple(budgets),
        queues=queues,
        name=name,
        constraint=constraint,
        zones=zones,
        racks=racks,
    )


def _racks(rng: random.Random, nodes: int) -> tuple[str, ...]:
    """Two racks (`a`, `b`), or three (`c`) where four nodes or more are in one, as even as can be; a quarter of
    the time one node of four or more is in none (""). A rack of one node is common, as is one of two or three."""
    outside = 1 if nodes > 3 and rng.random() < 0.25 else 0
    labelled = nodes - outside
    count = rng.choice((2, 3)) if labelled >= 4 else 2
    racks = [RACK_NAMES[i % count] for i in range(labelled)] + [""] * outside
    rng.shuffle(racks)
    return tuple(racks)


def _members(
    rng: random.Random, constraint: str, running: list[Running], nodes: int
) -> tuple[list[Running], tuple[str, ...]]:
    """The running pods that carry `constraint` (legal as placed: anti-affinity and a host port at most one a
    node), and for a spread constraint the nodes' zones (two or three, each with a node)."""
    if constraint == "spread":
        count = min(rng.choice((2, 3)), nodes)
        zones = [f"zone-{i % count}" for i in range(nodes)]
        rng.shuffle(zones)
        chosen = {p.name for p in running if rng.random() < 0.4}
        return [replace(p, member=p.name in chosen) for p in running], tuple(zones)
    chosen = set()
    for node in range(nodes):
        here = [p.name for p in running if p.node == node]
        if here and rng.random() < 0.5:
            chosen.add(rng.choice(here))
    return [replace(p, member=p.name in chosen) for p in running], ()


def _preemptor(rng: random.Random, largest: int, leaves: list[str], policies: tuple[str, ...]) -> Preemptor:
    policy = rng.choice(policies)
    priority = rng.choice((40, 1000))
    queue = rng.choice([None, *leaves]) if leaves and policy != "pod" else None
    if policy == "pod":
        return Preemptor("pod", 1, rng.randint(1, min(4, largest)), priority)
    pods = rng.randint(2, 4)
    min_count = rng.randint(1, pods) if policy == "gang" else 1
    return Preemptor(policy, pods, rng.randint(1, min(4, largest)), priority, min_count, queue)


def _queues(rng: random.Random) -> tuple[Queue, ...]:
    """A root and two leaves, min-runtimes at either level: long ones protect, short ones have run out."""
    durations = (None, "1m", "1h")
    return (
        Queue("root", preempt=rng.choice(durations), reclaim=rng.choice(durations)),
        Queue("team-a", "root", preempt=rng.choice(durations), reclaim=rng.choice(durations)),
        Queue("team-b", "root", preempt=rng.choice(durations), reclaim=rng.choice(durations)),
    )


def _tolerations(rng: random.Random) -> dict[int, Toleration]:
    """Some priority levels tolerate preemptors below 1000 (or below 40): forever, for an hour (running
    pods started 5 minutes ago are then protected, older ones not), or for a minute (run out)."""
    out = {}
    for priority in PRIORITIES:
        if rng.random() < 0.4:
            out[priority] = Toleration(rng.choice((41, 1001)), rng.choice((-1, 3600, 60)))
    return out
