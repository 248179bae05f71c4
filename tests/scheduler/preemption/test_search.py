"""The victim search on plain data: one table, each row a KEP-5710 behaviour."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

import pytest

from scheduler.framework.status import Code, Status
from scheduler.preemption.decision import Outcome, SpareReason, VictimReason
from scheduler.preemption.search import search
from tests.scheduler.preemption.plain_cluster import PlainCluster

UNTIL = datetime(2026, 1, 1, 0, 10, tzinfo=UTC)


@dataclass
class Case:
    cluster: PlainCluster
    members: list[int]
    priority: int
    min_count: int | None = None
    policy: str = "PreemptLowerPriority"
    want_outcome: Outcome = Outcome.PREEMPT
    want_victims: list[str] = field(default_factory=list)
    want_nominations: dict[str, str] = field(default_factory=dict)
    want_spared: dict[str, SpareReason] = field(default_factory=dict)
    want_message: str = ""
    want_until: datetime | None = None
    want_pdb_violations: int | None = None


CASES = [
    pytest.param(
        Case(
            PlainCluster()
            .node("n1", 4000)
            .node("n2", 4000)
            .pod("ns/high", "n1", 4000, 50)
            .pod("ns/low", "n2", 4000, 10),
            [2000],
            100,
            want_victims=["ns/low"],
            want_nominations={"default/preemptor": "n2"},
        ),
        id="pod preempts the lower-priority pod of two candidates",
    ),
    pytest.param(
        Case(
            PlainCluster().node("n1", 4000).pod("ns/a", "n1", 4000, 100),
            [1000],
            100,
            want_outcome=Outcome.CANNOT_HELP,
            want_message="no unit has a priority lower than 100",
        ),
        id="equal priority is never preempted",
    ),
    pytest.param(
        Case(
            PlainCluster().node("n1", 4000).pod("ns/a", "n1", 4000, 1),
            [1000],
            100,
            policy="Never",
            want_outcome=Outcome.CANNOT_HELP,
            want_message="preemptionPolicy is Never",
        ),
        id="preemptionPolicy Never preempts nothing",
    ),
    pytest.param(
        Case(
            PlainCluster().node("n1", 2000).pod("ns/a", "n1", 2000, 1),
            [3000],
            100,
            want_outcome=Outcome.CANNOT_HELP,
            want_message="no node fits the pod even after preempting",
        ),
        id="pod too big for any node preempts nothing",
    ),
    pytest.param(
        Case(
            PlainCluster()
            .node("n1", 4000)
            .node("n2", 4000)
            .pod("ns/a", "n1", 2000, 1, started=1)
            .pod("ns/b", "n1", 2000, 1, started=2)
            .group("ns/grp", [("n2", 1000), ("n2", 3000)], 1),
            [1000],
            100,
            want_victims=["ns/b"],
            want_nominations={"default/preemptor": "n1"},
        ),
        id="fewest victims wins: one pod rather than a whole group",
    ),
    pytest.param(
        Case(
            PlainCluster().node("n1", 4000).node("n2", 4000).group("ns/grp", [("n1", 4000), ("n2", 4000)], 1),
            [1000],
            100,
            want_victims=["ns/grp"],
            want_nominations={"default/preemptor": "n1"},
        ),
        id="a PodGroup-mode group goes whole although one pod would suffice",
    ),
    pytest.param(
        Case(
            PlainCluster()
            .node("n1", 4000)
            .node("n2", 4000)
            .pod("ns/a", "n1", 2000, 1)
            .pod("ns/b", "n1", 2000, 5)
            .pod("ns/c", "n2", 2000, 1)
            .pod("ns/d", "n2", 2000, 5),
            [2000, 2000],
            100,
            want_victims=["ns/a", "ns/c"],
            want_nominations={"default/m0": "n1", "default/m1": "n2"},
            want_spared={"ns/b": SpareReason.ABOVE_BOUND, "ns/d": SpareReason.ABOVE_BOUND},
        ),
        id="gang over pods across two nodes takes only the lowest priority",
    ),
    pytest.param(
        Case(
            PlainCluster().node("n1", 4000).node("n2", 4000).pod("ns/a", "n1", 4000, 1).pod("ns/b", "n2", 4000, 1),
            [4000, 4000, 4000],
            100,
            want_outcome=Outcome.CANNOT_HELP,
            want_message="places 2 of 3 members; the gang needs 3",
        ),
        id="gang that cannot fit even with every victim removed preempts nothing",
    ),
    pytest.param(
        Case(
            PlainCluster().node("n1", 4000).node("n2", 4000).pod("ns/a", "n1", 4000, 1).pod("ns/b", "n2", 4000, 200),
            [4000, 4000],
            100,
            min_count=1,
            want_victims=["ns/a"],
            want_nominations={"default/m0": "n1"},
        ),
        id="gang places as many members as lower-priority victims allow",
    ),
    pytest.param(
        Case(
            PlainCluster()
            .node("n1", 4000)
            .node("n2", 4000)
            .pod("ns/a", "n1", 4000, 1)
            .pod("ns/b", "n2", 4000, 1)
            .pdb("ns/pdb", 0, ["ns/a"]),
            [4000],
            100,
            want_victims=["ns/b"],
            want_nominations={"default/preemptor": "n2"},
        ),
        id="pod avoids the node whose victim a PDB protects",
    ),
    pytest.param(
        Case(
            PlainCluster()
            .node("n1", 4000)
            .node("n2", 4000)
            .pod("ns/a", "n1", 2000, 1)
            .pod("ns/b", "n1", 2000, 1)
            .pod("ns/c", "n2", 2000, 1)
            .pod("ns/d", "n2", 2000, 1)
            .pdb("ns/pdb", 1, ["ns/a", "ns/b"]),
            [2000, 2000, 2000],
            100,
            want_victims=["ns/a", "ns/c", "ns/d"],
            want_spared={"ns/b": SpareReason.PDB},
        ),
        id="gang reprieves a PDB-covered pod first",
    ),
    pytest.param(
        Case(
            PlainCluster()
            .node("n0", 8000)
            .node("n1", 8000)
            .pod("ns/a", "n0", 4000, 10)
            .pod("ns/b", "n0", 2000, 30)
            .pod("ns/c", "n0", 2000, 30)
            .pod("ns/d", "n1", 1000, 50)
            .pod("ns/e", "n1", 3000, 20)
            .pod("ns/f", "n1", 4000, 30)
            .pdb("ns/pdb", 0, ["ns/a", "ns/e"]),
            [2000, 2000, 2000],
            1000,
            min_count=1,
            want_victims=["ns/c", "ns/f"],
            want_spared={"ns/a": SpareReason.PDB, "ns/e": SpareReason.PDB, "ns/b": SpareReason.REPRIEVED},
            want_pdb_violations=0,
        ),
        id="issue 20: the PDB step comes before the binary search, so a PDB is kept at a higher bound",
    ),
    pytest.param(
        Case(
            PlainCluster()
            .node("n0", 8000)
            .pod("ns/g", "n0", 1000, 50)
            .pod("ns/h", "n0", 4000, 30)
            .pod("ns/i", "n0", 1000, 20)
            .pod("ns/j", "n0", 2000, 30),
            [3000],
            40,
            want_victims=["ns/h"],
            want_nominations={"default/preemptor": "n0"},
        ),
        id="issue 20: of two tied victims the one whose reprieval costs less is kept",
    ),
    pytest.param(
        Case(
            PlainCluster()
            .node("n0", 4000)
            .node("n1", 8000)
            .node("n2", 8000)
            .group("ns/g", [("n1", 3000), ("n0", 2000)], 10)
            .pod("ns/p0", "n0", 2000, 50)
            .pod("ns/p1", "n2", 4000, 30)
            .pod("ns/bound-0", "n1", 3000, 5000)
            .pod("ns/bound-1", "n2", 3000, 5000)
            .pdb("ns/pdb", 1, ["ns/g-1", "ns/p0"]),
            [3000],
            1000,
            min_count=1,
            want_victims=["ns/g"],
            want_pdb_violations=0,
        ),
        id="a group's pod-by-pod plan wins where the cluster-wide PDB step spares a unit no PDB needed",
    ),
    pytest.param(
        Case(
            PlainCluster()
            .node("n0", 2000)
            .node("n1", 4000)
            .group("ns/g", [("n0", 2000), ("n1", 2000)], 20)
            .pod("ns/p", "n1", 2000, 10),
            [2000, 2000],
            1000,
            want_victims=["ns/g"],
        ),
        id="a gang's KEP plan wins where the pod-by-pod plan would take a pod before the unit that makes room for both",
    ),
    pytest.param(
        Case(
            PlainCluster()
            .node("n0", 8000)
            .node("n1", 8000)
            .pod("ns/p0", "n0", 2000, 20)
            .pod("ns/p1", "n0", 4000, 50)
            .pod("ns/p2", "n0", 2000, 30)
            .pod("ns/p3", "n1", 2000, 10)
            .pod("ns/p4", "n1", 4000, 20)
            .pod("ns/p5", "n1", 1000, 20)
            .pod("ns/p6", "n1", 1000, 50),
            [2000, 2000],
            1000,
            want_victims=["ns/p4"],
            want_nominations={"default/m0": "n1", "default/m1": "n1"},
        ),
        id="a gang takes the one victim that makes room for both members (fuzz seed 2026 #161)",
    ),
    pytest.param(
        Case(
            PlainCluster()
            .node("n0", 8000)
            .node("n1", 8000)
            .group("ns/g", [("n1", 3000), ("n0", 3000), ("n1", 2000)], 30)
            .pod("ns/p0", "n0", 2000, 30, started=2)
            .pod("ns/p1", "n0", 3000, 30, started=1)
            .pod("ns/p2", "n1", 3000, 10, started=1),
            [4000, 4000],
            40,
            want_victims=["ns/g", "ns/p2"],
        ),
        id="a gang frees one node whole with its lowest pod rather than two at its own priority (fuzz seed 2026 #59)",
    ),
    pytest.param(
        Case(
            PlainCluster()
            .node("n0", 8000)
            .node("n1", 8000)
            .pod("ns/g0-0", "n0", 2000, 20)
            .pod("ns/g0-1", "n0", 2000, 20)
            .group("ns/g1", [("n1", 2000), ("n1", 2000), ("n0", 3000)], 20)
            .pod("ns/p0", "n0", 1000, 10)
            .pod("ns/p1", "n1", 3000, 20)
            .pod("ns/p2", "n1", 1000, 10)
            .pdb("ns/b0", 1, ["ns/g0-0", "ns/g1-0"]),
            [3000, 3000, 3000],
            1000,
            min_count=2,
            want_victims=["ns/g1", "ns/p1"],
        ),
        id="a PodGroup-mode victim's room on its other node counts for the members it fits there (fuzz seed 5 #119)",
    ),
    pytest.param(
        Case(
            PlainCluster()
            .node("n1", 4000)
            .pod("ns/a", "n1", 4000, 1)
            .protect("ns/a", Status(Code.UNSCHEDULABLE, ("ran 10s of 60s",), "MinRuntime", UNTIL)),
            [1000],
            100,
            want_outcome=Outcome.CANNOT_HELP,
            want_spared={"ns/a": SpareReason.PROTECTED},
            want_until=UNTIL,
        ),
        id="a protected victim is spared and the decision says until when",
    ),
]


@pytest.mark.parametrize("case", CASES)
def test_search(case: Case) -> None:
    decision = search(
        case.cluster.search_input(case.members, case.priority, min_count=case.min_count, policy=case.policy)
    )
    assert decision.outcome == case.want_outcome, decision.explain()
    assert sorted(v.key for v in decision.victims) == case.want_victims, decision.explain()
    if case.want_nominations:
        assert decision.nominations == case.want_nominations
    assert {s.key: s.reason for s in decision.spared if s.key in case.want_spared} == case.want_spared
    assert case.want_message in decision.message
    assert decision.until == case.want_until
    if case.want_pdb_violations is not None:
        assert decision.pdb_violations == case.want_pdb_violations, decision.explain(verbose=True)


def test_reprieval_keeps_members_placed() -> None:
    """A reprieved unit never costs the gang a member (KEP-5710 step 6)."""
    cluster = PlainCluster().node("n1", 4000).node("n2", 4000).pod("ns/a", "n1", 4000, 1).pod("ns/b", "n2", 2000, 1)
    decision = search(cluster.search_input([2000, 2000, 2000, 2000], 100, min_count=2))
    assert len(decision.nominations) == 4
    assert sorted(v.key for v in decision.victims) == ["ns/a", "ns/b"]


def test_validator_rejection_tries_the_next_node() -> None:
    cluster = PlainCluster().node("n1", 4000).node("n2", 4000).pod("ns/a", "n1", 4000, 1).pod("ns/b", "n2", 4000, 2)

    def no_a(keys: tuple[str, ...]) -> Status:
        return Status(Code.UNSCHEDULABLE, ("keeps ns/a",), "Elastic") if "ns/a" in keys else Status()

    decision = search(cluster.search_input([4000], 100, validate=no_a))
    assert [v.key for v in decision.victims] == ["ns/b"]
    assert decision.nominations == {"default/preemptor": "n2"}


def test_whole_group_victim_reason_and_explanation() -> None:
    cluster = PlainCluster().node("n1", 4000).node("n2", 4000).group("ns/grp", [("n1", 4000), ("n2", 4000)], 3)
    decision = search(cluster.search_input([1000], 100))
    (victim,) = decision.victims
    assert victim.reason == VictimReason.WHOLE_GROUP
    assert victim.pods == ("ns/grp-0", "ns/grp-1")
    assert victim.nodes == ("n1", "n2")
    text = "\n".join(decision.explain(verbose=True))
    assert "victim ns/grp (priority 3) on n1, n2" in text
