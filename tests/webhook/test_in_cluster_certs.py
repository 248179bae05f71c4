"""`phalanx webhook` in the chart's self-managed certificate mode, against the loopback API server.

The process starts with no certificate files: the certificate controller (`certs/`) creates the Secret,
writes the files gunicorn serves, and puts the CA into `caBundle`; a client trusting only that CA then
talks to the webhook under the Service's DNS name.
"""

from __future__ import annotations

import base64
from pathlib import Path

from tests.apiserver.server import ApiServer
from tests.webhook.harness import fixture, seed, start_webhook

NAMESPACE, SECRET, SERVICE = "phalanx-system", "phalanx-webhook-tls", "phalanx-webhook"


def test_self_managed_certificate_is_created_served_and_injected(tmp_path: Path) -> None:
    api = ApiServer().start()
    try:
        seed(api)
        api.apply(fixture("objects/mutatingwebhookconfiguration.json"))
        api.apply(fixture("objects/validatingwebhookconfiguration.json"))
        env = {
            "PHALANX_CERT_MODE": "self-managed",
            "PHALANX_CERT_NAMESPACE": NAMESPACE,
            "PHALANX_CERT_SECRET": SECRET,
            "PHALANX_CERT_SERVICE": SERVICE,
            "PHALANX_CERT_MUTATING_WEBHOOK_CONFIGURATION": "fixture-recorder",
            "PHALANX_CERT_VALIDATING_WEBHOOK_CONFIGURATION": "fixture-recorder",
        }
        hook = start_webhook(
            tmp_path,
            api.kubeconfig(tmp_path / "kubeconfig"),
            env_extra=env,
            server_hostname=f"{SERVICE}.{NAMESPACE}.svc",
        )
        try:
            secret = api.get("secrets", SECRET, NAMESPACE)
            assert secret is not None
            bundle = base64.b64decode(secret["data"]["ca.crt"])
            assert hook.ca_file.read_bytes() == bundle
            for plural in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations"):
                config = api.get(plural, "fixture-recorder", group="admissionregistration.k8s.io")
                assert config is not None
                # the Secret's CA first; the CA the recorded configuration trusted stays beside it for a grace period
                trusted = [base64.b64decode(w["clientConfig"]["caBundle"]) for w in config["webhooks"]]
                assert all(b.startswith(bundle) for b in trusted)
            status, body = hook.post("validate", fixture("admission/pod-update-add-gate-422-mutating.json"))
            assert (status, body["response"]["allowed"]) == (200, False)
        finally:
            hook.stop()
    finally:
        api.stop()
