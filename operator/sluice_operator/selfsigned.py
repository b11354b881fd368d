"""The operator's own certificate authority, used for a namespace's
sluice-server when cert-manager is not installed: one CA per namespace (kept
in a Secret, so every operator replica and restart signs with the same one)
and a server certificate for the Service's DNS names, issued again when it
nears expiry, when its names change or when it no longer chains to the CA.

Keys are ECDSA P-256: small and fast to make in a reconcile. Times come from
the caller (`now`), so renewal is testable without waiting."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# The CA outlives many server certificates; a server certificate is never
# issued past its CA's expiry (issue_server clamps it).
CA_DAYS = 3650
# Clock skew between the operator and the clients checking the certificate.
BACKDATE = dt.timedelta(minutes=5)


@dataclass(frozen=True)
class KeyPair:
    """KeyPair is a PEM certificate and its PEM (PKCS#8) private key."""

    cert: bytes
    key: bytes


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def issue_ca(common_name: str, now: dt.datetime) -> KeyPair:
    """issue_ca makes a self-signed CA valid CA_DAYS from now."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + dt.timedelta(days=CA_DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
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
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def issue_server(ca: KeyPair, dns_names: list[str], days: int, now: dt.datetime, client_auth: bool = False) -> KeyPair:
    """issue_server makes a TLS server certificate for dns_names, signed by ca;
    client_auth lets it also serve as a client certificate (a backend's replica
    presenting it to its primary)."""
    usages = [ExtendedKeyUsageOID.SERVER_AUTH] + ([ExtendedKeyUsageOID.CLIENT_AUTH] if client_auth else [])
    ca_cert = x509.load_pem_x509_certificate(ca.cert)
    ca_key = serialization.load_pem_private_key(ca.key, password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise ValueError("the CA key is not an ECDSA key")
    key = ec.generate_private_key(ec.SECP256R1())
    not_after = min(now + dt.timedelta(days=days), ca_cert.not_valid_after_utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, dns_names[0])]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(not_after)
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in dns_names]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def ca_usable(ca: KeyPair, now: dt.datetime, renew_before: dt.timedelta) -> bool:
    """ca_usable: the pair parses, the key matches the certificate, and it is
    valid for longer than renew_before (else a new CA is made)."""
    try:
        cert = x509.load_pem_x509_certificate(ca.cert)
        key = serialization.load_pem_private_key(ca.key, password=None)
    except (ValueError, TypeError):
        return False
    if not isinstance(key, ec.EllipticCurvePrivateKey) or key.public_key() != cert.public_key():
        return False
    return cert.not_valid_after_utc - now > renew_before


def server_reason(
    ca_cert: bytes, server: KeyPair, dns_names: list[str], now: dt.datetime, renew_before: dt.timedelta
) -> str:
    """server_reason says why the server pair must be issued again, "" when it
    is fine: unreadable, key mismatch, names differ, not signed by the CA,
    not yet valid, or expiring within renew_before."""
    try:
        cert = x509.load_pem_x509_certificate(server.cert)
        key = serialization.load_pem_private_key(server.key, password=None)
        ca = x509.load_pem_x509_certificate(ca_cert)
    except (ValueError, TypeError):
        return "unreadable"
    if key.public_key() != cert.public_key():
        return "key does not match the certificate"
    try:
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return "no DNS names"
    if sorted(names.get_values_for_type(x509.DNSName)) != sorted(dns_names):
        return "DNS names changed"
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return "not issued by the CA"
    if cert.not_valid_before_utc > now:
        return "not valid yet"
    if cert.not_valid_after_utc - now <= renew_before:
        return "expires soon"
    return ""
