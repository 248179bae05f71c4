"""The explain API (`explain.phalanx.dev/v1alpha1`) over HTTPS, as kube-apiserver's front proxy calls it.

The server is the scheduler's (`scheduler.serve.server.serve`), answering from an in-memory cluster; the API
server it reads the front proxy's trust from and asks SubjectAccessReviews of is the loopback one, which grants
exactly what a test allows. Requests carry the front proxy's client certificate (or another one, or none) and the
user in `X-Remote-*` headers, as kube-apiserver sends them. The same server behind the real kube-apiserver is
`tests/e2e/test_explain_api.py`.
"""

from __future__ import annotations

import ssl
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import pytest
import urllib3

from scheduler.api.config import SchedulerConfiguration
from scheduler.api.namespace import Namespace
from scheduler.framework.cluster import ClusterObjects
from scheduler.serve.answers import Answer, Answers, Replica, Seen
from scheduler.serve.limits import Limiter
from scheduler.serve.routes import Pending
from tests.apiserver.server import ApiServer
from tests.builders import make_node, make_pod, make_podgroup, make_priority_class
from tests.serve.pki import PROXY, authority, front_proxy_config_map, serving
from tests.serve.served import GROUP, PREFIX, Served, served_answers

NOW = datetime(2026, 1, 1, 12, tzinfo=UTC)


def cluster() -> ClusterObjects:
    """ml/train, a gang of 2 that fits nowhere (a busy node of its priority), and ml/solo, a lone pod that fits."""
    objects = ClusterObjects()
    for namespace in ("ml", "other"):
        objects.namespaces[namespace] = Namespace.model_validate({"metadata": {"name": namespace}})
    objects.priority_classes["high"] = make_priority_class("high", 100).obj()
    objects.nodes["n0"] = make_node("n0").cap(cpu="4").obj()
    for pod in (
        make_pod("busy").ns("ml").req(cpu="3").priority_class("high").priority(100).on("n0").obj(),
        *(make_pod(f"w{i}").ns("ml").req(cpu="2").group("train").priority(100).obj() for i in range(2)),
        make_pod("solo").ns("ml").req(cpu="1").obj(),
        make_pod("elsewhere").ns("ml").req(cpu="1").scheduler("default-scheduler").obj(),
    ):
        objects.pods[pod.key] = pod
    objects.pod_groups["ml/train"] = make_podgroup("train").ns("ml").gang(2).priority(100).obj()
    return objects


@pytest.fixture
def served(apiserver: ApiServer, tmp_path: Path) -> Iterator[Served]:
    objects = cluster()
    answers = Answers(
        lambda: Seen(objects, "42"), SchedulerConfiguration(), lambda: Replica("replica-0", True), now=lambda: NOW
    )
    with served_answers(apiserver, tmp_path, answers) as served:
        yield served


def test_a_user_allowed_to_get_the_explanation_gets_the_documents_of_explain_json(served: Served) -> None:
    served.api.allow("alice", "get", GROUP, "podgroups/explanation", "ml")
    code, body, _ = served.get(f"{PREFIX}/namespaces/ml/podgroups/train/explanation")
    assert code == 200, body
    assert (body["apiVersion"], body["kind"]) == (f"{GROUP}/v1alpha1", "Explanation")
    assert body["unit"]["key"] == "ml/train" and body["unit"]["reason"] == "Pending"
    assert body["placement"] == {
        "nodes": 1,
        "fit": 0,
        "needed": 2,
        "message": "0/1 nodes are available: 1 Insufficient cpu.",
    }
    assert body["time"] == "2026-01-01T12:00:00Z"
    assert body["servedBy"] == {"replica": "replica-0", "leader": True, "resourceVersion": "42"}
    (review,) = [
        r.body for r in served.api.requests_matching("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews")
    ]
    assert review["spec"]["user"] == "alice" and review["spec"]["groups"] == ["system:authenticated"]
    assert review["spec"]["resourceAttributes"] == {
        "verb": "get",
        "group": GROUP,
        "resource": "podgroups",
        "subresource": "explanation",
        "namespace": "ml",
        "name": "train",
    }


def test_the_pending_work_of_a_namespace_and_of_the_cluster(served: Served) -> None:
    served.api.allow("alice", "list", GROUP, "pendingwork", "ml")
    code, body, _ = served.get(f"{PREFIX}/namespaces/ml/pendingwork")
    assert code == 200, body
    assert body["kind"] == "PendingWork"
    assert [u["unit"] for u in body["units"]] == ["ml/solo", "ml/train"]
    code, body, _ = served.get(
        f"{PREFIX}/namespaces/ml/pendingwork?labelSelector=scheduling.phalanx.dev/pod-group%3Dtrain"
    )
    assert [u["unit"] for u in body["units"]] == ["ml/train"]
    code, body, _ = served.get(f"{PREFIX}/pendingwork")
    assert code == 403, "a namespace's grant is not the cluster's"
    assert body["message"] == (
        'pendingwork.explain.phalanx.dev is forbidden: User "alice" cannot list resource "pendingwork" in API group '
        '"explain.phalanx.dev" at the cluster scope: no grant in the loopback server'
    )
    served.api.allow("bob", "list", GROUP, "pendingwork")  # alice's refusal is kept 10 s, as upstream keeps it
    code, body, _ = served.get(f"{PREFIX}/pendingwork", user="bob")
    assert code == 200 and body["totals"]["units"] == 2


@pytest.mark.parametrize(
    ("path", "want_code", "want_message"),
    [
        pytest.param("/namespaces/ml/pods/nope/explanation", 404, 'pods "nope" not found', id="no such pod"),
        pytest.param("/namespaces/gone/pods/x/explanation", 404, 'namespaces "gone" not found', id="no such namespace"),
        pytest.param(
            "/namespaces/ml/pods/elsewhere/explanation",
            400,
            "pod ml/elsewhere is not scheduled by phalanx-scheduler (its spec.schedulerName is default-scheduler)",
            id="another scheduler's pod",
        ),
        pytest.param(
            "/namespaces/ml/podgroups/train/explanation?apiVersion=scheduling.k8s.io/v1alpha2",
            404,
            'podgroups.scheduling.k8s.io "train" not found',
            id="a native PodGroup of that name",
        ),
        pytest.param(
            "/namespaces/ml/podgroups/train/explanation?apiVersion=v9",
            400,
            "apiVersion: Unsupported value: 'v9': supported values: scheduling.phalanx.dev/v1alpha1, "
            "scheduling.k8s.io/v1alpha2",
            id="an apiVersion that is no PodGroup's",
        ),
        pytest.param(
            "/namespaces/ml/nodes/n0/explanation",
            404,
            "the server could not find the requested resource",
            id="no such resource",
        ),
    ],
)
def test_what_cannot_be_explained_is_a_status(served: Served, path: str, want_code: int, want_message: str) -> None:
    for resource in ("pods/explanation", "podgroups/explanation"):
        for namespace in ("ml", "gone"):
            served.api.allow("alice", "get", GROUP, resource, namespace)
    code, body, _ = served.get(PREFIX + path)
    assert (code, body["kind"], body["message"]) == (want_code, "Status", want_message)


def test_a_user_without_the_grant_is_forbidden_in_the_api_servers_words(served: Served) -> None:
    served.api.allow("alice", "get", GROUP, "pods/explanation", "other")
    code, body, _ = served.get(f"{PREFIX}/namespaces/ml/pods/solo/explanation")
    assert (code, body["reason"]) == (403, "Forbidden")
    assert body["message"].startswith(
        'pods.explain.phalanx.dev "solo" is forbidden: User "alice" cannot get resource "pods/explanation" in API '
        'group "explain.phalanx.dev" in the namespace "ml"'
    )


@pytest.mark.parametrize(
    ("certificate", "user", "why"),
    [
        pytest.param(None, "alice", "no client certificate: not the front proxy", id="no certificate"),
        pytest.param("someone-else", "alice", "a name the ConfigMap does not allow", id="name not allowed"),
        pytest.param(PROXY, None, "the front proxy names no user", id="no user header"),
    ],
)
def test_only_the_front_proxy_naming_a_user_is_heard(
    served: Served, certificate: str | None, user: str | None, why: str
) -> None:
    served.api.allow("alice", "get", GROUP, "pods/explanation", "*")
    code, body, _ = served.get(f"{PREFIX}/namespaces/ml/pods/solo/explanation", user, certificate)
    assert (code, body["reason"]) == (401, "Unauthorized"), why
    assert served.api.requests_matching("POST", "/apis/authorization.k8s.io") == [], "refused before any review"


def test_a_client_certificate_of_another_ca_fails_the_handshake(served: Served) -> None:
    stranger = served.client(PROXY, ca=authority("front-proxy-ca"))
    with pytest.raises(urllib3.exceptions.SSLError):
        served.get(f"{PREFIX}/namespaces/ml/pods/solo/explanation", certificate=stranger)


def test_discovery_is_for_every_authenticated_user(served: Served) -> None:
    code, body, _ = served.get(PREFIX, user="system:kube-aggregator", groups=("system:masters",))
    assert code == 200
    assert {r["name"]: r["verbs"] for r in body["resources"]} == {
        "pods/explanation": ["get"],
        "podgroups/explanation": ["get"],
        "pendingwork": ["list"],
    }
    assert served.get("/apis")[1]["groups"][0]["name"] == GROUP
    assert served.api.requests_matching("POST", "/apis/authorization.k8s.io") == []


def test_a_rotated_front_proxy_ca_is_trusted_without_a_restart(served: Served) -> None:
    served.api.allow("alice", "list", GROUP, "pendingwork", "ml")
    rotated = authority("front-proxy-ca-2")
    served.api.apply(front_proxy_config_map(rotated))
    certificate = served.client(PROXY, ca=rotated)
    deadline = time.monotonic() + 10
    while True:
        try:
            code, _, _ = served.get(f"{PREFIX}/namespaces/ml/pendingwork", certificate=certificate)
            break
        except urllib3.exceptions.SSLError:
            assert time.monotonic() < deadline, "the new CA was never trusted"
            time.sleep(0.1)
    assert code == 200
    with pytest.raises(urllib3.exceptions.SSLError):
        served.get(f"{PREFIX}/namespaces/ml/pendingwork")  # the old CA's certificate


def test_over_the_rate_a_request_gets_429_with_retry_after(apiserver: ApiServer, tmp_path: Path) -> None:
    apiserver.allow("alice", "list", GROUP, "pendingwork", "ml")
    objects = cluster()
    answers = Answers(
        lambda: Seen(objects, "1"), SchedulerConfiguration(), lambda: Replica("r", False), now=lambda: NOW
    )
    with served_answers(apiserver, tmp_path, answers, Limiter(1, rate=0.1, burst=1)) as served:
        first = served.get(f"{PREFIX}/namespaces/ml/pendingwork")
        second = served.get(f"{PREFIX}/namespaces/ml/pendingwork")
    assert first[0] == 200 and first[1]["servedBy"]["leader"] is False
    assert (second[0], second[1]["reason"], second[2]["Retry-After"]) == (429, "TooManyRequests", "10")


class Costly(Answers):
    """`status` answers that each take `cpu` seconds of their thread's CPU first, as a dry run over a backlog does."""

    def __init__(self, cpu: float) -> None:
        objects = cluster()
        super().__init__(
            lambda: Seen(objects, "1"), SchedulerConfiguration(), lambda: Replica("r", False), now=lambda: NOW
        )
        self.cpu = cpu
        self.computed = 0

    def pending(self, asked: Pending) -> Answer:
        self.computed += 1
        until = time.thread_time() + self.cpu
        while time.thread_time() < until:
            pass
        return super().pending(asked)


class Clock:
    """The limiter's clock, moved by the test: what is owed is paid back only as it advances."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@contextmanager
def cpu_limited(
    apiserver: ApiServer,
    tmp_path: Path,
    cpu: float,
    share: float,
    burst: float,
    clock: Clock,
    busy: Callable[[], bool] = lambda: True,
) -> Iterator[tuple[Served, Costly]]:
    """`Costly(cpu)` answers served with no bound but the CPU (`share` while `busy`, `burst`) on `clock`."""
    apiserver.allow("alice", "list", GROUP, "pendingwork", "ml")
    answers = Costly(cpu)
    limiter = Limiter(1, rate=1000, burst=1000, cpu_share=share, cpu_burst=burst, busy=busy, clock=clock)
    with served_answers(apiserver, tmp_path, answers, limiter) as served:
        yield served, answers


PENDING = f"{PREFIX}/namespaces/ml/pendingwork"


def test_an_answer_that_took_more_cpu_than_the_burst_holds_the_next_back(apiserver: ApiServer, tmp_path: Path) -> None:
    """0.325 s of CPU owed, 0.1 s allowed, paid back at 0.1 s a second: 2.25 s (plus the request's own CPU, a few
    milliseconds) until it is paid down, so Retry-After 3; the refused request computes nothing."""
    apiserver.allow("alice", "list", GROUP, "pendingwork", "other")
    with cpu_limited(apiserver, tmp_path, cpu=0.325, share=0.1, burst=0.1, clock=Clock()) as (served, answers):
        first = served.get(PENDING)
        second = served.get(f"{PREFIX}/namespaces/other/pendingwork")  # one the reviewer has not seen
    assert first[0] == 200
    code, body, headers = second
    assert (code, body["reason"], headers["Retry-After"], body["details"]["retryAfterSeconds"]) == (
        429,
        "TooManyRequests",
        "3",
        3,
    )
    assert "the last ones took the scheduler's CPU" in body["message"]
    assert answers.computed == 1
    reviews = served.api.requests_matching("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews")
    assert len(reviews) == 1, "refused before authorization, as API Priority and Fairness refuses: no review asked"


def test_once_the_cpu_owed_is_paid_back_a_request_is_answered_again(apiserver: ApiServer, tmp_path: Path) -> None:
    clock = Clock()
    with cpu_limited(apiserver, tmp_path, cpu=0.325, share=0.1, burst=0.1, clock=clock) as (served, answers):
        assert served.get(PENDING)[0] == 200
        clock.now += 2  # 0.2 s of the 0.225 s over the burst paid
        early = served.get(PENDING)
        clock.now += 1
        paid = served.get(PENDING)
    assert (early[0], early[2]["Retry-After"]) == (429, "1")
    assert paid[0] == 200 and answers.computed == 2


def test_a_replica_that_is_not_scheduling_is_paid_back_at_a_whole_core(apiserver: ApiServer, tmp_path: Path) -> None:
    """0.325 s owed, 0.1 s allowed: idle, 0.3 s pays 0.3 s and the next is answered; once scheduling again, what it
    owes is paid at the share (0.225 s over the burst after 0.25 s at 0.1 a second: Retry-After 3)."""
    clock, scheduling = Clock(), [False]
    limited = cpu_limited(apiserver, tmp_path, 0.325, 0.1, 0.1, clock, busy=lambda: scheduling[0])
    with limited as (served, answers):
        assert served.get(PENDING)[0] == 200
        clock.now += 0.3
        idle = served.get(PENDING)
        scheduling[0] = True
        clock.now += 0.25
        busy = served.get(PENDING)
    assert idle[0] == 200 and answers.computed == 2
    assert (busy[0], busy[2]["Retry-After"]) == (429, "3")


def test_an_answer_under_the_cpu_burst_does_not_hold_the_next_back(apiserver: ApiServer, tmp_path: Path) -> None:
    with cpu_limited(apiserver, tmp_path, cpu=0.1, share=0.05, burst=0.5, clock=Clock()) as (served, answers):
        codes = [served.get(PENDING)[0] for _ in range(3)]
    assert codes == [200, 200, 200] and answers.computed == 3


def test_the_serving_certificate_is_read_again_when_its_files_change(served: Served, tmp_path: Path) -> None:
    served.api.allow("alice", "list", GROUP, "pendingwork", "ml")
    renewed = serving(tmp_path / "renewed", "127.0.0.1")
    for name in ("tls.crt", "tls.key"):
        (served.serving.cert_file.parent / name).write_bytes((renewed.cert_file.parent / name).read_bytes())
    time.sleep(1.1)  # the files are looked at once a second
    context = ssl.create_default_context(cafile=str(renewed.ca_file))
    with pytest.raises(urllib3.exceptions.SSLError):
        served.get(f"{PREFIX}/namespaces/ml/pendingwork")  # verified against the old CA: refused
    pool = urllib3.PoolManager(ssl_context=context, retries=False)
    client = served.client()
    context.load_cert_chain(*client.pair)
    reply = pool.request("GET", served.url + f"{PREFIX}/namespaces/ml/pendingwork", headers={"X-Remote-User": "alice"})
    assert reply.status == 200
