"""The loopback server answers as the recorded kube-apiserver did (`tests/fixtures/recorded/api`, `objects`)."""

from __future__ import annotations

import copy
import json
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config, watch

from tests.apiserver import ApiServer
from tests.recorded import RECORDED

FIXTURES = RECORDED


def recorded(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text())


def stored(name: str) -> dict[str, Any]:
    """A recorded object as a client would POST it (server-set fields dropped)."""
    obj: dict[str, Any] = copy.deepcopy(recorded(f"objects/{name}"))
    meta = obj["metadata"]
    for key in ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields"):
        meta.pop(key, None)
    obj.pop("status", None)
    return obj


def http(server: ApiServer, method: str, path: str, body: Any = None, content_type: str = "application/json") -> Any:
    """Raw HTTP so byte-level bodies are compared, not the client's parsed view."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(server.url + path, data=data, method=method)
    request.add_header("Content-Type", content_type)
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, response.read(), dict(response.headers)
    except urllib.error.HTTPError as err:
        return err.code, err.read(), dict(err.headers)


@pytest.fixture
def core(apiserver: ApiServer, tmp_path: Path) -> client.CoreV1Api:
    api = config.new_client_from_config(str(apiserver.kubeconfig(tmp_path / "kubeconfig")))
    return client.CoreV1Api(api)


@pytest.fixture
def trainers(apiserver: ApiServer) -> ApiServer:
    """trainer-0 bound to gpu-node-1 and trainer-1 still gated, as in the recording."""
    apiserver.create(stored("priorityclass-preemption-toleration.json"))
    apiserver.create(stored("node.json"))
    bound = stored("pod-gated.json")
    bound["spec"].pop("schedulingGates")
    bound["spec"]["nodeName"] = "gpu-node-1"
    apiserver.create(bound)
    gated = stored("pod-gated.json")
    gated["metadata"]["name"] = "trainer-1"
    apiserver.create(gated)
    return apiserver


BINDING = {"apiVersion": "v1", "kind": "Binding", "target": {"apiVersion": "v1", "kind": "Node", "name": "gpu-node-1"}}


@pytest.mark.parametrize(
    ("method", "path", "body", "content_type", "want_code", "want_fixture"),
    [
        pytest.param(
            "POST",
            "/api/v1/namespaces/ml-team/pods/trainer-0/binding",
            {**BINDING, "metadata": {"name": "trainer-0", "namespace": "ml-team"}},
            "application/json",
            409,
            "api/pod-binding-already-bound-409.json",
            id="binding an already-bound pod is a recorded 409",
        ),
        pytest.param(
            "POST",
            "/api/v1/namespaces/ml-team/pods/trainer-1/binding",
            {**BINDING, "metadata": {"name": "trainer-1", "namespace": "ml-team"}},
            "application/json",
            409,
            "api/pod-binding-gated-pod-409.json",
            id="binding a gated pod is a recorded 409",
        ),
        pytest.param(
            "GET",
            "/api/v1/namespaces/ml-team/pods/does-not-exist",
            None,
            "",
            404,
            "api/pod-not-found-404.json",
            id="missing pod is a recorded 404",
        ),
        pytest.param(
            "GET",
            "/apis/scheduling.phalanx.dev/v1alpha1/namespaces/ml-team/podgroups/does-not-exist",
            None,
            "",
            404,
            "api/phalanx-podgroup-not-found-404.json",
            id="missing custom resource 404 names its group",
        ),
        pytest.param(
            "POST",
            "/api/v1/namespaces/ml-team/pods",
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "trainer-1"}, "spec": {"containers": []}},
            "application/json",
            409,
            "api/pod-create-already-exists-409.json",
            id="creating an existing name is a recorded 409 AlreadyExists",
        ),
        pytest.param(
            "PATCH",
            "/api/v1/namespaces/ml-team/pods/trainer-1",
            [{"op": "add", "path": "/spec/schedulingGates/-", "value": {"name": "example.com/new-gate"}}],
            "application/json-patch+json",
            422,
            "api/pod-update-add-gate-422.json",
            id="adding a scheduling gate is a recorded 422",
        ),
        pytest.param(
            "PUT",
            "/api/v1/namespaces/ml-team/pods/trainer-1",
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "trainer-1", "resourceVersion": "1"}},
            "application/json",
            409,
            "api/pod-update-stale-rv-409.json",
            id="PUT with a stale resourceVersion is a recorded 409",
        ),
    ],
)
def test_error_bodies_match_recording(
    trainers: ApiServer, method: str, path: str, body: Any, content_type: str, want_code: int, want_fixture: str
) -> None:
    code, data, _ = http(trainers, method, path, body, content_type)
    assert code == want_code
    assert data == (FIXTURES / want_fixture).read_bytes()


def test_binding_success_and_pod_after_binding(trainers: ApiServer) -> None:
    patch = [
        {
            "op": "test",
            "path": "/spec/schedulingGates",
            "value": trainers.get("pods", "trainer-1", "ml-team")["spec"]["schedulingGates"],
        },  # type: ignore[index]
        {"op": "remove", "path": "/spec/schedulingGates"},
    ]
    code, _, _ = http(
        trainers, "PATCH", "/api/v1/namespaces/ml-team/pods/trainer-1", patch, "application/json-patch+json"
    )
    assert code == 200
    body = {**BINDING, "metadata": {"name": "trainer-1", "namespace": "ml-team"}}
    code, data, _ = http(trainers, "POST", "/api/v1/namespaces/ml-team/pods/trainer-1/binding", body)
    assert (code, data) == (201, (FIXTURES / "api/pod-binding-success-201.json").read_bytes())
    pod = trainers.get("pods", "trainer-1", "ml-team")
    want = recorded("objects/pod-bound.json")
    assert pod is not None
    assert pod["spec"]["nodeName"] == want["spec"]["nodeName"]
    assert [c["type"] + c["status"] for c in pod["status"]["conditions"]] == ["PodScheduledTrue"]
    assert "schedulingGates" not in pod["spec"]
    assert list(pod) == list(want)


def test_failed_json_patch_test_op_is_422_and_changes_nothing(trainers: ApiServer) -> None:
    before = trainers.get("pods", "trainer-1", "ml-team")
    patch = [
        {"op": "test", "path": "/spec/schedulingGates", "value": [{"name": "someone-else"}]},
        {"op": "remove", "path": "/spec/schedulingGates"},
    ]
    code, data, _ = http(
        trainers, "PATCH", "/api/v1/namespaces/ml-team/pods/trainer-1", patch, "application/json-patch+json"
    )
    assert code == 422
    assert json.loads(data)["reason"] == "Invalid"
    assert trainers.get("pods", "trainer-1", "ml-team") == before


def test_list_matches_recorded_shape(trainers: ApiServer, core: client.CoreV1Api) -> None:
    code, data, _ = http(trainers, "GET", "/api/v1/pods")
    listing = json.loads(data)
    want = recorded("objects/pods-list.json")
    assert code == 200
    assert list(listing) == list(want)
    assert "kind" not in listing["items"][0]
    assert list(listing["items"][0]["metadata"])[:6] == list(want["items"][0]["metadata"])[:6]
    assert {p.metadata.name for p in core.list_pod_for_all_namespaces().items} == {"trainer-0", "trainer-1"}


def test_custom_resources_print_keys_alphabetically(apiserver: ApiServer) -> None:
    created = apiserver.create(stored("phalanx-podgroup.json"))
    want = recorded("objects/phalanx-podgroup.json")
    assert list(created) == [k for k in want if k != "status"]
    assert list(created["metadata"]) == sorted(created["metadata"])


def test_watch_streams_events_and_bookmarks_like_recording(trainers: ApiServer, core: client.CoreV1Api) -> None:
    start = trainers.resource_version()
    core.patch_namespaced_pod("trainer-1", "ml-team", {"metadata": {"labels": {"team": "vision"}}})
    core.delete_namespaced_pod("trainer-1", "ml-team")
    events = list(
        watch.Watch().stream(
            core.list_pod_for_all_namespaces,
            resource_version=str(start),
            allow_watch_bookmarks=True,
            timeout_seconds=1,
        )
    )
    types = [e["type"] for e in events]
    assert types[:2] == ["MODIFIED", "DELETED"]
    assert set(types[2:]) == {"BOOKMARK"}
    assert len(types) >= 4
    want_bookmark = json.loads((FIXTURES / "api/watch-pods.jsonl").read_text().splitlines()[-1])["object"]
    bookmark = events[-1]["raw_object"]
    assert bookmark == {**want_bookmark, "metadata": {"resourceVersion": str(trainers.resource_version())}}


def test_watch_from_compacted_rv_is_one_error_event(trainers: ApiServer) -> None:
    trainers.compact()
    code, data, _ = http(trainers, "GET", "/api/v1/pods?watch=1&resourceVersion=1&timeoutSeconds=1")
    lines = data.decode().splitlines()
    want = json.loads((FIXTURES / "api/watch-pods-too-old-410.jsonl").read_text())
    assert code == 200
    assert len(lines) == 1
    event = json.loads(lines[0])
    assert {**event["object"], "message": ""} == {**want["object"], "message": ""}
    assert event["object"]["message"].startswith("too old resource version: 1 (")


def test_exact_list_from_compacted_rv_is_recorded_410(trainers: ApiServer) -> None:
    trainers.compact()
    code, data, _ = http(trainers, "GET", "/api/v1/pods?resourceVersion=1&resourceVersionMatch=Exact")
    assert (code, data) == (410, (FIXTURES / "api/list-pods-too-old-410.json").read_bytes())


def test_injected_429_carries_retry_after_and_recorded_body(trainers: ApiServer) -> None:
    trainers.fail("GET", "/apis/scheduling.phalanx.dev", 429, retry_after=1)
    code, data, headers = http(trainers, "GET", "/apis/scheduling.phalanx.dev/v1alpha1/podgroups")
    assert (code, data) == (429, (FIXTURES / "api/storage-reinitializing-429.json").read_bytes())
    assert headers["Retry-After"] == "1"
    code, _, _ = http(trainers, "GET", "/apis/scheduling.phalanx.dev/v1alpha1/podgroups")
    assert code == 200


def test_hang_times_out_the_client(trainers: ApiServer, core: client.CoreV1Api) -> None:
    fault = trainers.hang("GET", "/api/v1/namespaces/ml-team/pods/trainer-0", seconds=2, times=10)
    with pytest.raises(Exception, match=r"(?i)timed? ?out"):
        core.read_namespaced_pod("trainer-0", "ml-team", _request_timeout=0.2)
    assert fault.remaining < 10
    fault.remaining = 0
    assert core.read_namespaced_pod("trainer-0", "ml-team").spec.node_name == "gpu-node-1"


def test_delay_answers_late(trainers: ApiServer, core: client.CoreV1Api) -> None:
    trainers.delay("GET", "/api/v1/namespaces/ml-team/pods/trainer-0", seconds=0.3)
    started = time.monotonic()
    assert core.read_namespaced_pod("trainer-0", "ml-team").spec.node_name == "gpu-node-1"
    assert time.monotonic() - started >= 0.3


def test_graceful_delete_marks_then_removes_bound_pod(trainers: ApiServer, core: client.CoreV1Api) -> None:
    trainers.hold_terminating = True
    uid = core.read_namespaced_pod("trainer-0", "ml-team").metadata.uid
    wrong = client.V1DeleteOptions(preconditions=client.V1Preconditions(uid="not-" + uid))
    with pytest.raises(client.ApiException) as err:
        core.delete_namespaced_pod("trainer-0", "ml-team", body=wrong)
    assert err.value.status == 409
    options = client.V1DeleteOptions(grace_period_seconds=30, preconditions=client.V1Preconditions(uid=uid))
    marked = core.delete_namespaced_pod("trainer-0", "ml-team", body=options)
    assert marked.metadata.deletion_grace_period_seconds == 30
    assert trainers.get("pods", "trainer-0", "ml-team") is not None
    trainers.finish_terminating()
    assert trainers.get("pods", "trainer-0", "ml-team") is None


def test_unbound_pod_is_deleted_at_once(trainers: ApiServer, core: client.CoreV1Api) -> None:
    core.delete_namespaced_pod("trainer-1", "ml-team", grace_period_seconds=30)
    assert trainers.get("pods", "trainer-1", "ml-team") is None


def test_status_subresource_changes_only_status(apiserver: ApiServer, tmp_path: Path) -> None:
    apiserver.create(stored("phalanx-podgroup.json"))
    api = client.CustomObjectsApi(config.new_client_from_config(str(apiserver.kubeconfig(tmp_path / "kc"))))
    condition = {"type": "PodGroupScheduled", "status": "False", "reason": "Unschedulable", "message": "x"}
    args = ("scheduling.phalanx.dev", "v1alpha1", "ml-team", "podgroups", "pg1")
    api.patch_namespaced_custom_object_status(
        *args, {"status": {"conditions": [condition]}, "spec": {"queueName": "x"}}
    )
    pg = api.get_namespaced_custom_object(*args)
    assert pg["status"]["conditions"] == [condition]
    assert pg["spec"] == stored("phalanx-podgroup.json")["spec"]
    assert pg["metadata"]["generation"] == 1


def test_restart_drops_watches_and_serves_same_storage(trainers: ApiServer, core: client.CoreV1Api) -> None:
    port = trainers.port
    trainers.restart(down_seconds=0.1)
    assert trainers.port == port
    assert core.read_namespaced_pod("trainer-0", "ml-team").spec.node_name == "gpu-node-1"


def test_leases_round_trip_with_optimistic_concurrency(apiserver: ApiServer, tmp_path: Path) -> None:
    api = client.CoordinationV1Api(config.new_client_from_config(str(apiserver.kubeconfig(tmp_path / "kc"))))
    lease = client.V1Lease(
        metadata=client.V1ObjectMeta(name="phalanx-scheduler"),
        spec=client.V1LeaseSpec(holder_identity="a", lease_duration_seconds=2),
    )
    created = api.create_namespaced_lease("kube-system", lease)
    created.spec.holder_identity = "b"
    api.replace_namespaced_lease("phalanx-scheduler", "kube-system", created)
    created.spec.holder_identity = "c"
    with pytest.raises(client.ApiException) as err:
        api.replace_namespaced_lease("phalanx-scheduler", "kube-system", created)
    assert err.value.status == 409


@pytest.mark.parametrize(
    ("namespace", "regarding", "want_status"),
    [
        pytest.param("default", {"kind": "PriorityClass", "name": "low"}, 201, id="cluster-scoped object in default"),
        pytest.param("kube-system", {"kind": "Queue", "name": "q"}, 201, id="cluster-scoped object in kube-system"),
        pytest.param("ml", {"kind": "PriorityClass", "name": "low"}, 422, id="cluster-scoped object elsewhere"),
        pytest.param("ml", {"kind": "Pod", "name": "p", "namespace": "ml"}, 201, id="namespaced object in its own"),
    ],
)
def test_event_about_a_cluster_scoped_object_lives_in_default(
    apiserver: ApiServer, namespace: str, regarding: dict[str, str], want_status: int
) -> None:
    event = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": "e1"},
        "eventTime": "2026-01-01T00:00:00.000000Z",
        "reportingController": "scheduling.phalanx.dev/scheduler",
        "reportingInstance": "a",
        "action": "Scheduling",
        "reason": "InvalidPreemptionToleration",
        "type": "Warning",
        "note": "x",
        "regarding": regarding,
    }
    status, body, _ = http(apiserver, "POST", f"/apis/events.k8s.io/v1/namespaces/{namespace}/events", event)
    assert status == want_status
    if want_status == 422:
        assert "involvedObject.namespace" in json.loads(body)["message"]


def test_binding_clears_the_nomination_and_a_bound_pod_takes_none(apiserver: ApiServer) -> None:
    """As kube-apiserver 1.36.2 answered (issue 11, defect 1): the Binding clears `nominatedNodeName`,
    and setting it on a bound pod is 422 Forbidden."""
    apiserver.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
    apiserver.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "m1", "namespace": "d1"}, "spec": {}})
    status = "/api/v1/namespaces/d1/pods/m1/status"
    nominate = {"status": {"nominatedNodeName": "n1"}}
    assert http(apiserver, "PATCH", status, nominate, "application/merge-patch+json")[0] == 200
    binding = {**BINDING, "metadata": {"name": "m1", "namespace": "d1"}, "target": {"kind": "Node", "name": "n1"}}
    assert http(apiserver, "POST", "/api/v1/namespaces/d1/pods/m1/binding", binding)[0] == 201
    pod = apiserver.get("pods", "m1", "d1")
    assert pod is not None and "nominatedNodeName" not in pod["status"]
    code, data, _ = http(apiserver, "PATCH", status, nominate, "application/strategic-merge-patch+json")
    forbidden = "Forbidden: may not be set on pods that are already bound to a node"
    assert code == 422
    assert json.loads(data) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": f'Pod "m1" is invalid: status.nominatedNodeName: {forbidden}',
        "reason": "Invalid",
        "details": {
            "name": "m1",
            "kind": "Pod",
            "causes": [{"reason": "FieldValueForbidden", "message": forbidden, "field": "status.nominatedNodeName"}],
        },
        "code": 422,
    }
    clear = {"status": {"nominatedNodeName": None}}
    assert http(apiserver, "PATCH", status, clear, "application/merge-patch+json")[0] == 200
