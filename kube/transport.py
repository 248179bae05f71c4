"""Writes sent over kept connections of their own, without the generated client's per-call machinery.

The generated client validates every argument with pydantic, serialises the body through its models and
rebuilds headers and auth on each call, and urllib3's pool wraps each answer in objects of its own: together
about half of a write's CPU in the scheduler process, and a Binding and an Event are two writes a pod. The
writes the scheduler makes are a handful of fixed shapes, so each sending thread keeps one `http.client`
connection to the API server and sends them straight over it, with the client's TLS settings (CA, client
certificate, verification, tls-server-name), User-Agent and credentials (`Configuration.auth_settings()`,
whose refresh hook keeps a rotated service-account token current). A connection the server closed while it
sat idle is seen before the next write (its socket reads as ready) and opened again, as urllib3's pool does.
Where the client's pool does more than connect (a proxy, a hostname assertion, socket options), the writes go
through that pool instead. The client stays in charge of configuration, auth and watches: an informer's LIST
and WATCH (`lister`) and other reads (`get`) go through its pool, as its generated methods would send them,
without loading those methods' classes (`kube.routes`).

Each request names the generated client's method whose route it takes (`route`, a `kube.routes.Route`): its
HTTP method comes from there, and the chart's RBAC test (`tests/chart/api_calls.py`) maps the request to the
grant it needs through that name, as it does for calls made through the client.

Failures come out typed (`kube.errors`): an answer outside 2xx raises `NotFound`, `Conflict`, `Invalid`, ...
with the server's answer, and a dropped connection or a timeout raises `Unavailable`.
"""

from __future__ import annotations

import http.client
import select
import socket
import ssl
import threading
import urllib.parse
from collections.abc import Callable
from typing import Any

import orjson
import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from kube.errors import NO_ANSWER, Unavailable, from_response
from kube.routes import Route

AUTH = ["BearerToken"]
"""The auth settings every generated method names (a kubeconfig's token, or the service account's)."""

JSON = "application/json"
NO_REPLY = (*NO_ANSWER, http.client.HTTPException)
"""What a request over a kept connection raises when no answer came back."""
QUERY = {
    "limit": "limit",
    "_continue": "continue",
    "watch": "watch",
    "resource_version": "resourceVersion",
    "allow_watch_bookmarks": "allowWatchBookmarks",
    "timeout_seconds": "timeoutSeconds",
}
"""The generated list methods' keywords an informer passes, and the query parameter each is."""


class _TLSConnection(http.client.HTTPSConnection):
    """http.client's, checking the certificate against the kubeconfig's tls-server-name when it names one."""

    def __init__(self, host: str, port: int | None, context: ssl.SSLContext, timeout: float, server: str) -> None:
        super().__init__(host, port, context=context, timeout=timeout)
        self._tls = context
        self._server = server

    def connect(self) -> None:
        http.client.HTTPConnection.connect(self)
        self.sock = self._tls.wrap_socket(self.sock, server_hostname=self._server)


def _tls_context(configuration: client.Configuration) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=configuration.ssl_ca_cert, cadata=configuration.ca_cert_data)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if configuration.cert_file:
        context.load_cert_chain(configuration.cert_file, configuration.key_file)
    if not configuration.verify_ssl:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def _dropped(sock: socket.socket) -> bool:
    """An idle kept connection whose socket reads as ready: the server closed it (or broke the protocol)."""
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    return bool(poller.poll(0))


class Transport:
    def __init__(self, api: client.ApiClient, timeout_seconds: float) -> None:
        configuration = api.configuration
        self._configuration = configuration
        self._pool: urllib3.PoolManager = api.rest_client.pool_manager
        self._host = configuration.host.rstrip("/")
        self._headers = {**api.default_headers, "Accept": JSON}
        self._timeout = timeout_seconds
        target = urllib.parse.urlsplit(self._host)
        self._address = (target.hostname or "localhost", target.port)
        self._prefix = target.path
        self._tls = _tls_context(configuration) if target.scheme == "https" else None
        self._server = configuration.tls_server_name or self._address[0]
        self._direct = (
            type(self._pool) is urllib3.PoolManager
            and configuration.assert_hostname is None
            and configuration.socket_options is None
        )
        self._local = threading.local()

    def request(self, route: Route, path: str, body: Any = None, content_type: str = JSON) -> Any:
        """Send one request along `route` to `path`; returns the decoded JSON body (None when empty)."""
        headers = dict(self._headers)
        for setting in self._configuration.auth_settings().values():
            if setting["in"] == "header" and setting["value"]:
                headers[setting["key"]] = setting["value"]
        data = None
        if body is not None:
            data = orjson.dumps(body)
            headers["Content-Type"] = content_type
        send = self._send if self._direct else self._send_pooled
        status, reason, answer, answer_headers = send(route.verb, path, data, headers)
        if not 200 <= status < 300:
            raise from_response(status, reason, answer, answer_headers)
        return orjson.loads(answer) if answer else None

    def _connection(self) -> http.client.HTTPConnection:
        """This thread's kept connection, opened again when the server closed it while it was idle."""
        connection: http.client.HTTPConnection | None = getattr(self._local, "connection", None)
        if connection is None:
            host, port = self._address
            if self._tls is None:
                connection = http.client.HTTPConnection(host, port, timeout=self._timeout)
            else:
                connection = _TLSConnection(host, port, self._tls, self._timeout, self._server)
            self._local.connection = connection
        elif connection.sock is not None and _dropped(connection.sock):
            connection.close()
        return connection

    def _send(self, method: str, path: str, data: bytes | None, headers: dict[str, str]) -> tuple[int, str, bytes, Any]:
        connection = self._connection()
        try:
            connection.request(method, self._prefix + path, body=data, headers=headers)
            response = connection.getresponse()
            answer = response.read()
        except NO_REPLY as exc:
            connection.close()
            raise Unavailable(f"no answer ({type(exc).__name__})") from None
        return response.status, response.reason or "", answer, response.headers

    def _send_pooled(
        self, method: str, path: str, data: bytes | None, headers: dict[str, str]
    ) -> tuple[int, str, bytes, Any]:
        try:
            response = self._pool.request(
                method,
                self._host + path,
                body=data,
                headers=headers,
                timeout=urllib3.Timeout(total=self._timeout),
                preload_content=True,
                retries=False,
            )
        except NO_ANSWER as exc:
            raise Unavailable(f"no answer ({type(exc).__name__})") from None
        return response.status, response.reason or "", response.data, response.headers


def lister(api: client.ApiClient, path: str) -> Callable[..., Any]:
    """A LIST or WATCH of `path` (a `Route`'s), called with the keywords of the generated list method (`QUERY`,
    `_request_timeout`) as an informer calls it, through the client's pool and auth: the raw urllib3 response,
    streamed (`_preload_content=False`, the only way an informer reads one)."""

    def call(*, _preload_content: bool = False, _request_timeout: Any = None, **params: Any) -> Any:
        if _preload_content:
            raise ValueError("a lister answers with the raw response: _preload_content=False")
        query = [(QUERY[name], value) for name, value in params.items() if value is not None]
        return get(api, path, query, _request_timeout)

    return call


def get(api: client.ApiClient, path: str, query: list[tuple[str, Any]], timeout: Any) -> Any:
    """GET `path` (a `Route`'s) through the client's pool and auth: the raw urllib3 response, not read
    (`read_json`); an answer outside 2xx raises `ApiException`, as the generated method does."""
    request = api.param_serialize(
        method="GET", resource_path=path, query_params=query, header_params={"Accept": JSON}, auth_settings=AUTH
    )
    answer = api.call_api(*request, _request_timeout=timeout)
    if not 200 <= answer.status <= 299:
        answer.read()  # type: ignore[no-untyped-call]
        raise ApiException.from_response(http_resp=answer, body=None, data=None)
    return answer.response


def read_json(response: Any) -> Any:
    """Body of a `_preload_content=False` response of the generated client; releasing it returns the
    connection to the pool."""
    try:
        data = response.data
    finally:
        response.release_conn()
    return orjson.loads(data) if data else None
