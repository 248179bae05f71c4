"""The resource types the loopback API server serves, keyed by (group, version, plural).

Built-in kinds print `kind, apiVersion` first (struct order); custom resources print their keys
alphabetically, as kube-apiserver does (fixtures README, "Wire-format observations").
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ResourceType:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    status: bool = False
    generation: bool = True
    custom: bool = False

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def qualified(self) -> str:
        """`pods` or `podgroups.scheduling.phalanx.dev`, as in error messages."""
        return f"{self.plural}.{self.group}" if self.group else self.plural


RESOURCE_TYPES: tuple[ResourceType, ...] = (
    ResourceType("", "v1", "pods", "Pod", namespaced=True, status=True),
    ResourceType("", "v1", "nodes", "Node", namespaced=False, status=True, generation=False),
    ResourceType("", "v1", "namespaces", "Namespace", namespaced=False, status=True, generation=False),
    ResourceType("", "v1", "secrets", "Secret", namespaced=True, generation=False),
    ResourceType("", "v1", "configmaps", "ConfigMap", namespaced=True, generation=False),
    ResourceType("", "v1", "services", "Service", namespaced=True, status=True, generation=False),
    ResourceType("", "v1", "events", "Event", namespaced=True, generation=False),
    ResourceType("events.k8s.io", "v1", "events", "Event", namespaced=True, generation=False),
    ResourceType("coordination.k8s.io", "v1", "leases", "Lease", namespaced=True, generation=False),
    ResourceType("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", namespaced=False),
    ResourceType("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", namespaced=True, status=True),
    ResourceType("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True, status=True, generation=False),
    ResourceType("", "v1", "persistentvolumes", "PersistentVolume", False, status=True, generation=False),
    ResourceType("storage.k8s.io", "v1", "storageclasses", "StorageClass", namespaced=False, generation=False),
    ResourceType("storage.k8s.io", "v1", "csinodes", "CSINode", namespaced=False, generation=False),
    ResourceType("resource.k8s.io", "v1", "deviceclasses", "DeviceClass", namespaced=False),
    ResourceType("resource.k8s.io", "v1", "resourceslices", "ResourceSlice", namespaced=False),
    ResourceType("resource.k8s.io", "v1", "resourceclaims", "ResourceClaim", namespaced=True, status=True),
    ResourceType(
        "admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations", "MutatingWebhookConfiguration", False
    ),
    ResourceType(
        "admissionregistration.k8s.io",
        "v1",
        "validatingwebhookconfigurations",
        "ValidatingWebhookConfiguration",
        False,
    ),
    ResourceType(
        "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False, status=True
    ),
    ResourceType("apiregistration.k8s.io", "v1", "apiservices", "APIService", False, status=True, generation=False),
    ResourceType("scheduling.k8s.io", "v1alpha2", "workloads", "Workload", True, generation=False),
    ResourceType("scheduling.k8s.io", "v1alpha2", "podgroups", "PodGroup", True, status=True, generation=False),
    ResourceType("scheduling.phalanx.dev", "v1alpha1", "podgroups", "PodGroup", True, status=True, custom=True),
    ResourceType("scheduling.phalanx.dev", "v1alpha1", "queues", "Queue", False, custom=True),
    ResourceType("scheduling.phalanx.dev", "v1alpha1", "workloads", "Workload", True, custom=True),
)

BY_PATH: dict[tuple[str, str, str], ResourceType] = {(r.group, r.version, r.plural): r for r in RESOURCE_TYPES}
