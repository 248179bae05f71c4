"""The resource claim controller, as the simulator plays it: a claim made at once for each template entry of a pod's
(or a PodGroup's) `spec.resourceClaims`, and named in its `status.resourceClaimStatuses`; and once a pod is gone, its
claims released (`released`).

As kube-controller-manager's `resourceclaim` controller: the claim is the template's spec, with its labels and
annotations, owned by the pod (or PodGroup) as its controller, annotated `resource.kubernetes.io/pod-claim-name` with
the entry's name, and named `<owner>-<entry>-<5 characters>`; here the 5 characters come from the owner's uid, so a
scenario runs the same each time. An entry whose template is missing waits, as on a cluster (the scheduler says
`ResourceClaim not created yet`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

from scheduler.api.meta import ObjectMeta, OwnerReference
from scheduler.api.pod import Pod, PodResourceClaimStatus
from scheduler.api.pod_group import PodGroup
from scheduler.api.resource_claim import CLAIM_NAME_ANNOTATION, ResourceClaim, ResourceClaimTemplate

SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
"""The characters of a generated name's suffix (apimachinery's `utilrand.String`)."""


def _suffix(uid: str, entry: str) -> str:
    digest = hashlib.sha256(f"{uid}/{entry}".encode()).digest()
    return "".join(SUFFIX_ALPHABET[b % len(SUFFIX_ALPHABET)] for b in digest[:5])


def made_claims(
    owner: Pod | PodGroup, templates: dict[str, ResourceClaimTemplate]
) -> tuple[list[ResourceClaim], list[PodResourceClaimStatus]]:
    """The claims to make for `owner`'s template entries that have none yet, and its new `resourceClaimStatuses`
    (empty lists: nothing to do)."""
    meta = owner.metadata
    namespace = meta.namespace or "default"
    statuses = list(owner.status.resource_claim_statuses)
    entries = owner.spec.resource_claims
    made: list[ResourceClaim] = []
    for entry in entries:
        name = entry.resource_claim_template_name
        if name is None or any(s.name == entry.name for s in statuses):
            continue
        template = templates.get(f"{namespace}/{name}")
        if template is None:
            continue
        claim_name = f"{meta.name}-{entry.name}-{_suffix(meta.uid or meta.name, entry.name)}"
        template_meta = template.spec.metadata
        owner_ref = OwnerReference(
            api_version=owner.api_version, kind=owner.kind, name=meta.name, uid=meta.uid or "", controller=True
        )
        made.append(
            ResourceClaim(
                metadata=ObjectMeta(
                    name=claim_name,
                    namespace=namespace,
                    uid=hashlib.sha256(f"{namespace}/{claim_name}".encode()).hexdigest()[:32],
                    labels=dict(template_meta.labels),
                    annotations={**template_meta.annotations, CLAIM_NAME_ANNOTATION: entry.name},
                    owner_references=[owner_ref],
                    creation_timestamp=meta.creation_timestamp,
                ),
                spec=template.spec.spec.model_copy(deep=True),
            )
        )
        statuses.append(PodResourceClaimStatus(name=entry.name, resource_claim_name=claim_name))
    return made, statuses if made else []


def released(pod: Pod, claims: Mapping[str, ResourceClaim]) -> dict[str, ResourceClaim] | None:
    """The claims once `pod` is gone, or None when it held none: as the controller, the claims made for the pod are
    deleted, and the pod's reservation is removed from the others; a claim reserved for no one then is deallocated
    (its devices are free again)."""
    uid = pod.metadata.uid or ""
    namespace = pod.metadata.namespace or "default"
    table = dict(claims)
    changed = False
    for key, claim in claims.items():
        if key.partition("/")[0] != namespace:
            continue
        if uid and any(ref.controller and ref.uid == uid for ref in claim.metadata.owner_references):
            del table[key]
            changed = True
            continue
        kept = [
            r
            for r in claim.status.reserved_for
            if not (r.resource == "pods" and r.name == pod.metadata.name and r.uid in ("", uid))
        ]
        if len(kept) == len(claim.status.reserved_for):
            continue
        allocation = claim.status.allocation if kept else None
        status = claim.status.model_copy(update={"reserved_for": kept, "allocation": allocation})
        table[key] = claim.model_copy(update={"status": status})
        changed = True
    return table if changed else None
