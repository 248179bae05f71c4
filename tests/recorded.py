"""The kube-apiserver v1.36 recordings the suites compare against, in `tests/fixtures/recorded/` (its README says
how and when each was recorded). They live inside the project so that a fresh clone tests exactly what CI tests."""

from __future__ import annotations

from pathlib import Path

RECORDED = Path(__file__).resolve().parent / "fixtures" / "recorded"
