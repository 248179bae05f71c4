"""MinRuntime as a victim filter: start times, the protection window, units judged whole, warnings."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from scheduler.api.meta import ApiModel
from scheduler.framework.status import Code
from scheduler.plugins.min_runtime import MinRuntime
from tests.builders import make_pod, make_podgroup, make_queue
from tests.scheduler.plugins.min_runtime.units import NOW, last_start, preemptor, scheduled, snapshot_of, victim

MINUTE = timedelta(minutes=1)


def queues() -> list[ApiModel]:
    """root > {research(reclaim 10m, preempt 2m) > {vision, nlp}, prod}."""
    return [
        make_queue("root").obj(),
        make_queue("research").parent("root").reclaim_min_runtime("10m").preempt_min_runtime("2m").obj(),
        make_queue("vision").parent("research").obj(),
        make_queue("nlp").parent("research").obj(),
        make_queue("prod").parent("root").obj(),
    ]


def lone(name: str, queue: str | None, since: datetime | None = None) -> ApiModel:
    pod = make_pod(name).ns("team-a").priority(10)
    if queue:
        pod.queue(queue)
    return (scheduled(pod, since) if since else pod).obj()


def incoming(queue: str | None) -> ApiModel:
    pod = make_pod("p").ns("team-a").priority(1000)
    return (pod.queue(queue) if queue else pod).obj()


def gang(mode: str, since: datetime | str | None, members: int = 2, min_count: int = 2) -> list[ApiModel]:
    group = make_podgroup("train-7").ns("team-a").gang(min_count).priority(10).disruption_mode(mode).queue("vision")
    if since is not None:
        last_start(group, since)
    pods = [scheduled(make_pod(f"w{i}").ns("team-a").group("train-7"), NOW - 30 * MINUTE).obj() for i in range(members)]
    return [group.obj(), *pods]


CASES = [
    pytest.param(
        [lone("v", "vision", NOW - 5 * MINUTE)],
        incoming("nlp"),
        "team-a/v",
        "team-a/v is protected by reclaim-min-runtime 10m (queue research) until 12:05:00Z (queues vision > "
        "research > root, the preemptor's nlp > research > root; lowest common ancestor research)",
        NOW + 5 * MINUTE,
        id="reclaim across leaves inside the window: the paths and their lowest common ancestor",
    ),
    pytest.param(
        [lone("v", "vision", NOW - 10 * MINUTE)],
        incoming("nlp"),
        "team-a/v",
        None,
        None,
        id="exactly at start plus min-runtime the protection is over",
    ),
    pytest.param(
        [lone("v", "vision", NOW - 10 * MINUTE + timedelta(seconds=1))],
        incoming("nlp"),
        "team-a/v",
        "until 12:00:01Z",
        NOW + timedelta(seconds=1),
        id="one second before the end still protected",
    ),
    pytest.param(
        [lone("v", "vision", NOW - MINUTE)],
        incoming("vision"),
        "team-a/v",
        "team-a/v is protected by preempt-min-runtime 2m (queue research) until 12:01:00Z "
        "(queues vision > research > root, the preemptor's too)",
        NOW + MINUTE,
        id="same leaf queue is a preempt",
    ),
    pytest.param(
        [lone("v", "vision", NOW - 3 * MINUTE)], incoming("vision"), "team-a/v", None, None, id="preempt window over"
    ),
    pytest.param([lone("v", "vision")], incoming("nlp"), "team-a/v", None, None, id="never scheduled: unprotected"),
    pytest.param(
        [lone("v", None, NOW - MINUTE)],
        incoming(None),
        "team-a/v",
        "team-a/v is protected by preempt-min-runtime 1h (node-pool default) until 12:59:00Z "
        "(neither unit has a queue)",
        NOW + 59 * MINUTE,
        id="pods without queues use the node-pool preempt default",
    ),
    pytest.param(
        [lone("v", "vision", NOW - MINUTE)],
        incoming("prod"),
        "team-a/v",
        "team-a/v is protected by reclaim-min-runtime 10m (queue research) until 12:09:00Z (queues vision > "
        "research > root, the preemptor's prod > root; lowest common ancestor root)",
        NOW + 9 * MINUTE,
        id="prod reclaims from vision: step down to research",
    ),
    pytest.param(
        gang("PodGroup", NOW - 4 * MINUTE),
        incoming("nlp"),
        "team-a/train-7",
        "team-a/train-7 is protected by reclaim-min-runtime 10m (queue research) until 12:06:00Z",
        NOW + 6 * MINUTE,
        id="PodGroup-mode unit protected as a whole from its last-start-timestamp",
    ),
    pytest.param(
        gang("PodGroup", NOW - 20 * MINUTE),
        incoming("nlp"),
        "team-a/train-7",
        None,
        None,
        id="group start time decides, not its pods' scheduled times",
    ),
    pytest.param(
        gang("PodGroup", None),
        incoming("nlp"),
        "team-a/train-7",
        None,
        None,
        id="group without last-start-timestamp is unprotected",
    ),
    pytest.param(
        gang("PodGroup", "yesterday"),
        incoming("nlp"),
        "team-a/train-7",
        None,
        None,
        id="unparsable last-start-timestamp is unprotected",
    ),
    pytest.param(
        gang("Pod", NOW - 4 * MINUTE),
        incoming("nlp"),
        "team-a/w0",
        "team-a/w0 is protected by reclaim-min-runtime 10m (queue research) until 12:06:00Z",
        NOW + 6 * MINUTE,
        id="member of a Pod-mode gang at minCount is protected by its group's start",
    ),
    pytest.param(
        gang("Pod", NOW - 4 * MINUTE, members=3),
        incoming("nlp"),
        "team-a/w0",
        None,
        None,
        id="member of an elastic group passes: the validator guards minCount",
    ),
    pytest.param(
        gang("PodGroup", "2026-01-01T13:56:00+02:00"),
        incoming("nlp"),
        "team-a/train-7",
        "until 12:06:00Z",
        NOW + 6 * MINUTE,
        id="timestamp with an offset is reported in UTC",
    ),
    pytest.param(
        gang("Pod", "2026-01-01T11:56:00"),
        incoming("nlp"),
        "team-a/w0",
        "until 12:06:00Z",
        NOW + 6 * MINUTE,
        id="timestamp without zone is read as UTC",
    ),
]


@pytest.mark.parametrize(("objects", "preemptor_pod", "victim_key", "want_message", "want_until"), CASES)
def test_min_runtime(
    objects: list[ApiModel],
    preemptor_pod: ApiModel,
    victim_key: str,
    want_message: str | None,
    want_until: datetime | None,
) -> None:
    snapshot = snapshot_of(*queues(), *objects, preemptor_pod, minRuntime={"preempt": "1h", "reclaim": "0s"})
    status = MinRuntime().filter_victim(preemptor(snapshot, "team-a/p"), victim(snapshot, victim_key), snapshot)
    if want_message is None:
        assert status.code is Code.SUCCESS, status.message()
        return
    assert status.code is Code.UNSCHEDULABLE
    assert want_message in status.message()
    assert status.until == want_until


def test_group_preemptor_uses_its_queue_name() -> None:
    snapshot = snapshot_of(
        *queues(),
        lone("v", "vision", NOW - MINUTE),
        make_podgroup("serve").ns("team-a").gang(1).priority(1000).queue("vision").obj(),
        make_pod("s0").ns("team-a").group("serve").queue("prod").obj(),
    )
    status = MinRuntime().filter_victim(preemptor(snapshot, "team-a/serve"), victim(snapshot, "team-a/v"), snapshot)
    assert "preempt-min-runtime 2m (queue research)" in status.message()


def test_long_protection_prints_the_date() -> None:
    snapshot = snapshot_of(lone("v", None, NOW), incoming(None), minRuntime={"preempt": "2d"})
    status = MinRuntime().filter_victim(preemptor(snapshot, "team-a/p"), victim(snapshot, "team-a/v"), snapshot)
    assert (
        status.message()
        == "team-a/v is protected by preempt-min-runtime 48h (node-pool default) until 2026-01-03T12:00:00Z "
        "(neither unit has a queue)"
    )


def test_min_runtime_beyond_the_calendar_protects_without_overflow() -> None:
    snapshot = snapshot_of(make_queue("a").reclaim_min_runtime("500000w").obj(), lone("v", "a", NOW), incoming("b"))
    status = MinRuntime().filter_victim(preemptor(snapshot, "team-a/p"), victim(snapshot, "team-a/v"), snapshot)
    assert status.code is Code.UNSCHEDULABLE
    assert status.message().endswith(
        "until 9999-12-31T23:59:59Z (queues a, the preemptor's b; lowest common ancestor none (different trees))"
    )


def test_warnings_name_queue_field_and_rule() -> None:
    snapshot = snapshot_of(
        make_queue("bad").reclaim_min_runtime("-5m").obj(),
        make_queue("huge").preempt_min_runtime("99999999999999h").obj(),
        make_queue("lost").parent("nowhere").preempt_min_runtime("soon").obj(),
        make_queue("a").parent("b").obj(),
        make_queue("b").parent("a").obj(),
        lone("v", "ghost", NOW),
    )
    notes = [(w.regarding.metadata.name, w.reason, w.note) for w in MinRuntime().warnings(snapshot)]  # type: ignore[union-attr]
    assert notes == [
        ("a", "QueueCycle", "spec.parentQueue: Invalid value: 'b': queue a is its own ancestor"),
        ("b", "QueueCycle", "spec.parentQueue: Invalid value: 'a': queue b is its own ancestor"),
        (
            "bad",
            "InvalidMinRuntime",
            "spec.reclaimMinRuntime: Invalid value: '-5m': '-5m' is negative: must be 0 or more; treated as 0",
        ),
        (
            "huge",
            "InvalidMinRuntime",
            "spec.preemptMinRuntime: Invalid value: '99999999999999h': '99999999999999h' is out of range; treated as 0",
        ),
        (
            "lost",
            "InvalidMinRuntime",
            "spec.preemptMinRuntime: Invalid value: 'soon': 'soon' is not a duration: expected e.g. 90s, 10m, "
            "1h30m, 1.5h, 2d; treated as 0",
        ),
        ("lost", "QueueNotFound", "spec.parentQueue: Not found: 'nowhere'; the walk stops at lost"),
        ("v", "QueueNotFound", "queue ghost not found: team-a/v gets the node-pool min-runtime defaults"),
    ]


def test_one_plugin_follows_queue_changes_between_snapshots() -> None:
    """The plugin outlives snapshots: a changed queue must change the answer (its memo is per snapshot)."""
    plugin = MinRuntime()
    answers = []
    for value in ("10m", "1m"):
        snapshot = snapshot_of(
            make_queue("a").reclaim_min_runtime(value).obj(), lone("v", "a", NOW - 5 * MINUTE), incoming("b")
        )
        answers.append(plugin.filter_victim(preemptor(snapshot, "team-a/p"), victim(snapshot, "team-a/v"), snapshot))
    assert [a.code for a in answers] == [Code.UNSCHEDULABLE, Code.SUCCESS]
