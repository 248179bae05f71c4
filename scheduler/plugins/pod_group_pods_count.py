"""PodGroupPodsCount: the placement that takes more of the group's pods scores higher (KEP-5732 PlacementScore).

Source: kube-scheduler 1.36 `podgrouppodscount`. The count is the members already bound plus those the placement
takes; scores are normalised against the largest count (not `minCount`), so a placement one pod short of another
scores close to it.
"""

from __future__ import annotations

from scheduler.api.pod_group import PodGroup
from scheduler.framework.normalize import MAX_NODE_SCORE
from scheduler.framework.pod_group_placement import Proposal
from scheduler.framework.snapshot import Snapshot


class PodGroupPodsCount:
    name = "PodGroupPodsCount"

    def __init__(self, weight: int = 1) -> None:
        self.weight = weight

    def score_placement(self, group: PodGroup, proposal: Proposal, snapshot: Snapshot) -> int:
        return proposal.scheduled + len(proposal.assignments)

    def normalize_placement_scores(self, scores: list[int]) -> list[int]:
        top = max(scores, default=0)
        return [score * MAX_NODE_SCORE // top if top else 0 for score in scores]
