"""Go-style durations with days and weeks, as Queue min-runtime fields take them."""

from __future__ import annotations

from datetime import timedelta

import pytest

from scheduler.api.duration import DurationError, format_duration, parse_duration


@pytest.mark.parametrize(
    ("text", "want"),
    [
        pytest.param("90s", timedelta(seconds=90), id="seconds"),
        pytest.param("10m", timedelta(minutes=10), id="minutes"),
        pytest.param("1h30m", timedelta(hours=1, minutes=30), id="compound"),
        pytest.param("1.5h", timedelta(hours=1, minutes=30), id="fractional hours"),
        pytest.param("2d", timedelta(days=2), id="days"),
        pytest.param("1w", timedelta(weeks=1), id="weeks"),
        pytest.param("0", timedelta(0), id="bare zero"),
        pytest.param("-5m", timedelta(minutes=-5), id="negative is parsed for the caller to reject"),
        pytest.param("500ms", timedelta(milliseconds=500), id="milliseconds"),
    ],
)
def test_parse_duration(text: str, want: timedelta) -> None:
    assert parse_duration(text) == want


@pytest.mark.parametrize("text", ["", "10", "1x", "h", "1h 30m", "m10"])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(DurationError, match="is not a duration"):
        parse_duration(text)


@pytest.mark.parametrize(
    ("value", "want"),
    [(timedelta(minutes=10), "10m"), (timedelta(hours=1, minutes=30), "1h30m"), (timedelta(0), "0s")],
)
def test_format_duration(value: timedelta, want: str) -> None:
    assert format_duration(value) == want
    assert parse_duration(want) == value
