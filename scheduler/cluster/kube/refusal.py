"""What the API server answered to a write that did not go through, in one short line.

A refused write fails only its own unit (docs/DESIGN.md, invariant 7), and the answer is what its
Warning Event, its PodScheduled message and the log show. So it is built from the server's
`Status` (code, reason, message), never from the client's exception text: that text carries
response headers and whole bodies, and a traceback of it would carry the request's bearer token
(invariant 8). A write that never got an answer (a timeout, a dropped connection) is named by the
kind of failure.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager

import urllib3
from kubernetes.client.exceptions import ApiException

from scheduler.framework.cluster import WriteRefused

ANSWER_LIMIT = 512
"""Longer messages (an admission webhook may say a lot) are cut: the answer goes into an Event note."""

FAILED_WRITES = (ApiException, urllib3.exceptions.HTTPError, OSError)
"""What a write raises once the client's retries are spent; anything else is a bug and stays one."""


def answer(exc: BaseException) -> str:
    """`422 Invalid: Pod "m1" is invalid: ...`, `503 ServiceUnavailable`, `no answer (ReadTimeoutError)`,
    or for anything else its type and first line."""
    if isinstance(exc, urllib3.exceptions.HTTPError | OSError):
        return f"no answer ({type(exc).__name__})"
    if not isinstance(exc, ApiException):
        return f"{type(exc).__name__}: {next(iter(str(exc).splitlines()), '')}"[:ANSWER_LIMIT]
    body = exc.body.decode(errors="replace") if isinstance(exc.body, bytes) else exc.body
    try:
        status = json.loads(body or "")
    except ValueError:
        status = None
    if not isinstance(status, dict):
        return f"{exc.status} {exc.reason or ''}".strip()
    text = f"{exc.status} {status.get('reason') or exc.reason or ''}".strip()
    message = status.get("message")
    if message:
        text += f": {message}"
    return text if len(text) <= ANSWER_LIMIT else text[: ANSWER_LIMIT - 3] + "..."


@contextmanager
def refusals(operation: str, subject: str) -> Iterator[None]:
    """Turn a failed write into `WriteRefused("<operation> <subject>: <answer>")` for the runner."""
    try:
        yield
    except FAILED_WRITES as exc:
        raise WriteRefused(f"{operation} {subject}: {answer(exc)}") from exc
