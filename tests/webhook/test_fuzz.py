"""Property: whatever arrives, both endpoints answer with a well-formed review, never a 5xx or a bug.

In-process through the Flask test client (fast, many examples), then a handful over real HTTPS. Inputs are
arbitrary JSON bodies, arbitrary envelopes, and recorded reviews whose objects have random values
grafted at random paths (type confusion deep inside a spec is where crashes hide).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from flask.testing import FlaskClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.api.manifest import KINDS
from tests.webhook.harness import FIXTURES, Webhook, apply_patch, fixture
from webhook.app import create_app
from webhook.rules.lookups import MemoryLookups

SEEDED = [
    fixture(f"objects/{name}")
    for name in (
        "priorityclass-preemption-toleration.json",
        "priorityclass-globaldefault.json",
        "workload.json",
        "phalanx-queue.json",
        "phalanx-podgroup.json",
        "native-podgroup.json",
    )
]
LOOKUPS = MemoryLookups.of(KINDS[(o["apiVersion"], o["kind"])].model_validate(o) for o in SEEDED)
CLIENT: FlaskClient = create_app(LOOKUPS).test_client()
REVIEWS = sorted(p.name for p in (FIXTURES / "admission").glob("*.json") if "request" in json.loads(p.read_text()))
GVKS = [
    {"group": "", "version": "v1", "kind": "Pod"},
    {"group": "scheduling.phalanx.dev", "version": "v1alpha1", "kind": "PodGroup"},
    {"group": "scheduling.k8s.io", "version": "v1alpha2", "kind": "PodGroup"},
    {"group": "scheduling.phalanx.dev", "version": "v1alpha1", "kind": "Workload"},
    {"group": "scheduling.k8s.io", "version": "v1alpha2", "kind": "Workload"},
    {"group": "scheduling.k8s.io", "version": "v1", "kind": "PriorityClass"},
    {"group": "scheduling.phalanx.dev", "version": "v1alpha1", "kind": "Queue"},
]

scalars = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | st.text(max_size=12)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(value, dict):
        for key, child in value.items():
            if key != "managedFields":
                found += _paths(child, (*prefix, key))
    elif isinstance(value, list):
        for i, child in enumerate(value[:4]):
            found += _paths(child, (*prefix, i))
    return found


def _graft(target: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(target, dict) and isinstance(head, str):  # a list index on a grafted dict: JSON keys are strings
        return {**target, head: _graft(target.get(head), rest, value)}
    if isinstance(target, list) and isinstance(head, int) and head < len(target):
        return [*target[:head], _graft(target[head], rest, value), *target[head + 1 :]]
    return target


@st.composite
def grafted_reviews(draw: st.DrawFn) -> dict[str, Any]:
    review = fixture(f"admission/{draw(st.sampled_from(REVIEWS))}")
    paths = _paths(review["request"], ("request",))
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(paths))
        review = _graft(review, path, draw(json_values))
    if draw(st.booleans()):
        review = _graft(review, ("request", "kind"), draw(st.sampled_from(GVKS)))
    return review


envelopes = st.fixed_dictionaries(
    {"apiVersion": st.just("admission.k8s.io/v1"), "kind": st.just("AdmissionReview")},
    optional={
        "request": st.fixed_dictionaries(
            {},
            optional={
                "uid": st.text(max_size=8) | scalars,
                "kind": st.sampled_from(GVKS) | json_values,
                "operation": st.sampled_from(["CREATE", "UPDATE", "DELETE", "CONNECT"]) | scalars,
                "object": json_values,
                "oldObject": json_values,
                "subResource": st.sampled_from(["", "status"]) | scalars,
                "dryRun": st.booleans(),
            },
        )
        | json_values
    },
)
bodies = (
    st.binary(max_size=64)
    | json_values.map(lambda v: json.dumps(v).encode())
    | envelopes.map(lambda v: json.dumps(v).encode())
    | grafted_reviews().map(lambda v: json.dumps(v).encode())
)


def _check(status: int, raw: bytes, sent: bytes) -> None:
    assert status in (200, 400), raw
    review = json.loads(raw)
    assert (review["apiVersion"], review["kind"]) == ("admission.k8s.io/v1", "AdmissionReview")
    response = review["response"]
    assert isinstance(response["allowed"], bool)
    assert response.get("status", {}).get("code") != 500, response  # 500 in the body means a bug
    try:
        request = json.loads(sent).get("request")
    except (ValueError, AttributeError, RecursionError):
        return
    if isinstance(request, dict) and isinstance(request.get("uid"), str):
        assert response["uid"] == request["uid"]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(endpoint=st.sampled_from(["mutate", "validate"]), body=bodies)
def test_any_body_gets_a_well_formed_answer_in_process(endpoint: str, body: bytes) -> None:
    response = CLIENT.post(f"/{endpoint}", data=body, content_type="application/json")
    _check(response.status_code, response.data, body)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(endpoint=st.sampled_from(["mutate", "validate"]), body=bodies)
def test_any_body_gets_a_well_formed_answer_over_https(webhook: Webhook, endpoint: str, body: bytes) -> None:
    status, raw, _ = webhook.request("POST", f"/{endpoint}", body)
    _check(status, raw, body)


def test_fixture_directory_is_found() -> None:
    assert len(REVIEWS) > 40 and Path(FIXTURES).is_dir()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(review=grafted_reviews())
def test_returned_patch_applies_and_defaulting_is_idempotent(review: dict[str, Any]) -> None:
    response = CLIENT.post("/mutate", json=review).get_json()["response"]
    if "patch" not in response:
        return
    patched = apply_patch(review["request"]["object"], response)
    again = CLIENT.post("/mutate", json={**review, "request": {**review["request"], "object": patched}})
    assert "patch" not in again.get_json()["response"]
