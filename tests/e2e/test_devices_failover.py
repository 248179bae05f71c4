"""A leader killed while it writes a gang's claim allocations (issue 39): once the new leader settled, no claim is
allocated to a pod that is not bound, no device is given twice, and the gang is bound whole.

Two `phalanx scheduler` replicas run with leader election, as the chart runs them. A gang (our PodGroup,
`minCount` every member) claims one a100 a member, and the pool has exactly as many a100 as members, on two
nodes. For each member the leader writes the claim's finalizer, then its allocation, then the Binding. The test
watches the claims and SIGKILLs the leader as soon as the watch shows its Kth allocation (K drawn from the seed,
from the first to the last but one), so it dies with some allocations written for pods it has not bound. The
standby takes the Lease (3 s, the suite's lease duration), rebuilds from the API and must finish from there: a pod
whose claim is already allocated goes to the node the allocation names, and the devices the dead leader allocated
are not free for anyone else.

What this catches: a successor that ignores an allocation it did not make (the pod bound elsewhere, the device
given to another member too, or a member left without a device because the gang was placed as if nothing were
held), one that leaves a gang half bound or allocations for pods it never binds, and one that does not finish at
all. `PHALANX_DEVICE_FUZZ_SEED` gives a run's kill point and layout back; `PHALANX_DEVICE_FAILOVER_ROUNDS` makes
more failovers, each with a gang of its own.
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from tests.devices import DRIVER, RESOURCE, claim_spec, device_class, gpu_slice, model_is, resource_claim
from tests.e2e.control_plane import Json
from tests.e2e.devices import FINALIZER, SEED
from tests.e2e.objects import GROUP_LABEL, Pool, node
from tests.e2e.sides import STABLE_SECONDS
from tests.e2e.stack import LEASE, Process, Stack
from tests.polling import wait_for

ROUNDS = int(os.environ.get("PHALANX_DEVICE_FAILOVER_ROUNDS", "1"))
"""Failovers a run makes, one after another (about 14 s each, most of it a standby's start)."""
MEMBERS = 4
ROUND_KEY = "e2e.phalanx.dev/round"


@dataclass(slots=True)
class ClaimWatch:
    """Watches a namespace's ResourceClaims from a thread and SIGKILLs the replica that holds the Lease when it shows
    the `kill_at`th allocation written (every change of a claim the test made is a scheduler's write: its
    finalizer, then its allocation)."""

    pool: Pool
    replicas: list[Process]
    kill_at: int
    victim: Process | None = None
    seen: list[str] = field(default_factory=list)
    """Each change, in order: `claim: finalizer` or `claim: allocated`."""
    killed: threading.Event = field(default_factory=threading.Event)
    failed: str = ""
    """Why the watch ended early, if it did."""
    _thread: threading.Thread | None = None

    def start(self) -> ClaimWatch:
        path = f"/apis/{RESOURCE}/namespaces/{self.pool.namespace}/resourceclaims"
        listed = self.pool.api.get(path)
        assert listed is not None
        version = listed["metadata"]["resourceVersion"]
        self._thread = threading.Thread(target=self._run, args=(path, version), name="claim-watch", daemon=True)
        self._thread.start()
        return self

    def _run(self, path: str, version: str) -> None:
        try:
            self._follow(path, version)
        except Exception as err:  # said by `wait_killed`, not lost in a thread
            self.failed = f"{type(err).__name__}: {err}"

    def _follow(self, path: str, version: str) -> None:
        for event in self.pool.plane.api().watch(path, version, timeout_seconds=60):
            if event["type"] != "MODIFIED":
                continue
            claim = event["object"]
            allocated = bool(claim.get("status", {}).get("allocation"))
            self.seen.append(f"{claim['metadata']['name']}: {'allocated' if allocated else 'finalizer'}")
            if sum(s.endswith("allocated") for s in self.seen) == self.kill_at:
                holder = lease_holder(self.pool)
                self.victim = next(p for p in self.replicas if p.name == holder and p.proc is not None)
                assert self.victim.proc is not None
                os.kill(self.victim.proc.pid, signal.SIGKILL)
                self.killed.set()
                return

    def wait_killed(self) -> Process:
        """The replica killed, once it is gone."""
        if not self.killed.wait(30):
            logs = "\n".join(f"{p.name}:\n{p.log()[-2000:]}" for p in self.replicas if p.running)
            raise AssertionError(
                f"no {self.kill_at} allocations written ({self.seen}; {self.failed or 'watching'}):\n{logs}"
            )
        assert self.victim is not None and self.victim.proc is not None
        self.victim.proc.wait(10)
        return self.victim


@dataclass(frozen=True, slots=True)
class State:
    """A round's gang and claims as the API server has them; nodes and pools as `short` names them."""

    bound: dict[str, str]
    """member -> node, for the members bound."""
    allocated: dict[str, tuple[list[tuple[str, str]], list[str], str | None]]
    """claim -> ([(pool, device)], reservedFor pod names, the node its node selector admits)."""
    finalized: list[str]
    """The claims that hold the delete-protection finalizer (the first write for each)."""


def read(pool: Pool, members: list[str]) -> State:
    claims = pool.api.items(f"/apis/{RESOURCE}/namespaces/{pool.namespace}/resourceclaims")
    allocated = {}
    for claim in claims:
        allocation = claim.get("status", {}).get("allocation")
        if not allocation or claim["metadata"]["name"] not in members:
            continue
        results = [
            (short(pool, r["pool"]), r["device"]) for r in allocation["devices"]["results"] if r["driver"] == DRIVER
        ]
        reserved = [r["name"] for r in claim["status"].get("reservedFor", []) if r["resource"] == "pods"]
        terms = allocation.get("nodeSelector", {}).get("nodeSelectorTerms", [])
        names = [v for t in terms for f in t.get("matchFields", []) if f["key"] == "metadata.name" for v in f["values"]]
        allocated[claim["metadata"]["name"]] = (results, reserved, short(pool, names[0]) if len(names) == 1 else None)
    finalized = [c["metadata"]["name"] for c in claims if FINALIZER in c["metadata"].get("finalizers", [])]
    bound = {m: short(pool, n) for m, n in pool.bound(members).items()}
    return State(bound, allocated, sorted(n for n in finalized if n in members))


def short(pool: Pool, node_name: str) -> str:
    """A node of the pool by what follows the pool's name (`r0-n1`)."""
    return node_name.removeprefix(f"{pool.name}-")


def problems(state: State, members: list[str]) -> list[str]:
    """What is wrong once the new leader settled: the invariants of the module's docstring."""
    found = []
    held: dict[tuple[str, str], str] = {}
    for claim, (results, reserved, on) in state.allocated.items():
        if claim not in state.bound:
            found.append(f"claim {claim} allocated {results} (reserved for {reserved}) but its pod is not bound")
        elif on != state.bound[claim] or any(p != state.bound[claim] for p, _ in results):
            found.append(f"claim {claim} allocated {results} for node {on}, its pod bound on {state.bound[claim]}")
        if reserved != [claim]:
            found.append(f"claim {claim} reserved for {reserved}")
        for device in results:
            if held.setdefault(device, claim) != claim:
                found.append(f"device {device} given to claims {held[device]} and {claim}")
    for member in state.bound:
        if member not in state.allocated:
            found.append(f"member {member} bound on {state.bound[member]} without its claim allocated")
    if state.bound and len(state.bound) != len(members):
        found.append(f"the gang is partly bound: {sorted(state.bound)} of {members}")
    if not state.bound:
        found.append(f"the gang was not bound though its {len(members)} devices are there")
    return found


@pytest.fixture
def replicas(phalanx: Stack) -> Iterator[list[Process]]:
    """The running scheduler (the leader), then each standby the test starts; the ones still running are stopped
    at the end (SIGTERM: the Lease is released for the next test's scheduler)."""
    assert phalanx.scheduler is not None
    started = [phalanx.scheduler]
    yield started
    for process in started[1:]:
        process.stop()


def gang(pool: Pool, round_: int, rng: random.Random) -> list[str]:
    """Two nodes of the round with `MEMBERS` a100 between them (1-3 on the first), the gang's PodGroup and one
    claim a member; the members' names (each claim is named after its member)."""
    first = rng.randint(1, MEMBERS - 1)
    for i, count in enumerate((first, MEMBERS - first)):
        name = f"{pool.name}-r{round_}-n{i}"
        made = node(name, pool.name, cpu="16")
        made["metadata"]["labels"][ROUND_KEY] = str(round_)
        pool.cluster_object(made)
        pool.cluster_object(gpu_slice(name, ["a100"] * count))
    group = f"r{round_}"
    pool.create(pool.pod_group(group, {"gang": {"minCount": MEMBERS}}))
    members = [f"r{round_}-w{i}" for i in range(MEMBERS)]
    spec = claim_spec(f"{pool.name}-gpu", [model_is("a100")])
    for member in members:
        claim = resource_claim(member, pool.namespace, spec)
        pool.api.create(f"/apis/{RESOURCE}/namespaces/{pool.namespace}/resourceclaims", claim)
    return members


def member(pool: Pool, name: str, round_: int) -> Json:
    made = pool.pod(name, group=f"r{round_}", grace=0)
    made["spec"]["nodeSelector"][ROUND_KEY] = str(round_)
    made["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": name}]
    made["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    assert made["metadata"]["labels"][GROUP_LABEL] == f"r{round_}"
    return made


def lease_holder(pool: Pool) -> str:
    return str(((pool.api.get(LEASE) or {}).get("spec") or {}).get("holderIdentity") or "")


def one_round(phalanx: Stack, pool: Pool, replicas: list[Process], round_: int, rng: random.Random) -> list[str]:
    """The leader killed at a random allocation write of a new gang; what is wrong once its successor settled."""
    replicas.append(phalanx.start_scheduler(standby=True))
    members = gang(pool, round_, rng)
    kill_at = rng.randint(1, MEMBERS - 1)
    watch = ClaimWatch(pool, replicas, kill_at).start()
    pool.create(*(member(pool, m, round_) for m in members))
    leader = watch.wait_killed()
    killed_at = time.monotonic()
    left = read(pool, members)

    def successor() -> Process | None:
        holder = lease_holder(pool)
        return next((p for p in replicas if p.name == holder and p.running), None)

    standby: Process = wait_for(successor, timeout=30, what="a standby to take the Lease")
    took_over = time.monotonic() - killed_at

    def finished() -> State | None:
        state = read(pool, members)
        return state if len(state.bound) == len(members) and len(state.allocated) == len(members) else None

    try:
        wait_for(finished, timeout=30, what=f"round {round_}: the new leader to bind the gang")
    except AssertionError as err:
        print(err)
    state = read(pool, members)
    time.sleep(STABLE_SECONDS)
    after = read(pool, members)
    print(
        f"round {round_}: {leader.name} killed at allocation write {kill_at} ({', '.join(watch.seen)}); it left "
        f"{len(left.finalized)} finalizers, {len(left.allocated)} allocations and {len(left.bound)} members bound; "
        f"{standby.name} led {took_over:.1f} s later and bound {len(after.bound)} of {MEMBERS}"
    )
    wrong = problems(after, members) + ([f"changed after settling: {state} -> {after}"] if after != state else [])
    if not wrong:
        return []
    return [
        f"seed {SEED} round {round_} (killed at allocation write {kill_at}; the dead leader left {left}):",
        *wrong,
        f"{standby.name}'s log:\n{standby.log()[-4000:]}",
    ]


def test_a_leader_killed_while_allocating_a_gangs_claims_leaves_no_claim_allocated_to_an_unbound_pod(
    phalanx: Stack, pool: Pool, replicas: list[Process]
) -> None:
    rng = random.Random(SEED)
    print(f"\ndevice failover: seed {SEED}, {ROUNDS} rounds (PHALANX_DEVICE_FUZZ_SEED={SEED})")
    pool.cluster_object(device_class(f"{pool.name}-gpu"))
    failures = [line for round_ in range(ROUNDS) for line in one_round(phalanx, pool, replicas, round_, rng)]
    assert not failures, "\n  ".join(failures)
