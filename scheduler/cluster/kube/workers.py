"""Worker pools whose threads all exist before the first burst of writes.

`ThreadPoolExecutor` starts a thread on each submit that finds no idle worker, and `Thread.start`
waits until the new thread runs. A gang's first preemption submits hundreds of writes from the
scheduling loop: starting 32 threads there, one after another, took the pass 0.12 s while the
victims' writes waited (issue 12). So the threads are started with the pool.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor


def started_pool(workers: int, name: str) -> ThreadPoolExecutor:
    """A pool of `workers` threads, every one running on return.

    Each task parks its worker at a barrier, so no worker is idle when the next task is submitted
    and each submit starts a thread; the barrier opens once all of them (and the caller) are there.
    """
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=name)
    everyone = threading.Barrier(workers + 1)
    for _ in range(workers):
        pool.submit(everyone.wait)
    everyone.wait()
    return pool
