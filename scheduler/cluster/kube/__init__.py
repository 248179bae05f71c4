"""The Kubernetes back end: the view, the typed calls and their dispatcher, Lease leader election, the process loop."""

from scheduler.cluster.kube.cluster import KubeCluster, NotLeader
from scheduler.cluster.kube.leader_election import LeaderElector
from scheduler.cluster.kube.process import SchedulerProcess

__all__ = ["KubeCluster", "LeaderElector", "NotLeader", "SchedulerProcess"]
