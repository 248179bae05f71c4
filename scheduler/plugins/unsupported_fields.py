"""UnsupportedFields: a pod that asks for something phalanx-scheduler cannot honour waits, saying so.

kube-scheduler honours every scheduling field of a pod; a scheduler that skipped one would place the pod where
it cannot run (a GPU claim never allocated, a gang spread over racks it asked to stay in). Until Phalanx
implements such a field, the pod is UnschedulableAndUnresolvable with `phalanx-scheduler does not support
FIELD`, the message kube-scheduler would give for a PreFilter rejection: nothing is placed as if the field were
absent, and nothing is preempted for it. README's plugin table lists what is and is not supported.
"""

from __future__ import annotations

import numpy as np

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import NodeVerdict
from scheduler.framework.pod_info import PodInfo
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import Code


def unsupported(pod: PodInfo, snapshot: Snapshot) -> str | None:
    """The first field of `pod` (or of its PodGroup) the scheduler does not implement, or None."""
    spec = pod.pod.spec
    if spec.resource_claims:
        return "spec.resourceClaims"
    affinity = spec.affinity
    for kind, rules in (
        ("podAffinity", affinity.pod_affinity if affinity else None),
        ("podAntiAffinity", affinity.pod_anti_affinity if affinity else None),
    ):
        if rules is None:
            continue
        terms = [
            *rules.required_during_scheduling_ignored_during_execution,
            *(w.pod_affinity_term for w in rules.preferred_during_scheduling_ignored_during_execution),
        ]
        if any(t.namespace_selector is not None and _selects_some(t.namespace_selector) for t in terms):
            return f"spec.affinity.{kind} terms with a non-empty namespaceSelector"
    group = snapshot.groups.get(pod.group_key) if pod.group_key is not None else None
    if group is not None:
        extra = group.spec.model_extra or {}
        constraints = extra.get("schedulingConstraints")
        if isinstance(constraints, dict) and constraints.get("topology"):
            return f"spec.schedulingConstraints.topology of PodGroup {group.key}"
        if extra.get("resourceClaims"):
            return f"spec.resourceClaims of PodGroup {group.key}"
    return None


def _selects_some(selector: object) -> bool:
    """Whether a namespaceSelector narrows the namespaces (`{}` selects every one, which is supported)."""
    return bool(getattr(selector, "match_labels", None) or getattr(selector, "match_expressions", None))


class UnsupportedFields:
    name = "UnsupportedFields"

    def filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> NodeVerdict | None:
        field = unsupported(pod, snapshot)
        if field is None:
            return None
        return NodeVerdict(
            feasible=np.zeros(len(snapshot.running), dtype=np.bool_),
            code=Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            message=f"phalanx-scheduler does not support {field}",
        )
