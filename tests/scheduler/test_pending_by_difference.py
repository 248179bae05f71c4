"""The pending pods kept by difference (issue 23): a pass that looks only at the units that changed does what a
pass that looks at every pending pod again does.

Two identical in-memory clusters get the same changes; one scheduler keeps its pending pods between passes, the
other forgets them before each pass (a fresh `PendingPods`, which looks at every unit, and so makes the queue
look at every unit too). They must bind, nominate, write and report the same: the pods' and groups' conditions,
the pods by state, the pools, each unit's reason, the retries and the retries avoided.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.api.config import DEFAULT_GATE_NAME
from scheduler.framework.pending import PendingPods
from tests.builders import make_pod, make_podgroup
from tests.scheduler.test_queueing_hints import CPU, MAX_BACKOFF, OPS, Op, Side

FOREIGN_GATE = "example.com/hold"
WAITS = (1, 3, MAX_BACKOFF.seconds)
"""The seconds between the passes after each change: within a backoff (the kept side must find the units whose
old-rule backoff ended, which the full look finds by looking at all), and past the longest."""

MORE_OPS: st.SearchStrategy[Op] = st.one_of(
    OPS,
    st.tuples(st.just("gated"), CPU, st.booleans(), st.integers(0, 9)),
    st.tuples(st.just("ungate"), st.integers(0, 99)),
    st.tuples(st.just("foreign member"), st.integers(0, 9), CPU),
    st.tuples(st.just("foreign bind"), st.integers(0, 9)),
    st.tuples(st.just("early member"), CPU),
    st.tuples(st.just("late group"), st.integers(1, 3)),
    st.tuples(st.just("recreate"), st.integers(0, 99), st.integers(0, 9), CPU),
    st.tuples(st.just("namesake"), CPU, st.booleans()),
)


class Remembering(Side):
    """A scheduler that keeps its pending pods between passes, or (`forgets`) looks at every one each pass."""

    def __init__(self, forgets: bool) -> None:
        super().__init__(eager=False)
        self.forgets = forgets

    def apply(self, op: Op) -> None:
        cluster, kind = self.cluster, op[0]
        if kind == "gated":  # a pod held by our gate or another's; a member of a gang when one exists
            _, cpu, ours, which = op
            self.made += 1
            pod = make_pod(f"x{self.made}").req(cpu=str(cpu)).gate(DEFAULT_GATE_NAME if ours else FOREIGN_GATE)
            groups = sorted(cluster.objects().pod_groups)
            if groups and which % 2:
                pod = pod.group(groups[which % len(groups)].split("/")[1])
            cluster.create(pod.obj())
        elif kind == "ungate":
            gated = sorted(
                key
                for key, p in cluster.objects().pods.items()
                if any(g.name == FOREIGN_GATE for g in p.spec.scheduling_gates)
            )
            if gated:
                cluster.remove_scheduling_gate(cluster.objects().pods[gated[op[1] % len(gated)]], FOREIGN_GATE)
        elif kind == "foreign member":  # another scheduler's pod of one of our groups
            groups = sorted(cluster.objects().pod_groups)
            if groups:
                self.made += 1
                name = groups[op[1] % len(groups)].split("/")[1]
                cluster.create(
                    make_pod(f"{name}-f{self.made}").req(cpu=str(op[2])).group(name).scheduler("another").obj()
                )
        elif kind == "foreign bind":  # that scheduler binds it: the group's tale changes, its member count does not
            pods = cluster.objects().pods
            foreign = sorted(
                key for key, p in pods.items() if p.spec.scheduler_name == "another" and not p.spec.node_name
            )
            if foreign:
                cluster.bind(pods[foreign[0]], sorted(cluster.objects().nodes)[op[1] % len(cluster.objects().nodes)])
        elif kind == "early member":  # a member whose PodGroup does not exist yet
            self.made += 1
            cluster.create(make_pod(f"late-{self.made}").req(cpu=str(op[1])).group("late").obj())
        elif kind == "late group":
            if "default/late" not in cluster.objects().pod_groups:
                cluster.create(make_podgroup("late").gang(op[1]).obj())
        elif kind == "recreate":  # a pending pod deleted and made again under its name in another unit
            objects = cluster.objects()
            pending = sorted(key for key, p in objects.pods.items() if not p.spec.node_name)
            if pending:
                old = objects.pods[pending[op[1] % len(pending)]]
                units = [None, *sorted({g.split("/")[1] for g in objects.pod_groups} | {"late"})]
                now = units[op[2] % len(units)]
                if now == old.pod_group_name:
                    now = units[(op[2] + 1) % len(units)]
                cluster.delete_pod(old, 0)
                pod = make_pod(old.metadata.name).req(cpu=str(op[3]))
                cluster.create((pod.group(now) if now else pod).obj())
        elif kind == "namesake":  # a lone pod named as a PodGroup (one that exists, or `late` before it does)
            groups = sorted({g.split("/")[1] for g in cluster.objects().pod_groups} | {"late"})
            name = groups[0] if op[2] else "late"
            if f"default/{name}" not in cluster.objects().pods:
                cluster.create(make_pod(name).req(cpu=str(op[1])).obj())
        else:
            super().apply(op)

    def step(self, wait: timedelta = MAX_BACKOFF) -> None:
        if self.forgets:
            self.scheduler.waiting = PendingPods(self.scheduler.is_ours, self.scheduler.config.gate_name)
        super().step(wait)

    def seen(self) -> dict[str, Any]:
        objects = self.cluster.objects()
        report = self.report
        return {
            "pods": {
                key: (
                    p.spec.node_name,
                    p.status.nominated_node_name,
                    [(c.type, c.reason, c.message) for c in p.status.conditions],
                )
                for key, p in objects.pods.items()
            },
            "groups": {
                key: [(c.type, c.reason, c.message) for c in g.status.conditions]
                for key, g in objects.pod_groups.items()
            },
            "by state": dict(report.pods),
            "pools": report.pools,
            "reasons": report.reasons,
            "units": report.units,
            "retries": dict(report.retries),
            "avoided": report.retries_avoided,
            "tried": report.units_tried,
            "repeats": dict(report.repeats),
        }


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(MORE_OPS, min_size=2, max_size=12))
def test_a_pass_that_looks_only_at_what_changed_does_what_a_full_look_does(ops: list[Op]) -> None:
    kept, full = Remembering(forgets=False), Remembering(forgets=True)
    for op in ops:
        for side in (kept, full):
            side.apply(op)
        for seconds in WAITS:
            kept.step(timedelta(seconds=seconds))
            full.step(timedelta(seconds=seconds))
            assert kept.seen() == full.seen(), f"after {op}, then {seconds} s"


def test_the_old_rules_count_comes_due_between_passes_a_second_apart() -> None:
    """A change each second beside units that never fit: the kept side finds each unit whose old-rule backoff
    (1, 2, 4, 8, 10 s) ended at the pass the full look finds it, so both count the same retries avoided."""
    kept, full = Remembering(forgets=False), Remembering(forgets=True)
    for side in (kept, full):
        for _ in range(3):
            side.apply(("pending", 12, 0, False))
        side.step()
    avoided = 0
    for second in range(30):
        for side in (kept, full):
            side.apply(("running", 0, 1, 100))
            side.step(timedelta(seconds=1))
        assert kept.seen() == full.seen(), f"at second {second}"
        avoided += kept.report.retries_avoided
    assert avoided == 3 * 5  # each unit counted at 1, 3, 7, 15 and 25 s
