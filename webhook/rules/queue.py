"""Queues: min-runtime durations parse and are not negative; the tree has no cycle; a missing parent is a warning.

Source: KAI-Scheduler min-runtime (`pkg/scheduler/plugins/minruntime`), whose resolver walks parents and
would loop on a cycle; refusing the cycle here keeps the walk finite. Divergence: a parent that does not
exist (yet) is admitted with a warning, so a tree applied in any order (`kubectl apply -f dir/`, a GitOps
sync) is never refused; until the parent exists, the scheduler's walk stops at this queue and says so.
"""

from __future__ import annotations

from scheduler.api.duration import DurationError, parse_duration
from scheduler.api.queue import Queue
from webhook.field import ROOT, FieldError, invalid
from webhook.rules.decode import Decoded, JsonObject
from webhook.rules.lookups import Lookups

SPEC = ROOT.child("spec")
PARENT = SPEC.child("parentQueue")


def _duration_errors(queue: Queue) -> list[FieldError]:
    errors: list[FieldError] = []
    for key, value in (
        ("preemptMinRuntime", queue.spec.preempt_min_runtime),
        ("reclaimMinRuntime", queue.spec.reclaim_min_runtime),
    ):
        if value is None:
            continue
        try:
            parsed = parse_duration(value)
        except DurationError as err:
            errors.append(invalid(SPEC.child(key), value, str(err)))
            continue
        if parsed.total_seconds() < 0:
            errors.append(invalid(SPEC.child(key), value, "must not be negative"))
    return errors


def _parent_errors(queue: Queue, lookups: Lookups) -> list[FieldError]:
    name, parent = queue.metadata.name, queue.spec.parent_queue
    if not parent:
        return []
    chain = [name]
    current: str | None = parent
    while current:
        if current == name:
            detail = "would create a cycle: " + " -> ".join([*chain, name])
            return [invalid(PARENT, parent, detail)]
        if current in chain:
            return []  # an existing cycle above us that does not involve this queue
        found = lookups.queue(current)
        if found is None:
            return []  # a missing parent is a warning (`queue_warnings`); above it, nothing can loop back
        chain.append(current)
        current = found.spec.parent_queue
    return []


def validate_queue_create(decoded: Decoded[Queue], lookups: Lookups) -> list[FieldError]:
    queue = decoded.model
    return _duration_errors(queue) + _parent_errors(queue, lookups)


def validate_queue_update(decoded: Decoded[Queue], old: JsonObject, lookups: Lookups) -> list[FieldError]:
    return validate_queue_create(decoded, lookups)


def queue_warnings(decoded: Decoded[Queue], lookups: Lookups) -> list[str]:
    queue = decoded.model
    parent = queue.spec.parent_queue
    if not parent or lookups.queue(parent) is not None:
        return []
    return [
        f'{PARENT}: Queue "{parent}" was not found; until it exists, min-runtime durations are not inherited '
        f"from above queue {queue.metadata.name}"
    ]
