"""Recorded AdmissionReviews replayed over HTTPS to a real gunicorn, one case per rule.

Each case starts from a fixture in `tests/fixtures/recorded/admission/`, optionally edited to break a rule, and
states the decision: for /mutate, the object after applying the returned JSONPatch; for /validate, the
exact apiserver-style message.
"""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Callable
from typing import Any

import pytest
from jsonpointer import resolve_pointer

from tests.webhook.harness import Webhook, apply_patch, fixture

Edit = Callable[[dict[str, Any]], None]


def obj(request: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = request["object"]
    return found


def spec(request: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = request["object"]["spec"]
    return found


def ungated_default_scheduler(request: dict[str, Any]) -> None:
    spec(request).pop("schedulingGates")
    spec(request)["schedulerName"] = "default-scheduler"


def gates(*names: str) -> Edit:
    def edit(request: dict[str, Any]) -> None:
        spec(request)["schedulingGates"] = [{"name": n} for n in names]

    return edit


def set_spec(**values: Any) -> Edit:
    def edit(request: dict[str, Any]) -> None:
        spec(request).update(values)

    return edit


def set_annotation(key: str, value: str) -> Edit:
    def edit(request: dict[str, Any]) -> None:
        obj(request)["metadata"].setdefault("annotations", {})[key] = value

    return edit


def relabel_group(request: dict[str, Any]) -> None:
    obj(request)["metadata"]["labels"]["scheduling.phalanx.dev/pod-group"] = "pg2"


def templates(count: int) -> Edit:
    def edit(request: dict[str, Any]) -> None:
        spec(request)["podGroupTemplates"] = [
            {"name": f"t{i}", "schedulingPolicy": {"basic": {}}} for i in range(count)
        ]

    return edit


def as_update_of(name: str) -> Edit:
    """Turn a CREATE review into an UPDATE whose old object is the recorded stored `name`."""

    def edit(request: dict[str, Any]) -> None:
        request["operation"] = "UPDATE"
        request["oldObject"] = fixture(f"objects/{name}")

    return edit


def root_under_research(request: dict[str, Any]) -> None:
    obj(request)["metadata"]["name"] = "root"
    spec(request)["parentQueue"] = "research"


PG_TOLERATION = "preemption-toleration.scheduling.sigs.k8s.io/"

MUTATE_CASES = [
    pytest.param("pod-create-mutating.json", None, {}, id="gated pod of our scheduler is left as is"),
    pytest.param(
        "pod-create-mutating.json",
        ungated_default_scheduler,
        {
            "/spec/schedulingGates": [{"name": "scheduling.phalanx.dev/gang"}],
            "/spec/schedulerName": "phalanx-scheduler",
        },
        id="pod-group member gets the gang gate and our scheduler",
    ),
    pytest.param(
        "pod-create-mutating.json",
        gates("example.com/other"),
        {"/spec/schedulingGates": [{"name": "example.com/other"}, {"name": "scheduling.phalanx.dev/gang"}]},
        id="gang gate is appended after the user's gates",
    ),
    pytest.param(
        "pod-create-mutating.json",
        set_spec(schedulerName="custom-scheduler"),
        {"/spec/schedulerName": "custom-scheduler"},
        id="a pod naming another scheduler keeps it",
    ),
    pytest.param(
        "pod-create-native-schedulinggroup-mutating.json",
        None,
        {"/spec/schedulingGates": [{"name": "scheduling.phalanx.dev/gang"}]},
        id="native schedulingGroup member is gated too",
    ),
    pytest.param("pod-create-default-scheduler-mutating.json", None, {}, id="pod outside any group is untouched"),
    pytest.param("pod-create-other-user-mutating.json", None, {}, id="unprivileged user's plain pod is untouched"),
    pytest.param("pod-create-dryrun-mutating.json", None, {}, id="dry run gets the same answer"),
    pytest.param("pod-update-remove-gate-mutating.json", None, {}, id="updates are never mutated"),
    pytest.param(
        "phalanx-podgroup-create-mutating.json",
        None,
        {"/spec/priority": 100000, "/spec/disruptionMode": "PodGroup"},
        id="podgroup priority comes from its class",
    ),
    pytest.param(
        "phalanx-podgroup-create-mutating.json",
        lambda r: [spec(r).pop("priorityClassName"), spec(r).pop("disruptionMode")],
        {"/spec/priorityClassName": "phalanx-default", "/spec/priority": 1000, "/spec/disruptionMode": "Pod"},
        id="podgroup without class takes the globalDefault and disruptionMode Pod",
    ),
    pytest.param(
        "native-podgroup-create-mutating.json",
        lambda r: [spec(r).pop(k) for k in ("schedulingPolicy", "disruptionMode", "priorityClassName", "priority")],
        {
            "/spec/schedulingPolicy": {"gang": {"minCount": 2}},
            "/spec/disruptionMode": "PodGroup",
            "/spec/priorityClassName": "phalanx-high",
            "/spec/priority": 100000,
        },
        id="native podgroup inherits unset fields from its workload template",
    ),
    pytest.param(
        "workload-create-mutating.json",
        None,
        {
            "/spec/podGroupTemplates/0/priority": 100000,
            "/spec/podGroupTemplates/1/priorityClassName": "phalanx-default",
            "/spec/podGroupTemplates/1/priority": 1000,
            "/spec/podGroupTemplates/0/schedulingConstraints": None,
        },
        id="workload templates get priority defaults and keep unknown fields",
    ),
    pytest.param("phalanx-queue-create-mutating.json", None, {}, id="queues are not mutated"),
    pytest.param("priorityclass-create-mutating.json", None, {}, id="priority classes are not mutated"),
    pytest.param("pod-binding-create-mutating.json", None, {}, id="bindings pass untouched"),
    pytest.param("phalanx-podgroup-status-update-mutating.json", None, {}, id="status updates pass untouched"),
]


@pytest.mark.parametrize(("name", "edit", "want_fields"), MUTATE_CASES)
def test_mutate(webhook: Webhook, name: str, edit: Edit | None, want_fields: dict[str, Any]) -> None:
    review = fixture(f"admission/{name}")
    if edit:
        edit(review["request"])
    status, body = webhook.post("mutate", review)
    response = body["response"]
    assert (status, response["uid"], response["allowed"]) == (200, review["request"]["uid"], True)
    original = copy.deepcopy(review["request"]["object"])
    patched = apply_patch(original, response)
    if not want_fields:
        assert "patch" not in response
    for pointer, want in want_fields.items():
        assert resolve_pointer(patched, pointer) == want, pointer
    # Nothing else changed: dropping the wanted fields from both leaves equal objects.
    untouched = {k: v for k, v in patched.items() if k != "spec"}
    assert untouched == {k: v for k, v in review["request"]["object"].items() if k != "spec"}


def test_patch_adds_the_whole_list_when_it_is_missing(webhook: Webhook) -> None:
    review = fixture("admission/pod-create-mutating.json")
    ungated_default_scheduler(review["request"])
    _, body = webhook.post("mutate", review)
    operations = json.loads(base64.b64decode(body["response"]["patch"]))
    assert sorted(operations, key=lambda op: op["path"]) == [
        {"op": "replace", "path": "/spec/schedulerName", "value": "phalanx-scheduler"},
        {"op": "add", "path": "/spec/schedulingGates", "value": [{"name": "scheduling.phalanx.dev/gang"}]},
    ]


def test_priority_mismatch_with_group_is_a_warning(webhook: Webhook) -> None:
    review = fixture("admission/pod-create-mutating.json")
    spec(review["request"])["priorityClassName"] = "phalanx-default"
    _, body = webhook.post("mutate", review)
    assert body["response"]["allowed"] is True
    assert body["response"]["warnings"] == [
        'spec.priorityClassName: "phalanx-default" differs from "phalanx-high" of PodGroup ml-team/pg1;'
        " the PodGroup's priority applies to every member"
    ]


def test_queue_whose_parent_does_not_exist_yet_is_admitted_with_a_warning(webhook: Webhook) -> None:
    """`kubectl apply -f dir/` or a GitOps sync may create a child queue before its parent."""
    review = fixture("admission/phalanx-queue-create-validating.json")
    spec(review["request"])["parentQueue"] = "ghost"
    _, body = webhook.post("validate", review)
    assert body["response"]["allowed"] is True
    name = review["request"]["object"]["metadata"]["name"]
    assert body["response"]["warnings"] == [
        f'spec.parentQueue: Queue "ghost" was not found; until it exists, min-runtime durations are not inherited'
        f" from above queue {name}"
    ]


VALIDATE_CASES = [
    # allowed, as recorded
    *(
        pytest.param(name, None, None, id=f"recorded {name.removesuffix('-validating.json')} is allowed")
        for name in (
            "pod-create-validating.json",
            "pod-create-dryrun-validating.json",
            "pod-create-native-schedulinggroup-validating.json",
            "pod-update-remove-gate-validating.json",
            "pod-update-remove-last-gate-validating.json",
            "pod-delete-validating-1.json",
            "pod-binding-create-validating.json",
            "phalanx-podgroup-create-validating.json",
            "phalanx-podgroup-update-metadata-validating.json",
            "phalanx-podgroup-status-update-validating.json",
            "native-podgroup-create-validating.json",
            "native-podgroup-update-validating.json",
            "native-podgroup-status-update-validating.json",
            "workload-create-validating.json",
            "workload-update-validating.json",
            "phalanx-queue-create-validating.json",
            "phalanx-queue-update-validating.json",
            "priorityclass-create-validating.json",
            "priorityclass-update-validating.json",
            "priorityclass-create-globaldefault-validating.json",
        )
    ),
    # pods
    pytest.param(
        "pod-update-add-gate-422-mutating.json",
        None,
        "spec.schedulingGates[2].name: Forbidden: only deletion is allowed, but found new scheduling gate"
        " 'example.com/new-gate'",
        id="adding a gate on update is denied with the apiserver's words",
    ),
    pytest.param(
        "pod-create-validating.json",
        set_spec(nodeName="gpu-node-1"),
        "spec.nodeName: Forbidden: cannot be set until all schedulingGates have been cleared",
        id="pod created with nodeName and gates is denied",
    ),
    pytest.param(
        "pod-update-remove-gate-validating.json",
        set_spec(nodeName="gpu-node-1"),
        "spec.nodeName: Forbidden: cannot be set until all schedulingGates have been cleared",
        id="setting nodeName while gates remain is denied",
    ),
    pytest.param(
        "pod-update-remove-last-gate-validating.json",
        set_spec(nodeName="gpu-node-1"),
        None,
        id="setting nodeName once gates are gone is allowed",
    ),
    pytest.param(
        "pod-create-validating.json",
        gates("a", "a"),
        'spec.schedulingGates[1].name: Duplicate value: "a"',
        id="duplicate gate names are denied",
    ),
    pytest.param(
        "pod-create-validating.json",
        gates("bad gate!"),
        'spec.schedulingGates[0].name: Invalid value: "bad gate!": name part must consist of alphanumeric'
        " characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or"
        " 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
        id="gate names must be qualified names",
    ),
    pytest.param(
        "pod-update-remove-gate-validating.json",
        relabel_group,
        'metadata.labels[scheduling.phalanx.dev/pod-group]: Invalid value: "pg2": field is immutable',
        id="pod-group membership cannot change",
    ),
    # pod groups
    pytest.param(
        "phalanx-podgroup-update-spec-validating.json",
        None,
        'spec.schedulingPolicy: Invalid value: {"gang":{"minCount":3}}: field is immutable',
        id="podgroup spec change is denied",
    ),
    pytest.param(
        "native-podgroup-update-spec-422-mutating.json",
        None,
        'spec.disruptionMode: Invalid value: "Pod": field is immutable',
        id="native podgroup disruptionMode is immutable",
    ),
    pytest.param(
        "phalanx-podgroup-create-validating.json",
        set_spec(schedulingPolicy={"basic": {}, "gang": {"minCount": 2}}),
        "spec.schedulingPolicy: Forbidden: exactly one of basic or gang may be set, not both",
        id="podgroup with both basic and gang is denied",
    ),
    pytest.param(
        "phalanx-podgroup-create-validating.json",
        lambda r: spec(r).pop("schedulingPolicy"),
        "spec.schedulingPolicy: Required value: exactly one of basic or gang must be set",
        id="podgroup without a policy is denied",
    ),
    pytest.param(
        "phalanx-podgroup-create-validating.json",
        set_spec(schedulingPolicy={"gang": {"minCount": 0}}),
        "spec.schedulingPolicy.gang.minCount: Invalid value: 0: must be greater than or equal to 1",
        id="gang minCount below 1 is denied",
    ),
    pytest.param(
        "phalanx-podgroup-create-validating.json",
        set_spec(schedulingPolicy={"gang": {"minCount": "two"}}),
        'spec.schedulingPolicy.gang.minCount: Invalid value: "two": must be a valid integer, unable to parse'
        " string as an integer",
        id="non-integer minCount is denied, not a crash",
    ),
    pytest.param(
        "phalanx-podgroup-create-validating.json",
        set_spec(disruptionMode="Whole"),
        'spec.disruptionMode: Unsupported value: "Whole": supported values: "Pod", "PodGroup"',
        id="unknown disruptionMode is denied",
    ),
    pytest.param(
        "phalanx-podgroup-create-validating.json",
        set_spec(schedulingPolicy={"basic": {}}),
        'spec.disruptionMode: Invalid value: "PodGroup": must be Pod when schedulingPolicy is basic: only a gang'
        " can be disrupted as one unit",
        id="PodGroup disruption with a basic policy is denied",
    ),
    pytest.param(
        "phalanx-podgroup-create-validating.json",
        set_spec(priorityClassName="nope"),
        'spec.priorityClassName: Invalid value: "nope": no PriorityClass with name nope was found',
        id="unknown priority class is denied",
    ),
    pytest.param(
        "phalanx-podgroup-create-validating.json",
        set_spec(priority=5),
        "spec.priority: Invalid value: 5: must equal 100000, the value of PriorityClass phalanx-high",
        id="priority differing from its class is denied",
    ),
    pytest.param(
        "native-podgroup-create-validating.json",
        lambda r: spec(r)["podGroupTemplateRef"]["workload"].update(podGroupTemplateName="nope"),
        'spec.podGroupTemplateRef.workload.podGroupTemplateName: Not found: "nope": Workload ml-team/training has no'
        " podGroupTemplate named nope",
        id="reference to a missing template is denied",
    ),
    pytest.param(
        "phalanx-podgroup-create-validating.json",
        set_spec(schedulingPolicy={"gang": {"minCount": 0}}, priority=5),
        "[spec.schedulingPolicy.gang.minCount: Invalid value: 0: must be greater than or equal to 1, spec.priority:"
        " Invalid value: 5: must equal 100000, the value of PriorityClass phalanx-high]",
        id="every error is reported, not just the first",
    ),
    # workloads
    pytest.param(
        "workload-create-validating.json",
        templates(0),
        "spec.podGroupTemplates: Required value: must have at least 1 item",
        id="workload without templates is denied",
    ),
    pytest.param(
        "workload-create-validating.json",
        templates(9),
        "spec.podGroupTemplates: Too many: 9: must have at most 8 items",
        id="workload with 9 templates is denied",
    ),
    pytest.param("workload-create-validating.json", templates(8), None, id="workload with 8 templates is allowed"),
    pytest.param(
        "workload-create-validating.json",
        lambda r: spec(r)["podGroupTemplates"][1].update(name="workers"),
        'spec.podGroupTemplates[1].name: Duplicate value: "workers"',
        id="template names are unique",
    ),
    pytest.param(
        "workload-create-validating.json",
        lambda r: spec(r)["podGroupTemplates"][0]["schedulingPolicy"]["gang"].update(minCount=-1),
        "spec.podGroupTemplates[0].schedulingPolicy.gang.minCount: Invalid value: -1: must be greater than or equal"
        " to 1",
        id="template gang minCount below 1 is denied",
    ),
    pytest.param(
        "workload-create-validating.json",
        as_update_of("workload.json"),
        None,
        id="workload update with an unchanged spec is allowed",
    ),
    pytest.param(
        "workload-create-validating.json",
        lambda r: [as_update_of("workload.json")(r), spec(r).update(controllerRef={"kind": "Job", "name": "other"})],
        'spec.controllerRef: Invalid value: {"kind":"Job","name":"other"}: field is immutable',
        id="workload spec is immutable",
    ),
    # priority classes
    pytest.param(
        "priorityclass-create-validating.json",
        set_annotation(PG_TOLERATION + "minimum-preemptable-priority", "3000000000"),
        f'metadata.annotations[{PG_TOLERATION}minimum-preemptable-priority]: Invalid value: "3000000000": must be an'
        " int32 integer, got '3000000000' (out of range)",
        id="minimum-preemptable-priority must fit int32",
    ),
    pytest.param(
        "priorityclass-update-validating.json",
        set_annotation(PG_TOLERATION + "toleration-seconds", "ten"),
        f'metadata.annotations[{PG_TOLERATION}toleration-seconds]: Invalid value: "ten": must be an int64 integer,'
        " got 'ten'",
        id="toleration-seconds must be an integer on update too",
    ),
    # queues
    pytest.param(
        "phalanx-queue-create-validating.json",
        set_spec(preemptMinRuntime="soon"),
        "spec.preemptMinRuntime: Invalid value: \"soon\": 'soon' is not a duration: expected e.g. 90s, 10m, 1h30m,"
        " 1.5h, 2d",
        id="queue durations must parse",
    ),
    pytest.param(
        "phalanx-queue-update-validating.json",
        set_spec(reclaimMinRuntime="-5m"),
        'spec.reclaimMinRuntime: Invalid value: "-5m": must not be negative',
        id="queue durations cannot be negative",
    ),
    pytest.param(
        "phalanx-queue-create-validating.json",
        root_under_research,
        'spec.parentQueue: Invalid value: "research": would create a cycle: root -> research -> root',
        id="queue cycles are denied",
    ),
]


@pytest.mark.parametrize(("name", "edit", "want_message"), VALIDATE_CASES)
def test_validate(webhook: Webhook, name: str, edit: Edit | None, want_message: str | None) -> None:
    review = fixture(f"admission/{name}")
    if edit:
        edit(review["request"])
    status, body = webhook.post("validate", review)
    response = body["response"]
    assert (status, response["uid"]) == (200, review["request"]["uid"])
    if want_message is None:
        assert response == {"uid": review["request"]["uid"], "allowed": True}
    else:
        assert response["allowed"] is False
        assert (response["status"]["code"], response["status"]["message"]) == (403, want_message)
