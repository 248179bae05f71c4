from __future__ import annotations

import pytest

from scheduler.api.meta import ApiModel
from scheduler.framework.cluster import object_key
from tests.builders import PodWrapper, make_claim, make_csi_node, make_node, make_pod, make_storage_class, make_volume
from tests.scheduler.scenario import run

EBS = "ebs.csi.aws.com"
NFS = "nfs.csi.k8s.io"


def csi_claim(name: str, driver: str = EBS) -> list[ApiModel]:
    """A claim bound to a CSI volume of `driver`."""
    return [make_volume(f"pv-{name}").csi(driver).obj(), make_claim(name).bound(f"pv-{name}").obj()]


def busy(name: str, node: str, *claims: str) -> ApiModel:
    pod = make_pod(name).req(cpu="1").on(node)
    for claim in claims:
        pod = pod.claim(claim)
    return pod.obj()


def legacy_limit(name: str, count: int) -> ApiModel:
    """A node that says its EBS attach limit in its allocatable (before CSINode had `allocatable.count`)."""
    node = make_node(name).cap(cpu="8", memory="16Gi")
    node.raw["status"]["allocatable"][f"attachable-volumes-csi-{EBS}"] = str(count)
    return node.obj()


HEAVIER_N1 = make_pod("heavier").req(cpu="6").on("n1").obj()
"""Load that makes n2 the node the scheduler prefers."""

# n1 is preferred (n2 runs more), but n1 can attach only one EBS volume and already has one.
NODES = [make_node(n).cap(cpu="8", memory="16Gi").obj() for n in ("n1", "n2")]
BASE: list[ApiModel] = [
    *NODES,
    make_csi_node("n1").driver(EBS, 1).driver(NFS).obj(),
    make_csi_node("n2").driver(EBS, 8).obj(),
    *csi_claim("used"),
    busy("on-n1", "n1", "used"),
    make_pod("heavy").req(cpu="4").on("n2").obj(),
]


@pytest.mark.parametrize(
    ("pod", "extra", "want_node", "want_message"),
    [
        pytest.param(
            make_pod("p").claim("new"), csi_claim("new"), "n2", "", id="a node at its attach limit is skipped"
        ),
        pytest.param(
            make_pod("p").claim("used"),
            [HEAVIER_N1, make_csi_node("n2").driver(EBS, 0).obj()],
            "n1",
            "",
            id="a volume the node has attached already is not counted again",
        ),
        pytest.param(
            make_pod("p").claim("new"),
            [*csi_claim("new", NFS), HEAVIER_N1, make_csi_node("n2").driver(EBS, 8).driver(NFS, 0).obj()],
            "n1",
            "",
            id="a driver's limit counts only its own volumes",
        ),
        pytest.param(
            make_pod("p").claim("a").claim("b"),
            [*csi_claim("a"), *csi_claim("b"), make_csi_node("n2").driver(EBS, 1).obj()],
            None,
            "2 node(s) exceed max volume count",
            id="a pod whose volumes exceed every node's limit waits",
        ),
        pytest.param(
            make_pod("p").claim("new"),
            [
                *csi_claim("new"),
                make_csi_node("n1").obj(),
                legacy_limit("n1", 1),
            ],
            "n2",
            "",
            id="the node's legacy allocatable limit applies when its CSINode says none",
        ),
        pytest.param(
            make_pod("p").volume("disk", awsElasticBlockStore={"volumeID": "vol-1"}),
            [],
            None,
            "phalanx-scheduler does not support spec.volumes[0].awsElasticBlockStore",
            id="an in-tree volume whose limit cannot be counted waits",
        ),
        pytest.param(
            make_pod("p").claim("old"),
            [
                make_volume("pv-old").source(awsElasticBlockStore={"volumeID": "vol-1"}).obj(),
                make_claim("old").bound("pv-old").obj(),
            ],
            None,
            "phalanx-scheduler does not support spec.awsElasticBlockStore of PersistentVolume pv-old",
            id="a claim bound to an in-tree volume waits",
        ),
        pytest.param(
            make_pod("p").volume("v", fancyNewVolume={"size": 1}),
            [],
            None,
            "phalanx-scheduler does not support spec.volumes[0].fancyNewVolume",
            id="a volume source Kubernetes 1.36 does not define waits",
        ),
        pytest.param(
            make_pod("p").claim("new"),
            [
                *csi_claim("new"),
                make_csi_node("n1").driver(EBS, 2).migrated("kubernetes.io/aws-ebs").obj(),
                make_pod("legacy")
                .req(cpu="1")
                .on("n1")
                .volume("disk", awsElasticBlockStore={"volumeID": "vol-9"})
                .obj(),
            ],
            "n2",
            "",
            id="a migrated in-tree volume of a pod on the node counts against its CSI driver",
        ),
    ],
)
def test_node_volume_limits(pod: PodWrapper, extra: list[ApiModel], want_node: str | None, want_message: str) -> None:
    objects = {(type(o), object_key(o)): o for o in [*BASE, *extra]}  # later ones replace
    outcome = run(*objects.values(), pod.req(cpu="1").obj())
    assert outcome.node_of("p") == want_node
    if want_node is None:
        reason, message = outcome.pending("p") or ("", "")
        assert reason == "Unschedulable"
        assert message.startswith(f"0/2 nodes are available: {want_message}."), message


def test_plain_volumes_beside_a_claim_need_no_limit() -> None:
    pod = make_pod("p").req(cpu="1").volume("tmp", emptyDir={}).volume("cfg", configMap={"name": "c"}).claim("new")
    outcome = run(*BASE, *csi_claim("new"), make_storage_class("fast", EBS).obj(), pod.obj())
    assert outcome.node_of("p") == "n2"
