"""Each scheduler's own copy of a scenario on the shared real API server: the test as kube-scheduler 1.36.2 sees it
and as Phalanx sees it, side by side, compared once both settled.

The two copies cannot see each other. Each side has its own namespace (affinity terms and spread constraints
count pods of their own namespace) and its own nodes, carrying `SIDE_KEY: <side>`, which that side's pods select.
The nodes are all of the test's pool, with its taint, so each pod finds the other side's nodes rejected for the
same reason in both schedulers and the `0/N nodes are available: ...` counts can be compared word for word.
The `sides` fixture (conftest) needs the module's own `kube_scheduler` fixture.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tests.e2e.control_plane import Json
from tests.e2e.differential.live import KUBE_SCHEDULER_NAME
from tests.e2e.objects import Pool, node
from tests.polling import wait_for

SIDE_KEY = "e2e.phalanx.dev/side"
QUIET_SECONDS = 4.0
"""How long a pending pod is watched for a preemption that should not come: several retries of either scheduler
(Phalanx's longest backoff here is 1 s; kube-scheduler's first retries come after 1 and 2 s)."""
STABLE_SECONDS = 2.0
"""How long a settled scenario must stay unchanged: two retries of either scheduler."""


@dataclass(slots=True)
class Side:
    """One scheduler's copy of a scenario: its namespace, and nodes of the pool labelled for it."""

    pool: Pool
    tag: str
    scheduler: str
    namespace: str

    def node_name(self, role: str) -> str:
        return f"{self.pool.name}-{self.tag}-{role}"

    def role(self, node_name: str) -> str:
        return node_name.removeprefix(f"{self.pool.name}-{self.tag}-")

    def add_node(self, role: str, cpu: str, **labels: str) -> str:
        made = node(self.node_name(role), self.pool.name, cpu)
        made["metadata"]["labels"] |= {SIDE_KEY: self.tag, **labels}
        self.pool.cluster_object(made)  # created with its status, removed with the pool
        return self.node_name(role)

    def pod(
        self,
        name: str,
        cpu: str = "1",
        app: str | None = None,
        priority_class: str | None = None,
        on: str | None = None,
        **spec: object,
    ) -> Json:
        """A pod of this side: selects its nodes; `on` (a node role) binds it directly, a running pod."""
        made = self.pool.pod(
            name,
            cpu=cpu,
            priority_class=priority_class,
            node=None if on is None else self.node_name(on),
            grace=0,  # a victim is gone at once: no kubelet here to finish a graceful deletion
            labels=None if app is None else {"app": app},
            scheduler_name=self.scheduler,
        )
        made["metadata"]["namespace"] = self.namespace
        made["spec"]["nodeSelector"][SIDE_KEY] = self.tag
        made["spec"] |= spec
        return made

    def create(self, *pods: Json) -> None:
        for pod in pods:
            self.pool.api.create(f"/api/v1/namespaces/{self.namespace}/pods", pod)

    def hand_over(self, names: Sequence[str]) -> None:
        """Our webhook gates every member of a native PodGroup, whatever its scheduler (the stack renders the chart
        with `nativeWorkloadAPI`): on kube-scheduler's side the members' gates are removed, as a controller that
        knows its scheduler would; Phalanx removes its own."""
        if self.scheduler != KUBE_SCHEDULER_NAME:
            return
        pods = self.pods()
        for name in names:
            if pods[name]["spec"].get("schedulingGates"):
                path = f"/api/v1/namespaces/{self.namespace}/pods/{name}"
                reply = self.pool.api.patch(path, {"spec": {"schedulingGates": None}})
                assert reply.status == 200, reply.message

    def pods(self) -> dict[str, Json]:
        return {p["metadata"]["name"]: p for p in self.pool.api.items(f"/api/v1/namespaces/{self.namespace}/pods")}

    def placed(self, names: Sequence[str]) -> dict[str, str]:
        """`pod -> node role` of those of `names` that are bound and not terminating."""
        pods = self.pods()
        return {
            n: self.role(pods[n]["spec"]["nodeName"])
            for n in names
            if n in pods and pods[n]["spec"].get("nodeName") and not pods[n]["metadata"].get("deletionTimestamp")
        }

    def unschedulable(self, name: str) -> str | None:
        """The PodScheduled message of `name` once its scheduler found it Unschedulable."""
        pod = self.pods().get(name, {})
        conditions: list[Json] = pod.get("status", {}).get("conditions", [])
        condition = next((c for c in conditions if c["type"] == "PodScheduled"), {})
        message = condition.get("message")
        return message if condition.get("reason") == "Unschedulable" and isinstance(message, str) else None


def fit_error(message: str) -> str:
    """`0/N nodes are available: REASONS` of a PodScheduled message: what follows is each scheduler's preemption's
    own words."""
    return message.split(". ")[0].rstrip(".")


def preemption_words(message: str) -> str:
    """What a PodScheduled message says of preemption, without the scheduler's own prefix (kube-scheduler's
    `preemption: `, Phalanx's `WorkloadPreemption: `)."""
    return re.split(r"[Pp]reemption: ", message)[-1]


def on_both(sides: dict[str, Side], what: Callable[[Side], object]) -> dict[str, object]:
    return {tag: what(side) for tag, side in sides.items()}


Settled = tuple[dict[str, str], dict[str, str]]
"""pod -> node role of the bound pods, pod -> the `0/N nodes are available` part of the others' messages."""


def settled(sides: dict[str, Side], names: Sequence[str]) -> dict[str, Settled]:
    """Per side, once each of `names` is bound or Unschedulable, and that stayed so over two reads `STABLE_SECONDS`
    apart (a scheduler that saw a pod before a node says so again once it sees the node)."""

    def state(side: Side) -> Settled | None:
        placed = side.placed(names)
        said = {n: side.unschedulable(n) for n in names if n not in placed}
        if not all(said.values()):
            return None
        return placed, {n: fit_error(m) for n, m in said.items() if m}

    def both() -> dict[str, Settled] | None:
        found = {tag: state(side) for tag, side in sides.items()}
        return {tag: s for tag, s in found.items() if s is not None} if all(found.values()) else None

    what = f"each of {list(names)} bound or Unschedulable, on both sides"
    before: dict[str, Settled] = wait_for(both, what=what)
    for _ in range(10):
        time.sleep(STABLE_SECONDS)
        now: dict[str, Settled] = wait_for(both, what=what)
        if now == before:
            return now
        before = now
    raise AssertionError(f"still changing after {10 * STABLE_SECONDS:.0f}s: {before}")
