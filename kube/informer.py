"""List-then-watch cache of one resource, parsed into pydantic models: the one informer of the scheduler and
the webhook.

client-go's reflector, reduced to what we need: LIST gives the state and a
resourceVersion; WATCH from it applies events and moves the resourceVersion forward (BOOKMARKs
too, so a quiet watch restarts near the head instead of replaying history); an ERROR 410 Expired
event (or an HTTP 410) means the history is gone and we relist; any other failure retries the watch after a jittered
backoff. Raw JSON is parsed straight into our models (`_preload_content=False`), skipping the
client's generated models: at 10,000 pods their deserialisation dominated. Each event is decoded
once, by orjson, and `managedFields` (about a third of a real server's Pod) is dropped, with what the
owner's `prune` drops (the scheduler: the kubelet's part of a Pod's status), before the model is built:
less to validate and to keep in memory. The cache is read-only, as client-go's lister is (every write is
a patch built from a few fields), so nothing is lost by not keeping them. Each applied event calls
`on_change(kind, old, new)` with the cached object before and after it (None when absent; both None
after a relist), so the owner can tell an echo of its own write from a change it must act on.

An `optional` resource (our CRDs) that the server does not serve yet counts as synced and empty (`absent`),
and is listed again every `absent_retry_seconds`, or at once after `wake()`: the scheduler runs (and
schedules lone pods) before the CRDs are applied, as after `helm install --skip-crds` or a GitOps sync in
any order, and sees them soon after; the webhook wakes an absent informer when a direct read finds the
resource served.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

import orjson
import structlog
from kubernetes.watch.watch import iter_resp_lines
from pydantic import BaseModel, ValidationError

from kube.backoff import Backoff
from kube.errors import Gone, NotFound, translated
from kube.footprint import compact
from kube.marks import ChangeMarks

log = structlog.get_logger(__name__)

M = TypeVar("M", bound=BaseModel)
ListCall = Callable[..., Any]
Prune = Callable[[dict[str, Any]], dict[str, Any]]
ABSENT_RETRY_SECONDS = 2.0
LIST_PAGE = 500
"""Objects per LIST page: client-go's pager's default."""


def key(namespace: str | None, name: str) -> str:
    """The key of an object in every cache and view: `namespace/name`, or `name` for a cluster-scoped one."""
    return f"{namespace}/{name}" if namespace else name


def raw_key(raw: dict[str, Any]) -> str:
    meta = raw.get("metadata", {})
    return key(meta.get("namespace"), str(meta["name"]))


def _say(level: str, event: str, **fields: Any) -> None:
    """Log from an informer thread: a closed or broken log stream must not kill the cache."""
    with contextlib.suppress(Exception):
        getattr(log, level)(event, **fields)


def _keep_all(raw: dict[str, Any]) -> dict[str, Any]:
    return raw


class Informer(Generic[M]):
    def __init__(
        self,
        kind: str,
        list_call: ListCall,
        model: type[M],
        on_change: Callable[[str, M | None, M | None], None] | None = None,
        watch_timeout_seconds: int = 300,
        request_timeout_seconds: float = 30.0,
        on_relist: Callable[[str], None] | None = None,
        optional: bool = False,
        prune: Prune = _keep_all,
        absent_retry_seconds: float = ABSENT_RETRY_SECONDS,
    ) -> None:
        self.kind = kind
        self.optional = optional
        self.absent = False
        """An optional resource the server did not serve at the last list."""
        self.absent_retry_seconds = absent_retry_seconds
        self._prune = prune
        self._wake = threading.Event()
        self._list_call = list_call
        self._model = model
        self._on_change = on_change
        self._on_relist = on_relist
        self.watch_timeout_seconds = watch_timeout_seconds
        self.request_timeout_seconds = request_timeout_seconds
        self.resource_version = ""
        self.synced = threading.Event()
        self._items: dict[str, M] = {}
        self._marks = ChangeMarks()
        self._lock = threading.Lock()
        self.stopping = threading.Event()
        self._response: Any = None
        self._thread = threading.Thread(target=self._run, name=f"informer-{kind}", daemon=True)
        self.backoff = Backoff()

    def start(self) -> None:
        self._thread.start()

    def wake(self) -> None:
        """List an absent resource again now (a direct read found it served)."""
        self._wake.set()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop watching; waits at most `timeout` for the thread (a daemon: a list still on the wire is left behind)."""
        self.stopping.set()
        self._wake.set()
        response = self._response
        if response is not None:
            with contextlib.suppress(ValueError, OSError):  # the watch ended meanwhile and let go of its socket
                response.shutdown()
        if self._thread.ident is not None:
            self._thread.join(timeout=timeout)

    def items(self) -> dict[str, M]:
        """A copy of the cache: the caller may read it while the watch keeps applying events. `dict.copy` clones
        the table in one step: 1 ms at 100,000 pods where `dict()` re-inserts every key in 4-5 ms, under the
        lock the watch waits for, every pass (issue 23)."""
        with self._lock:
            return self._items.copy()

    def items_marked(self) -> tuple[dict[str, M], int]:
        """`items()` and the change mark it is at: `changed_since` that mark says which keys changed after it."""
        with self._lock:
            return self._items.copy(), self._marks.last

    def update(self, copy: dict[str, M], mark: int, also: Iterable[str] = ()) -> int | None:
        """Bring `copy`, a copy of the cache at `mark`, to now (and `also` keys, which its owner changed), in the
        size of the change; the mark it is then at, or None when the changes are no longer known (copy again).
        At 100,000 pods a pass's fresh copy and the free of the last one cost ~3 ms of a 30 ms pass (issue 23)."""
        with self._lock:
            changed = self._marks.peek(mark)
            if changed is None:
                return None
            items = self._items
            for key in (*changed, *also):
                item = items.get(key)
                if item is None:
                    copy.pop(key, None)
                else:
                    copy[key] = item
            return self._marks.last

    def changed_since(self, mark: int) -> set[str] | None:
        """Keys added, changed or deleted after `mark` (a superset), or None: compare every object. One reader
        that uses the marks up (`kube.marks`): the scheduler's snapshot; the view's `update` only reads them."""
        with self._lock:
            return self._marks.since(mark)

    def get(self, key: str) -> M | None:
        with self._lock:
            return self._items.get(key)

    def _run(self) -> None:
        while not self.stopping.is_set():
            try:
                if not self.resource_version and not self._relist_if_served():
                    self._wake.wait(self.absent_retry_seconds)
                    self._wake.clear()
                    continue
                self._watch()
                self.backoff.reset()
            except Gone:
                _say("info", "watch expired, relisting", kind=self.kind, resource_version=self.resource_version)
                self.resource_version = ""
            except Exception as exc:
                if self.stopping.is_set():
                    return
                delay = self.backoff.next_delay()
                _say(
                    "warning", "watch failed, retrying", kind=self.kind, error=type(exc).__name__, delay=round(delay, 3)
                )
                self.stopping.wait(delay)

    def _parse(self, raw: dict[str, Any]) -> M | None:
        """The object as our model, or None (with a warning) when our model cannot read it.

        The API server validated it, so this is our model being stricter than the API (a field a newer
        server version added values to, say): skipping the one object keeps the cache current for every
        other one, where raising would make the watch retry the same event forever.
        """
        try:
            return compact(self._model.model_validate(self.prepare(raw)))
        except ValidationError as err:
            where = ", ".join(".".join(map(str, e["loc"])) for e in err.errors()[:3])
            _say("warning", "object not understood, skipped", kind=self.kind, object=raw_key(raw), fields=where)
            return None

    def prepare(self, raw: dict[str, Any]) -> dict[str, Any]:
        """`raw` (in place) without what no reader of the cache reads: managedFields, and what `prune` drops."""
        meta = raw.get("metadata")
        if meta is not None:
            meta.pop("managedFields", None)
        return self._prune(raw)

    def parse(self, raw: dict[str, Any]) -> M | None:
        """An object read directly (not through the watch), as the cache would hold it; None when our model
        cannot read it."""
        return self._parse(raw)

    def _relist_if_served(self) -> bool:
        """Relist; False when an optional resource is not served (the cache is then empty and synced)."""
        try:
            self._relist()
        except NotFound:
            if not self.optional:
                raise
            with self._lock:
                was_served, self._items = bool(self._items) or not self.synced.is_set(), {}
                self._marks.reset()
            self.absent = True
            if was_served:
                _say("info", "resource not served, empty until it is", kind=self.kind)
                self.synced.set()
                self._changed(None, None)
            return False
        self.absent = False
        return True

    def _changed(self, old: M | None, new: M | None) -> None:
        if self._on_change is not None:
            self._on_change(self.kind, old, new)

    def _relist(self) -> None:
        """LIST in pages of `LIST_PAGE` (one consistent snapshot, joined by the server's continue token).

        In one answer, 50,000 pods were 120 MiB of JSON and 400 MiB decoded, both alive while the models were
        built: the scheduler's peak RSS (issue 23). A page's JSON and dicts are freed before the next one comes.
        """
        items: dict[str, M] = {}
        token: str | None = None
        while True:
            with translated():
                response = self._list_call(
                    limit=LIST_PAGE,
                    _continue=token,
                    _preload_content=False,
                    _request_timeout=self.request_timeout_seconds,
                )
            try:
                body = orjson.loads(response.data)
            finally:
                response.release_conn()
            for raw in body.pop("items", None) or ():
                if (parsed := self._parse(raw)) is not None:
                    items[raw_key(raw)] = parsed
            meta = body["metadata"]
            token = meta.get("continue")
            if not token:
                break
        with self._lock:
            self._items = items
            self._marks.reset()
            self.resource_version = meta["resourceVersion"]
        if self._on_relist is not None:
            self._on_relist(self.kind)
        _say("info", "listed", kind=self.kind, count=len(items), resource_version=self.resource_version)
        self.synced.set()
        self._changed(None, None)

    def _watch(self) -> None:
        with translated():
            response = self._open_watch()
        self._response = response
        try:
            with translated():
                for line in iter_resp_lines(response):  # type: ignore[no-untyped-call]
                    if self.stopping.is_set():
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
                raise Gone(f"410 Expired: {raw.get('message', '')}", reason="Expired")
            raise RuntimeError(f"watch error: {raw.get('code')} {raw.get('message', '')}")
        version = raw.get("metadata", {}).get("resourceVersion", "")
        if kind == "BOOKMARK":
            self.resource_version = version
            return
        at = raw_key(raw)
        parsed = None if kind == "DELETED" else self._parse(raw)
        if parsed is None and kind != "DELETED":
            self.resource_version = version  # skipped: the cache keeps what it had, the watch goes on
            return
        with self._lock:
            old = self._items.pop(at, None) if parsed is None else self._items.get(at)
            if parsed is not None:
                self._items[at] = parsed
            self._marks.mark(at, len(self._items))
            self.resource_version = version
        self._changed(old, parsed)
