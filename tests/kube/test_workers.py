"""A started pool has every worker thread running before its first task, and still runs tasks."""

from __future__ import annotations

import threading

from scheduler.cluster.kube.workers import started_pool


def test_every_worker_runs_before_the_first_task_and_tasks_still_run() -> None:
    pool = started_pool(5, "warm")
    try:
        assert sum(t.name.startswith("warm_") for t in threading.enumerate()) == 5
        assert sorted(pool.map(lambda n: n * n, range(10))) == [n * n for n in range(10)]
        assert sum(t.name.startswith("warm_") for t in threading.enumerate()) == 5
    finally:
        pool.shutdown(wait=True)
