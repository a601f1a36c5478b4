"""``namesrv`` / ``python -m namesrv_grpc``: start a NameServer (RocketMQ ``NamesrvStartup``, S27).

Exit codes: 0 after an orderly shutdown (SIGTERM/SIGINT) or ``-p``; 2 for bad configuration (one
line on stderr naming file, key and problem; an unknown key in ``-c FILE`` is one, unless
``--allow-unknown-keys``); 1 when the port cannot be bound. The defaults ``--help`` shows are the
:class:`~namesrv_grpc.config.NamesrvConfig` defaults ``-p`` prints.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from namesrv_grpc.config import (
    JAVA_ONLY_KEYS,
    NamesrvConfig,
    UnknownKeyError,
    apply_properties,
    check_security_settings,
)
from namesrv_grpc.core.kvconfig import KVConfigFileError, load_config_table
from namesrv_grpc.processes import supervisor
from namesrv_grpc.runtime.log_format import LOG_FORMATS, configure_logging
from namesrv_grpc.runtime.pipes import quiet_broken_pipe
from namesrv_grpc.runtime.properties import ConfigError, read_properties
from namesrv_grpc.security import TlsFileError
from namesrv_grpc.version import add_version_flag

log = logging.getLogger("namesrv")


LOG_LEVEL_DEFAULT = "INFO"


def shown_default(key: str) -> str:
    """The default of RocketMQ key ``key`` as ``--help`` shows it: what ``namesrv -p`` prints without
    ``-c`` or flags (:class:`NamesrvConfig`'s default), the home directory as ``~``, an empty value
    as ``none``."""
    value = NamesrvConfig().to_properties()[key]
    home = os.path.expanduser("~")
    if value == home or value.startswith(home + os.sep):
        value = "~" + value[len(home) :]
    return value or "none"


def _key_help(text: str, key: str, note: str = "") -> str:
    """``text`` followed by ``(KEY, default VALUE NOTE)``, VALUE from :func:`shown_default`."""
    return f"{text} ({key}, default {shown_default(key)}{note})"


def build_parser() -> argparse.ArgumentParser:
    """The command line of CONTRACT.md ("Programs"). Every flag with a RocketMQ key ends its help with
    ``(KEY, default VALUE ...)``, VALUE from :func:`shown_default`."""
    parser = argparse.ArgumentParser(
        prog="namesrv",
        description="Apache RocketMQ NameServer (route registry): RocketMQ remoting and gRPC.",
        epilog="Command-line flags override -c FILE, which overrides the built-in defaults.",
    )
    add_version_flag(parser)
    parser.add_argument(
        "-c",
        "--config-file",
        metavar="FILE",
        type=Path,
        help="Java properties file with RocketMQ keys (a Java NameServer's namesrv.conf works); "
        "an unknown key close to a known one is refused, naming it (other unknown keys are warnings)",
    )
    parser.add_argument(
        "--allow-unknown-keys",
        action="store_true",
        help="start although -c FILE has unknown keys close to known ones: each is warned about and ignored",
    )
    parser.add_argument("-p", "--print-config", action="store_true", help="print the effective configuration and exit")
    _add_server_arguments(parser)
    _add_security_arguments(parser)
    parser.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help=_key_help(
            "serving processes answering both ports", "serverWorkerProcesses", ": one per CPU this process may use"
        ),
    )
    parser.add_argument(
        "--log-level", default=LOG_LEVEL_DEFAULT, help=f"DEBUG, INFO, WARNING or ERROR (default {LOG_LEVEL_DEFAULT})"
    )
    parser.add_argument(
        "--log-format",
        choices=LOG_FORMATS,
        default="text",
        help="stderr lines as text (default) or JSON objects; times in ISO-8601 with the UTC offset",
    )
    return parser


def _add_server_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of the serving setup: addresses, ports, files, expiry, orderly routes, snapshots."""
    parser.add_argument("--host", help=_key_help("address to listen on", "bindAddress"))
    parser.add_argument("--port", type=int, help=_key_help("gRPC port", "grpcServerPort", "; 0 = any free port"))
    parser.add_argument(
        "--remoting-port",
        type=int,
        help=_key_help("RocketMQ remoting port for brokers, clients and mqadmin", "listenPort", "; 0 = any free port"),
    )
    parser.add_argument("--metrics-port", type=int, help=_key_help("Prometheus /metrics port", "metricsPort", ": off"))
    parser.add_argument("--kv-config-path", help=_key_help("KV config file", "kvConfigPath"))
    parser.add_argument("--config-store-path", help=_key_help("where UpdateNamesrvConfig persists", "configStorePath"))
    parser.add_argument(
        "--scan-not-active-broker-interval",
        type=int,
        metavar="MS",
        help=_key_help("expiry scan period in ms", "scanNotActiveBrokerInterval"),
    )
    parser.add_argument(
        "--order-message-enable",
        action="store_const",
        const=True,
        help=_key_help("routes carry orderTopicConf, S19", "orderMessageEnable"),
    )
    parser.add_argument("--snapshot-dir", metavar="DIR", help=_key_help("route snapshots, Parquet", "snapshotDir"))
    parser.add_argument(
        "--snapshot-interval",
        type=int,
        metavar="SECONDS",
        help=_key_help("export a route snapshot every SECONDS", "snapshotInterval", ": only on demand"),
    )
    parser.add_argument(
        "--snapshot-retention",
        type=int,
        metavar="HOURS",
        help=_key_help(
            "delete snapshots older than HOURS, never the newest", "snapshotRetentionHours", "; 0 = keep all"
        ),
    )
    parser.add_argument(
        "--snapshot-namesrv-id",
        metavar="ID",
        help=_key_help("identity in snapshots", "snapshotNamesrvId", ": host:port"),
    )


def _add_security_arguments(parser: argparse.ArgumentParser) -> None:
    """The "security" group: TLS, mTLS, ACL, audit log and the plaintext health port."""
    security = parser.add_argument_group("security (docs/security.md)")
    security.add_argument(
        "--tls-cert-file",
        metavar="FILE",
        help=_key_help("serve TLS with this certificate chain, PEM", "tls.server.certPath", ": plaintext"),
    )
    security.add_argument(
        "--tls-key-file", metavar="FILE", help=_key_help("private key of --tls-cert-file, PEM", "tls.server.keyPath")
    )
    security.add_argument(
        "--tls-client-ca-file",
        metavar="FILE",
        help=_key_help("mTLS: clients must present a certificate signed by these CAs", "tls.server.trustCertPath"),
    )
    security.add_argument(
        "--acl-file",
        metavar="FILE",
        help=_key_help("accounts and what they may do, YAML", "aclFile", ": open"),
    )
    security.add_argument(
        "--audit-log-file", metavar="FILE", help=_key_help("also append audit lines to this file", "auditLogFile")
    )
    security.add_argument(
        "--health-port",
        type=int,
        metavar="PORT",
        help=_key_help("plaintext port serving only grpc.health.v1", "healthPort", ": off"),
    )


FLAG_KEYS = {
    "host": "bindAddress",
    "port": "grpcServerPort",
    "remoting_port": "listenPort",
    "metrics_port": "metricsPort",
    "kv_config_path": "kvConfigPath",
    "config_store_path": "configStorePath",
    "scan_not_active_broker_interval": "scanNotActiveBrokerInterval",
    "order_message_enable": "orderMessageEnable",
    "snapshot_dir": "snapshotDir",
    "snapshot_interval": "snapshotInterval",
    "snapshot_retention": "snapshotRetentionHours",
    "snapshot_namesrv_id": "snapshotNamesrvId",
    "tls_cert_file": "tls.server.certPath",
    "tls_key_file": "tls.server.keyPath",
    "tls_client_ca_file": "tls.server.trustCertPath",
    "acl_file": "aclFile",
    "audit_log_file": "auditLogFile",
    "health_port": "healthPort",
    "workers": "serverWorkerProcesses",
}
"""Command-line flag (argparse dest) -> RocketMQ key."""


def store_not_written_yet(args: argparse.Namespace) -> bool:
    """True when ``-c FILE`` names the config store (``configStorePath``: ``--config-store-path`` or
    its default) and FILE does not exist yet: the first start of a NameServer that keeps its run-time
    changes by reading them back with ``-c`` (the container image, the Kubernetes manifest, the
    systemd unit). It starts with the defaults and flags; the first ``UpdateNamesrvConfig`` writes
    the file. Any other missing ``-c`` file is an error, as in Java's ``NamesrvStartup``."""
    if args.config_file is None or Path(args.config_file).exists():
        return False
    store = args.config_store_path or NamesrvConfig().config_store_path
    return Path(args.config_file).expanduser().resolve() == Path(store).expanduser().resolve()


def load_config(args: argparse.Namespace) -> tuple[NamesrvConfig, list[str]]:
    """Defaults, then ``-c FILE``, then flags. Raises ConfigError (an unknown key in the file too,
    unless ``--allow-unknown-keys``; a missing file, unless :func:`store_not_written_yet`); returns
    the config and warnings (the unknown keys ignored)."""
    config = NamesrvConfig()
    warnings: list[str] = []
    if args.config_file is not None and not store_not_written_yet(args):
        try:
            config, warnings = apply_properties(
                config,
                read_properties(args.config_file),
                str(args.config_file),
                strict=False if args.allow_unknown_keys else "typos",
            )
        except UnknownKeyError as exc:
            raise ConfigError(
                exc.source, exc.key, f"{exc.problem}; start with --allow-unknown-keys to ignore unknown keys"
            ) from None
    flags = {key: str(getattr(args, dest)) for dest, key in FLAG_KEYS.items() if getattr(args, dest) is not None}
    if args.tls_client_ca_file is not None:
        flags["tls.server.need.client.auth"] = "require"  # CONTRACT: given = clients must present a certificate
    config, _ = apply_properties(config, flags, "command line", strict=True)
    check_security_settings(config, "command line" if args.config_file is None else str(args.config_file))
    return config, warnings


def config_origin(args: argparse.Namespace, config: NamesrvConfig) -> list[tuple[int, str]]:
    """The log lines (level, text) that say where the effective configuration came from and what
    becomes of ``UpdateNamesrvConfig`` changes, as RocketMQ's ``NamesrvStartup`` does it: only the
    ``-c`` file is read at start; changes are written to ``configStorePath``, which is read back
    only when it is the ``-c`` file (S26)."""
    flags = [f"--{dest.replace('_', '-')}" for dest in FLAG_KEYS if getattr(args, dest, None) is not None]
    parts = ["defaults"]
    if args.config_file is not None:
        written = "" if Path(args.config_file).exists() else ", not written yet"
        parts.append(f"{Path(args.config_file).resolve()} (-c{written})")
    if flags:
        parts.append("flags " + " ".join(flags))
    store = Path(config.config_store_path).expanduser().resolve()
    lines = [(logging.INFO, f"configuration from {' + '.join(parts)}")]
    if config.java_only:
        lines.append((logging.INFO, java_only_line(config)))
    if args.config_file is not None and Path(args.config_file).resolve() == store:
        lines.append(
            (
                logging.INFO,
                f"UpdateNamesrvConfig changes are written to {store}, the -c file: kept at restart"
                + (" (flags given at the next start override it)" if flags else ""),
            )
        )
        return lines
    lines.append(
        (
            logging.INFO,
            f"UpdateNamesrvConfig changes are written to {store} (configStorePath) and are read at start only "
            f"when the NameServer is started with -c {store}",
        )
    )
    if store.exists():
        lines.append(
            (
                logging.WARNING,
                f"{store} (configStorePath) exists but is not read: changes made there with UpdateNamesrvConfig "
                f"are not in effect; start with -c {store} to use them",
            )
        )
    return lines


def java_only_line(config: NamesrvConfig) -> str:
    """The one line naming the keys of the Java NameServer given that have no effect here
    (:data:`~namesrv_grpc.config.JAVA_ONLY_KEYS`)."""
    classes = sorted({JAVA_ONLY_KEYS[key].java_class for key in config.java_only})
    return (
        f"keys of the Java NameServer's {' and '.join(classes)} with no effect here (kept as given; "
        f"docs/configuration.md): {', '.join(sorted(config.java_only))}"
    )


@quiet_broken_pipe
def main(argv: Sequence[str] | None = None) -> int:
    """Run the NameServer; return the process exit code (141 when ``-p`` output goes to a closed pipe)."""
    args = build_parser().parse_args(argv)
    configure_logging(args.log_level, args.log_format)
    try:
        config, warnings = load_config(args)
    except ConfigError as exc:
        print(f"namesrv: {exc}", file=sys.stderr)
        return 2
    for warning in warnings:
        log.warning("%s", warning)
    if args.print_config:
        for key, value in config.to_properties().items():
            print(f"{key}={value}")
        return 0
    try:
        check_files(config)
    except (KVConfigFileError, ConfigError, TlsFileError) as exc:
        print(f"namesrv: {exc}", file=sys.stderr)
        return 2
    with asyncio.Runner() as runner:
        origin = config_origin(args, config)
        return runner.run(supervisor.serve(config, args.log_level, origin, boot_line, args.log_format))


def check_files(config: NamesrvConfig) -> None:
    """Read every file the processes will read at start (KV config, TLS material, ACL), so a bad one
    is one line and exit 2 before anything starts. Raises KVConfigFileError, TlsFileError, ConfigError."""
    kv_path = Path(config.kv_config_path).expanduser()
    if kv_path.exists():
        load_config_table(kv_path)
    if config.tls_server_cert_path or config.acl_file or config.audit_log_file:
        # Imported only when a file is named: gRPC's TLS and the ACL's YAML are a fifth of the
        # supervisor's start-up otherwise, and its processes load them themselves.
        from namesrv_grpc.security.setup import server_guard, server_tls

        server_tls(config)
        server_guard(config, None).audit_log.close()


BOOT_LINE_PREFIX = "The Name Server boot success."
"""How the line starts that ``namesrv`` prints once it serves (RocketMQ ``NamesrvStartup`` prints it too)."""

_BOOT_ADDRESS = re.compile(r"\b(remoting|gRPC) (\S+):(\d+)")
_BOOT_PROCESSES = re.compile(r"\b(\d+) serving process")


def boot_line(config: NamesrvConfig, remoting_port: int, grpc_port: int, workers: int = 1) -> str:
    """``The Name Server boot success. serializeType=JSON, N serving processes, remoting HOST:PORT,
    gRPC HOST:PORT``.

    ``serializeType`` is the header serialization of RocketMQ's own boot line; gRPC stays last, so
    parsers taking the text after the last ':' keep finding the gRPC port.
    """
    host = config.bind_address
    processes = f"{workers} serving process{'es' if workers != 1 else ''}"
    return (
        f"{BOOT_LINE_PREFIX} serializeType=JSON, {processes}, remoting {host}:{remoting_port}, gRPC {host}:{grpc_port}"
    )


def parse_boot_line(line: str) -> dict[str, int]:
    """The ports a boot line names: ``{"remoting": port, "gRPC": port}``, and ``"serving processes"``
    when it names them. Raises ValueError when ``line`` is not a boot line."""
    if not line.startswith(BOOT_LINE_PREFIX):
        raise ValueError(f"not a NameServer boot line: {line!r}")
    found = {match[1]: int(match[3]) for match in _BOOT_ADDRESS.finditer(line)}
    processes = _BOOT_PROCESSES.search(line)
    if processes:
        found["serving processes"] = int(processes[1])
    return found


if __name__ == "__main__":
    raise SystemExit(main())
