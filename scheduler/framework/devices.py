"""Devices as a pass sees them (DRA): DeviceClasses, ResourceSlices and ResourceClaims, and what the pass assumed.

The tables are the back end's own, shared with the snapshot, never copied, as `storage.py`'s. A claim the pass
allocated or reserved for a pod placed earlier (DynamicResources' Reserve) shows in `assumed`, with its allocation
and its `reservedFor` as PreBind will write them, so no pod placed later in the pass is given the same devices
(upstream's claim assume cache). The next pass reads the back end's view, which shows those writes while they are in
flight.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from scheduler.api.device_class import DeviceClass
from scheduler.api.resource_claim import AllocationResult, ResourceClaim, ResourceClaimConsumerReference
from scheduler.api.resource_slice import ResourceSlice


@dataclass(frozen=True, slots=True)
class Devices:
    """The DRA objects of one pass: classes and slices by name, claims by `namespace/name`."""

    classes: Mapping[str, DeviceClass] = field(default_factory=dict)
    slices: Mapping[str, ResourceSlice] = field(default_factory=dict)
    claims: Mapping[str, ResourceClaim] = field(default_factory=dict)
    assumed: dict[str, ResourceClaim] = field(default_factory=dict)
    """Claims as this pass's Reserve left them (allocated, reserved for the pods placed), by `namespace/name`."""

    def sighting(self) -> tuple[tuple[object, ...], ...]:
        """The objects as they are now, for the queue to tell that one was added, removed or replaced."""
        return tuple(tuple(table.values()) for table in (self.classes, self.slices, self.claims))

    def claim(self, key: str) -> ResourceClaim | None:
        """The claim `namespace/name`, as this pass assumed it."""
        return self.assumed.get(key) or self.claims.get(key)

    def all_claims(self) -> list[ResourceClaim]:
        """Every claim, as this pass assumed it."""
        if not self.assumed:
            return list(self.claims.values())
        return [*(c for k, c in self.claims.items() if k not in self.assumed), *self.assumed.values()]


@dataclass(frozen=True, slots=True)
class ClaimWrite:
    """What DynamicResources' PreBind writes to one claim for one consumer: the claim as the pass saw it (its
    resourceVersion guards the write), the allocation it must have (set when it has none; a claim allocated
    otherwise by now refuses the write), and the consumer added to `status.reservedFor`."""

    claim: ResourceClaim
    allocation: AllocationResult
    consumer: ResourceClaimConsumerReference

    def applied(self, current: ResourceClaim) -> ResourceClaim | None:
        """`current` with this write made (the same object when it changes nothing), or None when it cannot be made:
        `current` is allocated to other devices, or is another claim of the same name."""
        if current.metadata.uid and self.claim.metadata.uid and current.metadata.uid != self.claim.metadata.uid:
            return None
        allocation = current.status.allocation
        if allocation is not None and allocation.devices.results != self.allocation.devices.results:
            return None
        if allocation is not None and current.reserved_for(self.consumer):
            return current
        reserved = [*current.status.reserved_for]
        if not current.reserved_for(self.consumer):
            reserved.append(self.consumer)
        made = allocation or self.allocation
        status = current.status.model_copy(update={"allocation": made, "reserved_for": reserved})
        return current.model_copy(update={"status": status})
