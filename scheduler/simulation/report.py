"""Simulation reports: the JSON other tools rely on and a text report for people.

The JSON keys `bindings`, `preemptions`, `pending` and `nodes` keep the shape issue 2 fixed; `decisions`
(issue 13) carries each preemption Decision as data. A binding of a pod whose claims hold devices adds `devices`
(issue 39); the others keep their shape, so a reader of a cluster without DRA sees no change. The text report
leads with one summary per decision and groups everything else, so a what-if on a whole-cluster dump fits a
screen; `-v` lists every victim, pod and node.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, TextIO

from rich.console import Console
from rich.table import Table
from rich.text import Text

from scheduler.api.meta import rfc3339
from scheduler.api.quantity import format_units
from scheduler.framework.cluster import object_key
from scheduler.framework.runner import DEFAULT_SCHEDULER
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.snapshot_builder import build_snapshot
from scheduler.plugins.dynamic_resources.plugin import pod_claims
from scheduler.preemption.decision import Decision, Outcome
from scheduler.simulation.driver import Simulation

TEXT_ROWS = 200
"""Rows shown per table in verbose text output (and decisions shown); the JSON output has everything."""
SHORT_ROWS = 10
"""Rows shown per table in the default text output, which must fit a screen for a whole-cluster dump."""
EXAMPLES = 3
"""Pods a grouped row names before it only counts the rest."""


def build_report(run: Simulation) -> dict[str, Any]:
    cluster = run.cluster
    config = run.scheduler.config
    objects = cluster.objects()
    snapshot = build_snapshot(objects, cluster.now(), config)
    bindings: list[dict[str, Any]] = []
    for b in cluster.bindings:
        binding: dict[str, Any] = {"pod": b.pod, "node": b.node, "time": rfc3339(b.time)}
        held = devices_of(b.pod, snapshot)
        if held:
            binding["devices"] = held
        bindings.append(binding)
    preemptions = [
        {
            "victim": p.victim,
            "node": p.node,
            "preemptor": p.preemptor,
            "preemptorKind": p.preemptor_kind,
            "time": rfc3339(p.time),
        }
        for p in cluster.preemptions
    ]
    pending: list[dict[str, str]] = []
    for key in sorted(objects.pods):
        pod = objects.pods[key]
        if pod.spec.node_name or pod.is_terminal or pod.metadata.deletion_timestamp is not None:
            continue
        scheduler = pod.spec.scheduler_name or DEFAULT_SCHEDULER
        condition = pod.condition("PodScheduled")
        if not run.all_pending and scheduler != config.scheduler_name:
            reason = "OtherScheduler"
            message = (
                f"spec.schedulerName is {scheduler!r}, not {config.scheduler_name!r}; "
                "use --all-pending to place every pending pod"
            )
        elif condition is not None and condition.status == "False":
            reason, message = condition.reason or "Unschedulable", condition.message or ""
        else:
            reason, message = "Pending", "not tried before the simulation ended (see --until)"
        pending.append({"pod": key, "reason": reason, "message": message})
    nodes: dict[str, Any] = {}
    table = snapshot.nodes
    for row, name in enumerate(table.names):
        nodes[name] = {
            "pods": sorted(p.key for p in snapshot.running[row]),
            "allocatable": {r: format_units(r, int(table.allocatable[row, c])) for c, r in enumerate(table.resources)},
            "allocated": {
                r: format_units(r, int(table.requested[row, c]))
                for c, r in enumerate(table.resources)
                if table.requested[row, c] > 0
            },
        }
    explained = [{"time": rfc3339(when), **d.as_json()} for when, d in decisions(run, pending)]
    return {
        "bindings": bindings,
        "preemptions": preemptions,
        "pending": pending,
        "nodes": nodes,
        "decisions": explained,
    }


def devices_of(pod: str, snapshot: Snapshot) -> list[dict[str, str]]:
    """The devices the claims of `pod` hold at the end of the run, claim by claim in `spec.resourceClaims` order.
    The claims are found as DynamicResources found them (`pod_claims`), so a claim made from a template and a
    PodGroup's shared claim are the ones the scheduler allocated. A pod gone by the end (preempted) names none:
    its claims were given back."""
    info = snapshot.pods.get(pod)
    if info is None or not info.pod.spec.resource_claims:
        return []
    used = pod_claims(info, snapshot)
    if isinstance(used, str):
        return []
    return [
        {"claim": u.claim.key, "request": r.request, "driver": r.driver, "pool": r.pool, "device": r.device}
        for u in used
        if u.claim.status.allocation is not None
        for r in u.claim.status.allocation.devices.results
    ]


def decisions(run: Simulation, pending: list[dict[str, str]]) -> list[tuple[datetime, Decision]]:
    """Each preemption decision that preempted, in order, then the last decision of each unit still
    pending on which preemption could not help (why it waits). Taken from the Decision objects the
    PostFilter returned, never from logs."""
    still_pending = {p["pod"] for p in pending}
    acted: list[tuple[datetime, Decision]] = []
    last: dict[str, tuple[datetime, Decision]] = {}
    for report_pass in run.passes:
        for _, result in report_pass.post_filter:
            decision = result.explanation
            if not isinstance(decision, Decision):
                continue
            if decision.outcome == Outcome.PREEMPT and decision.victims:
                acted.append((report_pass.time, decision))
            last[decision.preemptor] = (report_pass.time, decision)
    for when, decision in last.values():
        if decision.outcome == Outcome.CANNOT_HELP and still_pending & set(decision.pending):
            acted.append((when, decision))
    return acted


def warnings(run: Simulation) -> list[list[str]]:
    """Each configuration finding the scheduler reported (a Warning Event, or a log line for its own
    configuration), in order, once: time, object, reason, note. Text output only; the JSON keys are fixed."""
    rows: list[list[str]] = []
    for report_pass in run.passes:
        for warning in report_pass.warnings:
            if warning.regarding is None:
                subject = "SchedulerConfiguration"
            else:
                subject = f"{getattr(warning.regarding, 'kind', '')} {object_key(warning.regarding)}"
            rows.append([rfc3339(report_pass.time), subject, warning.reason, warning.note])
    return rows


def _capped(table: Table, rows: list[list[str]], limit: int) -> Table:
    for row in rows[:limit]:
        table.add_row(*(Text(cell) for cell in row))  # plain text: `[...]` in a message is not markup
    if len(rows) > limit:
        more = "-o json for all" if limit >= TEXT_ROWS else f"-v shows up to {TEXT_ROWS}, -o json all"
        shown = f"{len(rows) - limit} more rows not shown ({more})"
        table.caption = f"{table.caption}; {shown}" if table.caption else shown
    return table


def _examples(keys: list[str]) -> str:
    shown = ", ".join(keys[:EXAMPLES])
    return shown if len(keys) <= EXAMPLES else f"{shown}, +{len(keys) - EXAMPLES} more"


def render_text(
    report: dict[str, Any],
    out: TextIO,
    started: datetime,
    ended: datetime,
    decided: list[tuple[datetime, Decision]] | None = None,
    warned: list[list[str]] | None = None,
    verbose: bool = False,
) -> None:
    """The run at a glance: a summary per preemption decision first, then bindings and pending pods
    grouped, and the nodes that changed. `verbose` gives one row per pod, victim and node instead."""
    console = Console(file=out, width=160, soft_wrap=False)
    limit = TEXT_ROWS if verbose else SHORT_ROWS
    console.print(
        f"Simulated {rfc3339(started)} .. {rfc3339(ended)}: {len(report['bindings'])} bound, "
        f"{len(report['preemptions'])} preempted, {len(report['pending'])} pending"
    )
    if decided:
        console.print("Preemption decisions", style="bold")
        for when, decision in decided[:TEXT_ROWS]:
            lines = decision.explain(verbose)
            for line in [f"{rfc3339(when)} {lines[0]}", *lines[1:]]:
                console.print(line, markup=False, highlight=False, soft_wrap=True)
        if len(decided) > TEXT_ROWS:
            console.print(f"{len(decided) - TEXT_ROWS} more decisions not shown (-o json for all)")
    if warned:
        table = Table(title="Warnings (configuration the scheduler ignored)")
        for column in ("time", "object", "reason"):
            table.add_column(column, no_wrap=True)
        table.add_column("message", overflow="fold")
        console.print(_capped(table, warned, limit))
    console.print(_bindings(report, limit, verbose))
    if verbose and report["preemptions"]:
        preempted = Table(title="Preemptions")
        for column in ("victim", "node", "preemptor", "kind", "time"):
            preempted.add_column(column)
        rows = [
            [p["victim"], p["node"] or "", p["preemptor"] or "", p["preemptorKind"] or "", p["time"]]
            for p in report["preemptions"]
        ]
        console.print(_capped(preempted, rows, limit))
    if report["pending"]:
        console.print(_pending(report, limit, verbose))
    else:
        console.print("Pending: none")
    console.print(_usage(report, limit, verbose))


def _devices(binding: dict[str, Any]) -> list[str]:
    """The binding's devices as `pool/device`, the form `kubectl phalanx explain` lists a claim's devices in."""
    return [f"{d['pool']}/{d['device']}" for d in binding.get("devices", ())]


def _named(binding: dict[str, Any]) -> str:
    """The pod, with its first devices when it has some, for the grouped rows that name a few pods."""
    held = _devices(binding)
    return f"{binding['pod']} ({_examples(held)})" if held else binding["pod"]


def _bindings(report: dict[str, Any], limit: int, verbose: bool) -> Table:
    """One row per pod with `verbose`, else one per moment of the virtual clock. Devices show only when a pod
    has some: a run without DRA keeps its narrow table."""
    table = Table(title="Bindings")
    if verbose:
        with_devices = any("devices" in b for b in report["bindings"])
        for column in ("pod", "node", "time"):
            table.add_column(column)
        if with_devices:
            table.add_column("devices", overflow="fold")
        rows = [
            [b["pod"], b["node"], b["time"], *([", ".join(_devices(b))] if with_devices else [])]
            for b in report["bindings"]
        ]
        return _capped(table, rows, limit)
    by_time: dict[str, list[dict[str, Any]]] = {}
    for binding in report["bindings"]:
        by_time.setdefault(binding["time"], []).append(binding)
    for column in ("time", "pods", "nodes"):
        table.add_column(column, no_wrap=True)
    table.add_column("pods bound", overflow="fold")
    rows = [
        [when, str(len(bound)), str(len({b["node"] for b in bound})), _examples([_named(b) for b in bound])]
        for when, bound in by_time.items()
    ]
    return _capped(table, rows, limit)


def _pending(report: dict[str, Any], limit: int, verbose: bool) -> Table:
    """One row per pod with `verbose`, else one per distinct reason and message."""
    table = Table(title="Pending")
    if verbose:
        for column in ("pod", "reason", "message"):
            table.add_column(column, overflow="fold")
        return _capped(table, [[p["pod"], p["reason"], p["message"]] for p in report["pending"]], limit)
    grouped: dict[tuple[str, str], list[str]] = {}
    for pod in report["pending"]:
        grouped.setdefault((pod["reason"], pod["message"]), []).append(pod["pod"])
    table.add_column("pods", no_wrap=True)
    for column in ("reason", "message", "which"):
        table.add_column(column, overflow="fold")
    rows = [[str(len(pods)), reason, message, _examples(pods)] for (reason, message), pods in grouped.items()]
    return _capped(table, rows, limit)


def _usage(report: dict[str, Any], limit: int, verbose: bool) -> Table:
    """Every node with `verbose`; else the nodes where the simulation bound or preempted something."""
    touched = {b["node"] for b in report["bindings"]} | {p["node"] for p in report["preemptions"]}
    names = [n for n in report["nodes"] if verbose or n in touched]
    table = Table(title="Node usage (allocated / allocatable)")
    if not verbose:
        table.caption = "nodes where pods were bound or preempted (-v: every node)"
    resources = sorted({r for n in names for r in report["nodes"][n]["allocatable"]})
    table.add_column("node")
    for resource in resources:
        table.add_column(resource)
    rows = []
    for name in names:
        node = report["nodes"][name]
        rows.append(
            [name, *(f"{node['allocated'].get(r, '0')} / {node['allocatable'].get(r, '0')}" for r in resources)]
        )
    return _capped(table, rows, limit)
