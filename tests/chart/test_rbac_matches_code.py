"""The chart's RBAC grants each ServiceAccount exactly the API calls its component's code makes.

What is used is not written down here: each component the chart runs is driven against the loopback
API server (`traces.py`) and every request it sends becomes the accesses the authorizer would check
(`rbac.access_of`, and `rbac.checks_of` for those the server asks itself). That is compared with the Roles and
ClusterRoles bound to the component's ServiceAccount: a request no grant allows, a grant no request uses and a
grant broader than its use all fail. So that a scenario cannot silently miss a code path, `api_calls.py` finds
every call of a `kubernetes` API method in our packages and the coverage test requires each to have been sent.

The viewer ClusterRole is for people, not a pod: `kubectl phalanx` (`phalanx explain|status`, the two commands
together) is traced the same way and compared with its rules, as bound cluster-wide (it is aggregated into `view`,
so it is a ClusterRole by design, and the Role-would-do check does not apply to it). Every call the plugin's code
can make is a read.
"""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
import yaml

from tests.apiserver.server import Request
from tests.chart.api_calls import (
    call_sites,
    call_sites_of,
    command_module,
    reachable,
    routes,
    unexercised,
    untyped_calls,
)
from tests.chart.conftest import CHART, Helm
from tests.chart.rbac import (
    Access,
    Grant,
    access_of,
    bindings_of,
    checks_of,
    compare,
    grants_of,
    role_grants,
    role_of,
)
from tests.chart.traces import Component, Traces, components, served_objects, viewers

VALUE_SETS = [None, *sorted(p.name for p in (CHART / "ci").glob("*-values.yaml"))]
Doc = dict[str, Any]


@pytest.fixture(scope="module")
def rendered(helm: Helm) -> dict[str | None, list[Doc]]:
    return {values: helm.template(values) for values in VALUE_SETS}


@pytest.fixture(scope="session")
def traces(tmp_path_factory: pytest.TempPathFactory) -> Traces:
    return Traces(tmp_path_factory.mktemp("traces"))


def _strings(obj: Any) -> set[str]:
    """Every string the chart renders, inside ConfigMap files and `--flag=value` arguments too."""
    if isinstance(obj, dict):
        return set().union(*map(_strings, obj.values())) if obj else set()
    if isinstance(obj, list):
        return set().union(*map(_strings, obj)) if obj else set()
    if not isinstance(obj, str):
        return set()
    found = {obj, obj.partition("=")[2]} if obj.startswith("--") else {obj}
    if "\n" in obj:
        with contextlib.suppress(yaml.YAMLError):
            found |= _strings(yaml.safe_load(obj))
    return found


def _checked(requests: list[Request]) -> list[Access]:
    return [check for request in requests for check in checks_of(access_of(request))]


def _used(traces: Traces, docs: list[Doc]) -> dict[tuple[str, str], tuple[list[Component], list[Request]]]:
    """(namespace, ServiceAccount) -> the components running as it and the requests they sent."""
    used: dict[tuple[str, str], tuple[list[Component], list[Request]]] = {}
    for component in components(docs):
        runs, requests = used.setdefault((component.namespace, component.service_account), ([], []))
        runs.append(component)
        requests += traces.requests(component, served_objects(docs))
    return used


@pytest.mark.parametrize("values", VALUE_SETS)
def test_each_service_account_is_granted_exactly_what_its_component_calls(
    rendered: dict[str | None, list[Doc]], traces: Traces, values: str | None
) -> None:
    docs = rendered[values]
    configured = _strings(docs)
    problems = []
    bound = set()
    for (namespace, account), (runs, requests) in _used(traces, docs).items():
        who = f"ServiceAccount {namespace}/{account} ({', '.join(map(str, runs))})"
        grants = grants_of(docs, namespace, account)
        problems += [f"{who}: {p}" for p in compare(grants, _checked(requests), configured, namespace)]
        for binding in bindings_of(docs, namespace, account):
            role = role_of(docs, binding)
            bound.add((role["kind"], role["metadata"]["name"]))
    plugin: dict[str, list[Request]] = {}
    for viewer in viewers(docs):  # the role is the plugin's: `explain` and `status` together use each grant
        plugin.setdefault(viewer.workload, []).extend(traces.requests(viewer, served_objects(docs)))
    for workload, requests in plugin.items():
        role = next(d for d in docs if f"{d['kind']}/{d['metadata']['name']}" == workload)
        who = f"{workload} running kubectl phalanx"
        problems += [f"{who}: {p}" for p in compare(role_grants(role), _checked(requests), configured, None)]
        bound.add((role["kind"], role["metadata"]["name"]))
    for doc in docs:
        if doc["kind"] in ("ClusterRole", "Role"):
            name = doc["metadata"]["name"]
            if (doc["kind"], name) not in bound:
                problems.append(f"{doc['kind']}/{name}: bound to no ServiceAccount a component runs as")
            for rule in doc.get("rules") or []:
                for key in ("apiGroups", "resources", "verbs"):
                    if "*" in (rule.get(key) or []):
                        problems.append(f"{doc['kind']}/{name}: wildcard in {key}")
    if problems:
        pytest.fail(f"values {values or 'default'}:\n" + "\n".join(problems), pytrace=False)


def test_the_scenarios_send_every_api_call_in_the_code(rendered: dict[str | None, list[Doc]], traces: Traces) -> None:
    """Each call site a component's subcommand can reach was sent, under at least one set of values."""
    sent: dict[str, list[Request]] = {}
    for docs in rendered.values():
        for component in [*components(docs), *viewers(docs)]:
            sent.setdefault(component.command, []).extend(traces.requests(component, served_objects(docs)))
    missed = [
        f"{site} (phalanx {command})"
        for command, requests in sent.items()
        for site in unexercised(call_sites_of(command), requests)
    ]
    if missed:
        pytest.fail(
            "no scenario in tests/chart/traces.py sends these, so their grants go unchecked:\n" + "\n".join(missed)
        )


def test_every_api_call_in_the_code_runs_in_a_chart_component(rendered: dict[str | None, list[Doc]]) -> None:
    commands = {c.command for docs in rendered.values() for c in [*components(docs), *viewers(docs)]}
    modules = set().union(*(reachable(command_module(c)) for c in commands))
    assert call_sites(), "the scan finds no API call at all: is the `kubernetes` client's layout the same?"
    outside = [str(site) for site in call_sites() if site.module not in modules]
    assert not outside, f"API calls in no module the chart's commands ({', '.join(sorted(commands))}) import: {outside}"
    assert not untyped_calls(), "requests sent without a typed API method cannot be traced to a grant"


def _request(method: str, path: str, **query: str) -> Request:
    return Request(method, path, query, None)


@pytest.mark.parametrize(
    ("request_", "want"),
    [
        pytest.param(_request("GET", "/api/v1/pods"), Access("list", "", "pods", "", ""), id="list across namespaces"),
        pytest.param(
            _request("GET", "/apis/scheduling.phalanx.dev/v1alpha1/queues", watch="true"),
            Access("watch", "scheduling.phalanx.dev", "queues", "", ""),
            id="watch",
        ),
        pytest.param(
            _request("POST", "/api/v1/namespaces/ns/pods/p/binding"),
            Access("create", "", "pods/binding", "ns", "p"),
            id="binding is a create on a subresource",
        ),
        pytest.param(
            _request("POST", "/apis/coordination.k8s.io/v1/namespaces/ns/leases"),
            Access("create", "coordination.k8s.io", "leases", "ns", ""),
            id="create names no object",
        ),
        pytest.param(
            _request("PUT", "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/m"),
            Access("update", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "", "m"),
            id="update of a cluster-scoped object",
        ),
        pytest.param(
            _request("PATCH", "/apis/scheduling.phalanx.dev/v1alpha1/namespaces/ns/podgroups/g/status"),
            Access("patch", "scheduling.phalanx.dev", "podgroups/status", "ns", "g"),
            id="status patch",
        ),
        pytest.param(
            _request("DELETE", "/api/v1/namespaces/ns/secrets/s"),
            Access("delete", "", "secrets", "ns", "s"),
            id="delete",
        ),
    ],
)
def test_a_request_is_the_access_the_authorizer_checks(request_: Request, want: Access) -> None:
    assert access_of(request_) == want


@pytest.mark.parametrize(
    ("request_", "want"),
    [
        pytest.param(
            _request("PATCH", "/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/c/status"),
            [
                Access("patch", "resource.k8s.io", "resourceclaims/status", "ns", "c"),
                Access("patch", "resource.k8s.io", "resourceclaims/binding", "", ""),
            ],
            id="a claim's status write is checked on resourceclaims/binding too, cluster-wide",
        ),
        pytest.param(
            _request("PATCH", "/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/c"),
            [Access("patch", "resource.k8s.io", "resourceclaims", "ns", "c")],
            id="a claim's finalizer write is not",
        ),
        pytest.param(
            _request("GET", "/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/c/status"),
            [Access("get", "resource.k8s.io", "resourceclaims/status", "ns", "c")],
            id="nor a read of its status",
        ),
    ],
)
def test_the_server_checks_more_than_the_request(request_: Request, want: list[Access]) -> None:
    assert list(checks_of(access_of(request_))) == want


def test_the_comparison_fails_on_missing_unused_and_broad_grants() -> None:
    def grant(scope: str, group: str, resource: str, verb: str, name: str = "") -> Grant:
        return Grant("ClusterRole/x" if scope == "*" else "Role/x", scope, group, resource, verb, name)

    accesses = [
        Access("create", "events.k8s.io", "events", "default", ""),
        Access("get", "coordination.k8s.io", "leases", "system", "lease"),
        Access("update", "coordination.k8s.io", "leases", "system", "lease"),
        Access("create", "coordination.k8s.io", "leases", "system", ""),
    ]
    grants = [
        grant("*", "events.k8s.io", "events", "patch"),
        grant("*", "coordination.k8s.io", "leases", "get", "lease"),
        grant("system", "coordination.k8s.io", "leases", "update"),
        grant("system", "coordination.k8s.io", "leases", "create", "lease"),
    ]
    assert compare(grants, accesses, {"lease"}, "system") == [
        "missing grant: create leases.coordination.k8s.io (create leases.coordination.k8s.io in system)",
        "missing grant: create events.events.k8s.io (create events.events.k8s.io in default)",
        "broader than used: get leases.coordination.k8s.io 'lease' cluster-wide (ClusterRole/x): "
        "every use is in system, a Role would do",
        "unused grant: patch events.events.k8s.io cluster-wide (ClusterRole/x)",
        "unused grant: create leases.coordination.k8s.io 'lease' in system (Role/x)",
        "broader than used: update leases.coordination.k8s.io in system (Role/x): "
        "only 'lease' is used, resourceNames would do",
    ]


def test_the_coverage_check_names_the_call_site_a_trace_missed(
    rendered: dict[str | None, list[Doc]], traces: Traces
) -> None:
    docs = rendered[None]
    (cleanup,) = [c for c in components(docs) if c.command == "certs"]
    requests = [r for r in traces.requests(cleanup, served_objects(docs)) if "/secrets/" not in r.path]
    missed = [(site.path, site.method) for site in unexercised(call_sites_of("certs"), requests)]
    assert missed == [("certs/registration.py", "delete_namespaced_secret")]


def test_kubectl_phalanx_only_reads(rendered: dict[str | None, list[Doc]]) -> None:
    """Read-only by construction: every API call the plugin's code can make is a GET (a get or a list)."""
    commands = {c.command for docs in rendered.values() for c in viewers(docs)}
    assert commands == {"explain", "status"}
    sites = [site for command in sorted(commands) for site in call_sites_of(command)]
    assert sites, "the plugin makes no API call at all?"
    writes = [f"{site} ({route.method})" for site in sites for route in routes(site.method) if route.method != "GET"]
    assert writes == []
