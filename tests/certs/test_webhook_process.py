"""`phalanx webhook` in the chart's self-managed mode: it serves a certificate the apiserver trusts.

End to end through the environment the chart renders: the process creates the Secret, injects
caBundle and serves HTTPS with the files; the client verifies as the apiserver would, with the
injected caBundle and the Service's DNS name.
"""

from __future__ import annotations

import base64
import os
import re
import socket
import ssl
import subprocess
import sys
import threading
from pathlib import Path

from tests.apiserver import ApiServer
from tests.certs.test_controller import MUTATING, NS, SECRET, VALIDATING, _webhook_configuration

SERVICE = "phalanx-webhook"


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


def test_self_managed_webhook_serves_a_certificate_the_apiserver_trusts(apiserver: ApiServer, tmp_path: Path) -> None:
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
    }
    certs = tmp_path / "certs"
    command = [sys.executable, "-m", "phalanx.cli", "webhook", "--bind=127.0.0.1:0", "--workers=1"]
    command += [f"--tls-cert-file={certs / 'tls.crt'}", f"--tls-private-key-file={certs / 'tls.key'}"]
    command += [f"--kubeconfig={apiserver.kubeconfig(tmp_path / 'kubeconfig')}"]
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    output: list[str] = []
    listening = threading.Event()
    port: list[int] = []

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            output.append(line)
            if match := re.search(r"Listening at: https://127\.0\.0\.1:(\d+)", line):
                port.append(int(match.group(1)))
                listening.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert listening.wait(60), "".join(output)
        config = apiserver.get("validatingwebhookconfigurations", VALIDATING, group="admissionregistration.k8s.io")
        assert config is not None
        ca_bundle = base64.b64decode(config["webhooks"][0]["clientConfig"]["caBundle"])

        response = _get(port[0], "/healthz", ca_bundle)

        assert response.startswith("HTTP/1.1 200"), response
    finally:
        process.terminate()
        process.wait(timeout=30)
        reader.join(timeout=5)
