"""Reading a live cluster for `kubectl phalanx`: one LIST of each kind the scheduler reads, and nothing written.

Credentials come from a kubeconfig as kubectl finds it (`--kubeconfig`, else `$KUBECONFIG`, else
`~/.kube/config`; `--context`), or from the pod's service account when there is none. The kinds are the
scheduler's informers' (pods, nodes, PriorityClasses, PodDisruptionBudgets, our PodGroups and Queues, native
PodGroups where the server serves them), listed at once from a thread pool, each body decoded by orjson and
pruned (`managedFields`, the kubelet's status) before our models read it, as the informers do; the garbage
collector is kept out of the way while tens of thousands of objects are built. The scheduler's own
configuration is read from its ConfigMap (`--scheduler-config NAMESPACE/NAME`, the chart's by default): the
schedulerName, gate, scoring and min-runtime defaults the live scheduler decides with.

Every request is a GET, so the chart's viewer ClusterRole (get/list, nothing else) is all it needs; the
requests carry the user agent `kubectl-phalanx/<version>`, which tells them apart in an audit log. Failures are
`KubectlError`s worded as kubectl words them: `Error from server (NotFound): namespaces "x" not found`.
"""

from __future__ import annotations

import gc
import importlib.metadata
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import orjson
import urllib3
import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException
from pydantic import ValidationError

from phalanx.kubectl.errors import KubectlError
from scheduler.api.config import SchedulerConfiguration
from scheduler.api.meta import ApiModel
from scheduler.api.node import Node
from scheduler.api.pdb import PodDisruptionBudget
from scheduler.api.pod import Pod
from scheduler.api.pod_group import GROUP, NATIVE_API_VERSION, VERSION, NativePodGroup, PodGroup
from scheduler.api.priority_class import PriorityClass
from scheduler.api.queue import Queue
from scheduler.api.wire import prune
from scheduler.framework.cluster import ClusterObjects

USER_AGENT = f"kubectl-phalanx/{importlib.metadata.version('phalanx')}"
CONFIG_KEY = "config.yaml"
"""The key of the chart's scheduler ConfigMap that holds the SchedulerConfiguration."""
M = TypeVar("M", bound=ApiModel)


@dataclass(frozen=True, slots=True)
class Connection:
    api: client.ApiClient
    namespace: str
    """The namespace of the kubeconfig's context (`default` when it names none), as kubectl's `-n` default."""
    timeout: float


def connect(kubeconfig: str | None, context: str | None, timeout: float) -> Connection:
    """A client from the kubeconfig kubectl would use, or the in-cluster service account when there is none."""
    configuration = client.Configuration()
    namespace = "default"
    path = kubeconfig or config.kube_config.KUBE_CONFIG_DEFAULT_LOCATION
    try:
        if kubeconfig is None and not any(Path(p).expanduser().exists() for p in path.split(":")):
            if context is not None:
                raise KubectlError(f'error: context "{context}" does not exist')
            config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        else:
            config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=kubeconfig, context=context, client_configuration=configuration
            )
            contexts, active = config.list_kube_config_contexts(config_file=kubeconfig)  # type: ignore[no-untyped-call]
            chosen = next((c for c in contexts if c["name"] == context), active) if context else active
            namespace = (chosen or {}).get("context", {}).get("namespace") or "default"
    except ConfigException as err:
        message = str(err).splitlines()[0] if str(err) else "invalid configuration"
        if context is not None and "context" in message.lower():
            message = f'context "{context}" does not exist'
        raise KubectlError(f"error: {message}") from None
    except OSError as err:
        raise KubectlError(f"error: {err}") from None
    api = client.ApiClient(configuration)
    api.user_agent = USER_AGENT
    return Connection(api, namespace, timeout)


def server_error(err: ApiException) -> KubectlError:
    """kubectl's line for an API error: `Error from server (Forbidden): pods is forbidden: User ...`."""
    try:
        body = orjson.loads(err.body or b"{}")
    except orjson.JSONDecodeError:
        body = {}
    reason = body.get("reason") or err.reason or "Unknown"
    message = body.get("message") or str(err.reason or err.status)
    return KubectlError(f"Error from server ({reason}): {message}")


def connection_error(err: Exception, api: client.ApiClient) -> KubectlError:
    host = api.configuration.host.removeprefix("https://").removeprefix("http://")
    cause = getattr(err, "reason", None) or err
    if "refused" in str(cause).lower():
        return KubectlError(
            f"The connection to the server {host} was refused - did you specify the right host or port?"
        )
    return KubectlError(f"Unable to connect to the server: {type(cause).__name__}: {str(cause).splitlines()[0]}")


@contextmanager
def api_errors(connection: Connection) -> Iterator[None]:
    """API and connection failures as kubectl's one-line errors."""
    try:
        yield
    except ApiException as err:
        if err.status == 0 or err.status is None:
            raise connection_error(err, connection.api) from None
        raise server_error(err) from None
    except (urllib3.exceptions.HTTPError, OSError) as err:
        raise connection_error(err, connection.api) from None


def _body(response: Any) -> Any:
    try:
        return orjson.loads(response.data) if response.data else None
    finally:
        response.release_conn()


def _items(body: Any, kind: str, model: type[M]) -> dict[str, M]:
    """The list's items as models, keyed as `ClusterObjects` keys them; an item our models cannot read is skipped."""
    found: dict[str, M] = {}
    for raw in (body or {}).get("items", []):
        try:
            parsed = model.model_validate(prune(kind, raw))
        except ValidationError:
            continue  # the server validated it: our model is stricter than the API; the scheduler skips it too
        meta = parsed.metadata  # type: ignore[attr-defined]
        found[f"{meta.namespace or 'default'}/{meta.name}" if meta.namespace else meta.name] = parsed
    return found


def check_namespace(connection: Connection, namespace: str) -> None:
    """kubectl's `Error from server (NotFound): namespaces "x" not found` for a namespace that does not exist."""
    core: Any = client.CoreV1Api(connection.api)
    with api_errors(connection):
        _body(core.read_namespace(namespace, _preload_content=False, _request_timeout=connection.timeout))


def read_cluster(connection: Connection) -> ClusterObjects:
    """Every object the scheduler reads, one LIST per kind, listed concurrently."""
    api, timeout = connection.api, connection.timeout
    core: Any = client.CoreV1Api(api)
    scheduling: Any = client.SchedulingV1Api(api)
    policy: Any = client.PolicyV1Api(api)
    custom: Any = client.CustomObjectsApi(api)
    native_group, native_version = NATIVE_API_VERSION.split("/")

    def ours(plural: str) -> Callable[[], Any]:
        def call() -> Any:
            try:
                return _body(custom.list_cluster_custom_object(GROUP, VERSION, plural, **options))
            except ApiException as err:
                if err.status == 404:  # our CRDs are not installed: none of our objects
                    return None
                raise

        return call

    def native() -> Any:
        """The native PodGroups, where the server serves them (discovery, which every user may read)."""
        try:
            served = _body(custom.get_api_resources(native_group, native_version, **options))
        except ApiException as err:
            if err.status == 404:
                return None
            raise
        if not any(r.get("name") == "podgroups" for r in (served or {}).get("resources", [])):
            return None
        call = custom.list_cluster_custom_object(native_group, native_version, "podgroups", **options)
        return _body(call)

    options = {"_preload_content": False, "_request_timeout": timeout}
    calls: dict[str, Callable[[], Any]] = {
        "pods": lambda: _body(core.list_pod_for_all_namespaces(**options)),
        "nodes": lambda: _body(core.list_node(**options)),
        "priorityclasses": lambda: _body(scheduling.list_priority_class(**options)),
        "poddisruptionbudgets": lambda: _body(policy.list_pod_disruption_budget_for_all_namespaces(**options)),
        "podgroups": ours("podgroups"),
        "queues": ours("queues"),
        "native-podgroups": native,
    }
    with api_errors(connection), ThreadPoolExecutor(max_workers=len(calls)) as pool, _no_collection():
        futures = {kind: pool.submit(call) for kind, call in calls.items()}
        bodies = {kind: future.result() for kind, future in futures.items()}
        groups: dict[str, PodGroup] = {**_items(bodies["native-podgroups"], "podgroups", NativePodGroup)}
        groups.update(_items(bodies["podgroups"], "podgroups", PodGroup))  # ours wins a name both use
        return ClusterObjects(
            nodes=_items(bodies["nodes"], "nodes", Node),
            pods=_items(bodies["pods"], "pods", Pod),
            pod_groups=groups,
            queues=_items(bodies["queues"], "queues", Queue),
            priority_classes=_items(bodies["priorityclasses"], "priorityclasses", PriorityClass),
            pdbs=_items(bodies["poddisruptionbudgets"], "poddisruptionbudgets", PodDisruptionBudget),
        )


@contextmanager
def _no_collection() -> Iterator[None]:
    """No cyclic garbage collection while the objects are built (they hold no cycles): decoding and parsing 50,000
    pods took twice as long with it. Collected once afterwards."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def scheduler_config(connection: Connection, where: str) -> tuple[SchedulerConfiguration, str | None]:
    """The live scheduler's configuration from its ConfigMap `NAMESPACE/NAME`; the built-in defaults, with a
    warning to print, when there is no such ConfigMap."""
    namespace, _, name = where.partition("/")
    if not namespace or not name:
        raise KubectlError(f"error: --scheduler-config: Invalid value: {where!r}: must be NAMESPACE/NAME")
    core: Any = client.CoreV1Api(connection.api)
    try:
        with api_errors(connection):
            body = _body(
                core.read_namespaced_config_map(
                    name, namespace, _preload_content=False, _request_timeout=connection.timeout
                )
            )
    except KubectlError as err:
        if "(NotFound)" not in str(err):
            raise
        note = (
            f"Warning: configmaps {where} not found: explaining with the default SchedulerConfiguration "
            "(--scheduler-config NAMESPACE/NAME, or --config FILE)"
        )
        return SchedulerConfiguration(), note
    raw = ((body or {}).get("data") or {}).get(CONFIG_KEY)
    if raw is None:
        raise KubectlError(f"error: configmaps {where} has no {CONFIG_KEY}")
    try:
        return SchedulerConfiguration.model_validate(yaml.safe_load(raw) or {}), None
    except (yaml.YAMLError, ValidationError) as err:
        raise KubectlError(f"error: configmaps {where}: {CONFIG_KEY}: {str(err).splitlines()[0]}") from None
