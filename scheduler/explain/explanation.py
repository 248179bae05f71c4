"""`explain`: one unit, its members, what the scheduler would do for it now, and what would unblock it.

Built from a cluster's objects (a LIST of each kind, or a dump) and the scheduler run in dry run on a copy
of them (`dry_run.py`). The decision is the victim search's own `Decision`, so the JSON shares its schema
(`Decision.as_json`, `schemaVersion`) with `phalanx simulate -o json`'s `decisions`. What the scheduler holds
beyond the objects is named too: its own preemption under way (nominations, victims still terminating)
and the nominations of other units that hold room against it. The ResourceClaims of its pending members are judged
by the DynamicResources plugin itself (`claims.py`), on the devices free when the dry run tries the unit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from scheduler.api.config import SchedulerConfiguration
from scheduler.api.meta import rfc3339
from scheduler.explain.claims import Claim, claims_of
from scheduler.explain.dry_run import DryRun, dry_run
from scheduler.explain.pod_index import PodIndex
from scheduler.explain.unblock import Unblock, unblockers
from scheduler.explain.units import InFlight, Unit, in_flight, may_be_in_flight, units_of
from scheduler.explain.warm import Warm
from scheduler.framework.cluster import ClusterObjects, unit_of
from scheduler.framework.unit_key import group_unit

API_VERSION = "explain.phalanx.dev/v1alpha1"
"""The `apiVersion` of `explain -o json|yaml` and `status -o json|yaml` documents."""


class ExplainError(LookupError):
    """What was asked for cannot be explained; the message is the one line a user sees (kubectl's wording)."""


class NotFound(ExplainError):
    """No such object: `pods "x" not found`, as the API server says it."""


class NotOurs(ExplainError):
    """The pod is not scheduled by this Phalanx scheduler."""


@dataclass(frozen=True, slots=True)
class Target:
    """What the user asked about: `pod` or `podgroup`, in a namespace; `api_version` pins a PodGroup's kind."""

    kind: str
    namespace: str
    name: str
    api_version: str | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(slots=True)
class Explanation:
    time: datetime
    target: Target
    unit: Unit
    nodes: int
    run: DryRun | None
    flights: list[InFlight] = field(default_factory=list)
    """Its own preemption under way, then the others whose nominations hold room against it."""
    unblock: list[Unblock] = field(default_factory=list)
    claims: list[Claim] = field(default_factory=list)
    """The ResourceClaims of its pending members (`claims.py`)."""

    def as_json(self) -> dict[str, Any]:
        unit, run = self.unit, self.run
        decision = run.decision if run is not None else None
        later = run.preempted if run is not None else None
        return {
            "apiVersion": API_VERSION,
            "kind": "Explanation",
            "time": rfc3339(self.time),
            "target": {"kind": self.target.kind, "namespace": self.target.namespace, "name": self.target.name},
            "unit": {
                "key": unit.key,
                "policy": unit.policy,
                "disruptionMode": unit.group.disruption_mode if unit.group is not None else None,
                **unit.as_json(),
            },
            "members": [
                {
                    "pod": m.key,
                    "state": m.state,
                    "node": m.node,
                    "nominatedNode": m.nominated,
                    "gates": list(m.gates),
                    "message": run.messages.get(m.key) if run is not None else None,
                }
                for m in unit.members
            ],
            "placement": _placement(run, self.nodes),
            "decision": {"time": rfc3339(self.time), **decision.as_json()} if decision is not None else None,
            "waiting": run.waiting if run is not None else None,
            "ahead": list(run.ahead) if run is not None else [],
            "inFlight": [
                {
                    "preemptor": f.preemptor,
                    "nominations": [{"pod": p, "node": n} for p, n in sorted(f.nominations.items())],
                    "victims": list(f.victims),
                    "since": rfc3339(f.since) if f.since is not None else None,
                }
                for f in self.flights
            ],
            "forecast": {
                "boundAt": rfc3339(run.bound_at) if run is not None and run.bound_at is not None else None,
                "bound": [{"pod": p, "node": n} for p, n in sorted(run.bound.items())] if run is not None else [],
                "preemption": {"time": rfc3339(later[0]), **later[1].as_json()} if later is not None else None,
                "horizon": rfc3339(run.horizon) if run is not None and run.horizon is not None else None,
                "cut": run.cut if run is not None else False,
            },
            "unblock": [u.as_json() for u in self.unblock],
            "claims": [c.as_json() for c in self.claims],
        }


def _placement(run: DryRun | None, nodes: int) -> dict[str, Any] | None:
    """How its placement went; `domains` only for a topology group no domain could take: how many members each
    could, closest first (`atMost`: a bound, for a domain passed over without placing a pod)."""
    if run is None or run.attempt is None:
        return None
    attempt = run.attempt
    placement = {"nodes": nodes, "fit": attempt.placed, "needed": attempt.needed, "message": attempt.fit_error}
    if attempt.domains:
        placement["domains"] = [
            {"name": d.name, "fit": d.fit, "needed": d.needed, "atMost": not d.exact} for d in attempt.domains
        ]
    return placement


def find_unit(
    objects: ClusterObjects, config: SchedulerConfiguration, index: PodIndex, target: Target
) -> tuple[Unit, dict[str, Unit]]:
    """The unit `target` names (a pod's: its group's), and the pending units that may have a preemption in flight
    (`may_be_in_flight`: building every pending unit was most of an answer over a backlog); raises
    `ExplainError`."""
    if target.kind == "pod":
        pod = objects.pods.get(target.key)
        if pod is None:
            raise NotFound(f'pods "{target.name}" not found')
        key = unit_of(pod)
        units = units_of(objects, config, index, [key, *may_be_in_flight(index)], waiting=False)
        unit = units[key]
        if not unit.ours:
            name = pod.spec.scheduler_name or "default-scheduler"
            raise NotOurs(
                f"pod {pod.key} is not scheduled by {config.scheduler_name} (its spec.schedulerName is {name})"
            )
        return unit, units
    found = objects.pod_groups.get(target.key)
    if found is None or (target.api_version is not None and found.api_version != target.api_version):
        plural = "podgroups." + (target.api_version or "scheduling.phalanx.dev/").split("/")[0]
        raise NotFound(f'{plural} "{target.name}" not found')
    key = group_unit(target.key)
    units = units_of(objects, config, index, [key, *may_be_in_flight(index)], waiting=False)
    return units[key], units


def explain(
    objects: ClusterObjects, config: SchedulerConfiguration, now: datetime, target: Target, warm: Warm | None = None
) -> Explanation:
    """Explain `target` on `objects` at `now`; raises `ExplainError` when there is nothing to explain. `warm`: the
    caches an earlier explanation left (`warm.py`), brought up to `objects` first."""
    warm = warm or Warm(config)
    index = warm.pods(objects, config)
    unit, units = find_unit(objects, config, index, target)
    pending = unit.pending_members
    run = None
    if unit.is_pending:
        needed = unit.min_count - unit.bound if unit.policy == "gang" else len(pending)
        members = {m.key for m in pending}
        run = dry_run(
            objects, config, now, unit.unit_key, members, max(1, needed), warm.dry_runs, index.terminating.keys()
        )
    rivals = [u for u in units.values() if u.unit_key != unit.unit_key and u.priority >= unit.priority]
    found = in_flight(index, [unit, *rivals])
    flights = [f for f in found if f.preemptor == unit.unit_key]
    wanted = {n for m in pending if (n := m.nominated) is not None} | set((run.bound if run else {}).values())
    for other in found:
        if other.preemptor != unit.unit_key and (set(other.nominations.values()) & wanted or not wanted):
            flights.append(other)
    explained = Explanation(now, target, unit, len(objects.nodes), run, flights)
    explained.unblock = unblockers(unit, run, flights, objects, config, now)
    explained.claims = claims_of(unit, run, objects, config, now) if run is not None else []
    return explained
