"""Simulation reports: the JSON other tools rely on (keys fixed by issue 2) and tables for people."""

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
from scheduler.framework.snapshot_builder import build_snapshot
from scheduler.preemption.decision import Decision, Outcome
from scheduler.simulation.driver import Simulation

TEXT_ROWS = 200
"""Rows shown per table in text output; the JSON output always has everything."""


def build_report(run: Simulation) -> dict[str, Any]:
    cluster = run.cluster
    config = run.scheduler.config
    objects = cluster.objects()
    bindings = [{"pod": b.pod, "node": b.node, "time": rfc3339(b.time)} for b in cluster.bindings]
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
    snapshot = build_snapshot(objects, cluster.now(), config)
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
    return {"bindings": bindings, "preemptions": preemptions, "pending": pending, "nodes": nodes}


def explanations(run: Simulation, report: dict[str, Any]) -> list[list[str]]:
    """Each preemption decision in order, then why preemption could not help each unit still pending.

    Rendered from the Decision objects the PostFilter returned, never from logs.
    """
    still_pending = {p["pod"] for p in report["pending"]}
    acted: list[list[str]] = []
    last: dict[str, tuple[datetime, Decision]] = {}
    for report_pass in run.passes:
        for _, result in report_pass.post_filter:
            decision = result.explanation
            if not isinstance(decision, Decision):
                continue
            stamp = f"{rfc3339(report_pass.time)} "
            if decision.outcome == Outcome.PREEMPT and decision.victims:
                acted.append([stamp + decision.explain()[0], *decision.explain()[1:]])
            last[decision.preemptor] = (report_pass.time, decision)
    for when, decision in last.values():
        if decision.outcome == Outcome.CANNOT_HELP and still_pending & set(decision.pending):
            lines = decision.explain()
            acted.append([f"{rfc3339(when)} {lines[0]}", *lines[1:]])
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


def _capped(table: Table, rows: list[list[str]]) -> Table:
    for row in rows[:TEXT_ROWS]:
        table.add_row(*(Text(cell) for cell in row))  # plain text: `[...]` in a message is not markup
    if len(rows) > TEXT_ROWS:
        table.caption = f"{len(rows) - TEXT_ROWS} more rows not shown (use -o json for all)"
    return table


def render_text(
    report: dict[str, Any],
    out: TextIO,
    started: datetime,
    ended: datetime,
    decisions: list[list[str]] | None = None,
    warned: list[list[str]] | None = None,
) -> None:
    console = Console(file=out, width=160, soft_wrap=False)
    console.print(
        f"Simulated {rfc3339(started)} .. {rfc3339(ended)}: {len(report['bindings'])} bound, "
        f"{len(report['preemptions'])} preempted, {len(report['pending'])} pending"
    )
    if warned:
        table = Table(title="Warnings (configuration the scheduler ignored)")
        for column in ("time", "object", "reason"):
            table.add_column(column, no_wrap=True)
        table.add_column("message", overflow="fold")
        console.print(_capped(table, warned))
    bound = Table(title="Bindings")
    for column in ("pod", "node", "time"):
        bound.add_column(column)
    console.print(_capped(bound, [[b["pod"], b["node"], b["time"]] for b in report["bindings"]]))
    if report["preemptions"]:
        preempted = Table(title="Preemptions")
        for column in ("victim", "node", "preemptor", "kind", "time"):
            preempted.add_column(column)
        rows = [
            [p["victim"], p["node"] or "", p["preemptor"] or "", p["preemptorKind"] or "", p["time"]]
            for p in report["preemptions"]
        ]
        console.print(_capped(preempted, rows))
    if decisions:
        console.print("Preemption decisions", style="bold")
        for lines in decisions[:TEXT_ROWS]:
            for line in lines:
                console.print(line, markup=False, highlight=False, soft_wrap=True)
    waiting = Table(title="Pending")
    for column in ("pod", "reason", "message"):
        waiting.add_column(column, overflow="fold")
    console.print(_capped(waiting, [[p["pod"], p["reason"], p["message"]] for p in report["pending"]]))
    usage = Table(title="Node usage (allocated / allocatable)")
    resources = sorted({r for n in report["nodes"].values() for r in n["allocatable"]})
    usage.add_column("node")
    for resource in resources:
        usage.add_column(resource)
    rows = []
    for name, node in report["nodes"].items():
        cells = [f"{node['allocated'].get(r, '0')} / {node['allocatable'].get(r, '0')}" for r in resources]
        rows.append([name, *cells])
    console.print(_capped(usage, rows))
