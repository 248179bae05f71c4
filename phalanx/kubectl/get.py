"""`kubectl phalanx status` as text: the pending units in one `kubectl get` table, then totals and preemptions.

Rendered from the `PendingWork` document (`-o json`), whoever computed it. Columns: NAMESPACE (with `-A`), NAME,
KIND, PRIORITY, QUEUE, STATE (the reason code `phalanx_pending_units` counts), MEMBERS (exist/bound/min), AGE,
REASON (the one-line message). Then the units and pods by queue and by state, and the preemptions in flight:
preemptor, members nominated, victims left, since when.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from phalanx.kubectl.describe import instant
from phalanx.kubectl.printer import NONE, age, table

Doc = dict[str, Any]


def totals(units: list[Doc]) -> Doc:
    """The document's `totals` of `units`: units, their pending pods, by Queue and by reason."""
    return {
        "units": len(units),
        "pods": sum(u["members"]["pending"] for u in units),
        "byQueue": dict(sorted(Counter(u["queue"] or "" for u in units).items())),
        "byReason": dict(sorted(Counter(u["reason"] for u in units).items())),
    }


def render(work: Doc, all_namespaces: bool, no_headers: bool = False) -> str:
    now = instant(work["time"])
    units = work["units"]
    rows = []
    for unit in units:
        namespace, _, name = unit["unit"].partition("/")
        row = [namespace] if all_namespaces else []
        members = unit["members"]
        row += [
            name,
            unit["kind"],
            str(unit["priority"]),
            unit["queue"] or NONE,
            unit["reason"],
            f"{members['exist']}/{members['bound']}/{members['min']}",
            age(instant(unit["created"]) if unit["created"] else None, now),
            unit["message"],
        ]
        rows.append(row)
    headers = ["NAMESPACE"] if all_namespaces else []
    headers += ["NAME", "KIND", "PRIORITY", "QUEUE", "STATE", "MEMBERS", "AGE", "REASON"]
    out = table(headers, rows, no_headers)
    if no_headers:
        return out
    pods: Counter[tuple[str, str]] = Counter()
    for unit in units:
        for label in (("queue", unit["queue"] or NONE), ("state", unit["reason"])):
            pods[label] += unit["members"]["pending"]
    counted = totals(units)
    queues = [[q or NONE, str(n), str(pods[("queue", q or NONE)])] for q, n in counted["byQueue"].items()]
    states = [[s, str(n), str(pods[("state", s)])] for s, n in counted["byReason"].items()]
    out += "\n" + table(["QUEUE", "UNITS", "PODS"], queues)
    out += "\n" + table(["STATE", "UNITS", "PODS"], states)
    if work["preemptions"]:
        flights = [
            [
                f["preemptor"],
                str(f["nominated"]),
                str(f["victimsLeft"]),
                age(instant(f["since"]), now) if f["since"] else NONE,
            ]
            for f in work["preemptions"]
        ]
        out += "\n" + table(["PREEMPTOR", "NOMINATED", "VICTIMS LEFT", "SINCE"], flights)
    return out
