"""The ledger: every write a back end has in flight, and what became of those that did not go through.

One record, read by two readers. The back end's view shows each write in flight in `objects()` until its
informer shows it done (kube-scheduler's assumed pods: a pod being bound counts on its node in the very
next pass). The runner learns from it which writes sent in the background were refused, each naming the
scheduling unit it was made for, so it keeps no map of its own from pods to units, and no assumed
bindings (the view shows them). A back end that writes before returning (`cluster/memory`) has nothing in
flight: it refuses by raising `WriteRefused`.

An entry is a typed call (`cluster/kube/calls.py`): its object's key, its unit, what it shows while in
flight. It leaves the ledger when its result is final: done and seen by the informer, refused (the
server's answer kept for the runner), or superseded by a newer call for the same object.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Generic, Protocol, TypeVar


class Write(Protocol):
    """What the ledger needs of a call: its place, the kind of the object written and its key
    (`pods/namespace/name`). A pod and a PodGroup may share a name."""

    @property
    def slot(self) -> str: ...


W = TypeVar("W", bound=Write)


class State(Enum):
    """Where a call is. The first three are in flight; the last three are its result, final."""

    QUEUED = "queued"
    """Waiting for a worker, or for the call before it on the same object."""
    RUNNING = "running"
    """On the wire."""
    DONE = "done"
    """The server took it: shown until the informer shows it, then it leaves the ledger."""
    REFUSED = "refused"
    """The server refused it (its answer is a `Refusal`), or it was not sent because what it requires was."""
    SUPERSEDED = "superseded"
    """Not sent: a newer call for the same object made it stale (or stopping dropped it)."""
    MERGED = "merged"
    """Not entered: it replaced the call still queued for the same object, which sends it."""


@dataclass(frozen=True, slots=True)
class Refusal:
    """A write sent after the call that asked for it returned, that the server refused (or never answered).

    `operation` and `pod` name the write, `unit` the scheduling unit it was for, `answer` what the server
    said in one line without credentials (empty for a write not sent because the one it followed was
    refused, which has its own refusal). `told`: the back end already told the pod why, in a Warning Event
    (a Binding, a gate removal); otherwise the runner tells the unit.
    """

    operation: str
    pod: str
    unit: str
    answer: str = ""
    told: bool = False


@dataclass(slots=True)
class Entry(Generic[W]):
    """One call in the ledger, and where it is."""

    call: W
    state: State = State.QUEUED
    written: Any = None
    """The object the server returned, shown until the informer's copy is as new."""
    after: Entry[W] | None = None
    """The call before it on the same object that it waits for (its follow-ons are in that one's `followers`)."""
    requires: bool = False
    """Not sent if `after` was refused."""
    followers: list[Entry[W]] = field(default_factory=list)


class Ledger(Generic[W]):
    """The calls in flight, by slot in the order they were made, and the refusals not yet read."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        """Held while reading or changing entries; the dispatcher holds it across a decision."""
        self._entries: dict[str, list[Entry[W]]] = {}
        self._refusals: list[Refusal] = []
        self._refused_last: dict[str, Entry[W]] = {}
        """Per slot, the call refused last since the runner last read the refusals: a call made after it in the
        same pass that requires it (a victim's deletion after its DisruptionTarget) is not sent."""

    def entries(self, slot: str) -> list[Entry[W]]:
        """The entries of `slot` (`pods/namespace/name`), oldest first (the caller holds `lock`)."""
        return self._entries.get(slot, [])

    def add(self, entry: Entry[W]) -> None:
        with self.lock:
            self._entries.setdefault(entry.call.slot, []).append(entry)

    def remove(self, entry: Entry[W]) -> None:
        with self.lock:
            entries = self._entries.get(entry.call.slot)
            if entries is None:
                return
            for i, held in enumerate(entries):
                if held is entry:
                    del entries[i]
                    break
            if not entries:
                del self._entries[entry.call.slot]

    def items(self) -> Iterator[tuple[str, list[Entry[W]]]]:
        """Every slot with entries (the caller holds `lock`)."""
        return iter(self._entries.items())

    def in_flight(self) -> int:
        with self.lock:
            return sum(len(entries) for entries in self._entries.values())

    def refused(self, entry: Entry[W], refusal: Refusal | None) -> None:
        """`entry` was refused (`refusal` is None when no unit is to be told: a write that only informs)."""
        with self.lock:
            self._refused_last[entry.call.slot] = entry
            if refusal is not None:
                self._refusals.append(refusal)

    def refused_last(self, slot: str) -> Entry[W] | None:
        """The call at `slot` refused since the runner last read the refusals, if any (the caller holds `lock`)."""
        return self._refused_last.get(slot)

    def refusals(self) -> list[Refusal]:
        """The refusals since the last call (each is read once: the runner backs its unit off for it)."""
        with self.lock:
            refusals, self._refusals = self._refusals, []
            self._refused_last.clear()
        return refusals
