"""Workloads (ours and native `scheduling.k8s.io/v1alpha2`): template defaults, template rules, immutability.

Source: KEP-4671 / KEP-5710. 1 to 8 `podGroupTemplates` with unique DNS-label names, each with a valid
scheduling policy, a resolvable priority and valid topology constraints; every template's priority is defaulted like
a PodGroup's. Every spec field is immutable after creation.
"""

from __future__ import annotations

from scheduler.api.workload import MAX_TEMPLATES, Workload
from webhook.field import ROOT, FieldError, duplicate, invalid, required, too_many
from webhook.rules.decode import Decoded, JsonObject
from webhook.rules.defaulted import Defaulted
from webhook.rules.immutable import spec_immutable_errors
from webhook.rules.lookups import Lookups
from webhook.rules.names import dns_label_errors
from webhook.rules.pod import PodSettings
from webhook.rules.policy import policy_errors
from webhook.rules.priority import default_priority, priority_errors
from webhook.rules.topology import topology_errors

TEMPLATES = ROOT.child("spec").child("podGroupTemplates")


def default_workload(decoded: Decoded[Workload], lookups: Lookups, settings: PodSettings) -> Defaulted:
    obj = decoded.raw
    spec = dict(obj.get("spec") or {})
    templates = []
    for raw in spec.get("podGroupTemplates") or []:
        template = dict(raw)
        default_priority(template, lookups)
        templates.append(template)
    if templates:
        spec["podGroupTemplates"] = templates
    return Defaulted({**obj, "spec": spec})


def validate_workload_create(decoded: Decoded[Workload], lookups: Lookups) -> list[FieldError]:
    templates = decoded.model.spec.pod_group_templates
    errors: list[FieldError] = []
    if not templates:
        errors.append(required(TEMPLATES, "must have at least 1 item"))
    elif len(templates) > MAX_TEMPLATES:
        errors.append(too_many(TEMPLATES, len(templates), MAX_TEMPLATES))
    seen: set[str] = set()
    for i, template in enumerate(templates):
        path = TEMPLATES.index(i)
        errors.extend(invalid(path.child("name"), template.name, m) for m in dns_label_errors(template.name))
        if template.name in seen:
            errors.append(duplicate(path.child("name"), template.name))
        seen.add(template.name)
        errors += policy_errors(path, template.scheduling_policy, template.disruption_mode)
        errors += priority_errors(path, template.priority_class_name, template.priority, lookups)
        constraints = path.child("schedulingConstraints")
        errors += topology_errors(constraints, template.scheduling_constraints, str(decoded.raw.get("apiVersion")))
    return errors


def validate_workload_update(decoded: Decoded[Workload], old: JsonObject, lookups: Lookups) -> list[FieldError]:
    return spec_immutable_errors(decoded.raw, old)
