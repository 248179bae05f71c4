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

Failures come out typed (`kube.errors`): an answer outside 2xx raises `NotFound`, `Conflict`, `Invalid`, ...
with the server's answer, and a dropped connection or a timeout raises `Unavailable`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
import urllib3
from kubernetes import client

from kube.errors import NO_ANSWER, Unavailable, from_response

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
        try:
            response = self._pool.request(
                verb(route),
                self._host + path,
                body=data,
                headers=headers,
                timeout=self._timeout,
                preload_content=True,
                retries=False,
            )
        except NO_ANSWER as exc:
            raise Unavailable(f"no answer ({type(exc).__name__})") from None
        if not 200 <= response.status < 300:
            raise from_response(response.status, response.reason or "", response.data, response.headers)
        return orjson.loads(response.data) if response.data else None


def read_json(response: Any) -> Any:
    """Body of a `_preload_content=False` response of the generated client; releasing it returns the
    connection to the pool."""
    try:
        data = response.data
    finally:
        response.release_conn()
    return orjson.loads(data) if data else None
