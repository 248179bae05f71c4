"""Seconds each step of the lifecycle suite took, printed at the end of the run (`conftest.pytest_terminal_summary`).

A module of its own: test modules are imported by file (tests/e2e has no `__init__.py`), so the conftest
and the test module share this dict only through a module both import by the same name.
"""

from __future__ import annotations

TIMINGS: dict[str, float] = {}
