"""A write the real API server refuses fails only its own unit (docs/DESIGN.md invariant 7).

A ValidatingAdmissionPolicy refuses, with 422, every update our scheduler makes to the pods of one
gang (so their gate cannot be removed). Another gang is scheduled meanwhile; the refused one says why
and is retried, and binds once the policy no longer applies to it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.e2e.control_plane import Json
from tests.e2e.objects import Pool
from tests.e2e.stack import Stack
from tests.polling import wait_for

REFUSE = "e2e.phalanx.dev/refuse"


@pytest.fixture
def refusing_policy(pool: Pool) -> Iterator[str]:
    """Pod updates by `user` (our components) to pods labelled `REFUSE` in this pool's namespace: 422."""
    name = f"{pool.name}-refuse"
    policy: Json = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["pods"]}
                ]
            },
            "matchConditions": [
                {
                    "name": "our-components-on-marked-pods",
                    "expression": f"request.userInfo.username == 'user' && has(object.metadata.labels) && "
                    f"'{REFUSE}' in object.metadata.labels",
                }
            ],
            "validations": [{"expression": "false", "message": "refused by the e2e policy", "reason": "Invalid"}],
        },
    }
    binding: Json = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": {
            "policyName": name,
            "validationActions": ["Deny"],
            "matchResources": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": pool.namespace}}},
        },
    }
    pool.cluster_object(policy)
    pool.cluster_object(binding)
    probe = pool.pod("probe", labels={REFUSE: "true"}, scheduler_name=None)
    pool.create(probe)
    as_user = pool.api_as("user")
    path = f"/api/v1/namespaces/{pool.namespace}/pods/probe?dryRun=All"

    def active() -> bool:
        return as_user.patch(path, {"metadata": {"annotations": {"probe": "1"}}}).status == 422

    wait_for(active, what="the refusing policy in force")
    yield name


def test_refused_unit_waits_and_says_why_while_others_bind(phalanx: Stack, pool: Pool, refusing_policy: str) -> None:
    pool.add_nodes(2, cpu="4")
    pool.create(pool.pod_group("refused", {"gang": {"minCount": 2}}), pool.pod_group("free", {"gang": {"minCount": 2}}))
    refused = [f"r{i}" for i in range(2)]
    free = [f"f{i}" for i in range(2)]
    pool.create(*(pool.pod(r, cpu="2", group="refused", labels={REFUSE: "true"}) for r in refused))
    pool.create(*(pool.pod(f, cpu="2", group="free") for f in free))

    pool.wait_bound(free)
    assert pool.bound(refused) == {}
    assert phalanx.plane.refused(422, pool.namespace), "the policy refused the scheduler's writes"

    def warned() -> list[Json]:
        return [
            e for e in pool.events() if e.get("type") == "Warning" and e["regarding"]["name"] in (*refused, "refused")
        ]

    (warning, *_) = wait_for(warned, what="a Warning Event on the refused unit")
    assert "refused by the e2e policy" in warning.get("note", ""), warning

    for name in refused:  # the policy no longer applies: the unit's retry goes through
        reply = pool.api.patch(
            f"/api/v1/namespaces/{pool.namespace}/pods/{name}", {"metadata": {"labels": {REFUSE: None}}}
        )
        assert reply.status == 200, reply.message
    pool.wait_bound(refused)
