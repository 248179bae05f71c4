"""Leader election on a coordination.k8s.io/v1 Lease, as client-go's leaderelection does it.

The holder renews every `retry_period`; a standby takes the Lease once it has seen the same record
unchanged for `lease_duration` (measured on its own clock, so skew between replicas does not
matter). `is_leader()` is checked before every write and turns false as soon as a renewal is
`renew_deadline` overdue, before any standby may take over (renew_deadline < lease_duration): a
replica that lost the Lease stops writing at once, even if its renew loop is stuck. With an `owner`
(the pod's ServiceAccount) the Lease is garbage-collected with it at `helm uninstall`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import structlog
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from scheduler.cluster.kube.cluster import read_json

log = structlog.get_logger(__name__)


def _micro_time(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    def __init__(
        self,
        api: client.ApiClient,
        namespace: str,
        name: str,
        identity: str,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        on_change: Callable[[bool], None] | None = None,
        owner: dict[str, Any] | None = None,
    ) -> None:
        if not retry_period < renew_deadline < lease_duration:
            raise ValueError(
                f"leaderElection: Invalid value: retryPeriod {retry_period}, renewDeadline {renew_deadline}, "
                f"leaseDuration {lease_duration}: must satisfy retryPeriod < renewDeadline < leaseDuration"
            )
        # Any: with `_preload_content=False` the calls return the raw urllib3 response.
        self.coordination: Any = client.CoordinationV1Api(api)
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.on_change = on_change
        self.owner = owner
        self.became_leader = threading.Event()
        self._renewed_at: float | None = None
        self._observed: tuple[str, float] | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="leader-election", daemon=True)

    def is_leader(self) -> bool:
        renewed = self._renewed_at
        return renewed is not None and time.monotonic() - renewed < self.renew_deadline

    def start(self) -> None:
        self._thread.start()

    def stop(self, *, deadline: float, release: bool = True) -> None:
        """Stop renewing; with `release`, hand the Lease back so a standby need not wait it out.

        Nothing here outlasts `deadline` (`time.monotonic()`), so a stop bounded in time stays bounded when
        the API server no longer answers: a renewal on the wire, then the release, are waited for until then
        (the client retries a GET or PUT that times out, three times over, whatever its timeout says).
        """
        self._stop.set()
        if self._thread.ident is not None:  # started
            self._thread.join(timeout=min(self.retry_period + 5, max(0.0, deadline - time.monotonic())))
        if release and self.is_leader():
            releasing = threading.Thread(target=self._release, name="lease-release", daemon=True)
            releasing.start()
            releasing.join(timeout=max(0.0, deadline - time.monotonic()))
            if releasing.is_alive():
                log.warning("lease not released by the stop deadline", lease=f"{self.namespace}/{self.name}")
        self._set_leader(None)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                acquired = self._try_acquire_or_renew()
            except Exception as exc:
                log.warning("lease update failed", lease=f"{self.namespace}/{self.name}", error=type(exc).__name__)
                acquired = False
            if acquired:
                self._set_leader(time.monotonic())
            elif self._renewed_at is not None and not self.is_leader():
                self._set_leader(None)
            self._stop.wait(self.retry_period)

    def _set_leader(self, renewed_at: float | None) -> None:
        was = self._renewed_at is not None
        self._renewed_at = renewed_at
        now = renewed_at is not None
        if now:
            self.became_leader.set()
        else:
            self.became_leader.clear()
        if was != now:
            log.info("leadership changed", lease=f"{self.namespace}/{self.name}", identity=self.identity, leader=now)
            if self.on_change is not None:
                self.on_change(now)

    def _spec(self, transitions: int, acquire_time: str | None = None) -> dict[str, Any]:
        now = _micro_time(datetime.now(UTC))
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": max(1, round(self.lease_duration)),
            "acquireTime": acquire_time or now,
            "renewTime": now,
            "leaseTransitions": transitions,
        }

    def _try_acquire_or_renew(self) -> bool:
        timeout = max(0.5, self.renew_deadline / 2)
        try:
            response = self.coordination.read_namespaced_lease(
                self.name, self.namespace, _preload_content=False, _request_timeout=timeout
            )
        except ApiException as exc:
            if exc.status != 404:
                raise
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace} | self._owned({}),
                "spec": self._spec(0),
            }
            try:
                read_json(
                    self.coordination.create_namespaced_lease(
                        self.namespace, body, _preload_content=False, _request_timeout=timeout
                    )
                )
            except ApiException as conflict:
                if conflict.status == 409:
                    return False
                raise
            return True
        lease = read_json(response)
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        version = lease["metadata"]["resourceVersion"]
        now = time.monotonic()
        if self._observed is None or self._observed[0] != version:
            self._observed = (version, now)
        if holder and holder != self.identity:
            duration = float(spec.get("leaseDurationSeconds") or self.lease_duration)
            if now - self._observed[1] < duration:
                if self._renewed_at is not None:
                    self._set_leader(None)
                return False
        transitions = int(spec.get("leaseTransitions") or 0)
        if holder == self.identity:
            new_spec = self._spec(transitions, spec.get("acquireTime"))
        else:
            new_spec = self._spec(transitions + 1)
        lease["spec"] = new_spec
        lease["metadata"] |= self._owned(lease["metadata"])
        try:
            read_json(
                self.coordination.replace_namespaced_lease(
                    self.name, self.namespace, lease, _preload_content=False, _request_timeout=timeout
                )
            )
        except ApiException as exc:
            if exc.status == 409:
                return False
            raise
        if holder != self.identity:
            log.info("lease acquired", lease=f"{self.namespace}/{self.name}", identity=self.identity, previous=holder)
        return True

    def _owned(self, metadata: dict[str, Any]) -> dict[str, Any]:
        """`ownerReferences` with our owner added (a Lease made before the owner was known gets it on renewal)."""
        references = list(metadata.get("ownerReferences") or [])
        if self.owner is None or any(r.get("uid") == self.owner["uid"] for r in references):
            return {"ownerReferences": references} if references else {}
        return {"ownerReferences": [*references, self.owner]}

    def _release(self) -> None:
        try:
            response = self.coordination.read_namespaced_lease(
                self.name, self.namespace, _preload_content=False, _request_timeout=2.0
            )
            lease = read_json(response)
            if (lease.get("spec") or {}).get("holderIdentity") != self.identity:
                return
            lease["spec"]["holderIdentity"] = ""
            lease["spec"]["leaseDurationSeconds"] = 1
            read_json(
                self.coordination.replace_namespaced_lease(
                    self.name, self.namespace, lease, _preload_content=False, _request_timeout=2.0
                )
            )
            log.info("lease released", lease=f"{self.namespace}/{self.name}", identity=self.identity)
        except Exception as exc:
            log.warning("lease release failed", lease=f"{self.namespace}/{self.name}", error=type(exc).__name__)
