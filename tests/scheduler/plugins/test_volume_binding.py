from __future__ import annotations

from datetime import timedelta

import pytest

from scheduler.api.config import SchedulerConfiguration
from scheduler.api.meta import ApiModel
from scheduler.api.persistent_volume_claim import ANN_SELECTED_NODE
from scheduler.cluster.memory import MemoryCluster
from scheduler.framework.runner import Scheduler
from scheduler.plugins import default_profile
from tests.builders import (
    EPOCH,
    PodWrapper,
    make_claim,
    make_node,
    make_pod,
    make_podgroup,
    make_storage_class,
    make_volume,
)
from tests.scheduler.scenario import Outcome, cluster_of, run

BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
"""kube-scheduler's words for a node where a claim to bind gets no volume and cannot be provisioned."""
HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
NODES = [
    make_node(n).cap(cpu="4", memory="8Gi").label(HOSTNAME, n).label(ZONE, zone).obj()
    for n, zone in (("n1", "a"), ("n2", "b"))
]
LOCAL = make_storage_class("local")
FAST = make_storage_class("fast", "ebs.csi.aws.com")
LAZY = make_storage_class("lazy", "ebs.csi.aws.com").wait_for_first_consumer()
LOCAL_LAZY = make_storage_class("local-lazy").wait_for_first_consumer()
"""Local volumes made by hand: a claim of this class is bound by the scheduler, never provisioned."""


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


def bound_volumes(outcome: Outcome) -> dict[str, str]:
    """Each claim of the end state bound to a volume, by name: `claim -> volume`."""
    claims = outcome.objects.persistent_volume_claims.values()
    return {c.metadata.name: c.spec.volume_name for c in claims if c.spec.volume_name and c.is_bound}


@pytest.mark.parametrize(
    ("pod", "storage", "want_node", "want_message", "want_bound"),
    [
        pytest.param(
            pod().claim("data"),
            [
                make_volume("pv").local_to("n2").storage_class("local-lazy"),
                make_claim("data").storage_class("local-lazy"),
            ],
            "n2",
            "",
            {"data": "pv"},
            id="an unbound WaitForFirstConsumer claim is given the local volume that fits, and the pod its node",
        ),
        pytest.param(
            pod().claim("data"),
            [make_claim("data").storage_class("local-lazy")],
            None,
            f"2 {BIND_CONFLICT}",
            {},
            id="with no volume and a class that cannot provision, the pod waits for a volume",
        ),
        pytest.param(
            pod().claim("data"),
            [
                make_volume("big").local_to("n2").storage_class("local-lazy").size("5Gi"),
                make_volume("small").local_to("n2").storage_class("local-lazy").size("2Gi"),
                make_volume("tiny").local_to("n2").storage_class("local-lazy").size("500Mi"),
                make_claim("data").storage_class("local-lazy").size("2Gi"),
            ],
            "n2",
            "",
            {"data": "small"},
            id="the smallest volume at least as large as the request is taken",
        ),
        pytest.param(
            pod().claim("data"),
            [
                make_volume("b").local_to("n2").storage_class("local-lazy"),
                make_volume("a").local_to("n2").storage_class("local-lazy"),
                make_claim("data").storage_class("local-lazy"),
            ],
            "n2",
            "",
            {"data": "a"},
            id="between volumes of one size the first by name is taken",
        ),
        pytest.param(
            pod().claim("data"),
            [make_volume("pv").local_to("n2").storage_class("local"), make_claim("data").storage_class("local-lazy")],
            None,
            f"2 {BIND_CONFLICT}",
            {},
            id="a volume of another class is not taken",
        ),
        pytest.param(
            pod().claim("data"),
            [
                make_volume("pv").local_to("n2").storage_class("local-lazy").size("1Gi"),
                make_claim("data").storage_class("local-lazy").size("2Gi"),
            ],
            None,
            f"2 {BIND_CONFLICT}",
            {},
            id="a volume smaller than the request is not taken",
        ),
        pytest.param(
            pod().claim("data"),
            [
                make_volume("pv").local_to("n2").storage_class("local-lazy").access("ReadOnlyMany"),
                make_claim("data").storage_class("local-lazy"),
            ],
            None,
            f"2 {BIND_CONFLICT}",
            {},
            id="a volume without the claim's access modes is not taken",
        ),
        pytest.param(
            pod().claim("data"),
            [
                make_volume("pv").local_to("n2").storage_class("local-lazy").block(),
                make_claim("data").storage_class("local-lazy"),
            ],
            None,
            f"2 {BIND_CONFLICT}",
            {},
            id="a Block volume is not taken for a Filesystem claim",
        ),
        pytest.param(
            pod().claim("data"),
            [
                make_volume("pv").local_to("n2").storage_class("local-lazy").claimed_by("other"),
                make_claim("data").storage_class("local-lazy"),
            ],
            None,
            f"2 {BIND_CONFLICT}",
            {},
            id="a volume bound to another claim is not taken",
        ),
        pytest.param(
            pod().claim("data"),
            [
                make_volume("pv").local_to("n2").storage_class("local-lazy").prebound("other"),
                make_claim("data").storage_class("local-lazy"),
            ],
            None,
            f"2 {BIND_CONFLICT}",
            {},
            id="a volume pre-bound to another claim, still Available, is not taken",
        ),
        pytest.param(
            pod().claim("data"),
            [
                make_volume("pv").local_to("n2").storage_class("local-lazy").deleting(),
                make_claim("data").storage_class("local-lazy"),
            ],
            None,
            f"2 {BIND_CONFLICT}",
            {},
            id="a volume being deleted is not taken",
        ),
        pytest.param(
            pod().claim("data"),
            [
                make_volume("plain").local_to("n1").storage_class("local-lazy"),
                make_volume("fast").local_to("n2").storage_class("local-lazy").label("disk", "nvme"),
                make_claim("data").storage_class("local-lazy").selector(disk="nvme"),
            ],
            "n2",
            "",
            {"data": "fast"},
            id="a claim's selector picks among the volumes",
        ),
        pytest.param(
            pod().claim("data"),
            [
                make_volume("free").local_to("n1").storage_class("local-lazy"),
                make_volume("mine").local_to("n2").storage_class("local-lazy").size("5Gi").prebound("data"),
                make_claim("data").storage_class("local-lazy"),
            ],
            "n2",
            "",
            {"data": "mine"},
            id="a volume pre-bound to the claim is taken over a smaller free one",
        ),
        pytest.param(
            pod().claim("a").claim("b"),
            [
                make_volume("n1-only").local_to("n1").storage_class("local-lazy"),
                make_volume("n2-x").local_to("n2").storage_class("local-lazy"),
                make_volume("n2-y").local_to("n2").storage_class("local-lazy"),
                make_claim("a").storage_class("local-lazy"),
                make_claim("b").storage_class("local-lazy"),
            ],
            "n2",
            "",
            {"a": "n2-x", "b": "n2-y"},
            id="two claims of a pod take two volumes of one node, never one twice",
        ),
        pytest.param(
            pod().claim("bound").claim("lazy"),
            [
                make_volume("pv-bound").local_to("n1", "n2"),
                make_claim("bound").bound("pv-bound"),
                make_volume("pv-lazy").local_to("n1").storage_class("local-lazy"),
                make_claim("lazy").storage_class("local-lazy"),
            ],
            "n1",
            "",
            {"bound": "pv-bound", "lazy": "pv-lazy"},
            id="a bound claim and a claim to bind both count",
        ),
        pytest.param(
            pod().claim("data"),
            [LAZY, make_claim("data").storage_class("lazy")],
            "n1",
            "",
            {"data": "pvc-default-data"},
            id="a claim of a class with a provisioner is provisioned where the pod goes",
        ),
        pytest.param(
            pod().claim("data"),
            [
                LAZY,
                make_volume("pv").local_to("n2").storage_class("lazy"),
                make_claim("data").storage_class("lazy"),
            ],
            "n1",
            "",
            {"data": "pvc-default-data"},
            id="a node without a volume that fits takes a claim to provision",
        ),
        pytest.param(
            pod().claim("data"),
            [
                make_storage_class("zonal", "ebs.csi.aws.com").wait_for_first_consumer().allowed_topology(ZONE, "b"),
                make_claim("data").storage_class("zonal"),
            ],
            "n2",
            "",
            {"data": "pvc-default-data"},
            id="a class's allowed topologies say where a claim may be provisioned",
        ),
        pytest.param(
            pod().claim("data"),
            [
                make_storage_class("zonal", "ebs.csi.aws.com").wait_for_first_consumer().allowed_topology(ZONE, "c"),
                make_claim("data").storage_class("zonal"),
            ],
            None,
            f"2 {BIND_CONFLICT}",
            {},
            id="no node in the class's allowed topologies, no provisioning",
        ),
        pytest.param(
            pod().claim("data"),
            [LAZY, make_claim("data").storage_class("lazy").selected_node("n2")],
            "n2",
            "",
            {"data": "pvc-default-data"},
            id="a claim a scheduler chose a node for keeps the pod on that node",
        ),
        pytest.param(
            pod().claim("data"),
            [
                make_volume("pv").local_to("n1").storage_class("local-lazy"),
                make_claim("data").storage_class("local-lazy").selected_node("n2"),
            ],
            None,
            f"2 {BIND_CONFLICT}",
            {},
            id="a claim chosen a node for by a class that cannot provision fits nowhere",
        ),
    ],
)
def test_claims_to_bind(
    pod: PodWrapper, storage: list[object], want_node: str | None, want_message: str, want_bound: dict[str, str]
) -> None:
    classes = [LOCAL.obj(), LOCAL_LAZY.obj()]
    objects: list[ApiModel] = [*classes, *NODES, *(s.obj() for s in storage), pod.obj()]  # type: ignore[attr-defined]
    outcome = run(*objects)
    assert outcome.node_of("p") == want_node
    if want_node is None:
        reason, message = outcome.pending("p") or ("", "")
        assert reason == "Unschedulable"
        assert message.startswith(f"0/2 nodes are available: {want_message}."), message
    assert bound_volumes(outcome) == want_bound


def lazy_claim(name: str) -> ApiModel:
    return make_claim(name).storage_class("local-lazy").obj()


def lazy_volume(name: str, node: str) -> ApiModel:
    return make_volume(name).local_to(node).storage_class("local-lazy").obj()


def test_two_pods_of_one_pass_are_never_given_the_same_volume() -> None:
    """The first pod placed reserves its volume for the rest of the pass (upstream's assume cache): the second is
    placed where the other volume is, not given the first one again."""
    pods = [make_pod(p).req(cpu="1").claim(f"data-{p}").obj() for p in ("p1", "p2")]
    outcome = run(LOCAL_LAZY.obj(), *NODES, lazy_volume("pv-n1", "n1"), lazy_volume("pv-n2", "n2"), *pods,
                  *(lazy_claim(f"data-{p}") for p in ("p1", "p2")))  # fmt: skip
    assert outcome.bound == {"default/p1": "n1", "default/p2": "n2"}
    assert bound_volumes(outcome) == {"data-p1": "pv-n1", "data-p2": "pv-n2"}


def test_the_last_volume_taken_in_a_pass_leaves_the_next_pod_waiting_for_one() -> None:
    pods = [make_pod(p).req(cpu="1").claim(f"data-{p}").obj() for p in ("p1", "p2")]
    claims = [lazy_claim(f"data-{p}") for p in ("p1", "p2")]
    outcome = run(LOCAL_LAZY.obj(), *NODES, lazy_volume("pv", "n1"), *pods, *claims)
    assert outcome.bound == {"default/p1": "n1"}
    reason, message = outcome.pending("p2") or ("", "")
    assert (reason, message.split(". ")[0]) == ("Unschedulable", f"0/2 nodes are available: 2 {BIND_CONFLICT}")


def test_pods_sharing_a_claim_follow_the_volume_the_first_one_was_given() -> None:
    """The second pod sees the claim's volume pre-bound to it by the first (assumed): it may only go where that
    volume is, here a node without room for it."""
    shared = make_claim("shared").storage_class("local-lazy").access("ReadWriteMany").obj()
    volumes = [make_volume(f"pv-{n}").local_to(n).storage_class("local-lazy").access("ReadWriteMany").obj()
               for n in ("n1", "n2")]  # fmt: skip
    pods = [make_pod(p).req(cpu="3").claim("shared").obj() for p in ("p1", "p2")]
    outcome = run(LOCAL_LAZY.obj(), *NODES, *volumes, shared, *pods)
    assert outcome.bound == {"default/p1": "n1"}
    assert bound_volumes(outcome) == {"shared": "pv-n1"}
    _, message = outcome.pending("p2") or ("", "")
    assert message.split(". ")[0] == f"0/2 nodes are available: 1 Insufficient cpu, 1 {BIND_CONFLICT}"


def test_a_gang_that_cannot_be_placed_whole_binds_no_volume_and_holds_none() -> None:
    """Its first member's volume was reserved while the gang was tried: given back, it goes to the pod after it."""
    group = make_podgroup("g").gang(2).priority(100).obj()
    members = [
        make_pod("m1").req(cpu="1").group("g").priority(100).claim("data-m1").obj(),
        make_pod("m2").req(cpu="64").group("g").priority(100).obj(),
    ]
    other = make_pod("other").req(cpu="1").claim("data-other").obj()
    claims = [lazy_claim("data-m1"), lazy_claim("data-other")]
    outcome = run(LOCAL_LAZY.obj(), *NODES, lazy_volume("pv", "n1"), group, *members, other, *claims)
    assert outcome.bound == {"default/other": "n1"}
    assert bound_volumes(outcome) == {"data-other": "pv"}
    assert ANN_SELECTED_NODE not in outcome.objects.persistent_volume_claims["default/data-m1"].metadata.annotations


def test_a_gang_placed_whole_binds_every_members_volumes() -> None:
    group = make_podgroup("g").gang(2).obj()
    members = [make_pod(m).req(cpu="3").group("g").claim(f"data-{m}").obj() for m in ("m1", "m2")]
    claims = [lazy_claim(f"data-{m}") for m in ("m1", "m2")]
    outcome = run(LOCAL_LAZY.obj(), *NODES, lazy_volume("a", "n1"), lazy_volume("b", "n2"), group, *members, *claims)
    assert outcome.bound == {"default/m1": "n1", "default/m2": "n2"}
    assert bound_volumes(outcome) == {"data-m1": "a", "data-m2": "b"}


def test_a_provisioned_volume_is_made_on_the_pods_node_for_its_claim() -> None:
    """The claim is annotated with the node (what kube-scheduler writes); the simulator's provisioner makes the
    volume there and its PV controller binds the claim to it."""
    claim = make_claim("data").storage_class("lazy").size("3Gi").uid("u-1").obj()
    outcome = run(
        LAZY.obj(), *NODES, claim, make_pod("p").req(cpu="1").claim("data").node_selector(**{ZONE: "b"}).obj()
    )
    assert outcome.bound == {"default/p": "n2"}
    bound = outcome.objects.persistent_volume_claims["default/data"]
    assert bound.metadata.annotations[ANN_SELECTED_NODE] == "n2"
    assert (bound.spec.volume_name, bound.status.phase) == ("pvc-u-1", "Bound")
    volume = outcome.objects.persistent_volumes["pvc-u-1"]
    assert volume.spec.claim_ref is not None and (volume.spec.claim_ref.name, volume.spec.claim_ref.uid) == (
        "data",
        "u-1",
    )
    assert (volume.spec.capacity["storage"], volume.storage_class, volume.status.phase) == ("3Gi", "lazy", "Bound")
    assert volume.spec.csi is not None and volume.spec.csi.driver == "ebs.csi.aws.com"
    assert volume.spec.node_affinity is not None and volume.spec.node_affinity.required is not None
    [term] = volume.spec.node_affinity.required.node_selector_terms
    assert [(r.key, r.values) for r in term.match_expressions] == [(HOSTNAME, ["n2"])]


def test_preemption_frees_room_on_the_node_of_the_only_volume_that_fits() -> None:
    busy = [make_pod(f"low-{n}").req(cpu="4").priority(1).on(n).obj() for n in ("n1", "n2")]
    high = make_pod("p").req(cpu="4").priority(100).claim("data").obj()
    outcome = run(LOCAL_LAZY.obj(), *NODES, *busy, lazy_volume("pv", "n2"), lazy_claim("data"), high, preempt=True)
    assert outcome.node_of("p") == "n2"
    assert [p["victim"] for p in outcome.report["preemptions"]] == ["default/low-n2"]
    assert bound_volumes(outcome) == {"data": "pv"}


def test_a_volume_created_later_wakes_the_pod_that_waits_for_one() -> None:
    now = EPOCH + timedelta(hours=1)
    objects = [LOCAL_LAZY.obj(), *NODES, lazy_claim("data"), pod().claim("data").obj()]
    cluster = MemoryCluster(cluster_of(objects), now)
    config = SchedulerConfiguration()
    scheduler = Scheduler(cluster, config, default_profile(config))
    scheduler.schedule_pending()
    cluster.advance(now + timedelta(seconds=30))
    assert scheduler.schedule_pending().units_tried == 0, "nothing changed: the pod stays parked"
    cluster.create(lazy_volume("pv", "n2"))
    cluster.advance(now + timedelta(seconds=60))
    assert scheduler.schedule_pending().units_tried == 1
    assert cluster.objects().pods["default/p"].spec.node_name == "n2"
    assert cluster.objects().persistent_volume_claims["default/data"].spec.volume_name == "pv"
