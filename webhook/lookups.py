"""Watch-backed cache of the objects admission reads, with a direct read on a miss.

One informer thread per resource: LIST, then WATCH from the list's resourceVersion with bookmarks;
410 Expired relists, other failures back off and retry. A miss (a PodGroup created a moment before its
pods, say) is read directly, so the cache may lag but an answer is never wrong because of it. Resources
a cluster does not serve (our CRDs not installed, no native `scheduling.k8s.io/v1alpha2`) count as synced
and empty and are retried now and then. Readiness waits until every informer has listed once.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.metadata
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import structlog
from kubernetes import client, config, watch
from kubernetes.client.exceptions import ApiException
from pydantic import ValidationError

from scheduler.api.meta import ApiModel
from scheduler.api.pod_group import API_VERSION, GROUP, NATIVE_API_VERSION, PodGroup
from scheduler.api.priority_class import PriorityClass
from scheduler.api.queue import Queue
from scheduler.api.workload import Workload
from webhook.errors import LookupFailed

log = structlog.get_logger(__name__)

M = TypeVar("M", bound=ApiModel)
_NATIVE_GROUP, _NATIVE_VERSION = NATIVE_API_VERSION.split("/")
_VERSION = API_VERSION.split("/")[1]
READ_TIMEOUT_SECONDS = 2.0
ABSENT_RETRY_SECONDS = 60.0
"""How often an informer asks again for a resource the server does not serve (a direct read that finds it
served wakes it sooner)."""


@dataclass(frozen=True, slots=True)
class Resource:
    group: str
    version: str
    plural: str
    model: type[ApiModel]
    namespaced: bool
    required: bool = False

    @property
    def name(self) -> str:
        return f"{self.plural}.{self.version}.{self.group}"


PRIORITY_CLASSES = Resource("scheduling.k8s.io", "v1", "priorityclasses", PriorityClass, False, required=True)
QUEUES = Resource(GROUP, _VERSION, "queues", Queue, False)
WORKLOADS = Resource(GROUP, _VERSION, "workloads", Workload, True)
POD_GROUPS = Resource(GROUP, _VERSION, "podgroups", PodGroup, True)
NATIVE_WORKLOADS = Resource(_NATIVE_GROUP, _NATIVE_VERSION, "workloads", Workload, True)
NATIVE_POD_GROUPS = Resource(_NATIVE_GROUP, _NATIVE_VERSION, "podgroups", PodGroup, True)


USER_AGENT = f"phalanx-webhook/{importlib.metadata.version('phalanx')}"
"""How the API server's audit log and metrics tell the webhook's requests from the scheduler's."""


def api_client_from(kubeconfig: str | None) -> client.ApiClient:
    """A client from a kubeconfig file, or from the pod's service account when none is given."""
    if kubeconfig:
        api_client: client.ApiClient = config.new_client_from_config(config_file=kubeconfig)  # type: ignore[no-untyped-call]
    else:
        config.load_incluster_config()  # type: ignore[no-untyped-call]
        api_client = client.ApiClient()
    api_client.user_agent = USER_AGENT
    return api_client


def _say(level: str, event: str, **fields: Any) -> None:
    """Log from an informer thread; a closed or broken log stream must not kill the cache."""
    with contextlib.suppress(Exception):
        getattr(log, level)(event, **fields)


class Informer:
    """The cached objects of one resource, kept current by a list+watch loop in a daemon thread."""

    def __init__(
        self, api: client.CustomObjectsApi, resource: Resource, stop: threading.Event, watch_seconds: int = 240
    ) -> None:
        self.api = api
        self.resource = resource
        self.items: dict[tuple[str, str], ApiModel] = {}
        self.synced = threading.Event()
        self.absent = False
        self.wake = threading.Event()
        """Set when a direct read finds an absent resource served (or on stop): list again now."""
        self._stop = stop
        self._watch_seconds = watch_seconds

    def _parse(self, raw: Any) -> tuple[tuple[str, str], ApiModel] | None:
        try:
            obj = self.resource.model.model_validate(raw)
        except ValidationError:
            meta = raw.get("metadata", {}) if isinstance(raw, dict) else {}
            _say(
                "warning", "object ignored", resource=self.resource.name, name=meta.get("name"), reason="does not parse"
            )
            return None
        meta = getattr(obj, "metadata", None)
        return ((meta.namespace or "", meta.name) if meta else ("", "")), obj

    def _list(self) -> str:
        r = self.resource
        listing = cast(
            dict[str, Any], self.api.list_cluster_custom_object(r.group, r.version, r.plural, _request_timeout=30)
        )
        items = dict(filter(None, (self._parse(raw) for raw in listing.get("items") or [])))
        self.items = items
        self.absent = False
        self.synced.set()
        if not self._stop.is_set():
            _say("info", "cache listed", resource=r.name, count=len(items))
        return str(listing.get("metadata", {}).get("resourceVersion", ""))

    def _events(self, resource_version: str) -> Iterator[dict[str, Any]]:
        r = self.resource
        stream = watch.Watch()  # type: ignore[no-untyped-call]
        yield from stream.stream(  # type: ignore[no-untyped-call]
            self.api.list_cluster_custom_object,
            r.group,
            r.version,
            r.plural,
            resource_version=resource_version,
            allow_watch_bookmarks=True,
            timeout_seconds=self._watch_seconds,
            _request_timeout=self._watch_seconds + 30,
        )
        self.last_resource_version = stream.resource_version or resource_version

    def _watch(self, resource_version: str) -> str:
        self.last_resource_version = resource_version
        for event in self._events(resource_version):
            parsed = self._parse(event.get("object"))
            if parsed is None or event.get("type") == "BOOKMARK":
                continue
            key, obj = parsed
            if event.get("type") == "DELETED":
                self.items.pop(key, None)
            else:
                self.items[key] = obj
            if self._stop.is_set():
                break
        return self.last_resource_version

    def run(self) -> None:
        backoff = 0.2
        while not self._stop.is_set():
            try:
                resource_version = self._list()
                backoff = 0.2
                while not self._stop.is_set():
                    resource_version = self._watch(resource_version)
            except ApiException as err:
                if self._stop.is_set():
                    return
                if err.status == 404 and not self.resource.required:
                    self.items, self.absent = {}, True
                    self.synced.set()
                    _say("info", "resource not served", resource=self.resource.name)
                    self.wake.wait(ABSENT_RETRY_SECONDS)
                    self.wake.clear()
                    continue
                if err.status == 410:
                    _say("info", "watch expired", resource=self.resource.name)
                    continue
                _say("warning", "list or watch failed", resource=self.resource.name, status=err.status)
            except Exception as err:
                if self._stop.is_set():
                    return
                _say("warning", "list or watch failed", resource=self.resource.name, error=type(err).__name__)
            self._stop.wait(backoff)
            backoff = min(backoff * 2, 5.0)

    def get(self, namespace: str, name: str) -> ApiModel | None:
        """The cached object, else a direct read (None when the API says 404)."""
        found = self.items.get((namespace if self.resource.namespaced else "", name))
        if found is not None:
            return found
        r = self.resource
        try:
            if r.namespaced:
                raw = self.api.get_namespaced_custom_object(
                    r.group, r.version, namespace, r.plural, name, _request_timeout=READ_TIMEOUT_SECONDS
                )
            else:
                raw = self.api.get_cluster_custom_object(
                    r.group, r.version, r.plural, name, _request_timeout=READ_TIMEOUT_SECONDS
                )
        except ApiException as err:
            if err.status == 404:
                return None
            raise LookupFailed(f"reading {r.plural} {namespace}/{name}: HTTP {err.status}") from None
        except Exception as err:
            raise LookupFailed(f"reading {r.plural} {namespace}/{name}: {type(err).__name__}") from None
        self._served()
        parsed = self._parse(raw)
        return parsed[1] if parsed else None

    def _served(self) -> None:
        """A direct read succeeded: if the informer thinks the resource absent, it is served now."""
        if self.absent:
            self.wake.set()

    def values(self) -> list[ApiModel]:
        if self.synced.is_set() and not self.absent:
            return list(self.items.values())
        r = self.resource
        try:
            listing = cast(
                dict[str, Any],
                self.api.list_cluster_custom_object(
                    r.group, r.version, r.plural, _request_timeout=READ_TIMEOUT_SECONDS
                ),
            )
        except ApiException as err:
            if err.status == 404 and self.absent:
                return []
            raise LookupFailed(f"listing {r.plural}: HTTP {err.status}") from None
        except Exception as err:
            raise LookupFailed(f"listing {r.plural}: {type(err).__name__}") from None
        self._served()
        return [parsed[1] for parsed in map(self._parse, listing.get("items") or []) if parsed]


def _typed(obj: ApiModel | None, model: type[M]) -> M | None:
    return obj if isinstance(obj, model) else None


class KubeLookups:
    """`webhook.rules.lookups.Lookups` over a Kubernetes API server."""

    def __init__(self, api_client: client.ApiClient, watch_seconds: int = 240) -> None:
        api = client.CustomObjectsApi(api_client)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        resources = (PRIORITY_CLASSES, QUEUES, WORKLOADS, POD_GROUPS, NATIVE_WORKLOADS, NATIVE_POD_GROUPS)
        self.informers = {r: Informer(api, r, self._stop, watch_seconds) for r in resources}

    def start(self) -> KubeLookups:
        for resource, informer in self.informers.items():
            thread = threading.Thread(target=informer.run, name=f"informer-{resource.name}", daemon=True)
            thread.start()
            self._threads.append(thread)
        # Quiet the daemon threads before the interpreter finalizes: one caught writing a log line then
        # aborts the process (SIGABRT). Threads blocked on a watch write nothing and are left behind.
        atexit.register(self.stop)
        return self

    def stop(self, timeout: float = 0.5) -> None:
        self._stop.set()
        for informer in self.informers.values():
            informer.wake.set()
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    def wait_synced(self, timeout: float) -> bool:
        """Block until every informer has listed once, or `timeout` seconds pass."""
        deadline = time.monotonic() + timeout
        return all(i.synced.wait(max(0.0, deadline - time.monotonic())) for i in self.informers.values())

    def synced(self) -> bool:
        return all(i.synced.is_set() for i in self.informers.values())

    def priority_class(self, name: str) -> PriorityClass | None:
        return _typed(self.informers[PRIORITY_CLASSES].get("", name), PriorityClass)

    def priority_classes(self) -> list[PriorityClass]:
        return [pc for pc in self.informers[PRIORITY_CLASSES].values() if isinstance(pc, PriorityClass)]

    def workload(self, api_version: str, namespace: str, name: str) -> Workload | None:
        resource = NATIVE_WORKLOADS if api_version == NATIVE_API_VERSION else WORKLOADS
        if api_version not in (API_VERSION, NATIVE_API_VERSION):
            return None
        return _typed(self.informers[resource].get(namespace, name), Workload)

    def pod_group(self, api_version: str, namespace: str, name: str) -> PodGroup | None:
        resource = NATIVE_POD_GROUPS if api_version == NATIVE_API_VERSION else POD_GROUPS
        if api_version not in (API_VERSION, NATIVE_API_VERSION):
            return None
        return _typed(self.informers[resource].get(namespace, name), PodGroup)

    def queue(self, name: str) -> Queue | None:
        return _typed(self.informers[QUEUES].get("", name), Queue)
