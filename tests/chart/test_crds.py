"""The CRDs match the served ones, follow scheduler/api, and accept (or refuse) real documents.

jsonschema checks the OpenAPI part of each schema (types, enums, bounds, patterns, required) and
cel-python the `x-kubernetes-validations` rules, as the apiserver would evaluate them.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import celpy
import jsonschema
import pytest
import yaml
from celpy.adapter import json_to_cel

from scheduler.api.meta import ApiModel
from scheduler.api.pod_group import PodGroup, PodGroupSpec
from scheduler.api.queue import Queue, QueueSpec
from scheduler.api.workload import PodGroupTemplate, Workload, WorkloadSpec
from tests.chart.conftest import CHART
from tests.recorded import RECORDED

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = RECORDED / "objects"
GROUP_VERSION = "scheduling.phalanx.dev/v1alpha1"
MODELS: dict[str, type[ApiModel]] = {"PodGroup": PodGroup, "Workload": Workload, "Queue": Queue}
Doc = dict[str, Any]


def _crds() -> dict[str, Doc]:
    crds = [yaml.safe_load(p.read_text()) for p in sorted((CHART / "crds").glob("*.yaml"))]
    return {crd["spec"]["names"]["kind"]: crd for crd in crds}


CRDS = _crds()


def _schema(kind: str) -> Doc:
    schema: Doc = CRDS[kind]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def _validate(doc: Doc) -> list[str]:
    """Schema violations as `path: message`, as the apiserver words field errors."""
    validator = jsonschema.Draft4Validator(_schema(doc["kind"]))
    return sorted(
        f"{'.'.join(str(p) for p in error.absolute_path)}: {error.message}" for error in validator.iter_errors(doc)
    )


def _example_documents() -> list[Doc]:
    docs = []
    for path in sorted((ROOT / "examples").glob("**/*.yaml")) + sorted((ROOT / "examples").glob("**/*.json")):
        for doc in yaml.safe_load_all(path.read_text()):
            items = doc.get("items", []) if isinstance(doc, dict) and doc.get("kind") == "List" else [doc]
            docs += [d for d in items if isinstance(d, dict) and d.get("apiVersion") == GROUP_VERSION]
    return [d for d in docs if d.get("kind") in MODELS]


def test_crds_match_the_served_ones() -> None:
    assert set(CRDS) == {"PodGroup", "Workload", "Queue"}
    for path in FIXTURES.glob("crd-*.json"):
        served = json.loads(path.read_text())
        ours = CRDS[served["spec"]["names"]["kind"]]
        assert ours["metadata"]["name"] == served["metadata"]["name"]
        assert ours["spec"]["group"] == served["spec"]["group"]
        assert ours["spec"]["scope"] == served["spec"]["scope"]
        for key in ("plural", "singular", "kind", "listKind"):
            assert ours["spec"]["names"][key] == served["spec"]["names"][key]
        (served_version,) = served["spec"]["versions"]
        (our_version,) = ours["spec"]["versions"]
        assert our_version["name"] == served_version["name"]
        assert our_version.get("subresources", {}) == served_version.get("subresources", {})
    assert CRDS["Workload"]["spec"]["scope"] == "Namespaced"


@pytest.mark.parametrize(
    ("schema_path", "model"),
    [
        pytest.param(("spec",), PodGroupSpec, id="PodGroup spec"),
        pytest.param(("spec",), WorkloadSpec, id="Workload spec"),
        pytest.param(("spec", "podGroupTemplates", "items"), PodGroupTemplate, id="Workload template"),
        pytest.param(("spec",), QueueSpec, id="Queue spec"),
    ],
)
def test_schema_fields_are_the_model_fields(schema_path: tuple[str, ...], model: type[ApiModel]) -> None:
    """CRD schemas change together with scheduler/api: same field names, both ways."""
    kind = {PodGroupSpec: "PodGroup", WorkloadSpec: "Workload", PodGroupTemplate: "Workload", QueueSpec: "Queue"}[model]
    node = _schema(kind)
    for key in schema_path:
        node = node[key] if key == "items" else node["properties"][key]
    aliases = {field.alias or name for name, field in model.model_fields.items()}
    assert set(node["properties"]) == aliases


PRINTED_TYPES = {"integer": "integer", "number": "number", "string": "string", "boolean": "boolean"}
"""A printer column's type and the schema type of the field it prints (kubectl formats the value by the former)."""


def test_printer_columns_point_at_schema_fields() -> None:
    """Every column prints a field the schema has, through arrays only where the schema has an array, and is
    typed as that field is; `metadata` columns print the creation time as a date."""
    checked = 0
    for kind, crd in CRDS.items():
        schema = _schema(kind)
        for column in crd["spec"]["versions"][0]["additionalPrinterColumns"]:
            where = f"{kind} column {column['name']} ({column['jsonPath']})"
            parts = re.sub(r"\[[^\]]*\]", "[]", column["jsonPath"]).lstrip(".").split(".")
            if parts[0] == "metadata":
                assert (parts, column["type"]) == (["metadata", "creationTimestamp"], "date"), where
                continue
            node = schema
            for part in parts:
                name = part.split("[")[0]
                assert name in node.get("properties", {}), f"{where}: the schema has no {name!r} there"
                node = node["properties"][name]
                if "[" in part:
                    assert node.get("type") == "array", f"{where}: {name!r} is not an array"
                    node = node["items"]
            assert node.get("type") == PRINTED_TYPES.get(column["type"]), f"{where}: the field is {node.get('type')}"
            checked += 1
    assert checked >= 10, "every kind's columns were followed into its schema"


@pytest.mark.parametrize(
    "fixture", ["phalanx-podgroup.json", "phalanx-queue.json"], ids=["recorded PodGroup", "recorded Queue"]
)
def test_recorded_objects_are_accepted_and_parse(fixture: str) -> None:
    doc = json.loads((FIXTURES / fixture).read_text())

    assert _validate(doc) == []
    model = MODELS[doc["kind"]].model_validate(doc)
    assert model.to_json()["spec"] == doc["spec"]


def test_example_documents_are_accepted_and_parse() -> None:
    docs = _example_documents()
    if not docs:
        pytest.skip("examples/ has no PodGroup, Workload or Queue yet")
    for doc in docs:
        name = f"{doc['kind']}/{doc['metadata']['name']}"
        assert _validate(doc) == [], name
        MODELS[doc["kind"]].model_validate(doc)


WORKLOAD: Doc = {
    "apiVersion": GROUP_VERSION,
    "kind": "Workload",
    "metadata": {"name": "training", "namespace": "ml"},
    "spec": {
        "controllerRef": {"apiGroup": "batch", "kind": "Job", "name": "training"},
        "podGroupTemplates": [
            {"name": "workers", "schedulingPolicy": {"gang": {"minCount": 2}}, "disruptionMode": "PodGroup"},
            {"name": "driver", "schedulingPolicy": {"basic": {}}},
        ],
    },
}
PODGROUP = json.loads((FIXTURES / "phalanx-podgroup.json").read_text())
QUEUE = json.loads((FIXTURES / "phalanx-queue.json").read_text())


def _with(doc: Doc, path: str, value: Any) -> Doc:
    """A copy of `doc` with the dotted `path` set to `value` (list indexes as numbers)."""
    changed = copy.deepcopy(doc)
    *parents, last = path.split(".")
    node: Any = changed
    for part in parents:
        node = node[int(part)] if part.isdigit() else node[part]
    node[int(last) if last.isdigit() else last] = value
    return changed


@pytest.mark.parametrize(
    ("doc", "want_errors"),
    [
        pytest.param(WORKLOAD, [], id="workload with gang and basic templates"),
        pytest.param(
            _with(WORKLOAD, "spec.podGroupTemplates.0.schedulingPolicy.gang.minCount", 0),
            ["spec.podGroupTemplates.0.schedulingPolicy.gang.minCount: 0 is less than the minimum of 1"],
            id="gang minCount below 1",
        ),
        pytest.param(
            _with(WORKLOAD, "spec.podGroupTemplates", []),
            ["spec.podGroupTemplates: [] should be non-empty"],
            id="no templates",
        ),
        pytest.param(
            _with(
                WORKLOAD,
                "spec.podGroupTemplates",
                [{"name": f"t{i}", "schedulingPolicy": {"basic": {}}} for i in range(9)],
            ),
            ["spec.podGroupTemplates: [{'name': 't0', 'schedulingPolicy': {'basic': {}}}, {'name': 't1', "],
            id="nine templates",
        ),
        pytest.param(
            _with(WORKLOAD, "spec.podGroupTemplates.1.name", "Driver_1"),
            ["spec.podGroupTemplates.1.name: 'Driver_1' does not match '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'"],
            id="template name not a DNS label",
        ),
        pytest.param(
            _with(WORKLOAD, "spec.podGroupTemplates.0.disruptionMode", "Node"),
            ["spec.podGroupTemplates.0.disruptionMode: 'Node' is not one of ['Pod', 'PodGroup']"],
            id="unknown disruption mode",
        ),
        pytest.param(
            _with(WORKLOAD, "spec.podGroupTemplates.0.priority", 1_000_000_001),
            ["spec.podGroupTemplates.0.priority: 1000000001 is greater than the maximum of 1000000000"],
            id="priority above 1e9",
        ),
        pytest.param(
            _with(WORKLOAD, "spec.controllerRef", {"apiGroup": "batch"}),
            ["spec.controllerRef: 'kind' is a required property", "spec.controllerRef: 'name' is a required property"],
            id="controllerRef without kind and name",
        ),
        pytest.param(
            _with(PODGROUP, "spec.schedulingPolicy.gang", {}),
            ["spec.schedulingPolicy.gang: 'minCount' is a required property"],
            id="gang without minCount",
        ),
        pytest.param(
            _with(PODGROUP, "status.conditions.0.status", "Maybe"),
            ["status.conditions.0.status: 'Maybe' is not one of ['True', 'False', 'Unknown']"],
            id="condition status outside True/False/Unknown",
        ),
        pytest.param(
            _with(QUEUE, "spec.preemptMinRuntime", "ten minutes"),
            ["spec.preemptMinRuntime: 'ten minutes' does not match "],
            id="min-runtime not a duration",
        ),
        pytest.param(_with(QUEUE, "spec.reclaimMinRuntime", "1h30m"), [], id="compound duration"),
        pytest.param(_with(QUEUE, "spec.reclaimMinRuntime", "2d"), [], id="days"),
    ],
)
def test_schema_rules(doc: Doc, want_errors: list[str]) -> None:
    errors = _validate(doc)

    assert len(errors) == len(want_errors), errors
    for error, want in zip(errors, want_errors, strict=True):
        assert error.startswith(want), error


def test_template_names_are_unique_by_list_map_key() -> None:
    """The apiserver rejects duplicate keys of a list map before any rule runs (jsonschema cannot)."""
    templates = _schema("Workload")["properties"]["spec"]["properties"]["podGroupTemplates"]
    assert (templates["x-kubernetes-list-type"], templates["x-kubernetes-list-map-keys"]) == ("map", ["name"])


def _cel_errors(doc: Doc, old: Doc | None = None) -> list[str]:
    """Evaluate every `x-kubernetes-validations` rule the way the apiserver does.

    A rule sees its node as `self`; a transition rule (one naming `oldSelf`) runs only on update and
    only where the old object has the node too. List items are paired with old ones by their
    list-map keys. Returns `path: message` for each rule that does not hold.
    """
    env = celpy.Environment()
    errors: list[str] = []

    def walk(schema: Doc, value: Any, old_value: Any, path: str) -> None:
        for rule in schema.get("x-kubernetes-validations", []):
            transition = "oldSelf" in rule["rule"]
            if transition and old_value is None:
                continue
            activation = {"self": json_to_cel(value)}
            if transition:
                activation["oldSelf"] = json_to_cel(old_value)
            holds = env.program(env.compile(rule["rule"])).evaluate(activation)
            if not (isinstance(holds, celpy.celtypes.BoolType) and bool(holds)):
                errors.append(f"{path or '<root>'}: {rule['message']}")
        if isinstance(value, dict):
            for key, child in (schema.get("properties") or {}).items():
                if key in value:
                    old_child = old_value.get(key) if isinstance(old_value, dict) else None
                    walk(child, value[key], old_child, f"{path}.{key}".lstrip("."))
        if isinstance(value, list) and "items" in schema:
            keys = schema.get("x-kubernetes-list-map-keys")
            old_items = {tuple(o[k] for k in keys): o for o in old_value} if keys and old_value else {}
            for i, item in enumerate(value):
                old_item = old_items.get(tuple(item.get(k) for k in keys)) if keys else None
                walk(schema["items"], item, old_item, f"{path}[{i}]")

    walk(_schema(doc["kind"]), doc, old, "")
    return errors


@pytest.mark.parametrize(
    ("doc", "old", "want_errors"),
    [
        pytest.param(PODGROUP, None, [], id="podgroup create"),
        pytest.param(
            _with(PODGROUP, "spec.schedulingPolicy", {"basic": {}, "gang": {"minCount": 2}}),
            None,
            ["spec.schedulingPolicy: exactly one of basic or gang must be set"],
            id="podgroup with both basic and gang",
        ),
        pytest.param(
            _with(_with(PODGROUP, "spec.schedulingPolicy", {}), "spec.disruptionMode", "Pod"),
            None,
            ["spec.schedulingPolicy: exactly one of basic or gang must be set"],
            id="podgroup with neither basic nor gang",
        ),
        pytest.param(
            _with(PODGROUP, "metadata.labels", {"team": "nlp"}), PODGROUP, [], id="podgroup relabelled: allowed"
        ),
        pytest.param(_with(PODGROUP, "status.conditions", []), PODGROUP, [], id="podgroup status change: allowed"),
        pytest.param(
            _with(PODGROUP, "spec.schedulingPolicy.gang.minCount", 4),
            PODGROUP,
            ["spec: spec is immutable"],
            id="podgroup minCount changed",
        ),
        pytest.param(
            _with(WORKLOAD, "spec.podGroupTemplates.1.schedulingPolicy", {"basic": {}, "gang": {"minCount": 1}}),
            None,
            ["spec.podGroupTemplates[1].schedulingPolicy: exactly one of basic or gang must be set"],
            id="workload template with both policies",
        ),
        pytest.param(
            _with(WORKLOAD, "spec.podGroupTemplates.0.schedulingPolicy.gang.minCount", 3),
            WORKLOAD,
            ["spec.podGroupTemplates: podGroupTemplates is immutable"],
            id="workload template changed",
        ),
        pytest.param(
            WORKLOAD,
            _with(WORKLOAD, "spec", {"podGroupTemplates": WORKLOAD["spec"]["podGroupTemplates"]}),
            [],
            id="workload controllerRef set later: allowed",
        ),
        pytest.param(
            _with(WORKLOAD, "spec", {"podGroupTemplates": WORKLOAD["spec"]["podGroupTemplates"]}),
            WORKLOAD,
            ["spec: controllerRef is immutable once set"],
            id="workload controllerRef removed",
        ),
        pytest.param(
            _with(WORKLOAD, "spec.controllerRef.name", "other"),
            WORKLOAD,
            ["spec: controllerRef is immutable once set"],
            id="workload controllerRef changed",
        ),
        pytest.param(
            _with(PODGROUP, "spec.schedulingPolicy", {"basic": {}}),
            None,
            [
                "spec: disruptionMode must be Pod when schedulingPolicy is basic: "
                "only a gang can be disrupted as one unit"
            ],
            id="basic podgroup cannot be disrupted whole",
        ),
        pytest.param(
            _with(WORKLOAD, "spec.podGroupTemplates.1.disruptionMode", "PodGroup"),
            None,
            [
                "spec.podGroupTemplates[1]: disruptionMode must be Pod when schedulingPolicy is basic: "
                "only a gang can be disrupted as one unit"
            ],
            id="basic template cannot be disrupted whole",
        ),
        pytest.param(QUEUE, None, [], id="queue with a parent"),
        pytest.param(
            _with(QUEUE, "spec.parentQueue", "research"),
            None,
            ["<root>: spec.parentQueue must not name the queue itself"],
            id="queue is its own parent",
        ),
        pytest.param(_with(QUEUE, "spec", {}), None, [], id="root queue"),
    ],
)
def test_cel_rules(doc: Doc, old: Doc | None, want_errors: list[str]) -> None:
    assert _cel_errors(doc, old) == want_errors
