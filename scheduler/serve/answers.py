"""What the served API answers: `scheduler/explain` run on this replica's own view of the cluster and configuration.

Every replica answers, leader or standby, from its own informers (`informed.py`): the caches its scheduling passes
read, kept current by their watches, so a standby's answer is as fresh as the leader's and a failover interrupts
nothing. The configuration is the one the process runs with. The answer is the document `kubectl phalanx explain
-o json` (an `Explanation`) or `status -o json` (a `PendingWork`) prints, plus `servedBy`: the replica that
computed it, whether it leads, and the resourceVersion its pods cache was at (every change up to it was seen).

Nothing is written: the explanation's dry run runs the scheduler on the in-memory back end over a copy of the
cache's tables (references to the same immutable objects, not copies of them). Errors are the API server's `Status`
documents: `namespaces "x" not found` and `pods "x" not found` are 404 NotFound, a pod another scheduler places is
400 BadRequest.

What an answer derives from the objects (the pods filed by unit, the dry run's snapshot caches and plugins:
`scheduler/explain/warm.py`) is kept for the next, which brings it up to its own objects by identity: an answer then
costs what changed since the last one plus its own dry run (a 64-pod gang's at 50,000 pods: 0.08 s of CPU instead of
1.2 s, `bench/explain_api.py`). It is lent to one answer at a time: answers wait for each other rather than compute
beside one another from nothing, which under the GIL takes longer for both. An answer that fails other than with an
`ExplainError` leaves nothing kept.

It is kept for good, not only through a burst of answers: a user's commands come minutes apart, and each would
otherwise start from nothing (1.6 s at 50,000 pods, over the second an answer should take). So that it does not hold
the pods the informers replaced since the last answer, the server's loop (`refresh_idle`) brings it up to the
informers' objects once no answer has used it for `REFRESH_SECONDS`, and again every `REFRESH_SECONDS` while none
does: the same bring-up as an answer's, without the answer. It re-reads only what changed since, after comparing
every pod by identity (15-25 ms of CPU at 50,000 pods once a minute, beside the scheduling loop; a thousand pods
replaced, 0.1 s). It is first made there too, once the informers are synced (1 s of CPU at 50,000 pods, once), so
the first answer finds it warm. A refresh that fails drops it, logged: the next answer makes it again.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import structlog

from scheduler.api.config import SchedulerConfiguration
from scheduler.explain import selector
from scheduler.explain.explanation import ExplainError, NotFound, Target, explain
from scheduler.explain.status import pending_work
from scheduler.explain.warm import Warm
from scheduler.framework.cluster import ClusterObjects
from scheduler.serve.routes import KINDS, Explain, Pending

log = structlog.get_logger(__name__)

REFRESH_SECONDS = 60.0
"""How long the kept caches go without an answer before the server's loop brings them up to the informers' objects,
and how often it does again while no answer comes: the pods the informers replaced meanwhile are held about that
long (never refreshed, they would hold every pod replaced since the last answer, up to a second copy of the pods; the
preemption's running-pod columns lag as they do between passes, `WorkloadPreemption.snapshot_ready`). Answers asked in
a burst (a user's commands, a dashboard's polls) bring them up themselves. Kept, they are 55 MB at 50,000 pods."""


@dataclass(frozen=True, slots=True)
class Seen:
    """The cluster as a replica holds it when a request comes: its objects and the pods cache's resourceVersion."""

    objects: ClusterObjects
    resource_version: str


@dataclass(frozen=True, slots=True)
class Replica:
    identity: str
    leader: bool


@dataclass(frozen=True, slots=True)
class Answer:
    code: int
    body: dict[str, Any]
    phases: dict[str, float] = field(default_factory=dict)
    """Seconds spent reading the cache (`read`) and computing (`compute`)."""
    warm: bool = False
    """Computed with the caches kept from before (`scheduler/explain/warm.py`), not made for it from nothing."""


def status(code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    """A failure `Status`, as kube-apiserver writes one."""
    body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure"}
    body["message"] = message
    body["reason"] = reason
    if details is not None:
        body["details"] = details
    body["code"] = code
    return body


def _now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


class Answers:
    def __init__(
        self,
        seen: Callable[[], Seen],
        config: SchedulerConfiguration,
        replica: Callable[[], Replica],
        now: Callable[[], datetime] = _now,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._seen = seen
        self.config = config
        self._replica = replica
        self._now = now
        self._clock = clock
        self._lock = threading.Lock()
        self._warm: Warm | None = None
        self._fresh = 0.0
        """When the kept caches were last brought up to the objects, by an answer or a refresh (`clock`)."""
        self._made = False
        """Whether they were ever made: after that, a refresh never makes them again, only an answer does."""

    def explanation(self, asked: Explain) -> Answer:
        started = time.perf_counter()
        seen = self._seen()
        read = time.perf_counter()
        missing = self._namespace_missing(seen, asked.namespace)
        if missing is not None:
            return missing
        target = Target(KINDS[asked.resource], asked.namespace, asked.name, asked.api_version)
        try:
            with self._lent() as (warm, kept):
                explained = explain(seen.objects, self.config, self._now(), target, warm)
        except NotFound as err:
            details = {"name": asked.name, "kind": asked.resource}
            return Answer(404, status(404, "NotFound", str(err), details))
        except ExplainError as err:
            return Answer(400, status(400, "BadRequest", str(err)))
        body = explained.as_json()
        body["servedBy"] = self._served_by(seen)
        done = time.perf_counter()
        return Answer(200, body, {"read": read - started, "compute": done - read}, kept)

    def pending(self, asked: Pending) -> Answer:
        started = time.perf_counter()
        seen = self._seen()
        read = time.perf_counter()
        if asked.namespace is not None:
            missing = self._namespace_missing(seen, asked.namespace)
            if missing is not None:
                return missing
        with self._lent() as (warm, kept):
            work = pending_work(seen.objects, self.config, self._now(), asked.namespace, warm)
        if asked.selector:
            terms = selector.parse(asked.selector)
            work.units = [u for u in work.units if selector.matches(terms, u)]
        body = work.as_json()
        body["servedBy"] = self._served_by(seen)
        done = time.perf_counter()
        return Answer(200, body, {"read": read - started, "compute": done - read}, kept)

    def refresh_idle(self) -> None:
        """Between answers (the server's loop, once the informers are synced; it must not block): make the caches
        from the informers' objects the first time, then bring them up to them once no answer has for
        `REFRESH_SECONDS`. Skipped while an answer holds them; a failure drops them (the next answer makes them
        again) and is only logged."""
        if not self._lock.acquire(blocking=False):
            return  # an answer has them, and brings them up itself
        try:
            kept = self._warm
            if kept is None:
                if self._made:
                    return  # dropped: the next answer makes them
            elif self._clock() - self._fresh < REFRESH_SECONDS:
                return  # an answer or a refresh brought them up lately
            self._warm, self._made = None, True
            started, cpu = time.perf_counter(), time.thread_time()
            try:
                warm = kept or Warm(self.config)
                seen = self._seen()
                warm.refresh(seen.objects, self._now())
            except Exception as err:  # the server's loop goes on; the next answer starts from nothing
                log.warning("explain caches dropped", reason="refresh failed", error=repr(err))
                return
            self._keep(warm)
            took = {"seconds": round(time.perf_counter() - started, 4), "cpu": round(time.thread_time() - cpu, 4)}
            if kept is None:
                log.info("explain caches made", pods=len(seen.objects.pods), **took)
            else:
                log.debug("explain caches refreshed", pods=len(seen.objects.pods), **took)
        finally:
            self._lock.release()

    @contextmanager
    def _lent(self) -> Iterator[tuple[Warm, bool]]:
        """The kept caches (or new ones), for one answer at a time, and whether they were kept; kept again unless the
        answer failed midway."""
        with self._lock:
            kept, self._warm = self._warm, None
            warm = kept or Warm(self.config)
            try:
                yield warm, kept is not None
            except ExplainError:
                self._keep(warm)  # found before anything was half brought up
                raise
            self._keep(warm)

    def _keep(self, warm: Warm) -> None:
        self._warm, self._fresh, self._made = warm, self._clock(), True

    def _namespace_missing(self, seen: Seen, namespace: str) -> Answer | None:
        if namespace in seen.objects.namespaces:
            return None
        details = {"name": namespace, "kind": "namespaces"}
        return Answer(404, status(404, "NotFound", f'namespaces "{namespace}" not found', details))

    def _served_by(self, seen: Seen) -> dict[str, Any]:
        replica = self._replica()
        return {"replica": replica.identity, "leader": replica.leader, "resourceVersion": seen.resource_version}
