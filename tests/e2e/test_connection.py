"""How the scheduler connects to the real API server: the kubeconfig's TLS settings hold for its writes as for its
watches, though the writes go over connections of their own (`kube/transport.py`)."""

from __future__ import annotations

import urllib.parse

import yaml

from tests.e2e.objects import Pool
from tests.e2e.stack import Stack

AS_ONE_NUMBER = "2130706433"
"""127.0.0.1 written as one number: the resolver takes it, and the server's certificate does not name it."""


def test_writes_check_the_certificate_against_the_kubeconfigs_tls_server_name(phalanx: Stack, pool: Pool) -> None:
    """A kubeconfig that reaches the API server at an address its certificate lacks, with `tls-server-name` naming
    one it has (as behind a load balancer): the pod is bound only if the Binding's connection checks the
    certificate against that name, as the informers' does."""
    config = yaml.safe_load(phalanx.plane.user_kubeconfig.read_text())
    cluster = config["clusters"][0]["cluster"]
    port = urllib.parse.urlsplit(cluster["server"]).port
    cluster["server"] = f"https://{AS_ONE_NUMBER}:{port}"
    cluster["tls-server-name"] = "kubernetes"
    kubeconfig = phalanx.work / "tls-server-name.kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(config))
    assert phalanx.scheduler is not None
    phalanx.scheduler.stop()
    try:
        phalanx.start_scheduler(kubeconfig=kubeconfig)
        (node,) = pool.add_nodes(1, cpu="4")
        pool.create(pool.pod("p", cpu="1"))
        assert pool.wait_bound(["p"]) == {"p": node}
    finally:
        assert phalanx.scheduler is not None
        phalanx.scheduler.stop()
        phalanx.start_scheduler()
