"""The scheduler's pod cache keeps one object for the equal parts of pods made from one template (`kube.footprint`),
and every cached pod still reads as the server sent it."""

from __future__ import annotations

from pathlib import Path

from scheduler.api.wire import prune
from tests.apiserver import ApiServer
from tests.builders import PodWrapper, make_node, make_pod
from tests.kube.replica import CliReplica, Replica, fast_config, node_of
from tests.polling import wait_for


def template(name: str) -> PodWrapper:
    """A Job's pod: its container, toleration and affinity come from the Job's template."""
    return (
        make_pod(name)
        .req(cpu="1", memory="1Gi")
        .toleration("gpu", effect="NoSchedule", operator="Exists")
        .preferred_node("zone", "a")
    )


def test_pods_of_one_template_share_their_parts_and_keep_what_differs(
    apiserver: ApiServer, kubeconfig: Path, replicas: list[Replica | CliReplica]
) -> None:
    """A Job's pods hold one container, toleration and affinity between them. A pod whose container asks for more
    keeps its own container but shares the rest, and one whose container differs only in a field it sets to its
    default (`ports: []`) keeps its own too, so that each reads back as the server sent it."""
    apiserver.create(make_node("n0").cap(cpu="64", memory="64Gi").json())
    sent = {name: template(name).json() for name in ("a", "b")}
    sent["bigger"] = template("bigger").req(cpu="2", memory="1Gi").json()
    sent["ports"] = template("ports").json()
    sent["ports"]["spec"]["containers"][0]["ports"] = []
    for pod in sent.values():
        apiserver.create(pod)
    replica = Replica(apiserver, kubeconfig, fast_config(), "a").start()
    replicas.append(replica)
    pods = replica.process.cluster.view.pods

    def cached_bound() -> bool:
        cached = pods.items()
        return all(name in cached and cached[name].spec.node_name for name in (f"default/{n}" for n in sent))

    wait_for(lambda: all(node_of(apiserver, name) for name in sent))
    wait_for(cached_bound)
    cached = {name: pods.items()[f"default/{name}"] for name in sent}
    a, b = cached["a"].spec, cached["b"].spec
    assert a.containers[0] is b.containers[0]
    assert a.tolerations[0] is b.tolerations[0]
    assert a.affinity is b.affinity
    bigger, ports = cached["bigger"].spec, cached["ports"].spec
    assert bigger.containers[0] is not a.containers[0]
    assert bigger.tolerations[0] is a.tolerations[0]
    assert bigger.affinity is a.affinity
    assert ports.containers[0] is not a.containers[0]
    for name, pod in cached.items():
        stored = apiserver.get("pods", name, "default")
        assert stored is not None
        assert pod.spec.to_json() == prune("pods", stored)["spec"], name
