"""`kubectl phalanx explain` as text: one unit, described the way `kubectl describe` lays an object out.

Rendered from the `Explanation` document (`-o json`), whoever computed it (the scheduler's explain API, or this
command): the unit and its state, its members, where they can go now (kube-scheduler's FitError and how many
fit, and for a topology group no domain can take, how many the closest domains could), what preemption would do now
(the Decision's summary, then one line per victim and spared candidate, capped), the pending members' ResourceClaims
(the devices each has or the dry run gives it, or why it cannot be allocated), the preemptions in flight that concern
it, what would unblock it, and which scheduler replica answered. `-o json` has everything.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from phalanx.kubectl.printer import NONE, age, table
from scheduler.framework.pod_group_placement import DomainFit, shortfalls
from scheduler.preemption.decision import Decision, DomainCost, Outcome, Spared, SpareReason, Victim, VictimReason

DETAIL_LINES = 20
"""Victim and spared-candidate lines shown before the rest is only counted."""
NAMED = 3
"""Pods a claim's line names before it counts the rest."""
LABEL = 15
Doc = dict[str, Any]


def instant(text: str) -> datetime:
    """An RFC 3339 time of the document."""
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def decision(doc: Doc) -> Decision:
    """The decision schema (`Decision.as_json`, `schemaVersion`) read back, to say it as `simulate` says it."""
    return Decision(
        preemptor=doc["preemptor"],
        preemptor_priority=doc["preemptorPriority"],
        outcome=Outcome(doc["outcome"]),
        message=doc["message"],
        victims=tuple(
            Victim(
                v["unit"], tuple(v["pods"]), v["priority"], tuple(v["nodes"]), VictimReason(v["reason"]), v["message"]
            )
            for v in doc["victims"]
        ),
        spared=tuple(
            Spared(
                s["unit"],
                s["priority"],
                s["plugin"],
                SpareReason(s["reason"]),
                s["message"],
                instant(s["until"]) if s["until"] else None,
            )
            for s in doc["spared"]
        ),
        nominations={n["pod"]: n["node"] for n in doc["nominations"]},
        pending={p["pod"]: p["message"] for p in doc["pending"]},
        pdb_violations=doc["pdbViolations"],
        until=instant(doc["until"]) if doc["until"] else None,
        bound=doc["bound"],
        domains=tuple(
            DomainCost(d["name"], d["pdbViolations"], d["highest"], d["sum"], d["pods"]) for d in doc.get("domains", ())
        ),
        domains_passed=doc.get("domainsPassedOver", 0),
    )


def _field(name: str, value: str) -> str:
    return f"{name + ':':<{LABEL}}{value}\n"


def _kind(unit: Doc) -> str:
    if unit["kind"] == "Pod":
        return "Pod (a lone pod)"
    policy = f"gang, minCount {unit['members']['min']}" if unit["policy"] == "gang" else "basic"
    return f"PodGroup ({unit['apiVersion']}): {policy}, disruptionMode {unit['disruptionMode']}"


def _priority(unit: Doc) -> str:
    klass = f" (PriorityClass {unit['priorityClassName']})" if unit["priorityClassName"] else ""
    never = ", preemptionPolicy Never" if unit.get("preemptionPolicy") == "Never" else ""
    return f"{unit['priority']}{klass}{never}"


def render(explained: Doc) -> str:
    unit, target = explained["unit"], explained["target"]
    now = instant(explained["time"])
    out = ""
    target_key = f"{target['namespace']}/{target['name']}"
    if target["kind"] == "pod" and target_key != unit["key"]:
        out += _field("Pod", f"{target_key} (a member: explaining its PodGroup)")
    members = unit["members"]
    out += _field("Name", unit["key"])
    out += _field("Kind", _kind(unit))
    out += _field("Priority", _priority(unit))
    out += _field("Queue", unit["queue"] or NONE)
    out += _field("Age", age(instant(unit["created"]) if unit["created"] else None, now))
    out += _field("State", unit["reason"])
    out += _field("Reason", unit["message"] or NONE)
    out += _field("Members", f"{members['exist']} exist, {members['bound']} bound, {members['min']} needed")
    rows = [
        [m["pod"], m["state"], m["node"] or NONE, m["nominatedNode"] or NONE, ",".join(m["gates"]) or NONE]
        for m in explained["members"]
    ]
    if rows:
        out += _indent(table(["POD", "STATE", "NODE", "NOMINATED", "GATES"], rows))
    forecast = explained["forecast"]
    if forecast["horizon"] is None:  # no dry run: nothing of the unit is pending
        return out + _unblock(explained) + _served(explained)
    placement = explained["placement"]
    if placement is not None:
        fit = f"{placement['fit']} of {placement['needed']} member(s) fit"
        said = "; ".join(s for s in (_domains(placement), placement["message"]) if s)
        out += _field("Placement now", f"{fit}. {said}".rstrip(". ") + ("." if said else ""))
    else:
        out += _field("Placement now", "not tried: its members are held back (see State)")
    ahead = explained["ahead"]
    if ahead:
        out += _field("Tried first", f"{', '.join(ahead[:5])}: they take room before it (priority, then age)")
    if explained["decision"] is not None:
        out += "Preemption now (dry run, nothing written):\n"
        decided = decision(explained["decision"])
        details = decided.details(pending=False)
        shown = details[:DETAIL_LINES]
        more = (
            [f"  ... {len(details) - DETAIL_LINES} more lines (-o json for all)"] if len(details) > DETAIL_LINES else []
        )
        out += "".join(f"  {line}\n" for line in [*decided.summary(), *shown, *more])
    elif explained["waiting"] is not None:
        out += _field("Preemption now", f"none: {explained['waiting']}")
    if forecast["boundAt"] is not None:
        out += _field("Dry run", f"bound at {forecast['boundAt']} ({_on(forecast['bound'])})")
    elif forecast["cut"]:
        out += _field("Dry run", "stopped before it could tell (too many passes); -o json has what it saw")
    else:
        out += _field("Dry run", f"not bound by {forecast['horizon']}: nothing in the cluster changes that by itself")
    out += _claims(explained)
    if explained["inFlight"]:
        out += "In flight:\n"
        for flight in explained["inFlight"]:
            since = f" since {flight['since']}" if flight["since"] is not None else ""
            nodes = sorted({n["node"] for n in flight["nominations"]})
            held = f"{len(flight['nominations'])} member(s) nominated to {', '.join(nodes[:5]) or NONE}"
            victims = flight["victims"]
            named = ", ".join(victims[:5]) + (f", +{len(victims) - 5} more" if len(victims) > 5 else "")
            left = f"{len(victims)} victim(s) still terminating{since}" + (f": {named}" if named else "")
            out += f"  {flight['preemptor']}: {held}; {left}\n"
    return out + _unblock(explained) + _served(explained)


def _claims(explained: Doc) -> str:
    """One line per claim of the pending members: its devices, those the dry run gives it, or why none can be had.
    An older server's document has no `claims`."""
    lines = []
    for claim in explained.get("claims", ()):
        pods = claim["pods"]
        users = ", ".join(pods[:NAMED]) + (f", +{len(pods) - NAMED} more" if len(pods) > NAMED else "")
        if claim["allocated"]:
            state = f"allocated: {_devices(claim['devices'])}"
        elif claim["message"] is not None:
            state = f"cannot be allocated now: {claim['message']}"
        else:
            state = "not allocated"
        if claim["forecast"]:
            state = f"{state.rstrip('.')}; the dry run allocates {_devices(claim['forecast'])}"
        lines.append(f"  {claim['claim'] or '<not created>'} ({claim['name']} of {users}): {state}\n")
    return "Claims:\n" + "".join(lines) if lines else ""


def _devices(devices: list[Doc]) -> str:
    """`gpu: a100/gpu-0, gpu: a100/gpu-1`: each device's request, pool and name (`-o json` has its driver)."""
    return ", ".join(f"{d['request']}: {d['pool']}/{d['device']}" for d in devices)


def _domains(placement: Doc) -> str:
    """What the closest topology domains could take, as the members' reason says it ("" for a group without)."""
    fits = [DomainFit(d["name"], d["fit"], d["needed"], not d["atMost"]) for d in placement.get("domains", ())]
    return shortfalls(fits) if fits else ""


def _on(bound: list[Doc]) -> str:
    nodes = sorted({b["node"] for b in bound})
    shown = ", ".join(nodes[:5]) + (f", +{len(nodes) - 5} more" if len(nodes) > 5 else "")
    return f"{len(bound)} member(s) on {shown}"


def _unblock(explained: Doc) -> str:
    if not explained["unblock"]:
        return ""
    return "What would unblock it:\n" + "".join(f"  - {u['message']}\n" for u in explained["unblock"])


def _served(explained: Doc) -> str:
    """Which scheduler replica computed the answer, and from its cache at which resourceVersion (served only)."""
    served = explained.get("servedBy")
    if served is None:
        return ""
    role = "leader" if served["leader"] else "standby"
    cache = f"its cache at resourceVersion {served['resourceVersion']}"
    return _field("Answered by", f"{served['replica']} ({role}), {cache}")


def _indent(text: str) -> str:
    return "".join(f"  {line}\n" for line in text.splitlines())
