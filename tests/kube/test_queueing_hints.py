"""Queueing hints as an operator sees them on `phalanx scheduler`'s /metrics (issue 23): pods that fit nowhere
are not retried while pods that fit are bound, and are retried when a node that fits them arrives."""

from __future__ import annotations

import re
import time
import urllib.request
from pathlib import Path

from tests.apiserver import ApiServer
from tests.builders import make_node, make_pod
from tests.kube.replica import CliReplica, Replica, fast_config, node_of
from tests.polling import wait_for


def metric(port: int, name: str) -> float:
    """The value of one sample on /metrics (`name` with its labels), 0 when absent."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    found = re.search(rf"^{re.escape(name)} (\S+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def test_unschedulable_pods_wait_for_a_helpful_event(
    apiserver: ApiServer, kubeconfig: Path, tmp_path: Path, replicas: list[Replica | CliReplica]
) -> None:
    apiserver.create(make_node("small").cap(cpu="8", memory="8Gi").json())
    for i in range(3):
        apiserver.create(make_pod(f"big-{i}").req(cpu="100").json())
    cli = CliReplica(tmp_path, kubeconfig, fast_config(), "cli").start()
    replicas.append(cli)
    port = cli.metrics_port()
    wait_for(lambda: metric(port, 'scheduler_pending_pods{queue="unschedulable"}') == 3)
    for i in range(6):  # each binding is a change, each after the backoff (0.05-0.2 s) is over
        apiserver.create(make_pod(f"fits-{i}").req(cpu="100m").json())
        wait_for(lambda i=i: node_of(apiserver, f"fits-{i}"))
        time.sleep(0.3)
    wait_for(lambda: metric(port, "phalanx_scheduler_bindings_total") == 6)
    assert metric(port, "phalanx_scheduler_queue_retries_avoided_total") >= 3
    assert metric(port, 'phalanx_scheduler_queue_retries_total{event="node"}') == 0
    assert not any(node_of(apiserver, f"big-{i}") for i in range(3))

    apiserver.create(make_node("large").cap(cpu="400", memory="8Gi").json())
    wait_for(lambda: all(node_of(apiserver, f"big-{i}") == "large" for i in range(3)))
    assert metric(port, 'phalanx_scheduler_queue_retries_total{event="node"}') == 3
    assert cli.terminate() == 0
