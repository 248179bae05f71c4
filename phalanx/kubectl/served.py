"""The scheduler's explain API (`explain.phalanx.dev/v1alpha1`), as `kubectl phalanx` reaches it through the API server.

The running scheduler computes the answer from the cache it schedules from, with its own configuration, and the
API server checks the user's own rights first (`scheduler/serve`). It is found by discovery, whatever the release
is called: `GET /apis/explain.phalanx.dev/v1alpha1`, which every authenticated user may read, answers once an
`APIService` registers the group. 404 there: the API is not installed (an older chart, or `explainAPI.enabled:
false`), and the plugin computes the answer itself (`live.py`), saying so. 503: it is registered but no scheduler
answers, which is an error: an answer computed elsewhere would not be the scheduler's.

A 429 (too many explanations at once, or the last ones took the CPU the scheduler allows them) is retried after the
Retry-After the scheduler gave, up to `WAIT_SECONDS` each time and a few times, saying so on stderr when the wait is
long enough to notice: during a large backlog one answer can hold the next back for tens of seconds.
"""

from __future__ import annotations

import sys
import time
import urllib.parse
from typing import Any

import orjson

from kube.routes import CustomObjectsApi
from phalanx.kubectl.connection import Connection, server_error
from phalanx.kubectl.errors import KubectlError

GROUP = "explain.phalanx.dev"
VERSION = "v1alpha1"
API_SERVICE = f"{VERSION}.{GROUP}"
PREFIX = f"/apis/{GROUP}/{VERSION}"
RESOURCES = {"pod": "pods", "podgroup": "podgroups"}
ATTEMPTS = 4
"""Tries of a request the scheduler refuses with 429 before its refusal is the answer."""
WAIT_SECONDS = 30.0
"""The longest wait for one Retry-After; a longer one is cut to it."""
NOT_INSTALLED = (
    f"Warning: the scheduler's explain API ({GROUP}) is not installed on this cluster: computing the answer here, from "
    "a LIST of every pod, with the scheduler configuration of --scheduler-config or --config"
)


def available(connection: Connection) -> bool:
    """Whether an APIService serves the group; raises when it is registered but unavailable."""
    answer = connection.request(CustomObjectsApi.get_api_resources.at(group=GROUP, version=VERSION))
    if answer.status == 404:
        return False
    if 200 <= answer.status < 300:
        return True
    error = server_error(answer.status, answer.data)
    if answer.status == 503:
        why = f"the scheduler's explain API (APIService {API_SERVICE}) is registered but no scheduler answers"
        raise KubectlError(f"{error}: {why}: are the scheduler's pods running and Ready?")
    raise error


def explanation(connection: Connection, kind: str, namespace: str, name: str, api_version: str | None) -> Any:
    """The `Explanation` of the pod's or PodGroup's unit (`api_version` pins a PodGroup's kind)."""
    path = f"{PREFIX}/namespaces/{_segment(namespace)}/{RESOURCES[kind]}/{_segment(name)}/explanation"
    if api_version is not None:
        path += "?" + urllib.parse.urlencode({"apiVersion": api_version})
    return _get(connection, path)


def pending_work(connection: Connection, namespace: str | None, selector: str | None) -> Any:
    """The `PendingWork` of a namespace, or of every namespace (None)."""
    path = f"{PREFIX}/pendingwork" if namespace is None else f"{PREFIX}/namespaces/{_segment(namespace)}/pendingwork"
    if selector:
        path += "?" + urllib.parse.urlencode({"labelSelector": selector})
    try:
        return _get(connection, path)
    except KubectlError as err:
        if namespace is None and "(Forbidden)" in str(err):
            hint = (
                f"status -A needs list on pendingwork.{GROUP} in every namespace (the chart's viewer ClusterRole, "
                "bound by a ClusterRoleBinding); -n NAMESPACE asks for one namespace"
            )
            raise KubectlError(f"{err}; {hint}") from None
        raise


def _segment(text: str) -> str:
    return urllib.parse.quote(text, safe="")


def _get(connection: Connection, path: str) -> Any:
    answer = connection.request(path)
    for _ in range(ATTEMPTS - 1):
        if answer.status != 429:
            break
        body = _status(answer.data)
        wait = _retry_after(body)
        if wait >= 2.0:
            print(f"Waiting {wait:.0f}s: {(body or {}).get('message', 'the scheduler is busy')}", file=sys.stderr)
        time.sleep(wait)
        answer = connection.request(path)
    if 200 <= answer.status < 300:
        return answer.body()
    message = (_status(answer.data) or {}).get("message")
    if answer.status == 400 and message:  # ours: a pod this scheduler does not place, said as the local answer says
        raise KubectlError(f"error: {message}")
    raise server_error(answer.status, answer.data)


def _status(data: bytes) -> dict[str, Any] | None:
    try:
        body = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    return body if isinstance(body, dict) else None


def _retry_after(body: Any) -> float:
    seconds = ((body or {}).get("details") or {}).get("retryAfterSeconds") if isinstance(body, dict) else None
    return min(WAIT_SECONDS, float(seconds)) if isinstance(seconds, int | float) and seconds > 0 else 1.0
