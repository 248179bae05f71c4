"""PreemptionToleration at its boundaries: priority threshold, toleration window, prefixes, bad values."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from scheduler.api.meta import ApiModel
from scheduler.framework.status import Code
from scheduler.plugins.preemption_toleration import PreemptionToleration
from tests.builders import make_pod, make_podgroup, make_priority_class
from tests.scheduler.plugins.min_runtime.units import NOW, preemptor, scheduled, snapshot_of, victim

SIGS = "preemption-toleration.scheduling.sigs.k8s.io/"
XK8S = "preemption-toleration.scheduling.x-k8s.io/"
MIN = "minimum-preemptable-priority"
SECONDS = "toleration-seconds"


def batch(**annotations: str) -> ApiModel:
    """Class `batch` (value 1000) with annotations given as `sigs_min=...`, `x_seconds=...`."""
    pc = make_priority_class("batch", 1000)
    for key, value in annotations.items():
        prefix, name = key.split("_", 1)
        pc.annotate((SIGS if prefix == "sigs" else XK8S) + (MIN if name == "min" else SECONDS), value)
    return pc.obj()


def running(since: datetime = NOW - timedelta(minutes=10)) -> ApiModel:
    return scheduled(make_pod("v").priority_class("batch"), since).obj()


def incoming(priority: int) -> ApiModel:
    return make_pod("p").priority(priority).obj()


FOREVER = {"sigs_min": "5000", "sigs_seconds": "-1"}
WINDOW = {"sigs_min": "5000", "sigs_seconds": "600"}

CASES = [
    pytest.param([batch()], running(), incoming(1001), None, None, id="class without annotations tolerates nothing"),
    pytest.param(
        [batch(**FOREVER)],
        running(),
        incoming(4999),
        "default/v tolerates preemption by priority 4999 (PriorityClass batch, minimum-preemptable-priority 5000) "
        "forever",
        None,
        id="preemptor one below minimum-preemptable-priority is tolerated",
    ),
    pytest.param(
        [batch(**FOREVER)], running(), incoming(5000), None, None, id="preemptor exactly at the minimum is not"
    ),
    pytest.param(
        [batch(sigs_seconds="-1")],
        running(),
        incoming(1000),
        "minimum-preemptable-priority 1001) forever",
        None,
        id="minimum defaults to the class value plus one: equal priority tolerated",
    ),
    pytest.param(
        [batch(sigs_seconds="-1")], running(), incoming(1001), None, None, id="default minimum: value plus one preempts"
    ),
    pytest.param(
        [batch(**WINDOW)],
        running(NOW - timedelta(seconds=600)),
        incoming(2000),
        "until 12:00:01Z",
        NOW + timedelta(seconds=1),
        id="exactly at scheduled-time plus toleration-seconds still tolerated",
    ),
    pytest.param(
        [batch(**WINDOW)],
        running(NOW - timedelta(seconds=601)),
        incoming(2000),
        None,
        None,
        id="one second after the window ends is not tolerated",
    ),
    pytest.param(
        [batch(**WINDOW)],
        running(NOW - timedelta(seconds=60)),
        incoming(2000),
        "(PriorityClass batch, minimum-preemptable-priority 5000) until 12:09:01Z",
        NOW + timedelta(seconds=541),
        id="inside the window: until the first second after it",
    ),
    pytest.param(
        [batch(**WINDOW)],
        make_pod("v").priority_class("batch").obj(),
        incoming(2000),
        "until it is scheduled",
        None,
        id="no PodScheduled condition tolerates",
    ),
    pytest.param(
        [batch(sigs_min="5000")],
        running(NOW),
        incoming(2000),
        "until 12:00:01Z",
        NOW + timedelta(seconds=1),
        id="toleration-seconds 0 tolerates only at the scheduling instant",
    ),
    pytest.param(
        [batch(sigs_min="5000")],
        running(NOW - timedelta(seconds=1)),
        incoming(2000),
        None,
        None,
        id="toleration-seconds 0: a second later nothing is tolerated",
    ),
    pytest.param(
        [batch(sigs_min="5000", sigs_seconds="-3600")],
        running(NOW - timedelta(days=30)),
        incoming(2000),
        "forever",
        None,
        id="any negative toleration-seconds tolerates forever",
    ),
    pytest.param(
        [batch(sigs_min="5000", sigs_seconds=str(2**63 - 1))],
        running(),
        incoming(2000),
        "forever",
        None,
        id="toleration-seconds beyond any date tolerates forever",
    ),
    pytest.param(
        [batch(x_min="5000", x_seconds="-1")],
        running(),
        incoming(2000),
        "forever",
        None,
        id="x-k8s.io prefix is read",
    ),
    pytest.param(
        [batch(sigs_min="1500", x_min="5000", x_seconds="-1")],
        running(),
        incoming(2000),
        None,
        None,
        id="sigs.k8s.io prefix wins over x-k8s.io",
    ),
    pytest.param(
        [batch(sigs_min="five thousand", sigs_seconds="-1")],
        running(),
        incoming(2000),
        None,
        None,
        id="malformed minimum voids the policy",
    ),
    pytest.param(
        [batch(sigs_min="5000", sigs_seconds="1.5")],
        running(),
        incoming(2000),
        None,
        None,
        id="malformed toleration-seconds voids the policy",
    ),
    pytest.param(
        [batch(sigs_min="2147483648", sigs_seconds="-1")],
        running(),
        incoming(2000),
        None,
        None,
        id="minimum out of int32 range voids the policy",
    ),
    pytest.param(
        [batch(sigs_min=" 5000 ", sigs_seconds=" -1")],
        running(),
        incoming(2000),
        "forever",
        None,
        id="surrounding spaces are accepted",
    ),
    pytest.param(
        [batch()],
        running(),
        make_pod("p").priority(1_000_000).preempt_never().obj(),
        "default/v is tolerated: preemptor default/p has preemptionPolicy Never",
        None,
        id="preemptionPolicy Never is tolerated by everyone",
    ),
    pytest.param([], running(), incoming(2000), None, None, id="missing PriorityClass leaves the victim unprotected"),
    pytest.param(
        [make_priority_class("fallback", 10).global_default().annotate(SIGS + SECONDS, "-1").obj()],
        scheduled(make_pod("v"), NOW).obj(),
        incoming(10),
        "by priority 10 (PriorityClass fallback, minimum-preemptable-priority 11) forever",
        None,
        id="victim without a class is judged by the globalDefault class",
    ),
]


@pytest.mark.parametrize(("classes", "victim_pod", "preemptor_pod", "want_message", "want_until"), CASES)
def test_toleration(
    classes: list[ApiModel],
    victim_pod: ApiModel,
    preemptor_pod: ApiModel,
    want_message: str | None,
    want_until: datetime | None,
) -> None:
    snapshot = snapshot_of(*classes, victim_pod, preemptor_pod)
    status = PreemptionToleration().filter_victim(
        preemptor(snapshot, "default/p"), victim(snapshot, "default/v"), snapshot
    )
    if want_message is None:
        assert status.code is Code.SUCCESS, status.message()
        return
    assert status.code is Code.UNSCHEDULABLE
    assert want_message in status.message()
    assert status.until == want_until


GROUP_CASES = [
    pytest.param("tolerant", "plain", True, id="member judged by its PodGroup's class"),
    pytest.param("plain", "tolerant", False, id="member's own tolerant class is ignored"),
]


@pytest.mark.parametrize(("group_class", "pod_class", "want_tolerated"), GROUP_CASES)
def test_podgroup_member_uses_group_class(group_class: str, pod_class: str, want_tolerated: bool) -> None:
    snapshot = snapshot_of(
        make_priority_class("tolerant", 100).annotate(SIGS + MIN, "5000").annotate(SIGS + SECONDS, "-1").obj(),
        make_priority_class("plain", 100).obj(),
        make_podgroup("train").gang(2).priority_class(group_class).priority(100).obj(),
        scheduled(make_pod("w0").group("train").priority_class(pod_class), NOW).obj(),
        scheduled(make_pod("w1").group("train").priority_class(pod_class), NOW).obj(),
        incoming(2000),
    )
    status = PreemptionToleration().filter_victim(
        preemptor(snapshot, "default/p"), victim(snapshot, "default/w0"), snapshot
    )
    assert (status.code is Code.UNSCHEDULABLE) is want_tolerated, status.message()


def test_podgroup_unit_tolerates_while_any_member_does() -> None:
    """A `PodGroup`-mode unit goes as a whole, so its latest-scheduled member sets the window."""
    snapshot = snapshot_of(
        make_priority_class("batch", 100).annotate(SIGS + MIN, "5000").annotate(SIGS + SECONDS, "600").obj(),
        make_podgroup("train").gang(2).disruption_mode("PodGroup").priority_class("batch").priority(100).obj(),
        scheduled(make_pod("w0").group("train"), NOW - timedelta(hours=1)).obj(),
        scheduled(make_pod("w1").group("train"), NOW - timedelta(minutes=5)).obj(),
        incoming(2000),
    )
    status = PreemptionToleration().filter_victim(
        preemptor(snapshot, "default/p"), victim(snapshot, "default/train"), snapshot
    )
    assert status.code is Code.UNSCHEDULABLE
    assert status.until == NOW + timedelta(minutes=5, seconds=1)
    assert status.message().startswith("default/train tolerates preemption by priority 2000")


def test_bound_pod_without_condition_counts_from_start_time() -> None:
    snapshot = snapshot_of(
        batch(**WINDOW),
        make_pod("v").priority_class("batch").on("n1", started=NOW - timedelta(seconds=700)).obj(),
        incoming(2000),
    )
    status = PreemptionToleration().filter_victim(
        preemptor(snapshot, "default/p"), victim(snapshot, "default/v"), snapshot
    )
    assert status.code is Code.SUCCESS


def test_warnings_name_the_class_and_the_annotation() -> None:
    """Bad annotations and missing classes are listed for the runner to report as Warning Events."""
    snapshot = snapshot_of(
        make_priority_class("broken", 10).annotate(XK8S + SECONDS, "soon").annotate(SIGS + MIN, "1e3").obj(),
        make_priority_class("fine", 10).annotate(SIGS + SECONDS, "60").obj(),
        make_priority_class("shadowed", 10).annotate(SIGS + MIN, "500").annotate(XK8S + MIN, "lots").obj(),
        scheduled(make_pod("orphan").priority_class("gone"), NOW).obj(),
    )
    warnings = PreemptionToleration().warnings(snapshot)
    assert [(w.regarding.metadata.name, w.reason) for w in warnings] == [  # type: ignore[union-attr]
        ("broken", "InvalidPreemptionToleration"),
        ("broken", "InvalidPreemptionToleration"),
        ("shadowed", "InvalidPreemptionToleration"),
        ("orphan", "PriorityClassNotFound"),
    ]
    void = "treated as no toleration: pods of this class may be preempted by any higher priority"
    assert warnings[0].note == (
        f"metadata.annotations[{SIGS}{MIN}]: Invalid value: must be an int32 integer, got '1e3'; {void}"
    )
    assert warnings[1].note == (
        f"metadata.annotations[{XK8S}{SECONDS}]: Invalid value: must be an int64 integer, got 'soon'; {void}"
    )
    assert warnings[2].note == (
        f"metadata.annotations[{XK8S}{MIN}]: Invalid value: must be an int32 integer, got 'lots'; "
        f"ignored: {SIGS}{MIN} takes precedence"
    )
    assert warnings[3].note == (
        "spec.priorityClassName: Not found: 'gone': no PriorityClass with name gone was found; "
        "default/orphan is treated as having no preemption toleration"
    )
