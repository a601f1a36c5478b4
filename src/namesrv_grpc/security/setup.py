"""Builds the server's security objects from a :class:`~namesrv_grpc.config.NamesrvConfig`."""

from __future__ import annotations

import logging
from pathlib import Path

from namesrv_grpc.config import NamesrvConfig
from namesrv_grpc.runtime.policy import share
from namesrv_grpc.runtime.properties import ConfigError
from namesrv_grpc.security.acl import load_acl
from namesrv_grpc.security.audit import AuditLog
from namesrv_grpc.security.authz import Guard, RefusalCounter
from namesrv_grpc.security.tls import ServerTls, ServerTlsSettings

log = logging.getLogger(__name__)


def tls_settings(config: NamesrvConfig) -> ServerTlsSettings | None:
    """The TLS settings, or None when TLS is off (no certificate, or ``tls.server.mode=disabled``)."""
    if not config.tls_server_cert_path or config.tls_server_mode == "disabled":
        return None
    trust = config.tls_server_trust_cert_path
    client_auth = config.tls_server_need_client_auth or ("require" if trust else "none")
    return ServerTlsSettings(
        cert_file=Path(config.tls_server_cert_path).expanduser(),
        key_file=Path(config.tls_server_key_path).expanduser(),
        client_ca_file=Path(trust).expanduser() if trust else None,
        client_auth=client_auth,
        mode=config.tls_server_mode,
    )


def server_tls(config: NamesrvConfig) -> ServerTls | None:
    """Load the TLS material (raises TlsFileError), or None when TLS is off."""
    settings = tls_settings(config)
    if settings is None:
        return None
    if settings.client_auth == "optional":
        log.warning("tls.server.need.client.auth=optional: gRPC cannot ask for an optional certificate, it asks none")
    return ServerTls(settings)


def server_guard(config: NamesrvConfig, refusals: RefusalCounter | None, workers: int = 1) -> Guard:
    """The ACL check (ACL file loaded, raises ConfigError) and the audit trail of one of ``workers``
    serving processes (its share of ``auditLogLinesPerSecond``)."""
    acl = load_acl(Path(config.acl_file).expanduser()) if config.acl_file else None
    try:
        audit = AuditLog(
            Path(config.audit_log_file).expanduser() if config.audit_log_file else None,
            repeat_window_seconds=config.audit_repeat_window_seconds,
            lines_per_second=share(config.audit_log_lines_per_second, workers),
        )
    except OSError as exc:
        raise ConfigError("auditLogFile", config.audit_log_file, f"cannot append: {exc.strerror or exc}") from None
    return Guard(acl, audit, refusals)


def reload_acl(guard: Guard, config: NamesrvConfig) -> bool:
    """Load the ACL file again (SIGHUP); a bad file is logged and the old ACL stays."""
    if not config.acl_file:
        return False
    try:
        guard.reload(load_acl(Path(config.acl_file).expanduser()))
    except ConfigError as exc:
        log.error("ACL reload failed, keeping the old ACL: %s", exc)
        return False
    log.info("ACL reloaded from %s", config.acl_file)
    return True
