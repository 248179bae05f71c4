"""`webhook.admission.admit`, the entry `phalanx simulate` uses: the same defaults and denials as the webhook."""

from __future__ import annotations

import subprocess
import sys

import pytest

from scheduler.api.pod import Pod
from scheduler.api.pod_group import PodGroup
from scheduler.api.queue import Queue
from tests.builders import make_node, make_pod, make_podgroup, make_priority_class, make_queue
from webhook.admission import admit
from webhook.app import create_app
from webhook.errors import Denied
from webhook.rules.lookups import MemoryLookups
from webhook.rules.pod import PodSettings

HIGH = make_priority_class("high", 1000).obj()
DEFAULT = make_priority_class("low-default", 10).global_default().obj()
OTHER_DEFAULT = make_priority_class("lower-default", 5).global_default().obj()


def lookups(*extra: object) -> MemoryLookups:
    return MemoryLookups.of([HIGH, DEFAULT, make_queue("root").obj(), *extra])  # type: ignore[list-item]


def test_model_in_model_out_with_priority_and_disruption_defaults() -> None:
    admitted = admit(make_podgroup("pg").gang(2).obj(), lookups())
    assert isinstance(admitted.object, PodGroup)
    spec = admitted.object.spec
    assert (spec.priority_class_name, spec.priority, spec.disruption_mode) == ("low-default", 10, "Pod")


def test_lowest_global_default_wins() -> None:
    admitted = admit(make_podgroup("pg").gang(2).obj(), lookups(OTHER_DEFAULT))
    assert (admitted.object.spec.priority_class_name, admitted.object.spec.priority) == ("lower-default", 5)


def test_no_default_class_means_priority_zero() -> None:
    admitted = admit(make_podgroup("pg").gang(2).obj(), MemoryLookups())
    assert (admitted.object.spec.priority_class_name, admitted.object.spec.priority) == (None, 0)


def test_dict_in_dict_out_keeps_unknown_fields() -> None:
    raw = make_podgroup("pg").gang(2).priority_class("high").json()
    raw["spec"]["futureField"] = {"x": 1}
    admitted = admit(raw, lookups())
    assert admitted.object["spec"]["futureField"] == {"x": 1}
    assert admitted.object["spec"]["priority"] == 1000


def test_denial_carries_every_error_and_the_webhook_message() -> None:
    with pytest.raises(Denied) as caught:
        admit(make_podgroup("pg").basic().disruption_mode("PodGroup").priority_class("nope").obj(), lookups())
    assert str(caught.value) == (
        '[spec.disruptionMode: Invalid value: "PodGroup": must be Pod when schedulingPolicy is basic: only a gang can'
        ' be disrupted as one unit, spec.priorityClassName: Invalid value: "nope": no PriorityClass with name nope'
        " was found]"
    )
    assert [str(e.path) for e in caught.value.errors] == ["spec.disruptionMode", "spec.priorityClassName"]


def test_member_pod_is_gated_for_the_configured_scheduler_and_warned_about_priority() -> None:
    group = make_podgroup("train").gang(2).priority_class("high").obj()
    pod = make_pod("p").group("train").scheduler("default-scheduler").priority_class("low-default").obj()
    settings = PodSettings(scheduler_name="my-scheduler", gate_name="example.com/gang")
    admitted = admit(pod, lookups(group), settings)
    assert isinstance(admitted.object, Pod)
    assert [g.name for g in admitted.object.spec.scheduling_gates] == ["example.com/gang"]
    assert admitted.object.spec.scheduler_name == "my-scheduler"
    assert admitted.warnings == (
        'spec.priorityClassName: "low-default" differs from "high" of PodGroup default/train; the PodGroup\'s'
        " priority applies to every member",
    )


def test_pod_created_bound_with_gates_is_denied() -> None:
    with pytest.raises(Denied, match=r"spec\.nodeName: Forbidden"):
        admit(make_pod("p").gate("g").on("n1").obj(), lookups())


def test_queue_cycle_through_existing_queues_is_denied() -> None:
    known = lookups(make_queue("a").parent("b").obj(), make_queue("b").parent("root").obj())
    with pytest.raises(Denied, match=r"would create a cycle: root -> a -> b -> root"):
        admit(Queue.model_validate({**make_queue("root").json(), "spec": {"parentQueue": "a"}}), known)


def test_queue_applied_before_its_parent_is_admitted_with_a_warning() -> None:
    admitted = admit(make_queue("team").parent("org").obj(), lookups())
    assert admitted.warnings == (
        'spec.parentQueue: Queue "org" was not found; until it exists, min-runtime durations are not inherited'
        " from above queue team",
    )
    assert admit(make_queue("team").parent("org").obj(), lookups(make_queue("org").obj())).warnings == ()


def test_kinds_without_rules_pass_unchanged() -> None:
    node = make_node("n1").obj()
    assert admit(node, lookups()).object == node


def test_admission_rules_load_neither_flask_nor_the_kubernetes_client() -> None:
    """`phalanx simulate` admits through these rules and must not pay for either."""
    code = "import sys, webhook.admission; print(sorted({'flask', 'kubernetes', 'gunicorn'} & set(sys.modules)))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_readyz_is_503_until_caches_sync() -> None:
    synced = {"now": False}
    client = create_app(lookups(), ready=lambda: synced["now"]).test_client()
    assert client.get("/readyz").status_code == 503
    assert client.get("/healthz").status_code == 200
    synced["now"] = True
    assert client.get("/readyz").status_code == 200
