"""The Kubernetes back end: informers, writes, Lease leader election and the scheduler process loop."""

from scheduler.cluster.kube.cluster import KubeCluster, NotLeader, api_client_from
from scheduler.cluster.kube.leader_election import LeaderElector
from scheduler.cluster.kube.process import SchedulerProcess

__all__ = ["KubeCluster", "LeaderElector", "NotLeader", "SchedulerProcess", "api_client_from"]
