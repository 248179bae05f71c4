"""`kubectl phalanx`'s connection to the API server: credentials as kubectl finds them, GETs worded as kubectl's.

Credentials come from a kubeconfig as kubectl finds it (`--kubeconfig`, else `$KUBECONFIG`, else
`~/.kube/config`; `--context`), or from the pod's service account when there is none. Every request is a GET with
the user agent `kubectl-phalanx/<version>`, which tells the plugin's requests apart in an audit log, to a path
named after the `kubernetes` client's method whose route it takes (`kube.routes`: `tests/chart/api_calls.py` maps
each to its RBAC grant and checks it is a read), sent directly on a connection pool: importing the client's API
classes alone took 1.1 s, and the client at all 0.3 s, of a command a user waits for, so it is imported only for
credentials that need its loader (`kubeconfig.py`). Failures are
`KubectlError`s worded as kubectl words them: `Error from server (NotFound): namespaces "x" not found`.
"""

from __future__ import annotations

import importlib.metadata
import os
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from pathlib import Path
from typing import Any

import orjson
import urllib3

from phalanx.kubectl.errors import KubectlError
from phalanx.kubectl.kubeconfig import NotPlain, default_path, read

USER_AGENT = f"kubectl-phalanx/{importlib.metadata.version('phalanx')}"


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    data: bytes

    def body(self) -> Any:
        return orjson.loads(self.data) if self.data else None


@dataclass(frozen=True, slots=True)
class Connection:
    pool: urllib3.PoolManager
    host: str
    authorization: Callable[[], dict[str, str]]
    """The headers that authenticate a request, asked for each (a client's loader refreshes expiring tokens)."""
    namespace: str
    """The namespace of the kubeconfig's context (`default` when it names none), as kubectl's `-n` default."""
    timeout: float

    def get(self, path: str, missing_ok: bool = False) -> Any:
        """GET `path`, the decoded body; None for a 404 when `missing_ok`. Failures as kubectl words them."""
        response = self.request(path)
        if response.status == 404 and missing_ok:
            return None
        if not 200 <= response.status < 300:
            raise server_error(response.status, response.data)
        return response.body()

    def request(self, path: str) -> Response:
        """GET `path`, whatever the server answers; a `KubectlError` when it does not."""
        headers = {"Accept": "application/json", "User-Agent": USER_AGENT, **self.authorization()}
        try:
            response = self.pool.request(
                "GET", self.host + path, headers=headers, timeout=urllib3.Timeout(total=self.timeout)
            )
        except (urllib3.exceptions.HTTPError, OSError) as err:
            raise connection_error(err, self.host) from None
        return Response(response.status, response.data or b"")


def connect(kubeconfig: str | None, context: str | None, timeout: float) -> Connection:
    """A client from the kubeconfig kubectl would use, or the in-cluster service account when there is none: read
    here when its credentials are plain (`kubeconfig.py`), else by the `kubernetes` client's loader."""
    path = kubeconfig or default_path()
    if kubeconfig is not None or any(Path(p).expanduser().exists() for p in path.split(os.pathsep)):
        try:
            plain = read(path, context)
        except NotPlain:
            pass
        else:
            pool = urllib3.PoolManager(maxsize=16, ssl_context=plain.context, retries=False)
            return Connection(pool, plain.host, lambda: plain.headers, plain.namespace, timeout)
    return _loaded(kubeconfig, context, timeout)


def _loaded(kubeconfig: str | None, context: str | None, timeout: float) -> Connection:
    """The connection as the `kubernetes` client's loaders make it: in-cluster, or any kubeconfig."""
    from kubernetes import client, config
    from kubernetes.client.rest import RESTClientObject
    from kubernetes.config.config_exception import ConfigException

    configuration = client.Configuration()
    namespace = "default"
    path = kubeconfig or config.kube_config.KUBE_CONFIG_DEFAULT_LOCATION
    try:
        if kubeconfig is None and not any(Path(p).expanduser().exists() for p in path.split(":")):
            if context is not None:
                raise KubectlError(f'error: context "{context}" does not exist')
            try:
                config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
            except ConfigException:
                raise KubectlError(
                    "error: no kubeconfig (--kubeconfig, $KUBECONFIG, ~/.kube/config) and not running in a pod"
                ) from None
        else:
            config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=kubeconfig, context=context, client_configuration=configuration
            )
            contexts, active = config.list_kube_config_contexts(config_file=kubeconfig)  # type: ignore[no-untyped-call]
            chosen = next((c for c in contexts if c["name"] == context), active) if context else active
            namespace = (chosen or {}).get("context", {}).get("namespace") or "default"
    except ConfigException as err:
        message = str(err).splitlines()[0] if str(err) else "invalid configuration"
        if context is not None and "context" in message.lower():
            message = f'context "{context}" does not exist'
        raise KubectlError(f"error: {message}") from None
    except OSError as err:
        raise KubectlError(f"error: {err}") from None
    configuration.connection_pool_maxsize = 16

    def authorization() -> dict[str, str]:
        settings: dict[str, Any] = dict(configuration.auth_settings())
        return {s["key"]: s["value"] for s in settings.values() if s["in"] == "header" and s["value"]}

    host = str(configuration.host).rstrip("/")
    return Connection(RESTClientObject(configuration).pool_manager, host, authorization, namespace, timeout)


def server_error(status: int, data: bytes | None) -> KubectlError:
    """kubectl's line for an API error: `Error from server (Forbidden): pods is forbidden: User ...`."""
    try:
        body = orjson.loads(data or b"{}")
    except orjson.JSONDecodeError:
        body = {}
    body = body if isinstance(body, dict) else {}
    known = {code.value: code.phrase.replace(" ", "") for code in HTTPStatus}
    reason = body.get("reason") or known.get(status, "Unknown")
    message = body.get("message") or (data or b"").decode(errors="replace").strip() or str(status)
    return KubectlError(f"Error from server ({reason}): {message}")


def connection_error(err: Exception, host: str) -> KubectlError:
    server = host.removeprefix("https://").removeprefix("http://")
    cause = getattr(err, "reason", None) or err
    if "refused" in str(cause).lower():
        refused = f"The connection to the server {server} was refused"
        return KubectlError(f"{refused} - did you specify the right host or port?")
    return KubectlError(f"Unable to connect to the server: {type(cause).__name__}: {str(cause).splitlines()[0]}")
