"""When to renew the webhook's certificates, decided from their contents and a clock alone.

Every replica runs this same pure function on the Secret it just read, so replicas agree
without talking to each other: the Secret is the only state, and the first replica to write a
step wins (optimistic concurrency, see `certs/controller.py`).

A certificate is renewed at 2/3 of its lifetime (what cert-manager does by default), leaving a
third of it to survive outages, and at once when it lives longer than the policy now allows
(`certificates.days` or `caDays` lowered in values). Renewing the serving certificate keeps the CA, so `caBundle`
does not change. Renewing the CA is a three-step rotation, each step at least `grace` after the
previous one, so that the apiserver never sees a certificate it cannot verify:

1. a new CA is added in front of the bundle (the apiserver now trusts old and new);
2. after `grace`, the serving certificate is re-issued by the new CA;
3. after `grace` again (every replica has re-read the Secret and serves the new certificate),
   the old CA leaves the bundle.

`grace` must exceed the replicas' resync period; the controller uses twice that period.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, replace

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization

from certs.authority import BACKDATE, KeyPair, KeyType, generate_ca, issue_serving_certificate, service_dns_names

RENEW_AT_FRACTION = 2 / 3
LIFETIME_SLACK = dt.timedelta(minutes=1)
"""How much longer than the policy a certificate may live before it counts as issued under an older, longer one."""


@dataclass(frozen=True, slots=True)
class CertificatePolicy:
    """What the serving certificate must look like and how long things live."""

    service: str
    namespace: str
    key_type: KeyType = "ecdsa"
    ca_days: float = 3650
    days: float = 365
    grace: dt.timedelta = dt.timedelta(minutes=2)
    extra_sans: tuple[str, ...] = ()
    """More names the certificate must carry: IPs or hosts of a `url:` webhook clientConfig (a webhook run
    outside the cluster, or behind a load balancer)."""


@dataclass(frozen=True, slots=True)
class CertificateState:
    """The contents of the Secret: a CA bundle (current CA first), the CA key, the serving pair.

    The two timestamps record when the bundle and the serving certificate last changed, so that
    every replica can tell when a rotation step's grace period is over.
    """

    ca_bundle_pem: bytes
    ca_key_pem: bytes
    cert_pem: bytes
    key_pem: bytes
    bundle_changed_at: dt.datetime
    cert_changed_at: dt.datetime

    @property
    def ca_certificates(self) -> list[x509.Certificate]:
        return x509.load_pem_x509_certificates(self.ca_bundle_pem)

    @property
    def current_ca(self) -> KeyPair:
        return KeyPair(self.ca_certificates[0].public_bytes(_PEM), self.ca_key_pem)


@dataclass(frozen=True, slots=True)
class Step:
    """A state to write and why, in words for the log."""

    state: CertificateState
    reason: str


def lifetime(cert: x509.Certificate) -> dt.timedelta:
    """From issue to expiry: our certificates' notBefore is backdated, which is not part of the lifetime."""
    validity = cert.not_valid_after_utc - cert.not_valid_before_utc
    return validity - BACKDATE if validity > 2 * BACKDATE else validity


def renewal_due(cert: x509.Certificate) -> dt.datetime:
    return cert.not_valid_after_utc - lifetime(cert) * (1 - RENEW_AT_FRACTION)


def outlives_policy(cert: x509.Certificate, days: float) -> bool:
    return lifetime(cert) > dt.timedelta(days=days) + LIFETIME_SLACK


def next_step(state: CertificateState | None, policy: CertificatePolicy, now: dt.datetime) -> Step | None:
    """The one change to make now, or None when the Secret is fine as it is."""
    if state is None:
        return Step(_fresh(policy, now), "created")
    problem = unusable_because(state, policy, now)
    if problem is not None:
        return Step(_fresh(policy, now), f"replaced: {problem}")
    cas = state.ca_certificates
    current_ca = cas[0]
    leaf = x509.load_pem_x509_certificate(state.cert_pem)
    leaf_from_current = _issued_by(leaf, current_ca)
    if len(cas) == 1 and (now >= renewal_due(current_ca) or outlives_policy(current_ca, policy.ca_days)):
        new_ca = generate_ca(key_type=policy.key_type, days=policy.ca_days, now=now)
        bundle = new_ca.cert_pem + current_ca.public_bytes(_PEM)
        return Step(
            replace(state, ca_bundle_pem=bundle, ca_key_pem=new_ca.key_pem, bundle_changed_at=now),
            "CA rotation started: new CA added to the bundle",
        )
    if not leaf_from_current and now >= state.bundle_changed_at + policy.grace:
        return Step(_reissue(state, policy, now), "serving certificate re-issued by the new CA")
    if leaf_from_current and (now >= renewal_due(leaf) or outlives_policy(leaf, policy.days)):
        return Step(_reissue(state, policy, now), "serving certificate renewed")
    if len(cas) > 1 and leaf_from_current and now >= state.cert_changed_at + policy.grace:
        return Step(
            replace(state, ca_bundle_pem=current_ca.public_bytes(_PEM), bundle_changed_at=now),
            "CA rotation finished: old CA removed from the bundle",
        )
    return None


def next_deadline(state: CertificateState, policy: CertificatePolicy) -> dt.datetime:
    """The earliest moment `next_step` may have something to do (assuming the state is usable).

    It is in the future whenever `next_step` returns None, so a loop sleeping until it never spins.
    """
    cas = state.ca_certificates
    leaf = x509.load_pem_x509_certificate(state.cert_pem)
    if not _issued_by(leaf, cas[0]):
        # mid-rotation: the leaf's own renewal waits for the new CA to be trusted
        return state.bundle_changed_at + policy.grace
    if outlives_policy(leaf, policy.days) or (len(cas) == 1 and outlives_policy(cas[0], policy.ca_days)):
        return state.cert_changed_at  # due now: a lifetime was lowered
    if len(cas) == 1:
        return min(renewal_due(leaf), renewal_due(cas[0]))
    return min(renewal_due(leaf), state.cert_changed_at + policy.grace)


def unusable_because(state: CertificateState, policy: CertificatePolicy, now: dt.datetime) -> str | None:
    """Why the apiserver could not use this state as it is (None when it can).

    A Secret edited by hand, created for another Service, or left to expire is replaced as a
    whole: there is nothing in it worth keeping.
    """
    try:
        cas = state.ca_certificates
        leaf = x509.load_pem_x509_certificate(state.cert_pem)
        current = state.current_ca
        ca_key = current.private_key()
        leaf_key = KeyPair(state.cert_pem, state.key_pem).private_key()
    except ValueError as err:
        return f"unparsable: {err}"
    if ca_key.public_key() != current.certificate.public_key():
        return "ca.key does not match the first certificate of ca.crt"
    if leaf_key.public_key() != leaf.public_key():
        return "tls.key does not match tls.crt"
    if not any(_issued_by(leaf, ca) for ca in cas):
        return "tls.crt is not issued by any CA of ca.crt"
    if now >= leaf.not_valid_after_utc or now >= cas[0].not_valid_after_utc:
        return "expired"
    try:
        names = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return "tls.crt has no subjectAltName"
    present = {*names.get_values_for_type(x509.DNSName), *map(str, names.get_values_for_type(x509.IPAddress))}
    missing = {*service_dns_names(policy.service, policy.namespace), *policy.extra_sans} - present
    if missing:
        return f"tls.crt does not name {', '.join(sorted(missing))}"
    return None


def _leaf(ca: KeyPair, policy: CertificatePolicy, now: dt.datetime) -> KeyPair:
    return issue_serving_certificate(
        ca,
        policy.service,
        policy.namespace,
        extra_sans=policy.extra_sans,
        key_type=policy.key_type,
        days=policy.days,
        now=now,
    )


def _fresh(policy: CertificatePolicy, now: dt.datetime) -> CertificateState:
    ca = generate_ca(key_type=policy.key_type, days=policy.ca_days, now=now)
    leaf = _leaf(ca, policy, now)
    return CertificateState(ca.cert_pem, ca.key_pem, leaf.cert_pem, leaf.key_pem, now, now)


def _reissue(state: CertificateState, policy: CertificatePolicy, now: dt.datetime) -> CertificateState:
    leaf = _leaf(state.current_ca, policy, now)
    return replace(state, cert_pem=leaf.cert_pem, key_pem=leaf.key_pem, cert_changed_at=now)


def _issued_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


_PEM = serialization.Encoding.PEM
