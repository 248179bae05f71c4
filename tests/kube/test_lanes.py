"""A lane's workers exist before its first task; stopping drops what is queued, runs what is owed, and waits for what
runs, until a deadline."""

from __future__ import annotations

import threading
import time

import pytest

from scheduler.cluster.kube.lanes import Lane, LaneFull, LaneStopped


def test_every_worker_runs_before_the_first_task_and_tasks_still_run() -> None:
    lane = Lane("warm", 5)
    try:
        assert sum(t.name.startswith("warm-") for t in threading.enumerate()) == 5
        assert [lane.submit(lambda n=n: n * n).result(timeout=5) for n in range(10)] == [n * n for n in range(10)]
    finally:
        lane.stop()


def test_stopping_drops_what_is_queued_runs_what_is_owed_and_waits_for_what_runs() -> None:
    lane = Lane("one", 1)
    started, release = threading.Event(), threading.Event()
    ran: list[str] = []

    def on_the_wire() -> None:
        started.set()
        release.wait(5)
        ran.append("running")

    running = lane.submit(on_the_wire)
    assert started.wait(5)
    queued = [lane.submit(ran.append, f"queued-{i}") for i in range(3)]
    owed = lane.submit(ran.append, "owed", owed=True)
    assert lane.stop() == 3
    assert all(f.cancelled() for f in queued)
    with pytest.raises(LaneStopped):
        lane.submit(ran.append, "late")
    assert lane.wait(time.monotonic() + 0.2) == 2, "the running task and the owed one, at the deadline"
    release.set()
    assert lane.wait(time.monotonic() + 5) == 0
    assert running.result() is None and owed.done()
    assert ran == ["running", "owed"]


def test_a_lane_at_its_limit_refuses_more() -> None:
    lane = Lane("bounded", 1, limit=2)
    started, release = threading.Event(), threading.Event()
    lane.submit(lambda: started.set() or release.wait(5))
    assert started.wait(5), "taken by the worker: no longer queued"
    lane.submit(release.wait, 5)
    lane.submit(release.wait, 5)
    with pytest.raises(LaneFull):
        lane.submit(release.wait, 5)
    release.set()
    lane.stop()
