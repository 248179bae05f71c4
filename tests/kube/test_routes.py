"""The scheduler takes its API routes by name (`kube.routes`), without loading the client's generated API classes."""

from __future__ import annotations

import re
from pathlib import Path

from tests.apiserver import ApiServer
from tests.builders import make_node, make_pod
from tests.kube.replica import CliReplica, Replica, fast_config, node_of
from tests.polling import wait_for

EVENTS = "/apis/events.k8s.io/v1/namespaces/default/events"


def test_a_scheduler_lists_watches_and_binds_without_loading_a_generated_api_class(
    apiserver: ApiServer, kubeconfig: Path, tmp_path: Path, replicas: list[Replica | CliReplica]
) -> None:
    """CoreV1Api's module alone is tens of MiB of the process and a second of CPU at start: naming a route
    (`client.CoreV1Api.create_namespaced_pod_binding`) is enough to load it, so the process must not. Python's own
    import log (`PYTHONVERBOSE`) of `phalanx scheduler` says what it loaded while it listed, watched, bound a pod
    and sent its Event."""
    apiserver.create(make_node("n0").cap(cpu="8", memory="8Gi").json())
    replica = CliReplica(tmp_path, kubeconfig, fast_config(), "a", env={"PYTHONVERBOSE": "1"}).start()
    replicas.append(replica)
    apiserver.create(make_pod("p").req(cpu="1").json())
    wait_for(lambda: node_of(apiserver, "p"))
    wait_for(lambda: apiserver.requests_matching("POST", EVENTS))
    assert replica.terminate() == 0
    loaded = re.findall(r"^import '(kubernetes\.client\.api\.\w+)'", replica.log(), re.MULTILINE)
    assert not loaded, f"the scheduler loaded the client's API classes: {loaded}"
