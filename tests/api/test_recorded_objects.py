"""Every object recorded from a real kube-apiserver parses into our models and survives a round trip."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scheduler.api.manifest import Source, parse_object, read_documents
from scheduler.api.pdb import PodDisruptionBudget
from scheduler.api.pod import Pod
from scheduler.api.priority_class import PriorityClass, PriorityClassNotFound, resolve_priority
from scheduler.api.wire import prune
from tests.recorded import RECORDED

FIXTURES = RECORDED / "objects"
SCHEDULING_KINDS = ("Pod", "Node", "PriorityClass", "PodDisruptionBudget", "PodGroup", "Workload", "Queue")


def recorded(name: str) -> dict[str, object]:
    loaded: dict[str, object] = json.loads((FIXTURES / name).read_text())
    return loaded


def holds_a_scheduling_kind(path: Path) -> bool:
    return any(raw.get("kind") in SCHEDULING_KINDS for raw, _ in read_documents(path))


ROUND_TRIPPED = [path for path in sorted(FIXTURES.glob("*.json")) if holds_a_scheduling_kind(path)]
"""The recordings of kinds we parse. The others are checked where they are used: the CRDs against the chart's
(`tests/chart/test_crds.py`), the webhook configurations by the certificate controller
(`tests/webhook/test_in_cluster_certs.py`)."""


@pytest.mark.parametrize("path", ROUND_TRIPPED, ids=lambda p: p.name)
def test_recorded_object_round_trips(path: Path) -> None:
    for raw, source in read_documents(path):
        if raw.get("kind") not in SCHEDULING_KINDS:
            continue
        parsed = parse_object(raw, source)
        assert parsed is not None
        assert parsed.to_json() == raw, "a parsed object must serialise back to what the apiserver sent"


def test_pods_list_items_without_kind_are_pods() -> None:
    documents = read_documents(FIXTURES / "pods-list.json")
    pods = [parse_object(raw, source) for raw, source in documents]
    assert pods and all(isinstance(p, Pod) for p in pods)


def test_recorded_pod_membership_and_requests() -> None:
    gated = Pod.model_validate(recorded("pod-gated.json"))
    assert gated.pod_group_name == "pg1"
    gates = [g.name for g in gated.spec.scheduling_gates]
    assert gates == ["scheduling.phalanx.dev/gang", "scheduling.phalanx.dev/queue"]
    assert gated.effective_requests() == {"cpu": 500, "memory": 2**30, "nvidia.com/gpu": 1}
    native = Pod.model_validate(recorded("pod-native-schedulinggroup.json"))
    assert native.pod_group_name == "training-workers-0"


def test_priority_resolution_mirrors_the_priority_admission_plugin() -> None:
    high = PriorityClass.model_validate(recorded("priorityclass-preemption-toleration.json"))
    default = PriorityClass.model_validate(recorded("priorityclass-globaldefault.json"))
    lower_default = default.model_copy(deep=True)
    lower_default.metadata.name, lower_default.value = "also-default", 10
    classes = {pc.metadata.name: pc for pc in (high, default)}
    assert resolve_priority("phalanx-high", classes).value == 100000
    assert resolve_priority(None, classes).class_name == "phalanx-default"
    assert resolve_priority(None, {**classes, "also-default": lower_default}).value == 10
    assert resolve_priority(None, {"phalanx-high": high}).value == 0
    with pytest.raises(PriorityClassNotFound, match="no PriorityClass with name missing was found"):
        resolve_priority("missing", classes)


@pytest.mark.parametrize(
    ("spec", "status", "healthy", "want"),
    [
        pytest.param({"minAvailable": 1}, {"disruptionsAllowed": 0}, 3, 2, id="recomputed when no controller ran"),
        pytest.param({"minAvailable": 1}, {"disruptionsAllowed": 0, "expectedPods": 3}, 3, 0, id="status wins"),
        pytest.param({"maxUnavailable": "50%"}, {}, 3, 2, id="percent rounds up"),
        pytest.param({"minAvailable": "100%"}, {}, 4, 0, id="all must stay"),
    ],
)
def test_pdb_allowance(spec: dict[str, object], status: dict[str, object], healthy: int, want: int) -> None:
    pdb = PodDisruptionBudget.model_validate({"metadata": {"name": "b"}, "spec": spec, "status": status})
    assert pdb.disruptions_allowed(healthy) == want


def test_bad_field_is_named_with_its_path() -> None:
    raw = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ml"},
           "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "two"}}}]}}  # fmt: skip
    with pytest.raises(ValueError, match=r"f.yaml: document 3 \(Pod ml/p\): spec.containers\[0\]"
                       r".resources.requests: cpu: 'two' is not a quantity"):  # fmt: skip
        parse_object(raw, Source("f.yaml", 3))


def test_a_recorded_pod_is_kept_with_only_what_its_model_reads() -> None:
    """What the informers keep of a pod (`scheduler/api/wire.py`): a container's image pull policy, termination
    message path and the like go, whatever the type its model gives the container list."""
    raw = recorded("pod-bound.json")
    container = raw["spec"]["containers"][0]  # type: ignore[index]
    dropped = set(container) - {"name", "image", "resources", "restartPolicy", "ports"}
    assert dropped, "the recording holds fields no model reads"
    kept = prune("pods", json.loads(json.dumps(raw)))
    assert not dropped & set(kept["spec"]["containers"][0])
    assert Pod.model_validate(kept).spec.containers[0].model_extra in (None, {})
