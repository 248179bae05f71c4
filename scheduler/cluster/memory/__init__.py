"""The in-memory cluster: the simulator's back end of the `Cluster` Protocol, on a virtual clock."""

from scheduler.cluster.memory.cluster import MemoryCluster, Preemption, RecordedEvent

__all__ = ["MemoryCluster", "Preemption", "RecordedEvent"]
