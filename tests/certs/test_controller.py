"""In-cluster certificates against the loopback API server: the Secret, caBundle, replicas, rotation."""

from __future__ import annotations

import base64
import contextlib
import copy
import datetime as dt
import json
import socket
import ssl
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.verification import PolicyBuilder, Store
from kubernetes import config

from certs.controller import CertificateController, RotationSettings, settings_from_env
from phalanx.cli import main
from tests.apiserver import ApiServer
from tests.recorded import RECORDED

FIXTURES = RECORDED / "objects"
NS = "phalanx-system"
SECRET = "phalanx-webhook-tls"
MUTATING = "phalanx-mutating"
VALIDATING = "phalanx-validating"
T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


class Clock:
    """Shared by every replica of a test, moved by hand."""

    def __init__(self, start: dt.datetime = T0) -> None:
        self.now = start

    def __call__(self) -> dt.datetime:
        return self.now


def _webhook_configuration(kind: str, name: str) -> dict[str, Any]:
    """A recorded configuration, renamed and pointed at a Service, with the recorder's caBundle removed."""
    obj = json.loads((FIXTURES / f"{kind.lower()}.json").read_text())
    obj["metadata"] = {"name": name}
    for hook in obj["webhooks"]:
        hook["clientConfig"] = {"service": {"name": "phalanx-webhook", "namespace": NS, "path": "/validate"}}
    return dict(obj)


@pytest.fixture
def cluster(apiserver: ApiServer) -> ApiServer:
    apiserver.create(_webhook_configuration("MutatingWebhookConfiguration", MUTATING))
    apiserver.create(_webhook_configuration("ValidatingWebhookConfiguration", VALIDATING))
    return apiserver


@pytest.fixture
def kubeconfig(cluster: ApiServer, tmp_path: Path) -> Path:
    return cluster.kubeconfig(tmp_path / "kubeconfig")


def _replica(kubeconfig: Path, cert_dir: Path, clock: Clock, **overrides: Any) -> CertificateController:
    settings = RotationSettings(
        namespace=NS,
        secret_name=SECRET,
        service="phalanx-webhook",
        mutating_webhook_configuration=MUTATING,
        validating_webhook_configuration=VALIDATING,
        cert_file=cert_dir / "tls.crt",
        key_file=cert_dir / "tls.key",
        **overrides,
    )
    api_client = config.new_client_from_config(config_file=str(kubeconfig))  # type: ignore[no-untyped-call]
    return CertificateController(settings, api_client, clock)


def _ca_bundles(server: ApiServer) -> list[bytes]:
    """Every caBundle of both configurations, decoded."""
    bundles = []
    for plural in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations"):
        for obj in server.list(plural, group="admissionregistration.k8s.io"):
            bundles += [base64.b64decode(h["clientConfig"].get("caBundle", "")) for h in obj["webhooks"]]
    return bundles


def _secret(server: ApiServer) -> dict[str, bytes]:
    secret = server.get("secrets", SECRET, namespace=NS)
    assert secret is not None
    return {k: base64.b64decode(v) for k, v in secret["data"].items()}


def _assert_apiserver_trusts(server: ApiServer, cert_dir: Path, now: dt.datetime) -> None:
    """What this replica serves verifies, for the Service's name, against every caBundle."""
    leaf = x509.load_pem_x509_certificate((cert_dir / "tls.crt").read_bytes())
    for bundle in _ca_bundles(server):
        store = Store(x509.load_pem_x509_certificates(bundle))
        verifier = (
            PolicyBuilder().store(store).time(now).build_server_verifier(x509.DNSName(f"phalanx-webhook.{NS}.svc"))
        )
        verifier.verify(leaf, [])


def test_first_replica_creates_secret_injects_ca_and_writes_files(
    cluster: ApiServer, kubeconfig: Path, tmp_path: Path
) -> None:
    clock = Clock()
    replica = _replica(kubeconfig, tmp_path / "certs", clock)

    due = replica.sync()

    secret = _secret(cluster)
    assert sorted(secret) == ["ca.crt", "ca.key", "tls.crt", "tls.key"]
    assert (tmp_path / "certs" / "tls.crt").read_bytes() == secret["tls.crt"]
    assert (tmp_path / "certs" / "tls.key").read_bytes() == secret["tls.key"]
    assert (tmp_path / "certs" / "ca.crt").read_bytes() == secret["ca.crt"]
    bundles = _ca_bundles(cluster)
    assert len(bundles) == 6 and all(b == secret["ca.crt"] for b in bundles), "every webhook of both configurations"
    _assert_apiserver_trusts(cluster, tmp_path / "certs", clock.now)
    assert due == clock.now + dt.timedelta(minutes=1), "nothing is due before the next resync"


def test_the_explain_apis_apiservice_trusts_the_ca_too_through_a_rotation(
    cluster: ApiServer, kubeconfig: Path, tmp_path: Path
) -> None:
    """The scheduler serves the explain API with this certificate (the chart mounts the Secret): the APIService
    gets the same caBundle as the webhooks, old and new CA alike while a rotation runs, and the certificate names
    the scheduler's Service, as kube-apiserver verifies it."""
    api_service = "v1alpha1.explain.phalanx.dev"
    cluster.create(
        {
            "apiVersion": "apiregistration.k8s.io/v1",
            "kind": "APIService",
            "metadata": {"name": api_service},
            "spec": {
                "group": "explain.phalanx.dev",
                "version": "v1alpha1",
                "groupPriorityMinimum": 1000,
                "versionPriority": 100,
                "service": {"name": "phalanx-scheduler", "namespace": NS, "port": 443},
            },
        }
    )
    clock = Clock()
    names = ("phalanx-scheduler", f"phalanx-scheduler.{NS}.svc")
    replica = _replica(kubeconfig, tmp_path / "certs", clock, api_service=api_service, extra_sans=names, ca_days=30)

    def bundle() -> bytes:
        stored = cluster.get("apiservices", api_service, group="apiregistration.k8s.io")
        assert stored is not None
        return base64.b64decode(stored["spec"]["caBundle"])

    replica.sync()
    assert bundle() == _secret(cluster)["ca.crt"]
    leaf = x509.load_pem_x509_certificate((tmp_path / "certs" / "tls.crt").read_bytes())
    store = Store(x509.load_pem_x509_certificates(bundle()))
    PolicyBuilder().store(store).time(clock.now).build_server_verifier(x509.DNSName(names[1])).verify(leaf, [])
    clock.now = T0 + dt.timedelta(days=20)
    sizes = set()
    for _ in range(6):
        replica.sync()
        assert bundle() == _secret(cluster)["ca.crt"]
        sizes.add(len(x509.load_pem_x509_certificates(bundle())))
        clock.now += dt.timedelta(minutes=1)
    assert sizes == {1, 2}, "old and new CA both trusted while the rotation ran, then the new one alone"


def test_replicas_starting_together_agree_on_one_certificate(
    cluster: ApiServer, kubeconfig: Path, tmp_path: Path
) -> None:
    clock = Clock()
    replicas = [_replica(kubeconfig, tmp_path / f"r{i}", clock) for i in range(4)]
    barrier = threading.Barrier(len(replicas))
    errors: list[BaseException] = []

    def run(replica: CertificateController) -> None:
        barrier.wait()
        try:
            replica.sync()
        except BaseException as err:  # surfaced below, with the thread's traceback lost otherwise
            errors.append(err)

    threads = [threading.Thread(target=run, args=(r,)) for r in replicas]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert errors == []
    secret = _secret(cluster)
    for i in range(len(replicas)):
        assert (tmp_path / f"r{i}" / "tls.crt").read_bytes() == secret["tls.crt"]
        _assert_apiserver_trusts(cluster, tmp_path / f"r{i}", clock.now)
    assert len(cluster.requests_matching("POST", f"/api/v1/namespaces/{NS}/secrets")) >= 1
    assert cluster.requests_matching("PUT", f"/api/v1/namespaces/{NS}/secrets") == [], (
        "losers of the create race adopt the winner's Secret instead of overwriting it"
    )


def test_ca_rotation_never_serves_a_certificate_the_apiserver_cannot_verify(
    cluster: ApiServer, kubeconfig: Path, tmp_path: Path
) -> None:
    clock = Clock()
    a = _replica(kubeconfig, tmp_path / "a", clock, ca_days=30, days=30)
    b = _replica(kubeconfig, tmp_path / "b", clock, ca_days=30, days=30)
    a.sync()
    b.sync()
    old_ca = _secret(cluster)["ca.crt"]
    bundle_sizes = []

    # 2/3 of the CA's life, then step by one resync: each replica syncs in turn, as their loops would
    clock.now = T0 + dt.timedelta(days=20)
    for _ in range(6):
        for replica, cert_dir in ((a, tmp_path / "a"), (b, tmp_path / "b")):
            replica.sync()
            _assert_apiserver_trusts(cluster, tmp_path / "a", clock.now)
            _assert_apiserver_trusts(cluster, tmp_path / "b", clock.now)
            assert (cert_dir / "tls.crt").read_bytes() == _secret(cluster)["tls.crt"]
        bundle_sizes.append(len(x509.load_pem_x509_certificates(_secret(cluster)["ca.crt"])))
        clock.now += dt.timedelta(minutes=1)

    new_ca = _secret(cluster)["ca.crt"]
    assert new_ca != old_ca
    assert len(x509.load_pem_x509_certificates(new_ca)) == 1, "the old CA leaves the bundle in the end"
    assert 2 in bundle_sizes, "old and new CA were both trusted during the rotation"
    leaf = x509.load_pem_x509_certificate((tmp_path / "a" / "tls.crt").read_bytes())
    leaf.verify_directly_issued_by(x509.load_pem_x509_certificate(new_ca))


def test_conflicting_update_is_retried_on_a_fresh_read(cluster: ApiServer, kubeconfig: Path, tmp_path: Path) -> None:
    clock = Clock()
    replica = _replica(kubeconfig, tmp_path / "certs", clock, days=3)
    replica.sync()
    clock.now = T0 + dt.timedelta(days=2)  # the serving certificate is due
    cluster.fail("PUT", f"/api/v1/namespaces/{NS}/secrets/{SECRET}", 409)

    replica.sync()

    puts = cluster.requests_matching("PUT", f"/api/v1/namespaces/{NS}/secrets/{SECRET}")
    assert len(puts) == 2, "one PUT refused with 409, one on the re-read Secret"
    assert (tmp_path / "certs" / "tls.crt").read_bytes() == _secret(cluster)["tls.crt"]
    _assert_apiserver_trusts(cluster, tmp_path / "certs", clock.now)


def test_ca_bundle_blanked_by_helm_upgrade_is_restored(cluster: ApiServer, kubeconfig: Path, tmp_path: Path) -> None:
    clock = Clock()
    replica = _replica(kubeconfig, tmp_path / "certs", clock)
    replica.sync()
    blank = copy.deepcopy(
        cluster.get("validatingwebhookconfigurations", VALIDATING, group="admissionregistration.k8s.io")
    )
    assert blank is not None
    for hook in blank["webhooks"]:
        hook["clientConfig"].pop("caBundle")
    cluster.apply(blank)

    replica.sync()

    assert all(b == _secret(cluster)["ca.crt"] for b in _ca_bundles(cluster))


def test_secret_edited_by_hand_is_replaced(cluster: ApiServer, kubeconfig: Path, tmp_path: Path) -> None:
    clock = Clock()
    replica = _replica(kubeconfig, tmp_path / "certs", clock)
    replica.sync()
    secret = cluster.get("secrets", SECRET, namespace=NS)
    assert secret is not None
    secret["data"]["tls.crt"] = base64.b64encode(b"not a certificate").decode()
    cluster.apply(secret)

    replica.sync()

    _assert_apiserver_trusts(cluster, tmp_path / "certs", clock.now)
    assert (tmp_path / "certs" / "tls.crt").read_bytes() == _secret(cluster)["tls.crt"]


def test_a_secret_replaced_whole_keeps_every_replica_verified_while_they_catch_up(
    cluster: ApiServer, kubeconfig: Path, tmp_path: Path
) -> None:
    """A broken Secret gets a new CA: until every replica serves the new certificate (one resync each), the API
    server must still trust the old CA for the replicas that serve the old one."""
    clock = Clock()
    a = _replica(kubeconfig, tmp_path / "a", clock)
    b = _replica(kubeconfig, tmp_path / "b", clock)
    a.sync()
    b.sync()
    secret = cluster.get("secrets", SECRET, namespace=NS)
    assert secret is not None
    secret["data"]["tls.crt"] = base64.b64encode(b"not a certificate").decode()
    cluster.apply(secret)

    a.sync()  # replaces the Secret (new CA) and injects; b still serves the old certificate
    _assert_apiserver_trusts(cluster, tmp_path / "a", clock.now)
    _assert_apiserver_trusts(cluster, tmp_path / "b", clock.now)

    clock.now += dt.timedelta(minutes=1)
    b.sync()  # one resync later b serves the new one too
    clock.now += dt.timedelta(minutes=2)  # past the grace period: only the new CA is trusted
    a.sync()
    _assert_apiserver_trusts(cluster, tmp_path / "b", clock.now)
    assert all(b == _secret(cluster)["ca.crt"] for b in _ca_bundles(cluster))


def test_uninstall_removes_configurations_and_secret_once(
    cluster: ApiServer, kubeconfig: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _replica(kubeconfig, tmp_path / "certs", Clock()).sync()
    argv = [
        "certs",
        "--uninstall",
        f"--kubeconfig={kubeconfig}",
        f"--namespace={NS}",
        f"--secret={SECRET}",
        f"--mutating-webhook-configuration={MUTATING}",
        f"--validating-webhook-configuration={VALIDATING}",
    ]

    assert main(argv) == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        f"removed mutatingwebhookconfiguration/{MUTATING}, validatingwebhookconfiguration/{VALIDATING}, "
        f"secret/{NS}/{SECRET}"
    )
    assert cluster.get("secrets", SECRET, namespace=NS) is None
    assert cluster.list("mutatingwebhookconfigurations", group="admissionregistration.k8s.io") == []

    assert main(argv) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "nothing to remove"


def test_key_and_certificate_must_share_a_directory(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"key_file: Invalid value: .*must be in the directory of cert_file"):
        RotationSettings(NS, SECRET, "wh", MUTATING, VALIDATING, tmp_path / "a" / "tls.crt", tmp_path / "b" / "tls.key")


@pytest.mark.parametrize(
    ("environ", "want"),
    [
        pytest.param({}, None, id="not self-managed: no controller"),
        pytest.param({"PHALANX_CERT_MODE": "helm"}, None, id="helm mode: no controller"),
        pytest.param(
            {"PHALANX_CERT_MODE": "self-managed", "PHALANX_CERT_NAMESPACE": NS},
            "PHALANX_CERT_SECRET: Required value",
            id="missing secret name",
        ),
        pytest.param(
            {
                "PHALANX_CERT_MODE": "self-managed",
                "PHALANX_CERT_NAMESPACE": NS,
                "PHALANX_CERT_SECRET": SECRET,
                "PHALANX_CERT_SERVICE": "wh",
                "PHALANX_CERT_MUTATING_WEBHOOK_CONFIGURATION": MUTATING,
                "PHALANX_CERT_VALIDATING_WEBHOOK_CONFIGURATION": VALIDATING,
                "PHALANX_CERT_DAYS": "-3",
            },
            "PHALANX_CERT_DAYS: Invalid value: '-3'",
            id="negative lifetime",
        ),
    ],
)
def test_settings_from_env_rejects_incomplete_chart_env(environ: dict[str, str], want: str | None) -> None:
    paths = {"cert_file": Path("/certs/tls.crt"), "key_file": Path("/certs/tls.key")}
    if want is None:
        assert settings_from_env(environ, **paths) is None
    else:
        with pytest.raises(ValueError, match=want):
            settings_from_env(environ, **paths)


def _handshake(cert_dir: Path, ca_bundle: bytes) -> x509.Certificate:
    """Serve cert_dir's files over TLS as gunicorn would and connect the way the apiserver does."""
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(cert_dir / "tls.crt", cert_dir / "tls.key")
    client_ctx = ssl.create_default_context(cadata=ca_bundle.decode())
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]

        def accept() -> None:
            conn, _ = listener.accept()
            with contextlib.suppress(ssl.SSLError, OSError), server_ctx.wrap_socket(conn, server_side=True) as tls:
                tls.recv(1)

        acceptor = threading.Thread(target=accept)
        acceptor.start()
        with (
            socket.create_connection(("127.0.0.1", port)) as raw,
            client_ctx.wrap_socket(raw, server_hostname=f"phalanx-webhook.{NS}.svc") as tls,
        ):
            der = tls.getpeercert(binary_form=True)
        acceptor.join()
    assert der is not None
    return x509.load_der_x509_certificate(der)


def test_served_files_complete_a_tls_handshake_before_and_after_renewal(
    cluster: ApiServer, kubeconfig: Path, tmp_path: Path
) -> None:
    # OpenSSL checks validity against the real time: issue two days ago, renew now
    now = dt.datetime.now(dt.UTC)
    clock = Clock(now - dt.timedelta(days=2))
    replica = _replica(kubeconfig, tmp_path / "certs", clock, days=3)
    replica.sync()
    first = _handshake(tmp_path / "certs", _ca_bundles(cluster)[0])

    clock.now = now
    replica.sync()
    second = _handshake(tmp_path / "certs", _ca_bundles(cluster)[0])

    assert first.serial_number != second.serial_number, "a new connection gets the renewed certificate"
    assert second.public_bytes(serialization.Encoding.PEM) == _secret(cluster)["tls.crt"]
    assert sorted(p.name for p in (tmp_path / "certs").iterdir() if not p.name.startswith("..")) == [
        "ca.crt",
        "tls.crt",
        "tls.key",
    ]
    assert len([p for p in (tmp_path / "certs").iterdir() if p.name.startswith("..certs-")]) == 1, "old copies removed"


def test_background_loop_repairs_the_secret_until_stopped(cluster: ApiServer, kubeconfig: Path, tmp_path: Path) -> None:
    replica = _replica(kubeconfig, tmp_path / "certs", Clock(), resync=dt.timedelta(seconds=0.1))
    replica.start()
    try:
        cluster.delete("secrets", SECRET, namespace=NS)
        deadline = time.monotonic() + 10
        while cluster.get("secrets", SECRET, namespace=NS) is None:
            assert time.monotonic() < deadline, "the loop did not recreate the Secret"
            time.sleep(0.05)
    finally:
        replica.stop()
    _assert_apiserver_trusts(cluster, tmp_path / "certs", T0)
