"""gunicorn (gthread workers) serving the webhook over TLS 1.2+, with certificates re-read when they change.

gunicorn wraps every new connection with a fresh SSL context loaded from the files; our `ssl_context`
hook keeps one context per worker and rebuilds it only when the certificate or key file changes (by
mtime and size), so a rotated certificate reaches new connections without a restart and without
reading two files per handshake. A half-written pair keeps the previous context until it loads.

Each worker builds its own app and look-up cache after the fork (threads do not survive a fork), and
metrics use prometheus-client's multiprocess mode so one scrape sees every worker.

SIGTERM (issue 24): the server exits within `STOP_SECONDS` plus a moment. New connections are refused
at once and reviews in flight are answered (`ReviewWorker`); a worker still busy at `STOP_SECONDS` is
killed.
"""

from __future__ import annotations

import os
import shutil
import ssl
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import structlog
from flask import Flask
from gunicorn.app.base import BaseApplication
from gunicorn.workers.gthread import ThreadWorker

log = structlog.get_logger(__name__)

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
STOP_SECONDS = 3
"""gunicorn's graceful timeout: how long stopping workers may finish their reviews before they are killed. A
review takes milliseconds; 3 s keeps the whole stop within 5 s, under the chart's terminationGracePeriodSeconds."""


@dataclass(frozen=True, slots=True)
class ServerOptions:
    bind: str
    cert_file: str
    key_file: str
    workers: int = 2
    threads: int = 8
    keepalive_seconds: int = 120
    """Longer than the API server's idle timeout for its webhook connections (90 s, Go's default transport), so
    the API server is the one that closes an idle connection. The other way round, a review it sends on a
    connection just as we close it fails with "write: broken pipe" (a POST is not retried), and the pod's
    creation with it under `failurePolicy: Fail`: seen at 75 s, after a minute without admissions."""
    timeout_seconds: int = 30
    log_level: str = "info"


def prepare_metrics_dir() -> str | None:
    """Point prometheus-client at a fresh temp dir unless the operator chose one; returns ours to remove.

    Must run before anything imports `prometheus_client`, which reads the variable at import time.
    """
    if os.environ.get(MULTIPROC_ENV):
        return None
    path = tempfile.mkdtemp(prefix="phalanx-webhook-metrics-")
    os.environ[MULTIPROC_ENV] = path
    return path


class ReloadingContext:
    """The SSL context for the current certificate files, rebuilt when they change."""

    def __init__(self, cert_file: str, key_file: str) -> None:
        self.cert_file, self.key_file = cert_file, key_file
        self._stamp: tuple[int, int, int, int] | None = None
        self._context: ssl.SSLContext | None = None

    def _files_stamp(self) -> tuple[int, int, int, int]:
        cert, key = os.stat(self.cert_file), os.stat(self.key_file)
        return cert.st_mtime_ns, cert.st_size, key.st_mtime_ns, key.st_size

    def get(self, factory: Callable[[], ssl.SSLContext]) -> ssl.SSLContext:
        try:
            stamp = self._files_stamp()
        except OSError as err:
            if self._context is None:
                raise
            log.warning("certificate files unreadable", error=str(err))
            return self._context
        if stamp != self._stamp or self._context is None:
            try:
                context = factory()
            except (OSError, ssl.SSLError) as err:
                if self._context is None:
                    raise
                log.warning("certificate reload failed, keeping the previous one", error=str(err))
                return self._context
            context.minimum_version = ssl.TLSVersion.TLSv1_2
            self._context, self._stamp = context, stamp
            log.info("certificate loaded", cert_file=self.cert_file)
        return self._context


class ReviewWorker(ThreadWorker):  # type: ignore[misc]
    """gunicorn's `gthread` worker, with two changes to how it stops.

    - It closes its listening sockets as soon as it stops accepting, not when it exits: until then the
      kernel still takes new connections into the listen backlog, where they wait unanswered.
    - It waits for the requests it is handling before it exits, until `graceful_timeout`. gunicorn 27.0
      decides that from a count of connections, and a connection whose close fails (EBADF once its
      client has gone) is counted off twice: a stopping worker exited with a review in flight.
    """

    def init_process(self) -> None:
        self._handling = 0
        self._handled = threading.Condition()
        self._stopping_since = 0.0
        super().init_process()

    def handle(self, conn: Any) -> Any:
        with self._handled:
            self._handling += 1
        try:
            return super().handle(conn)
        finally:
            with self._handled:
                self._handling -= 1
                self._handled.notify_all()

    def set_accept_enabled(self, enabled: bool) -> None:
        super().set_accept_enabled(enabled)
        if not enabled and not self.alive:  # stopping: called once, when the accept loop ends
            self._stopping_since = time.monotonic()
            for listener in self.sockets:
                listener.close()

    def run(self) -> None:
        super().run()
        deadline = self._stopping_since + self.cfg.graceful_timeout
        with self._handled:
            while self._handling and (left := deadline - time.monotonic()) > 0:
                self._handled.wait(left)


class WebhookServer(BaseApplication):  # type: ignore[misc]
    """A gunicorn application whose workers each call `app_factory` after the fork."""

    def __init__(self, options: ServerOptions, app_factory: Callable[[], Flask]) -> None:
        self.options = options
        self.app_factory = app_factory
        self.tls = ReloadingContext(options.cert_file, options.key_file)
        super().__init__()

    def load_config(self) -> None:
        o = self.options
        tls = self.tls

        def ssl_context(conf: Any, factory: Callable[[], ssl.SSLContext]) -> ssl.SSLContext:
            return tls.get(factory)

        def child_exit(server: Any, worker: Any) -> None:
            from prometheus_client import multiprocess

            multiprocess.mark_process_dead(worker.pid)  # type: ignore[no-untyped-call]

        settings: dict[str, Any] = {
            "bind": [o.bind],
            "workers": o.workers,
            "threads": o.threads,
            "worker_class": ReviewWorker,
            "certfile": o.cert_file,
            "keyfile": o.key_file,
            "ssl_context": ssl_context,
            "keepalive": o.keepalive_seconds,
            "timeout": o.timeout_seconds,
            "graceful_timeout": STOP_SECONDS,
            "loglevel": o.log_level,
            "accesslog": None,
            "child_exit": child_exit,
            "proc_name": "phalanx-webhook",
            "control_socket_disable": True,
        }
        for key, value in settings.items():
            self.cfg.set(key, value)

    def load(self) -> Flask:
        return self.app_factory()


def serve(options: ServerOptions, app_factory: Callable[[], Flask], owned_dir: str | None = None) -> int:
    """Run until SIGTERM/SIGINT, then remove `owned_dir` (the metrics dir we made); returns the exit status.

    Workers are forks of this process and leave it through `sys.exit` too, so this `finally` also runs in
    each worker that exits: only the master (the process that made the directory) may remove it, or the
    other workers' next metric write fails and their review with it.
    """
    master = os.getpid()
    try:
        WebhookServer(options, app_factory).run()
    finally:
        if owned_dir and os.getpid() == master:
            shutil.rmtree(owned_dir, ignore_errors=True)
    return 0
