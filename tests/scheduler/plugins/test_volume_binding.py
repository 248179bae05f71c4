from __future__ import annotations

from datetime import timedelta

import pytest

from scheduler.api.config import SchedulerConfiguration
from scheduler.api.meta import ApiModel
from scheduler.cluster.memory import MemoryCluster
from scheduler.framework.runner import Scheduler
from scheduler.plugins import default_profile
from scheduler.plugins.volume_binding import WAIT_FOR_FIRST_CONSUMER
from tests.builders import EPOCH, PodWrapper, make_claim, make_node, make_pod, make_storage_class, make_volume
from tests.scheduler.scenario import cluster_of, run

HOSTNAME = "kubernetes.io/hostname"
NODES = [make_node(n).cap(cpu="4", memory="8Gi").label(HOSTNAME, n).obj() for n in ("n1", "n2")]
LOCAL = make_storage_class("local")
FAST = make_storage_class("fast", "ebs.csi.aws.com")
LAZY = make_storage_class("lazy", "ebs.csi.aws.com").wait_for_first_consumer()


def pod(name: str = "p") -> PodWrapper:
    return make_pod(name).req(cpu="1")


@pytest.mark.parametrize(
    ("pod", "storage", "want_node", "want_message"),
    [
        pytest.param(
            pod().claim("data"),
            [make_volume("pv").local_to("n2"), make_claim("data").bound("pv")],
            "n2",
            "",
            id="a claim bound to a local volume takes the pod to the volume's node",
        ),
        pytest.param(
            pod().claim("data"),
            [make_volume("pv").local_to("n2"), make_claim("data").prebound("pv").phase("Bound")],
            "n2",
            "",
            id="a hand-written claim that says it is Bound counts as bound",
        ),
        pytest.param(
            pod().claim("anywhere").claim("data"),
            [
                make_volume("pv-any"),
                make_claim("anywhere").bound("pv-any"),
                make_volume("pv").local_to("n2"),
                make_claim("data").bound("pv"),
            ],
            "n2",
            "",
            id="a volume without node affinity can be used anywhere, beside a local one",
        ),
        pytest.param(
            pod().claim("data"),
            [make_volume("pv").local_to("n9"), make_claim("data").bound("pv")],
            None,
            "2 node(s) didn't match PersistentVolume's node affinity",
            id="a volume whose node affinity matches no node fits nowhere",
        ),
        pytest.param(
            pod().claim("a").claim("b"),
            [
                make_volume("pv-a").local_to("n1"),
                make_claim("a").bound("pv-a"),
                make_volume("pv-b").local_to("n2"),
                make_claim("b").bound("pv-b"),
            ],
            None,
            "2 node(s) didn't match PersistentVolume's node affinity",
            id="two claims whose volumes are on different nodes fit nowhere",
        ),
        pytest.param(
            pod().claim("data"),
            [make_pod("busy").req(cpu="4").on("n2"), make_volume("pv").local_to("n2"), make_claim("data").bound("pv")],
            None,
            "1 Insufficient cpu, 1 node(s) didn't match PersistentVolume's node affinity",
            id="a full volume node makes the pod wait, not move to another node",
        ),
        pytest.param(
            pod().claim("data"),
            [],
            None,
            'persistentvolumeclaim "data" not found',
            id="a claim that does not exist is named, said once for the pod",
        ),
        pytest.param(
            pod().ephemeral("scratch"),
            [],
            None,
            'waiting for ephemeral volume controller to create the persistentvolumeclaim "p-scratch"',
            id="an ephemeral volume's claim not made yet is waited for",
        ),
        pytest.param(
            pod().ephemeral("scratch"),
            [make_volume("pv").local_to("n2"), make_claim("p-scratch").bound("pv")],
            None,
            "PVC default/p-scratch was not created for pod default/p (pod is not owner)",
            id="an ephemeral volume's claim made for another pod is refused",
        ),
        pytest.param(
            pod().ephemeral("scratch"),
            [make_volume("pv").local_to("n2"), make_claim("p-scratch").bound("pv").for_pod("p")],
            "n2",
            "",
            id="an ephemeral volume's claim owned by the pod is used like any claim",
        ),
        pytest.param(
            pod().claim("data"),
            [FAST, make_claim("data").storage_class("fast")],
            None,
            "pod has unbound immediate PersistentVolumeClaims",
            id="an unbound claim of an Immediate class waits for the PV controller",
        ),
        pytest.param(
            pod().claim("data"),
            [make_claim("data")],
            None,
            "pod has unbound immediate PersistentVolumeClaims",
            id="an unbound claim of no class is an immediate one",
        ),
        pytest.param(
            pod().claim("data"),
            [LAZY, make_volume("pv").local_to("n2"), make_claim("data").storage_class("lazy").prebound("pv")],
            None,
            "pod has unbound immediate PersistentVolumeClaims",
            id="a claim that names its volume but is not bound yet is an immediate one",
        ),
        pytest.param(
            pod().claim("data"),
            [LAZY, make_claim("data").storage_class("lazy")],
            None,
            WAIT_FOR_FIRST_CONSUMER,
            id="an unbound WaitForFirstConsumer claim waits rather than be placed without its volume",
        ),
        pytest.param(
            pod().claim("data"),
            [make_claim("data").bound("gone").phase("Lost")],
            None,
            'persistentvolumeclaim "data" bound to non-existent persistentvolume "gone"',
            id="a lost claim names the volume it lost",
        ),
        pytest.param(
            pod().claim("data"),
            [make_volume("pv"), make_claim("data").bound("pv").deleting()],
            None,
            'persistentvolumeclaim "data" is being deleted',
            id="a claim being deleted is not used",
        ),
    ],
)
def test_volume_binding(pod: PodWrapper, storage: list[object], want_node: str | None, want_message: str) -> None:
    objects: list[ApiModel] = [LOCAL.obj(), *NODES, *(s.obj() for s in storage), pod.obj()]  # type: ignore[attr-defined]
    outcome = run(*objects)
    assert outcome.node_of("p") == want_node
    if want_node is None:
        reason, message = outcome.pending("p") or ("", "")
        assert reason == "Unschedulable"
        assert message.startswith(f"0/2 nodes are available: {want_message}."), message


def test_preemption_frees_room_on_the_volume_node_only() -> None:
    """Both nodes are full of lower-priority pods: the preemptor's victims are on its volume's node."""
    busy = [make_pod(f"low-{n}").req(cpu="4").priority(1).on(n).obj() for n in ("n2", "n1")]
    high = make_pod("p").req(cpu="4").priority(100).claim("data").obj()
    storage = [make_volume("pv").local_to("n2").obj(), make_claim("data").bound("pv").obj()]
    outcome = run(*NODES, *busy, *storage, high, preempt=True)
    assert outcome.node_of("p") == "n2"
    assert [p["victim"] for p in outcome.report["preemptions"]] == ["default/low-n2"]


def test_a_claim_created_later_wakes_the_pod_that_waits_for_it() -> None:
    """As kube-scheduler's queueing hints for PersistentVolumeClaim events: the parked pod is tried again at once."""
    now = EPOCH + timedelta(hours=1)
    cluster = MemoryCluster(cluster_of([*NODES, pod().claim("data").obj()]), now)
    config = SchedulerConfiguration()
    scheduler = Scheduler(cluster, config, default_profile(config))
    scheduler.schedule_pending()
    cluster.advance(now + timedelta(seconds=30))
    assert scheduler.schedule_pending().units_tried == 0, "nothing changed: the pod stays parked"
    cluster.create(make_volume("pv").local_to("n2").obj())
    cluster.create(make_claim("data").bound("pv").obj())
    cluster.advance(now + timedelta(seconds=60))
    assert scheduler.schedule_pending().units_tried == 1
    assert cluster.objects().pods["default/p"].spec.node_name == "n2"


def test_pods_alike_but_for_their_ephemeral_claims_each_follow_their_own_volume() -> None:
    """Ten nodes, so that the second pod's verdict is brought up to date on the changed row only."""
    nodes = [make_node(n).cap(cpu="4").obj() for n in ["n1", *(f"m{i}" for i in range(9))]]
    storage = [make_volume("pv-p1").obj(), make_volume("pv-p2").local_to("n1").obj()]
    claims = [make_claim(f"{p}-scratch").bound(f"pv-{p}").for_pod(p).obj() for p in ("p1", "p2")]
    pods = [make_pod(p).req(cpu="1").ephemeral("scratch").obj() for p in ("p1", "p2")]
    outcome = run(*nodes, *storage, *claims, *pods)
    assert outcome.node_of("p2") == "n1"
