"""Events of the Kubernetes back end: sent by their own lane of workers, over the sender, best effort.

An Event is no call in flight: nothing reads it back, so it stays out of the ledger and out of the per-object order,
and is sent here rather than by the dispatcher. It waits while a preemption is under way (`hold.py`), so the
preemption's own writes have the API server to themselves; past its lane's limit it is dropped, counted, and
logged now and then.
"""

from __future__ import annotations

import threading
import time

import structlog

from scheduler.api.meta import ApiModel
from scheduler.cluster.kube.calls import EventCall
from scheduler.cluster.kube.lanes import Lane, LaneFull, LaneStopped
from scheduler.cluster.kube.sender import Sender

log = structlog.get_logger(__name__)

DROPS_LOGGED_EVERY_SECONDS = 10.0
"""Events dropped because their lane is full are logged at most this often, each line with how many since the
last; every drop is counted in `phalanx_scheduler_api_requests_total{operation="event",result="dropped"}` (those
after a burst's last line only there). A line per drop was 1.3 % of the scheduler's CPU streaming 100,000 pods
at 10,000 nodes (py-spy): thousands of identical lines an operator would have to read past."""


class Events:
    def __init__(self, lane: Lane, sender: Sender, identity: str) -> None:
        self.lane = lane
        self.sender = sender
        self.identity = identity
        self._drops_lock = threading.Lock()
        self._drops = 0
        self._drops_logged = -DROPS_LOGGED_EVERY_SECONDS

    def record(
        self, regarding: ApiModel, event_type: str, reason: str, note: str, related: ApiModel | None = None
    ) -> None:
        """events.k8s.io/v1, best effort: a lost Event must never stop scheduling; none without the Lease."""
        if not self.sender.may_write():
            return
        call = EventCall.of(regarding, event_type, reason, note, related, self.identity, self.sender.now())
        try:
            self.lane.submit(self._send, call)
        except LaneFull:
            self.sender.count(call.operation, "dropped")
            self._dropped(call)
        except LaneStopped:
            pass  # stopping: Events are best effort, and the next leader reports what still holds

    def _send(self, call: EventCall) -> None:
        self.sender.hold.wait()
        if self.sender.stopping.is_set():
            return  # it waited for a preemption, not for an answer: stopping drops it
        try:
            call.send(self.sender)
        except BaseException as err:
            if self.sender.stopping.is_set():
                return  # cut off by stopping (the server gone with it, say): dropped as the unsent ones are, unlogged
            log.warning("event not recorded", regarding=call.body["regarding"].get("name"), error=type(err).__name__)

    def _dropped(self, call: EventCall) -> None:
        """Log the drops, the first at once, then at most one line every `DROPS_LOGGED_EVERY_SECONDS`."""
        with self._drops_lock:
            self._drops += 1
            now = time.monotonic()
            if now - self._drops_logged < DROPS_LOGGED_EVERY_SECONDS:
                return
            count, self._drops, self._drops_logged = self._drops, 0, now
        log.warning(
            "events dropped, their lane is full",
            count=count,
            last_regarding=call.body["regarding"].get("name"),
            last_reason=call.body.get("reason"),
        )
