"""A steady stream of pod creations that must all be admitted by the webhook (bounded, loopback only).

Each pod is a member of a pod group, so with `failurePolicy: Fail` a webhook that cannot be reached
refuses it: one failed creation is one failed admission. A created pod that lacks our scheduling gate
was admitted without the webhook, which counts as a failure too. Each admission's start and end are
kept, so a test proves the stream ran while the disruption it causes was under way, not only before.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from tests.e2e.control_plane import Api

GATE = "scheduling.phalanx.dev/gang"
GROUP_LABEL = "scheduling.phalanx.dev/pod-group"
DURING = 20
"""Admissions the stream must make within a disruption (it makes up to 20 a second, one at a time)."""


@dataclass(slots=True)
class AdmissionStream:
    """Creates a pod every `interval` seconds in `namespace` until stopped; counts what was not admitted."""

    api: Api
    namespace: str
    interval: float = 0.05
    created: int = 0
    failures: list[str] = field(default_factory=list)
    seconds: list[tuple[float, str]] = field(default_factory=list)
    """How long each creation took, with its start: the slowest say how near the webhook came to its timeout."""
    admitted: list[tuple[float, float]] = field(default_factory=list)
    """When each admitted creation was sent and answered (`time.monotonic()`)."""
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> AdmissionStream:
        self.api.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.namespace}})
        self._thread = threading.Thread(target=self._run, name=f"stream-{self.namespace}", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        index = 0
        next_at = time.monotonic()
        while not self._stop.is_set():
            index += 1
            name = f"s{index}"
            pod = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": name, "namespace": self.namespace, "labels": {GROUP_LABEL: "stream"}},
                "spec": {"containers": [{"name": "c", "image": "registry.example/app:1"}]},
            }
            started, clock = time.strftime("%H:%M:%S"), time.monotonic()
            try:
                reply = self.api.request("POST", f"/api/v1/namespaces/{self.namespace}/pods", pod)
            except Exception as err:  # a dropped connection to the API server is a failed creation too
                self.failures.append(f"{started} {name}: {type(err).__name__}: {err}")
            else:
                self.seconds.append((time.monotonic() - clock, f"{started} {name}"))
                gates = [g["name"] for g in reply.body.get("spec", {}).get("schedulingGates") or []]
                if reply.status != 201:
                    self.failures.append(f"{started} {name}: {reply.status} {reply.message}")
                elif GATE not in gates:
                    self.failures.append(f"{started} {name}: admitted without the webhook (no {GATE} gate)")
                else:
                    self.created += 1
                    self.admitted.append((clock, time.monotonic()))
            next_at += self.interval
            self._stop.wait(max(0.0, next_at - time.monotonic()))

    def stop(self) -> AdmissionStream:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        return self

    def within(self, began: float, ended: float) -> int:
        """Admissions sent at or after `began` and answered by `ended` (`time.monotonic()`)."""
        return sum(1 for sent, answered in self.admitted if sent >= began and answered <= ended)

    def check(self, during: str, began: float, ended: float, diagnose: Callable[[], str] = str) -> None:
        """Fail with every refused creation, the slowest admitted ones and what `diagnose` finds; the stream must
        have run while the disruption did: `DURING` admissions from when it `began` until it `ended`."""
        slowest = ", ".join(f"{name} {seconds:.2f} s" for seconds, name in sorted(self.seconds, reverse=True)[:5])
        assert not self.failures, (
            f"{len(self.failures)} failed admissions during {during}:\n" + "\n".join(self.failures[:20]) + "\n"
            f"slowest admitted: {slowest}\n{diagnose()}"
        )
        made = self.within(began, ended)
        assert made >= DURING, (
            f"only {made} admissions during {during} ({ended - began:.1f} s; {self.created} in all), "
            f"{DURING} needed: it did not happen under load"
        )

    def remove(self) -> None:
        self.api.request("DELETE", f"/api/v1/namespaces/{self.namespace}")
