"""Priority resolution for PodGroups and Workload templates, as the Priority admission plugin does it for pods.

Source: `plugin/pkg/admission/priority/admission.go`. An unset `priorityClassName` takes the
`globalDefault` class (lowest value when several); `priority` is filled from the class; with no default,
priority 0. Divergence: a `priority` the user gave is kept and then checked against the class (the
plugin rejects it too, but for pods only).
"""

from __future__ import annotations

from scheduler.api.priority_class import global_default
from webhook.field import FieldError, Path, invalid
from webhook.rules.decode import JsonObject
from webhook.rules.lookups import Lookups


def default_priority(spec: JsonObject, lookups: Lookups) -> None:
    """Fill `priorityClassName` and `priority` in a spec (or template) dict the caller owns."""
    name = spec.get("priorityClassName")
    if not name:
        default = global_default(lookups.priority_classes())
        if default is None:
            if spec.get("priority") is None:
                spec["priority"] = 0
            return
        name = spec["priorityClassName"] = default.metadata.name
    if spec.get("priority") is None and isinstance(name, str):
        found = lookups.priority_class(name)
        if found is not None:
            spec["priority"] = found.value


def priority_errors(path: Path, class_name: str | None, priority: int | None, lookups: Lookups) -> list[FieldError]:
    """The class must exist and a given priority must equal the value it resolves to."""
    if class_name:
        found = lookups.priority_class(class_name)
        if found is None:
            detail = f"no PriorityClass with name {class_name} was found"
            return [invalid(path.child("priorityClassName"), class_name, detail)]
        if priority is not None and priority != found.value:
            detail = f"must equal {found.value}, the value of PriorityClass {class_name}"
            return [invalid(path.child("priority"), priority, detail)]
        return []
    if priority is None:
        return []
    default = global_default(lookups.priority_classes())
    if default is not None and priority != default.value:
        detail = f"must equal {default.value}, the value of the globalDefault PriorityClass {default.metadata.name}"
        return [invalid(path.child("priority"), priority, detail)]
    if default is None and priority != 0:
        detail = "must be 0 when no priorityClassName is set and no globalDefault PriorityClass exists"
        return [invalid(path.child("priority"), priority, detail)]
    return []
