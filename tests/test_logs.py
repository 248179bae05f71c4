"""The log set-up of `phalanx scheduler` and `phalanx webhook` (`phalanx/logs.py`): plain tracebacks
without frame locals, and credentials masked, in both formats (docs/DESIGN.md, invariant 8)."""

from __future__ import annotations

import json

import pytest
import structlog

from phalanx.logs import configure_logging

TOKEN = "eyJhbGciOiJSUzI1NiIsImtpZCI6InRlc3QifQ.c2VjcmV0"
KEY = "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIBkg4LVWM9nuwNSk3yByxZpYRTBnVJk5oGfS\n-----END EC PRIVATE KEY-----"


LOCAL = "only-a-frame-local-holds-this"


def request_with(headers: dict[str, str]) -> None:
    """Fails the way a client call does, with the request headers in a local of the failing frame."""
    held = LOCAL.upper()  # a value that exists nowhere but in this frame's locals
    raise ConnectionError(f"connection refused ({len(headers) + len(held)} bytes)")


@pytest.mark.parametrize("json_format", [pytest.param(False, id="console"), pytest.param(True, id="json")])
def test_tracebacks_have_no_locals_and_credentials_are_masked(
    capsys: pytest.CaptureFixture[str], json_format: bool
) -> None:
    configure_logging("info", json_format)
    log = structlog.get_logger("test")
    try:
        request_with({"authorization": f"Bearer {TOKEN}"})
    except ConnectionError:
        log.exception("pass failed")
    log.warning("answer", body=f"Authorization: Bearer {TOKEN}", key=KEY)
    err = capsys.readouterr().err
    assert TOKEN not in err
    assert "PRIVATE KEY" not in err and "MHcCAQEE" not in err
    assert "Bearer <redacted>" in err
    text = json.loads(err.splitlines()[0])["exception"] if json_format else err
    assert "Traceback" in text and "request_with" in text
    assert LOCAL.upper() not in err, "a frame's locals were printed"
