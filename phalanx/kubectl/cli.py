"""`kubectl phalanx explain|status` (the `kubectl-phalanx` executable, kubectl's plugin convention), also
`phalanx explain|status`: why units are pending, on a live cluster or on a dump of one.

kubectl hands a plugin every argument after its name, so kubectl's flags work before or after the
subcommand: `--kubeconfig`, `--context`, `-n/--namespace`, `-A/--all-namespaces`, `-o text|json|yaml`.
On a live cluster the running scheduler answers, through its explain API (`served.py`); where the cluster has
none, the command says so and computes the answer itself from a LIST of the cluster (`live.py`), as it does with
`--config FILE` (a configuration to try instead of the scheduler's) and for `-f FILE|DIR`, a dump (`kubectl get
... -o yaml`, as `phalanx simulate` reads it) explained at `--now`. Nothing is ever written: the commands only GET.
Either way the text is rendered from the JSON document (`describe.py`, `get.py`).

Exit status 0 when the answer was printed, 1 on any error, which is one line on stderr worded as kubectl's
(`Error from server (NotFound): pods "x" not found`), never a traceback (`-v` adds it for a bug).
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from phalanx.kubectl.errors import KubectlError

if TYPE_CHECKING:
    from phalanx.kubectl.connection import Connection
    from scheduler.api.config import SchedulerConfiguration
    from scheduler.framework.cluster import ClusterObjects

API_VERSION = "scheduling.phalanx.dev/v1alpha1"
NATIVE_API_VERSION = "scheduling.k8s.io/v1alpha2"
"""Our PodGroups' and the native ones' (`scheduler.api.pod_group`, not imported: a served answer needs none of it)."""

PROG = "kubectl phalanx"
CHART_CONFIG = "phalanx-system/phalanx-scheduler"
"""The scheduler's ConfigMap as README's install names it (namespace phalanx-system, release phalanx), read only where
the cluster serves no explain API."""
TYPES: dict[str, tuple[str, str | None]] = {
    **dict.fromkeys(("pod", "pods", "po"), ("pod", None)),
    **dict.fromkeys(("podgroup", "podgroups", "pg"), ("podgroup", None)),
    **dict.fromkeys(("podgroup.scheduling.phalanx.dev", "podgroups.scheduling.phalanx.dev"), ("podgroup", API_VERSION)),
    **dict.fromkeys(("podgroup.scheduling.k8s.io", "podgroups.scheduling.k8s.io"), ("podgroup", NATIVE_API_VERSION)),
}
"""What `explain TYPE NAME` accepts, as kubectl resolves names, short names and group-qualified names."""
SORT_KEYS = ("name", "namespace", "age", "priority", "queue", "state")
EXPLAIN_HELP = "why a pod or a PodGroup is pending: its state, placement, preemption in dry run, what unblocks it"
STATUS_HELP = "every pending unit in one table, totals by queue and state, and the preemptions in flight"


def add_common(parser: argparse.ArgumentParser, suppress: bool) -> None:
    """kubectl's flags; `suppress` leaves a value given before the subcommand alone (no default of its own)."""

    def default(value: Any) -> Any:
        return argparse.SUPPRESS if suppress else value

    parser.add_argument("--kubeconfig", default=default(None), help="path to the kubeconfig file")
    parser.add_argument("--context", default=default(None), help="the kubeconfig context to use")
    parser.add_argument("-n", "--namespace", default=default(None), help="the namespace (default: the context's)")
    parser.add_argument(
        "-A", "--all-namespaces", action="store_true", default=default(False), help="status: every namespace"
    )
    parser.add_argument("-o", "--output", choices=("text", "json", "yaml"), default=default("text"))
    parser.add_argument(
        "--request-timeout", type=float, default=default(30.0), metavar="SECONDS", help="per API request"
    )
    parser.add_argument(
        "--scheduler-config",
        default=default(CHART_CONFIG),
        metavar="NAMESPACE/NAME",
        help=f"without the explain API: the scheduler's ConfigMap, for its configuration (default {CHART_CONFIG})",
    )
    parser.add_argument(
        "--config",
        default=default(None),
        metavar="FILE",
        help="compute the answer here with this SchedulerConfiguration instead of the scheduler's (lists the cluster)",
    )
    parser.add_argument(
        "-f",
        "--filename",
        action="append",
        default=default(None),
        metavar="FILE|DIR",
        help="read a dump of a cluster (kubectl get -o yaml) instead of the live cluster",
    )
    parser.add_argument("--now", default=default(None), metavar="RFC3339", help="with -f: the time to explain at")
    parser.add_argument("-v", "--verbose", action="store_true", default=default(False), help="a traceback on a bug")


def add_explain(subparsers: argparse._SubParsersAction[argparse.ArgumentParser], suppress: bool) -> None:
    parser = subparsers.add_parser("explain", help=EXPLAIN_HELP, description=EXPLAIN_HELP)
    parser.add_argument("type", metavar="TYPE[/NAME]", help="pod (po) or podgroup (pg), or TYPE/NAME")
    parser.add_argument("name", nargs="?", metavar="NAME")
    add_common(parser, suppress)
    parser.set_defaults(func=run_explain)


def add_status(subparsers: argparse._SubParsersAction[argparse.ArgumentParser], suppress: bool) -> None:
    parser = subparsers.add_parser("status", help=STATUS_HELP, description=STATUS_HELP)
    parser.add_argument(
        "--sort-by", choices=SORT_KEYS, default="namespace", help="sort the rows, ascending (age: oldest first)"
    )
    parser.add_argument("--state", action="append", metavar="STATE", help="only units in this state (repeatable)")
    parser.add_argument("--queue", action="append", metavar="QUEUE", help="only units of this Queue (repeatable)")
    parser.add_argument("-l", "--selector", help="only units with a member (or PodGroup) matching, e.g. app=x,tier!=db")
    parser.add_argument("--no-headers", action="store_true", help="the units table without its header, and only it")
    add_common(parser, suppress)
    parser.set_defaults(func=run_status)


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog=PROG, description="Why is my gang pending? Phalanx's pending work, explained.")
    add_common(top, suppress=False)
    subparsers = top.add_subparsers(dest="command", metavar="COMMAND")
    add_explain(subparsers, suppress=True)
    add_status(subparsers, suppress=True)
    return top


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    if not hasattr(args, "func"):
        parser().print_help()
        return 1
    return int(args.func(args))


def _guarded(args: argparse.Namespace, body: Any) -> int:
    """Run `body`; every failure becomes one line on stderr and exit status 1."""
    try:
        sys.stdout.write(body())
        return 0
    except KubectlError as err:
        print(err, file=sys.stderr)
    except Exception as err:  # a bug: one line, and the traceback only when asked for
        first = next(iter(str(err).splitlines()), "")
        print(f"error: {type(err).__name__}: {first}", file=sys.stderr)
        if args.verbose:
            traceback.print_exc()
    return 1


@contextmanager
def _computed_here() -> Iterator[None]:
    """Where the answer is computed by this command: the scheduler's code logs only warnings, and what it refuses
    (`ExplainError`, a dump that does not parse) is said as kubectl says it. Imported only then: a served answer
    needs none of it (a third of a second of the command's start)."""
    from phalanx.logs import configure_logging
    from scheduler.api.manifest import ManifestError

    configure_logging("warning", json_format=False)
    from scheduler.explain.explanation import ExplainError, NotFound

    try:
        yield
    except NotFound as err:
        raise KubectlError(f"Error from server (NotFound): {err}") from None
    except ExplainError as err:
        raise KubectlError(f"error: {err}") from None
    except ManifestError as err:
        raise KubectlError(f"error: {err}") from None


def _now(args: argparse.Namespace) -> datetime:
    if args.now is None:
        return datetime.now(UTC).replace(microsecond=0)
    if not args.filename:
        raise KubectlError("error: --now only applies to a dump (-f): a live cluster is explained as it is now")
    try:
        parsed = datetime.fromisoformat(args.now.replace("Z", "+00:00"))
    except ValueError:
        raise KubectlError(f"error: --now: Invalid value: {args.now!r}: must be an RFC3339 time") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _served(args: argparse.Namespace) -> tuple[Connection | None, str]:
    """Where the answer comes from: a connection to the scheduler's explain API, or None to compute it here (a
    dump, `--config`, or a cluster without the API, which is said on stderr); and the namespace to use."""
    if args.filename:
        return None, args.namespace or "default"
    from phalanx.kubectl.connection import connect
    from phalanx.kubectl.served import NOT_INSTALLED, available

    connection = connect(args.kubeconfig, args.context, args.request_timeout)
    namespace = args.namespace or connection.namespace
    if args.config is None:
        if available(connection):
            return connection, namespace
        print(NOT_INSTALLED, file=sys.stderr)
    return None, namespace


def _read(args: argparse.Namespace, namespace: str) -> tuple[ClusterObjects, SchedulerConfiguration]:
    """The objects and the scheduler's configuration, to compute the answer here: from a dump, or from a LIST of
    the live cluster."""
    if args.filename:
        from scheduler.simulation.scenario import load_scenario

        scenario = load_scenario(args.filename, _now(args), args.config)
        return scenario.objects, scenario.config
    from phalanx.kubectl.connection import connect
    from phalanx.kubectl.live import check_namespace, read_cluster, scheduler_config

    connection = connect(args.kubeconfig, args.context, args.request_timeout)
    if not args.all_namespaces or args.func is run_explain:
        check_namespace(connection, namespace)
    if args.config is not None:
        config = _config_file(args.config)
    else:
        config, warning = scheduler_config(connection, args.scheduler_config)
        if warning is not None:
            print(warning, file=sys.stderr)
    return read_cluster(connection), config


def _config_file(path: str) -> SchedulerConfiguration:
    """The one SchedulerConfiguration document of `path`, read as `phalanx simulate --config` reads it."""
    from scheduler.api.config import SchedulerConfiguration
    from scheduler.api.manifest import load_manifests

    given = [o for o, _ in load_manifests([path]) if isinstance(o, SchedulerConfiguration)]
    if len(given) != 1:
        raise KubectlError(f"error: --config: {path}: expected exactly one SchedulerConfiguration document")
    return given[0]


def _target(args: argparse.Namespace) -> tuple[str, str, str | None]:
    kind, _, name = args.type.partition("/")
    if not name:
        name = args.name or ""
    elif args.name:
        raise KubectlError(
            "error: there is no need to specify a resource type as a separate argument when passing TYPE/NAME"
        )
    found = TYPES.get(kind.lower())
    if found is None:
        raise KubectlError(
            f'error: the server doesn\'t have a resource type "{kind}" that phalanx explains (pod, podgroup)'
        )
    if not name:
        raise KubectlError(f"error: you must specify the name of the {found[0]} to explain")
    return found[0], name, found[1]


def run_explain(args: argparse.Namespace) -> int:
    def body() -> str:
        from phalanx.kubectl.describe import render
        from phalanx.kubectl.printer import document

        kind, name, api_version = _target(args)
        now = _now(args)
        connection, namespace = _served(args)
        if connection is not None:
            from phalanx.kubectl.served import explanation

            explained = explanation(connection, kind, namespace, name, api_version)
        else:
            from scheduler.explain.explanation import Target, explain

            with _computed_here():
                objects, config = _read(args, namespace)
                explained = explain(objects, config, now, Target(kind, namespace, name, api_version)).as_json()
        if args.output != "text":
            return document(explained, args.output)
        return render(explained)

    return _guarded(args, body)


def run_status(args: argparse.Namespace) -> int:
    def body() -> str:
        from phalanx.kubectl.get import render, totals
        from phalanx.kubectl.printer import document

        now = _now(args)
        connection, namespace = _served(args)
        if connection is not None:
            from phalanx.kubectl.served import pending_work as served_work

            work = served_work(connection, None if args.all_namespaces else namespace, args.selector)
        else:
            from scheduler.explain import selector
            from scheduler.explain.status import pending_work

            with _computed_here():
                objects, config = _read(args, namespace)
                found = pending_work(objects, config, now, None if args.all_namespaces else namespace)
            if args.selector:
                terms = selector.parse(args.selector)
                found.units = [u for u in found.units if selector.matches(terms, u)]
            work = found.as_json()
        work["units"] = sorted(_selected(work["units"], args), key=_sort_key(args.sort_by, _instant(work["time"])))
        work["totals"] = totals(work["units"])
        if args.output != "text":
            return document(work, args.output)
        if not work["units"]:
            where = "" if args.all_namespaces else f" in {namespace} namespace"
            print(f"No pending units found{where}.", file=sys.stderr)
            return ""
        return render(work, args.all_namespaces, args.no_headers)

    return _guarded(args, body)


def _instant(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _selected(units: list[dict[str, Any]], args: argparse.Namespace) -> list[dict[str, Any]]:
    return [
        u
        for u in units
        if (not args.state or u["reason"] in args.state) and (not args.queue or (u["queue"] or "") in args.queue)
    ]


def _sort_key(column: str, now: datetime) -> Any:
    def key(unit: dict[str, Any]) -> tuple[Any, ...]:
        namespace, _, name = unit["unit"].partition("/")
        created = _instant(unit["created"]).timestamp() if unit["created"] else now.timestamp()
        value: Any = {
            "name": name,
            "namespace": namespace,
            "age": created,
            "priority": unit["priority"],
            "queue": unit["queue"] or "",
            "state": unit["reason"],
        }[column]
        return (value, namespace, name)

    return key
