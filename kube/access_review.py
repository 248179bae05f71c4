"""SubjectAccessReview: whether a user may do something, asked of the API server's own authorizer.

An aggregated API server authorizes each request it serves this way (k8s.io/apiserver's delegating authorizer),
so RBAC, and whatever other authorizer the cluster runs, decides who may read what it serves, exactly as for the
API server's own resources. Answers are kept `ttl` seconds, allowed and denied alike (upstream's
`--authorization-webhook-cache-*-ttl` defaults are 10 s each), so a user's repeated requests cost one review.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubernetes import client

from kube.errors import translated
from kube.front_proxy import User

TTL_SECONDS = 10.0
CACHED = 4096
"""Answers kept at most; the oldest go first."""


@dataclass(frozen=True, slots=True)
class Attributes:
    """What the authorizer is asked about, as RBAC names it (`resourceAttributes` of the review)."""

    verb: str
    group: str
    resource: str
    subresource: str = ""
    namespace: str = ""
    name: str = ""

    @property
    def described(self) -> str:
        """`get resource "pods/explanation" in API group "explain.phalanx.dev" in the namespace "ml"`, as
        kube-apiserver words a refusal."""
        resource = f"{self.resource}/{self.subresource}" if self.subresource else self.resource
        where = f'in the namespace "{self.namespace}"' if self.namespace else "at the cluster scope"
        return f'{self.verb} resource "{resource}" in API group "{self.group}" {where}'


@dataclass(frozen=True, slots=True)
class Verdict:
    allowed: bool
    reason: str = ""


class AccessReviewer:
    def __init__(
        self,
        api: client.ApiClient,
        ttl_seconds: float = TTL_SECONDS,
        request_timeout_seconds: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._api = client.AuthorizationV1Api(api)
        self.ttl_seconds = ttl_seconds
        self.request_timeout_seconds = request_timeout_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._answers: dict[tuple[Any, ...], tuple[float, Verdict]] = {}

    def review(self, user: User, attributes: Attributes) -> Verdict:
        """May `user` do `attributes`? Raises a `kube.errors.ApiError` when the API server does not answer."""
        key = (user.name, user.uid, user.groups, tuple(sorted(user.extra.items())), attributes)
        now = self._clock()
        with self._lock:
            kept = self._answers.get(key)
            if kept is not None and now - kept[0] < self.ttl_seconds:
                return kept[1]
        review = client.V1SubjectAccessReview(
            api_version="authorization.k8s.io/v1",
            kind="SubjectAccessReview",
            spec=client.V1SubjectAccessReviewSpec(
                user=user.name,
                uid=user.uid or None,
                groups=list(user.groups),
                extra={k: list(v) for k, v in user.extra.items()},
                resource_attributes=client.V1ResourceAttributes(
                    verb=attributes.verb,
                    group=attributes.group or None,
                    resource=attributes.resource,
                    subresource=attributes.subresource or None,
                    namespace=attributes.namespace or None,
                    name=attributes.name or None,
                ),
            ),
        )
        with translated():
            answered = self._api.create_subject_access_review(review, _request_timeout=self.request_timeout_seconds)
        status = answered.status
        allowed = bool(status is not None and status.allowed and not status.denied)
        verdict = Verdict(allowed, (status.reason or "") if status is not None else "")
        with self._lock:
            if len(self._answers) >= CACHED:
                for old in sorted(self._answers, key=lambda k: self._answers[k][0])[: CACHED // 4]:
                    del self._answers[old]
            self._answers[key] = (now, verdict)
        return verdict
