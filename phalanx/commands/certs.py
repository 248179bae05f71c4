"""`phalanx certs`: write a CA and the webhook's serving certificate into a directory.

For webhooks run outside the chart's self-managed mode (a local run, or a Secret made by hand).
The files use the names a `kubernetes.io/tls` Secret uses, so
`kubectl create secret generic NAME --from-file=DIR` works as is.

`phalanx certs --uninstall` is the chart's pre-delete hook: it removes the webhook
configurations and the certificate Secret (see `certs.registration`).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from certs.authority import KEY_TYPES, generate_ca, issue_serving_certificate


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    summary = "generate a CA and the webhook's serving certificate"
    parser = subparsers.add_parser("certs", help=summary, description=summary)
    parser.add_argument(
        "--out-dir", type=Path, default=Path("."), help="directory for ca.crt, ca.key, tls.crt, tls.key"
    )
    parser.add_argument("--service", default="phalanx-webhook", help="webhook Service name (default %(default)s)")
    parser.add_argument("--namespace", default="phalanx-system", help="Service namespace (default %(default)s)")
    parser.add_argument(
        "--extra-san",
        action="append",
        default=[],
        metavar="NAME|IP",
        help="additional DNS name or IP address (repeatable), e.g. 127.0.0.1 for a local run",
    )
    parser.add_argument("--key-type", choices=KEY_TYPES, default="ecdsa", help="ECDSA P-256 or RSA 2048")
    parser.add_argument("--ca-days", type=float, default=3650, help="CA lifetime in days (default %(default)s)")
    parser.add_argument("--days", type=float, default=365, help="serving certificate lifetime in days")
    parser.add_argument("--force", action="store_true", help="overwrite existing files")
    uninstall = parser.add_argument_group("uninstall (the chart's pre-delete hook)")
    uninstall.add_argument(
        "--uninstall",
        action="store_true",
        help="delete the webhook configurations and the certificate Secret instead of writing files",
    )
    uninstall.add_argument(
        "--secret",
        default="phalanx-webhook-tls",
        help="self-managed certificate Secret in --namespace to delete; empty to keep it (Helm or cert-manager own it)",
    )
    uninstall.add_argument("--mutating-webhook-configuration", default="phalanx-mutating")
    uninstall.add_argument("--validating-webhook-configuration", default="phalanx-validating")
    uninstall.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster service account)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.uninstall:
        return _uninstall(args)
    out_dir: Path = args.out_dir
    targets = {name: out_dir / name for name in ("ca.crt", "ca.key", "tls.crt", "tls.key")}
    existing = [str(p) for p in targets.values() if p.exists()]
    if existing and not args.force:
        print(f"phalanx certs: {', '.join(existing)}: already exists (use --force to overwrite)", file=sys.stderr)
        return 1
    try:
        ca = generate_ca(key_type=args.key_type, days=args.ca_days)
        leaf = issue_serving_certificate(
            ca,
            args.service,
            args.namespace,
            extra_sans=args.extra_san,
            key_type=args.key_type,
            days=args.days,
        )
    except ValueError as err:
        print(f"phalanx certs: {err}", file=sys.stderr)
        return 2
    out_dir.mkdir(parents=True, exist_ok=True)
    _write(targets["ca.crt"], ca.cert_pem, private=False)
    _write(targets["ca.key"], ca.key_pem, private=True)
    _write(targets["tls.crt"], leaf.cert_pem, private=False)
    _write(targets["tls.key"], leaf.key_pem, private=True)
    print(f"wrote {', '.join(str(p) for p in targets.values())}")
    return 0


def _write(path: Path, data: bytes, *, private: bool) -> None:
    """Keys are created 0600 from the start, never chmod-ed after being world-readable."""
    mode = 0o600 if private else 0o644
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.chmod(path, mode)


def _uninstall(args: argparse.Namespace) -> int:
    from certs.registration import remove_registration
    from kube.client import api_client

    removed = remove_registration(
        api_client(args.kubeconfig, "webhook"),
        namespace=args.namespace,
        secret_name=args.secret,
        mutating_webhook_configuration=args.mutating_webhook_configuration,
        validating_webhook_configuration=args.validating_webhook_configuration,
    )
    print(f"removed {', '.join(removed)}" if removed else "nothing to remove")
    return 0
