"""Removing the webhook's registration with the apiserver when Phalanx is uninstalled.

Run by the chart's pre-delete hook, before Helm deletes the webhook Deployment: a webhook configuration
whose Service has no endpoints makes every matching request fail (failurePolicy Fail) or wait for the
timeout. The self-managed certificate Secret goes too, since Helm never owned it; a Secret owned by
Helm or by cert-manager is left to its owner (deleting one that cert-manager still manages would only
make it issue a new one, orphaned once the Certificate is gone).
"""

from __future__ import annotations

from collections.abc import Callable

import structlog
from kubernetes import client

from kube.errors import NotFound, translated

log = structlog.get_logger(__name__)


def remove_registration(
    api_client: client.ApiClient,
    *,
    namespace: str,
    secret_name: str,
    mutating_webhook_configuration: str,
    validating_webhook_configuration: str,
) -> list[str]:
    """Delete both configurations and the certificate Secret (none when `secret_name` is empty).

    Returns what existed. Idempotent.
    """
    admission = client.AdmissionregistrationV1Api(api_client)
    core = client.CoreV1Api(api_client)
    targets: list[tuple[str, Callable[[], object]]] = [
        (
            f"mutatingwebhookconfiguration/{mutating_webhook_configuration}",
            lambda: admission.delete_mutating_webhook_configuration(mutating_webhook_configuration),
        ),
        (
            f"validatingwebhookconfiguration/{validating_webhook_configuration}",
            lambda: admission.delete_validating_webhook_configuration(validating_webhook_configuration),
        ),
    ]
    if secret_name:
        targets.append(
            (f"secret/{namespace}/{secret_name}", lambda: core.delete_namespaced_secret(secret_name, namespace))
        )
    removed = []
    for ref, delete in targets:
        try:
            with translated():
                delete()
        except NotFound:
            continue
        log.info("webhook registration removed", object=ref)
        removed.append(ref)
    return removed
