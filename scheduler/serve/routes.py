"""The paths of the aggregated API `explain.phalanx.dev/v1alpha1`, what each asks for, and what RBAC calls it.

    GET /apis/explain.phalanx.dev/v1alpha1/namespaces/NS/pods/NAME/explanation       Explanation of a pod's unit
    GET /apis/explain.phalanx.dev/v1alpha1/namespaces/NS/podgroups/NAME/explanation  of a PodGroup's (ours, else
        the native one; `?apiVersion=scheduling.k8s.io/v1alpha2` or `scheduling.phalanx.dev/v1alpha1` picks one)
    GET /apis/explain.phalanx.dev/v1alpha1/namespaces/NS/pendingwork                 PendingWork of a namespace
    GET /apis/explain.phalanx.dev/v1alpha1/pendingwork                               PendingWork of the cluster
        (both take `labelSelector`, as `status -l`)

The bodies are the documents `kubectl phalanx explain|status -o json` print (`scheduler/explain`). As RBAC sees
them (kube-apiserver's RequestInfo, which authorizes the request before it reaches us, and our own review of it):
`get` on `pods/explanation` or `podgroups/explanation` of the group, named, in the unit's namespace; `list` on
`pendingwork` in a namespace, or across all of them for the cluster's (a ClusterRoleBinding). The discovery
documents (`/apis`, `/apis/explain.phalanx.dev`, `/apis/explain.phalanx.dev/v1alpha1`) are for every
authenticated user, as the `system:discovery` role makes every group's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kube.access_review import Attributes
from scheduler.api.pod_group import API_VERSION as OURS
from scheduler.api.pod_group import NATIVE_API_VERSION
from scheduler.explain.explanation import API_VERSION as GROUP_VERSION

GROUP, _, VERSION = GROUP_VERSION.partition("/")
PREFIX = f"/apis/{GROUP_VERSION}"
EXPLANATION = "explanation"
PENDING_WORK = "pendingwork"
KINDS = {"pods": "pod", "podgroups": "podgroup"}
"""Resource -> the kind `scheduler.explain.Target` names."""


@dataclass(frozen=True, slots=True)
class Explain:
    resource: str
    namespace: str
    name: str
    api_version: str | None = None
    """A PodGroup's kind, when the request pins one."""

    @property
    def attributes(self) -> Attributes:
        return Attributes("get", GROUP, self.resource, EXPLANATION, self.namespace, self.name)


@dataclass(frozen=True, slots=True)
class Pending:
    namespace: str | None
    """None: every namespace."""
    selector: str = ""

    @property
    def attributes(self) -> Attributes:
        return Attributes("list", GROUP, PENDING_WORK, "", self.namespace or "")


@dataclass(frozen=True, slots=True)
class Discovery:
    document: dict[str, Any]


class BadRequest(ValueError):
    """A path we serve, asked wrongly: the message is the answer's."""


def parse(path: str, query: dict[str, str]) -> Explain | Pending | Discovery | None:
    """What a GET of `path` asks for; None for a path we do not serve (404)."""
    path = path.rstrip("/")
    if path == "/apis":
        return Discovery(group_list())
    if path == f"/apis/{GROUP}":
        return Discovery(api_group())
    if path == PREFIX:
        return Discovery(resource_list())
    if not path.startswith(PREFIX + "/"):
        return None
    parts = path[len(PREFIX) + 1 :].split("/")
    if parts == [PENDING_WORK]:
        return Pending(None, query.get("labelSelector", ""))
    if len(parts) == 3 and parts[0] == "namespaces" and parts[2] == PENDING_WORK:
        return Pending(parts[1], query.get("labelSelector", ""))
    if len(parts) == 5 and parts[0] == "namespaces" and parts[2] in KINDS and parts[4] == EXPLANATION:
        api_version = query.get("apiVersion") or None
        if api_version is not None and (parts[2] != "podgroups" or api_version not in (OURS, NATIVE_API_VERSION)):
            supported = f"supported values: {OURS}, {NATIVE_API_VERSION}"
            raise BadRequest(f"apiVersion: Unsupported value: {api_version!r}: {supported}")
        return Explain(parts[2], parts[1], parts[3], api_version)
    return None


def group_list() -> dict[str, Any]:
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [api_group()]}


def api_group() -> dict[str, Any]:
    version = {"groupVersion": GROUP_VERSION, "version": VERSION}
    return {"kind": "APIGroup", "apiVersion": "v1", "name": GROUP, "versions": [version], "preferredVersion": version}


def resource_list() -> dict[str, Any]:
    def resource(name: str, kind: str, verbs: list[str]) -> dict[str, Any]:
        return {"name": name, "singularName": "", "namespaced": True, "kind": kind, "verbs": verbs}

    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": GROUP_VERSION,
        "resources": [
            resource(f"pods/{EXPLANATION}", "Explanation", ["get"]),
            resource(f"podgroups/{EXPLANATION}", "Explanation", ["get"]),
            resource(PENDING_WORK, "PendingWork", ["list"]),
        ],
    }
