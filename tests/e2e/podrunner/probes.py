"""Readiness, liveness and startup probes, with the kubelet's timing and thresholds.

httpGet (HTTP or HTTPS, certificate not verified, as the kubelet does; 200-399 is success) and
tcpSocket are run against the pod's IP from the host, as the kubelet reaches its pods. `exec` and `grpc`
probes are not supported: they fail with a message saying so.
"""

from __future__ import annotations

import http.client
import socket
import ssl
import time
from dataclasses import dataclass, field

from tests.e2e.control_plane import Json

_INSECURE = ssl.create_default_context()
_INSECURE.check_hostname = False
_INSECURE.verify_mode = ssl.CERT_NONE


def resolve_port(port: int | str, container: Json) -> int:
    if isinstance(port, int) or str(port).isdigit():
        return int(port)
    for declared in container.get("ports") or []:
        if declared.get("name") == port:
            return int(declared["containerPort"])
    raise ValueError(f"port {port!r} is not a named port of container {container['name']}")


def attempt(spec: Json, address: str, container: Json) -> tuple[bool, str]:
    """One probe: (succeeded, what failed)."""
    timeout = float(spec.get("timeoutSeconds", 1))
    try:
        if "httpGet" in spec:
            get = spec["httpGet"]
            port, host = resolve_port(get["port"], container), get.get("host") or address
            if get.get("scheme", "HTTP").upper() == "HTTPS":
                connection: http.client.HTTPConnection = http.client.HTTPSConnection(
                    host, port, timeout=timeout, context=_INSECURE
                )
            else:
                connection = http.client.HTTPConnection(host, port, timeout=timeout)
            headers = {h["name"]: h["value"] for h in get.get("httpHeaders") or []}
            try:
                connection.request("GET", get.get("path", "/"), headers={"User-Agent": "kube-probe/1.36", **headers})
                status = connection.getresponse().status
            finally:
                connection.close()
            return 200 <= status < 400, f"HTTP probe failed with statuscode: {status}"
        if "tcpSocket" in spec:
            with socket.create_connection((address, resolve_port(spec["tcpSocket"]["port"], container)), timeout):
                return True, ""
    except (OSError, ValueError, http.client.HTTPException) as err:
        return False, f"Get probe: {err}"
    kinds = sorted(set(spec) & {"exec", "grpc"})
    return False, f"{', '.join(kinds) or 'this'} probes are not supported by the pod runner"


@dataclass(slots=True)
class Probe:
    """One probe of one container: when it is due next and what its thresholds make of the results."""

    spec: Json
    started: float = field(default_factory=time.monotonic)
    passed: bool = False
    _successes: int = 0
    _failures: int = 0
    _next: float = 0.0
    last_message: str = ""

    def __post_init__(self) -> None:
        self._next = self.started + float(self.spec.get("initialDelaySeconds", 0))

    def due(self, now: float) -> bool:
        return now >= self._next

    def run(self, address: str, container: Json, now: float) -> None:
        self._next = now + float(self.spec.get("periodSeconds", 10))
        ok, message = attempt(self.spec, address, container)
        if ok:
            self._successes, self._failures = self._successes + 1, 0
            if self._successes >= int(self.spec.get("successThreshold", 1)):
                self.passed = True
        else:
            self._successes, self._failures, self.last_message = 0, self._failures + 1, message
            if self._failures >= int(self.spec.get("failureThreshold", 3)):
                self.passed = False

    @property
    def failed_out(self) -> bool:
        """failureThreshold consecutive failures (for liveness and startup: restart the container)."""
        return self._failures >= int(self.spec.get("failureThreshold", 3))
