"""The aggregated API server in the scheduler's process: TLS, the front proxy's users, their rights, the answers.

kube-apiserver reaches it through the chart's `APIService` (`v1alpha1.explain.phalanx.dev`) and Service, on
every scheduler replica, and forwards each user's request with that user's identity (`kube.front_proxy`). Each
request, in order:

1. TLS with the serving key pair (the files are read again when they change, as a rotated Secret is mounted),
   asking for a client certificate that the front proxy's CA verifies.
2. Authentication: only the front proxy, naming a user in its headers; anything else is 401 Unauthorized.
3. The path (`routes.py`): discovery answers at once; a path we do not serve is 404.
4. The limits (`limits.py`): over them, 429 with Retry-After. Before authorization, as kube-apiserver's API
   Priority and Fairness comes before its authorizer: a refusal then costs no SubjectAccessReview, which is a
   request to kube-apiserver, while explanations are held back.
5. Authorization: a SubjectAccessReview of the user for the path's RBAC attributes (`kube.access_review`);
   refused is 403 Forbidden, in kube-apiserver's words.
6. The answer (`answers.py`), encoded with orjson; the CPU it took (its thread's) is owed to the limits, and
   logged once with its phases.

Answers before the caches are synced are 503. The server runs in daemon threads (one per connection, kept alive
as kube-apiserver keeps its connections), beside the scheduling loop.
"""

from __future__ import annotations

import os
import ssl
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import orjson
import structlog
from kubernetes import client

from kube.access_review import AccessReviewer, Attributes
from kube.errors import ApiError
from kube.front_proxy import FrontProxy, Trust, User
from scheduler.metrics import SchedulerMetrics
from scheduler.serve.answers import Answer, Answers, status
from scheduler.serve.limits import Limiter
from scheduler.serve.routes import PENDING_WORK, BadRequest, Discovery, Explain, Pending, parse

log = structlog.get_logger(__name__)

HANDSHAKE_SECONDS = 10.0
IDLE_SECONDS = 90.0
"""A kept-alive connection with no request for this long is closed (kube-apiserver's idle timeout is 90 s)."""
RECHECK_SECONDS = 1.0
"""How often the serving files are looked at for a change."""


class ServingContexts:
    """The TLS context for new connections: the serving key pair from its files (re-read once they change) and the
    front proxy's CA (`trust`, replaced when the API server publishes another). Files not there yet (a Secret the
    webhook has not made yet) mean no context: connections are closed until they come."""

    def __init__(self, cert_file: Path, key_file: Path) -> None:
        self.cert_file = cert_file
        self.key_file = key_file
        self._lock = threading.Lock()
        self._trust: Trust | None = None
        self._stamp: tuple[Any, ...] = ()
        self._checked = -RECHECK_SECONDS
        self._context: ssl.SSLContext | None = None

    def trust(self, trust: Trust) -> None:
        with self._lock:
            self._trust = trust
            self._checked = -RECHECK_SECONDS
            self._stamp = ()

    def current(self) -> ssl.SSLContext | None:
        with self._lock:
            now = time.monotonic()
            if now - self._checked >= RECHECK_SECONDS:
                self._checked = now
                stamp = self._files()
                if stamp and stamp != self._stamp:
                    try:
                        self._context = self._build()
                        self._stamp = stamp
                    except (OSError, ssl.SSLError) as err:  # half-written: the last good pair serves meanwhile
                        log.warning("serving certificate not loaded", file=str(self.cert_file), error=str(err))
            return self._context

    def _files(self) -> tuple[Any, ...]:
        stats = []
        for path in (self.cert_file, self.key_file):
            try:
                found = os.stat(path)
            except OSError:
                return ()
            stats.append((found.st_ino, found.st_mtime_ns, found.st_size))
        return (*stats, id(self._trust))

    def _build(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(self.cert_file, self.key_file)
        if self._trust is not None:
            context.load_verify_locations(cadata=self._trust.client_ca)
            context.verify_mode = ssl.CERT_OPTIONAL
        return context


def _common_name(certificate: dict[str, Any]) -> str | None:
    for rdn in certificate.get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return str(value)
    return None


class ExplainServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(
        self,
        address: tuple[str, int],
        contexts: ServingContexts,
        front_proxy: FrontProxy,
        reviewer: AccessReviewer,
        answers: Answers,
        limiter: Limiter,
        synced: Callable[[], bool],
        metrics: SchedulerMetrics | None,
    ) -> None:
        self.contexts = contexts
        self.front_proxy = front_proxy
        self.reviewer = reviewer
        self.answers = answers
        self.limiter = limiter
        self.synced = synced
        self.metrics = metrics
        super().__init__(address, _Handler)

    def get_request(self) -> tuple[Any, Any]:
        """The connection wrapped in TLS; the handshake happens in its own thread (`_Handler.setup`), so a client
        that never finishes one holds up no other."""
        raw, address = self.socket.accept()
        context = self.contexts.current()
        if context is None:
            raw.close()
            raise OSError("no serving certificate yet")  # socketserver drops the connection and goes on
        raw.settimeout(HANDSHAKE_SECONDS)
        return context.wrap_socket(raw, server_side=True, do_handshake_on_connect=False), address

    def service_actions(self) -> None:
        """Between requests (at least twice a second), once the informers are synced: the answers make what they
        keep, then bring it up to the informers' objects while it is idle (`Answers.refresh_idle`)."""
        if self.synced():
            self.answers.refresh_idle()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A failed handshake or a dropped connection: not worth a traceback."""
        log.debug("connection ended", client=str(client_address[0]) if client_address else "")

    def stop(self) -> None:
        self.front_proxy.stop()
        self.shutdown()
        self.server_close()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    """An answer is written as its headers, then its body: with Nagle's algorithm the body waited for the client's
    delayed ACK of the headers, 40 ms on every request of a kept-alive connection (kube-apiserver keeps them)."""
    server: ExplainServer

    def setup(self) -> None:
        self.request.do_handshake()
        self.request.settimeout(IDLE_SECONDS)
        super().setup()

    def log_message(self, format: str, *args: Any) -> None:
        """Each request is logged once, with what it cost (`_answer`)."""

    def do_GET(self) -> None:
        started, cpu = time.perf_counter(), time.thread_time()
        parts = urlsplit(self.path)
        query = {key: values[-1] for key, values in parse_qs(parts.query).items()}
        trust = self.server.front_proxy.trust
        certificate = self.request.getpeercert() or {}
        user = trust.user(_common_name(certificate), self.headers.items()) if trust is not None else None
        if user is None:
            self._send(401, status(401, "Unauthorized", "Unauthorized"))
            return
        try:
            asked = parse(parts.path, query)
        except BadRequest as err:
            self._send(400, status(400, "BadRequest", str(err)))
            return
        if asked is None:
            self._send(404, status(404, "NotFound", "the server could not find the requested resource"))
            return
        if isinstance(asked, Discovery):
            self._send(200, asked.document)
            return
        refused = self._refused(user, asked)
        if refused is not None:
            self._send(*refused)
            self._count(asked, refused[0])
            return
        try:
            answers = self.server.answers
            answer = answers.explanation(asked) if isinstance(asked, Explain) else answers.pending(asked)
            encoding = time.perf_counter()
            data = orjson.dumps(answer.body)
            encoded = time.perf_counter()
        finally:  # before the answer is written, so the client's next request finds its slot free
            self.server.limiter.release(time.thread_time() - cpu)
        self._answer(asked, answer, data, encoded - encoding, user.name, started, cpu)

    def _refused(self, user: User, asked: Explain | Pending) -> tuple[int, dict[str, Any], dict[str, str]] | None:
        """Why the request is not answered (code, Status, headers), or None: it may be, and it holds a slot of the
        limiter, which the caller releases."""
        if not self.server.synced():
            body = status(503, "ServiceUnavailable", "the scheduler's caches are not synced yet")
            return 503, body, {"Retry-After": "1"}
        refused = self.server.limiter.acquire()
        if refused is not None:
            wait = refused.retry_after
            body = status(429, "TooManyRequests", refused.message, {"retryAfterSeconds": wait})
            return 429, body, {"Retry-After": str(wait)}
        denied = self._denied(user, asked.attributes)
        if denied is not None:
            self.server.limiter.release(0.0)  # nothing computed: nothing owed
        return denied

    def _denied(self, user: User, attributes: Attributes) -> tuple[int, dict[str, Any], dict[str, str]] | None:
        """403 (or 500 when the authorizer could not be asked) unless the user may read what it asks."""
        try:
            verdict = self.server.reviewer.review(user, attributes)
        except ApiError as err:
            return 500, status(500, "InternalError", f"Internal error occurred: authorization failed: {err.answer}"), {}
        if not verdict.allowed:
            what = f"{attributes.resource}.{attributes.group}" + (f' "{attributes.name}"' if attributes.name else "")
            message = f'{what} is forbidden: User "{user.name}" cannot {attributes.described}'
            message += f": {verdict.reason}" if verdict.reason else ""
            details = {"name": attributes.name, "group": attributes.group, "kind": attributes.resource}
            return 403, status(403, "Forbidden", message, details), {}
        return None

    def _count(self, asked: Explain | Pending, code: int, seconds: float | None = None) -> None:
        metrics = self.server.metrics
        if metrics is None:
            return
        resource = asked.resource if isinstance(asked, Explain) else PENDING_WORK
        metrics.explain_requests.labels(resource, str(code)).inc()
        if seconds is not None:
            metrics.explain_duration.labels(resource).observe(seconds)

    def _answer(
        self,
        asked: Explain | Pending,
        answer: Answer,
        data: bytes,
        encode: float,
        user: str,
        started: float,
        cpu: float,
    ) -> None:
        self._write(answer.code, data, {})
        seconds = time.perf_counter() - started
        self._count(asked, answer.code, seconds)
        resource = asked.resource if isinstance(asked, Explain) else PENDING_WORK
        target = f"{asked.namespace}/{asked.name}" if isinstance(asked, Explain) else (asked.namespace or "")
        log.info(
            "explanation served",
            user=user,
            resource=resource,
            target=target,
            code=answer.code,
            seconds=round(seconds, 4),
            read=round(answer.phases.get("read", 0.0), 4),
            compute=round(answer.phases.get("compute", 0.0), 4),
            encode=round(encode, 4),
            cpu=round(time.thread_time() - cpu, 4),
            bytes=len(data),
            warm=answer.warm,
        )

    def _send(self, code: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        self._write(code, orjson.dumps(body), headers or {})

    def _write(self, code: int, data: bytes, headers: dict[str, str]) -> None:
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)


def serve(
    host: str,
    port: int,
    cert_file: Path,
    key_file: Path,
    api: client.ApiClient,
    answers: Answers,
    limiter: Limiter,
    synced: Callable[[], bool],
    metrics: SchedulerMetrics | None = None,
    front_proxy_resync_seconds: float = 60.0,
) -> ExplainServer:
    """Serve the API on `host:port` (0: any free port) in daemon threads; the front proxy's trust is read first."""
    contexts = ServingContexts(cert_file, key_file)
    front_proxy = FrontProxy(api, on_change=contexts.trust, resync_seconds=front_proxy_resync_seconds)
    front_proxy.start()
    server = ExplainServer((host, port), contexts, front_proxy, AccessReviewer(api), answers, limiter, synced, metrics)
    threading.Thread(target=server.serve_forever, name="explain-api", daemon=True).start()
    log.info("explain API serving", address=f"{host}:{server.server_address[1]}")
    return server
