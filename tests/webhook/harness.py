"""A real `phalanx webhook` (gunicorn over TLS) against the loopback API server, for HTTPS tests.

The cluster is seeded with the recorded objects the admission fixtures refer to: PriorityClasses
phalanx-high and phalanx-default (globalDefault), Queues root and research, the native Workload
ml-team/training, the PodGroups pg1 and training-workers-0.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.client import HTTPSConnection
from pathlib import Path
from typing import Any

import jsonpatch

from certs.authority import generate_ca, issue_serving_certificate
from tests.apiserver.server import ApiServer
from tests.recorded import RECORDED

FIXTURES = RECORDED
REPO = Path(__file__).resolve().parents[2]


def fixture(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((FIXTURES / name).read_text())
    return loaded


def seed(api: ApiServer) -> None:
    for name in ("priorityclass-preemption-toleration.json", "priorityclass-globaldefault.json", "workload.json"):
        api.apply(fixture(f"objects/{name}"))
    api.apply(fixture("objects/phalanx-queue.json"))
    root = {"apiVersion": "scheduling.phalanx.dev/v1alpha1", "kind": "Queue", "metadata": {"name": "root"}}
    api.apply({**root, "spec": {}})
    api.apply(fixture("objects/phalanx-podgroup.json"))
    api.apply(fixture("objects/native-podgroup.json"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class Webhook:
    """A running webhook process; `post` sends one AdmissionReview over a kept-alive HTTPS connection."""

    process: subprocess.Popen[bytes]
    port: int
    ca_file: Path
    cert_file: Path
    key_file: Path
    log_file: Path
    server_hostname: str | None = None
    _conn: HTTPSConnection | None = None

    def context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca_file))

    def connection(self) -> HTTPSConnection:
        """An HTTPS connection to 127.0.0.1 that verifies the certificate for `server_hostname` if set."""
        conn = HTTPSConnection("127.0.0.1", self.port, context=self.context(), timeout=10)
        if self.server_hostname:
            name, context = self.server_hostname, self.context()

            def connect() -> None:
                raw = socket.create_connection(("127.0.0.1", self.port), timeout=10)
                conn.sock = context.wrap_socket(raw, server_hostname=name)

            conn.connect = connect  # type: ignore[method-assign]
        return conn

    def fresh_request(self, method: str, path: str) -> int:
        """One request on a new connection, so that several workers get asked."""
        conn = self.connection()
        try:
            conn.request(method, path)
            return conn.getresponse().status
        finally:
            conn.close()

    def request(self, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes, str]:
        for attempt in range(2):
            if self._conn is None:
                self._conn = self.connection()
            try:
                self._conn.request(method, path, body=body, headers={"Content-Type": "application/json"})
                resp = self._conn.getresponse()
                return resp.status, resp.read(), resp.getheader("Content-Type") or ""
            except (ConnectionError, OSError):
                self._conn.close()
                self._conn = None
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def post(self, endpoint: str, review: dict[str, Any], timeout: str = "5s") -> tuple[int, dict[str, Any]]:
        """POST a review as the API server does, with its webhook `timeout` in the query."""
        status, body, _ = self.request("POST", f"/{endpoint}?timeout={timeout}", json.dumps(review).encode())
        decoded: dict[str, Any] = json.loads(body)
        return status, decoded

    def stop(self) -> str:
        if self._conn is not None:
            self._conn.close()
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        return self.log_file.read_text()


def write_certificates(directory: Path) -> tuple[Path, Path, Path]:
    ca = generate_ca()
    serving = issue_serving_certificate(ca, "phalanx-webhook", "phalanx-system", extra_sans=("127.0.0.1",))
    paths = directory / "ca.crt", directory / "tls.crt", directory / "tls.key"
    for path, data in zip(paths, (ca.cert_pem, serving.cert_pem, serving.key_pem), strict=True):
        path.write_bytes(data)
    return paths


def start_webhook(
    directory: Path,
    kubeconfig: Path,
    workers: int = 2,
    extra: tuple[str, ...] = (),
    env_extra: dict[str, str] | None = None,
    server_hostname: str | None = None,
) -> Webhook:
    """Start `phalanx webhook`; with `env_extra` selecting in-cluster certificates, no files are written here."""
    if env_extra:
        ca_file, cert_file, key_file = directory / "ca.crt", directory / "tls.crt", directory / "tls.key"
    else:
        ca_file, cert_file, key_file = write_certificates(directory)
    port = free_port()
    log_file = directory / "webhook.log"
    env = {**os.environ, "PYTHONPATH": str(REPO), **(env_extra or {})}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    command = [
        sys.executable, "-m", "phalanx.cli", "webhook", "--bind", f"127.0.0.1:{port}",
        "--tls-cert-file", str(cert_file), "--tls-private-key-file", str(key_file),
        "--kubeconfig", str(kubeconfig), "--workers", str(workers), *extra,
    ]  # fmt: skip
    with log_file.open("wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=REPO, env=env)
    hook = Webhook(process, port, ca_file, cert_file, key_file, log_file, server_hostname=server_hostname)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"webhook exited {process.returncode}:\n{log_file.read_text()}")
        try:
            if all(hook.fresh_request("GET", "/readyz") == 200 for _ in range(workers * 2)):
                return hook
        except (OSError, ssl.SSLError):
            pass
        time.sleep(0.1)
    hook.stop()
    raise RuntimeError(f"webhook not ready in 30 s:\n{log_file.read_text()}")


def apply_patch(obj: dict[str, Any], response: dict[str, Any]) -> dict[str, Any]:
    """The object as the apiserver would store it after applying the response's JSONPatch."""
    if "patch" not in response:
        return obj
    assert response["patchType"] == "JSONPatch"
    operations = json.loads(base64.b64decode(response["patch"]))
    patched: dict[str, Any] = jsonpatch.apply_patch(obj, operations)
    return patched


def running(api: ApiServer, directory: Path) -> Iterator[Webhook]:
    hook = start_webhook(directory, api.kubeconfig(directory / "kubeconfig"))
    try:
        yield hook
    finally:
        hook.stop()
