"""Typed outcomes of admission; only `webhook/review.py` turns them into AdmissionReview responses.

Rules deny by raising `Denied` with every field error they found; the simulator catches the same
exception and exits 2 with the same text.
"""

from __future__ import annotations

from webhook.field import FieldError, aggregate


class Denied(Exception):
    """The object breaks one or more rules; `str()` is the apiserver-style message."""

    def __init__(self, errors: list[FieldError]) -> None:
        if not errors:
            raise ValueError("Denied needs at least one FieldError")
        self.errors = list(errors)
        super().__init__(aggregate(self.errors))


class BadRequest(Exception):
    """The AdmissionReview itself is malformed (HTTP 400); the message says what is wrong."""


class LookupFailed(Exception):
    """A PriorityClass/Workload/Queue/PodGroup could not be read (the API failed, not a 404)."""
