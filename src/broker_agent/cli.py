"""``broker-agent`` / ``python -m broker_agent``: keep a broker registered with its NameServers.

Exit codes: 0 after an orderly shutdown (SIGTERM/SIGINT: unregisters first when the broker stops
too, else hands its sessions over: ``--on-stop``); 2 for bad
configuration (one line on stderr naming file, key and problem). SIGHUP re-reads topics.json and
registers at once.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from prometheus_client import start_http_server

from broker_agent.agent import ON_STOP_CHOICES, BrokerAgent, OnStop
from broker_agent.client import GrpcNamesrvClient
from broker_agent.config import (
    PLACEHOLDER,
    BrokerConfig,
    load_broker_config,
    loopback_warning,
    warn_unused_placeholders,
)
from broker_agent.metrics import AgentMetrics
from broker_agent.topics import TopicsFileError, TopicSource
from namesrv_grpc.client import security
from namesrv_grpc.client.security import ClientSecurity
from namesrv_grpc.core.route_tables import wall_clock_millis
from namesrv_grpc.runtime.log_format import LOG_FORMATS, configure_logging
from namesrv_grpc.runtime.pipes import print_line, quiet_broken_pipe
from namesrv_grpc.runtime.properties import ConfigError, read_properties
from namesrv_grpc.version import add_version_flag

log = logging.getLogger("broker_agent")

USED_KEYS = {
    "brokerClusterName", "brokerName", "brokerId", "brokerIP1", "brokerIP2", "listenPort", "haListenPort",
    "namesrvAddr", "brokerRole", "registerNameServerPeriod", "forceRegister", "compressedRegister",
    "registerBrokerTimeoutMills", "brokerPermission", "autoCreateTopicEnable", "defaultTopicQueueNums",
    "clusterTopicEnable", "brokerTopicEnable", "enableSlaveActingMaster", "zoneName", "storePathRootDir",
    "brokerNotActiveTimeoutMillis", "enableDLegerCommitLog", "flushDiskType", "defaultMessageRequestMode",
    *("accessKey", "secretKey", "tls.enable", "tls.client.trustCertPath", "tls.client.certPath", "tls.client.keyPath"),
}  # fmt: skip
"""broker.conf keys the agent reads; see :func:`broker_agent.config.load_broker_config`."""


def build_parser() -> argparse.ArgumentParser:
    """The command line of CONTRACT.md ("Programs")."""
    parser = argparse.ArgumentParser(
        prog="broker-agent",
        description="Registers an Apache RocketMQ broker with every NameServer, from the broker's own files.",
    )
    add_version_flag(parser)
    parser.add_argument("--broker-config", "-c", required=True, type=Path, metavar="FILE", help="broker.conf")
    parser.add_argument(
        "--topics-json",
        type=Path,
        metavar="FILE",
        help="topics.json (default ${storePathRootDir}/config/topics.json)",
    )
    parser.add_argument("--namesrv-addr", "-n", metavar="ADDRS", help='"host:port;host:port" (overrides broker.conf)')
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override one broker.conf key (repeatable), e.g. --set listenPort=10921",
    )
    parser.add_argument(
        "--no-sessions",
        action="store_true",
        help="no liveness sessions (S15): NameServers then notice a dead broker only by its silence",
    )
    parser.add_argument(
        "--on-stop",
        choices=ON_STOP_CHOICES,
        default="auto",
        help="on SIGTERM/SIGINT: auto (default) unregisters only when the broker's port no longer accepts "
        "connections (it stops too) and otherwise hands the sessions over, so the broker stays registered "
        "until its next registration; unregister always; hand-over never",
    )
    parser.add_argument(
        "--metrics-port",
        type=_port,
        default=0,
        metavar="PORT",
        help="serve Prometheus /metrics on this port, all interfaces (default 0 = off)",
    )
    parser.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING or ERROR (default INFO)")
    parser.add_argument(
        "--log-format",
        choices=LOG_FORMATS,
        default="text",
        help="stderr lines as text (default) or JSON objects; times in ISO-8601 with the UTC offset",
    )
    security.add_arguments(parser)
    return parser


def _port(text: str) -> int:
    """A TCP port number, 0-65535."""
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}")
    return port


def load(args: argparse.Namespace) -> tuple[BrokerConfig, Path, list[str]]:
    """Read broker.conf with ``--set`` overrides; return the config, the topics.json path and the
    warnings to log once the whole configuration is known to be good.

    Raises ConfigError; a bad value given with ``--set`` is reported against ``--set``.
    """
    source = str(args.broker_config)
    properties = read_properties(args.broker_config)
    overridden: set[str] = set()
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError("--set", item, "expected KEY=VALUE")
        properties[key.strip()] = value.strip()
        overridden.add(key.strip())
    warnings = warn_unused_placeholders(properties, source, USED_KEYS)
    try:
        config = load_broker_config(properties, source, namesrv_addr_override=args.namesrv_addr, warnings=warnings)
    except ConfigError as exc:
        if exc.source == source and exc.key in overridden:
            raise ConfigError("--set", exc.key, exc.problem) from None
        raise
    if args.topics_json is None and PLACEHOLDER.search(config.store_path_root_dir):
        raise ConfigError(
            source, "storePathRootDir", f"unresolved placeholder in {config.store_path_root_dir!r}; pass --topics-json"
        )
    return config, args.topics_json or config.default_topics_json, warnings


def load_security(args: argparse.Namespace, properties: dict[str, str], source: str) -> ClientSecurity:
    """TLS and signing for the NameServer connections: the flags, else RocketMQ's keys in broker.conf
    (``accessKey``/``secretKey``; ``tls.enable``, ``tls.client.trustCertPath``, ``tls.client.certPath``,
    ``tls.client.keyPath`` as RocketMQ's ``TlsSystemConfig``), else the environment. Raises ConfigError."""

    def path(flag: Path | None, key: str) -> Path | None:
        return flag if flag is not None else (Path(properties[key]).expanduser() if properties.get(key) else None)

    tls_enable = properties.get("tls.enable", "false").strip().lower()
    if tls_enable not in ("true", "false"):
        raise ConfigError(source, "tls.enable", f"{tls_enable!r} is not true or false")
    return security.security_from(
        ca_file=path(args.tls_ca_file, "tls.client.trustCertPath"),
        cert_file=path(args.tls_cert_file, "tls.client.certPath"),
        key_file=path(args.tls_key_file, "tls.client.keyPath"),
        tls=args.tls or tls_enable == "true",
        server_name=args.tls_server_name,
        access_key=args.access_key or properties.get("accessKey") or os.environ.get("NAMESRV_ACCESS_KEY"),
        secret_key=args.secret_key or properties.get("secretKey") or os.environ.get("NAMESRV_SECRET_KEY"),
        source=source,
    )


@quiet_broken_pipe
def main(argv: Sequence[str] | None = None) -> int:
    """Run the agent; return the process exit code. A closed stdout never stops it (logs go to stderr)."""
    args = build_parser().parse_args(argv)
    configure_logging(args.log_level, args.log_format)
    try:
        config, topics_path, warnings = load(args)
        # Only the broker's own topics.json may be missing (a fresh broker, S38); also when named explicitly.
        explicit = args.topics_json is not None and topics_path.resolve() != config.default_topics_json.resolve()
        topic_source = TopicSource(config, topics_path, wall_clock_millis, must_exist=explicit)
        topic_source.load_initial()
        properties = read_properties(args.broker_config)
        properties.update({k.strip(): v.strip() for k, _, v in (item.partition("=") for item in args.set)})
        client_security = load_security(args, properties, str(args.broker_config))
    except (ConfigError, TopicsFileError) as exc:
        print(f"broker-agent: {exc}", file=sys.stderr)
        return 2
    loopback = loopback_warning(config)
    for warning in [*warnings, *([loopback] if loopback else [])]:
        log.warning("%s", warning)
    metrics = AgentMetrics()
    metrics_server = None
    if args.metrics_port:
        try:
            metrics_server, _ = start_http_server(args.metrics_port, registry=metrics.registry)
        except OSError as exc:
            print(f"broker-agent: --metrics-port {args.metrics_port}: {exc.strerror or exc}", file=sys.stderr)
            return 2
        log.info("metrics on port %d (/metrics)", args.metrics_port)
    try:
        return asyncio.run(
            _run(
                config,
                topic_source,
                sessions=not args.no_sessions,
                metrics=metrics,
                client_security=client_security,
                on_stop=args.on_stop,
            )
        )
    finally:
        if metrics_server is not None:
            metrics_server.shutdown()


async def _run(
    config: BrokerConfig,
    topic_source: TopicSource,
    *,
    sessions: bool,
    metrics: AgentMetrics,
    client_security: ClientSecurity | None = None,
    on_stop: OnStop = "auto",
) -> int:
    agents: list[BrokerAgent] = []

    def client_factory(address: str) -> GrpcNamesrvClient:
        # A NameServer host name is dialled at the addresses it resolves to; with TLS the certificate
        # is checked against the name that was configured, as a client dialling the name would.
        security = client_security
        if security is not None and security.tls and not security.server_name and agents:
            name = agents[0].host_name_of(address)
            if name:
                security = dataclasses.replace(security, server_name=name)
        return GrpcNamesrvClient(address, security, config.namesrv_addr_source)

    agent = BrokerAgent(config, topic_source, client_factory, sessions=sessions, metrics=metrics, on_stop=on_stop)
    agents.append(agent)
    log.info("agent instance %s (NameServers name it in registration conflicts)", agent.instance_id)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)
    loop.add_signal_handler(signal.SIGHUP, agent.request_round)
    print_line(
        f"broker-agent: {config.broker_cluster_name}/{config.broker_name} id {config.broker_id} at "
        f"{config.broker_addr} -> {';'.join(config.namesrv_addrs)}"
    )
    try:
        await agent.run(stop)
    finally:
        await agent.close()
    print_line("broker-agent: stopped")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
