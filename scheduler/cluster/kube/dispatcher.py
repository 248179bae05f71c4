"""The dispatcher: every write of the Kubernetes back end goes through `add`, and comes out as a result.

kube-scheduler's `api_dispatcher`, for our calls (`calls.py`):

- **One ledger.** A call is entered in the ledger (`scheduler/framework/ledger.py`) when it is made, so the
  view shows it at once, and leaves it with its result: done (and, once the informer shows it, gone),
  refused (the server's answer kept for the runner, naming the unit the write was for), or superseded.
- **Per-object order.** A call that must wait for an earlier one on the same object waits for it, and is
  not sent at all if that one was refused when it requires it: a Binding after its pod's gate removal and
  its volumes' binding (and after a PodScheduled write on the wire), a victim's deletion after its
  DisruptionTarget. So a Binding is never sent for a pod whose gate removal was just refused, nor before its
  claims are bound.
- **Coalescing.** A newer call for an object whose earlier call is still queued takes its place (the newest
  PodScheduled message, the newest nomination), and a Binding drops a PodScheduled=False still queued.
- **Bounded workers.** Each kind of call has its lane of workers (`lanes.py`), so no kind waits behind
  another: Bindings, volume bindings, gate removals, preemption writes, PodScheduled conditions, PodGroup
  conditions, min-runtime starts, Events. A follow-on runs in the worker that finished what it followed, when both are
  of the same lane (a victim's deletion right after its DisruptionTarget, not behind every other victim's).
- **Retries and the Lease.** Each request is retried on `TooManyRequests` and `Unavailable` with jittered
  backoff, and sent only while this replica leads (an owed call also once stopping).
- **Stopping** (issue 24), one rule for every lane: take no more work and drop what is only queued; let
  what a worker already took, and what is owed, run to its end, by one deadline; report drops per lane. A
  follow-on whose turn comes once stopping began is not sent: the next leader decides it anew.

Events are calls like the others but stay out of the ledger: nothing reads them back.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import structlog

from kube.backoff import call_with_retry
from kube.errors import ApiError, api_error
from kube.transport import JSON, Transport
from scheduler.cluster.kube.calls import Call, EventCall, Failed, NotSent, Order
from scheduler.cluster.kube.lanes import Lane, LaneFull, Lanes, LaneStopped, Stopped
from scheduler.framework.cluster import PassAborted
from scheduler.framework.ledger import Entry, Ledger, Refusal, State

log = structlog.get_logger(__name__)

LANES = (
    ("bindings", 16, None),
    ("volumes", 32, None),
    ("gate-removals", 4, None),
    ("preemption", 32, None),
    ("podgroup-conditions", 1, None),
    ("podgroup-starts", 4, None),
    ("pod-conditions", 1, None),
    ("events", 16, 10_000),
)
"""Lane, workers, queue limit. A volume worker waits for the PV controller (and a provisioner) to bind a pod's claims,
seconds or, with no provisioner running, until the bind timeout: 32 pods' claims wait at once, the next ones queue
behind them (their pods held on their nodes all the while). One worker for PodGroup conditions keeps the conditions
written to a group in order; one for PodScheduled writes (they only inform); four for min-runtime starts, apart from
the conditions: 200 gangs starting at once queued 400 writes on one thread, and a start written seconds late leaves
its gang without protection meanwhile. As many for Events as for Bindings: each Binding is followed by its
`Scheduled` Event, and Events need no order. With one worker, a 10,000-node stream of ~300 pods a second filled the
lane and dropped ~230 Events a second, three in four (issue 23)."""


DROPS_LOGGED_EVERY_SECONDS = 10.0
"""Events dropped because their lane is full are logged at most this often, each line with how many since the
last; every drop is counted in `phalanx_scheduler_api_requests_total{operation="event",result="dropped"}` (those
after a burst's last line only there). A line per drop was 1.3 % of the scheduler's CPU streaming 100,000 pods
at 10,000 nodes (py-spy, issue 23): thousands of identical lines an operator would have to read past."""


class NotLeader(PassAborted):
    """This replica does not hold the Lease (any more): it must not write."""


def log_failed(event: str, exc: BaseException, **fields: str) -> None:
    """A refusal or a lost connection is a warning; anything else (an answer our models cannot read) is a bug,
    logged with its traceback (plain, without frame locals: `phalanx.logs`). A write not sent because this
    replica no longer leads is neither: the next leader decides it anew."""
    if isinstance(exc, NotLeader | NotSent):
        log.debug(event, error=type(exc).__name__, **fields)
    elif isinstance(exc, ApiError):
        log.warning(event, error=str(exc.status) if exc.status else exc.answer, **fields)
    elif isinstance(exc, Failed):
        log.warning(event, error=exc.answer, **fields)
    else:
        log.error(event, error=type(exc).__name__, exc_info=exc, **fields)


class Dispatcher:
    def __init__(
        self,
        transport: Transport,
        ledger: Ledger[Call],
        may_write: Callable[[], bool],
        context: Any,
        on_api_call: Callable[[str, str], None] | None = None,
        on_refused: Callable[[], None] = lambda: None,
        workers: dict[str, int] | None = None,
    ) -> None:
        self.transport = transport
        self.ledger = ledger
        self.may_write = may_write
        self.context = context
        """The `calls.Wire` the calls are sent over (the back end: its view, its hold, its Events)."""
        self.stopping = threading.Event()
        self._on_api_call = on_api_call
        self._on_refused = on_refused
        sizes = workers or {}
        self.lanes = {name: Lane(name, sizes.get(name, count), limit) for name, count, limit in LANES}
        self._lanes = Lanes(*self.lanes.values())
        self._drops_lock = threading.Lock()
        self._drops = 0
        self._drops_logged = -DROPS_LOGGED_EVERY_SECONDS

    # making calls

    def leading(self, call: Call) -> bool:
        return self.may_write() or (call.owed and self.stopping.is_set())

    def add(self, call: Call) -> None:
        """Enter `call` in the ledger and send it when its turn comes; raises `NotLeader` without the Lease."""
        if not self.leading(call):
            raise NotLeader(call.operation)
        if isinstance(call, EventCall):
            self._submit_event(call)
            return
        entry: Entry[Call] = Entry(call)
        with self.ledger.lock:
            if any(call.repeats(e.call, e.state is State.DONE) for e in self.ledger.entries(call.slot)):
                return  # the call in flight already makes it
            refused = self.ledger.refused_last(call.slot)
            if refused is not None and call.follows(refused.call) is Order.REQUIRES:
                entry.state = State.REFUSED  # what it requires was refused already, in this pass
            else:
                self._enter(entry)
        if entry.state is State.REFUSED:
            self._not_sent_now(entry)
        elif entry.after is None and entry.state is State.QUEUED:
            self._submit(entry)

    def _enter(self, entry: Entry[Call]) -> None:
        """Merge `entry` into a queued call for the same object, or enter it after the call it follows
        (the caller holds the ledger's lock)."""
        call = entry.call
        earlier = self.ledger.entries(call.slot)
        for held in earlier:
            if held.state is not State.QUEUED or held.after is not None:
                continue
            merged = call.merge(held.call)
            if merged is not None:
                held.call = merged  # its worker sends the newest: one write for both
                entry.state = State.MERGED
                return
            if call.supersedes(held.call):
                self._end(held)
        for held in reversed(self.ledger.entries(call.slot)):
            if held.state is State.DONE:
                continue
            order = call.follows(held.call)
            if order is not Order.FREE:
                entry.after, entry.requires = held, order is Order.REQUIRES
                held.followers.append(entry)
                break
        self.ledger.add(entry)

    def _submit(self, entry: Entry[Call]) -> None:
        try:
            future = self.lanes[entry.call.lane].submit(self._run, entry, owed=entry.call.owed)
        except LaneStopped:
            self._end(entry)
            raise
        future.add_done_callback(lambda f: self._end(entry) if f.cancelled() else None)

    def _submit_event(self, call: EventCall) -> None:
        try:
            self.lanes[call.lane].submit(self._run_event, call)
        except LaneFull:
            self._count("event", "dropped")
            self._dropped(call)
        except LaneStopped:
            pass  # stopping: Events are best effort, and the next leader reports what still holds

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

    # sending

    def request(
        self, call: Call, route: Callable[..., Any], path: str, body: Any = None, content_type: str = JSON
    ) -> Any:
        """One request of `call`, retried; only while this replica leads (an owed call also once stopping)."""
        if not self.leading(call):
            raise NotLeader(call.operation)

        def guarded() -> Any:
            if not self.leading(call):
                raise NotLeader(call.operation)
            return self.transport.request(route, path, body, content_type)

        attempts = 3 if isinstance(call, EventCall) else 6
        try:
            result = call_with_retry(call.operation, guarded, self.stopping, attempts=attempts)
        except ApiError as err:
            self._count(call.operation, str(err.status) if err.status else "error")
            raise
        except NotLeader:
            raise
        except Exception:
            self._count(call.operation, "error")
            raise
        self._count(call.operation, "success")
        return result

    def _run(self, entry: Entry[Call]) -> None:
        """A worker's turn for `entry`, then for the follow-ons of its lane that it released."""
        call = entry.call
        if call.held:
            self.context.hold.wait()
            if self.stopping.is_set():
                self._end(entry)  # it waited for a preemption, not for an answer: stopping drops it
                return
        with self.ledger.lock:
            if entry.state is not State.QUEUED:
                return  # superseded meanwhile
            entry.state = State.RUNNING
            call = entry.call  # the newest merged into it
        try:
            sent = self.context.model(call, call.send(self.context))
        except BaseException as exc:
            self._refused(entry, exc)
            return
        self._done(entry, sent)

    def _run_event(self, call: EventCall) -> None:
        self.context.hold.wait()
        if self.stopping.is_set():
            return  # it waited for a preemption, not for an answer: stopping drops it
        try:
            call.send(self.context)
        except BaseException as exc:
            call.refused(self.context, exc)

    # results

    def _done(self, entry: Entry[Call], sent: Any) -> None:
        with self.ledger.lock:
            if isinstance(sent, Call):
                entry.call = sent  # what the server answered it shows instead (a pod bound elsewhere)
            elif sent is not None:
                entry.written = sent
            entry.state = State.DONE
            followers, entry.followers = entry.followers, []
        entry.call.done(self.context, sent)
        self._release(entry, followers, refused=False)

    def _refused(self, entry: Entry[Call], exc: BaseException) -> None:
        call = entry.call
        refusal = None
        if not isinstance(exc, NotLeader | NotSent) and not call.quiet:
            err = api_error(exc)
            answer = err.answer if err is not None else exc.answer if isinstance(exc, Failed) else type(exc).__name__
            refusal = Refusal(call.operation, call.key, call.unit, answer, told=call.told)
        with self.ledger.lock:  # one step: a call made meanwhile finds this one in flight or refused, never neither
            entry.state = State.REFUSED
            followers, entry.followers = entry.followers, []
            self.ledger.remove(entry)
            self.ledger.refused(entry, refusal)
        if isinstance(exc, NotLeader | NotSent):
            log_failed(f"{call.operation} not sent", exc, pod=call.key)
        elif call.quiet:
            log.warning(f"{call.operation} not written", object=call.key, error=type(exc).__name__)
        else:
            log_failed(f"{call.operation} failed", exc, pod=call.key)
        call.refused(self.context, exc)
        if not call.quiet:
            self._on_refused()  # the view shows the object as it is again, and the ledger has a refusal
        self._release(entry, followers, refused=True)

    def _release(
        self,
        entry: Entry[Call],
        followers: list[Entry[Call]],
        refused: bool,
        why: str = "the write it follows was refused",
    ) -> None:
        """The follow-ons of `entry` take their turn: in this worker when of the same lane, else in theirs;
        none that required `entry` when it was refused (or not sent: `why`), and none once stopping began. One
        that only waited for it goes: a Binding that replaced a queued PodScheduled write must not take the
        claims' writes ordered after that one with it."""
        for follower in followers:
            with self.ledger.lock:
                follower.after = None
            if (refused and follower.requires) or self.stopping.is_set():
                reason = why if refused and follower.requires else "stopping"
                self._not_sent(follower, NotSent(reason))
            elif follower.call.lane == entry.call.lane and threading.current_thread().name.startswith(entry.call.lane):
                self._run(follower)
            else:
                try:
                    self._submit(follower)
                except LaneStopped:
                    self._not_sent(follower, NotSent("stopping"))

    def _not_sent_now(self, entry: Entry[Call]) -> None:
        """`entry` is not sent at all: the call it requires was refused before it was made."""
        log_failed(f"{entry.call.operation} not sent", NotSent("the write it follows was refused"), pod=entry.call.key)
        entry.call.refused(self.context, NotSent("the write it follows was refused"))
        if not entry.call.quiet:
            self._on_refused()

    def _not_sent(self, entry: Entry[Call], why: NotSent) -> None:
        with self.ledger.lock:
            entry.state = State.REFUSED
            followers, entry.followers = entry.followers, []
        self.ledger.remove(entry)
        log_failed(f"{entry.call.operation} not sent", why, pod=entry.call.key)
        entry.call.refused(self.context, why)
        if not entry.call.quiet:
            self._on_refused()
        self._release(entry, followers, refused=True)

    def _end(self, entry: Entry[Call]) -> None:
        """`entry` leaves the ledger unsent: superseded by a newer call, or dropped by stopping."""
        with self.ledger.lock:
            if entry.state in (State.SUPERSEDED, State.REFUSED):
                return
            entry.state = State.SUPERSEDED
            followers, entry.followers = entry.followers, []
        self.ledger.remove(entry)
        entry.call.refused(self.context, NotSent("superseded"))
        self._release(entry, followers, refused=True, why="the write it follows was not sent")

    def _count(self, operation: str, result: str) -> None:
        if self._on_api_call is not None:
            self._on_api_call(operation, result)

    # stopping

    def stop_writing(self) -> None:
        """Take no more calls and drop what is only queued, but for what is owed; waits for nothing."""
        self.stopping.set()
        self._lanes.drop_queued()

    def finish(self, deadline: float) -> Stopped:
        """What a worker took, and what is owed, runs to its end by `deadline` (`time.monotonic()`)."""
        self.stopping.set()
        return self._lanes.finish(deadline)
