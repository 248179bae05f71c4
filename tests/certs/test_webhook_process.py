"""`phalanx webhook` in the chart's self-managed mode: it serves a certificate the apiserver trusts.

End to end through the environment the chart renders: the process creates the Secret, injects
caBundle and serves HTTPS with the files; the client verifies as the apiserver would, with the
injected caBundle and the Service's DNS name.
"""

from __future__ import annotations

import base64
import json
import os
import re
import socket
import ssl
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.apiserver import ApiServer
from tests.certs.test_controller import MUTATING, NS, SECRET, VALIDATING, _webhook_configuration

SERVICE = "phalanx-webhook"
TOKEN = "phalanx-test-token-0b6c2f9a71e34d58"


def _get(port: int, path: str, ca_bundle: bytes) -> str:
    context = ssl.create_default_context(cadata=ca_bundle.decode())
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname=f"{SERVICE}.{NS}.svc") as tls,
    ):
        tls.sendall(f"GET {path} HTTP/1.1\r\nHost: {SERVICE}.{NS}.svc\r\nConnection: close\r\n\r\n".encode())
        chunks = []
        while chunk := tls.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks).decode()


class WebhookProcess:
    """`phalanx webhook` in self-managed mode against the loopback server, its output collected."""

    def __init__(self, apiserver: ApiServer, tmp_path: Path, kubeconfig: Path, **extra_env: str) -> None:
        apiserver.create(_webhook_configuration("MutatingWebhookConfiguration", MUTATING))
        apiserver.create(_webhook_configuration("ValidatingWebhookConfiguration", VALIDATING))
        env = {
            **os.environ,
            "PHALANX_CERT_MODE": "self-managed",
            "PHALANX_CERT_NAMESPACE": NS,
            "PHALANX_CERT_SECRET": SECRET,
            "PHALANX_CERT_SERVICE": SERVICE,
            "PHALANX_CERT_MUTATING_WEBHOOK_CONFIGURATION": MUTATING,
            "PHALANX_CERT_VALIDATING_WEBHOOK_CONFIGURATION": VALIDATING,
            **extra_env,
        }
        certs = tmp_path / "certs"
        command = [sys.executable, "-m", "phalanx.cli", "webhook", "--bind=127.0.0.1:0", "--workers=1"]
        command += [f"--tls-cert-file={certs / 'tls.crt'}", f"--tls-private-key-file={certs / 'tls.key'}"]
        command += [f"--kubeconfig={kubeconfig}"]
        self.process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.output: list[str] = []
        self.listening = threading.Event()
        self.port: list[int] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.output.append(line)
            if match := re.search(r"Listening at: https://127\.0\.0\.1:(\d+)", line):
                self.port.append(int(match.group(1)))
                self.listening.set()

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)
        self.reader.join(timeout=5)


def test_self_managed_webhook_serves_a_certificate_the_apiserver_trusts(apiserver: ApiServer, tmp_path: Path) -> None:
    webhook = WebhookProcess(apiserver, tmp_path, apiserver.kubeconfig(tmp_path / "kubeconfig"))
    output, listening, port = webhook.output, webhook.listening, webhook.port
    try:
        assert listening.wait(60), "".join(output)
        config = apiserver.get("validatingwebhookconfigurations", VALIDATING, group="admissionregistration.k8s.io")
        assert config is not None
        ca_bundle = base64.b64decode(config["webhooks"][0]["clientConfig"]["caBundle"])

        response = _get(port[0], "/healthz", ca_bundle)

        assert response.startswith("HTTP/1.1 200"), response
    finally:
        webhook.stop()


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_a_failed_certificate_sync_logs_no_token_and_a_short_record(
    apiserver: ApiServer, tmp_path: Path, log_format: str
) -> None:
    """The API refuses the Secret after start: the failure is logged with a plain traceback, no locals,
    no bearer token, no private key (docs/DESIGN.md, invariant 8; issue 11, defect 5)."""
    config = json.loads(apiserver.kubeconfig(tmp_path / "kubeconfig").read_text())
    config["users"][0]["user"]["token"] = TOKEN
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(json.dumps(config))
    webhook = WebhookProcess(
        apiserver, tmp_path, kubeconfig, PHALANX_CERT_RESYNC_SECONDS="1", PHALANX_LOG_FORMAT=log_format
    )
    try:
        assert webhook.listening.wait(60), "".join(webhook.output)
        apiserver.fail("GET", f"/api/v1/namespaces/{NS}/secrets/{SECRET}", 403, times=10_000)
        deadline = time.monotonic() + 30
        while not any("certificate sync failed" in line for line in webhook.output) and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(0.5)  # the rest of the record
    finally:
        webhook.stop()
    text = "".join(webhook.output)
    assert "certificate sync failed" in text
    assert TOKEN not in text
    assert "PRIVATE KEY" not in text
    start = next(i for i, line in enumerate(webhook.output) if "certificate sync failed" in line)
    if log_format == "json":
        record = json.loads(webhook.output[start])
        lines = str(record["exception"]).splitlines()
    else:
        following = webhook.output[start + 1 :]
        end = next((i for i, line in enumerate(following) if re.match(r"\d{4}-\d\d-\d\dT", line)), len(following))
        lines = following[:end]
    assert "Traceback" in "".join(lines)
    assert len(lines) < 100, "".join(lines[:20])
