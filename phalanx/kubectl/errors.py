"""The one error `kubectl phalanx` reports: a line worded as kubectl words it, then exit status 1."""

from __future__ import annotations


class KubectlError(Exception):
    """`str()` is the whole line, e.g. `Error from server (NotFound): pods "x" not found`."""
