"""The sender: what a call is sent with (`calls.Wire`), and nothing of the back end beyond it.

Requests go to the transport, retried with jittered backoff on 429 and 5xx and counted, and only while this
replica leads (an owed call also once stopping), checked before each attempt. What a call reads to decide its
write comes from the view (the newest of each object: the informer's copy or what our writes returned) and the
informers, and a call that waits (for the PV controller, for a newer object after a 409) waits on the sender, so
stopping ends the wait. The dispatcher hands each call this and nothing else, so a call's path to the API server
goes one way: dispatcher, call, sender, transport.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from kube.backoff import call_with_retry
from kube.errors import ApiError
from kube.informer import Informer
from kube.routes import Route
from kube.transport import JSON, Transport
from scheduler.api.pod import Pod
from scheduler.api.pod_group import PodGroup
from scheduler.cluster.kube.calls import NEWER_WAIT_SECONDS, Call, version
from scheduler.cluster.kube.hold import PreemptionHold
from scheduler.cluster.kube.view import KubeView
from scheduler.framework.cluster import PassAborted, object_key


class NotLeader(PassAborted):
    """This replica does not hold the Lease (any more): it must not write."""


class Sender:
    def __init__(
        self,
        transport: Transport,
        view: KubeView,
        hold: PreemptionHold,
        may_write: Callable[[], bool],
        on_api_call: Callable[[str, str], None] | None = None,
    ) -> None:
        self.transport = transport
        self.view = view
        self.hold = hold
        """Where a call that starts or ends a preemption says so (a nominee bound, a victim gone)."""
        self.may_write = may_write
        self.stopping = threading.Event()
        """Set once the back end stops: no retry, no wait goes on past it."""
        self._on_api_call = on_api_call

    def leading(self, call: Call) -> bool:
        return self.may_write() or (call.owed and self.stopping.is_set())

    def request(self, call: Call, route: Route, path: str, body: Any = None, content_type: str = JSON) -> Any:
        """One request of `call` along `route` (a `kube.routes.Route`, for its verb and its RBAC grant),
        retried; only while this replica leads (an owed call also once stopping)."""
        if not self.leading(call):
            raise NotLeader(call.operation)

        def guarded() -> Any:
            if not self.leading(call):
                raise NotLeader(call.operation)
            return self.transport.request(route, path, body, content_type)

        try:
            result = call_with_retry(call.operation, guarded, self.stopping, attempts=call.attempts)
        except ApiError as err:
            self.count(call.operation, str(err.status) if err.status else "error")
            raise
        except NotLeader:
            raise
        except Exception:
            self.count(call.operation, "error")
            raise
        self.count(call.operation, "success")
        return result

    def count(self, operation: str, result: str) -> None:
        if self._on_api_call is not None:
            self._on_api_call(operation, result)

    def read(self, route: Route, path: str) -> Any:
        """One GET, not retried."""
        return self.transport.request(route, path)

    def now(self) -> datetime:
        return datetime.now(UTC)

    def current_pod(self, pod: Pod) -> Pod:
        """The newest of `pod`, the informer's copy and what our writes returned."""
        current: Pod = self.view.current(f"pods/{object_key(pod)}", pod)
        return current

    def current_group(self, group: PodGroup) -> PodGroup:
        current: PodGroup = self.view.current(f"podgroups/{object_key(group)}", group)
        return current

    def newer_group(self, seen: PodGroup) -> PodGroup | None:
        """After a 409: the group as the watch delivers it once it is newer than `seen`, or None when it does
        not come within a few seconds (the next pass writes the condition again).

        The watch, not a GET, so the scheduler needs no `get` on PodGroups: the write that lost the race was
        someone else's, and the informer sees it within milliseconds.
        """
        deadline = time.monotonic() + NEWER_WAIT_SECONDS
        while not self.stopping.is_set() and time.monotonic() < deadline:
            current = self.current_group(seen)
            if version(current) > version(seen):
                return current
            self.stopping.wait(0.02)
        return None

    def bound(self, key: str) -> bool:
        """The pod is bound, or a Binding of it is in flight."""
        return self.view.bound(key)

    def stored(self, kind: str, key: str) -> Any:
        """The informer's copy of an object (`pods`, `nodes`, `persistentvolumes`, `persistentvolumeclaims`,
        `resourceclaims`), by the key `ClusterObjects` files it under, or None."""
        informers: dict[str, Informer[Any]] = {
            "pods": self.view.pods,
            "nodes": self.view.nodes,
            "persistentvolumes": self.view.volumes,
            "persistentvolumeclaims": self.view.claims,
            "resourceclaims": self.view.resource_claims,
        }
        return informers[kind].get(key)

    def pause(self, seconds: float) -> bool:
        """Wait `seconds`; False as soon as stopping began (the caller gives up)."""
        return not self.stopping.wait(seconds)
