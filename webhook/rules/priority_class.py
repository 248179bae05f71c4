"""PriorityClasses: preemption-toleration annotations must parse (int32 priority, int64 seconds).

Source: kubernetes-sigs/scheduler-plugins `pkg/preemptiontoleration`; parsing is shared with the scheduler
through `scheduler.api.preemption_toleration`, which there only warns, since a class already stored
cannot be refused.
"""

from __future__ import annotations

from scheduler.api.preemption_toleration import policy_errors
from scheduler.api.priority_class import PriorityClass
from webhook.field import ROOT, FieldError, invalid
from webhook.rules.decode import Decoded, JsonObject
from webhook.rules.lookups import Lookups

ANNOTATIONS = ROOT.child("metadata").child("annotations")


def validate_priority_class_create(decoded: Decoded[PriorityClass], lookups: Lookups) -> list[FieldError]:
    pc = decoded.model
    return [
        invalid(ANNOTATIONS.key(err.annotation), pc.metadata.annotations[err.annotation], str(err))
        for err in policy_errors(pc)
    ]


def validate_priority_class_update(
    decoded: Decoded[PriorityClass], old: JsonObject, lookups: Lookups
) -> list[FieldError]:
    return validate_priority_class_create(decoded, lookups)
