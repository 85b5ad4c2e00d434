"""Certificates for the TLS tests, made with ``cryptography`` (EC P-256: quick): a CA, a
server certificate for 127.0.0.1 and localhost, client certificates with given subjects,
and a CA nobody trusts. Every file is PEM, as ``rivven serve`` and the clients read it.

    pki = Pki(tmp_path)                      # the CA (pki.ca) and the server (pki.server)
    alice = pki.client("CN=alice,OU=eng,O=acme")
    rogue = pki.untrusted().client("CN=mallory")  # signed by another CA
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

_ATTRS = {"CN": NameOID.COMMON_NAME, "OU": NameOID.ORGANIZATIONAL_UNIT_NAME,
          "O": NameOID.ORGANIZATION_NAME, "L": NameOID.LOCALITY_NAME,
          "ST": NameOID.STATE_OR_PROVINCE_NAME, "C": NameOID.COUNTRY_NAME,
          "DC": NameOID.DOMAIN_COMPONENT, "UID": NameOID.USER_ID,
          "EMAIL": NameOID.EMAIL_ADDRESS}


def name(dn: str) -> x509.Name:
    """``CN=alice,OU=eng,O=acme`` (RFC 4514 order: the first is the most specific) as a
    Name; no escaped commas."""
    attrs = []
    for part in dn.split(","):
        k, _, v = part.strip().partition("=")
        attrs.append(x509.NameAttribute(_ATTRS[k.upper()], v))
    return x509.Name(list(reversed(attrs)))


@dataclass
class Cert:
    """A certificate and its key: ``cert``, ``key`` (PEM files), ``pem`` (both in one file,
    the key first: ssl.keystore.location), ``subject``."""

    cert: Path
    key: Path
    pem: Path
    subject: str
    certificate: x509.Certificate
    private_key: ec.EllipticCurvePrivateKey

    def encrypted_pem(self, password: str) -> Path:
        """The key encrypted with ``password`` and the certificate, in one file."""
        p = self.pem.with_name(self.pem.stem + "-encrypted.pem")
        p.write_bytes(self.private_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(password.encode()))
            + self.certificate.public_bytes(serialization.Encoding.PEM))
        return p


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _write(folder: Path, stem: str, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey,
           subject: str) -> Cert:
    folder.mkdir(parents=True, exist_ok=True)
    cert_pem = cert.public_bytes(serialization.Encoding.PEM)
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    c, k, both = folder / f"{stem}.crt", folder / f"{stem}.key", folder / f"{stem}.pem"
    c.write_bytes(cert_pem)
    k.write_bytes(key_pem)
    both.write_bytes(key_pem + cert_pem)
    return Cert(c, k, both, subject, cert, key)


class Pki:
    """A CA in ``folder`` (``ca``: its Cert; ``ca.cert`` is what a truststore holds) and the
    server's certificate (``server``) for 127.0.0.1, ::1 and localhost."""

    def __init__(self, folder: Path | str, ca_name: str = "CN=rivven test CA,O=rivven") -> None:
        self.folder = Path(folder)
        self._n = 0
        key = _key()
        now = datetime.datetime.now(datetime.UTC)
        subject = name(ca_name)
        cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
                .public_key(key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(hours=1))
                .not_valid_after(now + datetime.timedelta(days=30))
                .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False,
                                             False), critical=True)
                .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                               critical=False)
                .sign(key, hashes.SHA256()))
        stem = "ca" if ca_name.startswith("CN=rivven test CA") else f"ca-{abs(hash(ca_name))}"
        self.ca = _write(self.folder, stem, cert, key, ca_name)
        self.server = self.issue("CN=localhost,O=rivven", server=True, stem="server")

    def issue(self, subject: str, server: bool = False, stem: str | None = None,
              days: int = 30) -> Cert:
        """A certificate signed by this CA (``server``: for 127.0.0.1, ::1 and localhost;
        else a client certificate)."""
        self._n += 1
        key = _key()
        now = datetime.datetime.now(datetime.UTC)
        ca = self.ca.certificate
        b = (x509.CertificateBuilder().subject_name(name(subject)).issuer_name(ca.subject)
             .public_key(key.public_key()).serial_number(x509.random_serial_number())
             .not_valid_before(now - datetime.timedelta(hours=1))
             .not_valid_after(now + datetime.timedelta(days=days))
             .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
             .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                 self.ca.private_key.public_key()), critical=False)
             .add_extension(x509.ExtendedKeyUsage(
                 [ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH]),
                 critical=False))
        if server:
            b = b.add_extension(x509.SubjectAlternativeName([
                x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                x509.IPAddress(ipaddress.ip_address("::1"))]), critical=False)
        cert = b.sign(self.ca.private_key, hashes.SHA256())
        return _write(self.folder, stem or f"{self.ca.cert.stem}-client{self._n}", cert, key,
                      subject)

    def client(self, subject: str) -> Cert:
        return self.issue(subject)

    def untrusted(self) -> Pki:
        """Another CA (and its own server certificate) that this one's users do not trust."""
        return Pki(self.folder / "untrusted", "CN=untrusted CA,O=elsewhere")
