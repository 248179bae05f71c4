"""The pods informer's change marks (`kube.marks`): what changed since a reader's copy, or None when that is
no longer known; never more memory than twice the live keys when nobody asks."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kube.marks import SLACK, ChangeMarks

KEYS = st.sampled_from([f"k{i}" for i in range(6)])
STEPS = st.lists(
    st.one_of(st.tuples(st.just("set"), KEYS), st.tuples(st.just("delete"), KEYS), st.just(("relist", ""))),
    max_size=30,
)


class Cache:
    """An informer's cache as the marks see it: each step sets, deletes or relists."""

    def __init__(self) -> None:
        self.marks = ChangeMarks()
        self.items: dict[str, int] = {}
        self.version = 0

    def apply(self, steps: list[tuple[str, str]]) -> bool:
        """Apply `steps`; whether one was a relist."""
        relisted = False
        for op, key in steps:
            self.version += 1
            if op == "relist":
                self.marks.reset()
                relisted = True
            elif op == "set":
                self.items[key] = self.version
                self.marks.mark(key, len(self.items))
            elif key in self.items:
                del self.items[key]
                self.marks.mark(key, len(self.items))
        return relisted


def differing(a: dict[str, int], b: dict[str, int]) -> set[str]:
    return {k for k in a.keys() | b.keys() if a.get(k) != b.get(k)}


@given(first=STEPS, second=STEPS)
@settings(max_examples=200, deadline=None)
def test_since_names_every_key_changed_after_the_copy(
    first: list[tuple[str, str]], second: list[tuple[str, str]]
) -> None:
    cache = Cache()
    cache.apply(first)
    copy, mark = dict(cache.items), cache.marks.last
    relisted = cache.apply(second)
    changed = cache.marks.since(mark)
    assert (changed is None) == relisted
    if changed is not None:
        assert differing(copy, cache.items) <= changed
        assert cache.marks.since(mark - 1) is None, "what the reader was told is forgotten"


def test_marks_of_deleted_keys_are_bounded_when_nobody_asks() -> None:
    """A standby replica's informer marks every change and nobody asks: it keeps twice the live keys and a slack."""

    def marked() -> ChangeMarks:
        marks = ChangeMarks()
        for i in range(3 * SLACK):
            marks.mark(f"gone-{i}", live=0)
        return marks

    assert marked().since(0) is None
    assert marked().since(3 * SLACK - SLACK - 1) is None
    assert marked().since(3 * SLACK - SLACK) == {f"gone-{i}" for i in range(2 * SLACK, 3 * SLACK)}


@given(rounds=st.lists(st.tuples(STEPS, st.booleans()), max_size=8))
@settings(max_examples=200, deadline=None)
def test_a_copy_kept_by_peek_equals_the_cache_and_leaves_since_its_answers(
    rounds: list[tuple[list[tuple[str, str]], bool]],
) -> None:
    """The scheduler's view keeps one copy of the pods and brings it up to date each pass (`peek`), while the
    snapshot builder asks `since` at its own, older or equal, mark: neither reader may take the other's answers."""
    cache = Cache()
    copy: dict[str, int] = {}
    copy_mark = reader_mark = cache.marks.last
    reader_copy: dict[str, int] = {}
    for steps, reader_asks in rounds:
        relisted = cache.apply(steps)
        changed = cache.marks.peek(copy_mark)
        assert (changed is None) == relisted
        if changed is None:
            copy = dict(cache.items)
        else:
            for key in changed:
                if key in cache.items:
                    copy[key] = cache.items[key]
                else:
                    copy.pop(key, None)
        copy_mark = cache.marks.last
        assert copy == cache.items
        if reader_asks:
            told = cache.marks.since(reader_mark)
            if told is not None:
                assert differing(reader_copy, cache.items) <= told
            reader_copy, reader_mark = dict(cache.items), copy_mark
