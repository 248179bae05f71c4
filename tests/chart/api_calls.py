"""The Kubernetes API calls our code can make, found statically: no request is sent, nothing is patched.

A call is any use (a call, or a reference handed to an informer) of a method of an API class of the
`kubernetes` client (CoreV1Api, CustomObjectsApi, CoordinationV1Api, ...) that our packages name:
calling a method means constructing its class, which means naming it. Each method's HTTP route is read
from the generated client itself (its `_<method>_serialize` passes `method=` and `resource_path=` to
`param_serialize`), so a recorded request can be matched to the call site that must have sent it.
Requests sent around the typed API classes (`ApiClient.call_api`, `kubernetes.dynamic`) cannot be
mapped and are listed by `untyped_calls`. Which calls a chart component can make follows from the
modules its `phalanx` subcommand imports, directly or not (imports inside functions count).
"""

from __future__ import annotations

import ast
import functools
import inspect
import re
from dataclasses import dataclass
from pathlib import Path

import kubernetes.client

from phalanx.cli import COMMANDS
from tests.apiserver.server import Request

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("scheduler", "webhook", "certs", "phalanx", "kube")
_ROUTE = re.compile(r"method='(?P<method>[A-Z]+)',\s*resource_path='(?P<path>[^']+)'")


@dataclass(frozen=True, slots=True)
class Route:
    """An HTTP method and a path template such as `/api/v1/namespaces/{namespace}/pods/{name}/binding`."""

    method: str
    template: str

    def matches(self, request: Request) -> bool:
        return request.method == self.method and _pattern(self.template).fullmatch(request.path) is not None


@functools.cache
def _pattern(template: str) -> re.Pattern[str]:
    """The template as a regex: each `{parameter}` matches one path segment."""
    parts = [part for part in re.split(r"(\{[^}]+\})", template) if part]
    return re.compile("".join("[^/]+" if part.startswith("{") else re.escape(part) for part in parts))


def _identifiers() -> set[str]:
    names = set()
    for path in _modules().values():
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.Name):
                names.add(node.id)
            elif isinstance(node, ast.Attribute):
                names.add(node.attr)
    return names


@functools.cache
def api_classes() -> frozenset[str]:
    """The API classes of `kubernetes.client` our packages name (importing all 66 takes seconds)."""
    every = {name for name in dir(kubernetes.client) if name.endswith("Api") and name != "ApiClient"}
    return frozenset(every & _identifiers())


@functools.cache
def api_methods() -> dict[str, frozenset[str]]:
    """Public method name -> the API classes (of `api_classes`) that define it; only methods that send a request."""
    methods: dict[str, set[str]] = {}
    for class_name in api_classes():
        cls = getattr(kubernetes.client, class_name)
        for name in dir(cls):
            if not name.startswith("_") and hasattr(cls, f"_{name.removesuffix('_with_http_info')}_serialize"):
                methods.setdefault(name, set()).add(class_name)
    return {name: frozenset(classes) for name, classes in methods.items()}


@functools.cache
def routes(method: str) -> frozenset[Route]:
    """Every route an API method of that name requests (`get_api_group` exists once per API group)."""
    found = set()
    for class_name in api_methods()[method]:
        serialize = getattr(
            getattr(kubernetes.client, class_name), f"_{method.removesuffix('_with_http_info')}_serialize"
        )
        match = _ROUTE.search(inspect.getsource(serialize))
        if match is None:
            raise AssertionError(f"{class_name}.{method}: no route in the generated client (did its layout change?)")
        found.add(Route(match["method"], match["path"]))
    return frozenset(found)


@dataclass(frozen=True, slots=True, order=True)
class CallSite:
    path: str
    line: int
    module: str
    method: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line} {self.method}"

    def exercised_by(self, requests: list[Request]) -> bool:
        return any(route.matches(r) for route in routes(self.method) for r in requests)


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


@functools.cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


@functools.cache
def call_sites() -> tuple[CallSite, ...]:
    """Every use of a `kubernetes.client` API method in our packages."""
    methods = api_methods()
    sites = []
    for module, path in _modules().items():
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.Attribute) and node.attr in methods:
                sites.append(CallSite(str(path.relative_to(ROOT)), node.lineno, module, node.attr))
    return tuple(sorted(sites))


UNTYPED = {"call_api", "param_serialize", "rest_client", "DynamicClient"}


TRANSPORT = ROOT / "kube" / "transport.py"
"""Sends over the client's pool, but every request names the typed method whose route it takes, and
that name is a call site here like any other: its route must be traced and granted."""


def untyped_calls() -> list[str]:
    """Uses of the raw request machinery or `kubernetes.dynamic`: requests this module cannot map to routes."""
    found = []
    for path in _modules().values():
        if path == TRANSPORT:
            continue
        for node in ast.walk(_tree(path)):
            name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""
            imported = ""
            if isinstance(node, ast.Import):
                imported = " ".join(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                imported = " ".join(f"{node.module}.{alias.name}" for alias in node.names)
            if name in UNTYPED or "kubernetes.dynamic" in imported:
                found.append(f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)} {name or imported}")
    return found


def _imports(module: str, path: Path) -> set[str]:
    """Modules named by any import statement in the file, with their parent packages."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    named = set()
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Import):
            named |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            named.add(base)
            named |= {f"{base}.{alias.name}" for alias in node.names}
    parents = {".".join(name.split(".")[:i]) for name in named for i in range(1, name.count(".") + 1)}
    return named | parents


@functools.cache
def reachable(entry: str) -> frozenset[str]:
    """Our modules that importing `entry` (and running what it imports inside functions) can load."""
    modules = _modules()
    seen = {entry}
    todo = [entry]
    while todo:
        module = todo.pop()
        for imported in _imports(module, modules[module]) & modules.keys():
            if imported not in seen:
                seen.add(imported)
                todo.append(imported)
    return frozenset(seen)


def command_module(command: str) -> str:
    """The module of a `phalanx` subcommand, as the CLI resolves it."""
    return COMMANDS[command][0]


def call_sites_of(command: str) -> list[CallSite]:
    modules = reachable(command_module(command))
    return [site for site in call_sites() if site.module in modules]


def unexercised(sites: list[CallSite], requests: list[Request]) -> list[CallSite]:
    return [site for site in sites if not site.exercised_by(requests)]
