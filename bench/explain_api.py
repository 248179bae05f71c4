"""`kubectl phalanx explain podgroup` and `status -A` answered by the running scheduler's explain API (issue 41), end
to end as a user runs them, against the same commands computing the answer themselves.

By default the cluster is `real_apiserver.py --workloads explain`'s: `--nodes` full nodes (32 CPU), `--pods`
running pods spread over them (created bound, node i's in priority class fill-(i % 5)), and a 64-pod gang (16 CPU
members) whose dry run preempts 320 pods. `phalanx scheduler` serves the API (`--explain-bind`) as a standby: its
Lease is held by an identity that never renews it, so it answers from its informers and decides nothing, and the
cluster stays as it is between runs. kube-apiserver reaches it through an `APIService` and an ExternalName Service
(`localhost`), with its front proxy. Each command runs `--runs` times as the `kubectl-phalanx` executable (admin
kubeconfig), timed from process start to exit; then `--config` (the default SchedulerConfiguration, in a file) makes
the same command list the cluster and compute the answer itself, as without the API.

Reported per command: wall seconds (median and each run), the command's CPU (its process, user + system), and for
the served runs the scheduler's own figures from its `explanation served` log lines: seconds in all, reading its
cache, computing (the dry run), encoding, and the CPU the request took in the scheduler.

    .venv/bin/python bench/explain_api.py --nodes 1000 --pods 10000

`--drain` (issue 41, point 4): does serving explanations slow scheduling? `real_apiserver.py`'s `drain` (its control
plane, Phalanx's identity in `workload-high`, nodes, pods, watch, kubelet stand-in, CPU and peak RSS figures,
imported from it) with the scheduler leading (the chart's leader election, nothing else holding the Lease) and
serving the API with the chart's limits (1 explanation at once, 2 a second, a burst of 5, 2 % of a core while it
schedules, 0.25 CPU-second owed at most; over them, 429). `--pods`
pending pods of 100m on `--nodes` nodes of 32 CPU, GANGS gangs (PodGroups of minCount GANG_SIZE) among them; each
run starts its own scheduler after every pod exists and ends at the last Binding the bench's watch sees. Alternately
(A B B A for `--rounds 2`):

- A: the drain alone (the API served, nobody asking);
- B: the same drain with `--rate` (10) requests a second sent through kube-apiserver from the scheduler's start to
  the last Binding, open loop from 32 threads with the admin's token, on `phalanx/kubectl/served.py`'s paths, in
  turn: `explain pod` (a pod still pending), `explain podgroup` (a gang with a member pending) and `status -A`. A
  429 is counted, not retried as the plugin would. The first ones get 503 (kube-apiserver reaches no scheduler yet,
  or its caches are not synced).

Reported per run: when it ran and the load average, pods/s (scheduler start to last Binding), the scheduler's CPU
(whole process, /proc/<pid>/stat) per pod and peak RSS (VmHWM); for B, the requests sent and answered by code, the
200s' latency p50/p95, and the CPU the answers took in the scheduler (its `explanation served` lines, which a 429
does not get). Then the medians and B/A of pods/s (issue 41: >= 0.95x). `--py-spy DIR` samples each run's scheduler.

    .venv/bin/python bench/explain_api.py --drain --nodes 1000 --pods 10000 --rounds 2

Not part of `make test`. Run it alone (`flock /work/bench.lock`): any other load changes every figure.
"""

from __future__ import annotations

import argparse
import base64
import http.client
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import real_apiserver as bench  # noqa: E402

from certs.authority import generate_ca, issue_serving_certificate  # noqa: E402
from phalanx.kubectl.connection import USER_AGENT  # noqa: E402
from phalanx.kubectl.served import PREFIX, RESOURCES  # noqa: E402
from tests.e2e.control_plane import Api, ControlPlane  # noqa: E402
from tests.polling import wait_for  # noqa: E402

PHALANX = ROOT / ".venv" / "bin" / "phalanx"
PLUGIN = ROOT / ".venv" / "bin" / "kubectl-phalanx"
NODE_CPU = 32
CLASSES = 5
NAMESPACE = "phalanx-system"
SERVICE = "phalanx-scheduler"
PAUSED = "bench-paused"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pod(name: str, namespace: str, cpu: str, **spec: Any) -> dict[str, Any]:
    labels = spec.pop("labels", {})
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "containers": [{"name": "c", "image": "registry.example/app:1", "resources": {"requests": {"cpu": cpu}}}],
            **spec,
        },
    }


def established(crd: dict[str, Any] | None) -> bool:
    conditions = ((crd or {}).get("status") or {}).get("conditions") or []
    return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)


def build(api: Api, plane: ControlPlane, nodes: int, pods: int) -> str:
    """The cluster; the gang's namespace."""
    for path in sorted((ROOT / "charts" / "phalanx" / "crds").glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        api.apply(crd)
        where = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd['metadata']['name']}"
        wait_for(lambda where=where: established(api.get(where)), what=f"{where} established")
    nodes_py = str(ROOT.parent / "shared" / "kube" / "nodes.py")
    sizes = ["--cpu", str(NODE_CPU), "--memory", "256Gi", "--pods", "110"]
    subprocess.run([sys.executable, nodes_py, str(plane.dir), "--count", str(nodes), *sizes], check=True)
    for level in range(CLASSES):
        api.apply(
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": f"fill-{level}"},
                "value": level * 10,
            }
        )
    api.apply(
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "gang-high"},
            "value": 1_000_000,
        }
    )
    namespace = "explain"
    api.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    probe = pod("probe", namespace, "1", priorityClassName="gang-high")
    deadline = time.monotonic() + 30
    while api.request("POST", f"/api/v1/namespaces/{namespace}/pods?dryRun=All", probe).status == 403:
        assert time.monotonic() < deadline, "admission never saw the PriorityClasses"
        time.sleep(0.2)
    per_node = max(1, pods // nodes)
    fill = f"{NODE_CPU * 1000 // per_node}m"

    def one(i: int) -> None:
        made = pod(
            f"fill-{i}",
            namespace,
            fill,
            nodeName=f"node-{i % nodes}",
            priorityClassName=f"fill-{(i % nodes) % CLASSES}",
            schedulerName="default-scheduler",
        )
        api.create(f"/api/v1/namespaces/{namespace}/pods", made)

    with ThreadPoolExecutor(16) as threads:
        list(threads.map(one, range(pods)))
    group = {
        "apiVersion": "scheduling.phalanx.dev/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "gang", "namespace": namespace},
        "spec": {
            "schedulingPolicy": {"gang": {"minCount": 64}},
            "priorityClassName": "gang-high",
            "priority": 1_000_000,
        },
    }
    api.create(f"/apis/scheduling.phalanx.dev/v1alpha1/namespaces/{namespace}/podgroups", group)
    for m in range(64):
        member = pod(
            f"gang-{m}",
            namespace,
            "16",
            priorityClassName="gang-high",
            schedulerName="phalanx-scheduler",
            labels={"scheduling.phalanx.dev/pod-group": "gang"},
        )
        api.create(f"/api/v1/namespaces/{namespace}/pods", member)
    return namespace


def register(api: Api, work: Path, port: int) -> tuple[Path, Path]:
    """The APIService and its Service for a scheduler on `localhost:port`; the serving pair it names (in `work`)."""
    ca = generate_ca()
    pair = issue_serving_certificate(ca, SERVICE, NAMESPACE, extra_sans=("127.0.0.1",))
    cert, key = work / "tls.crt", work / "tls.key"
    cert.write_bytes(pair.cert_pem)
    key.write_bytes(pair.key_pem)
    api.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    service = {"type": "ExternalName", "externalName": "localhost", "ports": [{"name": "https", "port": 443}]}
    api.apply(
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": SERVICE, "namespace": NAMESPACE}, "spec": service}
    )
    api.apply(
        {
            "apiVersion": "apiregistration.k8s.io/v1",
            "kind": "APIService",
            "metadata": {"name": "v1alpha1.explain.phalanx.dev"},
            "spec": {
                "group": "explain.phalanx.dev",
                "version": "v1alpha1",
                "groupPriorityMinimum": 1000,
                "versionPriority": 100,
                "service": {"name": SERVICE, "namespace": NAMESPACE, "port": port},
                "caBundle": base64.b64encode(ca.cert_pem).decode(),
            },
        }
    )
    return cert, key


def pause(api: Api) -> None:
    """The scheduler's Lease, held by an identity that never renews it: a scheduler started now stays a standby."""
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    lease = {"holderIdentity": PAUSED, "leaseDurationSeconds": 36000, "acquireTime": now, "renewTime": now}
    api.apply(
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": "phalanx-scheduler", "namespace": NAMESPACE},
            "spec": lease,
        }
    )


def available(api: Api) -> bool:
    found = api.get("/apis/apiregistration.k8s.io/v1/apiservices/v1alpha1.explain.phalanx.dev") or {}
    return any(
        c["type"] == "Available" and c["status"] == "True" for c in (found.get("status") or {}).get("conditions", [])
    )


def timed(args: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """Wall and CPU seconds of one run of the plugin, and its first output line."""
    before = os.times()
    started = time.perf_counter()
    done = subprocess.run([str(PLUGIN), *args], capture_output=True, text=True, env=env, check=False)
    wall = time.perf_counter() - started
    after = os.times()
    if done.returncode != 0:
        raise RuntimeError(f"kubectl-phalanx {' '.join(args)}: {done.stderr}")
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    return wall, cpu, (done.stdout.splitlines() or [""])[0]


def served_lines(log: Path, since: int) -> list[dict[str, Any]]:
    lines = log.read_text().splitlines()[since:]
    return [
        r for line in lines if line.startswith("{") and (r := json.loads(line)).get("event") == "explanation served"
    ]


# ------------------------------------------------------------------------------------------------------ --drain


RATE = 10.0
"""`--drain`: explanation requests a second in B (issue 41: the drain must keep 0.95x of its rate beside them)."""
GANGS = 10
GANG_SIZE = 4
"""`--drain`: GANGS of the drain's pods' gangs (minCount GANG_SIZE), spread through its pods: PodGroups to explain."""
WORKERS = 32
MIX = ("explain pod", "explain podgroup", "status -A")
TARGET = 0.95


@dataclass(frozen=True, slots=True)
class Asked:
    what: str
    code: int
    """The HTTP status; 0 when no answer came (the connection failed)."""
    due: float
    """When it was to be sent (`time.perf_counter()`): open loop, one every 1 / rate seconds from the start."""
    seconds: float
    """From `due` (a request waiting for a free thread is late) to its answer read."""


class Asker:
    """Open-loop explanation requests, `rate` a second, through kube-apiserver to the scheduler's explain API, as
    `kubectl phalanx` sends them (`phalanx/kubectl/served.py`'s paths, its user agent, the admin's token), in turn
    MIX: a pod of the drain still pending (as the bench's watch saw it; any, once few are), a PodGroup with a
    member still pending (any, once none has), and every namespace's pending work. A 429 is counted, not retried;
    the answer's body is read and not decoded, so the bench spends little beside the drain."""

    def __init__(self, api: bench.Api, namespace: str, pods: int, watch: bench.PodWatch, rate: float) -> None:
        self.api = api
        self.namespace = namespace
        self.pods = pods
        self.stride = pods // GANGS
        self.watch = watch
        self.rate = rate
        self.headers = {**api.headers, "User-Agent": USER_AGENT}
        self.asked: list[Asked] = []
        self._random = random.Random(41)
        self._local = threading.local()
        self._connections: list[http.client.HTTPSConnection] = []
        self._pool = ThreadPoolExecutor(WORKERS)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._tick, daemon=True)
        self._thread.start()

    def _pending(self, name: str) -> bool:
        state = self.watch.pods.get(name)
        return state is None or state.bound_at is None

    def _path(self, k: int) -> str:
        what = MIX[k % len(MIX)]
        if what == "status -A":
            return f"{PREFIX}/pendingwork"
        if what == "explain pod":
            name = f"p-{self._random.randrange(self.pods)}"
            for _ in range(50):
                if self._pending(name):
                    break
                name = f"p-{self._random.randrange(self.pods)}"
            kind = "pod"
        else:
            members = {g: [f"p-{g * self.stride + m}" for m in range(GANG_SIZE)] for g in range(GANGS)}
            waiting = [g for g, names in members.items() if any(self._pending(n) for n in names)] or list(members)
            name, kind = f"gang-{waiting[k // len(MIX) % len(waiting)]}", "podgroup"
        return f"{PREFIX}/namespaces/{self.namespace}/{RESOURCES[kind]}/{name}/explanation"

    def _tick(self) -> None:
        started = time.perf_counter()
        k = 0
        while not self._stop.wait(max(0.0, started + k / self.rate - time.perf_counter())):
            self._pool.submit(self._ask, MIX[k % len(MIX)], self._path(k), started + k / self.rate)
            k += 1

    def _ask(self, what: str, path: str, due: float) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = self.api.connection(timeout=60)
            self._connections.append(conn)
        try:
            conn.request("GET", path, headers=self.headers)
            answer = conn.getresponse()
            answer.read()
            code = answer.status
        except (OSError, http.client.HTTPException):
            conn.close()
            self._local.conn = None
            code = 0
        self.asked.append(Asked(what, code, due, time.perf_counter() - due))

    def stop(self) -> list[Asked]:
        """Send no more; every request sent, answered."""
        self._stop.set()
        self._thread.join()
        self._pool.shutdown(wait=True)
        for conn in self._connections:
            conn.close()
        return self.asked


def keep_available(api: Api, log: Path, done: threading.Event) -> None:
    """Until the scheduler's caches are synced and kube-apiserver calls the APIService Available: touch it every
    second, so its availability is checked again now rather than at its next resync (the scheduler before this one
    is gone). A and B alike."""
    while not done.is_set():
        if "caches synced" in log.read_text(errors="replace") and available(api):
            return
        api.patch(
            "/apis/apiregistration.k8s.io/v1/apiservices/v1alpha1.explain.phalanx.dev",
            {"metadata": {"annotations": {"bench/touched": str(time.monotonic())}}},
        )
        done.wait(1.0)


class ServingRun(bench.PhalanxRun):
    """`bench.PhalanxRun` with the chart's leader election (it leads: nothing holds the Lease), serving the explain
    API with the chart's limits (the CLI's defaults: 1 at once, 2 a second, a burst of 5, 2 % of a core while it
    schedules), logging JSON."""

    elected = True
    port = 0
    cert = Path()
    key = Path()

    def command(self, plane: bench.ControlPlane) -> list[str]:
        served = ["--explain-bind", f"127.0.0.1:{self.port}"]
        return [
            *super().command(plane),
            *served,
            "--tls-cert-file",
            str(self.cert),
            "--tls-private-key-file",
            str(self.key),
        ]

    def env(self) -> dict[str, str]:
        return {**super().env(), "PHALANX_LOG_FORMAT": "json"}


@dataclass
class Drained:
    kind: str
    started: float
    """When the scheduler was started (`time.perf_counter()`)."""
    result: bench.Result
    window: str
    asked: list[Asked]
    served: list[dict[str, Any]]
    """The scheduler's `explanation served` lines (the answers it computed: not its 429s)."""
    others: dict[str, float]


def gang_of(i: int, stride: int) -> str | None:
    """The gang of the drain's pod p-i: the first GANG_SIZE pods of each `stride`, GANGS gangs."""
    return f"gang-{i // stride}" if i % stride < GANG_SIZE and i // stride < GANGS else None


def drain_pod(i: int, namespace: str, stride: int) -> dict[str, Any]:
    made = bench.workload_pod(i, namespace, bench.PHALANX_SCHEDULER, 0.0)
    gang = gang_of(i, stride)
    if gang is not None:
        made["metadata"]["labels"] = {bench.GROUP_LABEL: gang}
    return made


def served_drain(plane: bench.ControlPlane, api: Api, kind: str, label: str, args: argparse.Namespace) -> Drained:
    """One drain (`real_apiserver.py`'s: pods/s from the scheduler's start to the last Binding the watch saw, the
    bench as kubelet), GANGS of its pods in gangs; in B, `args.rate` explanations a second from the start to the
    end."""
    pods = args.pods
    namespace = bench.new_namespace(plane, label)
    for g in range(GANGS):
        bench.phalanx_gang(plane.api, namespace, f"gang-{g}", GANG_SIZE, "fill-0", 0)
    creating = time.perf_counter()
    stride = pods // GANGS
    plane.api.create_many("/api/v1/namespaces/{ns}/pods", (drain_pod(i, namespace, stride) for i in range(pods)))
    created = pods / (time.perf_counter() - creating)
    watch = bench.PodWatch(plane.api, namespace, bench.list_version(plane.api, namespace), start_pods=True)
    meanwhile = bench.Meanwhile(plane)
    run = ServingRun(plane, label)
    run.measuring()
    asker = Asker(plane.api, namespace, pods, watch, args.rate) if kind == "B" else None
    done = threading.Event()
    log = Path(run.log.name)
    threading.Thread(target=keep_available, args=(api, log, done), daemon=True).start()
    bound = watch.wait_bound(pods, timeout=3600, stall=args.stall)
    end = time.perf_counter()
    asked = asker.stop() if asker is not None else []
    done.set()
    others, _ = meanwhile.since()
    window = meanwhile.window()
    unbound = "" if bound else bench.unbound_note(plane.api, watch, namespace, pods)
    cpu, hwm = run.stop()
    watch.stop()
    bench.cleanup(plane, namespace)
    plane.api.request("DELETE", f"/apis/scheduling.phalanx.dev/v1alpha1/namespaces/{namespace}/podgroups")
    seconds = end - run.started
    counts = bench.timeline(watch)
    first = min((s.bound_at for s in watch.pods.values() if s.bound_at is not None), default=None)
    began = "" if first is None else f"first bind {first - run.started:.1f} s after start"
    result = bench.Result.throughput(
        "drain",
        f"{run.name} {kind}",
        args.nodes,
        pods,
        seconds,
        bound,
        cpu,
        hwm,
        created_per_second=created,
        others_cpu_seconds=others,
        first_bind_seconds=None if first is None else first - run.started,
        timeline=counts,
        note="; ".join(part for part in (window, began, bench.timeline_note(counts), unbound) if part),
    )
    return Drained(kind, run.started, result, window, asked, served_lines(log, 0), others)


def percentile(values: list[float], share: float) -> float | None:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] if ordered else None


def asked_note(run: Drained) -> str:
    """Requests sent, answers by code, the 200s' latency, and what the scheduler's logged answers cost it."""
    if run.kind != "B":
        return "-"
    codes = Counter(a.code for a in run.asked)
    ok = [a.seconds for a in run.asked if a.code == 200]
    others = ", ".join(f"{code or 'failed'} {n}" for code, n in sorted(codes.items()) if code not in (200, 429))
    shown = f"{len(run.asked)}: 200 {codes[200]}, 429 {codes[429]}" + (f", {others}" if others else "")
    latency = "/".join(bench.fmt(percentile(ok, q), 2) for q in (0.5, 0.95))
    first = min((a.due for a in run.asked if a.code == 200), default=None)
    began = "" if first is None else f" (the first 200 to one sent {first - run.started:.1f} s after the start)"
    cpu = sum(float(r["cpu"]) for r in run.served)
    return f"{shown}{began}; 200 p50/p95 {latency} s; answers' CPU {cpu:.1f} s ({len(run.served)} logged)"


def report(runs: list[Drained]) -> None:
    print()
    print(f"{'run':<5}{'when, load (1-min)':<52}{'pods/s':>8}{'CPU ms/pod':>12}{'RSS MiB':>9}  explanations")
    for r, run in enumerate(runs):
        res = run.result
        when = run.window.split(" (")[0]
        row = f"{run.kind}{r:<4}{when:<52}{bench.fmt(res.pods_per_second):>8}{bench.fmt(res.cpu_ms_per_pod, 2):>12}"
        print(f"{row}{bench.fmt(res.hwm_mib, 0):>9}  {asked_note(run)}")
    medians = {}
    for kind in "AB":
        mine = [run.result for run in runs if run.kind == kind]
        medians[kind] = bench.median([r.pods_per_second for r in mine])
        cpu = bench.median([r.cpu_ms_per_pod for r in mine])
        hwm = bench.median([r.hwm_mib for r in mine])
        print(f"{kind} median{'':<50}{bench.fmt(medians[kind]):>8}{bench.fmt(cpu, 2):>12}{bench.fmt(hwm, 0):>9}")
    a, b = medians["A"], medians["B"]
    met = "-" if a is None or b is None else ("met" if b / a >= TARGET else "not met")
    print(f"B/A pods/s (medians): {bench.ratio(b, a)}, target >= {TARGET}x: {met}")


def drains(args: argparse.Namespace) -> None:
    """`--drain`: A B B A on `real_apiserver.py`'s control plane, the scheduler leading and serving the API."""
    if args.py_spy is not None:
        args.py_spy.mkdir(parents=True, exist_ok=True)
        bench.SchedulerRun.profile_dir = args.py_spy
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    print(f"load before: {os.getloadavg()}", flush=True)
    plane = bench.ControlPlane(args.keep)
    print(f"control plane in {plane.dir}", flush=True)
    runs: list[Drained] = []
    try:
        plane.setup()
        plane.ensure_nodes(args.nodes)
        api = Api(plane.env["KUBE_APISERVER_URL"], plane.env["KUBE_ADMIN_TOKEN"], plane.env["KUBE_CA_FILE"])
        ServingRun.port = free_port()
        ServingRun.cert, ServingRun.key = register(api, plane.dir, ServingRun.port)
        for r, kind in enumerate(bench.order(args.rounds, "AB")):
            run = served_drain(plane, api, kind, f"drain-{kind.lower()}{r}", args)
            runs.append(run)
            res = run.result
            rate = f"{bench.fmt(res.pods_per_second)} pods/s, {res.seconds:.1f} s"
            cpu = f"CPU {res.cpu_seconds:.1f} s ({bench.fmt(res.cpu_ms_per_pod, 2)} ms/pod)"
            others = ", ".join(f"{name} {used:.1f}" for name, used in run.others.items())
            print(
                f"  {kind}{r}: {rate}, {cpu}, peak RSS {res.hwm_mib:.0f} MiB; meanwhile CPU s: {others}; {res.note}; "
                f"explanations: {asked_note(run)}",
                flush=True,
            )
    finally:
        bench.stop_all(plane)
    print(f"load after: {os.getloadavg()}")
    report(runs)


def standby(args: argparse.Namespace) -> None:
    """The commands timed against a paused standby's API, then computed by themselves (the default mode)."""
    work = Path(tempfile.mkdtemp(prefix="explain-api-"))
    plane = ControlPlane(work / "kube").start()
    scheduler: subprocess.Popen[bytes] | None = None
    try:
        api = plane.api()
        started = time.monotonic()
        namespace = build(api, plane, args.nodes, args.pods)
        print(f"cluster built in {time.monotonic() - started:.0f} s: {args.nodes} nodes, {args.pods} pods", flush=True)
        port = free_port()
        cert, key = register(api, work, port)
        pause(api)
        config = work / "config.yaml"
        config.write_text(
            "apiVersion: scheduling.phalanx.dev/v1alpha1\nkind: SchedulerConfiguration\n"
            f"leaderElection: {{leaderElect: true, resourceNamespace: {NAMESPACE}}}\n"
        )
        log = work / "scheduler.log"
        command = [
            str(PHALANX), "scheduler", "--kubeconfig", str(plane.admin_kubeconfig), "--config", str(config),
            "--metrics-bind", "127.0.0.1:0", "--identity", "bench", "--explain-bind", f"127.0.0.1:{port}",
            "--tls-cert-file", str(cert), "--tls-private-key-file", str(key),
            "--explain-qps", "100", "--explain-burst", "100",
        ]  # fmt: skip
        env = {**os.environ, "PHALANX_LOG_FORMAT": "json", "KUBECONFIG": str(plane.admin_kubeconfig)}
        with log.open("wb") as out:
            scheduler = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + 600
        while "caches synced" not in log.read_text() or not available(api):
            assert scheduler.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, "the scheduler never served the API"
            api.patch(
                "/apis/apiregistration.k8s.io/v1/apiservices/v1alpha1.explain.phalanx.dev",
                {"metadata": {"annotations": {"bench/touched": str(time.monotonic())}}},
            )
            time.sleep(1)
        default = work / "default.yaml"
        default.write_text("apiVersion: scheduling.phalanx.dev/v1alpha1\nkind: SchedulerConfiguration\n")
        commands = {
            "explain podgroup": ["explain", "podgroup", "gang", "-n", namespace],
            "status -A": ["status", "-A"],
        }
        print(f"{'command':<34}{'wall s (median; runs)':<44}{'CPU s':<8}scheduler: s / read / dry run / encode / CPU")
        for label, plugin_args in commands.items():
            for how, extra in (("served", []), ("computed here", ["--config", str(default)])):
                mark = len(log.read_text().splitlines())
                runs = [timed([*plugin_args, *extra], env) for _ in range(args.runs)]
                walls = [w for w, _, _ in runs]
                cpu = statistics.median(c for _, c, _ in runs)
                figures = ""
                if how == "served":
                    served = served_lines(log, mark)
                    keys = ("seconds", "read", "compute", "encode", "cpu")
                    figures = " / ".join(f"{statistics.median(r[k] for r in served):.3f}" for k in keys)
                shown = f"{statistics.median(walls):.2f} ({', '.join(f'{w:.2f}' for w in walls)})"
                print(f"{label + ', ' + how:<34}{shown:<44}{cpu:<8.2f}{figures}", flush=True)
        print(f"first line: {runs[-1][2]!r}; load average {os.getloadavg()[0]:.1f}")
    finally:
        if scheduler is not None:
            scheduler.terminate()
            scheduler.wait(timeout=30)
        plane.stop()
        if not args.keep:
            subprocess.run(["rm", "-rf", str(work)], check=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=10000)
    parser.add_argument("--runs", type=int, default=5, help="runs of each command (the default mode)")
    parser.add_argument("--keep", action="store_true", help="keep the control plane's folder")
    parser.add_argument("--drain", action="store_true", help="the drain with and without explanations beside it")
    parser.add_argument("--rounds", type=int, default=2, help="--drain: A B, then B A, ...: 2 gives A B B A")
    parser.add_argument("--rate", type=float, default=RATE, help="--drain: explanation requests a second in B")
    parser.add_argument(
        "--stall", type=float, default=bench.STALL, help="--drain: seconds without a Binding to give up"
    )
    parser.add_argument("--py-spy", type=Path, help="--drain: sample the scheduler of each run with py-spy, into DIR")
    args = parser.parse_args()
    if args.drain:
        drains(args)
    else:
        standby(args)


if __name__ == "__main__":
    main()
