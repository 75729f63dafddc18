"""Per-run PKI: a CA, a loopback serving certificate, service-account keys, tokens."""

from __future__ import annotations

import datetime as dt
import ipaddress
import secrets
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALIDITY = dt.timedelta(days=7)


@dataclass(frozen=True)
class ServingPKI:
    """Paths of the run's CA and of the certificate every component serves with."""

    ca_cert: Path
    ca_key: Path
    serving_cert: Path
    serving_key: Path


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _write_key(key: ec.EllipticCurvePrivateKey, path: Path) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def write_serving_pki(directory: Path) -> ServingPKI:
    """Create a fresh CA and a serverAuth certificate for localhost/127.0.0.1."""
    directory.mkdir(parents=True, exist_ok=True)
    now = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)
    ca_key = _new_key()
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(_name("suanpan-local-ca"))
        .issuer_name(_name("suanpan-local-ca"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + _VALIDITY)
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
        .sign(ca_key, hashes.SHA256())
    )
    srv_key = _new_key()
    srv_cert = _leaf(ca_cert, ca_key, srv_key, "kube-apiserver", ExtendedKeyUsageOID.SERVER_AUTH)
    pki = ServingPKI(
        ca_cert=directory / "ca.crt",
        ca_key=directory / "ca.key",
        serving_cert=directory / "serving.crt",
        serving_key=directory / "serving.key",
    )
    pki.ca_cert.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    _write_key(ca_key, pki.ca_key)
    pki.serving_cert.write_bytes(srv_cert.public_bytes(serialization.Encoding.PEM))
    _write_key(srv_key, pki.serving_key)
    return pki


def _leaf(
    ca_cert: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    key: ec.EllipticCurvePrivateKey,
    cn: str,
    usage: x509.ObjectIdentifier,
) -> x509.Certificate:
    """A certificate for `cn` (also a DNS SAN) and loopback, signed by the CA, for `usage`."""
    now = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)
    return (
        x509.CertificateBuilder()
        .subject_name(_name(cn))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + _VALIDITY)
        .add_extension(
            x509.SubjectAlternativeName(
                [
                    x509.DNSName("localhost" if usage == ExtendedKeyUsageOID.SERVER_AUTH else cn),
                    x509.IPAddress(ipaddress.IPv4Address("127.0.0.1")),
                ]
            ),
            critical=False,
        )
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )


def _load_ca(pki: ServingPKI) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    cert = x509.load_pem_x509_certificate(pki.ca_cert.read_bytes())
    key = serialization.load_pem_private_key(pki.ca_key.read_bytes(), None)
    assert isinstance(key, ec.EllipticCurvePrivateKey)
    return cert, key


def write_leaf(pki: ServingPKI, directory: Path, name: str, *, client: bool) -> tuple[Path, Path]:
    """Sign a fresh key's certificate with the run's CA: a hub serving certificate (localhost,
    127.0.0.1) or an agent's client certificate whose CN is cluster `name`; returns the
    (certificate, key) paths, overwriting earlier ones (a rotation)."""
    ca_cert, ca_key = _load_ca(pki)
    key = _new_key()
    usage = ExtendedKeyUsageOID.CLIENT_AUTH if client else ExtendedKeyUsageOID.SERVER_AUTH
    cert = _leaf(ca_cert, ca_key, key, name, usage)
    directory.mkdir(parents=True, exist_ok=True)
    cert_path, key_path = directory / f"{name}.crt", directory / f"{name}.key"
    _write_key(key, key_path)
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return cert_path, key_path


def write_service_account_keys(directory: Path) -> tuple[Path, Path]:
    """Write a service-account signing key pair; returns (private, public) paths."""
    directory.mkdir(parents=True, exist_ok=True)
    key = _new_key()
    private, public = directory / "sa.key", directory / "sa.pub"
    _write_key(key, private)
    public.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return private, public


def new_token() -> str:
    """Return a random bearer token for the cluster's static admin user."""
    return secrets.token_hex(24)


def write_token_file(path: Path, token: str) -> None:
    """Write a kube-apiserver --token-auth-file granting `token` system:masters."""
    path.write_text(f'{token},suanpan-admin,suanpan-admin-uid,"system:masters"\n')
    path.chmod(0o600)
