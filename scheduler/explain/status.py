"""`status`: the cluster's pending work at a glance, read from its objects alone (no dry run, so it stays fast).

Every pending unit of this scheduler with its reason and one-line message as `units.py` reads them, totals by
Queue and by reason (the labels of `phalanx_pending_units`), and the preemptions in flight. Filters and the
sort order are the caller's: the rows come sorted by namespace and name, as `kubectl get` sorts.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from scheduler.api.config import SchedulerConfiguration
from scheduler.api.meta import rfc3339
from scheduler.explain.explanation import API_VERSION
from scheduler.explain.units import InFlight, Unit, in_flight, units_of
from scheduler.explain.warm import Warm
from scheduler.framework.cluster import ClusterObjects


@dataclass(slots=True)
class PendingWork:
    time: datetime
    units: list[Unit]
    flights: list[InFlight]

    def by_queue(self) -> Counter[str]:
        return Counter(u.queue for u in self.units)

    def by_reason(self) -> Counter[str]:
        return Counter(u.reason for u in self.units)

    def as_json(self) -> dict[str, Any]:
        return {
            "apiVersion": API_VERSION,
            "kind": "PendingWork",
            "time": rfc3339(self.time),
            "units": [unit_json(u) for u in self.units],
            "totals": {
                "units": len(self.units),
                "pods": sum(len(u.pending_members) for u in self.units),
                "byQueue": dict(sorted(self.by_queue().items())),
                "byReason": dict(sorted(self.by_reason().items())),
            },
            "preemptions": [
                {
                    "preemptor": f.preemptor,
                    "nominated": len(f.nominations),
                    "victimsLeft": len(f.victims),
                    "victims": list(f.victims),
                    "since": rfc3339(f.since) if f.since is not None else None,
                }
                for f in self.flights
            ],
        }


def unit_json(unit: Unit) -> dict[str, Any]:
    return {"unit": unit.key, **unit.as_json()}


def pending_work(
    objects: ClusterObjects,
    config: SchedulerConfiguration,
    now: datetime,
    namespace: str | None = None,
    warm: Warm | None = None,
) -> PendingWork:
    """The pending units (of `namespace`, or every namespace), sorted by key, and their preemptions in flight.
    `warm`: the caches an earlier answer left (`warm.py`), brought up to `objects` first."""
    index = (warm or Warm(config)).pods(objects, config)
    units = sorted(
        (
            u
            for u in units_of(objects, config, index).values()
            if u.is_pending and (namespace is None or u.key.partition("/")[0] == namespace)
        ),
        key=lambda u: u.key,
    )
    return PendingWork(now, units, in_flight(index, units))
