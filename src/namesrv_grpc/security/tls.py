"""Server-side TLS: credentials for the gRPC port, an ``ssl.SSLContext`` for the remoting port, and
certificate reloading (SIGHUP, or the files changing) without a restart or a dropped route table.

Settings (flag / RocketMQ ``TlsSystemConfig`` key in ``-c`` files):

- ``--tls-cert-file`` / ``tls.server.certPath``: the server's certificate chain, PEM;
- ``--tls-key-file`` / ``tls.server.keyPath``: its private key, PEM, unencrypted;
- ``--tls-client-ca-file`` / ``tls.server.trustCertPath``: CA certificates clients' certificates
  must chain to. The flag also sets ``tls.server.need.client.auth=require``; in a file that key
  (``none``, ``optional``, ``require``) defaults to ``require`` when a trust path is set. gRPC
  cannot ask for an optional certificate: there ``optional`` means ``none``.
- ``tls.server.mode``: ``disabled`` (no TLS even with files set), ``enforcing`` (the default when a
  certificate is set: TLS only), ``permissive`` (the remoting port accepts plaintext as well, as
  RocketMQ's; the gRPC port is TLS-only whenever TLS is on).

Reloading: gRPC takes the new certificate through ``grpc.dynamic_ssl_server_credentials`` (asked
at every new handshake; established connections keep theirs); remoting handshakes switch to a new
``SSLContext`` in the SNI callback. Files that fail to load are reported and the old ones stay.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from namesrv_grpc.security import TlsFileError

log = logging.getLogger(__name__)

TLS_MODES = ("disabled", "permissive", "enforcing")
CLIENT_AUTH_MODES = ("none", "optional", "require")
MAX_PEM_BYTES = 1024 * 1024
WATCH_INTERVAL_SECONDS = 5.0
"""How often the certificate files are checked for changes."""


@dataclass(frozen=True, slots=True)
class ServerTlsSettings:
    """Where the server's TLS material is and how clients must authenticate."""

    cert_file: Path
    key_file: Path
    client_ca_file: Path | None = None
    client_auth: str = "none"
    mode: str = "enforcing"

    @property
    def files(self) -> tuple[Path, ...]:
        """Every file to watch."""
        return (self.cert_file, self.key_file) + ((self.client_ca_file,) if self.client_ca_file else ())


@dataclass(frozen=True, slots=True)
class TlsMaterial:
    """The PEM bytes of one load."""

    cert_chain: bytes
    private_key: bytes
    client_ca: bytes | None


def _read_pem(path: Path, what: str) -> bytes:
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_PEM_BYTES + 1)
    except OSError as exc:
        raise TlsFileError(f"{path}: cannot read the {what}: {exc.strerror or exc}") from None
    if len(data) > MAX_PEM_BYTES:
        raise TlsFileError(f"{path}: the {what} file is larger than {MAX_PEM_BYTES} bytes")
    if b"-----BEGIN " not in data:
        raise TlsFileError(f"{path}: the {what} is not PEM (no -----BEGIN line)")
    return data


def load_material(settings: ServerTlsSettings) -> TlsMaterial:
    """Read and check the files: the key must match the certificate, the CA file must hold
    certificates. Raises TlsFileError."""
    cert = _read_pem(settings.cert_file, "certificate")
    key = _read_pem(settings.key_file, "private key")
    if b"ENCRYPTED" in key:
        raise TlsFileError(f"{settings.key_file}: encrypted private keys are not supported (use an unencrypted key)")
    ca = _read_pem(settings.client_ca_file, "client CA") if settings.client_ca_file else None
    build_ssl_context(settings, TlsMaterial(cert, key, ca))  # the same checks OpenSSL will make
    return TlsMaterial(cert, key, ca)


def build_ssl_context(settings: ServerTlsSettings, material: TlsMaterial) -> ssl.SSLContext:
    """A server ``SSLContext`` (TLS 1.2+) from loaded material. Raises TlsFileError."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    # The key and chain come from the files (ssl loads only from paths); a file replaced between the
    # two reads is caught by the next change check.
    try:
        context.load_cert_chain(settings.cert_file, settings.key_file)
    except (ssl.SSLError, OSError) as exc:
        reason = getattr(exc, "reason", None) or exc
        files = f"{settings.cert_file} / {settings.key_file}"
        raise TlsFileError(f"{files}: not a usable certificate and key ({reason})") from None
    if material.client_ca is not None:
        try:
            context.load_verify_locations(cadata=material.client_ca.decode("ascii", "replace"))
        except ssl.SSLError as exc:
            raise TlsFileError(f"{settings.client_ca_file}: not PEM CA certificates ({exc.reason or exc})") from None
        context.verify_mode = {"require": ssl.CERT_REQUIRED, "optional": ssl.CERT_OPTIONAL}.get(
            settings.client_auth, ssl.CERT_NONE
        )
    return context


def certificate_not_after(cert_chain: bytes) -> float:
    """The expiry (seconds since the epoch) of the first certificate of a PEM chain (the server's own)."""
    from cryptography import x509  # about 10 MB resident: loaded only when TLS is configured

    return x509.load_pem_x509_certificate(cert_chain).not_valid_after_utc.timestamp()


class TlsCollector(Collector):
    """``namesrv_tls_certificate_expiry_timestamp_seconds`` (gauge: when the served certificate
    expires; alert well before) and ``namesrv_tls_reloads_total{result}`` (``ok``, ``failed``)."""

    def __init__(self, tls: ServerTls) -> None:
        self._tls = tls

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        yield GaugeMetricFamily(
            "namesrv_tls_certificate_expiry_timestamp_seconds",
            "When the server's TLS certificate expires, seconds since the epoch.",
            value=self._tls.not_after,
        )
        reloads = CounterMetricFamily(
            "namesrv_tls_reloads", "Certificate reloads (SIGHUP, file change), by result.", labels=["result"]
        )
        reloads.add_metric(["ok"], self._tls.reloads)
        reloads.add_metric(["failed"], self._tls.failed_reloads)
        yield reloads


def _file_stamp(paths: tuple[Path, ...]) -> tuple[tuple[int, int, int], ...]:
    stamps = []
    for path in paths:
        try:
            st = path.stat()
            stamps.append((st.st_ino, st.st_size, st.st_mtime_ns))
        except OSError:
            stamps.append((0, 0, 0))
    return tuple(stamps)


class ServerTls:
    """The live TLS material of one server: gRPC credentials, a remoting context, reloading."""

    def __init__(self, settings: ServerTlsSettings) -> None:
        """Load the files (raises TlsFileError)."""
        self.settings = settings
        self._material = load_material(settings)
        self._stamp = _file_stamp(settings.files)
        self._pending: grpc.ServerCertificateConfiguration | None = None
        self._lock = threading.Lock()
        self._context = build_ssl_context(settings, self._material)
        self.reloads = 0
        """Successful reloads so far."""
        self.failed_reloads = 0
        """Reloads that failed (the old certificate stayed)."""
        self.not_after = certificate_not_after(self._material.cert_chain)
        """When the served certificate expires, seconds since the epoch."""

    @property
    def require_client_cert(self) -> bool:
        """Whether clients must present a certificate (gRPC: ``require`` only)."""
        return self.settings.client_ca_file is not None and self.settings.client_auth == "require"

    def _grpc_config(self, material: TlsMaterial) -> grpc.ServerCertificateConfiguration:
        return grpc.ssl_server_certificate_configuration(
            [(material.private_key, material.cert_chain)],
            root_certificates=material.client_ca if self.require_client_cert else None,
        )

    def grpc_credentials(self) -> grpc.ServerCredentials:
        """Credentials for ``add_secure_port``; they pick up reloads at the next handshake."""
        return grpc.dynamic_ssl_server_credentials(
            self._grpc_config(self._material),
            self._fetch_grpc_config,  # type: ignore[arg-type]  # None = no change (grpc docs)
            require_client_authentication=self.require_client_cert,
        )

    def _fetch_grpc_config(self) -> grpc.ServerCertificateConfiguration | None:
        # Called by gRPC at each new handshake: return a new configuration once, else None (no change).
        with self._lock:
            pending, self._pending = self._pending, None
        return pending

    def remoting_context(self) -> ssl.SSLContext:
        """The ``SSLContext`` to listen with on the remoting port; new handshakes switch to the
        latest loaded context (SNI callback), so it never needs replacing."""
        front = build_ssl_context(self.settings, self._material)

        def switch(ssl_object: ssl.SSLObject | ssl.SSLSocket, _server_name: str | None, _ctx: ssl.SSLContext) -> None:
            ssl_object.context = self._context

        front.sni_callback = switch
        return front

    def reload(self, why: str) -> bool:
        """Load the files again; on success new handshakes use them. Return whether it worked (a
        failure is logged and the old material stays)."""
        try:
            material = load_material(self.settings)
            context = build_ssl_context(self.settings, material)
        except TlsFileError as exc:
            log.error("TLS reload (%s) failed, keeping the old certificate: %s", why, exc)
            self.failed_reloads += 1
            self._stamp = _file_stamp(self.settings.files)  # report each change once
            return False
        with self._lock:
            self._material = material
            self._context = context
            self._pending = self._grpc_config(material)
            self._stamp = _file_stamp(self.settings.files)
            self.not_after = certificate_not_after(material.cert_chain)
        self.reloads += 1
        log.info("TLS certificate reloaded (%s) from %s", why, self.settings.cert_file)
        return True

    def changed_on_disk(self) -> bool:
        """Whether any file changed (inode, size or mtime) since the last load."""
        return _file_stamp(self.settings.files) != self._stamp

    async def watch(self, interval: float = WATCH_INTERVAL_SECONDS) -> None:
        """Reload whenever the files change (checked every ``interval`` seconds), until cancelled."""
        while True:
            await asyncio.sleep(interval)
            if self.changed_on_disk():
                # Give a writer replacing several files a moment to finish.
                await asyncio.sleep(min(interval, 1.0))
                await asyncio.to_thread(self.reload, "files changed")
