"""`schedulingConstraints.topology` of a PodGroup or a Workload's podGroupTemplate (KEP-5732).

Source: the API server's validation of the native field (`scheduling.k8s.io/v1alpha2`): each key a label key
(a qualified name, with the API server's own message) and at most one entry. Our kind allows two, narrowest
first: Phalanx's two-level extension (README, "Topology domains"). Immutability comes with the rest of the spec
(`immutable.py`).
"""

from __future__ import annotations

from scheduler.api.pod_group import NATIVE_API_VERSION, SchedulingConstraints
from webhook.field import FieldError, Path, duplicate, invalid, too_many
from webhook.rules.names import qualified_name_errors

NATIVE_LEVELS = 1
LEVELS = 2


def topology_errors(path: Path, constraints: SchedulingConstraints | None, api_version: str) -> list[FieldError]:
    if constraints is None:
        return []
    topology = path.child("topology")
    entries = constraints.topology
    limit = NATIVE_LEVELS if api_version == NATIVE_API_VERSION else LEVELS
    if len(entries) > limit:
        return [too_many(topology, len(entries), limit)]
    errors: list[FieldError] = []
    seen: set[str] = set()
    for i, entry in enumerate(entries):
        key = topology.index(i).child("key")
        errors += [invalid(key, entry.key, detail) for detail in qualified_name_errors(entry.key)]
        if entry.key in seen:
            errors.append(duplicate(key, entry.key))
        seen.add(entry.key)
    return errors
