"""Entry point of the `phalanx` console script.

Each subcommand lives in `phalanx/commands/<name>.py` and is imported only when chosen, so
`phalanx simulate` never pays for Flask or the Kubernetes client.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import sys
from collections.abc import Sequence

# subcommand -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "simulate": ("phalanx.commands.simulate", "run the scheduler on an in-memory cluster built from manifests"),
    "scheduler": ("phalanx.commands.scheduler", "run the scheduler against a Kubernetes cluster"),
    "webhook": ("phalanx.commands.webhook", "serve the admission webhook over TLS"),
    "certs": ("phalanx.commands.certs", "generate a CA and the webhook's serving certificate"),
    "explain": ("phalanx.commands.explain", "why a pod or PodGroup is pending (also `kubectl phalanx explain`)"),
    "status": ("phalanx.commands.status", "the cluster's pending work at a glance (also `kubectl phalanx status`)"),
}


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="phalanx", description="Workload-aware preemption for Kubernetes.")
    parser.add_argument("--version", action="version", version=f"phalanx {importlib.metadata.version('phalanx')}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    chosen = next((a for a in args_list if not a.startswith("-")), None)
    for name, (module, summary) in COMMANDS.items():
        if name == chosen:
            importlib.import_module(module).register(subparsers)
        else:
            subparsers.add_parser(name, help=summary, description=summary)
    args = parser.parse_args(args_list)
    if args.command is None or not hasattr(args, "func"):
        parser.print_help()
        return 2
    result: int = args.func(args)
    return result


if __name__ == "__main__":
    sys.exit(main())
