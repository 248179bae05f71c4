"""Writes sent over the `kubernetes` ApiClient's own connection pool, without its per-call machinery.

The generated client validates every argument with pydantic, serialises the body through its
models and rebuilds headers and auth on each call: about half of a Binding's CPU in the scheduler
process (issue 12 profile, real API server). The writes the scheduler makes are a handful of fixed
shapes, so they go straight to the same `urllib3` pool, with the same TLS settings, proxy,
User-Agent and credentials (`Configuration.auth_settings()`, whose refresh hook keeps a rotated
service-account token current). The client stays in charge of configuration, auth and watches.

Each request names the generated client's method whose route it takes (`route`): its HTTP method
comes from there, and the chart's RBAC test (`tests/chart/api_calls.py`) maps the request to the
grant it needs through that name, as it does for calls made through the client.

Failures look as they do from the generated client: an HTTP error raises `ApiException` with
status, body and headers (so `backoff.py` honours Retry-After and callers map 404/409/422), and a
dropped connection or timeout raises urllib3's own errors.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

JSON = "application/json"
VERBS = (("create_", "POST"), ("read_", "GET"), ("get_", "GET"), ("patch_", "PATCH"), ("delete_", "DELETE"))
"""The generated client's method prefixes and the HTTP method each sends."""


def verb(route: Callable[..., Any]) -> str:
    name = route.__name__
    return next(method for prefix, method in VERBS if name.startswith(prefix))


class Transport:
    def __init__(self, api: client.ApiClient, timeout_seconds: float) -> None:
        self._configuration = api.configuration
        self._pool: urllib3.PoolManager = api.rest_client.pool_manager
        self._host = api.configuration.host.rstrip("/")
        self._headers = {**api.default_headers, "Accept": JSON}
        self._timeout = urllib3.Timeout(total=timeout_seconds)

    def request(self, route: Callable[..., Any], path: str, body: Any = None, content_type: str = JSON) -> Any:
        """Send one request along `route` (a method of a `kubernetes.client` API class) to `path`;
        returns the decoded JSON body (None when empty)."""
        headers = dict(self._headers)
        for setting in self._configuration.auth_settings().values():
            if setting["in"] == "header" and setting["value"]:
                headers[setting["key"]] = setting["value"]
        data = None
        if body is not None:
            data = orjson.dumps(body)
            headers["Content-Type"] = content_type
        response = self._pool.request(
            verb(route),
            self._host + path,
            body=data,
            headers=headers,
            timeout=self._timeout,
            preload_content=True,
        )
        if not 200 <= response.status < 300:
            raise ApiException(http_resp=response)
        return orjson.loads(response.data) if response.data else None
