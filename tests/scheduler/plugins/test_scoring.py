"""kube-scheduler's default scores beside NodeResourcesFit: each case is built so that LeastAllocated alone would
pick `n1`, and the score named in its id makes kube-scheduler pick `want_node`."""

from __future__ import annotations

import pytest

from scheduler.api.config import SchedulerConfiguration
from tests.builders import PodWrapper, make_config, make_node, make_pod
from tests.scheduler.scenario import run

HOST = "kubernetes.io/hostname"
PACK = make_config(scoringStrategy={"type": "MostAllocated"})


def case(
    nodes: list[object], running: list[PodWrapper], pod: PodWrapper, want: str, config: SchedulerConfiguration | None
) -> tuple[list[object], list[PodWrapper], PodWrapper, str, SchedulerConfiguration | None]:
    return nodes, running, pod, want, config


@pytest.mark.parametrize(
    ("nodes", "running", "pod", "want_node", "config"),
    [
        pytest.param(
            *case(
                [make_node("n1").taint("spot", "yes", "PreferNoSchedule"), make_node("n2")],
                [make_pod("busy").req(cpu="4").on("n2")],
                make_pod("p").req(cpu="1"),
                "n2",
                None,
            ),
            id="TaintToleration: an untolerated PreferNoSchedule taint is avoided",
        ),
        pytest.param(
            *case(
                [make_node("n1").taint("spot", "yes", "PreferNoSchedule"), make_node("n2")],
                [make_pod("busy").req(cpu="4").on("n2")],
                make_pod("p").req(cpu="1").toleration("spot", "yes", "PreferNoSchedule"),
                "n1",
                None,
            ),
            id="TaintToleration: a tolerated PreferNoSchedule taint is not",
        ),
        pytest.param(
            *case(
                [make_node("n1").label("disk", "hdd"), make_node("n2").label("disk", "ssd")],
                [make_pod("busy").req(cpu="4").on("n2")],
                make_pod("p").req(cpu="1").preferred_node("disk", "ssd", weight=10),
                "n2",
                None,
            ),
            id="NodeAffinity: a preferred term draws the pod",
        ),
        pytest.param(
            *case(
                [make_node("n1"), make_node("n2")],
                [make_pod("db").label("app", "db").req(cpu="4").on("n2")],
                make_pod("p").req(cpu="1").pod_affinity(HOST, weight=50, app="db"),
                "n2",
                None,
            ),
            id="InterPodAffinity: preferred affinity joins the matching pod",
        ),
        pytest.param(
            *case(
                [make_node("n1"), make_node("n2")],
                [make_pod("web").label("app", "web").req(cpu="1").on("n1"), make_pod("busy").req(cpu="3").on("n2")],
                make_pod("p").req(cpu="1").pod_affinity(HOST, anti=True, weight=50, app="web"),
                "n2",
                PACK,
            ),
            id="InterPodAffinity: preferred anti-affinity avoids the matching pod",
        ),
        pytest.param(
            *case(
                [make_node("n1"), make_node("n2")],
                [make_pod("cache").req(cpu="4").pod_affinity(HOST, weight=80, app="web").on("n2")],
                make_pod("p").label("app", "web").req(cpu="1"),
                "n2",
                None,
            ),
            id="InterPodAffinity: a running pod's preferred affinity draws the pod it matches",
        ),
        pytest.param(
            *case(
                [make_node("n1"), make_node("n2")],
                [make_pod("web").label("app", "web").req(cpu="1").on("n1")],
                make_pod("p").label("app", "web").req(cpu="1").spread(HOST, when="ScheduleAnyway", app="web"),
                "n2",
                PACK,
            ),
            id="PodTopologySpread: ScheduleAnyway spreads even when scoring packs",
        ),
        pytest.param(
            *case(
                [make_node("n1"), make_node("n2")],
                [make_pod("web-a").owned_by("ReplicaSet", "rs-1").req(cpu="1").on("n1")],
                make_pod("p").owned_by("ReplicaSet", "rs-1").req(cpu="1"),
                "n2",
                PACK,
            ),
            id="PodTopologySpread: the system defaults spread a ReplicaSet's pods",
        ),
        pytest.param(
            *case(
                [make_node("n1"), make_node("n2")],
                [make_pod("mem").req(memory="15Gi").on("n2")],
                make_pod("p").req(cpu="4", memory="1Gi"),
                "n2",
                None,
            ),
            id="NodeResourcesBalancedAllocation: the node left the most even wins",
        ),
        pytest.param(
            *case(
                [make_node("n1"), make_node("n2").image("registry.example/train:v1", 1000)],
                [make_pod("busy").req(cpu="2").on("n2")],
                make_pod("p").req(cpu="1").image("registry.example/train:v1"),
                "n2",
                None,
            ),
            id="ImageLocality: the node holding the image wins",
        ),
    ],
)
def test_default_scores(
    nodes: list[object],
    running: list[PodWrapper],
    pod: PodWrapper,
    want_node: str,
    config: SchedulerConfiguration | None,
) -> None:
    outcome = run(
        *(n.obj() for n in nodes),  # type: ignore[attr-defined]
        *(r.obj() for r in running),
        pod.obj(),
        config=config,
    )
    assert outcome.node_of("p") == want_node
