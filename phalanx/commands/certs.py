"""`phalanx certs`: write a CA and the webhook's serving certificate into a directory.

For installs that manage certificates outside the cluster (the chart's `helm` mode takes its
files from here, and so can a local webhook run). The files use the names a
`kubernetes.io/tls` Secret uses, so `kubectl create secret generic --from-file=DIR` works as is.
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
    parser.add_argument("--ca-days", type=int, default=3650, help="CA lifetime in days (default %(default)s)")
    parser.add_argument("--days", type=int, default=365, help="serving certificate lifetime in days")
    parser.add_argument("--force", action="store_true", help="overwrite existing files")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
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
