"""List-then-watch cache of one resource, parsed into `scheduler.api` models.

client-go's reflector, reduced to what the scheduler needs: LIST gives the state and a
resourceVersion; WATCH from it applies events and moves the resourceVersion forward (BOOKMARKs
too, so a quiet watch restarts near the head instead of replaying history); an ERROR 410 Expired
event (or an HTTP 410) means the history is gone and we relist; any other failure retries the watch after a jittered
backoff. Raw JSON is parsed straight into our models (`_preload_content=False`), skipping the
client's generated models: at 10,000 pods their deserialisation dominated. Each event is decoded
once, by orjson, and `prune` drops what no pass reads before the model is built (`managedFields`,
about a third of a real server's Pod, and the kubelet's part of a Pod's status): less to validate
and to keep in memory. The cache is read-only to the scheduler (every write is a patch built from
a few fields), so nothing is lost by not keeping them. Each applied event calls
`on_change(kind, old, new)` with the cached object before and after it (None when absent; both None
after a relist), so the owner can tell an echo of its own write from a change it must act on.

An `optional` resource (our CRDs) that the server does not serve yet counts as synced and empty, and is
listed again every `ABSENT_RETRY_SECONDS`: the scheduler runs (and schedules lone pods) before the CRDs
are applied, as after `helm install --skip-crds` or a GitOps sync in any order, and sees them soon after.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import orjson
import structlog
from kubernetes.client.exceptions import ApiException
from kubernetes.watch.watch import iter_resp_lines
from pydantic import ValidationError

from scheduler.api.meta import ApiModel
from scheduler.api.wire import prune as prune  # also cluster.py's, which imports it from here
from scheduler.cluster.kube.backoff import Backoff

log = structlog.get_logger(__name__)

M = TypeVar("M", bound=ApiModel)
ListCall = Callable[..., Any]
ABSENT_RETRY_SECONDS = 2.0


class Expired(Exception):
    """The watch's resourceVersion is older than the server keeps (HTTP 410): relist."""


def object_key(raw: dict[str, Any]) -> str:
    meta = raw.get("metadata", {})
    namespace = meta.get("namespace")
    return f"{namespace}/{meta['name']}" if namespace else str(meta["name"])


class Informer(Generic[M]):
    def __init__(
        self,
        kind: str,
        list_call: ListCall,
        model: type[M],
        on_change: Callable[[str, M | None, M | None], None],
        watch_timeout_seconds: int = 300,
        request_timeout_seconds: float = 30.0,
        on_relist: Callable[[str], None] | None = None,
        optional: bool = False,
    ) -> None:
        self.kind = kind
        self.optional = optional
        self._list_call = list_call
        self._model = model
        self._on_change = on_change
        self._on_relist = on_relist
        self.watch_timeout_seconds = watch_timeout_seconds
        self.request_timeout_seconds = request_timeout_seconds
        self.resource_version = ""
        self.synced = threading.Event()
        self._items: dict[str, M] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._response: Any = None
        self._thread = threading.Thread(target=self._run, name=f"informer-{kind}", daemon=True)
        self.backoff = Backoff()

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop watching; waits at most `timeout` for the thread (a daemon: a list still on the wire is left behind)."""
        self._stop.set()
        response = self._response
        if response is not None:
            with contextlib.suppress(ValueError, OSError):  # the watch ended meanwhile and let go of its socket
                response.shutdown()
        self._thread.join(timeout=timeout)

    def items(self) -> dict[str, M]:
        """A copy of the cache: the caller may read it while the watch keeps applying events."""
        with self._lock:
            return dict(self._items)

    def get(self, key: str) -> M | None:
        with self._lock:
            return self._items.get(key)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                if not self.resource_version and not self._relist_if_served():
                    self._stop.wait(ABSENT_RETRY_SECONDS)
                    continue
                self._watch()
                self.backoff.reset()
            except Expired:
                log.info("watch expired, relisting", kind=self.kind, resource_version=self.resource_version)
                self.resource_version = ""
            except Exception as exc:
                if self._stop.is_set():
                    return
                delay = self.backoff.next_delay()
                log.warning("watch failed, retrying", kind=self.kind, error=type(exc).__name__, delay=round(delay, 3))
                self._stop.wait(delay)

    def _parse(self, raw: dict[str, Any]) -> M | None:
        """The object as our model, or None (with a warning) when our model cannot read it.

        The API server validated it, so this is our model being stricter than the API (a field a newer
        server version added values to, say): skipping the one object keeps the cache current for every
        other one, where raising would make the watch retry the same event forever.
        """
        try:
            return self._model.model_validate(prune(self.kind, raw))
        except ValidationError as err:
            where = ", ".join(".".join(map(str, e["loc"])) for e in err.errors()[:3])
            log.warning("object not understood, skipped", kind=self.kind, object=object_key(raw), fields=where)
            return None

    def _relist_if_served(self) -> bool:
        """Relist; False when an optional resource is not served (the cache is then empty and synced)."""
        try:
            self._relist()
        except ApiException as exc:
            if exc.status != 404 or not self.optional:
                raise
            with self._lock:
                was_served, self._items = bool(self._items) or not self.synced.is_set(), {}
            if was_served:
                log.info("resource not served, empty until it is", kind=self.kind)
                self.synced.set()
                self._on_change(self.kind, None, None)
            return False
        return True

    def _relist(self) -> None:
        response = self._list_call(_preload_content=False, _request_timeout=self.request_timeout_seconds)
        try:
            body = orjson.loads(response.data)
        finally:
            response.release_conn()
        items = {object_key(raw): parsed for raw in body.get("items", []) if (parsed := self._parse(raw)) is not None}
        with self._lock:
            self._items = items
            self.resource_version = body["metadata"]["resourceVersion"]
        if self._on_relist is not None:
            self._on_relist(self.kind)
        log.info("listed", kind=self.kind, count=len(items), resource_version=self.resource_version)
        self.synced.set()
        self._on_change(self.kind, None, None)

    def _watch(self) -> None:
        try:
            response = self._open_watch()
        except ApiException as exc:
            if exc.status == 410:
                raise Expired(exc.reason or "Gone") from exc
            raise
        self._response = response
        try:
            for line in iter_resp_lines(response):  # type: ignore[no-untyped-call]
                if self._stop.is_set():
                    return
                self._apply(orjson.loads(line))
        finally:
            self._response = None
            response.release_conn()

    def _open_watch(self) -> Any:
        """Server-side timeout spread over [1, 1.5] x the configured one, so informers do not reconnect together."""
        timeout = int(self.watch_timeout_seconds * self.backoff.rng.uniform(1.0, 1.5))
        return self._list_call(
            watch=True,
            resource_version=self.resource_version,
            allow_watch_bookmarks=True,
            timeout_seconds=timeout,
            _preload_content=False,
            _request_timeout=(self.request_timeout_seconds, timeout + 5),
        )

    def _apply(self, event: dict[str, Any]) -> None:
        kind, raw = event.get("type"), event.get("object") or {}
        if kind == "ERROR":
            if raw.get("code") == 410:
                raise Expired(raw.get("message", ""))
            raise RuntimeError(f"watch error: {raw.get('code')} {raw.get('message', '')}")
        version = raw.get("metadata", {}).get("resourceVersion", "")
        if kind == "BOOKMARK":
            self.resource_version = version
            return
        key = object_key(raw)
        parsed = None if kind == "DELETED" else self._parse(raw)
        if parsed is None and kind != "DELETED":
            self.resource_version = version  # skipped: the cache keeps what it had, the watch goes on
            return
        with self._lock:
            old = self._items.pop(key, None) if parsed is None else self._items.get(key)
            if parsed is not None:
                self._items[key] = parsed
            self.resource_version = version
        self._on_change(self.kind, old, parsed)
