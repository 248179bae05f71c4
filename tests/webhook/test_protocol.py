"""The HTTP contract over real HTTPS: malformed reviews, health, readiness, metrics, TLS version, reload, stop."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import warnings
from http.client import HTTPResponse, HTTPSConnection
from pathlib import Path

import pytest
from cryptography import x509

from certs.authority import generate_ca, issue_serving_certificate
from tests.apiserver.server import ApiServer
from tests.webhook.harness import Webhook, fixture, start_webhook

REVIEW = fixture("admission/pod-create-mutating.json")
UID = REVIEW["request"]["uid"]


def _without_request() -> bytes:
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}).encode()


BAD_REQUESTS = [
    pytest.param(b"{not json", "request body is not valid JSON", "", id="non-JSON body"),
    pytest.param(b"[1, 2]", "request body must be a JSON object", "", id="JSON that is not an object"),
    pytest.param(
        json.dumps({**REVIEW, "apiVersion": "admission.k8s.io/v1beta1"}).encode(),
        'apiVersion: Unsupported value: "admission.k8s.io/v1beta1": supported values: "admission.k8s.io/v1"',
        UID,
        id="wrong apiVersion, uid still echoed",
    ),
    pytest.param(
        json.dumps({**REVIEW, "kind": "Pod"}).encode(),
        'kind: Unsupported value: "Pod": supported values: "AdmissionReview"',
        UID,
        id="wrong kind",
    ),
    pytest.param(_without_request(), "request: Required value", "", id="missing request"),
    pytest.param(
        json.dumps({**REVIEW, "request": {**REVIEW["request"], "operation": "PATCH"}}).encode(),
        'request.operation: Unsupported value: "PATCH": supported values: "CREATE", "UPDATE", "DELETE", "CONNECT"',
        UID,
        id="unknown operation, the supported ones listed",
    ),
    pytest.param(
        json.dumps({**REVIEW, "kind": "Pod", "request": {**REVIEW["request"], "kind": "Pod", "uid": ""}}).encode(),
        '[kind: Unsupported value: "Pod": supported values: "AdmissionReview", request.uid: Invalid value: "": must'
        ' have at least 1 character, request.kind: Invalid value: "Pod": must be a JSON object]',
        "",
        id="every malformed field named at once",
    ),
    pytest.param(b" " * (7 * 1024 * 1024 + 1), "must be at most 7340032 bytes (7 MiB)", "", id="body over 7 MiB"),
]


@pytest.mark.parametrize(("body", "want_message", "want_uid"), BAD_REQUESTS)
@pytest.mark.parametrize("endpoint", ["mutate", "validate"])
def test_malformed_review_is_a_400_with_a_clear_message(
    webhook: Webhook, endpoint: str, body: bytes, want_message: str, want_uid: str
) -> None:
    status, raw, content_type = webhook.request("POST", f"/{endpoint}", body)
    response = json.loads(raw)["response"]
    assert (status, content_type, response["uid"], response["allowed"]) == (400, "application/json", want_uid, False)
    assert want_message in response["status"]["message"]


def test_unknown_kind_is_allowed_untouched(webhook: Webhook) -> None:
    review = fixture("admission/pod-create-mutating.json")
    review["request"]["kind"] = {"group": "apps", "version": "v1", "kind": "Deployment"}
    for endpoint in ("mutate", "validate"):
        status, body = webhook.post(endpoint, review)
        assert (status, body["response"]) == (200, {"uid": UID, "allowed": True})


def test_wrong_method_and_path_get_json_not_an_html_page(webhook: Webhook) -> None:
    for method, path, want in (("GET", "/mutate", 405), ("POST", "/nowhere", 404)):
        status, body, content_type = webhook.request(method, path, b"{}" if method == "POST" else None)
        assert (status, content_type) == (want, "application/json")
        assert "<html" not in body.decode().lower()


def test_health_and_readiness(webhook: Webhook) -> None:
    assert webhook.request("GET", "/healthz")[0] == 200
    assert webhook.request("GET", "/readyz")[0] == 200


def _metric(text: str, name: str, **labels: str) -> float:
    wanted = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in text.splitlines():
        match = re.fullmatch(rf"{name}\{{(.*)\}} (\S+)", line)
        if match and ",".join(sorted(match.group(1).split(","))) == wanted:
            return float(match.group(2))
    return 0.0


def test_metrics_count_requests_across_workers(webhook: Webhook) -> None:
    def scrape() -> str:
        return webhook.request("GET", "/metrics")[1].decode()

    labels = {"endpoint": "validate", "kind": "Pod", "operation": "UPDATE", "outcome": "denied"}
    before = scrape()
    denied = fixture("admission/pod-update-add-gate-422-mutating.json")
    for _ in range(3):
        webhook._conn = None  # a new connection each time, so several workers answer
        webhook.post("validate", denied)
    after = scrape()
    assert (
        _metric(after, "phalanx_webhook_requests_total", **labels)
        - _metric(before, "phalanx_webhook_requests_total", **labels)
        == 3
    )
    count = _metric(after, "phalanx_webhook_request_duration_seconds_count", endpoint="validate")
    assert count >= 3
    assert "# TYPE phalanx_webhook_request_duration_seconds histogram" in after


def test_tls_below_1_2_is_refused(webhook: Webhook) -> None:
    context = webhook.context()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        context.minimum_version = ssl.TLSVersion.MINIMUM_SUPPORTED
        context.maximum_version = ssl.TLSVersion.TLSv1_1
    with contextlib.suppress(ssl.SSLError):
        context.set_ciphers("ALL:@SECLEVEL=0")
    conn = HTTPSConnection("127.0.0.1", webhook.port, context=context, timeout=5)
    with pytest.raises((ssl.SSLError, ConnectionError)):
        conn.request("GET", "/healthz")
    conn.close()


def _served_serial(webhook: Webhook, ca_file: Path) -> int:
    context = ssl.create_default_context(cafile=str(ca_file))
    conn = HTTPSConnection("127.0.0.1", webhook.port, context=context, timeout=5)
    try:
        conn.request("GET", "/healthz")
        conn.getresponse().read()
        assert isinstance(conn.sock, ssl.SSLSocket)
        der = conn.sock.getpeercert(binary_form=True)
        assert der is not None
    finally:
        conn.close()
    return x509.load_der_x509_certificate(der).serial_number


def test_new_certificate_files_are_served_without_restart(webhook: Webhook, tmp_path: Path) -> None:
    ca = generate_ca("rotated-ca")
    serving = issue_serving_certificate(ca, "phalanx-webhook", "phalanx-system", extra_sans=("127.0.0.1",))
    ca_file = tmp_path / "ca.crt"
    ca_file.write_bytes(ca.cert_pem)
    staging = tmp_path / "tls.crt", tmp_path / "tls.key"
    staging[0].write_bytes(serving.cert_pem)
    staging[1].write_bytes(serving.key_pem)
    staging[1].replace(webhook.key_file)
    staging[0].replace(webhook.cert_file)
    want = serving.certificate.serial_number
    deadline = time.monotonic() + 10
    while _served_serial(webhook, ca_file) != want:
        assert time.monotonic() < deadline, "the new certificate was not served"
        time.sleep(0.1)
    webhook.ca_file.write_bytes(ca.cert_pem)
    webhook._conn = None
    assert webhook.post("validate", REVIEW)[0] == 200


def test_pod_whose_group_cannot_be_read_is_still_admitted(cluster: ApiServer, webhook: Webhook) -> None:
    review = fixture("admission/pod-create-mutating.json")
    review["request"]["object"]["metadata"]["labels"]["scheduling.phalanx.dev/pod-group"] = "unreadable"
    cluster.fail("GET", "/apis/scheduling.phalanx.dev/v1alpha1/namespaces/ml-team/podgroups/unreadable", 500, times=10)
    status, body = webhook.post("mutate", review)
    assert (status, body["response"]["allowed"], body["response"].get("warnings")) == (200, True, None)


def test_podgroup_defaults_that_cannot_be_read_fail_closed(cluster: ApiServer, webhook: Webhook) -> None:
    review = fixture("admission/native-podgroup-create-mutating.json")
    review["request"]["object"]["spec"]["podGroupTemplateRef"]["workload"]["workloadName"] = "unreadable"
    cluster.fail("GET", "/apis/scheduling.k8s.io/v1alpha2/namespaces/ml-team/workloads/unreadable", 503, times=10)
    status, body = webhook.post("mutate", review)
    response = body["response"]
    assert (status, response["allowed"], response["status"]["code"]) == (200, False, 500)
    assert response["status"]["message"] == "lookup failed: reading workloads ml-team/unreadable: HTTP 503"


def test_pod_whose_group_read_is_slow_is_admitted_before_the_api_servers_timeout(
    cluster: ApiServer, webhook: Webhook
) -> None:
    """The API server fails a review it sent `?timeout=3s` after 3 s: the best-effort group read gives up first."""
    review = fixture("admission/pod-create-mutating.json")
    review["request"]["object"]["metadata"]["labels"]["scheduling.phalanx.dev/pod-group"] = "slow"
    cluster.delay("GET", "/apis/scheduling.phalanx.dev/v1alpha1/namespaces/ml-team/podgroups/slow", 10, times=2)
    started = time.monotonic()
    status, body = webhook.post("mutate", review, timeout="3s")
    assert time.monotonic() - started < 3.0, "answered after the API server gave up"
    assert (status, body["response"]["allowed"], body["response"].get("warnings")) == (200, True, None)


def test_podgroup_defaults_whose_read_is_slow_fail_closed_in_time_with_the_reason(
    cluster: ApiServer, webhook: Webhook
) -> None:
    review = fixture("admission/native-podgroup-create-mutating.json")
    review["request"]["object"]["spec"]["podGroupTemplateRef"]["workload"]["workloadName"] = "slow"
    cluster.delay("GET", "/apis/scheduling.k8s.io/v1alpha2/namespaces/ml-team/workloads/slow", 10, times=2)
    started = time.monotonic()
    status, body = webhook.post("mutate", review, timeout="3s")
    assert time.monotonic() - started < 3.0, "answered after the API server gave up"
    response = body["response"]
    assert (status, response["allowed"], response["status"]["code"]) == (200, False, 500)
    assert response["status"]["message"] == (
        "lookup failed: reading workloads ml-team/slow: no time left within the API server's webhook timeout"
    )


@pytest.mark.parametrize(
    ("env", "want"),
    [
        pytest.param({}, "phalanx webhook: --tls-cert-file/--tls-private-key-file: cannot load", id="missing cert"),
        pytest.param(
            {"PHALANX_CERT_MODE": "self-managed"},
            "phalanx webhook: PHALANX_CERT_NAMESPACE: Required value",
            id="in-cluster mode without its settings",
        ),
    ],
)
def test_startup_problems_exit_2_with_one_line(
    cluster: ApiServer, tmp_path: Path, env: dict[str, str], want: str
) -> None:
    command = [
        sys.executable, "-m", "phalanx.cli", "webhook", "--bind", "127.0.0.1:0",
        "--tls-cert-file", str(tmp_path / "none.crt"), "--tls-private-key-file", str(tmp_path / "none.key"),
        "--kubeconfig", str(cluster.kubeconfig(tmp_path / "kubeconfig")),
    ]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, env={**os.environ, **env}, timeout=60)
    assert result.returncode == 2
    assert result.stderr.startswith(want) and result.stderr.count("\n") == 1


def test_a_worker_that_exits_leaves_the_metrics_of_the_others_in_place(cluster: ApiServer, tmp_path: Path) -> None:
    """gunicorn workers are forks of the master: one that exits (SIGTERM, a restart) must not remove the
    metrics directory every worker writes to. It did, and the next review in another worker that first used
    a metric failed with HTTP 500 (seen when a webhook pod was deleted during a stream of admissions)."""
    hook = start_webhook(tmp_path, cluster.kubeconfig(tmp_path / "kubeconfig"))
    try:
        workers = Path(f"/proc/{hook.process.pid}/task/{hook.process.pid}/children").read_text().split()
        hook.post("validate", fixture("admission/pod-update-add-gate-422-mutating.json"))
        # the directory the master made (in /tmp), where the workers' metric files are named with their pids
        written = [f for w in workers for f in Path(tempfile.gettempdir()).glob(f"phalanx-webhook-metrics-*/*_{w}.db")]
        metrics_dir = written[0].parent
        os.kill(int(workers[0]), signal.SIGTERM)  # exits; the master starts another
        deadline = time.monotonic() + 10
        while Path(f"/proc/{workers[0]}").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)
        assert metrics_dir.is_dir(), "a worker's exit removed the shared metrics directory"
        denied = fixture("admission/pod-update-add-gate-422-mutating.json")
        for _ in range(4):
            hook._conn = None  # new connections: every worker answers some
            status, _ = hook.post("validate", denied)
            assert status == 200
    finally:
        hook.stop()


def refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except ConnectionRefusedError:
        return True
    return False


def test_sigterm_answers_the_review_in_flight_refuses_new_connections_and_exits_within_5s(
    cluster: ApiServer, tmp_path: Path
) -> None:
    """Issue 24: a review whose body is still coming when SIGTERM arrives is answered; a new connection is
    refused at once, not left unanswered in the listen backlog; the server exits within 5 s."""
    hook = start_webhook(tmp_path, cluster.kubeconfig(tmp_path / "kubeconfig"), workers=2)
    body = json.dumps(REVIEW).encode()
    head = "POST /mutate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    try:
        raw = socket.create_connection(("127.0.0.1", hook.port), timeout=10)
        in_flight = hook.context().wrap_socket(raw, server_hostname="127.0.0.1")
        in_flight.sendall(f"{head}Content-Length: {len(body)}\r\n\r\n".encode())
        time.sleep(0.5)  # the worker has read the request line and headers, and waits for the body
        sent = time.monotonic()
        hook.process.send_signal(signal.SIGTERM)
        deadline = sent + 1.0
        while not refused(hook.port):
            assert time.monotonic() < deadline, "new connections still accepted 1 s after SIGTERM"
            time.sleep(0.05)
        in_flight.sendall(body)
        reply = HTTPResponse(in_flight)  # type: ignore[arg-type]
        reply.begin()
        answer = json.loads(reply.read())
        status = hook.process.wait(timeout=30)
        exited = time.monotonic() - sent
        print(f"\nwebhook: SIGTERM -> exited: {exited:.2f} s")
        assert (reply.status, answer["response"]["uid"], answer["response"]["allowed"]) == (200, UID, True)
        assert status == 0, hook.log_file.read_text()[-3000:]
        assert exited < 5.0
    finally:
        hook.stop()
