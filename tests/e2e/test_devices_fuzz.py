"""Random device scenarios through Phalanx and kube-scheduler 1.36.2 on the real API server (issue 39): both bind
as many pods, and every allocation either writes is sound.

A scenario is a few GPU nodes, each with 1-8 devices of 1-3 models (`devices.MEMORY`: a `model` attribute, a
`memory` attribute and capacity), and a few units: lone pods and gangs of 2-3 members (Phalanx's side: our
PodGroup; kube-scheduler's: the native `scheduling.k8s.io/v1alpha2` one; `minCount` is every member), each pod
with one claim (named, or made from a template by the resourceclaim controller) for one device of a DeviceClass
(all the driver's devices, or those with 40 GiB or more) narrowed by CEL selectors on the request: a model, a
list of models, not a model, the `memory` attribute or the `memory` capacity compared with a bound.

The scenarios are placement scenarios: no priorities, nothing to preempt. Each is drawn so that the number of pods
bound depends neither on the order in which a scheduler takes the units nor on which devices it gives them
(`Scenario.outcomes` tries every order and every choice), so both schedulers must bind that number, whichever pods
they pick. On each side, once nothing changed for `STABLE_SECONDS`, every bound pod's claim is allocated on the
pod's node, reserved for it, with a device its class and selectors select; no device is given to two claims; no
claim is allocated whose pod is not bound; and each gang is bound whole or not at all.

The scenarios of a run go at once, each on nodes of its own (`SCENARIO_KEY`), both schedulers beside each other
as in `test_devices.py`. The seed is printed and can be given back: `PHALANX_DEVICE_FUZZ_SEED=N`;
`PHALANX_DEVICE_FUZZ_SCENARIOS` says how many scenarios (4 by default, a few seconds each, all settling together).
"""

from __future__ import annotations

import os
import random
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cache

import pytest

from tests.devices import DRIVER, MEMORY, claim_spec, device_class
from tests.e2e.control_plane import Json
from tests.e2e.devices import SEED, Allocation, DeviceSide, device_sides
from tests.e2e.differential.kube_scheduler import KubeScheduler
from tests.e2e.objects import GROUP_LABEL, NATIVE, PHALANX, Pool
from tests.e2e.sides import STABLE_SECONDS
from tests.polling import wait_for

SCENARIOS = int(os.environ.get("PHALANX_DEVICE_FUZZ_SCENARIOS", "4"))
SCENARIO_KEY = "e2e.phalanx.dev/scenario"
MODELS = tuple(MEMORY)
ATTRIBUTES = f'device.attributes["{DRIVER}"]'
BIG = frozenset(m for m, gib in MEMORY.items() if gib >= 40)
"""What the `big` DeviceClass selects."""
SETTLE_TIMEOUT = 90.0
"""Until every pod of every scenario was tried by its scheduler (bound, or said why not)."""


@dataclass(frozen=True, slots=True)
class Selector:
    """A CEL selector of a request, and the models whose devices it selects."""

    expression: str
    models: frozenset[str]


@dataclass(frozen=True, slots=True)
class Unit:
    """A lone pod (`members == 1`, not `gang`) or a gang whose members all claim alike."""

    name: str
    members: int
    gang: bool
    big: bool
    """Of the DeviceClass of devices with 40 GiB or more, else of all the driver's devices."""
    selectors: tuple[Selector, ...]
    template: bool
    """Each pod's claim made from a ResourceClaimTemplate, else a ResourceClaim named after the pod."""

    @property
    def models(self) -> frozenset[str]:
        """The models a member's device may be of."""
        found = BIG if self.big else frozenset(MODELS)
        for selector in self.selectors:
            found &= selector.models
        return found

    def pods(self, scenario: str) -> list[str]:
        stem = f"{scenario}-{self.name}"
        return [f"{stem}-{i}" for i in range(self.members)] if self.gang else [stem]


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    nodes: tuple[tuple[str, ...], ...]
    """The model of each device of each node: node `n<i>`, device `gpu-<j>`."""
    units: tuple[Unit, ...]

    def role(self, node: int) -> str:
        return f"{self.name}-n{node}"

    def pods(self) -> list[str]:
        return [p for u in self.units for p in u.pods(self.name)]

    def unit_of(self, pod: str) -> Unit:
        return next(u for u in self.units if pod in u.pods(self.name))

    def outcomes(self) -> frozenset[int]:
        """How many pods may end bound, over every order of the units and every choice of devices. One device a
        pod and ample CPU: which node a device is on does not matter, only how many of each model are free. A unit
        that does not fit when its turn comes never will (nothing is freed)."""
        supply = Counter(m for devices in self.nodes for m in devices)
        models = sorted(supply)
        wants = [(u.members, tuple(i for i, m in enumerate(models) if m in u.models)) for u in self.units]

        def takes(left: tuple[int, ...], usable: tuple[int, ...], count: int) -> Iterator[tuple[int, ...]]:
            if count == 0:
                yield left
                return
            if not usable:
                return
            first, rest = usable[0], usable[1:]
            for n in range(min(count, left[first]), -1, -1):
                after = (*left[:first], left[first] - n, *left[first + 1 :])
                yield from takes(after, rest, count - n)

        @cache
        def bound(left: tuple[int, ...], pending: frozenset[int]) -> frozenset[int]:
            if not pending:
                return frozenset({0})
            found: set[int] = set()
            for unit in pending:
                members, usable = wants[unit]
                ways = set(takes(left, usable, members))
                if not ways:
                    found |= bound(left, pending - {unit})
                for after in ways:
                    found |= {members + n for n in bound(after, pending - {unit})}
            return frozenset(found)

        return bound(tuple(supply[m] for m in models), frozenset(range(len(self.units))))

    def __str__(self) -> str:
        lines = [f"scenario {self.name}:"]
        for i, devices in enumerate(self.nodes):
            lines.append(f"  node {self.role(i)}: {', '.join(f'gpu-{j} {m}' for j, m in enumerate(devices))}")
        for unit in self.units:
            kind = f"gang of {unit.members}" if unit.gang else "pod"
            source = "template" if unit.template else "claim"
            selectors = " && ".join(f"({s.expression})" for s in unit.selectors) or "no selector"
            device_class = "big" if unit.big else "gpu"
            lines.append(
                f"  {kind} {unit.name}: {source} of class {device_class}, {selectors} -> {sorted(unit.models)}"
            )
        lines.append(f"  pods bound in any order: {sorted(self.outcomes())}")
        return "\n".join(lines)


def random_selector(rng: random.Random, present: Sequence[str]) -> Selector:
    """Mostly one model of the scenario (as `examples/devices.yaml`), else any of the other forms."""
    kind = rng.choices(["model", "in", "not", "memory", "capacity"], weights=[4, 1, 1, 1, 1])[0]
    if kind == "model":
        model = rng.choice(present)
        return Selector(f'{ATTRIBUTES}.model == "{model}"', frozenset({model}))
    if kind == "in":
        picked = rng.sample(MODELS, rng.randint(1, 2))
        listed = ", ".join(f'"{m}"' for m in picked)
        return Selector(f"{ATTRIBUTES}.model in [{listed}]", frozenset(picked))
    if kind == "not":
        model = rng.choice(MODELS)
        return Selector(f'{ATTRIBUTES}.model != "{model}"', frozenset(MODELS) - {model})
    gib = rng.choice(sorted(set(MEMORY.values())))
    at_least = rng.random() < 0.5
    models = frozenset(m for m, g in MEMORY.items() if (g >= gib if at_least else g <= gib))
    op = ">=" if at_least else "<="
    if kind == "memory":
        return Selector(f"{ATTRIBUTES}.memory {op} {gib}", models)
    return Selector(f'device.capacity["{DRIVER}"].memory.compareTo(quantity("{gib}Gi")) {op} 0', models)


def random_unit(rng: random.Random, name: str, present: Sequence[str]) -> Unit:
    gang = rng.random() < 0.35
    selectors = tuple(random_selector(rng, present) for _ in range(rng.choices([0, 1, 2], weights=[1, 6, 1])[0]))
    return Unit(
        name=name,
        members=rng.randint(2, 3) if gang else 1,
        gang=gang,
        big=rng.random() < 0.2,
        selectors=selectors,
        template=rng.random() < 0.3,
    )


def random_scenario(rng: random.Random, name: str) -> Scenario:
    """Redrawn until the count of pods bound is the same in every order (most are)."""
    while True:
        present = rng.sample(MODELS, rng.randint(1, 3))
        nodes = tuple(tuple(rng.choice(present) for _ in range(rng.randint(1, 8))) for _ in range(rng.randint(1, 3)))
        units = tuple(random_unit(rng, f"u{i}", present) for i in range(rng.randint(2, 5)))
        drawn = Scenario(name, nodes, units)
        if len(drawn.outcomes()) == 1:
            return drawn


@pytest.fixture
def sides(pool: Pool, kube_scheduler: KubeScheduler) -> Iterator[dict[str, DeviceSide]]:
    big = device_class(f"{pool.name}-big", f"{ATTRIBUTES}.memory >= 40")
    with device_sides(pool, device_class(f"{pool.name}-gpu"), big) as made:
        yield made


def class_of(side: DeviceSide, unit: Unit) -> str:
    return f"{side.pool.name}-big" if unit.big else side.device_class


def make(side: DeviceSide, scenario: Scenario) -> None:
    """The scenario's nodes, slices, PodGroups, claims or templates, then its pods."""
    for i, devices in enumerate(scenario.nodes):
        side.add_gpu_node(scenario.role(i), *devices, cpu="64", **{SCENARIO_KEY: scenario.name})
    pods: list[Json] = []
    for unit in scenario.units:
        spec = claim_spec(class_of(side, unit), [s.expression for s in unit.selectors])
        stem = f"{scenario.name}-{unit.name}"
        if unit.template:
            side.create_template(stem, spec=spec)
        if unit.gang:
            api_version = PHALANX if side.tag == "phalanx" else NATIVE
            group = side.pool.pod_group(stem, {"gang": {"minCount": unit.members}}, api_version=api_version)
            group["metadata"]["namespace"] = side.namespace
            side.pool.api.create(f"/apis/{api_version}/namespaces/{side.namespace}/podgroups", group)
        for name in unit.pods(scenario.name):
            if not unit.template:
                side.create_claim(name, spec=spec)
            pod = side.gpu_pod(name, claim=None if unit.template else name, template=stem if unit.template else None)
            pod["spec"]["nodeSelector"][SCENARIO_KEY] = scenario.name
            if unit.gang and side.tag == "phalanx":
                pod["metadata"]["labels"][GROUP_LABEL] = stem
            elif unit.gang:
                pod["spec"]["schedulingGroup"] = {"podGroupName": stem}
            pods.append(pod)
    side.create(*pods)
    side.hand_over([p["metadata"]["name"] for p in pods if p["spec"].get("schedulingGroup")])


@dataclass(frozen=True, slots=True)
class Observed:
    """A side as it stands: where its pods are bound, what each claim was given, why the others wait."""

    placed: dict[str, str]
    """pod -> node role."""
    allocated: dict[str, Allocation]
    """claim -> allocation, for the claims allocated."""
    owners: dict[str, str]
    """claim -> the pod it was made for (a template's claim names its pod as owner; the others are the pod's name)."""
    waiting: dict[str, str]
    """pod -> its PodScheduled reason, for the pods not bound."""


def observe(side: DeviceSide, names: Sequence[str]) -> Observed | None:
    """The side once each of `names` was tried (bound, or PodScheduled=False for another reason than a gate)."""
    pods = side.pods()
    placed = side.placed(names)
    waiting: dict[str, str] = {}
    for name in names:
        if name in placed:
            continue
        conditions = pods.get(name, {}).get("status", {}).get("conditions", [])
        reason = next((c.get("reason", "") for c in conditions if c["type"] == "PodScheduled"), "")
        if reason in ("", "SchedulingGated"):
            return None
        waiting[name] = reason
    claims = side.claims()
    allocated = {n: a for n in claims if (a := side.allocation(n, claims)) is not None}
    owners = {}
    for name, claim in claims.items():
        pod_owners = [o["name"] for o in claim["metadata"].get("ownerReferences", []) if o["kind"] == "Pod"]
        owners[name] = pod_owners[0] if pod_owners else name
    return Observed(placed, allocated, owners, waiting)


def settle(sides: dict[str, DeviceSide], names: Sequence[str]) -> dict[str, Observed]:
    """Each side once every pod was tried and nothing changed over two reads `STABLE_SECONDS` apart."""

    def both() -> dict[str, Observed] | None:
        found = {tag: observe(side, names) for tag, side in sides.items()}
        return {tag: o for tag, o in found.items() if o is not None} if all(found.values()) else None

    what = f"each of {len(names)} pods bound or found unschedulable, on both sides"
    before: dict[str, Observed] = wait_for(both, timeout=SETTLE_TIMEOUT, interval=0.2, what=what)
    for _ in range(15):
        time.sleep(STABLE_SECONDS)
        now: dict[str, Observed] = wait_for(both, timeout=SETTLE_TIMEOUT, interval=0.2, what=what)
        if now == before:
            return now
        before = now
    raise AssertionError(f"still changing after {15 * STABLE_SECONDS:.0f}s")


def problems(scenario: Scenario, observed: Observed, slices: dict[str, list[str]]) -> list[str]:
    """What is wrong with one side's outcome of `scenario` (its pods and claims only)."""
    found: list[str] = []
    pods = scenario.pods()
    claims_of: dict[str, list[str]] = {}
    for claim, owner in observed.owners.items():
        if owner in pods:
            claims_of.setdefault(owner, []).append(claim)
    held: dict[tuple[str, str], str] = {}
    for claim, (results, reserved, node) in observed.allocated.items():
        owner = observed.owners.get(claim, claim)
        if owner not in pods:
            continue
        unit = scenario.unit_of(owner)
        if owner not in observed.placed:
            found.append(
                f"claim {claim} allocated ({results}, reserved for {reserved}) but its pod {owner} is not bound"
            )
        for pod in (r.removeprefix("pods/") for r in reserved):
            if pod not in observed.placed:
                found.append(f"claim {claim} reserved for {pod}, which is not bound")
        for request, driver, role, device in results:
            if held.setdefault((role, device), claim) != claim:
                found.append(f"device {device} of {role} given to claims {held[(role, device)]} and {claim}")
            index = int(device.removeprefix("gpu-"))
            devices = slices.get(role, [])
            model = devices[index] if index < len(devices) else None
            if (request, driver) != ("gpu", DRIVER) or model not in unit.models:
                wanted = sorted(unit.models)
                found.append(f"claim {claim} given {driver} {role}/{device} ({model}) for {request}, not of {wanted}")
            if owner in observed.placed and role != observed.placed[owner]:
                found.append(f"claim {claim} given {role}/{device}, but its pod {owner} is on {observed.placed[owner]}")
        if owner in observed.placed and node != observed.placed[owner]:
            found.append(f"claim {claim} may be used on {node}, but its pod {owner} is on {observed.placed[owner]}")
    for pod, node in observed.placed.items():
        if pod not in pods:
            continue
        mine = claims_of.get(pod, [])
        if len(mine) != 1 or mine[0] not in observed.allocated:
            found.append(f"pod {pod} bound on {node} without its claim allocated (claims {mine})")
            continue
        results, reserved, _ = observed.allocated[mine[0]]
        if reserved != [f"pods/{pod}"] or len(results) != 1:
            found.append(f"pod {pod}'s claim {mine[0]}: {len(results)} devices, reserved for {reserved}")
    for unit in scenario.units:
        members = unit.pods(scenario.name)
        bound = [m for m in members if m in observed.placed]
        if unit.gang and bound and len(bound) != len(members):
            found.append(f"gang {unit.name} partly bound: {bound} of {members}")
    return found


def test_random_device_scenarios_bind_as_many_pods_as_kube_scheduler_with_sound_allocations(
    sides: dict[str, DeviceSide],
) -> None:
    rng = random.Random(SEED)
    scenarios = [random_scenario(rng, f"s{i}") for i in range(SCENARIOS)]
    print(f"\ndevice fuzz: seed {SEED}, {SCENARIOS} scenarios (PHALANX_DEVICE_FUZZ_SEED={SEED})")
    for scenario in scenarios:
        print(scenario)
    started = time.monotonic()
    for scenario in scenarios:
        for side in sides.values():
            make(side, scenario)
    names = [p for s in scenarios for p in s.pods()]
    observed = settle(sides, names)
    print(f"settled in {time.monotonic() - started:.1f} s")
    failures: list[str] = []
    for scenario in scenarios:
        (want,) = scenario.outcomes()
        pods = scenario.pods()
        bound = {tag: sorted(p for p in pods if p in o.placed) for tag, o in observed.items()}
        print(
            f"{scenario.name}: {want} of {len(pods)} bound in any order; "
            + "; ".join(f"{tag} bound {len(b)}" for tag, b in bound.items())
        )
        said = {tag: {p: r for p, r in o.waiting.items() if p in pods} for tag, o in observed.items()}
        if len(bound["phalanx"]) != len(bound["kube"]) or len(bound["phalanx"]) != want:
            failures.append(
                f"seed {SEED} {scenario.name}: {want} pods bound in any order, Phalanx bound {bound['phalanx']}, "
                f"kube-scheduler {bound['kube']}; waiting: {said}\n{scenario}"
            )
        for tag, side in sides.items():
            wrong = problems(scenario, observed[tag], side.slices)
            if wrong:
                failures.append(f"seed {SEED} {scenario.name} ({tag}):\n  " + "\n  ".join(wrong) + f"\n{scenario}")
    assert not failures, "\n".join(failures)
