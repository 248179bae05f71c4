"""Watch-backed cache of the objects admission reads, with a direct read on a miss.

One informer per resource (`kube.informer`, the scheduler's too): LIST, then WATCH from the list's
resourceVersion with bookmarks; 410 Gone relists, other failures back off and retry. A miss (a PodGroup
created a moment before its pods, say) is read directly, so the cache may lag but an answer is never wrong
because of it; a direct read ends by the review's deadline (`webhook/deadline.py`). Resources a cluster
does not serve (our CRDs not installed, no native `scheduling.k8s.io/v1alpha2`) count as synced and empty
and are listed again now and then, or at once when a direct read finds them served. Readiness waits until
every informer has listed once.
"""

from __future__ import annotations

import atexit
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import structlog
from kubernetes import client

from kube.errors import ApiError, NotFound, translated
from kube.informer import Informer, key
from scheduler.api.meta import ApiModel
from scheduler.api.pod_group import API_VERSION, GROUP, NATIVE_API_VERSION, PodGroup
from scheduler.api.priority_class import PriorityClass
from scheduler.api.queue import Queue
from scheduler.api.workload import Workload
from webhook.deadline import seconds_left
from webhook.errors import LookupFailed

log = structlog.get_logger(__name__)

M = TypeVar("M", bound=ApiModel)
_NATIVE_GROUP, _NATIVE_VERSION = NATIVE_API_VERSION.split("/")
_VERSION = API_VERSION.split("/")[1]
READ_TIMEOUT_SECONDS = 2.0
MIN_READ_SECONDS = 0.1
"""A read with less time than this before the review's deadline is not sent."""
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


class Lookup:
    """One resource: its informer's cache, else a direct read (a read of ours, retried once when it got no
    answer: the client's own retries are off)."""

    def __init__(self, api: Any, resource: Resource, watch_seconds: int) -> None:
        self.api = api
        self.resource = resource
        r = resource
        self.informer: Informer[ApiModel] = Informer(
            r.name,
            lambda **kw: api.list_cluster_custom_object(r.group, r.version, r.plural, **kw),
            r.model,
            watch_timeout_seconds=watch_seconds,
            request_timeout_seconds=30.0,
            optional=not r.required,
            absent_retry_seconds=ABSENT_RETRY_SECONDS,
        )

    def _read(self, what: str, call: Callable[[float], Any]) -> Any:
        """`call(timeout)`, sent once more at once when it got no answer (a pooled connection the server had
        closed, say), as the client's own retries did; `NotFound` as it is, any other failure `LookupFailed`.
        Each try ends by the review's deadline (`webhook.deadline`): a read that would outlast it is not sent."""
        for attempt in (1, 2):
            left = seconds_left()
            timeout = READ_TIMEOUT_SECONDS if left is None else min(READ_TIMEOUT_SECONDS, left)
            if timeout < MIN_READ_SECONDS:
                raise LookupFailed(f"{what}: no time left within the API server's webhook timeout")
            try:
                with translated():
                    return call(timeout)
            except NotFound:
                raise
            except ApiError as err:
                if attempt == 1 and not err.status:
                    continue
                raise LookupFailed(f"{what}: HTTP {err.status}" if err.status else f"{what}: {err.answer}") from None
        raise AssertionError("unreachable")

    def get(self, namespace: str, name: str) -> ApiModel | None:
        """The cached object, else a direct read (None when the API says 404)."""
        r = self.resource
        found = self.informer.get(key(namespace if r.namespaced else "", name))
        if found is not None:
            return found
        try:
            if r.namespaced:
                raw = self._read(
                    f"reading {r.plural} {namespace}/{name}",
                    lambda timeout: self.api.get_namespaced_custom_object(
                        r.group, r.version, namespace, r.plural, name, _request_timeout=timeout
                    ),
                )
            else:
                raw = self._read(
                    f"reading {r.plural} {namespace}/{name}",
                    lambda timeout: self.api.get_cluster_custom_object(
                        r.group, r.version, r.plural, name, _request_timeout=timeout
                    ),
                )
        except NotFound:
            return None
        self._served()
        return self.informer.parse(raw) if isinstance(raw, dict) else None

    def _served(self) -> None:
        """A direct read succeeded: if the informer thinks the resource absent, it is served now."""
        if self.informer.absent:
            self.informer.wake()

    def values(self) -> list[ApiModel]:
        informer = self.informer
        if informer.synced.is_set() and not informer.absent:
            return list(informer.items().values())
        r = self.resource
        try:
            listing = cast(
                dict[str, Any],
                self._read(
                    f"listing {r.plural}",
                    lambda timeout: self.api.list_cluster_custom_object(
                        r.group, r.version, r.plural, _request_timeout=timeout
                    ),
                ),
            )
        except NotFound:
            if informer.absent:
                return []
            raise LookupFailed(f"listing {r.plural}: HTTP 404") from None
        self._served()
        return [parsed for raw in listing.get("items") or [] if (parsed := informer.parse(raw)) is not None]


def _typed(obj: ApiModel | None, model: type[M]) -> M | None:
    return obj if isinstance(obj, model) else None


class KubeLookups:
    """`webhook.rules.lookups.Lookups` over a Kubernetes API server."""

    def __init__(self, api_client: client.ApiClient, watch_seconds: int = 240) -> None:
        api = client.CustomObjectsApi(api_client)
        resources = (PRIORITY_CLASSES, QUEUES, WORKLOADS, POD_GROUPS, NATIVE_WORKLOADS, NATIVE_POD_GROUPS)
        self.lookups = {r: Lookup(api, r, watch_seconds) for r in resources}
        self.informers = {r: lookup.informer for r, lookup in self.lookups.items()}

    def start(self) -> KubeLookups:
        for informer in self.informers.values():
            informer.start()
        # Quiet the daemon threads before the interpreter finalizes: one caught writing a log line then
        # aborts the process (SIGABRT). Threads blocked on a watch write nothing and are left behind.
        atexit.register(self.stop)
        return self

    def stop(self, timeout: float = 0.5) -> None:
        deadline = time.monotonic() + timeout
        for informer in self.informers.values():
            informer.stop(timeout=0.0)
        for informer in self.informers.values():
            informer.stop(timeout=max(0.0, deadline - time.monotonic()))

    def wait_synced(self, timeout: float) -> bool:
        """Block until every informer has listed once, or `timeout` seconds pass."""
        deadline = time.monotonic() + timeout
        return all(i.synced.wait(max(0.0, deadline - time.monotonic())) for i in self.informers.values())

    def synced(self) -> bool:
        return all(i.synced.is_set() for i in self.informers.values())

    def priority_class(self, name: str) -> PriorityClass | None:
        return _typed(self.lookups[PRIORITY_CLASSES].get("", name), PriorityClass)

    def priority_classes(self) -> list[PriorityClass]:
        return [pc for pc in self.lookups[PRIORITY_CLASSES].values() if isinstance(pc, PriorityClass)]

    def workload(self, api_version: str, namespace: str, name: str) -> Workload | None:
        resource = NATIVE_WORKLOADS if api_version == NATIVE_API_VERSION else WORKLOADS
        if api_version not in (API_VERSION, NATIVE_API_VERSION):
            return None
        return _typed(self.lookups[resource].get(namespace, name), Workload)

    def pod_group(self, api_version: str, namespace: str, name: str) -> PodGroup | None:
        resource = NATIVE_POD_GROUPS if api_version == NATIVE_API_VERSION else POD_GROUPS
        if api_version not in (API_VERSION, NATIVE_API_VERSION):
            return None
        return _typed(self.lookups[resource].get(namespace, name), PodGroup)

    def queue(self, name: str) -> Queue | None:
        return _typed(self.lookups[QUEUES].get("", name), Queue)
