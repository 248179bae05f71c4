"""Scheduling policy and disruption mode, shared by PodGroups and Workload templates (KEP-5710).

Exactly one of `basic`/`gang`; a gang needs `minCount >= 1`; `disruptionMode: PodGroup` needs a gang,
because a basic group has no unit to disrupt as one.
"""

from __future__ import annotations

from scheduler.api.pod_group import SchedulingPolicy
from webhook.field import FieldError, Path, forbidden, invalid, required


def policy_errors(path: Path, policy: SchedulingPolicy | None, disruption_mode: str | None) -> list[FieldError]:
    errors: list[FieldError] = []
    policy_path = path.child("schedulingPolicy")
    has_basic = policy is not None and policy.basic is not None
    has_gang = policy is not None and policy.gang is not None
    if not has_basic and not has_gang:
        errors.append(required(policy_path, "exactly one of basic or gang must be set"))
    elif has_basic and has_gang:
        errors.append(forbidden(policy_path, "exactly one of basic or gang may be set, not both"))
    if policy is not None and policy.gang is not None and policy.gang.min_count < 1:
        min_count_path = policy_path.child("gang").child("minCount")
        errors.append(invalid(min_count_path, policy.gang.min_count, "must be greater than or equal to 1"))
    if disruption_mode == "PodGroup" and has_basic and not has_gang:
        detail = "must be Pod when schedulingPolicy is basic: only a gang can be disrupted as one unit"
        errors.append(invalid(path.child("disruptionMode"), disruption_mode, detail))
    return errors
