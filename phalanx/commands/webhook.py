"""`phalanx webhook`: serve the admission webhook over TLS with gunicorn.

With `PHALANX_CERT_MODE=self-managed` (set by the chart) the certificate comes from the in-cluster
certificate controller (`certs.controller`), which writes the files before gunicorn starts and keeps
them renewed; gunicorn picks up new files on new connections.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import ssl
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scheduler.api.config import DEFAULT_GATE_NAME, DEFAULT_SCHEDULER_NAME

if TYPE_CHECKING:
    from certs.controller import CertificateController


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("webhook", help="serve the admission webhook over TLS")
    parser.add_argument("--bind", default="0.0.0.0:8443", help="HOST:PORT to listen on (default %(default)s)")
    parser.add_argument("--tls-cert-file", required=True, help="PEM certificate chain; re-read when it changes")
    parser.add_argument("--tls-private-key-file", required=True, help="PEM private key; re-read when it changes")
    parser.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster service account)")
    parser.add_argument("--workers", type=int, default=2, help="gunicorn worker processes (default %(default)s)")
    parser.add_argument("--threads", type=int, default=8, help="threads per worker (default %(default)s)")
    parser.add_argument("--scheduler-name", default=DEFAULT_SCHEDULER_NAME, help="schedulerName given to gang pods")
    parser.add_argument("--gate-name", default=DEFAULT_GATE_NAME, help="scheduling gate added to gang pods")
    parser.add_argument(
        "--sync-timeout", type=float, default=10.0, help="seconds a worker waits for its caches before serving"
    )
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    parser.set_defaults(func=run)


def _start_certificate_controller(args: argparse.Namespace) -> CertificateController | None:
    from certs.controller import CertificateController, settings_from_env

    settings = settings_from_env(
        os.environ, cert_file=Path(args.tls_cert_file), key_file=Path(args.tls_private_key_file)
    )
    if settings is None:
        return None
    from phalanx.service_account import owner_reference
    from webhook.lookups import api_client_from

    if not args.kubeconfig:
        settings = dataclasses.replace(settings, owner=owner_reference())
    controller = CertificateController(settings, api_client_from(args.kubeconfig))
    controller.start()
    return controller


def _configure_logging(level: str) -> None:
    """Console lines on stderr; JSON when the chart sets PHALANX_LOG_FORMAT=json (log shippers)."""
    from phalanx import logs

    logs.configure_logging(level, json_format=os.environ.get("PHALANX_LOG_FORMAT", "text") == "json")


def _fail(message: str) -> int:
    print(f"phalanx webhook: {message}", file=sys.stderr)
    return 2


def _check_startup(args: argparse.Namespace) -> tuple[str | None, CertificateController | None]:
    """What would stop the server from serving, as one line naming the setting, and the running certificate
    controller (in-cluster mode), which has written the files by the time this returns."""
    from webhook.lookups import api_client_from

    try:
        api_client_from(args.kubeconfig)
    except Exception as err:
        return f"--kubeconfig: cannot load Kubernetes credentials: {err}", None
    try:
        controller = _start_certificate_controller(args)
    except ValueError as err:
        return str(err), None
    except Exception as err:
        return f"in-cluster certificates: {type(err).__name__}: {err}", None
    try:
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(
            args.tls_cert_file, args.tls_private_key_file
        )
    except (OSError, ssl.SSLError) as err:
        return f"--tls-cert-file/--tls-private-key-file: cannot load the certificate pair: {err}", controller
    return None, controller


def run(args: argparse.Namespace) -> int:
    _configure_logging(args.log_level)
    problem, controller = _check_startup(args)
    if problem:
        if controller is not None:
            controller.stop()
        return _fail(problem)
    # Order matters: the metrics directory must be set before prometheus_client is imported.
    from webhook.server import ServerOptions, prepare_metrics_dir, serve

    owned_dir = prepare_metrics_dir()
    from flask import Flask

    from webhook.app import create_app
    from webhook.lookups import KubeLookups, api_client_from
    from webhook.rules.pod import PodSettings

    settings = PodSettings(scheduler_name=args.scheduler_name, gate_name=args.gate_name)

    def app_factory() -> Flask:
        lookups = KubeLookups(api_client_from(args.kubeconfig)).start()
        # Serve only once synced (bounded): a worker that answers earlier reads the API on every miss.
        lookups.wait_synced(timeout=args.sync_timeout)
        return create_app(lookups, settings, ready=lookups.synced)

    options = ServerOptions(
        bind=args.bind,
        cert_file=args.tls_cert_file,
        key_file=args.tls_private_key_file,
        workers=args.workers,
        threads=args.threads,
        log_level=args.log_level,
    )
    try:
        return serve(options, app_factory, owned_dir)
    finally:
        if controller is not None:
            controller.stop(timeout=1.0)  # a sync on a server that stopped answering must not hold the exit
