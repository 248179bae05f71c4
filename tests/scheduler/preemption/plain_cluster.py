"""A cluster as plain rows for `scheduler.preemption.search`: nodes, victim units and a preemptor.

Resources are (cpu millicores, pods); every test reads its numbers off one table row.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from scheduler.framework.status import Status
from scheduler.preemption.search import PdbInput, PreemptorInput, SearchInput, UnitInput, Units

RESOURCES = 2


@dataclass
class PlainCluster:
    nodes: dict[str, int] = field(default_factory=dict)
    units: list[UnitInput] = field(default_factory=list)
    pods: list[tuple[str, int, str, int]] = field(default_factory=list)
    pdbs: list[tuple[str, int, list[str]]] = field(default_factory=list)
    protections: dict[str, Status] = field(default_factory=dict)

    def node(self, name: str, cpu: int) -> PlainCluster:
        self.nodes[name] = cpu
        return self

    def pod(self, key: str, node: str, cpu: int, priority: int, started: float = 0.0) -> PlainCluster:
        """A lone pod (or a member of a `Pod`-mode group): its own unit."""
        self.units.append(UnitInput(key, priority, False, started))
        self.pods.append((key, len(self.units) - 1, node, cpu))
        return self

    def group(self, key: str, placements: list[tuple[str, int]], priority: int, started: float = 0.0) -> PlainCluster:
        """A `disruptionMode: PodGroup` unit with one pod per (node, cpu)."""
        self.units.append(UnitInput(key, priority, True, started))
        for i, (node, cpu) in enumerate(placements):
            self.pods.append((f"{key}-{i}", len(self.units) - 1, node, cpu))
        return self

    def pdb(self, key: str, allowed: int, pods: list[str]) -> PlainCluster:
        self.pdbs.append((key, allowed, pods))
        return self

    def protect(self, unit: str, status: Status) -> PlainCluster:
        self.protections[unit] = status
        return self

    def free(self) -> np.ndarray:
        names = list(self.nodes)
        free = np.array([[cpu, 110] for cpu in self.nodes.values()], dtype=np.int64).reshape(-1, RESOURCES)
        for _, _, node, cpu in self.pods:
            free[names.index(node)] -= (cpu, 1)
        return free

    def search_input(
        self,
        members: list[int],
        priority: int,
        *,
        min_count: int | None = None,
        policy: str = "PreemptLowerPriority",
        allowed_nodes: list[str] | None = None,
        validate: Callable[[tuple[str, ...]], Status] | None = None,
    ) -> SearchInput:
        names = tuple(self.nodes)
        mask = np.array([allowed_nodes is None or n in allowed_nodes for n in names], dtype=bool)
        is_group = len(members) > 1 or min_count is not None
        preemptor = PreemptorInput(
            key="default/preemptor",
            priority=priority,
            is_group=is_group,
            min_count=min_count if min_count is not None else len(members),
            members=tuple(f"default/m{i}" if is_group else "default/preemptor" for i in range(len(members))),
            requests=np.array([[cpu, 1] for cpu in members], dtype=np.int64).reshape(-1, RESOURCES),
            masks=np.tile(mask, (len(members), 1)),
            preemption_policy=policy,
        )
        keys = [key for key, _, _, _ in self.pods]
        unit_index = {u.key: i for i, u in enumerate(self.units)}
        return SearchInput(
            node_names=names,
            free=self.free(),
            units=Units.of(self.units),
            pod_keys=tuple(keys),
            pod_unit=np.array([u for _, u, _, _ in self.pods], dtype=np.int64),
            pod_node=np.array([names.index(n) for _, _, n, _ in self.pods], dtype=np.int64),
            pod_requests=np.array([[cpu, 1] for _, _, _, cpu in self.pods], dtype=np.int64).reshape(-1, RESOURCES),
            preemptor=preemptor,
            pdbs=tuple(PdbInput(k, a, tuple(keys.index(p) for p in pods)) for k, a, pods in self.pdbs),
            protections={unit_index[k]: s for k, s in self.protections.items()},
            validate=validate,
        )
