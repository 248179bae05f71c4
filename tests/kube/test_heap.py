"""The scheduler process's collector policy (`scheduler.cluster.kube.heap`): the cache is frozen out of the
collector's sight, yet no garbage cycle outlives the next full collection, and only the heap's own collections run,
on its clock."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from scheduler.cluster.kube.heap import Heap


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


def cycle() -> weakref.ref[Node]:
    a, b = Node(), Node()
    a.other, b.other = b, a
    return weakref.ref(a)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(autouse=True)
def restore_collector() -> Iterator[None]:
    yield
    gc.unfreeze()
    gc.enable()


@pytest.mark.parametrize("frozen_by", ["a settle while it is alive", "freeze, the caches as listed"])
def test_a_frozen_cycle_is_freed_by_the_next_full_collection(frozen_by: str) -> None:
    clock = Clock()
    heap = Heap(full_every_seconds=600.0, clock=clock)
    if frozen_by == "a settle while it is alive":
        a, b = Node(), Node()
        a.other, b.other = b, a
        garbage = weakref.ref(a)
        heap.settle()
        del a, b
    else:
        heap.hold()
        garbage = cycle()
        heap.freeze()
    gc.collect()
    assert garbage() is not None, "frozen: the ordinary collections do not see it"
    clock.now = 599.0
    heap.settle()
    assert garbage() is not None
    clock.now = 600.0
    heap.settle()
    assert garbage() is None


def test_garbage_made_before_a_settle_is_not_frozen() -> None:
    heap = Heap(clock=Clock())
    garbage = cycle()
    heap.settle()
    assert garbage() is None


def test_the_collector_stays_off_from_hold_on_and_only_settle_collects() -> None:
    heap = Heap(clock=Clock())
    heap.hold()
    heap.freeze()
    heap.settle(full=True)
    assert not gc.isenabled()
    assert heap.frozen() > 0
    garbage = cycle()
    kept = [[] for _ in range(10 * gc.get_threshold()[0])]  # enough to set off the collector's own runs
    assert garbage() is not None, f"collected among {len(kept)} allocations"
    heap.settle()
    assert garbage() is None


def test_tick_settles_once_a_second_at_most() -> None:
    clock = Clock()
    heap = Heap(settle_every_seconds=1.0, clock=clock)
    heap.hold()
    heap.settle()
    garbage = cycle()
    clock.now = 0.5
    heap.tick()
    assert garbage() is not None
    clock.now = 1.0
    heap.tick()
    assert garbage() is None
