"""One contract for both back ends: every `Cluster` call answers the same on the memory back end and on the
Kubernetes back end against the real API server.

Each case is set up once on the real server; the Kubernetes back end (`KubeCluster`, admin credentials) reads
it, and a memory back end is built from exactly the objects that view shows (as `phalanx simulate` reads a
dump). The same call is then made on both, and what each shows afterwards (its `objects()` once the writes in
flight have landed and the informer shows them) and what each refused (raised as `WriteRefused` by the memory
back end, in the ledger of the Kubernetes one) must be the same. The cases include a Binding of a pod already
bound, a write the server refuses, a pod that vanished, and a write made from a stale resourceVersion.

The pods name a scheduler nobody runs, so the suite's scheduler leaves them alone.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import pytest

from kube.client import api_client
from kube.informer import LIST_PAGE
from scheduler.api.meta import Condition
from scheduler.api.pod import Pod
from scheduler.api.pod_group import PodGroup
from scheduler.cluster.kube import KubeCluster
from scheduler.cluster.memory import MemoryCluster
from scheduler.framework.cluster import Cluster, ClusterObjects, WriteRefused
from tests.e2e.control_plane import ControlPlane, Json, wait_for
from tests.e2e.objects import GATE, PHALANX
from tests.e2e.stack import Stack

NAMESPACE = "contract"
NODES = ("contract-n0", "contract-n1")
FOREIGN_GATE = "example.com/foreign"
ANNOTATION = "scheduling.phalanx.dev/last-start-timestamp"
UNSCHEDULABLE = Condition(
    type="PodScheduled", status="False", reason="Unschedulable", message="0/2 nodes are available"
)
WRITTEN = ("PodScheduled", "DisruptionTarget")
"""The Pod conditions the scheduler writes (the API server adds SchedulingGated itself)."""
SCHEDULED = Condition(type="PodGroupScheduled", status="False", reason="Unschedulable", message="gang needs 2")


def pod(name: str, node: str | None = None, gates: tuple[str, ...] = (), grace: int | None = None) -> Json:
    spec: Json = {"schedulerName": "contract", "containers": [{"name": "c", "image": "busybox"}]}
    if node:
        spec["nodeName"] = node
    if gates:
        spec["schedulingGates"] = [{"name": g} for g in gates]
    if grace is not None:
        spec["terminationGracePeriodSeconds"] = grace
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NAMESPACE}, "spec": spec}


def group(name: str) -> Json:
    return {
        "apiVersion": PHALANX,
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}},
    }


class World:
    """What happens to the cluster outside the scheduler, on either back end."""

    def vanish(self, name: str) -> None: ...

    def annotate_group(self, name: str, key: str, value: str) -> None: ...


@dataclass(frozen=True, slots=True)
class Case:
    objects: tuple[Json, ...]
    act: Callable[[Cluster, ClusterObjects, World], None]
    look: tuple[str, ...]
    """The objects compared afterwards: `pods/<name>` or `podgroups/<name>`."""


def key(name: str) -> str:
    return f"{NAMESPACE}/{name}"


CASES = [
    pytest.param(
        Case((pod("p"),), lambda c, o, w: c.bind(o.pods[key("p")], NODES[0]), ("pods/p",)),
        id="a Binding places the pod",
    ),
    pytest.param(
        Case((pod("p", node=NODES[0]),), lambda c, o, w: c.bind(o.pods[key("p")], NODES[1]), ("pods/p",)),
        id="a Binding of a pod already bound leaves it where it is, refused by nobody",
    ),
    pytest.param(
        Case(
            (pod("p"),),
            lambda c, o, w: (w.vanish("p"), c.bind(o.pods[key("p")], NODES[0])),
            ("pods/p",),
        ),
        id="a Binding of a pod that vanished is refused with the server's answer",
    ),
    pytest.param(
        Case(
            (pod("p", gates=(FOREIGN_GATE, GATE)),),
            lambda c, o, w: c.remove_scheduling_gate(o.pods[key("p")], GATE),
            ("pods/p",),
        ),
        id="a gate removal takes only our gate",
    ),
    pytest.param(
        Case(
            (pod("p"),),
            lambda c, o, w: c.set_nominated_node(o.pods[key("p")], NODES[1]),
            ("pods/p",),
        ),
        id="a nomination is set",
    ),
    pytest.param(
        Case(
            (pod("p", node=NODES[0]),),
            lambda c, o, w: c.set_nominated_node(o.pods[key("p")], NODES[1]),
            ("pods/p",),
        ),
        id="a nomination of a bound pod is refused with the server's answer",
    ),
    pytest.param(
        Case(
            (pod("p"),),
            lambda c, o, w: c.set_pod_condition(o.pods[key("p")], UNSCHEDULABLE),
            ("pods/p",),
        ),
        id="a PodScheduled condition is written",
    ),
    pytest.param(
        Case(
            (pod("p"),),
            lambda c, o, w: (w.vanish("p"), c.set_pod_condition(o.pods[key("p")], UNSCHEDULABLE)),
            ("pods/p",),
        ),
        id="a condition for a pod that vanished is no error",
    ),
    pytest.param(
        Case(
            (pod("running", node=NODES[0], grace=30), pod("pending", grace=30)),
            lambda c, o, w: (c.delete_pod(o.pods[key("running")], None), c.delete_pod(o.pods[key("pending")], None)),
            ("pods/running", "pods/pending"),
        ),
        id="a deletion leaves a bound pod terminating and removes a pending one",
    ),
    pytest.param(
        Case(
            (pod("gone", node=NODES[0]),),
            lambda c, o, w: (w.vanish("gone"), c.delete_pod(o.pods[key("gone")], 0)),
            ("pods/gone",),
        ),
        id="a deletion of a pod that vanished is no error",
    ),
    pytest.param(
        Case(
            (group("g"),),
            lambda c, o, w: (
                c.set_pod_group_condition(o.pod_groups[key("g")], SCHEDULED),
                c.annotate_pod_group(o.pod_groups[key("g")], ANNOTATION, "2026-11-24T12:00:00Z"),
            ),
            ("podgroups/g",),
        ),
        id="a PodGroup condition and annotation are written",
    ),
    pytest.param(
        Case(
            (group("g"),),
            lambda c, o, w: (
                w.annotate_group("g", "example.com/touched", "yes"),
                c.set_pod_group_condition(o.pod_groups[key("g")], SCHEDULED),
            ),
            ("podgroups/g",),
        ),
        id="a PodGroup condition written from a stale resourceVersion keeps the change it missed",
    ),
]


def shown(objects: ClusterObjects, what: str) -> Any:
    """What the contract compares of one object: the fields the scheduler writes, and whether it is there."""
    kind, _, name = what.partition("/")
    if kind == "pods":
        p: Pod | None = objects.pods.get(key(name))
        if p is None:
            return None
        conditions = sorted((c.type, c.status, c.reason, c.message) for c in p.status.conditions)
        return {
            "node": p.spec.node_name,
            "gates": [g.name for g in p.spec.scheduling_gates],
            "nominated": p.status.nominated_node_name,
            "terminating": p.metadata.deletion_timestamp is not None,
            "conditions": [c for c in conditions if c[0] in WRITTEN and c[2] != "SchedulingGated"],
        }
    g: PodGroup | None = objects.pod_groups.get(key(name))
    if g is None:
        return None
    return {
        "conditions": sorted((c.type, c.status, c.reason, c.message) for c in g.status.conditions),
        "annotations": {k: v for k, v in g.metadata.annotations.items() if not k.startswith("kubectl.")},
    }


@pytest.fixture(scope="module")
def kube(stack: Stack) -> Iterator[KubeCluster]:
    """The Kubernetes back end as the admin, beside the suite's scheduler (which ignores these pods)."""
    plane: ControlPlane = stack.plane
    api = plane.api()
    api.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    for name in NODES:
        resources = {"cpu": "4", "memory": "16Gi", "pods": "110"}
        api.apply(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name},
                "spec": {"taints": [{"key": "contract", "value": "yes", "effect": "NoSchedule"}]},
                "status": {"capacity": resources, "allocatable": resources},
            }
        )
    cluster = KubeCluster(api_client(plane.admin_kubeconfig, "scheduler"), identity="contract")
    cluster.start()
    assert cluster.wait_synced(30)
    yield cluster
    cluster.stop()
    for name in NODES:
        api.delete(f"/api/v1/nodes/{name}")
    api.delete(f"/api/v1/namespaces/{NAMESPACE}")


def settle(cluster: KubeCluster) -> ClusterObjects:
    """The view once every write in flight has landed and the informer shows it."""

    def landed() -> ClusterObjects | None:
        objects = cluster.objects()
        return objects if cluster.ledger.in_flight() == 0 else None

    settled: ClusterObjects = wait_for(landed, timeout=20, what="the writes in flight to land")
    return settled


class KubeWorld(World):
    def __init__(self, plane: ControlPlane) -> None:
        self.api = plane.api()

    def vanish(self, name: str) -> None:
        self.api.delete(f"/api/v1/namespaces/{NAMESPACE}/pods/{name}", grace_period_seconds=0)

    def annotate_group(self, name: str, key_: str, value: str) -> None:
        path = f"/apis/{PHALANX}/namespaces/{NAMESPACE}/podgroups/{name}"
        self.api.patch(path, {"metadata": {"annotations": {key_: value}}})


class MemoryWorld(World):
    def __init__(self, cluster: MemoryCluster) -> None:
        self.cluster = cluster

    def vanish(self, name: str) -> None:
        self.cluster.objects().pods.pop(key(name), None)

    def annotate_group(self, name: str, key_: str, value: str) -> None:
        current = self.cluster.objects().pod_groups[key(name)]
        annotations = {**current.metadata.annotations, key_: value}
        version = str(int(current.metadata.resource_version or 0) + 1)
        metadata = current.metadata.model_copy(update={"annotations": annotations, "resource_version": version})
        self.cluster.objects().pod_groups[key(name)] = current.model_copy(update={"metadata": metadata})


def refusal(act: Callable[[], Any]) -> str | None:
    """The server's answer when `act` raises `WriteRefused` (`<write> <object>: <answer>`), else None."""
    try:
        act()
    except WriteRefused as err:
        return str(err).split(": ", 1)[1]
    return None


@pytest.mark.parametrize("case", CASES)
def test_both_back_ends_answer_the_same(case: Case, kube: KubeCluster, stack: Stack) -> None:
    api = stack.plane.api()
    for obj in case.objects:
        api.delete(
            f"/api/v1/namespaces/{NAMESPACE}/pods/{obj['metadata']['name']}"
            if obj["kind"] == "Pod"
            else f"/apis/{PHALANX}/namespaces/{NAMESPACE}/podgroups/{obj['metadata']['name']}",
            grace_period_seconds=0,
        )
    names = {f"{'pods' if o['kind'] == 'Pod' else 'podgroups'}/{o['metadata']['name']}" for o in case.objects}
    wait_for(lambda: all(shown(kube.objects(), n) is None for n in names), what="the previous case's objects gone")
    for obj in case.objects:
        api.create(
            f"/api/v1/namespaces/{NAMESPACE}/pods"
            if obj["kind"] == "Pod"
            else f"/apis/{PHALANX}/namespaces/{NAMESPACE}/podgroups",
            obj,
        )

    def created() -> ClusterObjects | None:
        objects = kube.objects()
        return objects if all(shown(objects, n) is not None for n in names) else None

    seen: ClusterObjects = wait_for(created, what="the case's objects")
    # a copy: the view's next `objects()` (in `settle`) brings its own tables up to date, the vanished pod gone
    before = replace(seen, pods=dict(seen.pods), pod_groups=dict(seen.pod_groups))
    memory = MemoryCluster(
        ClusterObjects(
            nodes=dict(before.nodes),
            pods={k: p for k, p in before.pods.items() if k.startswith(f"{NAMESPACE}/")},
            pod_groups={k: g for k, g in before.pod_groups.items() if k.startswith(f"{NAMESPACE}/")},
        ),
        datetime.now(UTC),
    )
    kube.ledger.refusals()  # only this case's

    kube_refused = refusal(lambda: case.act(kube, before, KubeWorld(stack.plane)))
    after = settle(kube)
    kube_refused = kube_refused or next((r.answer for r in kube.ledger.refusals()), None)
    # `before`, not `memory.objects()`: the memory back end's store is that very dict, and a case that makes a
    # pod vanish then writes the pod it saw before, as a pass does with its snapshot
    memory_refused = refusal(lambda: case.act(memory, before, MemoryWorld(memory)))

    assert memory_refused == kube_refused
    for name in case.look:
        assert shown(memory.objects(), name) == shown(after, name), name


def test_an_event_is_recorded_alike(kube: KubeCluster, stack: Stack) -> None:
    api = stack.plane.api()
    api.create(f"/api/v1/namespaces/{NAMESPACE}/pods", pod("evented"))
    regarding = wait_for(lambda: kube.objects().pods.get(key("evented")), what="the pod")
    memory = MemoryCluster(ClusterObjects(pods={key("evented"): regarding}), datetime.now(UTC))
    for cluster in (kube, memory):
        cluster.record_event(regarding, "Warning", "ContractTest", "the same note")
    [recorded] = memory.events
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        events = [
            e
            for e in api.items(f"/apis/events.k8s.io/v1/namespaces/{NAMESPACE}/events")
            if e.get("reason") == "ContractTest"
        ]
        if events:
            break
        time.sleep(0.1)
    assert [(e["type"], e["reason"], e["note"], e["regarding"]["name"]) for e in events] == [
        (recorded.event_type, recorded.reason, recorded.note, recorded.regarding.split("/")[1])
    ]


def test_a_cache_listed_in_many_pages_holds_every_pod_as_one_read_would(stack: Stack) -> None:
    """The informers LIST in pages (kube.informer.LIST_PAGE): a back end started after more pods than two
    pages exist shows every one of them, each as it reads a pod (requests, tolerations, its node) without
    what no reader needs (a container's image, command and env)."""
    api = stack.plane.api()
    namespace = "contract-pages"
    api.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    count = 2 * LIST_PAGE + 7

    def one(i: int) -> None:
        container = {
            "name": "c",
            "image": "busybox",
            "command": ["sleep", "3600"],
            "env": [{"name": "N", "value": str(i)}],
            "resources": {"requests": {"cpu": "100m"}},
        }
        spec = {"schedulerName": "contract", "nodeName": NODES[i % 2], "containers": [container]}
        body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p-{i}", "namespace": namespace}}
        api.create(f"/api/v1/namespaces/{namespace}/pods", {**body, "spec": spec})

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(one, range(count)))
    cluster = KubeCluster(api_client(stack.plane.admin_kubeconfig, "scheduler"), identity="contract-pages")
    cluster.start()
    try:
        assert cluster.wait_synced(60)
        pods = {k: p for k, p in cluster.objects().pods.items() if k.startswith(f"{namespace}/")}
        assert len(pods) == count
        pod_ = pods[f"{namespace}/p-{count - 1}"]
        assert pod_.effective_requests() == {"cpu": 100}
        assert pod_.spec.node_name == NODES[(count - 1) % 2]
        assert pod_.spec.tolerations  # the server's default NoExecute tolerations
        assert pod_.spec.containers[0].model_extra is None or "env" not in pod_.spec.containers[0].model_extra
    finally:
        cluster.stop()
        api.request("DELETE", f"/api/v1/namespaces/{namespace}/pods?gracePeriodSeconds=0")
        api.delete(f"/api/v1/namespaces/{namespace}")
