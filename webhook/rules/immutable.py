"""Spec immutability for PodGroups and Workloads: after creation only metadata and status may change.

Compared on the raw JSON, field by field, so the message names the field that changed and fields we do
not model are covered too. Source of the wording: `apimachinery` `ValidateImmutableField`.
"""

from __future__ import annotations

from webhook.field import ROOT, FieldError, immutable
from webhook.rules.decode import JsonObject


def spec_immutable_errors(new: JsonObject, old: JsonObject) -> list[FieldError]:
    path = ROOT.child("spec")
    new_spec, old_spec = new.get("spec"), old.get("spec")
    if not isinstance(new_spec, dict) or not isinstance(old_spec, dict):
        return [] if new_spec == old_spec else [immutable(path, new_spec)]
    keys = list(dict.fromkeys([*old_spec, *new_spec]))
    return [immutable(path.child(k), new_spec.get(k)) for k in keys if new_spec.get(k) != old_spec.get(k)]
