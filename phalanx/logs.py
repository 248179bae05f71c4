"""Log set-up shared by `phalanx scheduler` and `phalanx webhook`: structlog lines on stderr.

Console lines by default, one JSON object per line with `PHALANX_LOG_FORMAT=json` (the chart sets
it, for log shippers). Either way an exception is logged as a plain traceback: file, line and code
of each frame, never the frames' local variables. Rich tracebacks (structlog's console default when
rich is installed) print every frame's locals, and a failed API call holds the client's request
headers there, bearer token included; one such traceback was 36,000 lines (issue 11, defect 5).
As a second guard, a bearer token or a PEM private key that still finds its way into a record
(an exception message, a field) is masked before the line is written (docs/DESIGN.md, invariant 8).
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import MutableMapping
from typing import Any

import structlog

CREDENTIALS = (
    (re.compile(r"(Bearer\s+)[^\s'\",}\]]+", re.IGNORECASE), r"\1<redacted>"),
    (
        re.compile(r"-----BEGIN ([A-Z ]*)PRIVATE KEY-----.*?(-----END \1PRIVATE KEY-----|$)", re.DOTALL),
        "<redacted private key>",
    ),
)


def redact(text: str) -> str:
    """`text` with every bearer token and PEM private key masked."""
    for pattern, replacement in CREDENTIALS:
        text = pattern.sub(replacement, text)
    return text


def redacting(renderer: structlog.typing.Processor) -> structlog.typing.Processor:
    """The final processor: render with `renderer` (which makes a string), then mask credentials."""

    def render(logger: Any, method: str, event: MutableMapping[str, Any]) -> str:
        return redact(str(renderer(logger, method, event)))

    return render


def configure_logging(level: str, json_format: bool) -> None:
    """Route structlog to stderr at `level` (debug, info, warning, error), as console lines or JSON."""
    threshold = logging.getLevelNamesMapping().get(level.upper(), logging.INFO)
    renderer: structlog.typing.Processor
    if json_format:
        renderer = structlog.processors.JSONRenderer()
    else:
        # `format_exc_info` below already made the traceback plain; this formatter is for anything else.
        renderer = structlog.dev.ConsoleRenderer(colors=False, exception_formatter=structlog.dev.plain_traceback)
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso"),
            # Plain text, no locals, in both formats: `exc_info` becomes an `exception` string here.
            structlog.processors.format_exc_info,
            redacting(renderer),
        ],
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        wrapper_class=structlog.make_filtering_bound_logger(threshold),
    )
