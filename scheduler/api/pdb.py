"""PodDisruptionBudget (policy/v1) and the disruption allowance preemption respects."""

from __future__ import annotations

import math

from pydantic import Field

from scheduler.api.meta import ApiModel, LabelSelector, ObjectMeta


class PodDisruptionBudgetSpec(ApiModel):
    min_available: int | str | None = None
    max_unavailable: int | str | None = None
    selector: LabelSelector | None = None


class PodDisruptionBudgetStatus(ApiModel):
    disruptions_allowed: int | None = None
    current_healthy: int | None = None
    desired_healthy: int | None = None
    expected_pods: int | None = None


class PodDisruptionBudget(ApiModel):
    api_version: str = "policy/v1"
    kind: str = "PodDisruptionBudget"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: PodDisruptionBudgetSpec = Field(default_factory=PodDisruptionBudgetSpec)
    status: PodDisruptionBudgetStatus = Field(default_factory=PodDisruptionBudgetStatus)

    def selects(self, namespace: str, labels: dict[str, str]) -> bool:
        """An empty or missing selector selects nothing (policy/v1 selects all only when `{}`)."""
        if namespace != (self.metadata.namespace or "default") or self.spec.selector is None:
            return False
        return self.spec.selector.matches(labels)

    def disruptions_allowed(self, healthy: int) -> int:
        """`status.disruptionsAllowed` when a controller wrote it, else computed from the spec.

        A status of all zeros with no `expectedPods` is what an apiserver without the disruption
        controller reports (see fixtures/objects/pdb.json), so it is recomputed from `healthy`.
        """
        status = self.status
        if status.disruptions_allowed is not None and (status.expected_pods or status.current_healthy):
            return status.disruptions_allowed
        if self.spec.max_unavailable is not None:
            allowed = _resolve(self.spec.max_unavailable, healthy, round_up=True)
            return max(0, allowed)
        if self.spec.min_available is not None:
            return max(0, healthy - _resolve(self.spec.min_available, healthy, round_up=True))
        return max(0, healthy - 1) if healthy else 0


def _resolve(value: int | str, total: int, *, round_up: bool) -> int:
    if isinstance(value, int):
        return value
    text = value.strip()
    if text.endswith("%"):
        fraction = int(text[:-1]) * total / 100
        return math.ceil(fraction) if round_up else math.floor(fraction)
    return int(text)
