"""Scheduler replicas for the Kubernetes-facing tests: in-process (a thread) or `phalanx scheduler` (a process).

In-process replicas are the real `SchedulerProcess` on the real client against the loopback
server; the subprocess runs the CLI, for what only a process shows (SIGKILL, signals, ports).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import yaml

from kube.client import api_client
from scheduler.api.config import LeaderElection, SchedulerConfiguration
from scheduler.cluster.kube import SchedulerProcess
from tests.apiserver import ApiServer
from tests.polling import wait_for

ROOT = Path(__file__).resolve().parents[2]
GATE = "scheduling.phalanx.dev/gang"
PG_GROUP = "scheduling.phalanx.dev"


def fast_config(leader_elect: bool = False) -> SchedulerConfiguration:
    """Short lease and backoff so failover and retries happen within a test's second or two."""
    return SchedulerConfiguration(
        backoff_seconds=0.05,
        max_backoff_seconds=0.2,
        leader_election=LeaderElection(
            leader_elect=leader_elect,
            resource_namespace="kube-system",
            lease_duration_seconds=1.5,
            renew_deadline_seconds=1.0,
            retry_period_seconds=0.2,
        ),
    )


def node_of(server: ApiServer, name: str, namespace: str = "default") -> str | None:
    pod = server.get("pods", name, namespace)
    return pod["spec"].get("nodeName") if pod is not None else None


class Replica:
    """`SchedulerProcess.run` in a thread; `stop()` is a graceful shutdown (the Lease is released)."""

    def __init__(
        self,
        server: ApiServer,
        kubeconfig: Path,
        config: SchedulerConfiguration,
        identity: str,
        idle_seconds: float = 1.0,
    ) -> None:
        self.process = SchedulerProcess(
            api_client(kubeconfig, "scheduler"),
            config,
            identity=identity,
            idle_seconds=idle_seconds,
            watch_timeout_seconds=30,
            request_timeout_seconds=1.0,
        )
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self.process.run, args=(self.stop_event,), daemon=True)

    def start(self) -> Replica:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stop_event.set()
        self.thread.join(timeout=10)


class CliReplica:
    """`phalanx scheduler` as a child process, logging to a file."""

    def __init__(
        self,
        tmp_path: Path,
        kubeconfig: Path,
        config: SchedulerConfiguration,
        identity: str,
        env: dict[str, str] | None = None,
    ) -> None:
        self.env = env or {}
        config_path = tmp_path / f"{identity}-config.yaml"
        config_path.write_text(yaml.safe_dump(config.model_dump(by_alias=True, mode="json")))
        self.log_path = tmp_path / f"{identity}.log"
        self.args = [
            sys.executable,
            "-m",
            "phalanx.cli",
            "scheduler",
            "--kubeconfig",
            str(kubeconfig),
            "--config",
            str(config_path),
            "--metrics-bind",
            "127.0.0.1:0",
            "--identity",
            identity,
        ]
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> CliReplica:
        env = {**os.environ, **self.env, "PYTHONPATH": str(ROOT)}
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(self.args, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, env=env)
        return self

    def log(self) -> str:
        return self.log_path.read_text()

    def metrics_port(self) -> int:
        line = wait_for(lambda: next((x for x in self.log().splitlines() if x.startswith("metrics on")), None))
        return int(line.rsplit(":", 1)[1])

    def kill(self) -> None:
        """SIGKILL: no cleanup, no Lease release, as a node failure would do."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)

    def terminate(self) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=15)


def lease_holder(server: ApiServer, name: str = "phalanx-scheduler") -> str | None:
    lease = server.get("leases", name, "kube-system", group="coordination.k8s.io")
    return lease["spec"].get("holderIdentity") if lease is not None else None
