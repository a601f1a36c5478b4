"""Client side of security, shared by ``broker-agent``, ``namesrv-admin`` and ``namesrv-snapshot``:
TLS channel credentials and RocketMQ 5 request signing from the same flags.

Flags: ``--tls-ca-file`` (CA certificates to trust the server by; TLS on), ``--tls-cert-file`` and
``--tls-key-file`` (a client certificate for mTLS; TLS on), ``--tls`` (TLS with the system's CAs),
``--tls-server-name`` (the name to expect in the server's certificate when it differs from the
host in the address), ``--access-key`` and ``--secret-key`` (sign every call; environment
``NAMESRV_ACCESS_KEY`` / ``NAMESRV_SECRET_KEY`` when not given, so the secret need not be on a
command line).

Signatures are added by a client interceptor, not call credentials: gRPC sends call credentials
only over TLS, and a NameServer with an ACL but without TLS must still be reachable.
"""

from __future__ import annotations

import argparse
import os
import ssl
import tempfile
from collections.abc import AsyncIterable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import grpc

from namesrv_grpc.runtime.properties import ConfigError
from namesrv_grpc.security.signature import grpc_signature_metadata, remoting_signature, utc_now

MAX_PEM_BYTES = 1024 * 1024


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the TLS and signing flags to a program's parser."""
    group = parser.add_argument_group("security (TLS, signatures)")
    group.add_argument("--tls-ca-file", type=Path, metavar="FILE", help="CA certificates (PEM) to trust the server by")
    group.add_argument("--tls-cert-file", type=Path, metavar="FILE", help="client certificate (PEM) for mutual TLS")
    group.add_argument("--tls-key-file", type=Path, metavar="FILE", help="private key (PEM) of --tls-cert-file")
    group.add_argument("--tls", action="store_true", help="use TLS, trusting the system's CA certificates")
    group.add_argument("--tls-server-name", metavar="NAME", help="name expected in the server's certificate")
    group.add_argument("--access-key", metavar="AK", help="sign calls with this access key (env NAMESRV_ACCESS_KEY)")
    group.add_argument("--secret-key", metavar="SK", help="secret key of --access-key (env NAMESRV_SECRET_KEY)")


@dataclass(frozen=True, slots=True)
class ClientSecurity:
    """How a client connects: TLS material (PEM bytes) and signing keys. Nothing set = plaintext,
    unsigned, as before."""

    tls: bool = False
    ca_pem: bytes | None = None
    cert_pem: bytes | None = None
    key_pem: bytes | None = field(default=None, repr=False)
    server_name: str | None = None
    access_key: str | None = None
    secret_key: str | None = field(default=None, repr=False)

    def channel_credentials(self) -> grpc.ChannelCredentials | None:
        """TLS credentials, or None for plaintext."""
        if not self.tls:
            return None
        return grpc.ssl_channel_credentials(self.ca_pem, self.key_pem, self.cert_pem)

    def channel_options(self) -> list[tuple[str, Any]]:
        """Extra channel options (the server name override)."""
        return [("grpc.ssl_target_name_override", self.server_name)] if self.tls and self.server_name else []

    def signing_metadata(self) -> tuple[tuple[str, str], ...]:
        """Metadata for one call signed now (empty when no keys are set)."""
        if not self.access_key or not self.secret_key:
            return ()
        return grpc_signature_metadata(self.access_key, self.secret_key, utc_now())

    def ssl_context(self) -> ssl.SSLContext | None:
        """TLS for a RocketMQ remoting connection (the same material as the gRPC channel's), or None
        for plaintext. The server's certificate is verified against ``ca_pem`` (else the system's CAs)
        and the host name (or ``server_name``); ``cert_pem``/``key_pem`` are presented for mutual TLS."""
        if not self.tls:
            return None
        context = ssl.create_default_context(cadata=self.ca_pem.decode("ascii", "replace") if self.ca_pem else None)
        if self.cert_pem and self.key_pem:
            # ssl loads a certificate chain from files only: a private directory for the moment it takes.
            with tempfile.TemporaryDirectory(prefix="namesrv-tls-") as folder:
                cert, key = Path(folder, "cert.pem"), Path(folder, "key.pem")
                cert.write_bytes(self.cert_pem)
                key.touch(mode=0o600)
                key.write_bytes(self.key_pem)
                context.load_cert_chain(cert, key)
        return context

    def remoting_fields(self, ext_fields: dict[str, str], body: bytes) -> dict[str, str]:
        """``ext_fields`` signed as RocketMQ's ``AclClientRPCHook`` signs a remoting request
        (``AccessKey`` added, then ``Signature`` over the sorted field values and the body); unchanged
        when no keys are set."""
        if not self.access_key or not self.secret_key:
            return ext_fields
        signed = {**ext_fields, "AccessKey": self.access_key}
        return {**signed, "Signature": remoting_signature(signed, body, self.secret_key)}

    def channel(self, address: str, options: Sequence[tuple[str, Any]] = ()) -> grpc.Channel:
        """A blocking channel to ``address`` with TLS and signing as configured."""
        all_options = [*options, *self.channel_options()]
        credentials = self.channel_credentials()
        if credentials is None:
            channel = grpc.insecure_channel(address, options=all_options)
        else:
            channel = grpc.secure_channel(address, credentials, options=all_options)
        if self.access_key:
            channel = grpc.intercept_channel(channel, _SyncSigner(self))
        return channel

    def aio_channel(self, address: str, options: Sequence[tuple[str, Any]] = ()) -> grpc.aio.Channel:
        """An asyncio channel to ``address`` with TLS and signing as configured."""
        all_options = [*options, *self.channel_options()]
        interceptors = _aio_signers(self) if self.access_key else []
        credentials = self.channel_credentials()
        if credentials is None:
            return grpc.aio.insecure_channel(address, options=all_options, interceptors=interceptors)
        return grpc.aio.secure_channel(address, credentials, options=all_options, interceptors=interceptors)


def _read(path: Path, flag: str) -> bytes:
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_PEM_BYTES + 1)
    except OSError as exc:
        raise ConfigError(flag, str(path), f"cannot read: {exc.strerror or exc}") from None
    if len(data) > MAX_PEM_BYTES or b"-----BEGIN " not in data:
        raise ConfigError(flag, str(path), "not a PEM file")
    return data


def security_from(
    *,
    ca_file: Path | None = None,
    cert_file: Path | None = None,
    key_file: Path | None = None,
    tls: bool = False,
    server_name: str | None = None,
    access_key: str | None = None,
    secret_key: str | None = None,
    source: str = "command line",
) -> ClientSecurity:
    """Check and load client settings. Raises ConfigError (a certificate without its key, a key
    without its secret, an unreadable file)."""
    if (cert_file is None) != (key_file is None):
        raise ConfigError(source, "--tls-cert-file/--tls-key-file", "give both or neither")
    if bool(access_key) != bool(secret_key):
        raise ConfigError(source, "--access-key/--secret-key", "give both or neither")
    if access_key and any(c.isspace() or c in ",/" for c in access_key):
        raise ConfigError(source, "--access-key", "must not contain white space, commas or slashes")
    return ClientSecurity(
        tls=bool(tls or ca_file or cert_file),
        ca_pem=_read(ca_file, "--tls-ca-file") if ca_file else None,
        cert_pem=_read(cert_file, "--tls-cert-file") if cert_file else None,
        key_pem=_read(key_file, "--tls-key-file") if key_file else None,
        server_name=server_name or None,
        access_key=access_key or None,
        secret_key=secret_key or None,
    )


def security_from_args(args: argparse.Namespace, environ: dict[str, str] | None = None) -> ClientSecurity:
    """:func:`security_from` with the flags of :func:`add_arguments` (keys fall back to the
    environment). Raises ConfigError."""
    env = os.environ if environ is None else environ
    return security_from(
        ca_file=args.tls_ca_file,
        cert_file=args.tls_cert_file,
        key_file=args.tls_key_file,
        tls=args.tls,
        server_name=args.tls_server_name,
        access_key=args.access_key or env.get("NAMESRV_ACCESS_KEY"),
        secret_key=args.secret_key or env.get("NAMESRV_SECRET_KEY"),
    )


class _CallDetails(NamedTuple):
    method: str
    timeout: float | None
    metadata: Any
    credentials: Any
    wait_for_ready: bool | None
    compression: Any


class _SyncDetails(_CallDetails, grpc.ClientCallDetails):
    pass


def _signed_metadata(security: ClientSecurity, metadata: Any) -> list[tuple[str, str]]:
    return [*(metadata or ()), *security.signing_metadata()]


class _SyncSigner(
    grpc.UnaryUnaryClientInterceptor,
    grpc.UnaryStreamClientInterceptor,
    grpc.StreamUnaryClientInterceptor,
    grpc.StreamStreamClientInterceptor,
):
    """Adds a fresh signature to every blocking call."""

    def __init__(self, security: ClientSecurity) -> None:
        self._security = security

    def _details(self, details: Any) -> _SyncDetails:
        return _SyncDetails(
            details.method,
            details.timeout,
            _signed_metadata(self._security, details.metadata),
            details.credentials,
            getattr(details, "wait_for_ready", None),
            getattr(details, "compression", None),
        )

    def intercept_unary_unary(self, continuation: Callable[..., Any], details: Any, request: Any) -> Any:
        return continuation(self._details(details), request)

    def intercept_unary_stream(self, continuation: Callable[..., Any], details: Any, request: Any) -> Any:
        return continuation(self._details(details), request)

    def intercept_stream_unary(self, continuation: Callable[..., Any], details: Any, requests: Any) -> Any:
        return continuation(self._details(details), requests)

    def intercept_stream_stream(self, continuation: Callable[..., Any], details: Any, requests: Any) -> Any:
        return continuation(self._details(details), requests)


class _AioSigner:
    """Adds a fresh signature to every asyncio call (streams are signed when they open). grpc.aio
    files each interceptor under one kind only, hence one subclass per kind."""

    def __init__(self, security: ClientSecurity) -> None:
        self._security = security

    def _details(self, details: grpc.aio.ClientCallDetails) -> grpc.aio.ClientCallDetails:
        return grpc.aio.ClientCallDetails(
            details.method,
            details.timeout,
            grpc.aio.Metadata(*_signed_metadata(self._security, details.metadata)),
            details.credentials,
            details.wait_for_ready,
        )


class _AioUnaryUnarySigner(_AioSigner, grpc.aio.UnaryUnaryClientInterceptor):
    async def intercept_unary_unary(self, continuation: Any, client_call_details: Any, request: Any) -> Any:
        return await continuation(self._details(client_call_details), request)


class _AioUnaryStreamSigner(_AioSigner, grpc.aio.UnaryStreamClientInterceptor):
    async def intercept_unary_stream(self, continuation: Any, client_call_details: Any, request: Any) -> Any:
        return await continuation(self._details(client_call_details), request)


class _AioStreamUnarySigner(_AioSigner, grpc.aio.StreamUnaryClientInterceptor):
    async def intercept_stream_unary(
        self, continuation: Any, client_call_details: Any, request_iterator: AsyncIterable[Any] | Iterable[Any]
    ) -> Any:
        return await continuation(self._details(client_call_details), request_iterator)


class _AioStreamStreamSigner(_AioSigner, grpc.aio.StreamStreamClientInterceptor):
    async def intercept_stream_stream(
        self, continuation: Any, client_call_details: Any, request_iterator: AsyncIterable[Any] | Iterable[Any]
    ) -> Any:
        return await continuation(self._details(client_call_details), request_iterator)


def _aio_signers(security: ClientSecurity) -> list[Any]:
    kinds = (_AioUnaryUnarySigner, _AioUnaryStreamSigner, _AioStreamUnarySigner, _AioStreamStreamSigner)
    return [kind(security) for kind in kinds]
