"""`kubectl phalanx explain podgroup` and `status -A` answered by the running scheduler's explain API (issue 41), end
to end as a user runs them, against the same commands computing the answer themselves.

The cluster is `real_apiserver.py --workloads explain`'s: `--nodes` full nodes (32 CPU), `--pods` running pods spread
over them (created bound, node i's in priority class fill-(i % 5)), and a 64-pod gang (16 CPU members) whose dry run
preempts 320 pods. `phalanx scheduler` serves the API (`--explain-bind`) as a standby: its Lease is held by an
identity that never renews it, so it answers from its informers and decides nothing, and the cluster stays as it
is between runs. kube-apiserver reaches it through an `APIService` and an ExternalName Service (`localhost`), with
its front proxy. Each command runs `--runs` times as the `kubectl-phalanx` executable (admin kubeconfig), timed from
process start to exit; then `--config` (the default SchedulerConfiguration, in a file) makes the same command list
the cluster and compute the answer itself, as without the API.

Reported per command: wall seconds (median and each run), the command's CPU (its process, user + system), and for
the served runs the scheduler's own figures from its `explanation served` log lines: seconds in all, reading its
cache, computing (the dry run), encoding, and the CPU the request took in the scheduler.

    .venv/bin/python bench/explain_api.py --nodes 1000 --pods 10000

Not part of `make test`. Run it alone (`flock /work/bench.lock`): any other load changes every figure.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from certs.authority import generate_ca, issue_serving_certificate  # noqa: E402
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
    """The APIService and its Service for a scheduler on `localhost:port`; the serving pair it names."""
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
    return cert, key


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=10000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--keep", action="store_true", help="keep the control plane's folder")
    args = parser.parse_args()
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


if __name__ == "__main__":
    main()
