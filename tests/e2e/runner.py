"""The pod runner (`tests/e2e/podrunner`) as a child process of the test session, and what it leaves behind.

A watchdog shell process outlives the runner: when the runner exits for any reason (SIGKILL included),
it sweeps the network namespaces and links named with the runner's prefix and kills the processes left
in them, so a killed test run leaves nothing on the machine. The runner itself stops when the pytest
process that started it is gone.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
from pathlib import Path

from tests.e2e.control_plane import ROOT, ControlPlane
from tests.polling import wait_for


class PodRunner:
    """One node that runs the pods bound to it, on `plane`."""

    def __init__(self, plane: ControlPlane, node: str, state: Path, token_refresh_seconds: float | None = None) -> None:
        self.plane = plane
        self.node = node
        self.state = state
        self.prefix = f"phx{secrets.token_hex(2)}"
        self.token_refresh_seconds = token_refresh_seconds
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def log_path(self) -> Path:
        return self.state / "runner.log"

    def start(self) -> PodRunner:
        self.state.mkdir(parents=True, exist_ok=True)
        args = [
            sys.executable,
            "-m",
            "tests.e2e.podrunner",
            f"--kube-dir={self.plane.dir}",
            f"--node={self.node}",
            f"--state={self.state}",
            f"--prefix={self.prefix}",
            f"--owner-pid={os.getpid()}",
        ]
        if self.token_refresh_seconds is not None:
            args.append(f"--token-refresh-seconds={self.token_refresh_seconds}")
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, start_new_session=True)
        sweep = f"{sys.executable} -m tests.e2e.podrunner --sweep {self.prefix}"
        subprocess.Popen(
            ["bash", "-c", f'while kill -0 {self.proc.pid} 2>/dev/null; do sleep 1; done; cd "{ROOT}" && {sweep}'],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        api = self.plane.api()
        wait_for(lambda: self._registered(api), timeout=30, what=f"pod runner node {self.node} to register")
        return self

    def _registered(self, api: object) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"pod runner exited:\n{self.log()[-3000:]}")
        return self.plane.api().get(f"/api/v1/nodes/{self.node}") is not None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def container_log_path(self, uid: str, container: str) -> Path:
        """Where the container's output goes; the file exists once the container was started."""
        return self.state / "pods" / uid / f"{container}.log"

    def container_log(self, uid: str, container: str) -> str:
        path = self.container_log_path(uid, container)
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
