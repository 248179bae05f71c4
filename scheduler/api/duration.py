"""Durations as Go's `time.ParseDuration` reads them, plus `d` (24h) and `w` (7d).

Used by Queue min-runtime fields: `90s`, `10m`, `1h30m`, `1.5h`, `2d`. A bare `0` is allowed, as in Go.
"""

from __future__ import annotations

import re
from datetime import timedelta
from fractions import Fraction

_UNITS = {
    "ns": Fraction(1, 10**9),
    "us": Fraction(1, 10**6),
    "µs": Fraction(1, 10**6),
    "ms": Fraction(1, 10**3),
    "s": Fraction(1),
    "m": Fraction(60),
    "h": Fraction(3600),
    "d": Fraction(86400),
    "w": Fraction(604800),
}
_PART = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(ns|us|µs|ms|s|m|h|d|w)")


class DurationError(ValueError):
    """Not a duration; the message gives examples of what is."""


def parse_duration(text: str) -> timedelta:
    """Parse a duration; a leading `-` is accepted so that callers can reject negatives by name."""
    raw = text.strip()
    sign = -1 if raw.startswith("-") else 1
    body = raw.lstrip("+-")
    if body == "0":
        return timedelta(0)
    if not body:
        raise DurationError(f"{text!r} is not a duration: expected e.g. 90s, 10m, 1h30m, 1.5h, 2d")
    seconds = Fraction(0)
    position = 0
    for match in _PART.finditer(body):
        if match.start() != position:
            break
        seconds += Fraction(match.group(1)) * _UNITS[match.group(2)]
        position = match.end()
    if position != len(body):
        raise DurationError(f"{text!r} is not a duration: expected e.g. 90s, 10m, 1h30m, 1.5h, 2d")
    return timedelta(seconds=float(sign * seconds))


def format_duration(value: timedelta) -> str:
    """`1h30m0s` style, as Go prints it, trimmed of zero parts (`10m`, `1h30m`)."""
    total = int(value.total_seconds())
    if total == 0:
        return "0s"
    sign = "-" if total < 0 else ""
    total = abs(total)
    hours, rest = divmod(total, 3600)
    minutes, seconds = divmod(rest, 60)
    parts = [f"{hours}h" if hours else "", f"{minutes}m" if minutes else "", f"{seconds}s" if seconds else ""]
    return sign + "".join(parts)
