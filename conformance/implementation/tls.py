"""A certificate authority of the run, for processes of the implementation that serve HTTPS (`tls: true`).

The harness makes one CA per run (in the workdir, never reused) and, per such process, a serving certificate for
127.0.0.1 and localhost signed by it. The process gets the files through {tls_cert:NAME} / {tls_key:NAME}, its
clients trust {ca_file}, and the suite's own requests to {https_url:NAME} endpoints use that CA. Keys are EC P-256,
written 0600; certificates last a day (a run is far shorter).
"""

from __future__ import annotations

import datetime
import ipaddress
import threading
from dataclasses import dataclass, field
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALID_FOR = datetime.timedelta(days=1)
SERVING_NAMES = ("127.0.0.1", "localhost")


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    path.touch(mode=0o600)
    path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )


@dataclass
class RunCA:
    """The run's CA in `folder` (made on first use); serving certificates per process name."""

    folder: Path
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def ca_file(self) -> Path:
        return self.folder / "ca.crt"

    def cert_file(self, name: str) -> Path:
        return self.folder / f"{name}.crt"

    def key_file(self, name: str) -> Path:
        return self.folder / f"{name}.key"

    def _ca(self) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
        key_path = self.folder / "ca.key"
        if not self.ca_file.exists():
            self.folder.mkdir(parents=True, exist_ok=True)
            key = ec.generate_private_key(ec.SECP256R1())
            now = datetime.datetime.now(datetime.UTC)
            cert = (
                x509.CertificateBuilder()
                .subject_name(_name("dra-conformance run CA"))
                .issuer_name(_name("dra-conformance run CA"))
                .public_key(key.public_key())
                .serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(minutes=5))
                .not_valid_after(now + VALID_FOR)
                .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
                .add_extension(
                    x509.KeyUsage(
                        digital_signature=True,
                        content_commitment=False,
                        key_encipherment=False,
                        data_encipherment=False,
                        key_agreement=False,
                        key_cert_sign=True,
                        crl_sign=True,
                        encipher_only=False,
                        decipher_only=False,
                    ),
                    critical=True,
                )
                .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
                .sign(key, hashes.SHA256())
            )
            _write_key(key_path, key)
            self.ca_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
        assert isinstance(key, ec.EllipticCurvePrivateKey)
        return key, x509.load_pem_x509_certificate(self.ca_file.read_bytes())

    def ensure_ca(self) -> Path:
        with self._lock:
            self._ca()
        return self.ca_file

    def ensure_serving(self, name: str) -> tuple[Path, Path]:
        """The serving certificate and key of process `name` (for 127.0.0.1 and localhost), made once per run."""
        with self._lock:
            cert_path, key_path = self.cert_file(name), self.key_file(name)
            if cert_path.exists() and key_path.exists():
                return cert_path, key_path
            ca_key, ca_cert = self._ca()
            key = ec.generate_private_key(ec.SECP256R1())
            now = datetime.datetime.now(datetime.UTC)
            alt = [x509.IPAddress(ipaddress.ip_address(SERVING_NAMES[0])), x509.DNSName(SERVING_NAMES[1])]
            cert = (
                x509.CertificateBuilder()
                .subject_name(_name(name))
                .issuer_name(ca_cert.subject)
                .public_key(key.public_key())
                .serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(minutes=5))
                .not_valid_after(now + VALID_FOR)
                .add_extension(x509.SubjectAlternativeName(alt), critical=False)
                .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
                .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
                .sign(ca_key, hashes.SHA256())
            )
            _write_key(key_path, key)
            cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
            return cert_path, key_path
