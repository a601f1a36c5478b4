"""Certificates for the TLS tests, made with the ``cryptography`` package: a CA, server certificates
for 127.0.0.1/localhost, client certificates with a given subject."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass
class Issued:
    """A certificate and its key, written as PEM files."""

    cert_file: Path
    key_file: Path
    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey


class TestCA:
    """A self-signed CA that writes PEM files into ``directory``."""

    __test__ = False  # not a pytest class

    def __init__(self, directory: Path, name: str = "namesrv-test-ca") -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = datetime.datetime.now(datetime.timezone.utc)
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True, content_commitment=False, key_encipherment=False, data_encipherment=False,
                    key_agreement=False, key_cert_sign=True, crl_sign=True, encipher_only=False, decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(self.key.public_key()), critical=False)
            .sign(self.key, hashes.SHA256())
        )  # fmt: skip
        self.cert_file = directory / f"{name}.pem"
        self.cert_file.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))

    def issue(self, file_stem: str, subject: x509.Name, *, server: bool, ip_san: bool = True) -> Issued:
        """A leaf certificate (server: SAN localhost, and 127.0.0.1 unless not ``ip_san``, serverAuth;
        else clientAuth)."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()), critical=False)
            .add_extension(
                x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH]),
                critical=False,
            )
        )
        if server:
            builder = builder.add_extension(
                x509.SubjectAlternativeName(
                    [x509.DNSName("localhost")]
                    + ([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))] if ip_san else [])
                ),
                critical=False,
            )
        cert = builder.sign(self.key, hashes.SHA256())
        cert_file = self.directory / f"{file_stem}.crt"
        key_file = self.directory / f"{file_stem}.key"
        cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        key_file.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
        key_file.chmod(0o600)
        return Issued(cert_file, key_file, cert, key)

    def server(self, file_stem: str = "server") -> Issued:
        """A server certificate for 127.0.0.1 and localhost."""
        return self.issue(file_stem, x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]), server=True)

    def client(self, common_name: str, organization: str | None = None) -> Issued:
        """A client certificate ``CN=common_name[,O=organization]``."""
        attributes = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
        if organization:
            attributes.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
        return self.issue(f"client-{common_name}", x509.Name(attributes), server=False)
