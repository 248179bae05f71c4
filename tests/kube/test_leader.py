"""Leader election on a Lease: one writer, failover within the lease duration, a deposed leader stops at once."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

from tests.apiserver import ApiServer
from tests.builders import make_node, make_pod
from tests.kube.replica import CliReplica, Replica, fast_config, lease_holder, node_of
from tests.polling import wait_for

LEASE_DURATION = round(fast_config().leader_election.lease_duration_seconds)
"""As the Lease holds it: `leaseDurationSeconds` is whole seconds, so the 1.5 s of the configuration is written (and
waited out by a standby) as 2."""


def test_standby_takes_over_within_lease_duration_after_leader_is_killed(
    apiserver: ApiServer, kubeconfig: Path, tmp_path: Path, replicas: list[Replica | CliReplica]
) -> None:
    apiserver.create(make_node("n0").cap(cpu="8", memory="8Gi").json())
    first = CliReplica(tmp_path, kubeconfig, fast_config(leader_elect=True), "first").start()
    replicas.append(first)
    wait_for(lambda: lease_holder(apiserver) == "first", timeout=20)
    standby = Replica(apiserver, kubeconfig, fast_config(leader_elect=True), "second").start()
    replicas.append(standby)
    apiserver.create(make_pod("before").req(cpu="1").json())
    wait_for(lambda: node_of(apiserver, "before"))
    assert lease_holder(apiserver) == "first"
    first.kill()
    killed = time.monotonic()
    wait_for(lambda: lease_holder(apiserver) == "second")
    assert time.monotonic() - killed < LEASE_DURATION + 1.5
    apiserver.create(make_pod("after").req(cpu="1").json())
    wait_for(lambda: node_of(apiserver, "after"))
    lease = apiserver.get("leases", "phalanx-scheduler", "kube-system", group="coordination.k8s.io")
    assert lease is not None
    assert lease["spec"]["leaseTransitions"] == 1


def test_graceful_shutdown_releases_the_lease(
    apiserver: ApiServer, kubeconfig: Path, tmp_path: Path, replicas: list[Replica | CliReplica]
) -> None:
    first = CliReplica(tmp_path, kubeconfig, fast_config(leader_elect=True), "first").start()
    replicas.append(first)
    wait_for(lambda: lease_holder(apiserver) == "first", timeout=20)
    assert first.terminate() == 0
    assert lease_holder(apiserver) == ""


def test_deposed_leader_stops_writing_at_once(
    apiserver: ApiServer, kubeconfig: Path, replicas: list[Replica | CliReplica]
) -> None:
    apiserver.create(make_node("n0").cap(cpu="8", memory="8Gi").json())
    leader = Replica(apiserver, kubeconfig, fast_config(leader_elect=True), "a").start()
    replicas.append(leader)
    wait_for(lambda: lease_holder(apiserver) == "a")
    wait_for(leader.process.elector.is_leader if leader.process.elector else None)
    lease = apiserver.get("leases", "phalanx-scheduler", "kube-system", group="coordination.k8s.io")
    assert lease is not None
    lease["spec"]["holderIdentity"] = "usurper"
    lease["spec"]["renewTime"] = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    apiserver.apply(lease)
    elector = leader.process.elector
    assert elector is not None
    wait_for(lambda: not elector.is_leader(), timeout=1.0)
    apiserver.create(make_pod("p").req(cpu="1").json())
    time.sleep(0.5)
    assert node_of(apiserver, "p") is None
    assert not apiserver.requests_matching("POST", "/api/v1/namespaces/default/pods/p/binding")
    assert leader.process.metrics.registry.get_sample_value("phalanx_scheduler_leader") == 0
