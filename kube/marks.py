"""Change marks: which keys of a cache changed since a reader last copied it, without comparing every object.

The scheduler copies the pods informer's cache every pass; comparing each of 100,000 pods with what its
snapshot holds took 30 ms of every pass, while a pass after a watch event has a handful of changed pods. The
informer numbers its changes (a "mark" is the count so far) and keeps each key at its last change, in order, so
`since(mark)` answers in the size of the answer.
"""

from __future__ import annotations

from collections import OrderedDict

SLACK = 1024


class ChangeMarks:
    """Not thread-safe: the owner calls it under the lock that guards its cache. One reader of `since`: what it
    has been told is forgotten, so a reader asking from before that gets None (compare everything), as after a
    relist. `peek` forgets nothing, for a reader that is never behind `since`'s."""

    def __init__(self) -> None:
        self.last = 0
        """The number of changes so far: a copy of the cache taken now is at this mark."""
        self._floor = 0
        self._order: OrderedDict[str, int] = OrderedDict()

    def mark(self, key: str, live: int) -> None:
        """`key` changed; `live`: how many keys the cache holds. Deleted keys are kept only until the marks
        outnumber twice the live ones (and a slack): a reader that never asks (a standby replica) costs no more."""
        self.last += 1
        self._order[key] = self.last
        self._order.move_to_end(key)
        while len(self._order) > 2 * live + SLACK:
            _, self._floor = self._order.popitem(last=False)

    def reset(self) -> None:
        """Every key may have changed (the cache was listed again)."""
        self.last += 1
        self._floor = self.last
        self._order.clear()

    def peek(self, mark: int) -> list[str] | None:
        """The keys changed after `mark`, newest first, or None when that is no longer known; forgets nothing,
        so a second reader at a later mark (the view's copy of the cache) leaves `since` its answers."""
        if mark < self._floor:
            return None
        changed: list[str] = []
        for key in reversed(self._order):
            if self._order[key] <= mark:
                break
            changed.append(key)
        return changed

    def since(self, mark: int) -> set[str] | None:
        """The keys changed after `mark` (and maybe a few since), or None when that is no longer known."""
        if mark < self._floor:
            return None
        order = self._order
        while order:
            key = next(iter(order))
            if order[key] > mark:
                break
            order.popitem(last=False)
        self._floor = mark
        return set(order)
