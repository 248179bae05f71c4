"""The CA and serving certificate verify as the kube-apiserver would verify them."""

from __future__ import annotations

import datetime as dt
import ipaddress

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID
from cryptography.x509.verification import PolicyBuilder, Store

from certs.authority import KeyType, generate_ca, issue_serving_certificate

NOW = dt.datetime(2026, 11, 22, 12, 0, tzinfo=dt.UTC)
SVC_NAMES = [
    "phalanx-webhook",
    "phalanx-webhook.phalanx-system",
    "phalanx-webhook.phalanx-system.svc",
    "phalanx-webhook.phalanx-system.svc.cluster.local",
]


@pytest.mark.parametrize(
    ("key_type", "want_key"),
    [
        pytest.param("ecdsa", ec.EllipticCurvePublicKey, id="ecdsa P-256 by default"),
        pytest.param("rsa", rsa.RSAPublicKey, id="rsa 2048 on request"),
    ],
)
def test_serving_certificate_chains_to_ca_for_every_service_name(key_type: KeyType, want_key: type) -> None:
    ca = generate_ca(key_type=key_type, now=NOW)
    leaf = issue_serving_certificate(ca, "phalanx-webhook", "phalanx-system", key_type=key_type, now=NOW)
    cert = leaf.certificate

    key = cert.public_key()
    assert isinstance(key, want_key)
    if isinstance(key, ec.EllipticCurvePublicKey):
        assert key.curve.name == "secp256r1"
    if isinstance(key, rsa.RSAPublicKey):
        assert key.key_size == 2048
    store = Store([ca.certificate])
    for name in SVC_NAMES:
        verifier = PolicyBuilder().store(store).time(NOW).build_server_verifier(x509.DNSName(name))
        chain = verifier.verify(cert, [])
        assert chain[-1] == ca.certificate
    # the private key in the pair is the certificate's key
    assert leaf.private_key().public_key() == key


def test_certificate_for_another_service_is_rejected() -> None:
    ca = generate_ca(now=NOW)
    leaf = issue_serving_certificate(ca, "phalanx-webhook", "phalanx-system", now=NOW)
    verifier = (
        PolicyBuilder()
        .store(Store([ca.certificate]))
        .time(NOW)
        .build_server_verifier(x509.DNSName("phalanx-webhook.other.svc"))
    )
    with pytest.raises(x509.verification.VerificationError):
        verifier.verify(leaf.certificate, [])


def test_certificate_from_another_ca_is_rejected() -> None:
    leaf = issue_serving_certificate(generate_ca(now=NOW), "phalanx-webhook", "phalanx-system", now=NOW)
    verifier = (
        PolicyBuilder()
        .store(Store([generate_ca(now=NOW).certificate]))
        .time(NOW)
        .build_server_verifier(x509.DNSName(SVC_NAMES[2]))
    )
    with pytest.raises(x509.verification.VerificationError):
        verifier.verify(leaf.certificate, [])


def test_sans_are_service_names_then_extras_with_ips_as_ip_sans() -> None:
    ca = generate_ca(now=NOW)
    leaf = issue_serving_certificate(
        ca, "phalanx-webhook", "phalanx-system", extra_sans=["127.0.0.1", "::1", "localhost"], now=NOW
    )
    san = leaf.certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == [*SVC_NAMES, "localhost"]
    assert san.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("::1")]
    verifier = (
        PolicyBuilder()
        .store(Store([ca.certificate]))
        .time(NOW)
        .build_server_verifier(x509.IPAddress(ipaddress.ip_address("127.0.0.1")))
    )
    verifier.verify(leaf.certificate, [])


@pytest.mark.parametrize(
    ("key_type", "want_key_encipherment"),
    [
        pytest.param("ecdsa", False, id="ecdsa leaf signs only"),
        pytest.param("rsa", True, id="rsa leaf also enciphers keys"),
    ],
)
def test_key_usage_and_basic_constraints(key_type: KeyType, want_key_encipherment: bool) -> None:
    ca = generate_ca(key_type=key_type, now=NOW)
    leaf = issue_serving_certificate(ca, "s", "ns", key_type=key_type, now=NOW).certificate
    ca_cert = ca.certificate

    ca_bc = ca_cert.extensions.get_extension_for_class(x509.BasicConstraints)
    assert ca_bc.critical and ca_bc.value.ca and ca_bc.value.path_length == 0
    ca_ku = ca_cert.extensions.get_extension_for_class(x509.KeyUsage).value
    assert ca_ku.key_cert_sign and ca_ku.crl_sign

    leaf_bc = leaf.extensions.get_extension_for_class(x509.BasicConstraints)
    assert leaf_bc.critical and not leaf_bc.value.ca
    leaf_ku = leaf.extensions.get_extension_for_class(x509.KeyUsage)
    assert leaf_ku.critical and leaf_ku.value.digital_signature and not leaf_ku.value.key_cert_sign
    assert leaf_ku.value.key_encipherment is want_key_encipherment
    eku = leaf.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.SERVER_AUTH]
    aki = leaf.extensions.get_extension_for_class(x509.AuthorityKeyIdentifier).value
    ski = ca_cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    assert aki.key_identifier == ski.digest


@pytest.mark.parametrize(
    ("ca_days", "days", "want_days"),
    [
        pytest.param(3650, 365, 365, id="leaf lives as long as asked"),
        pytest.param(30, 365, 30, id="leaf never outlives its CA"),
        pytest.param(1, 1, 1, id="one-day certificates for tests"),
    ],
)
def test_lifetimes(ca_days: int, days: int, want_days: int) -> None:
    ca = generate_ca(days=ca_days, now=NOW).certificate
    leaf = issue_serving_certificate(generate_ca(days=ca_days, now=NOW), "s", "ns", days=days, now=NOW).certificate
    # issued slightly in the past to absorb clock skew between replicas and the apiserver
    assert NOW - dt.timedelta(minutes=10) < ca.not_valid_before_utc <= NOW
    assert ca.not_valid_after_utc == NOW + dt.timedelta(days=ca_days)
    assert leaf.not_valid_after_utc == NOW + dt.timedelta(days=want_days)


@pytest.mark.parametrize(
    ("kwargs", "want_error"),
    [
        pytest.param({"days": 0}, r"days: Invalid value: 0: must be at least .* \(one minute\)", id="zero days"),
        pytest.param({"key_type": "dsa"}, "key_type: Unsupported value: 'dsa'", id="unknown key type"),
        pytest.param({"service": ""}, "service: Required value", id="empty service"),
        pytest.param({"now": dt.datetime(2026, 1, 1)}, "now: Invalid value", id="naive clock"),
    ],
)
def test_bad_arguments_name_the_field(kwargs: dict[str, object], want_error: str) -> None:
    args: dict[str, object] = {"service": "s", "namespace": "ns", **kwargs}
    service = args.pop("service")
    namespace = args.pop("namespace")
    with pytest.raises(ValueError, match=want_error):
        issue_serving_certificate(generate_ca(now=NOW), service, namespace, **args)  # type: ignore[arg-type]
