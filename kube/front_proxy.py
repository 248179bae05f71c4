"""The front proxy's trust, as an aggregated API server keeps it: who may speak for users, and in which headers.

kube-apiserver sends a request for an aggregated API (an `APIService`) over TLS with its proxy client certificate
(`--proxy-client-cert-file`) and the user it authenticated in headers (`X-Remote-User`, `X-Remote-Group`,
`X-Remote-Extra-<key>`). It publishes what an aggregated server needs to trust it in the ConfigMap
`extension-apiserver-authentication` of kube-system: the CA that signs the proxy's certificate
(`requestheader-client-ca-file`), the common names that certificate may carry (`requestheader-allowed-names`,
empty for any), and the names of the headers. As k8s.io/apiserver's `requestheader` authenticator: a request whose
client certificate that CA verified and whose common name is allowed comes from the front proxy, and its headers
say who the user is. Nothing else authenticates: no bearer token is reviewed and no user's own client certificate
is accepted, so only the API server speaks to us, with each user's identity.

`FrontProxy` reads the ConfigMap (a GET; the chart's Role grants exactly that name) at start and again every
`resync`, so a rotated front-proxy CA is trusted without a restart.
"""

from __future__ import annotations

import json
import threading
import urllib.parse
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

import structlog
from kubernetes import client

from kube.errors import ApiError, translated
from kube.routes import CoreV1Api
from kube.transport import get, read_json

log = structlog.get_logger(__name__)

NAMESPACE = "kube-system"
CONFIG_MAP = "extension-apiserver-authentication"
RESYNC_SECONDS = 60.0


@dataclass(frozen=True, slots=True)
class User:
    """Who the front proxy says made the request (`user.Info` upstream)."""

    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Trust:
    """What the ConfigMap says: the proxy's CA (PEM), its allowed common names, and the headers it fills."""

    client_ca: str
    allowed_names: tuple[str, ...] = ()
    username_headers: tuple[str, ...] = ("X-Remote-User",)
    uid_headers: tuple[str, ...] = ()
    group_headers: tuple[str, ...] = ("X-Remote-Group",)
    extra_prefixes: tuple[str, ...] = ("X-Remote-Extra-",)

    def user(self, common_name: str | None, headers: Iterable[tuple[str, str]]) -> User | None:
        """The user of a request whose verified client certificate names `common_name` (None: no certificate, or
        one the CA did not sign), from its `headers` (name, value pairs, repeated names kept); None when the
        request is not from the front proxy or names no user."""
        if common_name is None or (self.allowed_names and common_name not in self.allowed_names):
            return None
        pairs = [(name.lower(), value) for name, value in headers]
        name = _first(pairs, self.username_headers)
        if not name:
            return None
        groups = tuple(v for n, v in pairs if n in {h.lower() for h in self.group_headers})
        extra: dict[str, tuple[str, ...]] = {}
        for header, value in pairs:
            for prefix in self.extra_prefixes:
                if header.startswith(prefix.lower()) and len(header) > len(prefix):
                    key = urllib.parse.unquote(header[len(prefix) :])
                    extra[key] = (*extra.get(key, ()), value)
        return User(name, _first(pairs, self.uid_headers), groups, extra)


def _first(pairs: list[tuple[str, str]], names: tuple[str, ...]) -> str:
    wanted = [n.lower() for n in names]
    for name in wanted:
        for header, value in pairs:
            if header == name and value:
                return value
    return ""


class NoFrontProxy(ValueError):
    """The API server publishes no front-proxy CA: it cannot authenticate users to an aggregated API."""


def parse_trust(data: Mapping[str, str]) -> Trust:
    """The ConfigMap's `data` as a `Trust`; `NoFrontProxy` when it has no `requestheader-client-ca-file`."""
    ca = data.get("requestheader-client-ca-file", "")
    if not ca.strip():
        raise NoFrontProxy(
            f"configmaps {NAMESPACE}/{CONFIG_MAP} has no requestheader-client-ca-file: kube-apiserver runs without "
            "--requestheader-client-ca-file, so it cannot send users to an aggregated API"
        )

    def names(key: str, default: tuple[str, ...]) -> tuple[str, ...]:
        raw = data.get(key)
        if raw is None:
            return default
        try:
            values = json.loads(raw)
        except ValueError:
            return default
        return tuple(str(v) for v in values or ())

    return Trust(
        client_ca=ca,
        allowed_names=names("requestheader-allowed-names", ()),
        username_headers=names("requestheader-username-headers", ("X-Remote-User",)),
        uid_headers=names("requestheader-uid-headers", ()),
        group_headers=names("requestheader-group-headers", ("X-Remote-Group",)),
        extra_prefixes=names("requestheader-extra-headers-prefix", ("X-Remote-Extra-",)),
    )


class FrontProxy:
    """The current `Trust`, read from the API server and kept current in a thread; `on_change` is told of a new
    one (the server rebuilds its TLS context with the new CA)."""

    def __init__(
        self,
        api: client.ApiClient,
        on_change: Callable[[Trust], None] = lambda trust: None,
        resync_seconds: float = RESYNC_SECONDS,
        request_timeout_seconds: float = 10.0,
    ) -> None:
        self._api = api
        self._on_change = on_change
        self.resync_seconds = resync_seconds
        self.request_timeout_seconds = request_timeout_seconds
        self.trust: Trust | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="front-proxy", daemon=True)

    def start(self) -> None:
        """Read the ConfigMap now (a request may come at once), then keep it current in a thread."""
        self.sync()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def sync(self) -> Trust | None:
        """Read the ConfigMap once; the trust it gives, or None (logged) when it cannot be read or has none."""
        try:
            with translated():
                path = CoreV1Api.read_namespaced_config_map.at(namespace=NAMESPACE, name=CONFIG_MAP)
                found = read_json(get(self._api, path, [], self.request_timeout_seconds))
            trust = parse_trust((found or {}).get("data") or {})
        except (ApiError, NoFrontProxy) as err:
            text = err.answer if isinstance(err, ApiError) else str(err)
            log.warning("front proxy trust not read", config_map=f"{NAMESPACE}/{CONFIG_MAP}", error=text)
            return None
        if trust != self.trust:
            self.trust = trust
            log.info("front proxy trusted", allowed_names=list(trust.allowed_names))
            self._on_change(trust)
        return trust

    def _loop(self) -> None:
        while not self._stop.wait(self.resync_seconds if self.trust is not None else min(5.0, self.resync_seconds)):
            self.sync()
