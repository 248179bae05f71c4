"""A kubeconfig's plain credentials, read without the `kubernetes` client: importing it costs a third of a second,
most of the command's CPU when the scheduler's explain API answers (issue 41's budget is a second in all).

Plain: one file; the context's cluster by `server`, `certificate-authority[-data]`, `insecure-skip-tls-verify`; its
user by `token`, `tokenFile` or `client-certificate[-data]` with `client-key[-data]`. Anything else (exec
plugins, auth providers, basic auth, a proxy, `tls-server-name`, several files in `$KUBECONFIG`) is `NotPlain`, and
the caller uses the client's own loader, as before.
"""

from __future__ import annotations

import base64
import contextlib
import os
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from phalanx.kubectl.errors import KubectlError

CLUSTER_KEYS = {"server", "certificate-authority", "certificate-authority-data", "insecure-skip-tls-verify"}
USER_KEYS = {"token", "tokenFile", "client-certificate", "client-certificate-data", "client-key", "client-key-data"}


class NotPlain(Exception):
    """The kubeconfig needs the client's loader."""


@dataclass(frozen=True, slots=True)
class Credentials:
    host: str
    headers: dict[str, str]
    context: ssl.SSLContext | None
    """For an https server; None for http."""
    namespace: str


def default_path() -> str:
    return os.environ.get("KUBECONFIG") or str(Path("~/.kube/config").expanduser())


def read(path: str, context: str | None) -> Credentials:
    """The credentials of `context` (else the current one) in the kubeconfig at `path`."""
    if os.pathsep in path:
        raise NotPlain("several files")
    file = Path(path).expanduser()
    try:
        config: Any = yaml.safe_load(file.read_text()) or {}
    except (OSError, yaml.YAMLError) as err:
        raise NotPlain(str(err)) from None
    name = context or config.get("current-context")
    chosen = _named(config, "contexts", name)
    if chosen is None:
        if context is not None:
            raise KubectlError(f'error: context "{context}" does not exist')
        raise NotPlain("no current context")
    cluster, user = _named(config, "clusters", chosen.get("cluster")), _named(config, "users", chosen.get("user"))
    if cluster is None or not set(cluster) <= CLUSTER_KEYS or "server" not in cluster:
        raise NotPlain("cluster")
    user = user or {}
    if not set(user) <= USER_KEYS:
        raise NotPlain("user")
    try:
        return _credentials(file.parent, cluster, user, chosen.get("namespace") or "default")
    except (OSError, ValueError, KeyError, ssl.SSLError) as err:  # the client's loader says what is wrong
        raise NotPlain(str(err)) from None


def _credentials(base: Path, cluster: dict[str, Any], user: dict[str, Any], namespace: str) -> Credentials:
    headers = {}
    token = user.get("token") or (_text(base, user["tokenFile"]).strip() if user.get("tokenFile") else "")
    if token:
        headers["Authorization"] = f"Bearer {token}"
    host = str(cluster["server"]).rstrip("/")
    tls = None
    if host.startswith("https://"):
        tls = ssl.create_default_context()
        if cluster.get("insecure-skip-tls-verify"):
            tls.check_hostname = False
            tls.verify_mode = ssl.CERT_NONE
        elif "certificate-authority-data" in cluster or "certificate-authority" in cluster:
            tls.load_verify_locations(cadata=_pem(base, cluster, "certificate-authority"))
        if "client-certificate" in user or "client-certificate-data" in user:
            _load_pair(tls, _pem(base, user, "client-certificate"), _pem(base, user, "client-key"))
    return Credentials(host, headers, tls, namespace)


def _named(config: dict[str, Any], section: str, name: Any) -> dict[str, Any] | None:
    key = section[:-1]
    for entry in config.get(section) or []:
        if entry.get("name") == name:
            found = entry.get(key)
            return dict(found) if isinstance(found, dict) else {}
    return None


def _text(base: Path, path: str) -> str:
    return (base / Path(path).expanduser()).read_text()


def _pem(base: Path, entry: dict[str, Any], key: str) -> str:
    if f"{key}-data" in entry:
        return base64.b64decode(entry[f"{key}-data"]).decode()
    return _text(base, entry[key])


def _load_pair(tls: ssl.SSLContext, cert: str, key: str) -> None:
    """`load_cert_chain` reads files only: the pair goes through a private temporary file, removed at once."""
    fd, name = tempfile.mkstemp(prefix="kubectl-phalanx-", suffix=".pem")
    try:
        with os.fdopen(fd, "w") as out:
            out.write(cert.rstrip("\n") + "\n" + key)
        tls.load_cert_chain(name)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(name)
