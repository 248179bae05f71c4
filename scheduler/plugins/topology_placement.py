"""TopologyPlacement: one placement per domain of the group's topology label (KEP-5732 PlacementGenerate).

Source: kube-scheduler 1.36 `topologyplacement`. A domain is every node with one value of the label; a node
without it is in none. Once members are bound, or nominated by a preemption whose victims are still terminating,
only the domain that holds them all counts: a group is never split across domains by a retry, nor moved to another
domain when room appears there. On our kind a second label widens the search when no domain of the first can take the
group (`Domain.level`). A label no node has refuses the group with kube-scheduler's words.
"""

from __future__ import annotations

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
        index = snapshot.nodes.index
        pinned = [
            index[node]
            for m in snapshot.members.get(group.key, ())
            if (node := m.node_name or m.pod.status.nominated_node_name) in index
        ]
        placements: list[Domain] = []
        for level, key in enumerate(keys):
            split = domains(snapshot, key)
            held = {int(split.ids[row]) for row in pinned}
            for domain in sorted(range(len(split.values)), key=lambda d: split.values[d]):
                if held and held != {domain}:
                    continue  # the bound members are elsewhere, or in no domain of this label
                rows = split.ids == domain
                placements.append(Domain(f"{key}={split.values[domain]}", np.asarray(rows), level))
        if not placements and not any(len(domains(snapshot, key).values) for key in keys):
            labels = " or ".join(f"'{key}'" for key in keys)
            return Refusal(f"no nodes found with topology label {labels}")
        return placements
