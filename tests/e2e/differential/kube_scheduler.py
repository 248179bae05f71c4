"""kube-scheduler 1.36.2 beside the session's running control plane, started by `up.sh` and stopped by its pid.

`up.sh DIR` is idempotent: run again on the running control plane's folder with `KUBE_SCHEDULER=1`, it
starts only kube-scheduler (KEP-5710 gates on, `DIR/scheduler.kubeconfig`, the bootstrap scheduler
roles). `KUBE_SCHEDULER_ARGS` gives it a configuration with one profile whose scheduler name only the
fuzz's pods use, so it never places another test's pod; the pool's taints keep everything else off the
fuzz's nodes. With `--config`, kube-scheduler ignores the deprecated `--kubeconfig` flag `up.sh` passes,
so the configuration names the kubeconfig itself.

Its pod backoff is the suite's Phalanx's (`BACKOFF_SECONDS`, 1 s at most) instead of its default 1-10 s: a
run is settled after `QUIET_SECONDS` without change, and a kube-scheduler retry due after that would be cut
off, its pods counted unbound.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import yaml

from tests.e2e.control_plane import KUBE, ControlPlane
from tests.e2e.differential.live import BACKOFF_SECONDS, KUBE_SCHEDULER_NAME


class KubeScheduler:
    def __init__(self, plane: ControlPlane, work: Path) -> None:
        self.plane = plane
        self.work = work
        self.pid: int | None = None

    @property
    def log(self) -> Path:
        return self.plane.dir / "logs" / "kube-scheduler.log"

    def start(self) -> KubeScheduler:
        config = self.work / "kube-scheduler.yaml"
        config.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "kubescheduler.config.k8s.io/v1",
                    "kind": "KubeSchedulerConfiguration",
                    "clientConnection": {"kubeconfig": str(self.plane.dir / "scheduler.kubeconfig")},
                    "leaderElection": {"leaderElect": False},
                    "podInitialBackoffSeconds": int(BACKOFF_SECONDS),
                    "podMaxBackoffSeconds": int(BACKOFF_SECONDS),
                    "profiles": [{"schedulerName": KUBE_SCHEDULER_NAME}],
                }
            )
        )
        env = {**os.environ, "KUBE_SCHEDULER": "1", "KUBE_SCHEDULER_ARGS": f"--config={config}"}
        done = subprocess.run(
            [str(KUBE / "up.sh"), str(self.plane.dir)], capture_output=True, text=True, env=env, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(f"up.sh with KUBE_SCHEDULER=1 failed ({done.returncode}): {done.stderr[-2000:]}")
        self.pid = int((self.plane.dir / "run" / "kube-scheduler.pid").read_text())
        return self

    def stop(self) -> None:
        """SIGTERM to the process this object started (and SIGKILL after 10 s); its pid file goes with it."""
        if self.pid is None:
            return
        try:
            os.kill(self.pid, signal.SIGTERM)
            for _ in range(100):
                os.kill(self.pid, 0)
                time.sleep(0.1)
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        (self.plane.dir / "run" / "kube-scheduler.pid").unlink(missing_ok=True)
        self.pid = None
