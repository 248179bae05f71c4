"""A private CA and the webhook's serving certificate.

The kube-apiserver only calls a webhook whose certificate chains to the `caBundle` of its
configuration and names the Service's DNS name, so we mint our own small CA rather than depend on
a cluster issuer. ECDSA P-256 is the default (small, fast handshakes, accepted by every apiserver);
RSA 2048 is offered for environments whose policy requires it. Extensions follow RFC 5280 and what
cert-manager issues: the CA is `CA:TRUE, pathlen:0` with keyCertSign/cRLSign; the leaf is
`CA:FALSE`, digitalSignature (+ keyEncipherment for RSA), extendedKeyUsage serverAuth.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

KeyType = Literal["ecdsa", "rsa"]
KEY_TYPES: tuple[KeyType, ...] = ("ecdsa", "rsa")

# Backdating absorbs clock skew between the issuing replica and the apiserver.
BACKDATE = dt.timedelta(minutes=5)
"""notBefore lies this far before issue, for clocks behind ours; the lifetime asked for starts at issue."""

_PrivateKey = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey


@dataclass(frozen=True, slots=True)
class KeyPair:
    """A PEM certificate and its PEM (PKCS#8, unencrypted) private key, as a Secret stores them."""

    cert_pem: bytes
    key_pem: bytes

    @property
    def certificate(self) -> x509.Certificate:
        return x509.load_pem_x509_certificate(self.cert_pem)

    def private_key(self) -> _PrivateKey:
        key = serialization.load_pem_private_key(self.key_pem, password=None)
        if not isinstance(key, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey):
            raise ValueError(f"key_pem: Invalid value: {type(key).__name__}: must be an ECDSA or RSA key")
        return key


def service_dns_names(service: str, namespace: str) -> list[str]:
    """The four names a client may use for a Service; the apiserver uses `svc.ns.svc`."""
    return [
        service,
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
    ]


def generate_ca(
    common_name: str = "phalanx-ca",
    *,
    key_type: KeyType = "ecdsa",
    days: float = 3650,
    now: dt.datetime | None = None,
) -> KeyPair:
    """Create a self-signed CA that can sign leaf certificates only (pathlen 0)."""
    _check_days(days)
    key = _new_key(key_type)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    not_before = _now(now) - BACKDATE
    ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_before + BACKDATE + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(signs_certificates=True, key_encipherment=False), critical=True)
        .add_extension(ski, critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski), critical=False)
        .sign(key, hashes.SHA256())
    )
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def issue_serving_certificate(
    ca: KeyPair,
    service: str,
    namespace: str,
    *,
    extra_sans: Sequence[str] = (),
    key_type: KeyType = "ecdsa",
    days: float = 365,
    now: dt.datetime | None = None,
) -> KeyPair:
    """Sign a TLS server certificate for the Service; IP strings in `extra_sans` become IP SANs.

    The leaf never outlives its CA: a certificate the apiserver cannot verify is worse than a
    short one, and rotation renews it anyway.
    """
    _check_days(days)
    if not service:
        raise ValueError("service: Required value: must name the webhook Service")
    if not namespace:
        raise ValueError("namespace: Required value: must name the webhook Service's namespace")
    ca_cert = ca.certificate
    ca_key = ca.private_key()
    key = _new_key(key_type)
    dns_names = service_dns_names(service, namespace)
    sans: list[x509.GeneralName] = [x509.DNSName(n) for n in dns_names]
    for extra in extra_sans:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(extra)))
        except ValueError:
            if extra not in dns_names:
                sans.append(x509.DNSName(extra))
    not_before = _now(now) - BACKDATE
    not_after = min(not_before + BACKDATE + dt.timedelta(days=days), ca_cert.not_valid_after_utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{service}.{namespace}.svc")]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            _key_usage(signs_certificates=False, key_encipherment=isinstance(key, rsa.RSAPrivateKey)), critical=True
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def _key_usage(*, signs_certificates: bool, key_encipherment: bool) -> x509.KeyUsage:
    """A CA signs certificates and CRLs; a leaf signs handshakes (and RSA leaves also encipher keys)."""
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=key_encipherment,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=signs_certificates,
        crl_sign=signs_certificates,
        encipher_only=False,
        decipher_only=False,
    )


def _new_key(key_type: KeyType) -> _PrivateKey:
    if key_type == "ecdsa":
        return ec.generate_private_key(ec.SECP256R1())
    if key_type == "rsa":
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)
    raise ValueError(f"key_type: Unsupported value: {key_type!r}: supported values: {', '.join(KEY_TYPES)}")


def _key_pem(key: _PrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


MIN_DAYS = 1 / (24 * 60)
"""A minute: fractions of a day are allowed (a short validity tries rotation out), nothing shorter."""


def _check_days(days: float) -> None:
    if not days >= MIN_DAYS:
        raise ValueError(f"days: Invalid value: {days:g}: must be at least {MIN_DAYS:g} (one minute)")


def _now(now: dt.datetime | None) -> dt.datetime:
    if now is None:
        return dt.datetime.now(dt.UTC)
    if now.tzinfo is None:
        raise ValueError(f"now: Invalid value: {now.isoformat()}: must be timezone-aware")
    return now
