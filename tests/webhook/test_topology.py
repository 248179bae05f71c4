"""`spec.schedulingConstraints.topology` at admission: the API server's rules for the native kind (one label key),
our kind's two levels, and the field inherited from a Workload template."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.api.pod_group import API_VERSION, PodGroup
from scheduler.api.workload import Workload
from tests.builders import make_podgroup
from webhook.admission import admit
from webhook.errors import Denied
from webhook.rules.lookups import MemoryLookups


def constrained(*keys: str) -> dict[str, Any]:
    return {"topology": [{"key": key} for key in keys]}


def denial(obj: object) -> str:
    with pytest.raises(Denied) as caught:
        admit(obj, MemoryLookups())
    return str(caught.value)


def test_our_kind_takes_two_levels_narrowest_first() -> None:
    admitted = admit(
        make_podgroup("g").gang(4).spec_field("schedulingConstraints", constrained("rack", "block")).obj(),
        MemoryLookups(),
    )
    assert isinstance(admitted.object, PodGroup)
    assert admitted.object.topology_keys == ("rack", "block")


@pytest.mark.parametrize(
    ("native", "keys", "message"),
    [
        # The API server's own words for the native kind (kube-apiserver 1.36.2 on ../shared/kube).
        (True, ("rack", "block"), "spec.schedulingConstraints.topology: Too many: 2: must have at most 1 item"),
        (
            False,
            ("rack", "block", "zone"),
            "spec.schedulingConstraints.topology: Too many: 3: must have at most 2 items",
        ),
        (
            False,
            ("bad key!",),
            'spec.schedulingConstraints.topology[0].key: Invalid value: "bad key!": name part must consist of'
            " alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character",
        ),
        (False, ("rack", "rack"), 'spec.schedulingConstraints.topology[1].key: Duplicate value: "rack"'),
    ],
    ids=["native-two-levels", "ours-three-levels", "bad-label-key", "same-level-twice"],
)
def test_bad_topology_is_refused_naming_the_field(native: bool, keys: tuple[str, ...], message: str) -> None:
    group = make_podgroup("g").gang(2).spec_field("schedulingConstraints", constrained(*keys))
    assert message in denial((group.native() if native else group).obj())


def test_a_pod_group_inherits_topology_from_its_workload_template() -> None:
    workload = Workload.model_validate(
        {
            "apiVersion": API_VERSION,
            "kind": "Workload",
            "metadata": {"name": "training", "namespace": "default"},
            "spec": {
                "podGroupTemplates": [
                    {
                        "name": "workers",
                        "schedulingPolicy": {"gang": {"minCount": 4}},
                        "schedulingConstraints": constrained("rack"),
                    }
                ]
            },
        }
    )
    group = (
        make_podgroup("g")
        .gang(4)
        .spec_field(
            "podGroupTemplateRef", {"workload": {"workloadName": "training", "podGroupTemplateName": "workers"}}
        )
    )
    admitted = admit(group.obj(), MemoryLookups.of([workload]))
    assert admitted.object.topology_keys == ("rack",)


def test_a_workload_template_with_a_bad_level_is_refused() -> None:
    workload = {
        "apiVersion": API_VERSION,
        "kind": "Workload",
        "metadata": {"name": "training", "namespace": "default"},
        "spec": {
            "podGroupTemplates": [
                {
                    "name": "w",
                    "schedulingPolicy": {"gang": {"minCount": 2}},
                    "schedulingConstraints": constrained("a/b/c"),
                }
            ]
        },
    }
    assert 'spec.podGroupTemplates[0].schedulingConstraints.topology[0].key: Invalid value: "a/b/c"' in denial(workload)
