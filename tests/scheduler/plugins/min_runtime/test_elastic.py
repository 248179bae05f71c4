"""ElasticMinRuntime: a plan may shrink a protected elastic group to minCount, never below."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from scheduler.api.meta import ApiModel
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import Code
from scheduler.plugins.min_runtime import ElasticMinRuntime
from tests.builders import make_pod, make_podgroup
from tests.scheduler.plugins.min_runtime.units import NOW, last_start, preemptor, scheduled, snapshot_of, victim

MINUTE = timedelta(minutes=1)


def cluster(
    mode: str = "Pod",
    started: datetime = NOW - 4 * MINUTE,
    gang: bool = True,
    terminating: int = 0,
    other_started: datetime = NOW - 4 * MINUTE,
) -> Snapshot:
    """`elastic` runs 5 members (minCount 3) and `other` 4 (minCount 2), both started `started` ago."""
    objects: list[ApiModel] = []
    for name, size, min_count, since in (("elastic", 5, 3, started), ("other", 4, 2, other_started)):
        group = make_podgroup(name).ns("ml").priority(10).disruption_mode(mode)
        group = group.gang(min_count) if gang else group.basic()
        objects.append(last_start(group, since).obj())
        for i in range(size):
            pod = scheduled(make_pod(f"{name}-{i}").ns("ml").group(name), since)
            if name == "elastic" and i < terminating:
                pod.terminating(NOW - MINUTE)
            objects.append(pod.obj())
    objects.append(make_pod("p").ns("ml").priority(1000).obj())
    return snapshot_of(*objects, minRuntime={"preempt": "10m"})


def plan(snapshot: Snapshot, *pods: str) -> Code:
    status = ElasticMinRuntime().validate(
        preemptor(snapshot, "ml/p"), [victim(snapshot, f"ml/{p}") for p in pods], snapshot
    )
    return status.code


CASES = [
    pytest.param(cluster(), ("elastic-0", "elastic-1"), Code.SUCCESS, id="taking members above minCount is allowed"),
    pytest.param(
        cluster(), ("elastic-0", "elastic-1", "elastic-2"), Code.UNSCHEDULABLE, id="going below minCount is rejected"
    ),
    pytest.param(
        cluster(),
        ("elastic-0", "elastic-1", "other-0", "other-1"),
        Code.SUCCESS,
        id="each group keeps its own minCount",
    ),
    pytest.param(
        cluster(started=NOW - 10 * MINUTE),
        ("elastic-0", "elastic-1", "elastic-2", "elastic-3", "elastic-4"),
        Code.SUCCESS,
        id="after the min-runtime the whole group may go",
    ),
    pytest.param(
        cluster(terminating=1),
        ("elastic-1", "elastic-2"),
        Code.UNSCHEDULABLE,
        id="members already terminating no longer count as running",
    ),
    pytest.param(
        cluster(gang=False),
        ("elastic-0", "elastic-1", "elastic-2", "elastic-3"),
        Code.SUCCESS,
        id="a basic group has no minCount to keep",
    ),
    pytest.param(cluster(), ("elastic-0", "elastic-0", "elastic-1"), Code.SUCCESS, id="a pod listed twice counts once"),
]


@pytest.mark.parametrize(("snapshot", "victims", "want_code"), CASES)
def test_elastic_plans(snapshot: Snapshot, victims: tuple[str, ...], want_code: Code) -> None:
    assert plan(snapshot, *victims) is want_code


def test_rejection_names_group_protection_and_count() -> None:
    snapshot = cluster(other_started=NOW - 8 * MINUTE)
    victims = [
        victim(snapshot, f"ml/{p}") for p in ("elastic-0", "elastic-1", "elastic-2", "other-0", "other-1", "other-2")
    ]
    status = ElasticMinRuntime().validate(preemptor(snapshot, "ml/p"), victims, snapshot)
    assert status.reasons == (
        "ml/elastic is protected by preempt-min-runtime 10m (node-pool default) until 12:06:00Z (neither unit has "
        "a queue): preempting 3 of "
        "its 5 running members would leave 2, below minCount 3",
        "ml/other is protected by preempt-min-runtime 10m (node-pool default) until 12:02:00Z (neither unit has "
        "a queue): preempting 3 of "
        "its 4 running members would leave 1, below minCount 2",
    )
    assert status.until == NOW + 2 * MINUTE


def test_podgroup_mode_is_left_to_the_filter() -> None:
    """A `PodGroup`-mode unit goes whole or not at all: the MinRuntime filter judges it, not this validator."""
    snapshot = cluster(mode="PodGroup")
    assert (
        ElasticMinRuntime().validate(preemptor(snapshot, "ml/p"), [victim(snapshot, "ml/elastic")], snapshot).is_success
    )
