"""API errors as types, mapped once from what the `kubernetes` client and urllib3 raise (kopf's way).

Callers catch `Conflict`, `NotFound`, `Gone`, `Invalid`, `TooManyRequests`, `Forbidden` or
`Unavailable`, never an HTTP status as a bare number. Every request we make goes through one of the
two boundaries that map: `kube.transport.Transport.request` (the scheduler's writes) and `translated()`
around a call of the generated client (lists, watches, the Lease, the webhook's reads, certificates).

Each error carries the server's answer in one short line (`answer`), built from the `Status` the
server sent (code, reason, message), never from the client's exception text: that text holds response
headers and whole bodies, and a traceback of it the request's bearer token (docs/DESIGN.md, invariant 8).
A request that got no answer (a timeout, a dropped connection) is `Unavailable` with status 0, named by
the kind of failure.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import urllib3
from kubernetes.client.exceptions import ApiException

ANSWER_LIMIT = 512
"""Longer messages (an admission webhook may say a lot) are cut: the answer goes into an Event note."""


class ApiError(Exception):
    """The API server refused a request (`status` its HTTP code), or gave no answer (`status` 0)."""

    status: int = 0

    def __init__(self, answer: str, *, status: int = 0, reason: str = "", message: str = "", retry_after: float = 0.0):
        super().__init__(answer)
        self.answer = answer
        """`422 Invalid: Pod "m1" is invalid: ...`, `503 ServiceUnavailable`, `no answer (ReadTimeoutError)`."""
        if status:
            self.status = status
        self.reason = reason
        """The `Status` reason (`AlreadyExists`, `Conflict`, `Expired`, ...)."""
        self.message = message
        """The `Status` message, whole."""
        self.retry_after = retry_after
        """Seconds the server asked us to wait (Retry-After), 0 when it did not say."""


class Forbidden(ApiError):
    status = 403


class NotFound(ApiError):
    status = 404


class Conflict(ApiError):
    """409: a stale resourceVersion or a precondition that failed (`reason` Conflict), or `AlreadyExists`."""

    status = 409


class Gone(ApiError):
    """410: a watch's resourceVersion is older than the server keeps: relist."""

    status = 410


class Invalid(ApiError):
    """422: validation, an admission policy, or a JSON patch whose `test` failed."""

    status = 422


class TooManyRequests(ApiError):
    """429: retried after `retry_after`."""

    status = 429


class Unavailable(ApiError):
    """5xx, or no answer at all (status 0): a timeout, a dropped connection. Retried."""


BY_STATUS: dict[int, type[ApiError]] = {
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    410: Gone,
    422: Invalid,
    429: TooManyRequests,
}

NO_ANSWER = (urllib3.exceptions.HTTPError, OSError)
"""What a request raises when no answer came back."""


def retried(err: BaseException) -> bool:
    """Worth sending again after a backoff: the server was busy or did not answer."""
    return isinstance(err, TooManyRequests | Unavailable)


def _retry_after(headers: Any) -> float:
    value = headers.get("Retry-After") if headers is not None and hasattr(headers, "get") else None
    try:
        return float(value) if value is not None else 0.0
    except ValueError:
        return 0.0


def from_response(status: int, http_reason: str, body: bytes | str | None, headers: Any = None) -> ApiError:
    """The typed error for an HTTP answer outside 2xx."""
    text = body.decode(errors="replace") if isinstance(body, bytes) else body
    try:
        parsed = json.loads(text or "")
    except ValueError:
        parsed = None
    reason, message = http_reason or "", ""
    if isinstance(parsed, dict):
        reason = parsed.get("reason") or reason
        message = parsed.get("message") or ""
    answer = f"{status} {reason}".strip() + (f": {message}" if message else "")
    if len(answer) > ANSWER_LIMIT:
        answer = answer[: ANSWER_LIMIT - 3] + "..."
    kind = BY_STATUS.get(status, Unavailable if status >= 500 else ApiError)
    return kind(answer, status=status, reason=reason, message=message, retry_after=_retry_after(headers))


def api_error(exc: BaseException) -> ApiError | None:
    """The typed error for what the client raised, or None when it is not an API failure (a bug stays one)."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, ApiException):
        return from_response(exc.status or 0, exc.reason or "", exc.body, exc.headers)
    if isinstance(exc, NO_ANSWER):
        return Unavailable(f"no answer ({type(exc).__name__})")
    return None


@contextmanager
def translated() -> Iterator[None]:
    """Around a call of the generated client: what it raises comes out typed (`from None`, so no traceback
    carries the client's exception and its headers)."""
    try:
        yield
    except (ApiException, *NO_ANSWER) as exc:
        err = api_error(exc)
        assert err is not None
        raise err from None
