"""Phalanx installed on the real control plane as the chart installs it, with our real processes.

What the chart renders is applied as it is, with the changes a loopback cluster needs: the
ServiceAccounts' bindings name the control plane's unprivileged `user` instead (the identity our
processes run as, so the real RBAC authorizer judges every request), the webhook
configurations reach `phalanx webhook` by `url:` on its loopback port instead of through a Service, and the
explain API's Service is an ExternalName (`localhost`), which kube-apiserver's aggregator dials at the
APIService's port, where the scheduler serves it (an APIService takes no `url:`). The scheduler serves it with the
certificate the webhook's controller made (it names the scheduler's Service, and its CA is injected into the
APIService), as the chart's scheduler mounts the same Secret.
The chart's viewer ClusterRole is bound to `user` too, as an administrator binds it for the people who
run `kubectl phalanx`; its ConfigMaps (the scheduler's configuration, which the plugin reads) are applied.
The webhook runs in the chart's self-managed certificate mode: its certificate controller creates
the TLS Secret and injects `caBundle`, under the same RBAC.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from tests.chart.conftest import CHART, IMAGE_REPOSITORY, NAMESPACE, RELEASE, Helm
from tests.e2e.control_plane import ROOT, ControlPlane, Json, object_path
from tests.polling import wait_for

RBAC_KINDS = ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
WEBHOOK_KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
LOOPBACK = "127.0.0.1"
LEASE = f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases/phalanx-scheduler"
PAUSED = "e2e-paused"
"""The Lease holder `Stack.pause()` writes: no scheduler is called so, so none leads while it holds."""
CERT_RESYNC_SECONDS = 5
"""The chart's minimum: each webhook replica re-reads its certificate Secret this often."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


def render(helm: Helm) -> list[Json]:
    """The chart as `helm install` would apply it, plus the loopback certificate name and the native API."""
    done = helm.run(
        "template",
        RELEASE,
        str(CHART),
        "--namespace",
        NAMESPACE,
        "--include-crds",
        "--set",
        f"certificates.extraSANs={{{LOOPBACK}}}",
        "--set",
        "webhook.nativeWorkloadAPI=true",
        "--set",
        f"image.repository={IMAGE_REPOSITORY}",
        "--set",
        f"certificates.resyncSeconds={CERT_RESYNC_SECONDS}",
    )
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def bound_to_user(doc: Json) -> Json:
    """A (Cluster)RoleBinding whose ServiceAccount subjects become the control plane's `user`."""
    user = {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "user"}
    subjects = [user if s["kind"] == "ServiceAccount" else s for s in doc.get("subjects", [])]
    return {**doc, "subjects": subjects}


def viewer_binding(role: Json) -> Json:
    """What an administrator applies so that `user` may run `kubectl phalanx` (README, "Why is it pending?")."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": f"{role['metadata']['name']}-user"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role["metadata"]["name"]},
        "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "user"}],
    }


def reached_on_loopback(doc: Json, port: int) -> Json:
    """The explain API's APIService, or its Service, for a scheduler serving on `localhost:port`."""
    if doc["kind"] == "APIService":
        service = {**doc["spec"]["service"], "port": port}
        return {**doc, "spec": {**doc["spec"], "service": service}}
    spec = {"type": "ExternalName", "externalName": "localhost", "ports": doc["spec"]["ports"]}
    return {**doc, "spec": spec}


def reached_by_url(doc: Json, port: int) -> Json:
    """A webhook configuration whose webhooks call `https://127.0.0.1:port/<path>` (no Service on loopback)."""
    hooks = []
    for hook in doc["webhooks"]:
        path = hook["clientConfig"]["service"]["path"]
        client = {"url": f"https://{LOOPBACK}:{port}{path}"}
        hooks.append({**hook, "clientConfig": client})
    return {**doc, "webhooks": hooks}


class Process:
    """One `phalanx` command as a child process, its output in a log file."""

    def __init__(self, name: str, args: list[str], log_dir: Path, env: dict[str, str] | None = None) -> None:
        self.name = name
        self.args = [sys.executable, "-m", "phalanx.cli", *args]
        self.log_path = log_dir / f"{name}.log"
        self.env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Process:
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                self.args, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, env=self.env, start_new_session=True
            )
        return self

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def records(self, *events: str) -> list[Json]:
        """The process's JSON log lines (the chart's `logFormat: json`) for any of `events`, in order."""
        found = []
        for line in self.log().splitlines():
            if not line.startswith("{") or not any(f'"{event}"' in line for event in events):
                continue
            try:
                record = json.loads(line)
            except ValueError:
                continue  # a line cut short by a process still writing it
            if record.get("event") in events:
                found.append(record)
        return found

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20) -> None:
        if not self.running:
            return
        assert self.proc is not None
        self.proc.send_signal(sig)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)

    def kill(self) -> None:
        """SIGKILL: no cleanup and no Lease release, as a lost node would do."""
        self.stop(signal.SIGKILL)


class Stack:
    """The rendered chart on the control plane, the webhook serving, and one scheduler at a time."""

    def __init__(self, plane: ControlPlane, helm: Helm, work: Path) -> None:
        self.plane = plane
        self.api = plane.api()
        self.work = work
        self.docs = render(helm)
        self.webhook_port = free_port()
        self.explain_port = free_port()
        """Where the scheduler (not a standby started beside it) serves the explain API."""
        self.webhook: Process | None = None
        self.scheduler: Process | None = None
        self._generation = 0

    def of_kind(self, *kinds: str) -> list[Json]:
        return [d for d in self.docs if d["kind"] in kinds]

    @property
    def viewer_role(self) -> Json:
        """The ClusterRole `kubectl phalanx` needs (the chart's component `viewer`)."""
        (role,) = [
            d
            for d in self.of_kind("ClusterRole")
            if d["metadata"].get("labels", {}).get("app.kubernetes.io/component") == "viewer"
        ]
        return role

    def install(self) -> None:
        for crd in self.of_kind("CustomResourceDefinition"):
            self.api.apply(crd)
        for crd in self.of_kind("CustomResourceDefinition"):
            path = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd['metadata']['name']}"
            wait_for(lambda path=path: _established(self.api.get(path)), what=f"{path} established")
        self.api.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        for doc in self.of_kind(*RBAC_KINDS):
            self.api.apply(bound_to_user(doc) if doc["kind"].endswith("Binding") else doc)
        for doc in self.of_kind("ConfigMap"):
            self.api.apply(doc)
        self.api.apply(viewer_binding(self.viewer_role))
        for doc in self.of_kind(*WEBHOOK_KINDS):
            self.api.apply(reached_by_url(doc, self.webhook_port))
        for doc in (*self.of_kind("APIService"), self.explain_service):
            self.api.apply(reached_on_loopback(doc, self.explain_port))

    @property
    def explain_service(self) -> Json:
        (api_service,) = self.of_kind("APIService")
        name = api_service["spec"]["service"]["name"]
        return next(d for d in self.of_kind("Service") if d["metadata"]["name"] == name)

    def container(self, component: str) -> Json:
        deployment = next(d for d in self.of_kind("Deployment") if d["metadata"]["name"].endswith(component))
        return dict(deployment["spec"]["template"]["spec"]["containers"][0])

    def _env_of(self, component: str, pod_name: str) -> dict[str, str]:
        """The container's environment as the chart sets it; the downward API resolved as the kubelet would."""
        env: dict[str, str] = {}
        for var in self.container(component).get("env", []):
            if "value" in var:
                env[var["name"]] = str(var["value"])
            elif var.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "metadata.name":
                env[var["name"]] = pod_name
            elif var.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "metadata.namespace":
                env[var["name"]] = NAMESPACE
        return env

    def start_webhook(self) -> Process:
        certs = self.work / "webhook-certs"
        certs.mkdir(exist_ok=True)
        args = [
            "webhook",
            "--bind",
            f"{LOOPBACK}:{self.webhook_port}",
            "--tls-cert-file",
            str(certs / "tls.crt"),
            "--tls-private-key-file",
            str(certs / "tls.key"),
            "--kubeconfig",
            str(self.plane.user_kubeconfig),
            "--workers",
            "1",
            "--threads",
            "8",
        ]
        self.webhook = Process("webhook", args, self.work, self._env_of("webhook", "phalanx-webhook-0")).start()
        wait_for(self._webhook_serving, timeout=60, what="the webhook to get its certificate and serve")
        return self.webhook

    def _webhook_serving(self) -> bool:
        assert self.webhook is not None
        if not self.webhook.running:
            raise AssertionError(f"phalanx webhook exited:\n{self.webhook.log()[-3000:]}")
        configs = [self.api.get(object_path(d)) for d in self.of_kind(*WEBHOOK_KINDS)]
        injected = all(c and all(h["clientConfig"].get("caBundle") for h in c["webhooks"]) for c in configs)
        if not injected:
            return False
        try:
            with socket.create_connection((LOOPBACK, self.webhook_port), timeout=1):
                return True
        except OSError:
            return False

    def scheduler_config(self, **overrides: Any) -> Json:
        """The chart's SchedulerConfiguration, with short backoff so retries happen within a test."""
        config_map = next(d for d in self.of_kind("ConfigMap") if d["metadata"]["name"].endswith("scheduler"))
        config: Json = yaml.safe_load(config_map["data"]["config.yaml"])
        config["leaderElection"].update(
            {"leaderElect": True, "leaseDurationSeconds": 3, "renewDeadlineSeconds": 2, "retryPeriodSeconds": 0.5}
        )
        config.update({"backoffSeconds": 0.2, "maxBackoffSeconds": 1.0, **overrides})
        return config

    def start_scheduler(
        self, standby: bool = False, paused: bool = False, kubeconfig: Path | None = None, **overrides: Any
    ) -> Process:
        """A new `phalanx scheduler` (the previous one must be stopped or killed first), serving the explain API on
        `explain_port`, connected with `kubeconfig` (the unprivileged user's by default).

        With `standby`, a second replica beside the running one, as the chart runs two: it is returned once its
        caches are synced, waiting for the Lease, and the caller stops it (it is not `scheduler`; it serves the
        explain API on a port of its own, which no APIService names). With `paused`, the scheduler, but waiting as a
        standby behind a Lease `pause()` holds, until `resume()`.
        """
        assert standby or self.scheduler is None or not self.scheduler.running, "one scheduler at a time"
        self._generation += 1
        name = f"scheduler-{self._generation}"
        config_path = self.work / f"{name}.yaml"
        config_path.write_text(yaml.safe_dump(self.scheduler_config(**overrides)))
        certs = self.work / "webhook-certs"
        args = [
            "scheduler",
            "--kubeconfig",
            str(kubeconfig or self.plane.user_kubeconfig),
            "--config",
            str(config_path),
            "--metrics-bind",
            f"{LOOPBACK}:0",
            "--identity",
            name,
            "--explain-bind",
            f"{LOOPBACK}:{0 if standby else self.explain_port}",
            "--tls-cert-file",
            str(certs / "tls.crt"),
            "--tls-private-key-file",
            str(certs / "tls.key"),
        ]
        process = Process(name, args, self.work, self._env_of("scheduler", name)).start()
        if standby or paused:
            wait_for(lambda: "caches synced" in process.log(), timeout=120, what=f"{name} to sync its caches")
            if standby:
                return process
        self.scheduler = process
        if not paused:
            wait_for(lambda: self._holds_lease(LEASE, name), timeout=60, what=f"{name} to take the Lease")
        self._explain_api_available()
        return self.scheduler

    def _explain_api_available(self) -> None:
        """Until kube-apiserver finds the explain API available again. Its availability controller checks an
        APIService when it changes, and retries a failed check with a growing backoff (up to its resync, 30 s),
        so the APIService is touched first: the scheduler listens on its port again only now."""
        (api_service,) = self.of_kind("APIService")
        path = object_path(api_service)
        touched = {"metadata": {"annotations": {"e2e.phalanx.dev/touched": str(self._generation)}}}
        assert self.api.patch(path, touched).status == 200

        def available() -> bool:
            conditions = ((self.api.get(path) or {}).get("status") or {}).get("conditions") or []
            return any(c["type"] == "Available" and c["status"] == "True" for c in conditions)

        wait_for(available, timeout=60, interval=0.2, what="kube-apiserver to find the explain API available")

    def pause(self) -> Process:
        """Stop the scheduler and start one that cannot lead: the Lease held by an identity that never renews it,
        for an hour. The new one waits as a standby, answers the explain API from its informers and schedules
        nothing, until `resume()`."""
        if self.scheduler is not None:
            self.scheduler.stop()
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        spec = {"holderIdentity": PAUSED, "leaseDurationSeconds": 3600, "acquireTime": now, "renewTime": now}
        meta = {"name": LEASE.rsplit("/", 1)[1], "namespace": NAMESPACE}
        self.api.apply({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta, "spec": spec})
        return self.start_scheduler(paused=True)

    def resume(self) -> None:
        """Let go of the Lease `pause()` held: the paused scheduler takes it and schedules."""
        assert self.scheduler is not None
        reply = self.api.delete(LEASE)
        assert reply.status in (200, 404), reply.message
        name = self.scheduler.name
        wait_for(lambda: self._holds_lease(LEASE, name), timeout=60, what=f"{name} to take the Lease")

    def _holds_lease(self, path: str, identity: str) -> bool:
        assert self.scheduler is not None
        if not self.scheduler.running:
            raise AssertionError(f"phalanx scheduler exited:\n{self.scheduler.log()[-3000:]}")
        lease = self.api.get(path)
        return lease is not None and lease["spec"].get("holderIdentity") == identity

    def stop(self) -> None:
        for process in (self.scheduler, self.webhook):
            if process is not None:
                process.stop()


def _established(crd: Json | None) -> bool:
    conditions = ((crd or {}).get("status") or {}).get("conditions") or []
    return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)
