"""`phalanx scheduler` as users run it: flags, /metrics and /healthz, clean exit on SIGTERM."""

from __future__ import annotations

import subprocess
import sys
import urllib.request
from pathlib import Path

from tests.apiserver import ApiServer
from tests.builders import make_node, make_pod, make_podgroup
from tests.kube.replica import GATE, ROOT, CliReplica, Replica, fast_config, node_of
from tests.polling import wait_for


def fetch(port: int, path: str) -> tuple[int, str]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
        return response.status, response.read().decode()


def test_cli_schedules_a_gang_and_serves_metrics(
    apiserver: ApiServer, kubeconfig: Path, tmp_path: Path, replicas: list[Replica | CliReplica]
) -> None:
    apiserver.create(make_node("n0").cap(cpu="8", memory="8Gi").json())
    apiserver.create(make_podgroup("train").gang(2).json())
    for i in range(2):
        apiserver.create(make_pod(f"w{i}").req(cpu="1").group("train").gate(GATE).json())
    cli = CliReplica(tmp_path, kubeconfig, fast_config(), "cli").start()
    replicas.append(cli)
    port = cli.metrics_port()
    wait_for(lambda: node_of(apiserver, "w0") and node_of(apiserver, "w1"), timeout=20)
    assert wait_for(lambda: fetch(port, "/healthz")[0] == 200)
    _, text = fetch(port, "/metrics")
    assert "phalanx_scheduler_bindings_total 2.0" in text
    assert 'scheduler_pending_pods{queue="gated"}' in text
    assert "phalanx_scheduler_e2e_scheduling_duration_seconds_count 2.0" in text
    assert "phalanx_scheduler_leader 1.0" in text
    assert cli.terminate() == 0


def test_cli_rejects_a_bad_config(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("leaderElection:\n  leaseDurationSeconds: soon\n")
    result = subprocess.run(
        [sys.executable, "-m", "phalanx.cli", "scheduler", "--kubeconfig", "x", "--config", str(config)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert result.returncode == 2
    assert "leaseDurationSeconds" in result.stderr
