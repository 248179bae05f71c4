"""Pods: scheduling-gate transitions (KEP-3521) and gang membership.

Validation mirrors `pkg/apis/core/validation` (`validateSchedulingGates`, `ValidatePodUpdate`): gate names
are unique qualified names; on update gates may only be removed; `nodeName` cannot be set while gates
remain. The pod-group label is immutable, because membership never changes after creation (docs/DESIGN.md,
API: Pod membership).
Defaulting gates every member of a pod group with our gang gate and hands it to our scheduler, so no
member is bound before its gang can be placed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from scheduler.api.config import DEFAULT_GATE_NAME, DEFAULT_SCHEDULER_NAME
from scheduler.api.pod import POD_GROUP_LABEL, Pod
from scheduler.api.pod_group import API_VERSION, NATIVE_API_VERSION
from scheduler.api.priority_class import global_default
from webhook.errors import LookupFailed
from webhook.field import ROOT, FieldError, duplicate, forbidden, immutable, invalid
from webhook.rules.decode import Decoded, JsonObject, decode
from webhook.rules.defaulted import Defaulted
from webhook.rules.lookups import Lookups
from webhook.rules.names import qualified_name_errors

GATES = ROOT.child("spec").child("schedulingGates")
NODE_NAME = ROOT.child("spec").child("nodeName")
GROUP_LABEL = ROOT.child("metadata").child("labels").key(POD_GROUP_LABEL)
NODE_NAME_WITH_GATES = "cannot be set until all schedulingGates have been cleared"


@dataclass(frozen=True, slots=True)
class PodSettings:
    """Which scheduler and gate pod-group members get; a pod naming another scheduler keeps it."""

    scheduler_name: str = DEFAULT_SCHEDULER_NAME
    gate_name: str = DEFAULT_GATE_NAME
    replaceable_scheduler_names: frozenset[str] = frozenset({"", "default-scheduler"})


DEFAULT_SETTINGS = PodSettings()


READ_SPEC_FIELDS = ("nodeName", "schedulerName", "schedulingGates", "schedulingGroup", "priorityClassName")


def decode_pod(obj: Any) -> Pod:
    """The pod, built from only the fields these rules read.

    This webhook is on the path of every pod creation: a field the rules never look at (a container,
    a quantity, a toleration effect newer than our model) must not make it deny, nor cost parse time.
    """
    if isinstance(obj, dict) and isinstance(obj.get("spec"), dict):
        spec = obj["spec"]
        obj = {"metadata": obj.get("metadata", {}), "spec": {k: spec[k] for k in READ_SPEC_FIELDS if k in spec}}
    return decode(Pod, obj)


def _group_ref(pod: Pod) -> tuple[str, str] | None:
    """(apiVersion, name) of the PodGroup: our label first, else the native `spec.schedulingGroup`."""
    label = pod.metadata.labels.get(POD_GROUP_LABEL)
    if label:
        return API_VERSION, label
    native = pod.spec.scheduling_group
    if native is not None and native.pod_group_name:
        return NATIVE_API_VERSION, native.pod_group_name
    return None


def _priority_warning(pod: Pod, api_version: str, group_name: str, lookups: Lookups) -> str | None:
    """Best effort: a look-up failure costs the warning, never the pod's creation."""
    namespace = pod.metadata.namespace or "default"
    try:
        group = lookups.pod_group(api_version, namespace, group_name)
    except LookupFailed:
        return None
    if group is None:
        return None
    pod_class, group_class = pod.spec.priority_class_name, group.spec.priority_class_name
    if not pod_class or not group_class:
        try:
            default = global_default(lookups.priority_classes())
        except LookupFailed:
            return None
        default_name = default.metadata.name if default else None
        pod_class, group_class = pod_class or default_name, group_class or default_name
    if pod_class == group_class:
        return None
    return (
        f'spec.priorityClassName: "{pod_class or ""}" differs from "{group_class or ""}" of PodGroup '
        f"{namespace}/{group_name}; the PodGroup's priority applies to every member"
    )


def default_pod(decoded: Decoded[Pod], lookups: Lookups, settings: PodSettings) -> Defaulted:
    """Gate a pod-group member and give it to our scheduler; other pods pass untouched."""
    pod, obj = decoded.model, decoded.raw
    ref = _group_ref(pod)
    if ref is None:
        return Defaulted(obj)
    spec = dict(obj.get("spec") or {})
    gates = [g for g in spec.get("schedulingGates") or [] if isinstance(g, dict)]
    if all(g.get("name") != settings.gate_name for g in gates):
        spec["schedulingGates"] = [*(spec.get("schedulingGates") or []), {"name": settings.gate_name}]
    if (spec.get("schedulerName") or "") in settings.replaceable_scheduler_names:
        spec["schedulerName"] = settings.scheduler_name
    warning = _priority_warning(pod, ref[0], ref[1], lookups)
    return Defaulted({**obj, "spec": spec}, (warning,) if warning else ())


def _gate_errors(pod: Pod) -> list[FieldError]:
    errors: list[FieldError] = []
    seen: set[str] = set()
    for i, gate in enumerate(pod.spec.scheduling_gates):
        path = GATES.index(i).child("name")
        errors.extend(invalid(path, gate.name, message) for message in qualified_name_errors(gate.name))
        if gate.name in seen:
            errors.append(duplicate(path, gate.name))
        seen.add(gate.name)
    return errors


def validate_pod_create(decoded: Decoded[Pod], lookups: Lookups) -> list[FieldError]:
    pod = decoded.model
    errors = _gate_errors(pod)
    if pod.spec.node_name and pod.spec.scheduling_gates:
        errors.append(forbidden(NODE_NAME, NODE_NAME_WITH_GATES))
    return errors


def validate_pod_update(decoded: Decoded[Pod], old: JsonObject, lookups: Lookups) -> list[FieldError]:
    pod, old_pod = decoded.model, decode_pod(old)
    errors: list[FieldError] = []
    old_gates = {g.name for g in old_pod.spec.scheduling_gates}
    for i, gate in enumerate(pod.spec.scheduling_gates):
        if gate.name not in old_gates:
            detail = f"only deletion is allowed, but found new scheduling gate '{gate.name}'"
            errors.append(forbidden(GATES.index(i).child("name"), detail))
    if pod.spec.node_name and pod.spec.node_name != old_pod.spec.node_name and pod.spec.scheduling_gates:
        errors.append(forbidden(NODE_NAME, NODE_NAME_WITH_GATES))
    label, old_label = pod.metadata.labels.get(POD_GROUP_LABEL), old_pod.metadata.labels.get(POD_GROUP_LABEL)
    if label != old_label:
        errors.append(immutable(GROUP_LABEL, label))
    return errors
