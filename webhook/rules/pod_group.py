"""PodGroups (ours and native `scheduling.k8s.io/v1alpha2`): defaults from the Workload, priority, immutability.

Source: KEP-5710 (PodGroup priority, `disruptionMode`) and KEP-4671 (templates). Defaulting fills unset
`disruptionMode`, `schedulingPolicy`, `priorityClassName` and `schedulingConstraints` from the referenced Workload
template, then resolves priority like the Priority admission plugin; `disruptionMode` defaults to `Pod`. Every spec
field is immutable after creation; status is free. Divergence: a reference to a Workload that does not exist
(yet) is a warning, not a denial, since controllers may create the two in either order.
"""

from __future__ import annotations

from scheduler.api.pod_group import PodGroup
from webhook.field import ROOT, FieldError, not_found
from webhook.rules.decode import Decoded, JsonObject
from webhook.rules.defaulted import Defaulted
from webhook.rules.immutable import spec_immutable_errors
from webhook.rules.lookups import Lookups
from webhook.rules.pod import PodSettings
from webhook.rules.policy import policy_errors
from webhook.rules.priority import default_priority, priority_errors
from webhook.rules.topology import topology_errors

SPEC = ROOT.child("spec")
TEMPLATE_REF = SPEC.child("podGroupTemplateRef").child("workload")


def default_pod_group(decoded: Decoded[PodGroup], lookups: Lookups, settings: PodSettings) -> Defaulted:
    group, obj = decoded.model, decoded.raw
    spec = dict(obj.get("spec") or {})
    warnings: list[str] = []
    ref = group.spec.pod_group_template_ref
    if ref is not None and ref.workload is not None:
        namespace = group.metadata.namespace or "default"
        workload = lookups.workload(str(obj.get("apiVersion")), namespace, ref.workload.workload_name)
        template = workload.template(ref.workload.pod_group_template_name) if workload else None
        if workload is None:
            warnings.append(
                f"{TEMPLATE_REF.child('workloadName')}: Workload {namespace}/{ref.workload.workload_name} "
                "was not found; nothing was inherited from it"
            )
        elif template is not None:
            inherited = {
                "disruptionMode": template.disruption_mode,
                "schedulingPolicy": template.scheduling_policy.to_json() if template.scheduling_policy else None,
                "priorityClassName": template.priority_class_name,
                "schedulingConstraints": (
                    template.scheduling_constraints.to_json() if template.scheduling_constraints else None
                ),
            }
            for key, value in inherited.items():
                if spec.get(key) is None and value is not None:
                    spec[key] = value
    default_priority(spec, lookups)
    if spec.get("disruptionMode") is None:
        spec["disruptionMode"] = "Pod"
    return Defaulted({**obj, "spec": spec}, tuple(warnings))


def validate_pod_group_create(decoded: Decoded[PodGroup], lookups: Lookups) -> list[FieldError]:
    group, obj = decoded.model, decoded.raw
    errors = policy_errors(SPEC, group.spec.scheduling_policy, group.spec.disruption_mode)
    errors += priority_errors(SPEC, group.spec.priority_class_name, group.spec.priority, lookups)
    constraints = SPEC.child("schedulingConstraints")
    errors += topology_errors(constraints, group.spec.scheduling_constraints, str(obj.get("apiVersion")))
    ref = group.spec.pod_group_template_ref
    if ref is not None and ref.workload is not None:
        namespace = group.metadata.namespace or "default"
        workload = lookups.workload(str(obj.get("apiVersion")), namespace, ref.workload.workload_name)
        name = ref.workload.pod_group_template_name
        if workload is not None and workload.template(name) is None:
            detail = f"Workload {namespace}/{workload.metadata.name} has no podGroupTemplate named {name}"
            errors.append(not_found(TEMPLATE_REF.child("podGroupTemplateName"), name, detail))
    return errors


def validate_pod_group_update(decoded: Decoded[PodGroup], old: JsonObject, lookups: Lookups) -> list[FieldError]:
    return spec_immutable_errors(decoded.raw, old)
