"""`phalanx scheduler`: run the scheduler against a Kubernetes cluster (see README "Run against a cluster").

SIGTERM or SIGINT stops it within `EXIT_SECONDS` (`phalanx.signals`); a second one ends it at once.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import yaml
from pydantic import ValidationError

from phalanx import logs
from phalanx.service_account import owner_reference
from phalanx.signals import StopSignals, exit_now
from scheduler.api.config import SchedulerConfiguration

if TYPE_CHECKING:
    from scheduler.cluster.kube.process import SchedulerProcess
    from scheduler.serve.server import ExplainServer


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    summary = "run the scheduler against a Kubernetes cluster"
    parser = subparsers.add_parser("scheduler", help=summary, description=summary)
    parser.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster service account)")
    parser.add_argument("--config", help="a SchedulerConfiguration document (YAML or JSON)")
    parser.add_argument(
        "--metrics-bind",
        default="0.0.0.0:10259",
        metavar="HOST:PORT",
        help="serve /metrics and /healthz here (default %(default)s; empty to disable)",
    )
    parser.add_argument(
        "--leader-elect",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="compete for a Lease so only one replica schedules (default: the config's leaderElection)",
    )
    parser.add_argument(
        "--lease-namespace",
        default=os.environ.get("POD_NAMESPACE") or "kube-system",
        help="Lease namespace when the config names none (default: $POD_NAMESPACE, else kube-system)",
    )
    parser.add_argument(
        "--identity",
        default=os.environ.get("POD_NAME"),
        help="this replica's Lease holder identity (default: $POD_NAME, else hostname + random)",
    )
    explain = parser.add_argument_group(
        "explain API", "explain.phalanx.dev, served to kube-apiserver's front proxy (README, Why is it pending?)"
    )
    explain.add_argument(
        "--explain-bind",
        default="",
        metavar="HOST:PORT",
        help="serve the explain API here over TLS (default: not served)",
    )
    explain.add_argument("--tls-cert-file", metavar="PATH", help="the explain API's serving certificate (PEM)")
    explain.add_argument("--tls-private-key-file", metavar="PATH", help="its private key (PEM)")
    explain.add_argument(
        "--explain-concurrency", type=int, default=1, metavar="N", help="explanations computed at once (default 1)"
    )
    explain.add_argument(
        "--explain-qps", type=float, default=2.0, metavar="RATE", help="explanations a second, on average (default 2)"
    )
    explain.add_argument(
        "--explain-burst", type=int, default=5, metavar="N", help="explanations in a burst above the rate (default 5)"
    )
    explain.add_argument(
        "--explain-cpu-share",
        type=_cpu_share,
        default=0.02,
        metavar="SHARE",
        help="share of one core explanations may take on average while this replica schedules, in (0, 1] "
        "(default %(default)s; a whole core while it does not)",
    )
    explain.add_argument(
        "--explain-cpu-burst",
        type=_cpu_burst,
        default=0.25,
        metavar="SECONDS",
        help="CPU seconds explanations may owe before the next waits, > 0 (default %(default)s)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    parser.set_defaults(func=run)


def _cpu_share(text: str) -> float:
    """A type for argparse, which puts the flag's name in front of a refusal."""
    share = _number(text, "a number")
    if not 0 < share <= 1:
        raise argparse.ArgumentTypeError(f"{text}: a share of one core, in (0, 1]")
    return share


def _cpu_burst(text: str) -> float:
    seconds = _number(text, "a number of seconds")
    if not seconds > 0:
        raise argparse.ArgumentTypeError(f"{text}: CPU seconds, > 0")
    return seconds


def _number(text: str, what: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None


def _fail(message: str) -> int:
    print(f"phalanx scheduler: {message}", file=sys.stderr)
    return 2


def load_config(path: str | None) -> SchedulerConfiguration:
    if path is None:
        return SchedulerConfiguration()
    raw = yaml.safe_load(Path(path).read_text())
    return SchedulerConfiguration.model_validate(raw or {})


def configure_logging(verbose: bool) -> None:
    """Console lines by default; `PHALANX_LOG_FORMAT=json` and `PHALANX_LOG_LEVEL` as the chart sets them."""
    level = "debug" if verbose else os.environ.get("PHALANX_LOG_LEVEL", "info")
    logs.configure_logging(level, json_format=os.environ.get("PHALANX_LOG_FORMAT") == "json")


def run(args: argparse.Namespace) -> int:
    configure_logging(args.verbose)
    try:
        config = load_config(args.config)
    except (OSError, yaml.YAMLError, ValidationError) as err:
        return _fail(f"--config: {err}")
    if args.leader_elect is not None:
        election = config.leader_election.model_copy(update={"leader_elect": args.leader_elect})
        config = config.model_copy(update={"leader_election": election})

    from kube.client import api_client
    from scheduler.cluster.kube.process import EXIT_SECONDS, SchedulerProcess
    from scheduler.metrics import serve

    signals = StopSignals()
    signals.start(deadline_seconds=EXIT_SECONDS)
    try:
        api = api_client(args.kubeconfig, "scheduler")
    except Exception as err:
        return _fail(f"--kubeconfig: {err}")
    try:
        process = SchedulerProcess(
            api,
            config,
            identity=args.identity,
            lease_namespace=args.lease_namespace,
            lease_owner=None if args.kubeconfig else owner_reference(),
        )
    except ValueError as err:
        return _fail(str(err))
    if args.explain_bind:
        try:
            explain_api = serve_explanations(args, process)
        except (OSError, ValueError) as err:
            return _fail(f"--explain-bind: {args.explain_bind}: {err}")
        where = f"{args.explain_bind.rpartition(':')[0]}:{explain_api.server_address[1]}"
        print(f"explain API on {where}", file=sys.stderr, flush=True)
    if args.metrics_bind:
        host, _, port = args.metrics_bind.rpartition(":")
        try:
            server = serve(process.metrics, host or "0.0.0.0", int(port), process.healthy)
        except (OSError, ValueError) as err:
            return _fail(f"--metrics-bind: {args.metrics_bind}: {err}")
        print(
            f"metrics on {args.metrics_bind.rpartition(':')[0]}:{server.server_address[1]}", file=sys.stderr, flush=True
        )
    exit_now(process.run(signals.stop))


def serve_explanations(args: argparse.Namespace, process: SchedulerProcess) -> ExplainServer:
    """Start the explain API beside the scheduler (`scheduler/serve`), answering from `process`'s informers with
    its configuration; `ValueError` or `OSError` when it cannot be."""
    from kube.client import api_client
    from scheduler.serve.answers import Answers, Replica
    from scheduler.serve.informed import seen
    from scheduler.serve.limits import Limiter
    from scheduler.serve.server import serve

    if not args.tls_cert_file or not args.tls_private_key_file:
        raise ValueError("Required value: --tls-cert-file and --tls-private-key-file (the API is served over TLS)")
    host, _, port = args.explain_bind.rpartition(":")
    cluster = process.cluster
    answers = Answers(
        lambda: seen(cluster.view), process.config, lambda: Replica(process.identity, cluster.may_write())
    )
    return serve(
        host or "0.0.0.0",
        int(port),
        Path(args.tls_cert_file),
        Path(args.tls_private_key_file),
        api_client(args.kubeconfig, "scheduler"),
        answers,
        Limiter(
            args.explain_concurrency,
            args.explain_qps,
            args.explain_burst,
            cpu_share=args.explain_cpu_share,
            cpu_burst=args.explain_cpu_burst,
            busy=process.busy,
        ),
        lambda: all(i.synced.is_set() for i in cluster.informers),
        process.metrics,
    )
