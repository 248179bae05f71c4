"""`phalanx certs` through the console entry point."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.verification import PolicyBuilder, Store

from phalanx.cli import main


def test_writes_a_verifiable_chain_with_private_keys_unreadable_by_others(tmp_path: Path) -> None:
    out = tmp_path / "certs"
    rc = main(["certs", "--out-dir", str(out), "--service", "wh", "--namespace", "sys", "--days", "30"])

    assert rc == 0
    assert sorted(p.name for p in out.iterdir()) == ["ca.crt", "ca.key", "tls.crt", "tls.key"]
    for key in ("ca.key", "tls.key"):
        assert stat.S_IMODE((out / key).stat().st_mode) == 0o600
    ca = x509.load_pem_x509_certificate((out / "ca.crt").read_bytes())
    leaf = x509.load_pem_x509_certificate((out / "tls.crt").read_bytes())
    verifier = PolicyBuilder().store(Store([ca])).build_server_verifier(x509.DNSName("wh.sys.svc"))
    verifier.verify(leaf, [])
    lifetime = leaf.not_valid_after_utc - leaf.not_valid_before_utc
    assert 30 * 86400 <= lifetime.total_seconds() <= 30 * 86400 + 600


def test_rsa_and_extra_ip_san(tmp_path: Path) -> None:
    rc = main(["certs", "--out-dir", str(tmp_path), "--key-type", "rsa", "--extra-san", "127.0.0.1"])

    assert rc == 0
    leaf = x509.load_pem_x509_certificate((tmp_path / "tls.crt").read_bytes())
    assert isinstance(leaf.public_key(), rsa.RSAPublicKey)
    san = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(ip) for ip in san.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]


def test_refuses_to_overwrite_without_force(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["certs", "--out-dir", str(tmp_path)]) == 0
    before = (tmp_path / "tls.crt").read_bytes()

    assert main(["certs", "--out-dir", str(tmp_path)]) == 1
    assert "already exists (use --force to overwrite)" in capsys.readouterr().err
    assert (tmp_path / "tls.crt").read_bytes() == before

    assert main(["certs", "--out-dir", str(tmp_path), "--force"]) == 0
    assert (tmp_path / "tls.crt").read_bytes() != before


def test_bad_lifetime_exits_2_naming_the_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["certs", "--out-dir", str(tmp_path / "x"), "--days", "0"]) == 2
    assert "days: Invalid value: 0: must be at least 0.000694444 (one minute)" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()
