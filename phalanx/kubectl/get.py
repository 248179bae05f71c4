"""`kubectl phalanx status` as text: the pending units in one `kubectl get` table, then totals and preemptions.

Columns: NAMESPACE (with `-A`), NAME, KIND, PRIORITY, QUEUE, STATE (the reason code `phalanx_pending_units`
counts), MEMBERS (exist/bound/min), AGE, REASON (the one-line message). Then the units and pods by queue and
by state, and the preemptions in flight: preemptor, members nominated, victims left, since when.
"""

from __future__ import annotations

from datetime import datetime

from phalanx.kubectl.printer import NONE, age, table
from scheduler.explain.status import PendingWork


def render(work: PendingWork, now: datetime, all_namespaces: bool, no_headers: bool = False) -> str:
    rows = []
    for unit in work.units:
        namespace, _, name = unit.key.partition("/")
        row = [namespace] if all_namespaces else []
        row += [
            name,
            unit.kind,
            str(unit.priority),
            unit.queue or NONE,
            unit.reason,
            f"{unit.exist}/{unit.bound}/{unit.min_count}",
            age(unit.created, now),
            unit.message,
        ]
        rows.append(row)
    headers = ["NAMESPACE"] if all_namespaces else []
    headers += ["NAME", "KIND", "PRIORITY", "QUEUE", "STATE", "MEMBERS", "AGE", "REASON"]
    out = table(headers, rows, no_headers)
    if no_headers:
        return out
    pods: dict[tuple[str, str], int] = {}
    for unit in work.units:
        for label in (("queue", unit.queue or NONE), ("state", unit.reason)):
            pods[label] = pods.get(label, 0) + len(unit.pending_members)
    queues = [[q or NONE, str(n), str(pods[("queue", q or NONE)])] for q, n in sorted(work.by_queue().items())]
    states = [[s, str(n), str(pods[("state", s)])] for s, n in sorted(work.by_reason().items())]
    out += "\n" + table(["QUEUE", "UNITS", "PODS"], queues)
    out += "\n" + table(["STATE", "UNITS", "PODS"], states)
    if work.flights:
        flights = [
            [f.preemptor, str(len(f.nominations)), str(len(f.victims)), age(f.since, now) if f.since else NONE]
            for f in work.flights
        ]
        out += "\n" + table(["PREEMPTOR", "NOMINATED", "VICTIMS LEFT", "SINCE"], flights)
    return out
