"""The webhook's self-managed certificate on the real API server: created, injected, and repaired when broken."""

from __future__ import annotations

import base64

from tests.chart.conftest import NAMESPACE
from tests.e2e.control_plane import Json, object_path
from tests.e2e.objects import Pool
from tests.e2e.stack import CERT_RESYNC_SECONDS, WEBHOOK_KINDS, Stack
from tests.polling import wait_for

SECRET = f"/api/v1/namespaces/{NAMESPACE}/secrets/phalanx-webhook-tls"


def injected_bundles(stack: Stack) -> set[str]:
    configs: list[Json | None] = [stack.api.get(object_path(d)) for d in stack.of_kind(*WEBHOOK_KINDS)]
    return {h["clientConfig"].get("caBundle", "") for c in configs if c for h in c["webhooks"]}


def test_broken_secret_is_replaced_and_admission_goes_on(phalanx: Stack, pool: Pool) -> None:
    secret = phalanx.api.get(SECRET)
    assert secret is not None
    assert injected_bundles(phalanx) == {secret["data"]["ca.crt"]}

    garbage = base64.b64encode(b"not a certificate").decode()
    reply = phalanx.api.patch(SECRET, {"data": {"tls.crt": garbage}})
    assert reply.status == 200, reply.message

    def repaired() -> Json | None:
        current = phalanx.api.get(SECRET) or {}
        data = current.get("data", {})
        fixed = data.get("tls.crt") not in (None, garbage) and injected_bundles(phalanx) == {data.get("ca.crt")}
        return current if fixed else None

    fixed = wait_for(repaired, timeout=6 * CERT_RESYNC_SECONDS, what="the Secret replaced and caBundle injected")
    assert fixed["data"]["ca.crt"] != secret["data"]["ca.crt"], "an unusable Secret is replaced whole, CA included"

    pool.create(pool.pod_group("g", {"gang": {"minCount": 1}}))

    def admitted() -> bool:
        reply = pool.api.request("POST", f"/api/v1/namespaces/{pool.namespace}/pods", pool.pod("p", group="g"))
        return reply.status == 201

    wait_for(admitted, timeout=4 * CERT_RESYNC_SECONDS, what="a pod admitted through the webhook's new certificate")
