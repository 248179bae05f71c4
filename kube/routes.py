"""The API routes our requests take, named after the generated client's methods without loading its API classes.

Naming a method of a `kubernetes.client` API class (`client.CoreV1Api.patch_namespaced_pod`) imports that class's
module, and CoreV1Api's carries a pydantic description of every parameter of its hundreds of methods: tens of
MiB of the scheduler's RSS and a second of CPU at start, in a process whose requests go over `kube.transport` and
never call the method, and in `kubectl phalanx`, which reads without the client. So a route here is a name, a verb
and, for a read, a path: each class below is named after the client's API class, and each attribute after the
method whose route the request takes. The chart's RBAC test (`tests/chart/api_calls.py`) maps every such name to
the generated client's HTTP method and path, and so to the grant it needs, as it does for a call made through the
client itself.
"""

from __future__ import annotations

VERBS = (
    ("create_", "POST"),
    ("read_", "GET"),
    ("get_", "GET"),
    ("list_", "GET"),
    ("patch_", "PATCH"),
    ("delete_", "DELETE"),
)
"""The generated client's method prefixes and the HTTP method each sends."""


class Route:
    """A method of a generated API class, by name, with the HTTP method it sends (`verb`) and, for a read named in
    one place, its `path` (`{parameters}` in braces, `at`); a write's call site builds the path itself."""

    name = ""
    verb = ""

    def __init__(self, path: str = "") -> None:
        self.path = path

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name
        self.verb = next(method for prefix, method in VERBS if name.startswith(prefix))

    def at(self, **parameters: str) -> str:
        return self.path.format(**parameters)

    def __repr__(self) -> str:
        return f"Route({self.name})"


class CoreV1Api:
    list_pod_for_all_namespaces = Route("/api/v1/pods")
    list_node = Route("/api/v1/nodes")
    list_persistent_volume_claim_for_all_namespaces = Route("/api/v1/persistentvolumeclaims")
    list_persistent_volume = Route("/api/v1/persistentvolumes")
    list_namespace = Route("/api/v1/namespaces")
    read_namespace = Route("/api/v1/namespaces/{name}")
    read_namespaced_config_map = Route("/api/v1/namespaces/{namespace}/configmaps/{name}")
    read_namespaced_pod = Route()
    create_namespaced_pod_binding = Route()
    patch_namespaced_pod = Route()
    patch_namespaced_pod_status = Route()
    patch_persistent_volume = Route()
    patch_namespaced_persistent_volume_claim = Route()
    delete_namespaced_pod = Route()


class StorageV1Api:
    list_storage_class = Route("/apis/storage.k8s.io/v1/storageclasses")
    list_csi_node = Route("/apis/storage.k8s.io/v1/csinodes")


class SchedulingV1Api:
    list_priority_class = Route("/apis/scheduling.k8s.io/v1/priorityclasses")


class PolicyV1Api:
    list_pod_disruption_budget_for_all_namespaces = Route("/apis/policy/v1/poddisruptionbudgets")


class CustomObjectsApi:
    get_api_resources = Route("/apis/{group}/{version}")
    list_cluster_custom_object = Route("/apis/{group}/{version}/{plural}")
    patch_namespaced_custom_object = Route()
    patch_namespaced_custom_object_status = Route()


class EventsV1Api:
    create_namespaced_event = Route()


class ResourceV1Api:
    patch_namespaced_resource_claim = Route()
    patch_namespaced_resource_claim_status = Route()
