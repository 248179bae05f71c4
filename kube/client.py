"""The API client, from a kubeconfig or the pod's in-cluster service account: one builder for every process.

The scheduler, the webhook and its certificate controller all connect through `api_client`. Each sets its
own User-Agent (`phalanx-scheduler/0.1.0`, `phalanx-webhook/0.1.0`), which is how the API server's audit
log and metrics tell their requests apart.

urllib3's own retries are off: by default it sends a GET, PUT or DELETE that timed out three more times,
silently, and a request bounded by a 2 s timeout could take 8 s (a Lease renewal at stop did). Our retries
(`kube.backoff`) are the only ones, with backoff, logged, and ended by a stop.
"""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

from kubernetes import client, config

POOL_SIZE = 64
"""Connections kept to the API server: the scheduler's write workers send in parallel."""


def user_agent(component: str) -> str:
    return f"phalanx-{component}/{importlib.metadata.version('phalanx')}"


def api_client(kubeconfig: str | Path | None, component: str) -> client.ApiClient:
    """A client for `kubeconfig`, or the in-cluster service account when it is None or empty."""
    configuration = client.Configuration()
    if kubeconfig:
        config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=str(kubeconfig), client_configuration=configuration
        )
    else:
        config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    configuration.connection_pool_maxsize = POOL_SIZE
    configuration.retries = False
    # The loaders' token-refresh hook sets `host` again before every request, and while the proxy
    # comes from the environment each of those re-reads every environment variable (~65 us of a
    # Binding's ~1 ms of CPU). Pinning the proxy the environment gives for this host keeps it as is.
    configuration.proxy = configuration.proxy
    api = client.ApiClient(configuration)
    api.user_agent = user_agent(component)
    return api
