"""Reading a live cluster for `kubectl phalanx`: one LIST of each kind the scheduler reads, and nothing written.

Credentials come from a kubeconfig as kubectl finds it (`--kubeconfig`, else `$KUBECONFIG`, else
`~/.kube/config`; `--context`), or from the pod's service account when there is none. The kinds are the
scheduler's informers' (pods, nodes, PriorityClasses, PodDisruptionBudgets, claims, volumes, StorageClasses,
CSINodes, Namespaces, our PodGroups and Queues, native PodGroups where the server serves them), listed at once from a
thread pool, each body decoded by orjson and pruned (`managedFields`, the kubelet's status) before our models read it,
as the informers do; the garbage collector is kept out of the way while tens of thousands of objects are built.
The scheduler's own configuration is read from its ConfigMap (`--scheduler-config NAMESPACE/NAME`, the chart's by
default): the schedulerName, gate, scoring and min-runtime defaults the live scheduler decides with.

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
from http import HTTPStatus
from pathlib import Path
from types import SimpleNamespace
from typing import Any, TypeVar

import orjson
import urllib3
import yaml
from kubernetes import client, config
from kubernetes.client.rest import RESTClientObject
from kubernetes.config.config_exception import ConfigException
from pydantic import ValidationError

from phalanx.kubectl.errors import KubectlError
from scheduler.api.config import SchedulerConfiguration
from scheduler.api.csi import CSINode
from scheduler.api.meta import ApiModel
from scheduler.api.namespace import Namespace
from scheduler.api.node import Node
from scheduler.api.pdb import PodDisruptionBudget
from scheduler.api.persistent_volume import PersistentVolume
from scheduler.api.persistent_volume_claim import PersistentVolumeClaim
from scheduler.api.pod import Pod
from scheduler.api.pod_group import GROUP, NATIVE_API_VERSION, VERSION, NativePodGroup, PodGroup
from scheduler.api.priority_class import PriorityClass
from scheduler.api.queue import Queue
from scheduler.api.storage_class import StorageClass
from scheduler.api.wire import prune
from scheduler.framework.cluster import ClusterObjects

USER_AGENT = f"kubectl-phalanx/{importlib.metadata.version('phalanx')}"
CONFIG_KEY = "config.yaml"
"""The key of the chart's scheduler ConfigMap that holds the SchedulerConfiguration."""
M = TypeVar("M", bound=ApiModel)

ROUTES = SimpleNamespace(
    list_pod_for_all_namespaces="/api/v1/pods",
    list_node="/api/v1/nodes",
    list_priority_class="/apis/scheduling.k8s.io/v1/priorityclasses",
    list_pod_disruption_budget_for_all_namespaces="/apis/policy/v1/poddisruptionbudgets",
    list_persistent_volume_claim_for_all_namespaces="/api/v1/persistentvolumeclaims",
    list_persistent_volume="/api/v1/persistentvolumes",
    list_storage_class="/apis/storage.k8s.io/v1/storageclasses",
    list_csi_node="/apis/storage.k8s.io/v1/csinodes",
    list_namespace="/api/v1/namespaces",
    list_cluster_custom_object="/apis/{group}/{version}/{plural}",
    get_api_resources="/apis/{group}/{version}",
    read_namespace="/api/v1/namespaces/{name}",
    read_namespaced_config_map="/api/v1/namespaces/{namespace}/configmaps/{name}",
)
"""Every request the plugin sends, each a GET named after the `kubernetes` client's method whose route it takes
(`tests/chart/api_calls.py` maps each name to its route and RBAC grant, and checks each is a read). Sent
directly on the client's connection pool: importing the client's API classes alone took 1.1 s, a third of the
budget of a command a user waits for."""


@dataclass(frozen=True, slots=True)
class Connection:
    pool: urllib3.PoolManager
    configuration: client.Configuration
    namespace: str
    """The namespace of the kubeconfig's context (`default` when it names none), as kubectl's `-n` default."""
    timeout: float

    @property
    def host(self) -> str:
        return str(self.configuration.host).rstrip("/")

    def get(self, path: str, missing_ok: bool = False) -> Any:
        """GET `path`, the decoded body; None for a 404 when `missing_ok`. Failures as kubectl words them."""
        headers = {"Accept": "application/json", "User-Agent": USER_AGENT}
        settings: dict[str, Any] = dict(self.configuration.auth_settings())
        for setting in settings.values():
            if setting["in"] == "header" and setting["value"]:
                headers[setting["key"]] = setting["value"]
        try:
            response = self.pool.request(
                "GET", self.host + path, headers=headers, timeout=urllib3.Timeout(total=self.timeout)
            )
        except (urllib3.exceptions.HTTPError, OSError) as err:
            raise connection_error(err, self.host) from None
        if response.status == 404 and missing_ok:
            return None
        if not 200 <= response.status < 300:
            raise server_error(response.status, response.data)
        return orjson.loads(response.data) if response.data else None


def connect(kubeconfig: str | None, context: str | None, timeout: float) -> Connection:
    """A client from the kubeconfig kubectl would use, or the in-cluster service account when there is none."""
    configuration = client.Configuration()
    namespace = "default"
    path = kubeconfig or config.kube_config.KUBE_CONFIG_DEFAULT_LOCATION
    try:
        if kubeconfig is None and not any(Path(p).expanduser().exists() for p in path.split(":")):
            if context is not None:
                raise KubectlError(f'error: context "{context}" does not exist')
            try:
                config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
            except ConfigException:
                raise KubectlError(
                    "error: no kubeconfig (--kubeconfig, $KUBECONFIG, ~/.kube/config) and not running in a pod"
                ) from None
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
    configuration.connection_pool_maxsize = 16
    pool = RESTClientObject(configuration).pool_manager
    return Connection(pool, configuration, namespace, timeout)


def server_error(status: int, data: bytes | None) -> KubectlError:
    """kubectl's line for an API error: `Error from server (Forbidden): pods is forbidden: User ...`."""
    try:
        body = orjson.loads(data or b"{}")
    except orjson.JSONDecodeError:
        body = {}
    body = body if isinstance(body, dict) else {}
    known = {code.value: code.phrase.replace(" ", "") for code in HTTPStatus}
    reason = body.get("reason") or known.get(status, "Unknown")
    message = body.get("message") or (data or b"").decode(errors="replace").strip() or str(status)
    return KubectlError(f"Error from server ({reason}): {message}")


def connection_error(err: Exception, host: str) -> KubectlError:
    server = host.removeprefix("https://").removeprefix("http://")
    cause = getattr(err, "reason", None) or err
    if "refused" in str(cause).lower():
        refused = f"The connection to the server {server} was refused"
        return KubectlError(f"{refused} - did you specify the right host or port?")
    return KubectlError(f"Unable to connect to the server: {type(cause).__name__}: {str(cause).splitlines()[0]}")


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
    connection.get(ROUTES.read_namespace.format(name=namespace))


def read_cluster(connection: Connection) -> ClusterObjects:
    """Every object the scheduler reads, one LIST per kind, listed concurrently."""
    native_group, native_version = NATIVE_API_VERSION.split("/")

    def ours(plural: str) -> Callable[[], Any]:
        path = ROUTES.list_cluster_custom_object.format(group=GROUP, version=VERSION, plural=plural)
        return lambda: connection.get(path, missing_ok=True)  # not found: our CRDs are not installed

    def native() -> Any:
        """The native PodGroups, where the server serves them (discovery, which every user may read)."""
        served = connection.get(
            ROUTES.get_api_resources.format(group=native_group, version=native_version), missing_ok=True
        )
        if not any(r.get("name") == "podgroups" for r in (served or {}).get("resources", [])):
            return None
        path = ROUTES.list_cluster_custom_object.format(group=native_group, version=native_version, plural="podgroups")
        return connection.get(path)

    calls: dict[str, Callable[[], Any]] = {
        "pods": lambda: connection.get(ROUTES.list_pod_for_all_namespaces),
        "nodes": lambda: connection.get(ROUTES.list_node),
        "priorityclasses": lambda: connection.get(ROUTES.list_priority_class),
        "poddisruptionbudgets": lambda: connection.get(ROUTES.list_pod_disruption_budget_for_all_namespaces),
        "persistentvolumeclaims": lambda: connection.get(ROUTES.list_persistent_volume_claim_for_all_namespaces),
        "persistentvolumes": lambda: connection.get(ROUTES.list_persistent_volume),
        "storageclasses": lambda: connection.get(ROUTES.list_storage_class),
        "csinodes": lambda: connection.get(ROUTES.list_csi_node),
        "namespaces": lambda: connection.get(ROUTES.list_namespace),
        "podgroups": ours("podgroups"),
        "queues": ours("queues"),
        "native-podgroups": native,
    }
    with ThreadPoolExecutor(max_workers=len(calls)) as pool, _no_collection():
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
            persistent_volume_claims=_items(
                bodies["persistentvolumeclaims"], "persistentvolumeclaims", PersistentVolumeClaim
            ),
            persistent_volumes=_items(bodies["persistentvolumes"], "persistentvolumes", PersistentVolume),
            storage_classes=_items(bodies["storageclasses"], "storageclasses", StorageClass),
            csi_nodes=_items(bodies["csinodes"], "csinodes", CSINode),
            namespaces=_items(bodies["namespaces"], "namespaces", Namespace),
        )


@contextmanager
def _no_collection() -> Iterator[None]:
    """No cyclic garbage collection while the objects are built, and none of them scanned by a later one: they
    hold no cycles and live until the command ends. Decoding and parsing 50,000 pods took twice as long with
    the collector on, and every collection the dry run then triggered walked all of them again (seconds)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


def scheduler_config(connection: Connection, where: str) -> tuple[SchedulerConfiguration, str | None]:
    """The live scheduler's configuration from its ConfigMap `NAMESPACE/NAME`; the built-in defaults, with a
    warning to print, when there is no such ConfigMap."""
    namespace, _, name = where.partition("/")
    if not namespace or not name:
        raise KubectlError(f"error: --scheduler-config: Invalid value: {where!r}: must be NAMESPACE/NAME")
    path = ROUTES.read_namespaced_config_map.format(namespace=namespace, name=name)
    body = connection.get(path, missing_ok=True)
    if body is None:
        note = (
            f"Warning: configmaps {where} not found: explaining with the default SchedulerConfiguration "
            "(--scheduler-config NAMESPACE/NAME, or --config FILE)"
        )
        return SchedulerConfiguration(), note
    raw = (body.get("data") or {}).get(CONFIG_KEY)
    if raw is None:
        raise KubectlError(f"error: configmaps {where} has no {CONFIG_KEY}")
    try:
        return SchedulerConfiguration.model_validate(yaml.safe_load(raw) or {}), None
    except (yaml.YAMLError, ValidationError) as err:
        raise KubectlError(f"error: configmaps {where}: {CONFIG_KEY}: {str(err).splitlines()[0]}") from None
