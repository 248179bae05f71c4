"""The API routes our requests take, named after the generated client's methods without loading its API classes.

Naming a method of a `kubernetes.client` API class (`client.CoreV1Api.patch_namespaced_pod`) imports that class's
module, and CoreV1Api's carries a pydantic description of every parameter of its hundreds of methods: tens of
MiB of the scheduler's RSS and a second of CPU at start, in a process whose requests go over `kube.transport` and
never call the method. So a route here is a name and nothing more: each class below is named after the client's
API class, and each attribute after the method whose route the request takes. The chart's RBAC test
(`tests/chart/api_calls.py`) maps every such name to the generated client's HTTP method and path, and so to the
grant it needs, as it does for a call made through the client itself.
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
    """A method of a generated API class, by name, and the HTTP method it sends (`verb`)."""

    name = ""
    verb = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name
        self.verb = next(method for prefix, method in VERBS if name.startswith(prefix))

    def __repr__(self) -> str:
        return f"Route({self.name})"


class CoreV1Api:
    list_pod_for_all_namespaces = Route()
    list_node = Route()
    list_persistent_volume_claim_for_all_namespaces = Route()
    list_persistent_volume = Route()
    list_namespace = Route()
    read_namespaced_pod = Route()
    read_namespaced_config_map = Route()
    create_namespaced_pod_binding = Route()
    patch_namespaced_pod = Route()
    patch_namespaced_pod_status = Route()
    patch_persistent_volume = Route()
    patch_namespaced_persistent_volume_claim = Route()
    delete_namespaced_pod = Route()


class StorageV1Api:
    list_storage_class = Route()
    list_csi_node = Route()


class SchedulingV1Api:
    list_priority_class = Route()


class PolicyV1Api:
    list_pod_disruption_budget_for_all_namespaces = Route()


class CustomObjectsApi:
    get_api_resources = Route()
    list_cluster_custom_object = Route()
    patch_namespaced_custom_object = Route()
    patch_namespaced_custom_object_status = Route()


class EventsV1Api:
    create_namespaced_event = Route()


class ResourceV1Api:
    patch_namespaced_resource_claim = Route()
    patch_namespaced_resource_claim_status = Route()
