"""Renewal timing and the CA rotation sequence, driven by an injected clock."""

from __future__ import annotations

import datetime as dt

import pytest
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from hypothesis import given, settings
from hypothesis import strategies as st

from certs.rotation import CertificatePolicy, CertificateState, Step, next_deadline, next_step

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
GRACE = dt.timedelta(minutes=2)
POLICY = CertificatePolicy(service="wh", namespace="sys", ca_days=30, days=9, grace=GRACE)


def _apply(state: CertificateState | None, now: dt.datetime, policy: CertificatePolicy = POLICY) -> Step:
    step = next_step(state, policy, now)
    assert step is not None, f"expected a step at {now}"
    return step


def _leaf(state: CertificateState) -> x509.Certificate:
    return x509.load_pem_x509_certificate(state.cert_pem)


def _signed_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    try:
        cert.verify_directly_issued_by(ca)
    except InvalidSignature:
        return False
    return True


def test_missing_secret_gets_a_ca_and_a_serving_certificate() -> None:
    step = _apply(None, T0)

    assert step.reason == "created"
    assert len(step.state.ca_certificates) == 1
    _leaf(step.state).verify_directly_issued_by(step.state.ca_certificates[0])
    assert next_step(step.state, POLICY, T0) is None


@pytest.mark.parametrize(
    ("elapsed", "want_reason"),
    [
        pytest.param(dt.timedelta(days=5, hours=23), None, id="before 2/3 of 9 days nothing happens"),
        pytest.param(dt.timedelta(days=6), "serving certificate renewed", id="at 2/3 of 9 days the leaf renews"),
    ],
)
def test_serving_certificate_renews_at_two_thirds_of_its_lifetime(
    elapsed: dt.timedelta, want_reason: str | None
) -> None:
    state = _apply(None, T0).state
    # notBefore is backdated 5 minutes, which is not part of the lifetime: 2/3 of 9 days after issue
    assert next_deadline(state, POLICY) == T0 + dt.timedelta(days=6)

    step = next_step(state, POLICY, T0 + elapsed)

    assert (step.reason if step else None) == want_reason
    if step is not None:
        assert step.state.ca_bundle_pem == state.ca_bundle_pem, "caBundle must not change on leaf renewal"
        assert step.state.cert_pem != state.cert_pem
        assert _leaf(step.state).not_valid_before_utc > _leaf(state).not_valid_before_utc


def test_ca_rotation_keeps_both_cas_until_replicas_serve_the_new_certificate() -> None:
    # leaf and CA both reach 2/3 of their 30 days together: the CA goes first, the leaf waits
    policy = CertificatePolicy(service="wh", namespace="sys", ca_days=30, days=30, grace=GRACE)
    state = _apply(None, T0, policy).state
    old_ca = state.ca_certificates[0]
    t = T0 + dt.timedelta(days=20)

    started = _apply(state, t, policy)
    assert started.reason == "CA rotation started: new CA added to the bundle"
    new_ca = started.state.ca_certificates[0]
    assert started.state.ca_certificates[1] == old_ca
    assert started.state.cert_pem == state.cert_pem, "the leaf stays until the apiserver trusts the new CA"
    assert next_deadline(started.state, policy) == t + GRACE

    assert next_step(started.state, policy, t + GRACE - dt.timedelta(seconds=1)) is None
    moved = _apply(started.state, t + GRACE, policy)
    assert moved.reason == "serving certificate re-issued by the new CA"
    _leaf(moved.state).verify_directly_issued_by(new_ca)
    assert moved.state.ca_certificates == [new_ca, old_ca], "old CA stays while replicas still serve the old leaf"

    assert next_step(moved.state, policy, t + 2 * GRACE - dt.timedelta(seconds=1)) is None
    finished = _apply(moved.state, t + 2 * GRACE, policy)
    assert finished.reason == "CA rotation finished: old CA removed from the bundle"
    assert finished.state.ca_certificates == [new_ca]
    assert next_step(finished.state, policy, t + 2 * GRACE) is None


@pytest.mark.parametrize(
    ("mangle", "want_reason"),
    [
        pytest.param(
            lambda s, other: CertificateState(
                s.ca_bundle_pem, s.ca_key_pem, s.cert_pem, other.key_pem, s.bundle_changed_at, s.cert_changed_at
            ),
            "replaced: tls.key does not match tls.crt",
            id="key swapped by hand",
        ),
        pytest.param(
            lambda s, other: CertificateState(
                other.ca_bundle_pem, other.ca_key_pem, s.cert_pem, s.key_pem, s.bundle_changed_at, s.cert_changed_at
            ),
            "replaced: tls.crt is not issued by any CA of ca.crt",
            id="CA of another install",
        ),
        pytest.param(
            lambda s, other: CertificateState(
                b"garbage", s.ca_key_pem, s.cert_pem, s.key_pem, s.bundle_changed_at, s.cert_changed_at
            ),
            "replaced: unparsable",
            id="garbage in ca.crt",
        ),
    ],
)
def test_unusable_secret_is_replaced_as_a_whole(mangle: object, want_reason: str) -> None:
    state = _apply(None, T0).state
    other = _apply(None, T0).state
    broken = mangle(state, other)  # type: ignore[operator]

    step = _apply(broken, T0)

    assert step.reason.startswith(want_reason)
    assert next_step(step.state, POLICY, T0) is None


def test_certificate_for_another_service_is_replaced() -> None:
    state = _apply(None, T0).state
    other_service = CertificatePolicy(service="renamed", namespace="sys", grace=GRACE)

    step = next_step(state, other_service, T0)

    assert step is not None
    assert step.reason.startswith("replaced: tls.crt does not name renamed")


def test_expired_secret_is_replaced() -> None:
    state = _apply(None, T0).state

    step = _apply(state, T0 + dt.timedelta(days=10))

    assert step.reason == "replaced: expired"


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=3 * 24 * 60), min_size=5, max_size=60))
def test_apiserver_always_trusts_what_replicas_serve(gaps_minutes: list[int]) -> None:
    """Whatever the wake-up times, each served leaf chains to a CA that was in caBundle `grace` earlier,
    and a replica sleeping until `next_deadline` never spins."""
    policy = CertificatePolicy(service="wh", namespace="sys", ca_days=3, days=1, grace=GRACE)
    now = T0
    state = _apply(None, now, policy).state
    trusted_since = {state.ca_certificates[0]: now - GRACE}
    for gap in gaps_minutes:
        now += dt.timedelta(minutes=gap)
        while (step := next_step(state, policy, now)) is not None:
            state = step.state
            if step.reason.startswith("replaced"):
                trusted_since = {state.ca_certificates[0]: now - GRACE}  # nothing valid to protect any more
            for ca in state.ca_certificates:
                trusted_since.setdefault(ca, now)
            trusted_since = {ca: t for ca, t in trusted_since.items() if ca in state.ca_certificates}
            issuers = [ca for ca in state.ca_certificates if _signed_by(_leaf(state), ca)]
            assert issuers, "the bundle always holds the served leaf's CA"
            assert any(now - trusted_since[ca] >= GRACE for ca in issuers), step.reason
        assert next_deadline(state, policy) > now
