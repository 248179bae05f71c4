"""The pod's own ServiceAccount, read from its token: the owner of what a component creates at run time.

The scheduler's Lease and the webhook's certificate Secret are made by the running processes, not by
Helm, so `helm uninstall` would leave them behind; and they cannot be removed by the processes
themselves at uninstall, because Helm deletes their RBAC as it deletes their Deployments. Owned by the
ServiceAccount the chart creates, they go with it: the garbage collector removes them once it is
deleted, even when a replica still running re-creates one a moment later. The ServiceAccount's name and
uid are in the projected token's claims (`kubernetes.io.serviceaccount`), so no API read or RBAC rule is
needed. Outside a pod (`--kubeconfig`) there is no token and nothing is owned.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

TOKEN = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")


def owner_reference(token_file: Path = TOKEN) -> dict[str, Any] | None:
    """`ownerReferences` entry naming this pod's ServiceAccount, or None outside a pod or with a legacy token."""
    try:
        payload = token_file.read_text().strip().split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        account = claims["kubernetes.io"]["serviceaccount"]
        return {"apiVersion": "v1", "kind": "ServiceAccount", "name": str(account["name"]), "uid": str(account["uid"])}
    except (OSError, IndexError, KeyError, TypeError, ValueError):
        return None
