"""`kubectl phalanx explain` as text: one unit, described the way `kubectl describe` lays an object out.

The unit and its state, its members, where they can go now (kube-scheduler's FitError and how many fit),
what preemption would do now (the Decision's summary, then one line per victim and spared candidate, capped),
the preemptions in flight that concern it, and what would unblock it. `-o json` has everything.
"""

from __future__ import annotations

from datetime import datetime

from phalanx.kubectl.printer import NONE, age, table
from scheduler.api.meta import rfc3339
from scheduler.explain.explanation import Explanation
from scheduler.explain.units import Unit

DETAIL_LINES = 20
"""Victim and spared-candidate lines shown before the rest is only counted."""
LABEL = 15


def _field(name: str, value: str) -> str:
    return f"{name + ':':<{LABEL}}{value}\n"


def _kind(unit: Unit) -> str:
    if unit.group is None:
        return "Pod (a lone pod)"
    policy = f"gang, minCount {unit.min_count}" if unit.policy == "gang" else "basic"
    return f"PodGroup ({unit.api_version}): {policy}, disruptionMode {unit.group.disruption_mode}"


def _priority(unit: Unit) -> str:
    klass = f" (PriorityClass {unit.priority_class})" if unit.priority_class else ""
    never = ", preemptionPolicy Never" if unit.preemption_policy == "Never" else ""
    return f"{unit.priority}{klass}{never}"


def render(explained: Explanation, now: datetime) -> str:
    unit, run, target = explained.unit, explained.run, explained.target
    out = ""
    if target.kind == "pod" and target.key != unit.key:
        out += _field("Pod", f"{target.key} (a member: explaining its PodGroup)")
    out += _field("Name", unit.key)
    out += _field("Kind", _kind(unit))
    out += _field("Priority", _priority(unit))
    out += _field("Queue", unit.queue or NONE)
    out += _field("Age", age(unit.created, now))
    out += _field("State", unit.reason)
    out += _field("Reason", unit.message or NONE)
    out += _field("Members", f"{unit.exist} exist, {unit.bound} bound, {unit.min_count} needed")
    rows = [[m.key, m.state, m.node or NONE, m.nominated or NONE, ",".join(m.gates) or NONE] for m in unit.members]
    if rows:
        out += _indent(table(["POD", "STATE", "NODE", "NOMINATED", "GATES"], rows))
    if run is None:
        return out + _unblock(explained)
    attempt = run.attempt
    if attempt is not None:
        fit = f"{attempt.placed} of {attempt.needed} member(s) fit"
        out += _field("Placement now", f"{fit}. {attempt.fit_error}".rstrip(". ") + ("." if attempt.fit_error else ""))
    else:
        out += _field("Placement now", "not tried: its members are held back (see State)")
    if run.ahead:
        out += _field("Tried first", f"{', '.join(run.ahead[:5])}: they take room before it (priority, then age)")
    if run.decision is not None:
        out += "Preemption now (dry run, nothing written):\n"
        lines = run.decision.summary()
        details = run.decision.details(pending=False)
        shown = details[:DETAIL_LINES]
        more = (
            [f"  ... {len(details) - DETAIL_LINES} more lines (-o json for all)"] if len(details) > DETAIL_LINES else []
        )
        out += "".join(f"  {line}\n" for line in [*lines, *shown, *more])
    elif run.waiting is not None:
        out += _field("Preemption now", f"none: {run.waiting}")
    if run.bound_at is not None:
        out += _field("Dry run", f"bound at {rfc3339(run.bound_at)} ({_on(run.bound)})")
    elif run.cut:
        out += _field("Dry run", "stopped before it could tell (too many passes); -o json has what it saw")
    elif run.horizon is not None:
        out += _field("Dry run", f"not bound by {rfc3339(run.horizon)}: nothing in the cluster changes that by itself")
    if explained.flights:
        out += "In flight:\n"
        for flight in explained.flights:
            since = f" since {rfc3339(flight.since)}" if flight.since is not None else ""
            nodes = sorted(set(flight.nominations.values()))
            held = f"{len(flight.nominations)} member(s) nominated to {', '.join(nodes[:5]) or NONE}"
            victims = ", ".join(flight.victims[:5]) + (
                f", +{len(flight.victims) - 5} more" if len(flight.victims) > 5 else ""
            )
            left = f"{len(flight.victims)} victim(s) still terminating{since}" + (f": {victims}" if victims else "")
            out += f"  {flight.preemptor}: {held}; {left}\n"
    return out + _unblock(explained)


def _on(bound: dict[str, str]) -> str:
    nodes = sorted(set(bound.values()))
    shown = ", ".join(nodes[:5]) + (f", +{len(nodes) - 5} more" if len(nodes) > 5 else "")
    return f"{len(bound)} member(s) on {shown}"


def _unblock(explained: Explanation) -> str:
    if not explained.unblock:
        return ""
    return "What would unblock it:\n" + "".join(f"  - {u.message}\n" for u in explained.unblock)


def _indent(text: str) -> str:
    return "".join(f"  {line}\n" for line in text.splitlines())
