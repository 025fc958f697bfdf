"""Credentials of the local cluster: a random bearer token, a generated CA + serving certificate, and a
kubeconfig (mode 0600) that official clients and kubectl load unchanged.

The server executes commands on this machine, so it binds loopback only and refuses unauthenticated
requests; TLS exercises the same client code path as a real cluster does.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import secrets
import ssl
from pathlib import Path

import yaml

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


def ensure_loopback(host: str) -> None:
    if host == "localhost":
        return
    try:
        if ipaddress.ip_address(host).is_loopback:
            return
    except ValueError:
        pass
    raise ValueError(f"the local cluster binds loopback addresses only, not {host!r}")


def write_private(path: Path, data: bytes | str) -> None:
    """Create the file with mode 0600 from the start (never world-readable, not even briefly)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data.encode() if isinstance(data, str) else data)
    os.chmod(path, 0o600)


def new_token() -> str:
    return secrets.token_urlsafe(32)


def generate_tls(state_dir: Path, host: str) -> tuple[Path, Path, Path]:
    """A CA and a serving certificate for 127.0.0.1/localhost, valid one year. Returns (ca, cert, key)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = dt.datetime.now(dt.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "airflow-k8s-ml-local-ca")])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=365))
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
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    sans: list[x509.GeneralName] = [
        x509.DNSName("localhost"),
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
    ]
    if host not in ("127.0.0.1", "localhost"):
        sans.append(x509.IPAddress(ipaddress.ip_address(host)))
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=365))
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    ca_path, cert_path, key_path = state_dir / "ca.crt", state_dir / "server.crt", state_dir / "server.key"
    write_private(ca_path, ca_cert.public_bytes(pem))
    write_private(cert_path, cert.public_bytes(pem))
    write_private(
        key_path, key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return ca_path, cert_path, key_path


def ensure_tls(state_dir: Path, host: str) -> tuple[Path, Path, Path]:
    """The state dir's CA and serving certificate, generated only when missing, unusable, not for
    ``host`` or within 30 days of expiry: a restarted cluster keeps its identity, so the CA in every
    kubeconfig already handed out (and a client's TLS session logic) stays valid."""
    paths = (state_dir / "ca.crt", state_dir / "server.crt", state_dir / "server.key")
    if all(p.exists() for p in paths) and _reusable(*paths, host):
        return paths
    return generate_tls(state_dir, host)


def _reusable(ca_path: Path, cert_path: Path, key_path: Path, host: str) -> bool:
    from cryptography import x509
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import serialization

    try:
        ca = x509.load_pem_x509_certificate(ca_path.read_bytes())
        cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
        key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
        cert.verify_directly_issued_by(ca)
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (ValueError, TypeError, x509.ExtensionNotFound, InvalidSignature):
        return False
    soon = dt.datetime.now(dt.UTC) + dt.timedelta(days=30)
    if min(ca.not_valid_after_utc, cert.not_valid_after_utc) < soon:
        return False
    if key.public_key().public_numbers() != cert.public_key().public_numbers():  # type: ignore[union-attr]
        return False
    names = set(sans.get_values_for_type(x509.DNSName)) | {
        str(ip) for ip in sans.get_values_for_type(x509.IPAddress)
    }
    return host in names or (host == "::1" and "::1" in names)


def server_ssl_context(cert: Path, key: Path) -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)
    return ctx


def kubeconfig(server: str, token: str, ca_path: Path | None, name: str = "airflow-k8s-ml-local") -> dict:
    cluster: dict[str, object] = {"server": server}
    if ca_path is not None:
        import base64

        cluster["certificate-authority-data"] = base64.b64encode(ca_path.read_bytes()).decode()
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": cluster}],
        "users": [{"name": name, "user": {"token": token}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name, "namespace": "default"}}],
        "current-context": name,
        "preferences": {},
    }


def write_kubeconfig(path: Path, config: dict) -> None:
    write_private(path, yaml.safe_dump(config, sort_keys=False))
