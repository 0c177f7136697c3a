"""Certificates and keys for one control-plane run, made fresh every time.

One CA signs the API server's serving certificate and every client certificate.
Client identities are what the real authorizer sees: the user is the CN, the
groups are the O entries (``system:masters`` is cluster-admin by RBAC bootstrap).
The service-account key pair signs and verifies the tokens of service accounts.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALIDITY = datetime.timedelta(days=2)


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _name(common_name: str, organizations: tuple[str, ...] = ()) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org) for org in organizations]
    return x509.Name([*attributes, x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _builder(subject: x509.Name, issuer: x509.Name, public_key: object) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)  # type: ignore[arg-type]
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + VALIDITY)
    )


@dataclass(frozen=True)
class KeyPair:
    cert: Path
    key: Path


class PKI:
    """Files under ``directory``: ``ca.crt``, ``sa.key``/``sa.pub``, and issued pairs."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self._ca_key = _key()
        self._ca_name = _name("mxgitops-test-ca")
        self._ca_cert = (
            _builder(self._ca_name, self._ca_name, self._ca_key.public_key())
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    key_cert_sign=True,
                    crl_sign=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(self._ca_key, hashes.SHA256())
        )
        self.ca = directory / "ca.crt"
        self.ca.write_bytes(self._ca_cert.public_bytes(serialization.Encoding.PEM))
        sa_key = _key()
        self.service_account_key = directory / "sa.key"
        self.service_account_pub = directory / "sa.pub"
        self.service_account_key.write_bytes(_pem_key(sa_key))
        self.service_account_pub.write_bytes(
            sa_key.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )

    def _issue(self, stem: str, builder: x509.CertificateBuilder, key: object) -> KeyPair:
        cert = builder.sign(self._ca_key, hashes.SHA256())
        pair = KeyPair(self.directory / f"{stem}.crt", self.directory / f"{stem}.key")
        pair.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        pair.key.write_bytes(_pem_key(key))  # type: ignore[arg-type]
        pair.key.chmod(0o600)
        return pair

    def serving(self, stem: str = "apiserver", extra_ips: tuple[str, ...] = ()) -> KeyPair:
        """The API server's certificate: valid for 127.0.0.1, localhost and the in-cluster
        names (and ``extra_ips``: where it listens for the real node)."""
        key = _key()
        ips = sorted({"127.0.0.1", "10.0.0.1", *extra_ips})
        names: list[x509.GeneralName] = [
            *(x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips),
            *(
                x509.DNSName(name)
                for name in (
                    "localhost",
                    "kubernetes",
                    "kubernetes.default",
                    "kubernetes.default.svc",
                )
            ),
        ]
        builder = (
            _builder(_name("kube-apiserver"), self._ca_name, key.public_key())
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        )
        return self._issue(stem, builder, key)

    def client(self, stem: str, user: str, groups: tuple[str, ...] = ()) -> KeyPair:
        """A client certificate: the API server authenticates it as ``user`` in ``groups``."""
        key = _key()
        builder = _builder(_name(user, groups), self._ca_name, key.public_key()).add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False
        )
        return self._issue(stem, builder, key)
