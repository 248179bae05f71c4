"""The explain API served as the scheduler serves it (`scheduler.serve.server.serve`), for its tests: TLS with a
serving pair, the loopback API server's front-proxy ConfigMap and SubjectAccessReviews, and a client that calls it
as kube-apiserver's front proxy does (its client certificate, the user in `X-Remote-*` headers)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import urllib3

from kube.client import api_client
from scheduler.serve.answers import Answers
from scheduler.serve.limits import Limiter
from scheduler.serve.server import ExplainServer, serve
from tests.apiserver.server import ApiServer
from tests.serve.pki import PROXY, Authority, ClientCertificate, Serving, authority, front_proxy_config_map, serving

GROUP = "explain.phalanx.dev"
PREFIX = f"/apis/{GROUP}/v1alpha1"


@dataclass
class Served:
    server: ExplainServer
    api: ApiServer
    serving: Serving
    proxy: Authority
    certs: Path
    _pools: dict[tuple[str | None, str | None], urllib3.PoolManager] = field(default_factory=dict)
    """One kept-alive pool per client certificate, as kube-apiserver keeps its connections."""

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.server.server_address[1]}"

    def client(self, name: str = PROXY, ca: Authority | None = None) -> ClientCertificate:
        return (ca or self.proxy).client(name, self.certs / (name if ca is None else f"other-{name}"))

    def get(
        self,
        path: str,
        user: str | None = "alice",
        certificate: ClientCertificate | str | None = PROXY,
        groups: tuple[str, ...] = ("system:authenticated",),
    ) -> tuple[int, Any, dict[str, str]]:
        """GET `path` as the front proxy (a client certificate of that name, or the given one, or None) for `user`."""
        if isinstance(certificate, str):
            certificate = self.client(certificate)
        pair = certificate.pair if certificate is not None else (None, None)
        pool = self._pools.get(pair)
        if pool is None:
            pool = self._pools[pair] = urllib3.PoolManager(
                ca_certs=str(self.serving.ca_file), cert_file=pair[0], key_file=pair[1], retries=False
            )
        headers = urllib3.HTTPHeaderDict()
        if user is not None:
            headers.add("X-Remote-User", user)
        for group in groups:
            headers.add("X-Remote-Group", group)
        reply = pool.request("GET", self.url + path, headers=headers, timeout=30)
        return reply.status, json.loads(reply.data), dict(reply.headers)


@contextmanager
def served_answers(
    apiserver: ApiServer, where: Path, answers: Answers, limiter: Limiter | None = None
) -> Iterator[Served]:
    """`answers` served on a free port until the block ends; files go under `where`."""
    proxy = authority("front-proxy-ca")
    apiserver.create(front_proxy_config_map(proxy))
    files = serving(where / "serving", "127.0.0.1")
    server = serve(
        "127.0.0.1",
        0,
        files.cert_file,
        files.key_file,
        api_client(apiserver.kubeconfig(where / "kubeconfig"), "scheduler"),
        answers,
        limiter or Limiter(concurrency=1, rate=1000, burst=1000, busy=lambda: False),  # CPU paid back at once
        synced=lambda: True,
        front_proxy_resync_seconds=0.2,
    )
    try:
        yield Served(server, apiserver, files, proxy, where / "clients")
    finally:
        server.stop()
