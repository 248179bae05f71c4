"""Stopping (issue 24): what is only queued is dropped, what is on the wire finished until a deadline, a gang's
min-runtime start always written; `phalanx scheduler` exits in bounded time when the API server stops answering,
and at once on a second signal.

The end-to-end figures (10,000 pods pending, a standby taking over) are in `tests/e2e/test_shutdown.py`; these are
the faults only the loopback server makes on demand: a slow answer, no answer at all.
"""

from __future__ import annotations

import re
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kube.client import api_client
from scheduler.api.meta import Condition
from scheduler.api.pod_group import LAST_START_ANNOTATION, PodGroup
from scheduler.cluster.kube import KubeCluster
from scheduler.cluster.kube.lanes import Stopped
from scheduler.cluster.kube.process import EXIT_SECONDS
from tests.apiserver import ApiServer
from tests.builders import make_node, make_pod, make_podgroup
from tests.kube.replica import PG_GROUP, CliReplica, Replica, fast_config, lease_holder
from tests.kube.stored import stored_pod
from tests.polling import wait_for

UNSCHEDULABLE = Condition(type="PodScheduled", status="False", reason="Unschedulable", message="0/1 nodes fit")
PODS = "/api/v1/namespaces/default/pods"
GROUPS = f"/apis/{PG_GROUP}/v1alpha1/namespaces/default/podgroups"


@pytest.fixture
def leading() -> threading.Event:
    """Whether the cluster below holds the Lease (`may_write`); a test clears it to hand the Lease back."""
    holds = threading.Event()
    holds.set()
    return holds


@pytest.fixture
def cluster(apiserver: ApiServer, kubeconfig: Path, leading: threading.Event) -> Iterator[KubeCluster]:
    apiserver.create(make_node("n0").cap(cpu="8", memory="8Gi").json())
    for i in range(20):
        apiserver.create(make_pod(f"p{i}").json())
    api = api_client(kubeconfig, "scheduler")
    kube = KubeCluster(api, identity="stopping", may_write=leading.is_set, request_timeout_seconds=5.0)
    kube.start()
    assert kube.wait_synced(10)
    yield kube
    kube.stop(deadline=time.monotonic())


def sent(server: ApiServer, method: str, path: str) -> int:
    return sum(1 for r in server.requests_matching(method, path) if r.path == path)


def test_a_stop_finishes_what_is_on_the_wire_and_drops_what_is_queued(
    apiserver: ApiServer, cluster: KubeCluster
) -> None:
    apiserver.delay("POST", f"{PODS}/p0/binding", seconds=1.0)
    apiserver.delay("PATCH", f"{PODS}/p1/status", seconds=1.0)
    cluster.bind(stored_pod(apiserver, "p0"), "n0")
    for i in range(1, 20):
        cluster.set_pod_condition(stored_pod(apiserver, f"p{i}"), UNSCHEDULABLE)
    wait_for(lambda: sent(apiserver, "POST", f"{PODS}/p0/binding") and sent(apiserver, "PATCH", f"{PODS}/p1/status"))
    started = time.monotonic()
    assert cluster.stop(deadline=started + 4.0) == Stopped(dropped={"pod-conditions": 18}, unfinished={})
    assert time.monotonic() - started > 0.5, "the writes on the wire were waited for"
    assert stored_pod(apiserver, "p0").spec.node_name == "n0"
    written = stored_pod(apiserver, "p1").condition("PodScheduled")
    assert written is not None and written.message == UNSCHEDULABLE.message
    assert [i for i in range(2, 20) if sent(apiserver, "PATCH", f"{PODS}/p{i}/status")] == []


def test_a_stop_leaves_a_write_that_gets_no_answer_at_its_deadline(apiserver: ApiServer, cluster: KubeCluster) -> None:
    apiserver.hang("POST", f"{PODS}/p0/binding", seconds=30)
    cluster.bind(stored_pod(apiserver, "p0"), "n0")
    wait_for(lambda: sent(apiserver, "POST", f"{PODS}/p0/binding"))
    started = time.monotonic()
    assert cluster.stop(deadline=started + 0.5) == Stopped(dropped={}, unfinished={"bindings": 1})
    assert time.monotonic() - started < 1.5


def test_a_gangs_min_runtime_start_is_written_though_only_queued(
    apiserver: ApiServer, cluster: KubeCluster, leading: threading.Event
) -> None:
    """The next leader finds the gang running and never writes its start: dropped, the gang would have no
    min-runtime protection. So a start is sent though only queued (here behind four slow ones), after the
    Lease is handed back too; a condition queued is dropped, and the next leader writes it again."""
    starts, conditions = [f"start-{i}" for i in range(5)], ["cond-0", "cond-1"]
    for name in starts + conditions:
        apiserver.create(make_podgroup(name).gang(2).json())
    wait_for(lambda: {f"default/{g}" for g in starts + conditions} <= set(cluster.objects().pod_groups))
    stored = {g: PodGroup.model_validate(apiserver.get("podgroups", g, "default", group=PG_GROUP)) for g in starts}
    for name in starts[:4]:  # the four workers of the starts' lane, busy
        apiserver.delay("PATCH", f"{GROUPS}/{name}", seconds=1.0)
    apiserver.delay("PATCH", f"{GROUPS}/cond-0/status", seconds=1.0)
    waiting = Condition(type="PodGroupScheduled", status="False", reason="Unschedulable", message="1/2 fit")
    for name in conditions:  # the second queued behind the first: dropped
        group = PodGroup.model_validate(apiserver.get("podgroups", name, "default", group=PG_GROUP))
        cluster.set_pod_group_condition(group, waiting)
    for name in starts:
        cluster.annotate_pod_group(stored[name], LAST_START_ANNOTATION, "2026-11-24T12:00:00Z")
    wait_for(lambda: all(sent(apiserver, "PATCH", f"{GROUPS}/{g}") for g in starts[:4]))
    assert not sent(apiserver, "PATCH", f"{GROUPS}/{starts[4]}"), "the fifth start is queued"
    cluster.stop_writing()
    leading.clear()  # the Lease handed back
    stopped = cluster.stop(deadline=time.monotonic() + 4.0)
    assert stopped == Stopped(dropped={"podgroup-conditions": 1}, unfinished={})
    for name in starts:
        group = PodGroup.model_validate(apiserver.get("podgroups", name, "default", group=PG_GROUP))
        assert group.metadata.annotations[LAST_START_ANNOTATION] == "2026-11-24T12:00:00Z", name
    assert not sent(apiserver, "PATCH", f"{GROUPS}/cond-1/status")


def leader_with_writes_hung(apiserver: ApiServer, kubeconfig: Path, tmp_path: Path) -> CliReplica:
    """`phalanx scheduler` leading, with pending pods, on an API server that then stops answering: a
    PodScheduled write and a Lease renewal are on the wire, and nothing more gets an answer."""
    leader = CliReplica(tmp_path, kubeconfig, fast_config(leader_elect=True), "leader").start()
    wait_for(lambda: lease_holder(apiserver) == "leader", timeout=20)
    apiserver.hang("*", "/", seconds=60, times=1_000_000)
    for i in range(5):
        apiserver.create(make_pod(f"late-{i}").req(cpu="100").json())
    wait_for(lambda: any(r.path.endswith("/status") for r in apiserver.requests_matching("PATCH", PODS)))
    return leader


def test_sigterm_exits_in_bounded_time_when_the_api_server_stops_answering(
    apiserver: ApiServer, kubeconfig: Path, tmp_path: Path, replicas: list[Replica | CliReplica]
) -> None:
    leader = leader_with_writes_hung(apiserver, kubeconfig, tmp_path)
    replicas.append(leader)
    assert leader.proc is not None
    sent_at = time.monotonic()
    leader.proc.send_signal(signal.SIGTERM)
    status = leader.proc.wait(timeout=30)
    exited = time.monotonic() - sent_at
    print(f"\nAPI server not answering: SIGTERM -> exited: {exited:.2f} s")
    assert exited < EXIT_SECONDS < 10, leader.log()[-3000:]
    assert status == 0, leader.log()[-3000:]
    assert re.search(r"\] stopped .*unfinished=\{'pod-conditions': 1\}", leader.log()), leader.log()[-3000:]


def test_a_second_signal_exits_at_once(
    apiserver: ApiServer, kubeconfig: Path, tmp_path: Path, replicas: list[Replica | CliReplica]
) -> None:
    leader = leader_with_writes_hung(apiserver, kubeconfig, tmp_path)
    replicas.append(leader)
    assert leader.proc is not None
    leader.proc.send_signal(signal.SIGTERM)
    time.sleep(0.5)  # stopping: waiting for the write on the wire
    sent_at = time.monotonic()
    leader.proc.send_signal(signal.SIGINT)
    status = leader.proc.wait(timeout=30)
    exited = time.monotonic() - sent_at
    print(f"\nsecond signal -> exited: {exited:.2f} s")
    assert exited < 1.0, leader.log()[-3000:]
    assert status == 128 + signal.SIGINT
    assert "second signal, exiting now" in leader.log()
