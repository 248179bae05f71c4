"""`phalanx simulate`: run the real scheduler on an in-memory cluster built from manifests.

The embedded default for a user with no cluster, and a what-if tool for one with a cluster (the
recipe is in WHAT_IF, shown by `--help`). Exit status: 0 when the simulation ran (whatever stays
pending), 2 on bad input.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
from datetime import UTC, datetime

from rich.console import Console
from rich.status import Status

from phalanx.logs import configure_logging
from scheduler.api.duration import DurationError, parse_duration
from scheduler.api.manifest import ManifestError
from scheduler.framework.runner import PassReport
from scheduler.preemption.actuator import PreemptionActuator
from scheduler.simulation.driver import simulate
from scheduler.simulation.report import build_report, decisions, render_text, warnings
from scheduler.simulation.scenario import load_scenario

LARGE_INPUT = 2_000
"""Inputs with at least this many objects show progress on stderr."""
READ_FROM_A_CLUSTER = (
    "nodes,namespaces,pods,priorityclasses,poddisruptionbudgets,"
    "persistentvolumeclaims,persistentvolumes,storageclasses,csinodes,csidrivers,"
    "deviceclasses,resourceslices,resourceclaims,resourceclaimtemplates,"
    "podgroups.scheduling.phalanx.dev,workloads.scheduling.phalanx.dev,queues.scheduling.phalanx.dev"
)
"""Every kind simulate reads, as `kubectl get` names them. Ours are group-qualified: where the cluster
serves `scheduling.k8s.io/v1alpha2`, plain `podgroups` and `workloads` are the native kinds."""
WHAT_IF = f"""\
what-if on a real cluster (checked against kube-apiserver 1.36):
  kubectl get {READ_FROM_A_CLUSTER} \\
    -A -o yaml > now.yaml
  phalanx simulate now.yaml my-gang.yaml      # what would it preempt, what is spared, when does it run?

  kubectl prints one `kind: List`; objects read back from the cluster (they carry a resourceVersion)
  are taken as stored, while the files you add pass the webhook's admission rules first. Where the
  cluster serves scheduling.k8s.io/v1alpha2 (Kubernetes 1.36 with the workload gates), add
  podgroups.scheduling.k8s.io,workloads.scheduling.k8s.io to the list (kubectl fails on a kind the
  server lacks). --all-pending also places the pending pods of other schedulers.
"""

ADMISSION_WARNINGS = 10
"""Admission warnings printed without -v: a dump of hand-written pods repeats the same one per pod."""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    summary = "run the scheduler on an in-memory cluster built from manifests"
    parser = subparsers.add_parser(
        "simulate",
        help=summary,
        description=summary,
        epilog=WHAT_IF,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("paths", nargs="+", metavar="FILE|DIR", help="YAML/JSON manifests (kind: List accepted)")
    parser.add_argument("--now", metavar="RFC3339", help="virtual start time, RFC3339 (default: the current time)")
    parser.add_argument("--until", metavar="DURATION", help="stop after this much virtual time, e.g. 90s, 10m, 1h30m")
    parser.add_argument("-o", "--output", choices=("text", "json"), default="text", help="report format")
    parser.add_argument(
        "--config", metavar="FILE", help="a SchedulerConfiguration document (overrides one in the input)"
    )
    parser.add_argument(
        "--all-pending", action="store_true", help="place every pending pod, whatever its schedulerName"
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="text report: every victim, spared candidate, binding, pending pod and node; logs on stderr",
    )
    parser.set_defaults(func=run)


def _fail(message: str) -> int:
    print(f"phalanx simulate: {message}", file=sys.stderr)
    return 2


def run(args: argparse.Namespace) -> int:
    # Plain tracebacks (no frame locals), as the scheduler and the webhook log them.
    configure_logging("info" if args.verbose else "warning", json_format=False)
    try:
        now = _parse_now(args.now)
        horizon = parse_duration(args.until) if args.until else None
    except DurationError as err:
        return _fail(f"--until: Invalid value: {err}")
    except ValueError as err:
        return _fail(str(err))
    stderr = Console(stderr=True)
    try:
        with stderr.status("reading manifests") as reading:
            scenario = load_scenario(
                args.paths,
                now,
                args.config,
                progress=lambda done, total: reading.update(f"admitting objects {done}/{total}"),
            )
    except ManifestError as err:
        return _fail(str(err))
    # The scenario lives until exit: keep the collector from re-scanning it on every allocation burst.
    gc.collect()
    gc.freeze()
    shown = scenario.warnings if args.verbose else scenario.warnings[:ADMISSION_WARNINGS]
    for warning in shown:
        print(f"Warning: {warning}", file=sys.stderr)
    if len(shown) < len(scenario.warnings):
        print(f"Warning: {len(scenario.warnings) - len(shown)} more admission warnings (-v shows all)", file=sys.stderr)
    large = len(scenario.objects.pods) + len(scenario.objects.nodes) >= LARGE_INPUT
    status: Status | None = stderr.status("scheduling") if large else None

    def on_pass(report: PassReport) -> None:
        if status is not None:
            status.update(f"virtual time {report.time.isoformat()}: {len(report.bindings)} bound in the last pass")

    if status is not None:
        status.start()
    try:
        result = simulate(
            scenario,
            now,
            until=now + horizon if horizon is not None else None,
            all_pending=args.all_pending,
            actuator=PreemptionActuator,
            on_pass=on_pass,
        )
    finally:
        if status is not None:
            status.stop()
    report = build_report(result)
    if args.output == "json":
        json.dump(report, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        decided = decisions(result, report["pending"])
        render_text(report, sys.stdout, now, result.cluster.now(), decided, warnings(result), args.verbose)
    return 0


def _parse_now(text: str | None) -> datetime:
    if text is None:
        return datetime.now(UTC).replace(microsecond=0)
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(
            f"--now: Invalid value: {text!r}: must be an RFC3339 time such as 2026-01-01T00:00:00Z"
        ) from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
