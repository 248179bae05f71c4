"""What the served API answers: `scheduler/explain` run on this replica's own view of the cluster and configuration.

Every replica answers, leader or standby, from its own informers (`informed.py`): the caches its scheduling passes
read, kept current by their watches, so a standby's answer is as fresh as the leader's and a failover interrupts
nothing. The configuration is the one the process runs with. The answer is the document `kubectl phalanx explain
-o json` (an `Explanation`) or `status -o json` (a `PendingWork`) prints, plus `servedBy`: the replica that
computed it, whether it leads, and the resourceVersion its pods cache was at (every change up to it was seen).

Nothing is written: the explanation's dry run runs the scheduler on the in-memory back end over a copy of the
cache's tables (references to the same immutable objects, not copies of them). Errors are the API server's
`Status` documents: `namespaces "x" not found` and `pods "x" not found` are 404 NotFound, a pod another scheduler
places is 400 BadRequest.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from scheduler.api.config import SchedulerConfiguration
from scheduler.explain import selector
from scheduler.explain.explanation import ExplainError, NotFound, Target, explain
from scheduler.explain.status import pending_work
from scheduler.framework.cluster import ClusterObjects
from scheduler.serve.routes import KINDS, Explain, Pending


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
    ) -> None:
        self._seen = seen
        self.config = config
        self._replica = replica
        self._now = now

    def explanation(self, asked: Explain) -> Answer:
        started = time.perf_counter()
        seen = self._seen()
        read = time.perf_counter()
        missing = self._namespace_missing(seen, asked.namespace)
        if missing is not None:
            return missing
        target = Target(KINDS[asked.resource], asked.namespace, asked.name, asked.api_version)
        try:
            explained = explain(seen.objects, self.config, self._now(), target)
        except NotFound as err:
            details = {"name": asked.name, "kind": asked.resource}
            return Answer(404, status(404, "NotFound", str(err), details))
        except ExplainError as err:
            return Answer(400, status(400, "BadRequest", str(err)))
        body = explained.as_json()
        body["servedBy"] = self._served_by(seen)
        done = time.perf_counter()
        return Answer(200, body, {"read": read - started, "compute": done - read})

    def pending(self, asked: Pending) -> Answer:
        started = time.perf_counter()
        seen = self._seen()
        read = time.perf_counter()
        if asked.namespace is not None:
            missing = self._namespace_missing(seen, asked.namespace)
            if missing is not None:
                return missing
        work = pending_work(seen.objects, self.config, self._now(), asked.namespace)
        if asked.selector:
            terms = selector.parse(asked.selector)
            work.units = [u for u in work.units if selector.matches(terms, u)]
        body = work.as_json()
        body["servedBy"] = self._served_by(seen)
        done = time.perf_counter()
        return Answer(200, body, {"read": read - started, "compute": done - read})

    def _namespace_missing(self, seen: Seen, namespace: str) -> Answer | None:
        if namespace in seen.objects.namespaces:
            return None
        details = {"name": namespace, "kind": "namespaces"}
        return Answer(404, status(404, "NotFound", f'namespaces "{namespace}" not found', details))

    def _served_by(self, seen: Seen) -> dict[str, Any]:
        replica = self._replica()
        return {"replica": replica.identity, "leader": replica.leader, "resourceVersion": seen.resource_version}
