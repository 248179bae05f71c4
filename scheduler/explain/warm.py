"""What explanations keep from one to the next when they are asked of the same cluster again and again (the served
API, `scheduler/serve`), so that an answer costs what changed since the last one plus its own dry run.

From nothing, an explanation at 5,000 nodes and 50,000 pods is 1.2 s of CPU, nearly all of it reading every pod:
filing them by unit (`pod_index.py`) and giving each a PodInfo, the node table and the preemption's running-pod
columns for the dry run (`dry_run.DryRunCache`). Kept, they are brought up to the objects of each answer by
identity before they are read: the informers replace an object when it changes, so a pod that is the object last
seen is as it was, and only the others are read again. They derive everything from those objects, so an answer
computed with them is the one computed from nothing (`tests/serve/test_warm_answers.py` compares both after random
changes). They are the explanations' own, never the scheduling loop's cache or plugins, and the dry run writes only
its own copy of the tables: nothing of an explanation reaches the cluster or the live scheduler.

Between answers they can be brought up to the cluster without one (`refresh`): the same bring-up by identity, for
what changed since, and nothing computed with it. The server does so when they are idle, so that they hold no pod
the informers replaced long ago and the next answer, minutes later, finds them near the cluster.

Used by one answer (or refresh) at a time: the caller holds a lock (`serve/answers.py`). A caller without one makes a
`Warm` for the answer and drops it (`kubectl phalanx` computing the answer itself).
"""

from __future__ import annotations

from datetime import datetime

from scheduler.api.config import SchedulerConfiguration
from scheduler.explain.dry_run import DryRunCache
from scheduler.explain.pod_index import PodIndex
from scheduler.framework.cluster import ClusterObjects


class Warm:
    def __init__(self, config: SchedulerConfiguration) -> None:
        self.config = config
        self.dry_runs = DryRunCache.of(config)
        self._pods = PodIndex(config)

    def pods(self, objects: ClusterObjects, config: SchedulerConfiguration) -> PodIndex:
        """The pods of `objects` filed, for an answer computed with `config` (the one this was made with)."""
        if config is not self.config:
            raise ValueError("kept caches of another scheduler configuration")
        self._pods.refresh(objects.pods)
        return self._pods

    def refresh(self, objects: ClusterObjects, now: datetime) -> None:
        """Bring every cache up to `objects` at `now` as an answer's first reads would (the pods filed, the dry run's
        first snapshot and its plugins' caches), without the answer: what it costs is what changed since they were
        last brought up. They then hold the objects of `objects` and what derives from them, and no older one
        (the preemption's running-pod columns may lag a little, as they do from pass to pass:
        `WorkloadPreemption.snapshot_ready`)."""
        self._pods.refresh(objects.pods)
        self.dry_runs.refresh(objects, self.config, now)
