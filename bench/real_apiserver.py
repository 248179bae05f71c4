"""Phalanx against kube-scheduler 1.36.2 on the same real kube-apiserver, in one run (issue 12).

The bench starts `../shared/kube` in a temporary folder (no controller manager; `KUBE_OWNER_PID` is
this process, so nothing outlives it), applies our CRDs, creates fake nodes, and runs each workload
for kube-scheduler (K) and for the real `phalanx scheduler` CLI process (P), each as the API server's
priority and fairness treats it in a cluster (both in `workload-high`: `ControlPlane.phalanx_identity`),
alternating K P P K (`--rounds 2`, the default) so slow drift of the machine hits both.
Each scheduler process is started for one run and stopped after it; its CPU (user + system) comes
from /proc/<pid>/stat and its peak RSS from VmHWM in /proc/<pid>/status.

Workloads (`--workloads`, default preempt, drain and stream):

- `drain`: `--pods` pending pods of 100m / 128Mi on `--nodes` nodes of 32 CPU; the scheduler starts
  after every pod exists. pods/s = pods / (scheduler start -> last Binding seen by the bench's watch);
  CPU is the scheduler's from its start to that moment.
  Its note gives the first Binding's time after the scheduler's start, when every pod was Running (the bench's
  kubelet stand-in falls behind a fast scheduler, leaving status writes for after the last Binding: this time
  is the same work for every scheduler), and (as `stream`'s) the Bindings the bench saw in each 30 s from the
  first (`timeline`, whole windows only), with the lowest window against the median: issue 44 wants none below
  0.8x.
- `stream`: the scheduler runs (a probe pod was bound, so its caches are synced), then the bench
  creates `--pods` pods with 8 client threads. pods/s = pods / (first create -> last Binding seen).
  In both, the bench plays the nodes' kubelets: each bound pod becomes Running and Ready (one status
  patch, as `../shared/kube/kubelet.py` sends), so both schedulers see a real cluster's status churn.
  Each drain, stream and backlog run notes when its measured phase ran (the machine's clock) and the machine's
  1-minute load average over it, sampled every 15 s: on a shared machine, the other work each round met.
- `failover` (issue 44, Phalanx only): `--pods` pending pods as in `drain`, a Phalanx leader binding them and a
  standby synced beside it, both with the chart's leader election. Once a tenth are bound the leader gets
  SIGTERM (it hands the Lease back); the note gives the time from its exit, and from the moment the standby
  logged that it leads, to the first Binding the new leader made.
- `--constrained SHARE` (issue 38): SHARE of the drained, streamed and backlog-streamed pods (e.g. 0.3) carry a
  constraint, in replica sets of 10 pods (label `app: set-N`, every pod of the run labelled so): alternately,
  a set with a required pod anti-affinity on `kubernetes.io/hostname` against its own label (its 10 pods on 10
  nodes), or one with a topologySpreadConstraint (maxSkew 1, DoNotSchedule) over `topology.kubernetes.io/zone`,
  which the nodes then carry (node i in `zone-(i % 10)`), so each such set puts one pod in each zone. Both
  schedulers get identical pods. Each run checks every set at the end (distinct nodes; zone skew <= 1) and says
  how many broke. A run in which no pod binds for `--stall` seconds ends there and names up to three unbound
  pods with their PodScheduled message.
- `backlog` (issue 23): `stream` with a backlog that never fits. Before the scheduler starts, 10,000 pods of
  100 CPU (no node has more than 32) and 1,000 gangs of minCount 4 with 2 members each exist (`--backlog
  PODS:GANGS`; our PodGroup for Phalanx, the native v1alpha2 one and `spec.schedulingGroup` for kube-scheduler,
  as in `preempt`). Once the probe is bound, the watch has seen PodScheduled=False on as many pods
  as never fit (their writes reached the server: on a loaded machine, a scheduler waiting on the server looks
  idle), and the scheduler is idle (under 0.05 CPU-s in a second: the rest of its writes are sent), `--pods`
  pods stream in as in `stream`. For Phalanx the note gives the retries made and avoided while streaming, and its
  passes meanwhile (how many, their mean wall time; `stream` reports them too), read from its /metrics (the port its
  log announces).
- `preempt`: the 64-pod gang preemption (docs/DESIGN.md, Performance). Every node (32 CPU) is full with
  10 pods of 3.2 CPU, created bound, node i's pods in priority class i % 5; a gang of GANG members
  of 16 CPU at a higher priority arrives (`--preemption NODES:GANG`, default 100:16, 500:64 and
  1000:64). The optimal decision evicts 5 pods on each of GANG lowest-class nodes, all of class 0.
  Measured from the moment the last member's create returned:
  the decision (the first victim marked or deleted, or a member nominated, whichever the watch
  sees first) and all members bound. Victims and their classes come from the watch (every pod
  marked for disruption or deleted), so both schedulers' choices are checked the same way.
  The victims keep a 30 s grace period; the bench acts as their
  kubelet for both schedulers alike: it confirms each deletion at once (DELETE with
  gracePeriodSeconds=0 and a uid precondition), as if the containers exited on SIGTERM.
  Phalanx gets our PodGroup (gang minCount, members labelled, no scheduling gate: without the webhook
  nothing adds one, and GangReadiness holds the members until minCount exist);
  kube-scheduler gets the native scheduling.k8s.io/v1alpha2 PodGroup and `spec.schedulingGroup`.
  kube-scheduler needs 235 s at 500 nodes and 870-1,067 s at 1,000 nodes for this decision, so by
  default it runs only at the small scale of `--kube-preemption` (100 nodes, a 16-pod gang) and the
  table quotes its published figures for the large ones; `--kube-preemption 100:16,500:64,1000:64`
  runs it everywhere (each run is cut at `--kube-preemption-timeout`).
  With `--racks N` (issue 40, Phalanx only) the nodes are in racks of N consecutive nodes (RACK_LABEL) and the
  gang must stay in one (`schedulingConstraints.topology`); the note names the racks its members landed in.

- `preempt-gangs` (issue 23, Phalanx only): `--gangs` gangs (default 4) of GANG members created together
  at `--gangs-preemption NODES:GANG` (default 1000:64), each at its own priority above the fill, over the
  same full cluster, so they compete for the same lowest-class nodes. Reported per gang: its decision
  (first member nominated or victim marked naming it), its members bound, its victims, and its "preemption
  decided" lines in the scheduler's log (once each); and the victims whose DisruptionTarget messages named
  two preemptors (none: no victim taken twice).
- `explain` (issue 22): `kubectl phalanx explain|status` on a cluster of `--nodes` full nodes (32 CPU) and
  `--pods` running pods spread over them (created bound, priority classes fill-0..4 by node, as `preempt`
  fills them), plus pending work and no scheduler running: the 64-pod gang of `preempt` (16 CPU members,
  its victims to be found among all of them), a gang waiting for members and a gated pod. Each command runs
  `--explain-runs` times as a user runs it (the `kubectl-phalanx` executable, admin kubeconfig, the chart's
  scheduler ConfigMap in place), timed end to end: process start, every LIST, decoding, the dry run and the
  output. CPU is the command's (user + system, its children's rusage) and kube-apiserver's over the same time.
- `devices` (issue 39, DRA structured parameters): `drain`'s shape, so that the bench's client, which makes two
  objects a pod, is done before the measured phase and the rate is the scheduler's. Each of the `--nodes` nodes
  publishes a ResourceSlice of `--devices-per-node` GPUs (default 8), which one DeviceClass selects by a CEL
  expression on their driver (`device_claims.py`); then `--pods` pods of 100m / 128Mi exist, each using a
  ResourceClaim of its own for one device of the class, made before it and named by `resourceClaimName` (no
  controller manager runs to make claims from templates). `--pods` must fit the devices. pods/s and CPU as in
  `drain`. Then the bench checks the claims the API server holds against where its watch saw each pod bound: each
  allocated exactly one device, reserved for its pod alone, of the pod's node (its pool, its node selector), and no
  device in two claims. What is wrong is reported as FAILED (in the run's note, after the tables, and in the exit
  status, 1).
- `devices-preempt` (issue 39): `preempt` with devices, at `--devices-preemption NODES:GANG` (default 1000:64).
  Every device of every node is held: pod fill-n-k (100m), created bound to node-n in class fill-(n % 5), uses claim
  fill-n-k, to which the bench writes node-n's gpu-k as a scheduler would (allocation and reservedFor). The gang's
  GANG members (100m, at gang-high, our PodGroup or the native one as in `preempt`) each use a one-device claim of
  their own. Measured and checked as in `preempt`; the bench also plays the resourceclaim controller for both
  schedulers (a victim's claim is deallocated once the victim is gone), and checks each bound member's claim as in
  `devices` and that it holds a device a victim held. kube-scheduler 1.36 does not preempt for devices; it runs at
  the scales of `--kube-preemption` only, each run cut at `--kube-preemption-timeout`.

Run (about 20 minutes on 2 shared cores; `--before DIR` adds half as much):

    .venv/bin/python bench/real_apiserver.py
    .venv/bin/python bench/real_apiserver.py --nodes 5000 --pods 50000 --workloads drain --rounds 1
    .venv/bin/python bench/real_apiserver.py --nodes 5000 --pods 50000 --workloads explain
    .venv/bin/python bench/real_apiserver.py --workloads stream --nodes 5000 --pods 30000 --constrained 0.3
    .venv/bin/python bench/real_apiserver.py --workloads devices,devices-preempt --nodes 1000 --pods 8000 \
        --kube-preemption 1000:64 --kube-preemption-timeout 120

`--json FILE` also writes every measurement. Not part of `make test`.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import http.client
import json
import os
import re
import shutil
import signal
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import device_claims

ROOT = Path(__file__).resolve().parents[1]
KUBE = (ROOT / ".." / "shared" / "kube").resolve()
PLUGIN = ROOT / ".venv" / "bin" / "kubectl-phalanx"
GATES = "GenericWorkload=true,GangScheduling=true,WorkloadAwarePreemption=true"
KUBE_SCHEDULER_ARGS = ["--kube-api-qps=5000", "--kube-api-burst=5000"]
PHALANX_SCHEDULER = "phalanx-scheduler"
KUBE_SCHEDULER = "default-scheduler"
GROUP_LABEL = "scheduling.phalanx.dev/pod-group"
HOSTNAME_LABEL = "kubernetes.io/hostname"
ZONE_LABEL = "topology.kubernetes.io/zone"
ZONES = 10
RACK_LABEL = "topology.example.com/rack"
"""`--racks N`: node i carries RACK_LABEL rack-(i // N), and `preempt`'s gang must stay in one rack (KEP-5732)."""
"""`--constrained`: the nodes' zones (node i in zone-(i % ZONES)), over which a spread set puts one pod each."""
REPLICA_SET = 10
"""`--constrained`: pods a replica set (p-0 .. p-9 are set 0, ...); a constrained set spreads over this many
nodes (anti-affinity) or zones (spread)."""
NODE_CPU = 32
CLASSES = 5
FILL_PER_NODE = 10
PUBLISHED_KUBE_DECISION = {500: "235 s", 1000: "870-1,067 s"}
"""kube-scheduler 1.36 (KEP-5710 gates) on this machine class, for the 64-pod gang (docs/DESIGN.md, Performance)."""


# --------------------------------------------------------------------------------------------- the API


WRITES = ("POST", "PUT", "PATCH", "DELETE", "APPLY")
MERGE_PATCH = "application/merge-patch+json"


class ApiError(Exception):
    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"{status}: {body[:300]}")
        self.status = status


class Api:
    """A tiny HTTPS client with one kept-alive connection per thread (the bench's own, not the schedulers')."""

    def __init__(self, url: str, token: str, ca_file: str) -> None:
        parsed = urllib.parse.urlparse(url)
        self.host, self.port = parsed.hostname or "127.0.0.1", parsed.port or 443
        self.headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
        self.context = ssl.create_default_context(cafile=ca_file)
        self.local = threading.local()

    def connection(self, timeout: float | None = 60) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection(self.host, self.port, context=self.context, timeout=timeout)

    def request(self, method: str, path: str, body: Any = None, content_type: str = "application/json") -> Any:
        for attempt in range(3):
            conn = getattr(self.local, "conn", None)
            if conn is None:
                conn = self.local.conn = self.connection()
            headers = dict(self.headers)
            data = None
            if body is not None:
                data = json.dumps(body).encode()
                headers["Content-Type"] = content_type
            try:
                conn.request(method, path, body=data, headers=headers)
                resp = conn.getresponse()
                text = resp.read()
            except (OSError, http.client.HTTPException):
                conn.close()
                self.local.conn = None
                if attempt == 2:
                    raise
                continue
            if resp.status >= 300:
                raise ApiError(resp.status, text.decode(errors="replace"))
            return json.loads(text) if text else {}
        raise AssertionError("unreachable")

    def raw(self, path: str, accept: str, timeout: float = 60) -> bytes:
        """A GET's body as the server sent it (`/metrics`, a CPU profile), on a connection of its own."""
        conn = self.connection(timeout)
        try:
            conn.request("GET", path, headers={**self.headers, "Accept": accept})
            resp = conn.getresponse()
            body = resp.read()
        finally:
            conn.close()
        if resp.status >= 300:
            raise ApiError(resp.status, body.decode(errors="replace"))
        return body

    def text(self, path: str) -> str:
        """A GET answered in plain text (`/metrics`)."""
        return self.raw(path, "text/plain").decode(errors="replace")

    def create_many(self, path: str, bodies: Iterable[dict[str, Any]], workers: int = 8) -> None:
        def one(body: dict[str, Any]) -> None:
            try:
                self.request(
                    "POST", path if "{ns}" not in path else path.format(ns=body["metadata"]["namespace"]), body
                )
            except ApiError as e:
                if e.status != 409:
                    raise

        with ThreadPoolExecutor(workers) as pool:
            for future in [pool.submit(one, b) for b in bodies]:
                future.result()


# ------------------------------------------------------------------------------------------ the control plane


class ControlPlane:
    def __init__(self, keep: bool) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="phalanx-bench-kube-"))
        self.keep = keep
        env = {**os.environ, "KUBE_CONTROLLER_MANAGER": "0", "KUBE_SCHEDULER": "0", "KUBE_OWNER_PID": str(os.getpid())}
        subprocess.run([str(KUBE / "up.sh"), str(self.dir)], check=True, env=env, capture_output=True)
        self.env = json.loads((self.dir / "env.json").read_text())
        self.api = Api(self.env["KUBE_APISERVER_URL"], self.env["KUBE_ADMIN_TOKEN"], self.env["KUBE_CA_FILE"])
        self.bin = Path(self.env["KUBE_BIN"])
        self.nodes = 0
        self.zones = 0
        """Set before the nodes are made (`--constrained`): each node carries ZONE_LABEL, zone-(i % zones)."""
        self.rack = 0
        """Set before the nodes are made (`--racks`): each node carries RACK_LABEL, rack-(i // rack)."""
        self.devices = (0, 0)
        """`ensure_devices`: the nodes that publish a ResourceSlice, and the devices in each."""
        self.profile_dir: Path | None = None
        """Set by `--apiserver-profile DIR`: each drain takes a CPU profile of kube-apiserver (`ApiserverProfile`)."""

    def stop(self) -> None:
        subprocess.run([str(KUBE / "down.sh"), str(self.dir)], check=False, capture_output=True)
        if not self.keep:
            shutil.rmtree(self.dir, ignore_errors=True)

    def kubectl(self, *args: str) -> None:
        env = {**os.environ, "KUBECONFIG": str(self.dir / "kubeconfig")}
        subprocess.run([str(self.bin / "kubectl"), *args], check=True, env=env, capture_output=True)

    def apiserver_pid(self) -> int:
        return int((self.dir / "run" / "kube-apiserver.pid").read_text())

    def cpu_seconds(self) -> dict[str, float]:
        """CPU used so far by kube-apiserver, etcd and this bench process (user + system)."""
        pids = {name: int((self.dir / "run" / f"{name}.pid").read_text()) for name in ("kube-apiserver", "etcd")}
        mine = os.times()
        return {**{name: proc_cpu_seconds(pid) for name, pid in pids.items()}, "bench": mine.user + mine.system}

    def served(self) -> Counter[str]:
        """The API server's writes so far by verb and resource, and the watch events it sent by resource (each
        watcher's copy counted): what a scheduler asks of it, from its `/metrics`."""
        served: Counter[str] = Counter()
        for line in self.api.text("/metrics").splitlines():
            if line.startswith(("apiserver_request_total{", "apiserver_watch_events_total{")):
                labels, _, value = line.rpartition(" ")
                found = dict(re.findall(r'(\w+)="([^"]*)"', labels))
                named = (found.get("resource") or found.get("kind"), found.get("subresource"))
                resource = "/".join(part for part in named if part)
                verb = found.get("verb", "WATCH EVENT")
                if verb in WRITES or verb == "WATCH EVENT":
                    served[f"{verb} {resource}"] += int(float(value))
        return served

    def ensure_nodes(self, count: int) -> None:
        """Nodes node-0 .. node-(count-1): created, or deleted from the top, so exactly `count` exist."""
        if count > self.nodes:
            self.api.create_many(
                "/api/v1/nodes",
                (
                    node(
                        f"node-{i}",
                        f"zone-{i % self.zones}" if self.zones else None,
                        f"rack-{i // self.rack}" if self.rack else None,
                    )
                    for i in range(self.nodes, count)
                ),
                workers=16,
            )
        for i in range(count, self.nodes):
            self.api.request("DELETE", f"/api/v1/nodes/node-{i}")
        self.nodes = count

    def ensure_devices(self, nodes: int, per_node: int) -> None:
        """The DeviceClass, and a ResourceSlice of `per_node` devices on each of node-0 .. node-(nodes-1) alone
        (`device_claims`); (0, 0) for none."""
        if (nodes, per_node) == self.devices:
            return
        if self.devices != (0, 0):
            self.api.request("DELETE", device_claims.SLICES)
        if self.devices == (0, 0) and nodes:
            with contextlib.suppress(ApiError):  # made by an earlier workload of this control plane
                self.api.request("POST", device_claims.CLASSES, device_claims.the_class())
        if nodes:
            self.api.create_many(
                device_claims.SLICES,
                (device_claims.node_slice(f"node-{i}", per_node) for i in range(nodes)),
                workers=16,
            )
        self.devices = (nodes, per_node)

    def setup(self) -> None:
        self.kubectl("apply", "--server-side", "-f", str(ROOT / "charts" / "phalanx" / "crds"))
        self.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd/podgroups.scheduling.phalanx.dev")
        for level in range(CLASSES):
            self.api.request(
                "POST", "/apis/scheduling.k8s.io/v1/priorityclasses", priority_class(f"fill-{level}", level * 1000)
            )
        self.api.request("POST", "/apis/scheduling.k8s.io/v1/priorityclasses", priority_class("gang-high", 100_000))
        self.phalanx_identity()

    def phalanx_identity(self) -> None:
        """`phalanx.kubeconfig`: Phalanx's ServiceAccount, as the chart runs it, with the chart's FlowSchema.

        API Priority and Fairness classifies requests by who makes them. The admin token is `exempt` (never queued
        or refused), while kube-scheduler's requests go to `workload-high`, where a burst of Bindings is queued
        or refused with 429. Phalanx runs as a ServiceAccount (with cluster-admin's rights: the chart's RBAC is
        not what is measured) that the chart's FlowSchema (templates/scheduler-flowschema.yaml, the default
        values) puts in `workload-high` too: both schedulers get the same treatment from the server."""
        namespace, name = "phalanx-system", "phalanx-scheduler"
        self.api.request("POST", "/api/v1/namespaces", {"metadata": {"name": namespace}})
        self.api.request("POST", f"/api/v1/namespaces/{namespace}/serviceaccounts", {"metadata": {"name": name}})
        subject = {"kind": "ServiceAccount", "name": name, "namespace": namespace}
        binding = {
            "metadata": {"name": "phalanx-bench"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [subject],
        }
        self.api.request("POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", binding)
        every = {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "clusterScope": True, "namespaces": ["*"]}
        flow_schema = {
            "metadata": {"name": name},
            "spec": {
                "priorityLevelConfiguration": {"name": "workload-high"},
                "matchingPrecedence": 850,
                "distinguisherMethod": {"type": "ByNamespace"},
                "rules": [
                    {
                        "subjects": [
                            {"kind": "ServiceAccount", "serviceAccount": {"name": name, "namespace": namespace}}
                        ],
                        "resourceRules": [every],
                        "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
                    }
                ],
            },
        }
        self.api.request("POST", "/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas", flow_schema)
        token = self.api.request(
            "POST",
            f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
            {"spec": {"expirationSeconds": 86400}},
        )["status"]["token"]
        kubeconfig = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "bench",
                    "cluster": {
                        "server": self.env["KUBE_APISERVER_URL"],
                        "certificate-authority": self.env["KUBE_CA_FILE"],
                    },
                }
            ],
            "users": [{"name": name, "user": {"token": token}}],
            "contexts": [{"name": "bench", "context": {"cluster": "bench", "user": name}}],
            "current-context": "bench",
        }
        (self.dir / "phalanx.kubeconfig").write_text(json.dumps(kubeconfig))


def node(name: str, zone: str | None = None, rack: str | None = None) -> dict[str, Any]:
    resources = {"cpu": str(NODE_CPU), "memory": "128Gi", "pods": "110", "ephemeral-storage": "100Gi"}
    labels = {HOSTNAME_LABEL: name, "kubernetes.io/os": "linux"}
    labels |= ({ZONE_LABEL: zone} if zone else {}) | ({RACK_LABEL: rack} if rack else {})
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": {},
        "status": {
            "capacity": resources,
            "allocatable": resources,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "fake node"}],
        },
    }


def priority_class(name: str, value: int) -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value}


def pod(
    name: str,
    namespace: str,
    scheduler: str,
    cpu: str,
    memory: str,
    *,
    node_name: str | None = None,
    priority_class_name: str | None = None,
    labels: dict[str, str] | None = None,
    extra_spec: dict[str, Any] | None = None,
    claim: str | None = None,
) -> dict[str, Any]:
    """A pod; with `claim`, its container uses that ResourceClaim (`device_claims.claim_fields`)."""
    resources: dict[str, Any] = {"requests": {"cpu": cpu, "memory": memory}} if cpu else {}
    spec: dict[str, Any] = {
        "schedulerName": scheduler,
        "terminationGracePeriodSeconds": 30,
        "containers": [{"name": "c", "image": "registry.example/app:1", "resources": resources}],
    }
    if node_name:
        spec["nodeName"] = node_name
    if priority_class_name:
        spec["priorityClassName"] = priority_class_name
    if claim is not None:
        claims, used = device_claims.claim_fields(claim)
        spec.update(claims)
        resources.update(used)
    spec.update(extra_spec or {})
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "spec": spec,
    }


def constraint_of(i: int, share: float) -> str | None:
    """`--constrained`: the constraint of pod p-i: "anti" (required anti-affinity on the hostname against its
    own set), "spread" (maxSkew 1 over zones, DoNotSchedule) or None. Sets of REPLICA_SET pods; `share` of the
    sets, evenly placed (set s when floor((s + 1) * share) > floor(s * share)), alternately anti and spread."""
    s = i // REPLICA_SET
    before, after = int(s * share + 1e-9), int((s + 1) * share + 1e-9)
    if after == before:
        return None
    return "anti" if before % 2 == 0 else "spread"


def workload_pod(i: int, namespace: str, scheduler: str, share: float) -> dict[str, Any]:
    """Pod p-i of a drain, stream or backlog run: 100m / 128Mi; with `share` (`--constrained`) each pod is
    labelled with its replica set, and the constrained sets' pods carry their constraint against that label."""
    if not share:
        return pod(f"p-{i}", namespace, scheduler, "100m", "128Mi")
    labels = {"app": f"set-{i // REPLICA_SET}"}
    selector = {"matchLabels": labels}
    extra: dict[str, Any] = {}
    kind = constraint_of(i, share)
    if kind == "anti":
        term = {"labelSelector": selector, "topologyKey": HOSTNAME_LABEL}
        extra["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    elif kind == "spread":
        extra["topologySpreadConstraints"] = [
            {"maxSkew": 1, "topologyKey": ZONE_LABEL, "whenUnsatisfiable": "DoNotSchedule", "labelSelector": selector}
        ]
    return pod(f"p-{i}", namespace, scheduler, "100m", "128Mi", labels=labels, extra_spec=extra)


def constraint_note(watch: PodWatch, pods: int, share: float, zones: int) -> str:
    """`--constrained`: the constrained sets and how many the scheduler broke, from where the watch saw each
    pod bound: an anti set with two pods on one node, a spread set whose zone counts differ by more than 1."""
    if not share:
        return ""
    sets: dict[int, tuple[str, list[str]]] = {}
    with watch.cond:
        for i in range(pods):
            kind = constraint_of(i, share)
            state = watch.pods.get(f"p-{i}")
            if kind is not None and state is not None and state.node is not None:
                sets.setdefault(i // REPLICA_SET, (kind, []))[1].append(state.node)
    anti = [nodes for kind, nodes in sets.values() if kind == "anti"]
    spread = [nodes for kind, nodes in sets.values() if kind == "spread"]
    broken_anti = sum(1 for nodes in anti if len(set(nodes)) < len(nodes))

    def skew(nodes: list[str]) -> int:
        counts = Counter(int(n.rpartition("-")[2]) % zones for n in nodes)
        return max(counts.values()) - min(counts.get(z, 0) for z in range(zones))

    broken_spread = sum(1 for nodes in spread if skew(nodes) > 1)
    return (
        f"constrained {share:.0%}: {len(anti)} anti-affinity sets ({broken_anti} broken), "
        f"{len(spread)} spread sets ({broken_spread} broken)"
    )


def unbound_note(api: Api, watch: PodWatch, namespace: str, pods: int, limit: int = 3) -> str:
    """The pods p-i the watch never saw bound, and the PodScheduled message of the first `limit` of them."""
    with watch.cond:
        missing = [f"p-{i}" for i in range(pods) if (s := watch.pods.get(f"p-{i}")) is None or s.bound_at is None]
    if not missing:
        return ""
    told = []
    for name in missing[:limit]:
        try:
            obj = api.request("GET", f"/api/v1/namespaces/{namespace}/pods/{name}")
        except ApiError as e:
            told.append(f"{name}: {e}")
            continue
        conditions = obj.get("status", {}).get("conditions", [])
        found = next((c for c in conditions if c.get("type") == "PodScheduled"), None)
        told.append(
            f"{name} (node {obj.get('spec', {}).get('nodeName')!r}): PodScheduled "
            + (f"{found.get('status')} {found.get('reason')}: {found.get('message')}" if found else "absent")
        )
    return f"{len(missing)} never bound, e.g. " + " | ".join(told)


# ------------------------------------------------------------------------------------- the bench's pod watch


@dataclass
class PodState:
    priority: int = 0
    bound_at: float | None = None
    marked_at: float | None = None
    nominated_at: float | None = None
    gone_at: float | None = None
    told_at: float | None = None
    """When the watch first saw its PodScheduled=False condition (the scheduler said why it waits)."""
    node: str | None = None
    marked_by: set[str] = field(default_factory=set)
    """Preemptors named by the DisruptionTarget messages seen (`preempt-gangs`: no victim taken twice)."""


class PodWatch:
    """Watches one namespace's pods from a resourceVersion and stamps, on the bench's clock, when each
    pod was seen bound, nominated, marked for disruption (or being deleted), and gone.

    It also plays the nodes' kubelets, the same for both schedulers: a bound pod being deleted is
    removed at once (DELETE, gracePeriodSeconds=0, uid precondition), and with `start_pods` a bound
    pod becomes Running and Ready (the status patch `../shared/kube/kubelet.py` sends), so the
    schedulers see the status updates a real cluster's kubelets make. `on_gone` is called with each
    pod deleted (on a kubelet thread): the controllers a cluster runs on a deletion (`release_claims`).
    """

    def __init__(
        self,
        api: Api,
        namespace: str,
        resource_version: str,
        start_pods: bool = False,
        on_gone: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self.api = api
        self.namespace = namespace
        self.pods: dict[str, PodState] = {}
        self.bound = 0
        self.told = 0
        """Pods whose PodScheduled=False the watch saw."""
        self.cond = threading.Condition()
        self._start_pods = start_pods
        self._on_gone = on_gone
        self._kubelet = ThreadPoolExecutor(32)  # one kubelet per node acts in parallel in a real cluster
        self._finishing: set[str] = set()
        self._started: set[str] = set()
        self._stop = False
        self.rewatches = 0
        self.status_writes = 0
        self.failure: BaseException | None = None
        self._conn: http.client.HTTPSConnection | None = None
        self._thread = threading.Thread(target=self._run, args=(resource_version,), daemon=True)
        self._thread.start()

    def _run(self, resource_version: str) -> None:
        """Watch until stopped. The API server may end a watch at any time (it closes a watcher that reads
        too slowly, as this one can while 32 kubelet threads share its GIL): watch again from the last
        resourceVersion seen, so no event is lost and the run does not wait for pods it stopped seeing."""
        while not self._stop:
            try:
                resource_version = self._watch(resource_version)
            except BaseException as err:
                self.failure = err
                with self.cond:
                    self.cond.notify_all()
                raise
            if not self._stop:
                self.rewatches += 1
                print(f"  (watch of {self.namespace} ended by the server; again from {resource_version})", flush=True)

    def _watch(self, resource_version: str) -> str:
        path = (
            f"/api/v1/namespaces/{self.namespace}/pods?watch=1&allowWatchBookmarks=true"
            f"&resourceVersion={resource_version}&timeoutSeconds=3600"
        )
        conn = self._conn = self.api.connection(timeout=None)
        try:
            conn.request("GET", path, headers=self.api.headers)
            resp = conn.getresponse()
            while not self._stop:
                line = resp.readline()
                if not line:
                    break
                event = json.loads(line)
                if event["type"] == "ERROR":
                    raise RuntimeError(f"watch of {self.namespace} failed: {event['object']}")
                resource_version = event["object"]["metadata"].get("resourceVersion", resource_version)
                if event["type"] in ("ADDED", "MODIFIED", "DELETED"):
                    self._apply(event["type"], event["object"], time.perf_counter())
        except (OSError, ValueError, http.client.HTTPException):
            if not self._stop:
                raise
        finally:
            conn.close()
        return resource_version

    def _apply(self, kind: str, obj: dict[str, Any], now: float) -> None:
        meta, spec, status = obj["metadata"], obj.get("spec", {}), obj.get("status", {})
        name = meta["name"]
        with self.cond:
            state = self.pods.get(name)
            if state is None:
                state = self.pods[name] = PodState(priority=spec.get("priority") or 0)
            if kind == "DELETED":
                state.gone_at = state.gone_at or now
            if spec.get("nodeName") and state.bound_at is None:
                state.bound_at = now
                state.node = spec["nodeName"]
                self.bound += 1
            if status.get("nominatedNodeName") and state.nominated_at is None:
                state.nominated_at = now
            marked = meta.get("deletionTimestamp") or any(
                c.get("type") == "DisruptionTarget" and c.get("status") == "True" for c in status.get("conditions", [])
            )
            if (marked or kind == "DELETED") and state.marked_at is None:
                state.marked_at = now
            for c in status.get("conditions", []):
                if c.get("type") == "DisruptionTarget" and c.get("status") == "True":
                    state.marked_by.add(c.get("message", "").rpartition(" ")[2])
                if c.get("type") == "PodScheduled" and c.get("status") == "False" and state.told_at is None:
                    state.told_at = now
                    self.told += 1
            self.cond.notify_all()
        if kind == "DELETED" and self._on_gone is not None:
            self._kubelet.submit(self._on_gone, obj)
        if kind == "DELETED" or not spec.get("nodeName") or meta["uid"] in self._finishing:
            return
        if meta.get("deletionTimestamp"):
            self._finishing.add(meta["uid"])
            self._kubelet.submit(self._finish, name, meta["uid"])
        elif self._start_pods and status.get("phase", "Pending") == "Pending" and meta["uid"] not in self._started:
            self._started.add(meta["uid"])
            self._kubelet.submit(self._start, name, spec)

    def _start(self, name: str, spec: dict[str, Any]) -> None:
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        ready = [
            {"type": t, "status": "True", "lastTransitionTime": now}
            for t in ("Initialized", "ContainersReady", "Ready")
        ]
        containers = [
            {
                "name": c["name"],
                "image": c.get("image", ""),
                "imageID": "",
                "ready": True,
                "started": True,
                "restartCount": 0,
                "state": {"running": {"startedAt": now}},
            }
            for c in spec.get("containers", [])
        ]
        patch = {
            "status": {
                "phase": "Running",
                "startTime": now,
                "hostIP": "127.0.0.1",
                "podIP": "127.0.0.1",
                "conditions": ready,
                "containerStatuses": containers,
            }
        }
        try:
            self.api.request(
                "PATCH",
                f"/api/v1/namespaces/{self.namespace}/pods/{name}/status",
                patch,
                content_type="application/strategic-merge-patch+json",
            )
        except ApiError as e:
            if e.status not in (404, 409, 422):
                raise
            return
        with self.cond:
            self.status_writes += 1

    def _finish(self, name: str, uid: str) -> None:
        body = {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0, "preconditions": {"uid": uid}}
        try:
            self.api.request("DELETE", f"/api/v1/namespaces/{self.namespace}/pods/{name}", body)
        except ApiError as e:
            if e.status not in (404, 409):
                raise

    def wait(self, predicate: Callable[[], bool], timeout: float) -> bool:
        deadline = time.perf_counter() + timeout
        with self.cond:
            while not predicate():
                if self.failure is not None:
                    raise RuntimeError(f"the bench's watch of {self.namespace} failed") from self.failure
                left = deadline - time.perf_counter()
                if left <= 0:
                    return False
                self.cond.wait(min(left, 1.0))
        return True

    def wait_bound(self, count: int, timeout: float, stall: float) -> bool:
        """Until `count` pods are bound; False after `timeout`, or once no pod was bound for `stall` seconds."""
        deadline = time.perf_counter() + timeout
        while True:
            seen = self.bound
            if self.wait(lambda: self.bound >= count, min(stall, deadline - time.perf_counter())):
                return True
            if self.bound == seen or time.perf_counter() >= deadline:
                return False

    def stop(self) -> None:
        self._stop = True
        if self._conn is not None and self._conn.sock is not None:
            with contextlib.suppress(OSError):
                self._conn.sock.shutdown(socket.SHUT_RDWR)
        self._thread.join(timeout=10)
        self._kubelet.shutdown(wait=True)


def list_version(api: Api, namespace: str) -> str:
    return str(api.request("GET", f"/api/v1/namespaces/{namespace}/pods?limit=1")["metadata"]["resourceVersion"])


# --------------------------------------------------------------------------------------------- schedulers


def proc_cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def proc_hwm_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@functools.cache
def runtime_venv(checkout: Path) -> Path:
    """A venv with `checkout` installed as the image installs it (`pip install .`): its runtime dependencies only,
    byte-compiled. The development venv also holds the test dependencies, and the `kubernetes` package imports one
    of them when it is there (`kubernetes_validate`, with jsonschema), which the image never has; an editable
    checkout is also compiled from source at every start where PYTHONDONTWRITEBYTECODE is set (the image sets it,
    and so may the machine). Both would be charged to the scheduler's CPU and peak RSS. The venv is kept between
    benches (under the temp dir, by the checkout's path); the checkout's code is installed again each time."""
    venv = Path(tempfile.gettempdir()) / "phalanx-bench" / re.sub(r"[^\w.-]", "_", str(checkout.resolve()))
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(python), "-m", "pip", "install", "-qq", "--disable-pip-version-check"]
    print(f"installing {checkout} into {venv}, as the image does", file=sys.stderr, flush=True)
    subprocess.run([*pip, str(checkout)], check=True)  # the dependencies, where one is missing or too old
    subprocess.run([*pip, "--no-deps", "--force-reinstall", str(checkout)], check=True)  # the code as it is now
    return venv


class SchedulerRun:
    """One scheduler process, started now; `stop()` returns its CPU seconds and peak RSS (MiB)."""

    name = ""
    scheduler_name = ""
    profile_dir: Path | None = None
    """Set by `--py-spy DIR`: Phalanx's measured phase is sampled by py-spy (raw collapsed stacks of GIL holders)."""

    def __init__(self, plane: ControlPlane, label: str) -> None:
        self.log = open(plane.dir / "logs" / f"bench-{self.name}-{label}.log", "wb")  # noqa: SIM115
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(
            self.command(plane), stdout=self.log, stderr=subprocess.STDOUT, env=self.env(), cwd=self.cwd()
        )
        RUNNING.append(self.proc)
        self.label = label
        self.spy: subprocess.Popen[bytes] | None = None

    def measuring(self) -> None:
        """The measured phase starts: with `--py-spy`, sample Phalanx from now on, so a profile holds what the
        figures hold (a backlog's set-up, a minute of its own writes, kept out of its streaming passes)."""
        if self.profile_dir is not None and self.name.startswith("phalanx") and self.spy is None:
            out = self.profile_dir / f"{self.label}.txt"
            spy = [str(ROOT / ".venv" / "bin" / "py-spy"), "record", "--pid", str(self.proc.pid), "--format", "raw"]
            spy += ["--gil", "--threads", "--rate", "200", "--nonblocking", "-o", str(out)]
            self.spy = subprocess.Popen(spy, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def command(self, plane: ControlPlane) -> list[str]:
        raise NotImplementedError

    def env(self) -> dict[str, str]:
        return dict(os.environ)

    def cwd(self) -> Path:
        return ROOT

    def cpu(self) -> float:
        return proc_cpu_seconds(self.proc.pid)

    def stop(self) -> tuple[float, float]:
        if self.proc.poll() is not None:
            raise RuntimeError(f"{self.name} exited early with {self.proc.returncode}; see {self.log.name}")
        cpu, hwm = self.cpu(), proc_hwm_mib(self.proc.pid)
        if self.spy is not None:
            self.spy.send_signal(signal.SIGINT)
            self.spy.wait(timeout=60)
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()
        return cpu, hwm


class KubeSchedulerRun(SchedulerRun):
    name = "kube-scheduler"
    scheduler_name = KUBE_SCHEDULER

    def command(self, plane: ControlPlane) -> list[str]:
        # The flags up.sh gives it (KUBE_SCHEDULER=1), started here so the bench owns its pid and start time.
        return [
            str(plane.bin / "kube-scheduler"),
            "--kubeconfig",
            str(plane.dir / "scheduler.kubeconfig"),
            "--leader-elect=false",
            "--bind-address",
            "127.0.0.1",
            "--secure-port",
            str(free_port()),
            "--authorization-always-allow-paths",
            "/healthz,/readyz,/livez,/metrics",
            "--feature-gates",
            GATES,
            *KUBE_SCHEDULER_ARGS,
        ]


class PhalanxRun(SchedulerRun):
    name = "phalanx"
    scheduler_name = PHALANX_SCHEDULER
    elected = False
    """With the chart's leader election (values.yaml: 15 s lease, 10 s renew deadline, 2 s retry period), each run
    its own identity: two of them are a leader and its standby (`failover`, through `elected_run`)."""

    def __init__(self, plane: ControlPlane, label: str) -> None:
        self.python = runtime_venv(self.checkout_dir()) / "bin" / "python"
        super().__init__(plane, label)

    def checkout_dir(self) -> Path:
        return ROOT

    def env(self) -> dict[str, str]:
        """Without the bench's PYTHONPATH: the code is the venv's, and a checkout on the path would come first."""
        return {key: value for key, value in super().env().items() if key != "PYTHONPATH"}

    def command(self, plane: ControlPlane) -> list[str]:
        command = [
            str(self.python.parent / "phalanx"),
            "scheduler",
            "--kubeconfig",
            str(plane.dir / "phalanx.kubeconfig"),
            "--metrics-bind",
            "127.0.0.1:0",
        ]
        if self.elected:
            config = plane.dir / "phalanx-elected.yaml"
            election = {
                "leaderElect": True,
                "resourceNamespace": "phalanx-system",
                "leaseDurationSeconds": 15,
                "renewDeadlineSeconds": 10,
                "retryPeriodSeconds": 2,
            }
            kind = {"apiVersion": "scheduling.phalanx.dev/v1alpha1", "kind": "SchedulerConfiguration"}
            config.write_text(json.dumps({**kind, "leaderElection": election}))
            command += ["--config", str(config), "--identity", f"bench-{uuid.uuid4().hex[:6]}"]
        return command


def elected_run(kind: str) -> type[PhalanxRun]:
    """The Phalanx run of `kind` (P, B) with leader election."""
    base = SCHEDULERS[kind]
    assert issubclass(base, PhalanxRun), f"{kind} is not a Phalanx run"
    return type(f"Elected{base.__name__}", (base,), {"elected": True})


class PhalanxBeforeRun(PhalanxRun):
    """`phalanx scheduler` from another checkout (`--before DIR`, e.g. a `git worktree` of an older
    commit), installed in a venv of its own: before and after in one run."""

    name = "phalanx-before"
    checkout: Path | None = None

    def checkout_dir(self) -> Path:
        return self.checkout or ROOT


RUNNING: list[subprocess.Popen[bytes]] = []
"""Every scheduler process started, so an interrupted bench leaves none behind."""


def stop_all(plane: ControlPlane) -> None:
    """Kill every scheduler the bench started that still runs, then the control plane: a run that failed midway
    leaves nothing behind."""
    for proc in RUNNING:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    plane.stop()


SCHEDULERS: dict[str, type[SchedulerRun]] = {"K": KubeSchedulerRun, "P": PhalanxRun, "B": PhalanxBeforeRun}
NAMES = {kind: run.name for kind, run in SCHEDULERS.items()}


# ------------------------------------------------------------------------------------------------ workloads


@dataclass
class Result:
    workload: str
    scheduler: str
    round: int
    nodes: int
    pods: int
    seconds: float | None = None
    pods_per_second: float | None = None
    cpu_seconds: float = 0.0
    cpu_ms_per_pod: float | None = None
    hwm_mib: float = 0.0
    decision_seconds: float | None = None
    bound_seconds: float | None = None
    runs: list[float] = field(default_factory=list)
    """`explain`: the wall seconds of each run of the command."""
    victims: dict[str, int] = field(default_factory=dict)
    created_per_second: float | None = None
    """`drain`: the API server's write ceiling in this run, the rate at which the bench's own client (8 threads)
    created the drain's pods before the scheduler started."""
    writes_per_second: float | None = None
    """`drain`: the API server's writes for the drain, per second: a Binding and a kubelet status write a pod."""
    others_cpu_seconds: dict[str, float] = field(default_factory=dict)
    """`drain`, `stream`, `backlog`: the CPU seconds kube-apiserver, etcd and the bench itself (its client, watch
    and kubelets) used over the same time as the scheduler: where the 2 cores went."""
    served: dict[str, int] = field(default_factory=dict)
    """Over the same time: the API server's writes and watch events sent, by kind (`ControlPlane.served`)."""
    constrained: float = 0.0
    """`--constrained`: the share of the pods with anti-affinity or a zone spread."""
    devices_per_node: int = 0
    """`devices`, `devices-preempt`: the devices each node's ResourceSlice publishes."""
    first_bind_seconds: float | None = None
    """`drain`: from the scheduler's start to the first Binding the bench's watch saw."""
    timeline: list[int] = field(default_factory=list)
    """`drain`, `stream`: Bindings seen in each `WINDOW_SECONDS` from the first one (the last, partial window
    left out): a drain that stalls halfway shows here, not in its mean rate."""
    failure: str = ""
    """`devices`, `devices-preempt`: what the check of the allocations found wrong (the bench then exits with 1)."""
    note: str = ""

    @classmethod
    def throughput(
        cls,
        workload: str,
        scheduler: str,
        nodes: int,
        pods: int,
        seconds: float,
        done: bool,
        cpu: float,
        hwm: float,
        **extra: Any,
    ) -> Result:
        """A drain, stream or backlog run: `pods` bound in `seconds` (no rate when not all were) with `cpu`."""
        return cls(
            workload,
            scheduler,
            0,
            nodes,
            pods,
            seconds=seconds,
            pods_per_second=pods / seconds if done else None,
            cpu_seconds=cpu,
            cpu_ms_per_pod=1000 * cpu / pods,
            hwm_mib=hwm,
            **extra,
        )


def cleanup(plane: ControlPlane, namespace: str) -> None:
    """Remove the run's pods at once (deletecollection, grace 0) and wait until none is left. A 5xx (etcd timing
    out under 100,000 deletions on a loaded machine) is asked again: the run's figures are already taken."""
    api = plane.api
    deadline = time.time() + 900

    def left() -> bool:
        try:
            return bool(api.request("GET", f"/api/v1/namespaces/{namespace}/pods?limit=1")["items"])
        except ApiError as e:
            if e.status < 500:
                raise
            return True

    while left():
        try:  # 50,000 pods take longer than the server's 60 s request timeout: ask again until none is left
            api.request("DELETE", f"/api/v1/namespaces/{namespace}/pods?gracePeriodSeconds=0")
        except ApiError as e:
            if e.status < 500:
                raise
        except (OSError, http.client.HTTPException):  # or it closes the connection unanswered (100,000 pods)
            pass
        if time.time() > deadline:
            raise RuntimeError(f"pods of {namespace} not gone after 900 s")


def cleanup_claims(api: Api, namespace: str) -> None:
    """Remove the run's ResourceClaims, so no device stays held for the next run: those a scheduler allocated keep
    its finalizer (`resource.kubernetes.io/delete-protection`) once deleted, which the bench then takes off, as the
    resourceclaim controller does for a claim no pod uses."""
    path = device_claims.CLAIMS.format(ns=namespace)
    api.request("DELETE", path)
    held = [c["metadata"]["name"] for c in list_all(api, path) if c["metadata"].get("finalizers")]
    with ThreadPoolExecutor(8) as pool:
        for future in [
            pool.submit(api.request, "PATCH", f"{path}/{name}", {"metadata": {"finalizers": None}}, MERGE_PATCH)
            for name in held
        ]:
            future.result()


def release_claims(api: Api, namespace: str, gone: dict[str, Any]) -> None:
    """The resourceclaim controller on a pod's deletion: each claim the pod used (by name) is no longer reserved
    for it and, used by no other pod, is deallocated (`device_claims.RELEASED`)."""
    for source in gone.get("spec", {}).get("resourceClaims") or []:
        name = source.get("resourceClaimName")
        if not name:
            continue
        path = f"{device_claims.CLAIMS.format(ns=namespace)}/{name}/status"
        try:
            api.request("PATCH", path, device_claims.RELEASED, MERGE_PATCH)
        except ApiError as e:
            if e.status != 404:
                raise


def list_all(api: Api, path: str, limit: int = 1000) -> list[dict[str, Any]]:
    """Every object of a LIST, page by page."""
    items: list[dict[str, Any]] = []
    token = ""
    while True:
        page = api.request("GET", f"{path}?limit={limit}" + (f"&continue={urllib.parse.quote(token)}" if token else ""))
        items += page.get("items") or []
        token = page.get("metadata", {}).get("continue") or ""
        if not token:
            return items


def allocation_check(
    api: Api, namespace: str, watch: PodWatch, pods: list[str], freed: set[device_claims.Device] | None = None
) -> str:
    """`device_claims.allocation_problems` for those of `pods` the watch saw bound (on the node it saw), on the claims
    as the API server has them now; "" when all is right."""
    with watch.cond:
        placed = {name: s.node for name in pods if (s := watch.pods.get(name)) is not None and s.node is not None}
    claims = list_all(api, device_claims.CLAIMS.format(ns=namespace))
    return device_claims.problems_note(device_claims.allocation_problems(claims, placed, freed))


def new_namespace(plane: ControlPlane, name: str) -> str:
    plane.api.request(
        "POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    )
    return name


def probe(plane: ControlPlane, namespace: str, run: SchedulerRun, watch: PodWatch, timeout: float = 120) -> None:
    """A pod without requests, bound by the scheduler under test: its caches are synced and it schedules."""
    plane.api.request(
        "POST", f"/api/v1/namespaces/{namespace}/pods", pod("probe", namespace, run.scheduler_name, "", "")
    )
    if not watch.wait(lambda: (s := watch.pods.get("probe")) is not None and s.bound_at is not None, timeout):
        raise RuntimeError(f"{run.name} did not bind the probe pod in {timeout:.0f} s")
    plane.api.request("DELETE", f"/api/v1/namespaces/{namespace}/pods/probe?gracePeriodSeconds=0")


class Meanwhile:
    """What the control plane and the bench spend from now on: CPU by process, and the API server's work by kind."""

    def __init__(self, plane: ControlPlane) -> None:
        self.plane = plane
        self.served = plane.served()  # first: the API server's CPU to read its /metrics is not the workload's
        self.cpu = plane.cpu_seconds()
        self.clock = time.strftime("%H:%M:%S")
        self.loads = [os.getloadavg()[0]]
        self._done = threading.Event()
        threading.Thread(target=self._sample, daemon=True).start()

    def _sample(self) -> None:
        """The machine's 1-minute load average every 15 s: a shared machine's other work, round by round."""
        while not self._done.wait(15.0):
            self.loads.append(os.getloadavg()[0])

    def since(self) -> tuple[dict[str, float], dict[str, int]]:
        self._done.set()
        self.loads.append(os.getloadavg()[0])
        cpu = {name: used - self.cpu[name] for name, used in self.plane.cpu_seconds().items()}
        served = self.plane.served()
        served.subtract(self.served)
        return cpu, {kind: count for kind, count in served.most_common() if count > 0}

    def window(self) -> str:
        """When the measured phase ran (the machine's clock) and the 1-minute load average over it."""
        return (
            f"{self.clock}-{time.strftime('%H:%M:%S')}, load {statistics.mean(self.loads):.1f} "
            f"(1-min, every 15 s: {min(self.loads):.1f}-{max(self.loads):.1f})"
        )


WINDOW_SECONDS = 30.0
"""The timeline's window: issue 44's target is no window below 0.8x of the run's median."""


def timeline(watch: PodWatch) -> list[int]:
    """Bindings seen per `WINDOW_SECONDS` from the first, whole windows only (all of them if none is whole)."""
    times = sorted(s.bound_at for s in watch.pods.values() if s.bound_at is not None)
    if not times:
        return []
    counts = Counter(int((t - times[0]) // WINDOW_SECONDS) for t in times)
    whole = int((times[-1] - times[0]) // WINDOW_SECONDS)
    return [counts.get(i, 0) for i in range(max(whole, 1))] or [len(times)]


def timeline_note(counts: list[int]) -> str:
    if len(counts) < 2:
        return ""
    lowest = min(counts) / statistics.median(counts)
    return f"binds per {WINDOW_SECONDS:.0f} s: {', '.join(map(str, counts))} (lowest {lowest:.2f}x of the median)"


class ApiserverProfile:
    """kube-apiserver's CPU profile (its `/debug/pprof/profile`, Go's pprof format) over `SECONDS` of a drain, from
    `DELAY` seconds after the scheduler started, written to `DIR/<label>.pb.gz`, with the Bindings the bench saw in
    that window: what the API server spends a Binding on beside each scheduler (`go tool pprof -top -cum FILE`,
    divided by them)."""

    DELAY = 4.0
    SECONDS = 12

    def __init__(self, plane: ControlPlane, watch: PodWatch, label: str) -> None:
        assert plane.profile_dir is not None
        self.plane, self.watch = plane, watch
        self.out = plane.profile_dir / f"{label}.pb.gz"
        self.window: tuple[float, float] | None = None
        self._thread = threading.Thread(target=self._take, daemon=True)
        self._thread.start()

    def _take(self) -> None:
        time.sleep(self.DELAY)
        began = time.perf_counter()
        try:
            data = self.plane.api.raw(f"/debug/pprof/profile?seconds={self.SECONDS}", "*/*", self.SECONDS + 30)
        except ApiError:
            return
        self.out.write_bytes(data)
        self.window = (began, time.perf_counter())

    def note(self) -> str:
        self._thread.join(timeout=self.DELAY + self.SECONDS + 60)
        if self.window is None:
            return "no API server profile (the drain ended first, or the server refused)"
        began, ended = self.window
        times = [s.bound_at for s in list(self.watch.pods.values()) if s.bound_at is not None]
        bound = sum(1 for t in times if began <= t <= ended)
        return f"API server profile {self.out} over {ended - began:.1f} s, {bound} Bindings seen in it"


STALL = 300.0
"""Seconds without a new Binding after which a drain, stream or backlog run gives up (`--stall`)."""


def drain(
    plane: ControlPlane,
    kind: str,
    label: str,
    nodes: int,
    pods: int,
    share: float = 0.0,
    stall: float = STALL,
    devices: bool = False,
) -> Result:
    """`drain`; with `devices`, the `devices` workload: each pod p-i uses a claim p-i of its own, made before it."""
    scheduler = SCHEDULERS[kind]
    namespace = new_namespace(plane, label)
    if devices:
        plane.api.create_many(
            device_claims.CLAIMS, (device_claims.claim(f"p-{i}", namespace) for i in range(pods)), workers=16
        )

    def made(i: int) -> dict[str, Any]:
        if devices:
            return pod(f"p-{i}", namespace, scheduler.scheduler_name, "100m", "128Mi", claim=f"p-{i}")
        return workload_pod(i, namespace, scheduler.scheduler_name, share)

    creating = time.perf_counter()
    plane.api.create_many("/api/v1/namespaces/{ns}/pods", (made(i) for i in range(pods)))
    created = pods / (time.perf_counter() - creating)
    watch = PodWatch(plane.api, namespace, list_version(plane.api, namespace), start_pods=True)
    meanwhile = Meanwhile(plane)
    run = scheduler(plane, label)
    run.measuring()
    profile = ApiserverProfile(plane, watch, label) if plane.profile_dir is not None else None
    done = watch.wait_bound(pods, timeout=3600, stall=stall)
    end = time.perf_counter()
    others, served = meanwhile.since()
    writes = watch.bound + watch.status_writes
    settled = settled_note(watch, pods, run.started) if done else ""
    profiled = profile.note() if profile is not None else ""
    passed = pass_note(passes(run))
    window = meanwhile.window()
    checked = constraint_note(watch, pods, share, plane.zones)
    unbound = "" if done else unbound_note(plane.api, watch, namespace, pods)
    cpu, hwm = run.stop()
    watch.stop()
    failure = allocation_check(plane.api, namespace, watch, [f"p-{i}" for i in range(pods)]) if devices else ""
    cleanup(plane, namespace)
    if devices:
        cleanup_claims(plane.api, namespace)
    seconds = end - run.started
    counts = timeline(watch)
    failed = f"FAILED: {failure}" if failure else ""
    first = min((s.bound_at for s in watch.pods.values() if s.bound_at is not None), default=None)
    began = "" if first is None else f"first bind {first - run.started:.1f} s after start"
    return Result.throughput(
        "devices" if devices else "drain",
        run.name,
        nodes,
        pods,
        seconds,
        done,
        cpu,
        hwm,
        failure=failure,
        created_per_second=created,
        writes_per_second=writes / seconds,
        others_cpu_seconds=others,
        served=served,
        first_bind_seconds=None if first is None else first - run.started,
        timeline=counts,
        note="; ".join(
            filter(None, (window, passed, began, settled, timeline_note(counts), checked, unbound, failed, profiled))
        ),
    )


SETTLE_SECONDS = 120.0
"""How long after the last Binding the drain waits for the kubelet stand-in to start every pod."""


def settled_note(watch: PodWatch, pods: int, started: float) -> str:
    """When every pod was Running (the kubelet stand-in's status write made), from the scheduler's start: the same
    work for every scheduler. Timed to the last Binding, a drain favours the scheduler that outruns the stand-in,
    whose writes it leaves for after the measurement (0.4-0.6 a pod by then behind kube-scheduler at 1,000 nodes)."""
    if not watch.wait(lambda: watch.status_writes >= pods, SETTLE_SECONDS):
        return f"{watch.status_writes} of {pods} pods Running {SETTLE_SECONDS:.0f} s after the last Binding"
    seconds = time.perf_counter() - started
    return f"every pod Running {seconds:.1f} s after start ({pods / seconds:.1f} pods/s)"


def log_time(run: SchedulerRun, event: str) -> float | None:
    """The wall-clock time (`time.time()`) of the first log line of `run` with this `event`: a JSON line's
    `timestamp`, or the ISO time a console line starts with."""
    for line in Path(run.log.name).read_text(errors="replace").splitlines():
        if event not in line:
            continue
        try:
            record = json.loads(line)
        except ValueError:
            stamp, _, rest = line.partition(" ")
            record = {"timestamp": stamp, "event": event} if rest.split("]", 1)[-1].strip().startswith(event) else {}
        if record.get("event") == event and "timestamp" in record:
            try:
                return datetime.fromisoformat(str(record["timestamp"]).replace("Z", "+00:00")).timestamp()
            except ValueError:
                continue
    return None


def failover(
    plane: ControlPlane, kind: str, label: str, nodes: int, pods: int, share: float = 0.0, stall: float = STALL
) -> Result:
    """Issue 44's failover: `pods` pending pods (as `drain`), a Phalanx leader binding them and a standby synced
    beside it (the chart's two replicas and leader election). Once the leader bound a tenth of them it gets SIGTERM
    (it hands its Lease back); measured: from the leader's exit, and from the moment the standby logged that it
    leads, to the first Binding the bench's watch sees after the leader's exit (one made by the new leader: the
    old one finished its writes on the wire before exiting)."""
    namespace = new_namespace(plane, label)
    plane.api.create_many(
        "/api/v1/namespaces/{ns}/pods", (workload_pod(i, namespace, PHALANX_SCHEDULER, share) for i in range(pods))
    )
    watch = PodWatch(plane.api, namespace, list_version(plane.api, namespace), start_pods=True)
    elected = elected_run(kind)
    leader = elected(plane, f"{label}-leader")
    if not watch.wait(lambda: watch.bound > 0, 600):
        raise RuntimeError(f"the leader bound nothing in 600 s; see {leader.log.name}")
    standby = elected(plane, f"{label}-standby")
    deadline = time.time() + 600
    while log_time(standby, "caches synced") is None:
        if time.time() > deadline:
            raise RuntimeError(f"the standby did not sync in 600 s; see {standby.log.name}")
        time.sleep(1.0)
    watch.wait(lambda: watch.bound >= pods // 10, 3600)
    cpu, hwm = leader.stop()
    exited, exited_wall, at_exit = time.perf_counter(), time.time(), watch.bound
    done = watch.wait(lambda: watch.bound > at_exit, stall)
    with watch.cond:  # the watch thread adds pods meanwhile
        first = min((s.bound_at for s in watch.pods.values() if s.bound_at and s.bound_at > exited), default=None)
    leads = log_time(standby, "scheduling started")
    _, standby_hwm = standby.stop()
    watch.stop()
    cleanup(plane, namespace)
    after_exit = None if first is None else first - exited
    after_lead = None if after_exit is None or leads is None else after_exit + (exited_wall - leads)
    return Result(
        "failover",
        leader.name,
        0,
        nodes,
        pods,
        seconds=after_exit,
        cpu_seconds=cpu,
        hwm_mib=max(hwm, standby_hwm),
        decision_seconds=after_lead,
        note=(
            f"leader exited with {at_exit} bound; first Binding by the new leader {fmt(after_exit, 2)} s after the "
            f"old one exited, {fmt(after_lead, 2)} s after it logged that it leads"
            + ("" if done else f"; none within {stall:.0f} s")
        ),
    )


def stream(
    plane: ControlPlane, kind: str, label: str, nodes: int, pods: int, share: float = 0.0, stall: float = STALL
) -> Result:
    scheduler = SCHEDULERS[kind]
    namespace = new_namespace(plane, label)
    watch = PodWatch(plane.api, namespace, list_version(plane.api, namespace), start_pods=True)
    run = scheduler(plane, label)
    probe(plane, namespace, run, watch)
    passes_before = passes(run)
    cpu_before = run.cpu()
    meanwhile = Meanwhile(plane)
    run.measuring()
    started = time.perf_counter()
    plane.api.create_many(
        "/api/v1/namespaces/{ns}/pods",
        (workload_pod(i, namespace, scheduler.scheduler_name, share) for i in range(pods)),
    )
    created = time.perf_counter() - started
    done = watch.wait_bound(pods + 1, timeout=3600, stall=stall)
    end = time.perf_counter()
    cpu_during = run.cpu() - cpu_before
    others, served = meanwhile.since()
    passed = pass_note(passes(run), passes_before)
    window = meanwhile.window()
    checked = constraint_note(watch, pods, share, plane.zones)
    unbound = "" if done else unbound_note(plane.api, watch, namespace, pods)
    _, hwm = run.stop()
    watch.stop()
    cleanup(plane, namespace)
    seconds = end - started
    counts = timeline(watch)
    return Result.throughput(
        "stream",
        run.name,
        nodes,
        pods,
        seconds,
        done,
        cpu_during,
        hwm,
        others_cpu_seconds=others,
        served=served,
        timeline=counts,
        note="; ".join(
            part
            for part in (
                window,
                f"created in {created:.1f} s ({pods / created:.0f}/s)",
                passed,
                timeline_note(counts),
                checked,
                unbound,
            )
            if part
        ),
    )


BACKLOG_PODS = 10_000
BACKLOG_GANGS = 1_000
BACKLOG_GANG_MIN, BACKLOG_GANG_MEMBERS = 4, 2
RETRIES_AVOIDED = "phalanx_scheduler_queue_retries_avoided_total"
RETRIES = "phalanx_scheduler_queue_retries_total{"


def scrape(log: Path, name: str) -> float | None:
    """The sum of metric `name` from a Phalanx process's /metrics; the port is the one its log announced."""
    announced = [line for line in log.read_text(errors="replace").splitlines() if line.startswith("metrics on ")]
    if not announced:
        return None
    with contextlib.suppress(OSError):
        with urllib.request.urlopen(f"http://{announced[0].removeprefix('metrics on ')}/metrics", timeout=10) as resp:
            text = resp.read().decode()
        values = [float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name)]
        return sum(values) if values else None
    return None


PASSES = "phalanx_scheduler_scheduling_attempt_duration_seconds"


def passes(run: SchedulerRun) -> tuple[float, float] | None:
    """Phalanx's passes so far and their wall time in all (its /metrics); None for kube-scheduler."""
    if not isinstance(run, PhalanxRun):
        return None
    count = scrape(Path(run.log.name), f"{PASSES}_count")
    total = scrape(Path(run.log.name), f"{PASSES}_sum")
    return None if count is None or total is None else (count, total)


def pass_note(after: tuple[float, float] | None, before: tuple[float, float] | None = None) -> str:
    """How many passes Phalanx made between two readings of `passes`, and their mean wall time: what a pass
    costs at this size, and how many the workload took."""
    if after is None:
        return ""
    count_before, total_before = before or (0.0, 0.0)
    count, total = after[0] - count_before, after[1] - total_before
    return f"{count:.0f} passes, {1000 * total / count:.0f} ms each" if count > 0 else ""


def backlog(
    plane: ControlPlane,
    kind: str,
    label: str,
    nodes: int,
    pods: int,
    share: float = 0.0,
    stall: float = STALL,
    unfit: int = BACKLOG_PODS,
    gangs: int = BACKLOG_GANGS,
) -> Result:
    """`stream` with a backlog that never fits (issue 23): `unfit` pods of 100 CPU (nodes have 32) and `gangs`
    gangs of minCount BACKLOG_GANG_MIN with BACKLOG_GANG_MEMBERS members exist before the scheduler starts; once it
    bound the probe (it then has tried the whole backlog once), `pods` pods stream in."""
    scheduler = SCHEDULERS[kind]
    api = plane.api
    namespace = new_namespace(plane, label)
    native = kind == "K"
    group_path = (
        "/apis/scheduling.k8s.io/v1alpha2/namespaces/{ns}/podgroups"
        if native
        else "/apis/scheduling.phalanx.dev/v1alpha1/namespaces/{ns}/podgroups"
    )
    api.create_many(
        group_path,
        (
            {
                "apiVersion": "scheduling.k8s.io/v1alpha2" if native else "scheduling.phalanx.dev/v1alpha1",
                "kind": "PodGroup",
                "metadata": {"name": f"gang-{g}", "namespace": namespace},
                "spec": {"schedulingPolicy": {"gang": {"minCount": BACKLOG_GANG_MIN}}},
            }
            for g in range(gangs)
        ),
    )
    api.create_many(
        "/api/v1/namespaces/{ns}/pods",
        (
            pod(
                f"gang-{g}-{m}",
                namespace,
                scheduler.scheduler_name,
                "100m",
                "128Mi",
                labels={} if native else {GROUP_LABEL: f"gang-{g}"},
                extra_spec={"schedulingGroup": {"podGroupName": f"gang-{g}"}} if native else None,
            )
            for g in range(gangs)
            for m in range(BACKLOG_GANG_MEMBERS)
        ),
    )
    api.create_many(
        "/api/v1/namespaces/{ns}/pods",
        (pod(f"big-{i}", namespace, scheduler.scheduler_name, "100", "128Mi") for i in range(unfit)),
    )
    watch = PodWatch(api, namespace, list_version(api, namespace), start_pods=True)
    run = scheduler(plane, label)
    probe(plane, namespace, run, watch, timeout=900)
    idle = time.perf_counter()

    watch.wait(lambda: watch.told >= unfit, 600)  # the pods that fit nowhere were told why: their writes went out
    while time.perf_counter() - idle < 600:  # and the rest of them (the gangs', the Events) are sent: it is idle
        cpu = run.cpu()
        time.sleep(1.0)
        if run.cpu() - cpu < 0.05:
            break
    idle = time.perf_counter() - idle
    avoided_before = scrape(Path(run.log.name), RETRIES_AVOIDED) if kind == "P" else None
    retried_before = scrape(Path(run.log.name), RETRIES) if kind == "P" else None
    passes_before = passes(run)
    cpu_before = run.cpu()
    meanwhile = Meanwhile(plane)
    run.measuring()
    started = time.perf_counter()
    api.create_many(
        "/api/v1/namespaces/{ns}/pods",
        (workload_pod(i, namespace, scheduler.scheduler_name, share) for i in range(pods)),
    )
    created = time.perf_counter() - started
    done = watch.wait_bound(pods + 1, timeout=3600, stall=stall)
    end = time.perf_counter()
    cpu_during = run.cpu() - cpu_before
    others, served = meanwhile.since()
    avoided = scrape(Path(run.log.name), RETRIES_AVOIDED) if kind == "P" else None
    retried = scrape(Path(run.log.name), RETRIES) if kind == "P" else None
    passed = pass_note(passes(run), passes_before)
    window = meanwhile.window()
    checked = constraint_note(watch, pods, share, plane.zones)
    unbound = "" if done else unbound_note(api, watch, namespace, pods)
    _, hwm = run.stop()
    watch.stop()
    cleanup(plane, namespace)
    api.request("DELETE", group_path.format(ns=namespace))
    seconds = end - started
    note = f"{window}; idle after {idle:.0f} s; created in {created:.1f} s ({pods / created:.0f}/s)"
    note += f"; {passed} while streaming" if passed else ""
    note += "".join(f"; {part}" for part in (checked, unbound) if part)
    if avoided is not None:
        note += f"; retries avoided {avoided - (avoided_before or 0):,.0f} while streaming, {avoided:,.0f} in all"
        note += f"; retried {(retried or 0) - (retried_before or 0):,.0f} while streaming"
    return Result.throughput(
        "backlog",
        run.name,
        nodes,
        pods,
        seconds,
        done,
        cpu_during,
        hwm,
        others_cpu_seconds=others,
        served=served,
        note=note,
    )


def span(times: list[float], origin: float) -> str:
    return f"{min(times) - origin:.2f}-{max(times) - origin:.2f} s" if times else "-"


def fill_nodes(api: Api, namespace: str, nodes: int) -> None:
    """Every node full: FILL_PER_NODE pods created bound, node i's in priority class fill-(i % CLASSES)."""
    cpu_fill = f"{NODE_CPU * 1000 // FILL_PER_NODE}m"
    api.create_many(
        "/api/v1/namespaces/{ns}/pods",
        (
            pod(
                f"fill-{n}-{k}",
                namespace,
                KUBE_SCHEDULER,
                cpu_fill,
                "1Gi",
                node_name=f"node-{n}",
                priority_class_name=f"fill-{n % CLASSES}",
            )
            for n in range(nodes)
            for k in range(FILL_PER_NODE)
        ),
    )


def fill_devices(api: Api, namespace: str, nodes: int, per_node: int) -> None:
    """Every device of every node held (`devices-preempt`): pod fill-n-k, created bound to node-n in priority
    class fill-(n % CLASSES), uses claim fill-n-k, which the bench allocates node-n's gpu-k and reserves for it,
    as a scheduler would have written it."""
    names = [(n, k, f"fill-{n}-{k}") for n in range(nodes) for k in range(per_node)]
    api.create_many(device_claims.CLAIMS, (device_claims.claim(name, namespace) for _, _, name in names), workers=16)

    def one(n: int, k: int, name: str) -> None:
        made = pod(
            name,
            namespace,
            KUBE_SCHEDULER,
            "100m",
            "128Mi",
            node_name=f"node-{n}",
            priority_class_name=f"fill-{n % CLASSES}",
            claim=name,
        )
        uid = api.request("POST", f"/api/v1/namespaces/{namespace}/pods", made)["metadata"]["uid"]
        status = device_claims.allocated(f"node-{n}", f"gpu-{k}", name, uid)
        api.request("PATCH", f"{device_claims.CLAIMS.format(ns=namespace)}/{name}/status", status, MERGE_PATCH)

    with ThreadPoolExecutor(16) as pool:
        for future in [pool.submit(one, *named) for named in names]:
            future.result()


def phalanx_gang(
    api: Api, namespace: str, name: str, min_count: int, priority_class: str, priority: int, rack: bool = False
) -> None:
    """Our PodGroup for a gang; its members carry GROUP_LABEL and no gate (see `preempt`); with `rack`, it must
    stay in one rack."""
    topology = {"schedulingConstraints": {"topology": [{"key": RACK_LABEL}]}} if rack else {}
    api.request(
        "POST",
        f"/apis/scheduling.phalanx.dev/v1alpha1/namespaces/{namespace}/podgroups",
        {
            "apiVersion": "scheduling.phalanx.dev/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "schedulingPolicy": {"gang": {"minCount": min_count}},
                "priorityClassName": priority_class,
                "priority": priority,
                **topology,
            },
        },
    )


def preempt(
    plane: ControlPlane, kind: str, label: str, nodes: int, gang: int, timeout: float, devices: int = 0
) -> Result:
    """`preempt`; with `devices` (per node), `devices-preempt`: the nodes full of one-device pods (`fill_devices`),
    each member of 100m with one claim of its own for a device, named after it; the bench also plays the
    resourceclaim controller (`release_claims`: a victim's claim is deallocated once the victim is gone)."""
    scheduler = SCHEDULERS[kind]
    api = plane.api
    namespace = new_namespace(plane, label)
    if devices:
        fill_devices(api, namespace, nodes, devices)
    else:
        fill_nodes(api, namespace, nodes)
    released = functools.partial(release_claims, api, namespace) if devices else None
    watch = PodWatch(api, namespace, list_version(api, namespace), on_gone=released)
    run = scheduler(plane, label)
    probe(plane, namespace, run, watch)
    members = [f"gang-{m}" for m in range(gang)]
    if kind in ("P", "B"):
        phalanx_gang(api, namespace, "gang", gang, "gang-high", 100_000, rack=plane.rack > 0)
        # No gate: without the webhook nothing adds one, and none is needed. GangReadiness (PreEnqueue)
        # parks every member until the PodGroup and minCount members exist, as kube-scheduler's gang
        # scheduling does for the native pods, which carry no gate either.
        extra: dict[str, Any] = {}
        labels = {GROUP_LABEL: "gang"}
    else:
        api.request(
            "POST",
            f"/apis/scheduling.k8s.io/v1alpha2/namespaces/{namespace}/podgroups",
            {
                "apiVersion": "scheduling.k8s.io/v1alpha2",
                "kind": "PodGroup",
                "metadata": {"name": "gang", "namespace": namespace},
                "spec": {"schedulingPolicy": {"gang": {"minCount": gang}}, "priorityClassName": "gang-high"},
            },
        )
        extra = {"schedulingGroup": {"podGroupName": "gang"}}
        labels = {}
    if devices:
        api.create_many(device_claims.CLAIMS, (device_claims.claim(m, namespace) for m in members))
    run.measuring()
    cpu_before = run.cpu()
    api.create_many(
        "/api/v1/namespaces/{ns}/pods",
        (
            pod(
                m,
                namespace,
                scheduler.scheduler_name,
                "100m" if devices else "16",
                "128Mi" if devices else "1Gi",
                priority_class_name="gang-high",
                labels=labels,
                extra_spec=extra,
                claim=m if devices else None,
            )
            for m in members
        ),
    )
    last_created = time.perf_counter()
    last_created_wall = time.time()

    def fill() -> Iterator[PodState]:
        return (s for name, s in watch.pods.items() if name.startswith("fill-"))

    bound = watch.wait(lambda: all((s := watch.pods.get(m)) is not None and s.bound_at for m in members), timeout)
    cpu = run.cpu() - cpu_before
    _, hwm = run.stop()
    with watch.cond:
        starts = [s.marked_at for s in fill() if s.marked_at] + [
            s.nominated_at for m in members if (s := watch.pods.get(m)) is not None and s.nominated_at
        ]
        victims = Counter(f"fill-{s.priority // 1000}" for s in fill() if s.marked_at)
        last_bound = max((watch.pods[m].bound_at or 0.0 for m in members if m in watch.pods), default=0.0)
        gone = [s.gone_at for s in fill() if s.gone_at]
        nominated = [s.nominated_at for m in members if (s := watch.pods.get(m)) is not None and s.nominated_at]
        marked = [s.marked_at for s in fill() if s.marked_at]
        landed = [s.bound_at for m in members if (s := watch.pods.get(m)) is not None and s.bound_at]
        spans = (
            f"nominated {span(nominated, last_created)}, victims marked {span(marked, last_created)}, "
            f"gone {span(gone, last_created)}, members bound {span(landed, last_created)}; "
        )
        if plane.rack:
            racks = {
                int(s.node.removeprefix("node-")) // plane.rack for m in members if (s := watch.pods.get(m)) and s.node
            }
            spans += f"members in rack(s) {sorted(racks)}; "
        taken = [name for name, s in watch.pods.items() if name.startswith("fill-") and s.marked_at]
    watch.stop()
    failure = allocation_check(api, namespace, watch, members, freed_devices(taken)) if devices else ""
    result = Result(
        "devices-preempt" if devices else "preempt",
        run.name,
        0,
        nodes,
        gang,
        decision_seconds=min(starts) - last_created if starts else None,
        bound_seconds=last_bound - last_created if bound else None,
        cpu_seconds=cpu,
        hwm_mib=hwm,
        victims=dict(sorted(victims.items())),
        failure=failure,
        note=spans
        + f"last member created at {last_created_wall:.3f}"
        + ("" if bound else f"; not all bound after {timeout:.0f} s")
        + (f"; FAILED: {failure}" if failure else ""),
    )
    print(f"  measured, cleaning up: {asdict(result)}", flush=True)  # 100,000 pods take minutes to delete
    cleanup(plane, namespace)
    if devices:
        cleanup_claims(api, namespace)
    return result


def freed_devices(victims: list[str]) -> set[device_claims.Device]:
    """`devices-preempt`: the devices the victims held (fill-n-k held node-n's gpu-k)."""
    return {(f"node-{n}", f"gpu-{k}") for name in victims for _, n, k in [name.split("-")]}


def preempt_gangs(plane: ControlPlane, label: str, nodes: int, gang: int, gangs: int, timeout: float) -> Result:
    """`gangs` gangs of `gang` members created together, each at its own priority above the fill, over the
    same full cluster: they compete for the same lowest-class nodes (issue 23). Phalanx only.

    Checked from the bench's watch and the scheduler's own log: each gang decided once (its "preemption
    decided" lines), no victim taken twice (the preemptors named by each pod's DisruptionTarget messages),
    every victim of the lowest class, and every member bound."""
    api = plane.api
    namespace = new_namespace(plane, label)
    fill_nodes(api, namespace, nodes)
    for g in range(gangs):
        with contextlib.suppress(ApiError):  # kept from an earlier run of this control plane
            api.request(
                "POST", "/apis/scheduling.k8s.io/v1/priorityclasses", priority_class(f"gang-{g}", 100_000 + 1000 * g)
            )
    watch = PodWatch(api, namespace, list_version(api, namespace))
    run = PhalanxRun(plane, label)
    probe(plane, namespace, run, watch)
    members = {f"{namespace}/gang-{g}": [f"gang-{g}-{m}" for m in range(gang)] for g in range(gangs)}
    for g in range(gangs):
        phalanx_gang(api, namespace, f"gang-{g}", gang, f"gang-{g}", 100_000 + 1000 * g)
    cpu_before = run.cpu()
    api.create_many(
        "/api/v1/namespaces/{ns}/pods",
        (
            pod(
                name,
                namespace,
                PHALANX_SCHEDULER,
                "16",
                "1Gi",
                priority_class_name=f"gang-{g}",
                labels={GROUP_LABEL: f"gang-{g}"},
            )
            for m in range(gang)  # interleaved: the gangs arrive together
            for g in range(gangs)
            for name in [f"gang-{g}-{m}"]
        ),
    )
    last_created = time.perf_counter()
    everyone = [m for names in members.values() for m in names]
    bound = watch.wait(lambda: all((s := watch.pods.get(m)) is not None and s.bound_at for m in everyone), timeout)
    cpu = run.cpu() - cpu_before
    _, hwm = run.stop()
    with watch.cond:
        fill = [s for name, s in watch.pods.items() if name.startswith("fill-")]
        victims = Counter(f"fill-{s.priority // 1000}" for s in fill if s.marked_at)
        twice = sum(1 for s in fill if len(s.marked_by) > 1)
        per_gang = []
        for key, names in members.items():
            nominated = [t for m in names if (t := watch.pods[m].nominated_at)]
            marked = [s.marked_at for s in fill if key in s.marked_by and s.marked_at]
            decided = min(nominated + marked) - last_created if nominated or marked else None
            landed = [t for m in names if (t := watch.pods[m].bound_at)]
            taken = sum(1 for s in fill if key in s.marked_by)
            per_gang.append((key.rpartition("/")[2], decided, max(landed) - last_created if landed else None, taken))
        last_bound = max((watch.pods[m].bound_at or 0.0 for m in everyone), default=0.0)
    watch.stop()
    decisions: Counter[str] = Counter()
    for line in Path(run.log.name).read_text().splitlines():
        with contextlib.suppress(ValueError):
            record = json.loads(line)
            if isinstance(record, dict) and record.get("event") == "preemption decided":
                decisions[str(record.get("preemptor"))] += 1
    gangs_text = "; ".join(
        f"{name}: decided {fmt(decided, 3)} s, bound {fmt(landed, 3)} s, {taken} victims, "
        f"{decisions.get(f'podgroup/{namespace}/{name}', 0)} decision(s)"
        for name, decided, landed, taken in per_gang
    )
    result = Result(
        "preempt-gangs",
        run.name,
        0,
        nodes,
        gang * gangs,
        decision_seconds=max((d for _, d, _, _ in per_gang if d is not None), default=None),
        bound_seconds=last_bound - last_created if bound else None,
        cpu_seconds=cpu,
        hwm_mib=hwm,
        victims=dict(sorted(victims.items())),
        note=f"{gangs} gangs of {gang}: {gangs_text}; victims marked by two gangs: {twice}"
        + ("" if bound else f"; not all bound after {timeout:.0f} s"),
    )
    print(f"  measured, cleaning up: {asdict(result)}", flush=True)
    cleanup(plane, namespace)
    return result


def explain(plane: ControlPlane, nodes: int, pods: int, runs: int) -> list[Result]:
    """`kubectl phalanx explain podgroup gang` and `status -A`, timed end to end (see the module docstring)."""
    api = plane.api
    namespace = new_namespace(plane, "explain")
    per_node = max(1, pods // nodes)
    cpu_fill = f"{NODE_CPU * 1000 // per_node}m"
    api.create_many(
        "/api/v1/namespaces/{ns}/pods",
        (
            pod(
                f"fill-{i}",
                namespace,
                KUBE_SCHEDULER,
                cpu_fill,
                "1Gi",
                node_name=f"node-{i % nodes}",
                priority_class_name=f"fill-{(i % nodes) % CLASSES}",
            )
            for i in range(pods)
        ),
        workers=16,
    )
    group = "/apis/scheduling.phalanx.dev/v1alpha1/namespaces/{ns}/podgroups"
    for name, count in (("gang", 64), ("waiting", 8)):
        api.request(
            "POST",
            group.format(ns=namespace),
            {
                "apiVersion": "scheduling.phalanx.dev/v1alpha1",
                "kind": "PodGroup",
                "metadata": {"name": name, "namespace": namespace},
                "spec": {"schedulingPolicy": {"gang": {"minCount": count}}, "priorityClassName": "gang-high"},
            },
        )
    pending = [
        pod(
            f"gang-{m}",
            namespace,
            PHALANX_SCHEDULER,
            "16",
            "1Gi",
            priority_class_name="gang-high",
            labels={GROUP_LABEL: "gang"},
        )
        for m in range(64)
    ]
    pending += [
        pod(f"waiting-{m}", namespace, PHALANX_SCHEDULER, "1", "1Gi", labels={GROUP_LABEL: "waiting"}) for m in range(2)
    ]
    pending.append(
        pod(
            "gated",
            namespace,
            PHALANX_SCHEDULER,
            "1",
            "1Gi",
            extra_spec={"schedulingGates": [{"name": "example.com/quota"}]},
        )
    )
    api.create_many("/api/v1/namespaces/{ns}/pods", pending)
    api.request(  # phalanx-system exists: `ControlPlane.phalanx_identity`
        "POST",
        "/api/v1/namespaces/phalanx-system/configmaps",
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "phalanx-scheduler", "namespace": "phalanx-system"},
            "data": {"config.yaml": "apiVersion: scheduling.phalanx.dev/v1alpha1\nkind: SchedulerConfiguration\n"},
        },
    )
    commands = {
        "explain podgroup": ["explain", "podgroup", "gang", "-n", namespace],
        "status -A": ["status", "-A"],
    }
    results = []
    env = {**os.environ, "KUBECONFIG": str(plane.dir / "kubeconfig")}
    for label, args in commands.items():
        result = Result(f"explain: {label}", "kubectl-phalanx", 0, nodes, pods)
        for _ in range(runs):
            apiserver = proc_cpu_seconds(plane.apiserver_pid())
            before = os.times()
            started = time.perf_counter()
            done = subprocess.run([str(PLUGIN), *args], capture_output=True, text=True, env=env, check=False)
            result.runs.append(time.perf_counter() - started)
            after = os.times()
            if done.returncode != 0:
                raise RuntimeError(f"kubectl-phalanx {' '.join(args)}: {done.stderr}")
            result.cpu_seconds = (after.children_user - before.children_user) + (
                after.children_system - before.children_system
            )
            result.note = f"kube-apiserver CPU {proc_cpu_seconds(plane.apiserver_pid()) - apiserver:.2f} s"
            result.hwm_mib = 0.0
        result.seconds = statistics.median(result.runs)
        first = done.stdout.splitlines()
        result.note += f"; output {len(first)} lines, first: {first[0] if first else ''!r}"
        results.append(result)
    cleanup(plane, namespace)
    return results


# ---------------------------------------------------------------------------------------------------- report


def order(rounds: int, kinds: str = "KP") -> list[str]:
    """K P P K (or K P B B P K), repeated: each scheduler goes first and last equally often."""
    return [k for r in range(rounds) for k in (kinds if r % 2 == 0 else kinds[::-1])]


def median(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def ratio(a: float | None, b: float | None) -> str:
    return "-" if a is None or b is None or b == 0 else f"{a / b:.2f}x"


def report(results: list[Result]) -> None:
    def by(workload: str, scheduler: str, nodes: int | None = None) -> list[Result]:
        return [
            r
            for r in results
            if r.workload == workload and r.scheduler == scheduler and (nodes is None or r.nodes == nodes)
        ]

    print("\n== every run (in order)")
    for r in results:
        line = f"{r.workload:8} {r.scheduler:15} round {r.round} nodes {r.nodes:>5} pods {r.pods:>6}"
        if r.workload.startswith("explain"):
            each = ", ".join(f"{t:.2f}" for t in r.runs)
            line += f" median {fmt(r.seconds, 2)} s of {each}; CPU of the last run {fmt(r.cpu_seconds, 2)} s"
        elif r.workload == "failover":
            line += f" leader CPU {fmt(r.cpu_seconds)} s"
        elif "preempt" in r.workload:
            line += (
                f" decision {fmt(r.decision_seconds, 3)} s, all bound {fmt(r.bound_seconds, 3)} s, victims {r.victims}"
            )
        else:
            line += f" {fmt(r.seconds)} s, {fmt(r.pods_per_second)} pods/s, CPU {fmt(r.cpu_seconds)} s"
            line += f" ({fmt(r.cpu_ms_per_pod, 2)} ms/pod)"
        line += f", peak RSS {fmt(r.hwm_mib, 0)} MiB {r.note}"
        if r.others_cpu_seconds:
            line += " meanwhile CPU s: " + ", ".join(f"{k} {v:.1f}" for k, v in r.others_cpu_seconds.items())
        if r.served:
            line += "; a pod: " + ", ".join(f"{k} {v / r.pods:.2f}" for k, v in r.served.items() if v >= r.pods / 10)
        print(line)
    print("\n== medians (ratios: to kube-scheduler)")
    names = [n for n in ("kube-scheduler", "phalanx-before", "phalanx") if any(r.scheduler == n for r in results)]
    for workload in ("drain", "stream", "backlog", "devices"):
        runs = {name: by(workload, name) for name in names}
        if not any(runs.values()):
            continue
        n = next(r for rs in runs.values() for r in rs)
        title = f"{workload} {n.nodes:,} nodes / {n.pods:,} pods" + (
            f", {n.constrained:.0%} constrained" if n.constrained else ""
        )
        title += f", {n.devices_per_node} devices a node, one a pod" if n.devices_per_node else ""
        print(f"| {title} | pods/s | CPU ms/pod | peak RSS MiB | pods/s ratio | CPU ratio | RSS ratio |")
        kube_runs = runs.get("kube-scheduler", [])
        kube = median([r.pods_per_second for r in kube_runs])
        kube_cpu, kube_hwm = median([r.cpu_ms_per_pod for r in kube_runs]), median([r.hwm_mib for r in kube_runs])
        for name, rs in runs.items():
            rate = median([r.pods_per_second for r in rs])
            cpu, hwm = median([r.cpu_ms_per_pod for r in rs]), median([r.hwm_mib for r in rs])
            ratios = f"{ratio(rate, kube)} | {ratio(cpu, kube_cpu)} | {ratio(hwm, kube_hwm)}"
            print(f"| {name} | {fmt(rate)} | {fmt(cpu, 2)} | {fmt(hwm, 0)} | {ratios} |")
    drains = [r for r in results if r.workload == "drain" and r.created_per_second]
    if drains:
        ceiling = median([r.created_per_second for r in drains])
        print(
            f"| the limit row, drain: ceiling {fmt(ceiling, 0)} pod creates/s (bench client, 8 threads; median of "
            f"{len(drains)} runs) | pods/s | / ceiling | API writes/s (Binding + kubelet status) | / ceiling |"
        )
        for name in names:
            rs = by("drain", name)
            if rs:
                rate, writes = median([r.pods_per_second for r in rs]), median([r.writes_per_second for r in rs])
                row = f"{fmt(rate)} | {ratio(rate, ceiling)} | {fmt(writes, 0)} | {ratio(writes, ceiling)}"
                print(f"| {name} | {row} |")
    for workload, nodes in sorted({(r.workload, r.nodes) for r in results if r.workload.endswith("preempt")}):
        gang = next(r.pods for r in results if r.workload == workload and r.nodes == nodes)
        print(f"| {workload} {nodes:,} nodes, gang {gang} | decision s | all bound s | victims | peak RSS MiB |")
        for name in names:
            preempts = by(workload, name, nodes)
            if not preempts:
                quoted = PUBLISHED_KUBE_DECISION.get(nodes) if workload == "preempt" else None
                print(f"| {name} | {quoted + ' (published, ' if quoted else '('}not run) | - | - | - |")
                continue
            print(
                f"| {name} | {fmt(median([r.decision_seconds for r in preempts]), 3)} | "
                f"{fmt(median([r.bound_seconds for r in preempts]), 3)} | {preempts[0].victims} | "
                f"{fmt(median([r.hwm_mib for r in preempts]), 0)} |"
            )
    failed = [r for r in results if r.failure]
    if failed:
        print("\n== FAILED checks")
        for r in failed:
            print(f"{r.workload} {r.scheduler} round {r.round}: {r.failure}")


# ------------------------------------------------------------------------------------------------------ main


def scales(text: str) -> list[tuple[int, int]]:
    """`NODES:GANG,...` (an empty string for none); argparse turns the ValueError into a usage error."""
    parsed = []
    for item in filter(None, text.split(",")):
        nodes, colon, gang = item.partition(":")
        if not (colon and nodes.isdigit() and gang.isdigit()):
            raise ValueError(f"{item!r} is not NODES:GANG")
        parsed.append((int(nodes), int(gang)))
    return parsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=1000, help="nodes for drain and stream")
    parser.add_argument("--pods", type=int, default=10_000, help="pods for drain and stream")
    parser.add_argument("--workloads", default="preempt,drain,stream")
    parser.add_argument("--rounds", type=int, default=2, help="K P, then P K, ...: 2 gives K P P K")
    parser.add_argument(
        "--preemption", type=scales, default="100:16,500:64,1000:64", help="NODES:GANG scales for Phalanx"
    )
    parser.add_argument(
        "--kube-preemption",
        type=scales,
        default="100:16",
        help="NODES:GANG scales kube-scheduler runs too ('' for none)",
    )
    parser.add_argument("--kube-preemption-timeout", type=float, default=300.0, help="seconds per kube-scheduler run")
    parser.add_argument("--gangs-preemption", type=scales, default="1000:64", help="`preempt-gangs`: NODES:GANG scales")
    parser.add_argument("--gangs", type=int, default=4, help="`preempt-gangs`: gangs created together")
    parser.add_argument("--schedulers", default="K,P", help="K (kube-scheduler), P (phalanx), or both")
    parser.add_argument("--json", help="write every measurement here")
    parser.add_argument("--keep", action="store_true", help="keep the control plane's folder (logs) after the run")
    parser.add_argument(
        "--py-spy", type=Path, help="sample Phalanx's runs (drain, stream, backlog, devices, preempt) with py-spy"
    )
    parser.add_argument(
        "--apiserver-profile",
        type=Path,
        metavar="DIR",
        help="drain: a CPU profile of kube-apiserver from 4 s to 16 s of each run, and the Bindings seen in it",
    )
    parser.add_argument("--before", type=Path, help="also run `phalanx scheduler` from this checkout (an older commit)")
    parser.add_argument("--explain-runs", type=int, default=3, help="runs of each `explain` workload command")
    parser.add_argument("--backlog", type=scales, default="10000:1000", help="PODS:GANGS that never fit, for backlog")
    parser.add_argument(
        "--constrained",
        type=float,
        default=0.0,
        help="share of the drain, stream and backlog pods with anti-affinity or a zone spread (e.g. 0.3)",
    )
    parser.add_argument(
        "--racks",
        type=int,
        default=0,
        metavar="N",
        help="`preempt`: racks of N consecutive nodes; Phalanx's gang must stay in one (kube-scheduler is not run)",
    )
    parser.add_argument("--stall", type=float, default=STALL, help="seconds without a Binding before a run gives up")
    parser.add_argument(
        "--devices-per-node", type=int, default=8, help="`devices`, `devices-preempt`: devices in each node's slice"
    )
    parser.add_argument(
        "--devices-preemption",
        type=scales,
        default="1000:64",
        help="`devices-preempt`: NODES:GANG scales (kube-scheduler at those of --kube-preemption)",
    )
    args = parser.parse_args()
    if args.racks and (set(args.schedulers.split(",")) != {"P"} or args.kube_preemption):
        parser.error(
            "--racks: Phalanx only (--schedulers P --kube-preemption ''): kube-scheduler 1.36 does not preempt "
            "for a group with a topology constraint"
        )
    if not 0.0 <= args.constrained <= 1.0:
        parser.error("--constrained is a share between 0 and 1")
    if "devices" in args.workloads.split(",") and args.pods > args.nodes * args.devices_per_node:
        parser.error(
            f"devices: {args.pods:,} one-device pods do not fit {args.nodes:,} nodes of {args.devices_per_node} "
            "devices: every claim is to be allocated"
        )
    if not (KUBE / "up.sh").exists():
        print(f"real control plane not found at {KUBE}", file=sys.stderr)
        return 2
    workloads = args.workloads.split(",")
    if args.py_spy is not None:
        if not (ROOT / ".venv" / "bin" / "py-spy").exists():
            print("--py-spy: py-spy is not installed: .venv/bin/pip install py-spy", file=sys.stderr)
            return 2
        args.py_spy.mkdir(parents=True, exist_ok=True)
        SchedulerRun.profile_dir = args.py_spy
    wanted = set(args.schedulers.split(","))
    kinds = "KP"
    if args.before is not None:
        PhalanxBeforeRun.checkout = args.before.resolve()
        wanted.add("B")
        kinds = "KPB"
    kube_scales = {n for n, _ in args.kube_preemption}
    print(f"load before: {os.getloadavg()}", flush=True)
    # `timeout` and `kill` send SIGTERM: end through the `finally` below, which stops the schedulers and the
    # control plane (they were left running, a kube-apiserver spinning on its dead etcd at 27 % of a core)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    plane = ControlPlane(args.keep)
    plane.zones = ZONES if args.constrained else 0
    plane.rack = args.racks
    if args.apiserver_profile is not None:
        args.apiserver_profile.mkdir(parents=True, exist_ok=True)
        plane.profile_dir = args.apiserver_profile
    print(f"control plane in {plane.dir}", flush=True)
    results: list[Result] = []

    def record(result: Result, r: int) -> None:
        result.round = r
        results.append(result)
        print(f"  {result.workload} {result.scheduler} nodes={result.nodes}: {asdict(result)}", flush=True)

    try:
        plane.setup()
        if "preempt" in workloads:
            for nodes, gang in args.preemption:
                plane.ensure_nodes(nodes)
                for r, kind in enumerate(order(args.rounds, kinds)):
                    if kind not in wanted:
                        continue
                    if kind == "K" and nodes not in kube_scales:
                        continue
                    timeout = args.kube_preemption_timeout if kind == "K" else 120.0
                    record(
                        preempt(plane, kind, f"preempt-{nodes}-{kind.lower()}{r}", nodes, gang, timeout),
                        r // len(kinds),
                    )
        if "preempt-gangs" in workloads:
            for nodes, gang in args.gangs_preemption:
                plane.ensure_nodes(nodes)
                label = f"preempt-gangs-{nodes}"
                record(preempt_gangs(plane, label, nodes, gang, args.gangs, 180.0), 0)
        plane.ensure_nodes(args.nodes)
        if "explain" in workloads:
            for result in explain(plane, args.nodes, args.pods, args.explain_runs):
                record(result, 0)
        (unfit, gangs), *_ = args.backlog
        backlogged = functools.partial(backlog, unfit=unfit, gangs=gangs)
        for workload, fn in (("drain", drain), ("stream", stream), ("backlog", backlogged), ("failover", failover)):
            if workload not in workloads:
                continue
            for r, kind in enumerate(order(args.rounds, kinds)):
                if kind in wanted and (workload != "failover" or kind != "K"):  # a Phalanx leader and its standby
                    label = f"{workload}-{kind.lower()}{r}"
                    result = fn(plane, kind, label, args.nodes, args.pods, share=args.constrained, stall=args.stall)
                    result.constrained = args.constrained
                    record(result, r // len(kinds))
        if "devices" in workloads:
            plane.ensure_devices(args.nodes, args.devices_per_node)
            for r, kind in enumerate(order(args.rounds, kinds)):
                if kind in wanted:
                    result = drain(
                        plane, kind, f"devices-{kind.lower()}{r}", args.nodes, args.pods, stall=args.stall, devices=True
                    )
                    result.devices_per_node = args.devices_per_node
                    record(result, r // len(kinds))
        if "devices-preempt" in workloads:
            for nodes, gang in args.devices_preemption:
                plane.ensure_nodes(nodes)
                plane.ensure_devices(nodes, args.devices_per_node)
                for r, kind in enumerate(order(args.rounds, kinds)):
                    if kind not in wanted or (kind == "K" and nodes not in kube_scales):
                        continue
                    timeout = args.kube_preemption_timeout if kind == "K" else 120.0
                    label = f"devices-preempt-{nodes}-{kind.lower()}{r}"
                    result = preempt(plane, kind, label, nodes, gang, timeout, devices=args.devices_per_node)
                    result.devices_per_node = args.devices_per_node
                    record(result, r // len(kinds))
    finally:
        stop_all(plane)
    print(f"load after: {os.getloadavg()}")
    report(results)
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(r) for r in results], indent=2))
    return 1 if any(r.failure for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
