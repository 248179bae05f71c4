"""Certificates for the explain API's tests: a front proxy's CA and client certificates, and a serving pair.

kube-apiserver's front proxy presents a client certificate (extendedKeyUsage clientAuth) signed by the CA it
publishes as `requestheader-client-ca-file`; these are made the same way, with other names and other CAs beside,
to be refused.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from certs.authority import generate_ca, issue_serving_certificate

PROXY = "front-proxy-client"
"""The front proxy's client certificate's common name, as `../shared/kube` (and kubeadm) name it."""


@dataclass(frozen=True, slots=True)
class ClientCertificate:
    cert_file: Path
    key_file: Path

    @property
    def pair(self) -> tuple[str, str]:
        return str(self.cert_file), str(self.key_file)


@dataclass(frozen=True, slots=True)
class Authority:
    certificate: x509.Certificate
    key: ec.EllipticCurvePrivateKey

    @property
    def pem(self) -> str:
        return self.certificate.public_bytes(serialization.Encoding.PEM).decode()

    def client(self, common_name: str, where: Path) -> ClientCertificate:
        """A client certificate for `common_name`, signed by this CA, written under `where`."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = dt.datetime.now(dt.UTC)
        certificate = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
            .issuer_name(self.certificate.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
            .sign(self.key, hashes.SHA256())
        )
        where.mkdir(parents=True, exist_ok=True)
        cert_file, key_file = where / f"{common_name}.crt", where / f"{common_name}.key"
        cert_file.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
        key_file.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
        return ClientCertificate(cert_file, key_file)


def authority(common_name: str) -> Authority:
    now = dt.datetime.now(dt.UTC)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .sign(key, hashes.SHA256())
    )
    return Authority(certificate, key)


@dataclass(frozen=True, slots=True)
class Serving:
    ca_file: Path
    cert_file: Path
    key_file: Path


def serving(where: Path, *names: str) -> Serving:
    """A CA and a serving certificate for `names` (IPs or DNS names), as the chart's certificate modes make them."""
    ca = generate_ca()
    pair = issue_serving_certificate(ca, "phalanx-scheduler", "phalanx-system", extra_sans=names)
    where.mkdir(parents=True, exist_ok=True)
    files = Serving(where / "ca.crt", where / "tls.crt", where / "tls.key")
    files.ca_file.write_bytes(ca.cert_pem)
    files.cert_file.write_bytes(pair.cert_pem)
    files.key_file.write_bytes(pair.key_pem)
    return files


def front_proxy_config_map(proxy: Authority, allowed: tuple[str, ...] = (PROXY,)) -> dict[str, Any]:
    """kube-system/extension-apiserver-authentication as kube-apiserver publishes it (`../shared/kube`'s flags)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "extension-apiserver-authentication", "namespace": "kube-system"},
        "data": {
            "requestheader-client-ca-file": proxy.pem,
            "requestheader-allowed-names": json.dumps(list(allowed)),
            "requestheader-username-headers": json.dumps(["X-Remote-User"]),
            "requestheader-group-headers": json.dumps(["X-Remote-Group"]),
            "requestheader-extra-headers-prefix": json.dumps(["X-Remote-Extra-"]),
        },
    }
