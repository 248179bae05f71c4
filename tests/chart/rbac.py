"""RBAC as the authorizer sees it: the attributes of a request, the grants a ServiceAccount holds, their fit.

`access_of` follows kube-apiserver's RequestInfoFactory (verb from the HTTP method, collection or item,
`watch`; resource/subresource; namespace; name); `checks_of` adds what the API server asks the authorizer itself
while it serves a request. `grants_of` expands every rule of every Role and
ClusterRole bound to a ServiceAccount into single grants; `Grant.covers` is the RBAC rule match (a
RoleBinding's grants apply in its namespace only; resourceNames never match a create or a list).
`compare` says what is missing, unused, or broader than the requests need.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from tests.apiserver.server import Request

Doc = dict[str, Any]
COLLECTION_VERBS = {"GET": "list", "POST": "create", "DELETE": "deletecollection"}
ITEM_VERBS = {"GET": "get", "PUT": "update", "PATCH": "patch", "DELETE": "delete", "POST": "create"}


@dataclass(frozen=True, slots=True, order=True)
class Access:
    """What one request asks the authorizer for; namespace "" is cluster-scoped or across all namespaces."""

    verb: str
    group: str
    resource: str
    namespace: str
    name: str

    def __str__(self) -> str:
        where = f" {self.name!r}" if self.name else ""
        where += f" in {self.namespace}" if self.namespace else ""
        return f"{self.verb} {self.resource}{'.' + self.group if self.group else ''}{where}"


def access_of(request: Request) -> Access:
    parts = [p for p in request.path.split("/") if p]
    if parts[:1] == ["api"] and len(parts) >= 2:
        group, rest = "", parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 3:
        group, rest = parts[1], parts[3:]
    else:
        return Access(request.method.lower(), "", f"nonResourceURL {request.path}", "", "")
    if not rest:  # discovery (/apis/<group>/<version>): every authenticated user may read it (system:discovery)
        return Access(request.method.lower(), "", f"{DISCOVERY} {request.path}", "", "")
    namespace = ""
    if len(rest) >= 3 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    resource, name, sub = rest[0], rest[1] if len(rest) > 1 else "", "/".join(rest[2:])
    if not name:
        watching = request.query.get("watch") in ("1", "true")
        verb = "watch" if request.method == "GET" and watching else COLLECTION_VERBS[request.method]
    else:
        verb = ITEM_VERBS[request.method]
    return Access(verb, group, f"{resource}/{sub}" if sub else resource, namespace, name)


BINDING_CHECKED = {("resource.k8s.io", "resourceclaims/status"): "resourceclaims/binding"}
"""A write of these status subresources is authorized a second time, by kube-apiserver 1.36's validation of the object:
changing a ResourceClaim's `status.allocation` or `status.reservedFor` also needs the request's verb on
`resourceclaims/binding`, asked at cluster scope (a Role grants nothing there). The audit log shows only the first
check. Each of our status writes of a claim changes one of the two (`ClaimAllocation`)."""


def checks_of(access: Access) -> tuple[Access, ...]:
    """`access`, and the access the API server checks itself while serving it (`BINDING_CHECKED`)."""
    also = BINDING_CHECKED.get((access.group, access.resource))
    if also is None or access.verb not in ("update", "patch"):
        return (access,)
    return access, Access(access.verb, access.group, also, "", "")


@dataclass(frozen=True, slots=True, order=True)
class Grant:
    """One verb on one resource (of one name, if restricted) from a rule, where its binding applies it."""

    role: str
    scope: str
    group: str
    resource: str
    verb: str
    name: str

    def covers(self, access: Access) -> bool:
        return (
            (self.scope == "*" or access.namespace == self.scope)
            and self.group in ("*", access.group)
            and self.resource in ("*", access.resource)
            and self.verb in ("*", access.verb)
            and (not self.name or self.name == access.name)
        )

    def __str__(self) -> str:
        name = f" {self.name!r}" if self.name else ""
        where = "cluster-wide" if self.scope == "*" else f"in {self.scope}"
        return f"{self.verb} {self.resource}{'.' + self.group if self.group else ''}{name} {where} ({self.role})"


def _named(docs: list[Doc], kind: str, name: str, namespace: str | None) -> Doc:
    found = [
        d
        for d in docs
        if d["kind"] == kind
        and d["metadata"]["name"] == name
        and (namespace is None or d["metadata"].get("namespace") == namespace)
    ]
    assert len(found) == 1, f"{kind}/{name} in {namespace or 'the cluster'}: {len(found)} rendered"
    return found[0]


def bindings_of(docs: list[Doc], namespace: str, service_account: str) -> list[Doc]:
    subject = {"kind": "ServiceAccount", "name": service_account, "namespace": namespace}
    return [
        d
        for d in docs
        if d["kind"] in ("RoleBinding", "ClusterRoleBinding")
        and any({k: s.get(k) for k in subject} == subject for s in d.get("subjects") or [])
    ]


def role_of(docs: list[Doc], binding: Doc) -> Doc:
    ref = binding["roleRef"]
    namespace = binding["metadata"]["namespace"] if ref["kind"] == "Role" else None
    return _named(docs, ref["kind"], ref["name"], namespace)


def grants_of(docs: list[Doc], namespace: str, service_account: str) -> list[Grant]:
    grants = []
    for binding in bindings_of(docs, namespace, service_account):
        scope = "*" if binding["kind"] == "ClusterRoleBinding" else binding["metadata"]["namespace"]
        grants += role_grants(role_of(docs, binding), scope)
    return grants


def role_grants(role: Doc, scope: str = "*") -> list[Grant]:
    """Every rule of a Role or ClusterRole as single grants, applied in `scope` ("*": bound cluster-wide)."""
    label = f"{role['kind']}/{role['metadata']['name']}"
    grants = []
    for rule in role.get("rules") or []:
        for url in rule.get("nonResourceURLs") or []:
            grants += [Grant(label, "*", "", f"nonResourceURL {url}", v.lower(), "") for v in rule["verbs"]]
        grants += [
            Grant(label, scope, group, resource, verb, name)
            for group in rule.get("apiGroups") or []
            for resource in rule.get("resources") or []
            for verb in rule["verbs"]
            for name in rule.get("resourceNames") or [""]
        ]
    return grants


ITEM_ONLY = {"get", "update", "patch", "delete"}
DISCOVERY = "discovery"
"""Resource of an Access to a discovery document, which the default `system:discovery` role allows everyone."""


def compare(
    grants: list[Grant], accesses: Iterable[Access], configured_names: set[str], namespace: str | None
) -> list[str]:
    """Problems, one line each: a request no grant allows, a grant no request uses, a grant broader than its use.

    Broader: cluster-wide while every request it allows is in the component's own namespace (a Role
    would do; `namespace` None: the role must be a ClusterRole, as one aggregated into `view`), or any name
    while every request it allows is for one name the chart configures (the Lease, the Secret, the webhook
    configurations: resourceNames would do).
    """
    accesses = sorted(a for a in set(accesses) if not a.resource.startswith(DISCOVERY))
    missing: dict[str, list[Access]] = {}
    for access in accesses:
        if not any(g.covers(access) for g in grants):
            missing.setdefault(str(replace(access, namespace="", name="")), []).append(access)
    problems = [
        f"missing grant: {what}" + (f" ({len(uses)} requests, e.g. {uses[0]})" if len(uses) > 1 else f" ({uses[0]})")
        for what, uses in missing.items()
    ]
    for grant in sorted(set(grants)):
        used = [a for a in accesses if grant.covers(a)]
        if not used:
            problems.append(f"unused grant: {grant}")
            continue
        if namespace is not None and grant.scope == "*" and all(a.namespace == namespace for a in used):
            problems.append(f"broader than used: {grant}: every use is in {namespace}, a Role would do")
        names = {a.name for a in used}
        if not grant.name and grant.verb in ITEM_ONLY and len(names) == 1 and names <= configured_names - {""}:
            problems.append(f"broader than used: {grant}: only {names.pop()!r} is used, resourceNames would do")
    return problems
