"""Typed models of the Kubernetes objects Phalanx reads; imports nothing else of ours."""

from scheduler.api.config import SchedulerConfiguration
from scheduler.api.csi import CSIDriver, CSINode
from scheduler.api.meta import ApiModel, Condition, LabelSelector, ObjectMeta
from scheduler.api.namespace import Namespace
from scheduler.api.node import Node, Taint
from scheduler.api.pdb import PodDisruptionBudget
from scheduler.api.persistent_volume import PersistentVolume
from scheduler.api.persistent_volume_claim import PersistentVolumeClaim
from scheduler.api.pod import POD_GROUP_LABEL, QUEUE_LABEL, Pod
from scheduler.api.pod_group import PodGroup
from scheduler.api.priority_class import PriorityClass
from scheduler.api.queue import Queue
from scheduler.api.storage_class import StorageClass
from scheduler.api.workload import Workload

__all__ = [
    "POD_GROUP_LABEL",
    "QUEUE_LABEL",
    "ApiModel",
    "CSIDriver",
    "CSINode",
    "Condition",
    "LabelSelector",
    "Namespace",
    "Node",
    "ObjectMeta",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "Pod",
    "PodDisruptionBudget",
    "PodGroup",
    "PriorityClass",
    "Queue",
    "SchedulerConfiguration",
    "StorageClass",
    "Taint",
    "Workload",
]
