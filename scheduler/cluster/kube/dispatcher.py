"""The dispatcher: every write of the Kubernetes back end goes through `add`, and comes out as a result.

kube-scheduler's `api_dispatcher`, for our calls (`calls.py`), ordered by one table (`order.py`):

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
- **One way to the server.** A call is sent over the sender (`sender.py`: the transport, retries on
  `TooManyRequests` and `Unavailable` with jittered backoff, the Lease checked before each request) and its
  outcome told to the back end's `Outcomes` (a pod bound, a write refused, a condition written), which turns it
  into Events; nothing comes back to the dispatcher but the call's result.
- **Stopping**, one rule for every lane (the Events' too): take no more work and drop what is only queued; let
  what a worker already took, and what is owed, run to its end, by one deadline; report drops per lane. A
  follow-on whose turn comes once stopping began is not sent: the next leader decides it anew.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import structlog

from kube.errors import ApiError, api_error
from scheduler.cluster.kube.calls import Call, Failed, NotSent
from scheduler.cluster.kube.lanes import Lane, Lanes, LaneStopped, Stopped
from scheduler.cluster.kube.order import Order, merges, repeats, rule
from scheduler.cluster.kube.sender import NotLeader, Sender
from scheduler.framework.cluster import Outcomes
from scheduler.framework.ledger import Entry, Ledger, Refusal, State

log = structlog.get_logger(__name__)


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
        sender: Sender,
        outcomes: Outcomes,
        ledger: Ledger[Call],
        lanes: dict[str, Lane],
        on_refused: Callable[[], None] = lambda: None,
    ) -> None:
        self.sender = sender
        """What each call is sent with, and all it is sent with."""
        self.outcomes = outcomes
        """Where each call's outcome for its pod goes (`Call.done`, `Call.refused`)."""
        self.ledger = ledger
        self.stopping = sender.stopping
        self._on_refused = on_refused
        self.lanes = lanes
        """Every lane of the back end (the Events' too, which `events.py` sends on): one rule stops them all."""
        self._lanes = Lanes(*lanes.values())

    # making calls

    def add(self, call: Call) -> None:
        """Enter `call` in the ledger and send it when its turn comes; raises `NotLeader` without the Lease."""
        if not self.sender.leading(call):
            raise NotLeader(call.operation)
        entry: Entry[Call] = Entry(call)
        with self.ledger.lock:
            if any(repeats(call, e.call, e.state is State.DONE) for e in self.ledger.entries(call.slot)):
                return  # the call in flight already makes it
            refused = self.ledger.refused_last(call.slot)
            if refused is not None and rule(call, refused.call).order is Order.REQUIRES:
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
            if merges(call, held.call):
                held.call = call  # its worker sends the newest: one write for both
                entry.state = State.MERGED
                return
            if rule(call, held.call).supersedes:
                self._end(held)
        for held in reversed(self.ledger.entries(call.slot)):
            if held.state is State.DONE:
                continue
            order = rule(call, held.call).order
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
        future.add_done_callback(lambda f: self._ended(entry, f))

    def _turn(self, entry: Entry[Call]) -> None:
        """`entry`'s turn in this worker, right after the call it followed: sent, and its result recorded."""
        future: Future[Any] = Future()
        future.set_running_or_notify_cancel()
        try:
            future.set_result(self._run(entry))
        except BaseException as exc:
            future.set_exception(exc)
        self._ended(entry, future)

    # sending

    def _run(self, entry: Entry[Call]) -> Any:
        """A worker's turn for `entry`: sent over the sender, one way. What the server answered comes back in the
        worker's future, and `_ended` records it: nothing of the call's path calls back into the dispatcher."""
        call = entry.call
        if call.held:
            self.sender.hold.wait()
            if self.stopping.is_set():
                return None  # it waited for a preemption, not for an answer: stopping drops it (`_ended`)
        with self.ledger.lock:
            if entry.state is not State.QUEUED:
                return None  # superseded meanwhile
            entry.state = State.RUNNING
            call = entry.call  # the newest merged into it
        sent = call.send(self.sender)
        return call.answer(sent)

    # results

    def _ended(self, entry: Entry[Call], future: Future[Any]) -> None:
        """`entry`'s turn is over, in its worker (or where stopping cancelled it): not taken (superseded, dropped
        by stopping or cancelled), refused, or done; then the follow-ons it released take theirs."""
        if entry.state is not State.RUNNING:
            self._end(entry)  # nothing to end when it was superseded: `_end` knows
        elif (exc := future.exception()) is not None:
            self._refused(entry, exc)
        else:
            self._done(entry, future.result())

    def _done(self, entry: Entry[Call], sent: Any) -> None:
        with self.ledger.lock:
            if isinstance(sent, Call):
                entry.call = sent  # what the server answered it shows instead (a pod bound elsewhere)
            elif sent is not None:
                entry.written = sent
            entry.state = State.DONE
            followers, entry.followers = entry.followers, []
        entry.call.done(self.sender, self.outcomes, sent)
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
        call.refused(self.sender, self.outcomes, exc)
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
                self._turn(follower)
            else:
                try:
                    self._submit(follower)
                except LaneStopped:
                    self._not_sent(follower, NotSent("stopping"))

    def _not_sent_now(self, entry: Entry[Call]) -> None:
        """`entry` is not sent at all: the call it requires was refused before it was made."""
        log_failed(f"{entry.call.operation} not sent", NotSent("the write it follows was refused"), pod=entry.call.key)
        entry.call.refused(self.sender, self.outcomes, NotSent("the write it follows was refused"))
        if not entry.call.quiet:
            self._on_refused()

    def _not_sent(self, entry: Entry[Call], why: NotSent) -> None:
        with self.ledger.lock:
            entry.state = State.REFUSED
            followers, entry.followers = entry.followers, []
        self.ledger.remove(entry)
        log_failed(f"{entry.call.operation} not sent", why, pod=entry.call.key)
        entry.call.refused(self.sender, self.outcomes, why)
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
        entry.call.refused(self.sender, self.outcomes, NotSent("superseded"))
        self._release(entry, followers, refused=True, why="the write it follows was not sent")

    # stopping

    def stop_writing(self) -> None:
        """Take no more calls and drop what is only queued, but for what is owed; waits for nothing."""
        self.stopping.set()
        self._lanes.drop_queued()

    def finish(self, deadline: float) -> Stopped:
        """What a worker took, and what is owed, runs to its end by `deadline` (`time.monotonic()`)."""
        self.stopping.set()
        return self._lanes.finish(deadline)
