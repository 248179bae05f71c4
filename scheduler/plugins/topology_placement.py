"""TopologyPlacement: one placement per domain of the group's topology label (KEP-5732 PlacementGenerate).

Source: kube-scheduler 1.36 `topologyplacement`. A domain is every node with one value of the label; a node
without it is in none. Once members are bound, or nominated by a preemption whose victims are still terminating,
only the domain that holds them all counts: a group is never split across domains by a retry, nor moved to another
domain when room appears there. On our kind a second label widens the search when no domain of the first can take the
group (`Domain.level`). A label no node has refuses the group with kube-scheduler's words.

Nodes change under a group (relabelled, deleted). Nominations that no domain holds together any more are stale: the
group is tried in every domain again, and its preemption decides again once the victims already terminating are gone.
Bound members that no domain holds together refuse the group, naming where they run: placing the rest anywhere would
be placing them as if the constraint were absent.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from scheduler.api.pod_group import PodGroup
from scheduler.framework.pod_group_placement import Domain, Refusal
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.topology import domains


class TopologyPlacement:
    name = "TopologyPlacement"

    def generate_placements(self, group: PodGroup, snapshot: Snapshot) -> list[Domain] | Refusal | None:
        keys = group.topology_keys
        if not keys:
            return None
        if not any(len(domains(snapshot, key).values) for key in keys):
            labels = " or ".join(f"'{key}'" for key in keys)
            return Refusal(f"no nodes found with topology label {labels}")
        index = snapshot.nodes.index
        members = snapshot.members.get(group.key, ())
        bound = [index[m.node_name] for m in members if m.node_name in index]
        nominated = [
            index[node] for m in members if m.node_name is None and (node := m.pod.status.nominated_node_name) in index
        ]
        placements = _placements(snapshot, keys, bound + nominated)
        if placements or not nominated:
            return placements or _conflict(snapshot, keys[-1], bound)
        return _placements(snapshot, keys, bound) or _conflict(snapshot, keys[-1], bound)


def _placements(snapshot: Snapshot, keys: Sequence[str], pinned: list[int]) -> list[Domain]:
    """Every domain of each level, or with `pinned` rows only the one holding them all (none at a level where they
    are split, or on a node without the label)."""
    placements: list[Domain] = []
    for level, key in enumerate(keys):
        split = domains(snapshot, key)
        held = {int(split.ids[row]) for row in pinned}
        for domain in sorted(range(len(split.values)), key=lambda d: split.values[d]):
            if held and held != {domain}:
                continue
            placements.append(Domain(f"{key}={split.values[domain]}", np.asarray(split.ids == domain), level))
    return placements


def _conflict(snapshot: Snapshot, key: str, bound: list[int]) -> Refusal:
    """The bound members are in no one domain of any level: where they run, by the widest label."""
    split = domains(snapshot, key)
    ids = {int(split.ids[row]) for row in bound}
    named = [f"{key}={split.values[d]}" for d in sorted((d for d in ids if d >= 0), key=lambda d: split.values[d])]
    places = [f"in {' and '.join(named)}"] if named else []
    if -1 in ids:
        places.append(f"on a node without label '{key}'")
    return Refusal(f"members already bound run {' and '.join(places)}: no topology domain holds them all")
