"""Typed models of the Kubernetes objects Phalanx reads; imports nothing else of ours."""

from scheduler.api.config import SchedulerConfiguration
from scheduler.api.meta import ApiModel, Condition, LabelSelector, ObjectMeta
from scheduler.api.node import Node, Taint
from scheduler.api.pdb import PodDisruptionBudget
from scheduler.api.pod import POD_GROUP_LABEL, QUEUE_LABEL, Pod
from scheduler.api.pod_group import PodGroup
from scheduler.api.priority_class import PriorityClass
from scheduler.api.queue import Queue
from scheduler.api.workload import Workload

__all__ = [
    "POD_GROUP_LABEL",
    "QUEUE_LABEL",
    "ApiModel",
    "Condition",
    "LabelSelector",
    "Node",
    "ObjectMeta",
    "Pod",
    "PodDisruptionBudget",
    "PodGroup",
    "PriorityClass",
    "Queue",
    "SchedulerConfiguration",
    "Taint",
    "Workload",
]
