"""Manifests for the end-to-end tests, and a `Pool`: one test's namespace and nodes on the shared control plane.

A pool's nodes carry a taint and a label of the pool's own, and the pool's pods tolerate the one and
select the other, so tests that share the control plane never place pods on each other's nodes.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from tests.e2e.control_plane import Api, ControlPlane, Json, collection_path, object_path
from tests.polling import wait_for

POOL_KEY = "e2e.phalanx.dev/pool"
GROUP_LABEL = "scheduling.phalanx.dev/pod-group"
PHALANX = "scheduling.phalanx.dev/v1alpha1"
NATIVE = "scheduling.k8s.io/v1alpha2"
SCHEDULER_NAME = "phalanx-scheduler"
GATE = "scheduling.phalanx.dev/gang"


def priority_class(name: str, value: int, annotations: dict[str, str] | None = None, **extra: Any) -> Json:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name, "annotations": annotations or {}},
        "value": value,
        **extra,
    }


def given(**fields: Any) -> Json:
    """The fields that were given: a manifest leaves out what is not set."""
    return {name: value for name, value in fields.items() if value is not None}


def node(name: str, pool: str, cpu: str = "4", memory: str = "16Gi") -> Json:
    resources = {"cpu": cpu, "memory": memory, "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {POOL_KEY: pool, "kubernetes.io/hostname": name}},
        "spec": {"taints": [{"key": POOL_KEY, "value": pool, "effect": "NoSchedule"}]},
        "status": {
            "capacity": resources,
            "allocatable": resources,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "e2e node"}],
        },
    }


def create_all(pool: Pool, docs: list[Json], workers: int = 8) -> None:
    """Create `docs` with parallel requests: 10,000 pods one after another take minutes."""
    with ThreadPoolExecutor(workers) as threads:
        for made in threads.map(lambda doc: pool.api.create(collection_path(doc), doc), docs):
            assert made["metadata"]["name"]


@dataclass(slots=True)
class Pool:
    """A namespace and nodes of one test; objects it creates are removed at teardown."""

    plane: ControlPlane
    name: str
    nodes: list[str] = field(default_factory=list)
    api: Api = field(init=False)
    """Requests as the admin, for the test's own set-up and checks."""
    _cluster_objects: list[Json] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.api = self.plane.api()

    @property
    def namespace(self) -> str:
        return self.name

    def add_nodes(self, count: int, cpu: str = "4", memory: str = "16Gi") -> list[str]:
        names = [f"{self.name}-n{len(self.nodes) + i}" for i in range(count)]
        for name in names:
            made = node(name, self.name, cpu, memory)
            self.api.create("/api/v1/nodes", made)  # a Node keeps the status it is created with
            self._cluster_objects.append(made)
        self.nodes.extend(names)
        return names

    def priority_class(self, suffix: str, value: int, **extra: Any) -> str:
        name = f"{self.name}-{suffix}"
        made = priority_class(name, value, **extra)
        self.api.apply(made)
        self._cluster_objects.append(made)
        # The Priority admission plugin resolves classes from its own informer: wait until it knows this one.
        probe = self.pod(f"probe-{suffix}", priority_class=name, scheduler_name=None)
        path = f"{collection_path(probe)}?dryRun=All"
        wait_for(lambda: self.api.request("POST", path, probe).status != 403, what=f"admission to see {name}")
        return name

    def api_as(self, user: str) -> Api:
        """The same server as another identity (`user`: the one our components run as)."""
        return self.plane.api(user)

    def cluster_object(self, doc: Json) -> Json:
        """Create a cluster-scoped object (Queue, policy) that is removed with the pool."""
        made = self.api.apply(doc)
        self._cluster_objects.append(doc)
        return made

    def pod(
        self,
        name: str,
        cpu: str = "1",
        priority_class: str | None = None,
        group: str | None = None,
        node: str | None = None,
        grace: int | None = None,
        native_group: str | None = None,
        labels: dict[str, str] | None = None,
        scheduler_name: str | None = SCHEDULER_NAME,
    ) -> Json:
        """A pod of this pool: tolerates and selects its nodes; `node` binds it directly (a running pod)."""
        spec: Json = {
            "containers": [{"name": "c", "image": "registry.example/app:1", "resources": {"requests": {"cpu": cpu}}}],
            "tolerations": [{"key": POOL_KEY, "operator": "Equal", "value": self.name, "effect": "NoSchedule"}],
            "nodeSelector": {POOL_KEY: self.name},
        }
        spec |= given(
            schedulerName=scheduler_name,
            priorityClassName=priority_class,
            nodeName=node,
            terminationGracePeriodSeconds=grace,
            schedulingGroup=None if native_group is None else {"podGroupName": native_group},
        )
        all_labels = dict(labels or {})
        if group is not None:
            all_labels[GROUP_LABEL] = group
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": self.name, "labels": all_labels},
            "spec": spec,
        }

    def pod_group(
        self,
        name: str,
        policy: Json,
        priority_class: str | None = None,
        disruption_mode: str | None = None,
        api_version: str = PHALANX,
        queue: str | None = None,
    ) -> Json:
        spec: Json = {"schedulingPolicy": policy} | given(
            priorityClassName=priority_class, disruptionMode=disruption_mode, queueName=queue
        )
        meta = {"name": name, "namespace": self.name}
        return {"apiVersion": api_version, "kind": "PodGroup", "metadata": meta, "spec": spec}

    def create(self, *docs: Json) -> list[Json]:
        return [self.api.create(collection_path(doc), doc) for doc in docs]

    def read_pod(self, name: str) -> Json | None:
        return self.api.get(f"/api/v1/namespaces/{self.name}/pods/{name}")

    def pods(self) -> dict[str, Json]:
        return {p["metadata"]["name"]: p for p in self.api.items(f"/api/v1/namespaces/{self.name}/pods")}

    def bound(self, names: Sequence[str]) -> dict[str, str]:
        """`name -> node` for those of `names` that are bound (and not terminating)."""
        pods = self.pods()
        return {
            n: pods[n]["spec"]["nodeName"]
            for n in names
            if n in pods and pods[n]["spec"].get("nodeName") and not pods[n]["metadata"].get("deletionTimestamp")
        }

    def wait_bound(self, names: Sequence[str], timeout: float = 30) -> dict[str, str]:
        wait_for(lambda: len(self.bound(names)) == len(names), timeout=timeout, what=f"{list(names)} bound")
        return self.bound(names)

    def terminating(self) -> list[Json]:
        return [p for p in self.pods().values() if p["metadata"].get("deletionTimestamp")]

    def finish_terminating(self) -> list[str]:
        """Act as the kubelet: remove every Terminating pod now (grace 0, guarded by its uid)."""
        done = []
        for pod in self.terminating():
            meta = pod["metadata"]
            path = f"/api/v1/namespaces/{self.name}/pods/{meta['name']}"
            reply = self.api.delete(path, grace_period_seconds=0, uid=meta["uid"])
            assert reply.status in (200, 404, 409), reply.message
            done.append(meta["name"])
        return done

    def events(self, reason: str | None = None) -> list[Json]:
        events = self.api.items(f"/apis/events.k8s.io/v1/namespaces/{self.name}/events")
        return [e for e in events if reason is None or e.get("reason") == reason]

    def teardown(self) -> None:
        self.api.request("DELETE", f"/api/v1/namespaces/{self.name}")
        for pod in self.pods().values():
            self.api.delete(f"/api/v1/namespaces/{self.name}/pods/{pod['metadata']['name']}", grace_period_seconds=0)
        for doc in reversed(self._cluster_objects):
            self.api.request("DELETE", object_path(doc))
