"""The NameServer's configuration, keyed by RocketMQ's names (``NamesrvConfig``, ``NettyServerConfig``).

Precedence: built-in defaults < ``-c FILE`` (Java properties) < command-line flags (S27).
Three kinds of key: the keys of :data:`KEYS` (used here, and every key of RocketMQ's
``NamesrvConfig``); the keys of :data:`JAVA_ONLY_KEYS` (RocketMQ's ``NettyServerConfig`` and
``NettyClientConfig`` keys this NameServer has no use for: accepted, kept as given, no effect); and
unknown keys, refused with the nearest known key named (:class:`UnknownKeyError`), or only warned
about with ``namesrv --allow-unknown-keys``. Values are checked by type and range; a bad one is a
:class:`~namesrv_grpc.runtime.properties.ConfigError` naming file, key and problem.
"""

from __future__ import annotations

import dataclasses
import difflib
import io
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import jproperties

from namesrv_grpc.runtime.atomic_file import write_atomically
from namesrv_grpc.runtime.properties import ConfigError

DEFAULT_CONFIG_BLACKLIST = "configBlackList;configStorePath;kvConfigPath"
"""Keys ``UpdateNamesrvConfig`` refuses (RocketMQ ``NamesrvConfig.configBlackList``, S26)."""


def _home(*parts: str) -> str:
    return str(Path.home().joinpath(*parts))


@dataclass(frozen=True, slots=True)
class _Key:
    """One configuration key, declared once, on its :class:`NamesrvConfig` field (:func:`key_field`)."""

    name: str
    """The RocketMQ spelling (``listenPort``): the key of ``-c FILE``, ``-p`` and ``UpdateNamesrvConfig``."""
    parse: Callable[[str], object]
    """Text -> value; raises ValueError naming the problem."""
    description: str
    """What the key does, in one line (docs/configuration.md has the full table)."""
    restart: bool = False
    """``UpdateNamesrvConfig`` stores it, but it takes effect only at the next start (:data:`RESTART_KEYS`)."""
    security: bool = False
    """Read at start only, never changed by a request (:data:`SECURITY_KEYS`)."""
    attribute: str = ""
    """The :class:`NamesrvConfig` field (snake_case), filled in by :data:`KEYS`."""


def _parse_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    raise ValueError(f"must be true or false, got {text!r}")


def _int_parser(low: int, high: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text.strip())
        except ValueError:
            raise ValueError(f"must be a whole number, got {text!r}") from None
        if not low <= value <= high:
            raise ValueError(f"must be from {low} to {high}, got {value}")
        return value

    return parse


def _zero_is(default: int, low: int, high: int) -> Callable[[str], int]:
    """A number from ``low`` to ``high``, or ``0`` meaning ``default``: RocketMQ's water marks are 0
    unless set, which leaves Netty's defaults (``NettyRemotingServer``), so Java's ``0`` reads as them."""
    parse = _int_parser(low, high)

    def parse_or_default(text: str) -> int:
        if text.strip() == "0":
            return default
        try:
            return parse(text)
        except ValueError as exc:
            raise ValueError(f"{exc} (or 0: Netty's default, {default})") from None

    return parse_or_default


def _choice(*choices: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        value = text.strip().lower()
        if value not in choices:
            raise ValueError(f"must be one of {', '.join(choices)}, got {text!r}")
        return value

    return parse


def _only_false(explanation: str) -> Callable[[str], bool]:
    """A boolean key of which only ``false`` is accepted; ``true`` raises ValueError(explanation)."""

    def parse(text: str) -> bool:
        if _parse_bool(text):
            raise ValueError(explanation)
        return False

    return parse


CONTROLLER_REFUSAL = (
    "is not supported: the embedded controller is not part of this NameServer; run RocketMQ's standalone "
    "controller (bin/mqcontroller) and point the brokers' controllerAddr at it"
)
"""Why ``enableControllerInNamesrv=true`` is refused, at start and by UpdateNamesrvConfig."""

CLUSTER_TEST_REFUSAL = (
    "is not supported: RocketMQ's cluster-test mode (route lookups answered from another environment's "
    "NameServers, ClusterTestRequestProcessor) is not part of this NameServer"
)

NO_OP_NOTE = "accepted for RocketMQ 5.x compatibility, no effect here (docs/rocketmq-5x.md)"


def _non_empty(text: str) -> str:
    if not text.strip():
        raise ValueError("must not be empty")
    return text.strip()


def key_field(
    name: str,
    parse: Callable[[str], object],
    description: str,
    *,
    default: Any = dataclasses.MISSING,
    default_factory: Any = dataclasses.MISSING,
    restart: bool = False,
    security: bool = False,
) -> Any:
    """The :class:`NamesrvConfig` field of the key ``name`` (RocketMQ spelling): its default, and in
    the field's metadata how its text is read and what it means (:class:`_Key`). Every key is
    declared this way, once; :data:`KEYS`, :data:`RESTART_KEYS` and :data:`SECURITY_KEYS` are read
    from the fields."""
    spec = _Key(name, parse, description, restart, security)
    return field(default=default, default_factory=default_factory, metadata={"key": spec})


@dataclass(slots=True)
class NamesrvConfig:
    """Effective configuration. Each field is one key, declared once with :func:`key_field`: its
    RocketMQ spelling (the attribute name is it in snake_case), parser, description and default side
    by side; :data:`KEYS` is read from the fields. Times are milliseconds unless the name says
    otherwise."""

    listen_port: int = key_field(
        "listenPort", _int_parser(0, 65535), "RocketMQ remoting port (0 = any free port)", default=9876, restart=True
    )
    """RocketMQ remoting port (``listenPort``, as in RocketMQ's NameServer)."""
    grpc_server_port: int = key_field(
        "grpcServerPort", _int_parser(0, 65535), "gRPC port (0 = any free port)", default=8081, restart=True
    )
    """gRPC port (``grpcServerPort``, RocketMQ proxy's gRPC port)."""
    bind_address: str = key_field("bindAddress", _non_empty, "address to listen on", default="0.0.0.0", restart=True)
    metrics_port: int = key_field(
        "metricsPort", _int_parser(0, 65535), "Prometheus /metrics port (0 = off)", default=0, restart=True
    )
    kv_config_path: str = key_field(
        "kvConfigPath",
        _non_empty,
        "KV config file (RocketMQ kvConfig.json format)",
        default_factory=lambda: _home("namesrv", "kvConfig.json"),
    )
    config_store_path: str = key_field(
        "configStorePath",
        _non_empty,
        "where UpdateNamesrvConfig persists changes",
        default_factory=lambda: _home("namesrv", "namesrv.properties"),
    )
    scan_not_active_broker_interval: int = key_field(
        "scanNotActiveBrokerInterval", _int_parser(1, 3_600_000), "expiry scan period, ms (S13)", default=5_000
    )
    """S13 scan period, ms: RocketMQ 5.x's default (``NamesrvConfig.scanNotActiveBrokerInterval = 5 * 1000``)."""
    order_message_enable: bool = key_field(
        "orderMessageEnable", _parse_bool, "routes carry orderTopicConf (S19)", default=False
    )
    delete_topic_with_broker_registration: bool = key_field(
        "deleteTopicWithBrokerRegistration", _parse_bool, "a master's registration drops topics it lost", default=False
    )
    support_acting_master: bool = key_field(
        "supportActingMaster",
        _parse_bool,
        "routes show a master-less broker name's acting master (smallest slave id) under id 0 (5.x)",
        default=False,
    )
    """Routes show a master-less broker name's acting master under id 0 (RocketMQ 5.x, S52)."""
    notify_min_broker_id_changed: bool = key_field(
        "notifyMinBrokerIdChanged",
        _parse_bool,
        "tell a broker name's brokers over remoting when its smallest broker id changes (5.x; connects to brokers)",
        default=False,
    )
    """Send NOTIFY_MIN_BROKER_ID_CHANGE to brokers when a broker name's smallest id changes (5.x, S53)."""
    config_black_list: str = key_field(
        "configBlackList", str, "keys UpdateNamesrvConfig refuses, ';'-separated", default=DEFAULT_CONFIG_BLACKLIST
    )
    grpc_max_message_size: int = key_field(
        "grpcMaxMessageSize",
        _int_parser(4 * 1024 * 1024, 2**31 - 1),
        "largest gRPC request or reply, bytes (RocketMQ's 16 MiB frame limit by default)",
        default=16 * 1024 * 1024,
        restart=True,
    )
    register_body_max_inflated_size: int = key_field(
        "registerBodyMaxInflatedSize",
        _int_parser(1024 * 1024, 1024 * 1024 * 1024),
        "largest registration body after zlib decompression, bytes",
        default=64 * 1024 * 1024,
    )
    register_body_max_topics: int = key_field(
        "registerBodyMaxTopics", _int_parser(1, 10_000_000), "most topics in one registration body", default=200_000
    )
    register_body_max_filter_servers: int = key_field(
        "registerBodyMaxFilterServers",
        _int_parser(0, 100_000),
        "most filter-server addresses one registration may carry (each lookup of its topics returns them all)",
        default=64,
    )
    route_table_max_brokers: int = key_field(
        "routeTableMaxBrokers",
        _int_parser(1, 10_000_000),
        "broker addresses registered at once; a registration of one more is refused",
        default=10_000,
    )
    """Broker addresses registered at once, server-wide (``routeTableMaxBrokers``)."""
    route_table_max_topics: int = key_field(
        "routeTableMaxTopics",
        _int_parser(1, 100_000_000),
        "topics in the route table at once; a registration adding more is refused",
        default=1_000_000,
    )
    """Topics in the route table at once, server-wide (``routeTableMaxTopics``)."""
    route_cache_max_bytes: int = key_field(
        "routeCacheMaxBytes",
        _int_parser(0, 2**40),
        "bytes of encoded route answers each serving process keeps (0 = no bound); others are encoded when asked",
        default=256 * 1024 * 1024,
    )
    """Bytes of encoded route answers each serving process keeps (``routeCacheMaxBytes``; 0 = no
    bound): past it the answers asked for least recently are encoded again when next asked for."""
    server_worker_processes: int = key_field(
        "serverWorkerProcesses",
        _int_parser(0, 1024),
        "serving processes answering both ports (0 = the CPUs this process may use, cgroup quota included, at most 8)",
        default=0,
        restart=True,
    )
    """Serving processes (0 = the CPUs this process may use: ``os.sched_getaffinity`` and the cgroup
    CPU quota, at most 8, :func:`namesrv_grpc.runtime.policy.default_worker_processes`)."""
    serving_process_apply_timeout_millis: int = key_field(
        "servingProcessApplyTimeoutMillis",
        _int_parser(100, 600_000),
        "a serving process that applies no route-table change for this long is restarted (writes wait for it)",
        default=5_000,
    )
    """A serving process that applies no change of the route table for this long is restarted."""
    process_heartbeat_timeout_millis: int = key_field(
        "processHeartbeatTimeoutMillis",
        _int_parser(1_000, 600_000),
        "watchdog: a serving process silent this long is killed and started again; a route-table one: NOT_SERVING",
        default=10_000,
        restart=True,
    )
    """The watchdog (:mod:`namesrv_grpc.processes.watchdog`): ``namesrv`` asks every child each second
    whether its event loop turns. A serving process silent for this long is killed and started again
    (its listening sockets leave the ``SO_REUSEPORT`` group with it); while the route-table process is
    silent this long, every serving process answers health NOT_SERVING and ``/ready`` 503."""
    route_table_heartbeat_exit_millis: int = key_field(
        "routeTableHeartbeatExitMillis",
        _int_parser(1_000, 3_600_000),
        "a route-table process silent this long is killed and namesrv exits 1",
        default=60_000,
        restart=True,
    )
    """A route-table process silent for this long is killed and ``namesrv`` exits 1, as when it dies
    (the service manager starts it again)."""
    kv_config_max_value_size: int = key_field(
        "kvConfigMaxValueSize",
        _int_parser(1, 64 * 1024 * 1024),
        "largest KV config value, UTF-8 bytes",
        default=64 * 1024,
    )
    kv_config_max_total_size: int = key_field(
        "kvConfigMaxTotalSize",
        _int_parser(1024, 1024 * 1024 * 1024),
        "largest KV config table (namespaces + keys + values, UTF-8 bytes); keep it below what clients receive",
        default=2 * 1024 * 1024,
    )
    broker_session_hello_timeout_millis: int = key_field(
        "brokerSessionHelloTimeoutMillis",
        _int_parser(100, 600_000),
        "a broker session must send its hello within this many ms",
        default=10_000,
    )
    max_broker_sessions: int = key_field(
        "maxBrokerSessions", _int_parser(1, 1_000_000), "most broker sessions open at once", default=10_000
    )
    grpc_max_concurrent_streams: int = key_field(
        "grpcMaxConcurrentStreams",
        _int_parser(1, 1_000_000),
        "most calls in flight on one gRPC connection",
        default=100,
        restart=True,
    )
    """Calls in flight on one gRPC connection (HTTP/2 ``SETTINGS_MAX_CONCURRENT_STREAMS``). 100, what
    Envoy's edge-proxy guidance sets (nginx: 128): a rapid-reset flood's streams count until gRPC
    freed them, so one connection puts at most this many calls in gRPC's queue of calls not yet taken
    by Python (docs/limits.md, "Rapid reset")."""
    grpc_max_connection_idle_millis: int = key_field(
        "grpcMaxConnectionIdleMillis",
        _int_parser(1_000, 2**31 - 1),
        "a gRPC connection without calls for this many ms is closed (clients reconnect when needed)",
        default=600_000,
        restart=True,
    )
    grpc_max_connections: int = key_field(
        "grpcMaxConnections",
        _int_parser(0, 10_000_000),
        "gRPC connections open at once (0 = an eighth of the file-descriptor limit, at least 64)",
        default=0,
        restart=True,
    )
    grpc_max_concurrent_calls: int = key_field(
        "grpcMaxConcurrentCalls",
        _int_parser(0, 10_000_000),
        "gRPC calls in flight at once, all connections (0 = routeWatchMaxWatchers + maxBrokerSessions + 10000)",
        default=0,
        restart=True,
    )
    shutdown_grace_period_millis: int = key_field(
        "shutdownGracePeriodMillis", _int_parser(0, 600_000), "drain time on SIGTERM, ms", default=5_000
    )
    need_wait_for_service: bool = key_field(
        "needWaitForService",
        _parse_bool,
        "answer route lookups UNAVAILABLE during the warm-up after start",
        default=False,
    )
    wait_seconds_for_service: int = key_field(
        "waitSecondsForService", _int_parser(0, 3600), "warm-up length, seconds", default=45
    )
    snapshot_dir: str = key_field(
        "snapshotDir",
        _non_empty,
        "directory of route snapshots (Parquet)",
        default_factory=lambda: _home("namesrv", "snapshots"),
    )
    snapshot_interval: int = key_field(
        "snapshotInterval", _int_parser(0, 86_400), "seconds between route snapshots (0 = only on demand)", default=0
    )
    snapshot_retention_hours: int = key_field(
        "snapshotRetentionHours",
        _int_parser(0, 87_600),
        "keep snapshots this many hours (0 = all; never the newest)",
        default=168,
    )
    snapshot_namesrv_id: str = key_field(
        "snapshotNamesrvId", str, "identity in snapshots (empty = host:port)", default="", restart=True
    )
    route_watch_max_watchers: int = key_field(
        "routeWatchMaxWatchers",
        _int_parser(0, 1_000_000),
        "open WatchTopicRoutes streams at most (0 = none)",
        default=20_000,
    )
    """Open WatchTopicRoutes streams one NameServer serves at most (``routeWatchMaxWatchers``)."""
    route_watch_max_topics: int = key_field(
        "routeWatchMaxTopics",
        _int_parser(1, 100_000),
        "topics per WatchTopicRoutes / PickupTopicRoutes at most",
        default=1_000,
    )
    """Topics per WatchTopicRoutes or PickupTopicRoutes request at most (``routeWatchMaxTopics``)."""
    route_watch_max_topics_per_peer: int = key_field(
        "routeWatchMaxTopicsPerPeer",
        _int_parser(1, 100_000_000),
        "watched topics (over all its open watches) of one client IP address, per serving process",
        default=10_000,
    )
    """Watched topics (summed over the open watches) of one client IP address, per serving process."""
    route_watch_max_topics_total: int = key_field(
        "routeWatchMaxTopicsTotal",
        _int_parser(1, 100_000_000),
        "watched topics (over all open watches) of all clients, per serving process",
        default=200_000,
    )
    """Watched topics (summed over the open watches) of all clients, per serving process."""
    route_watch_max_unread_millis: int = key_field(
        "routeWatchMaxUnreadMillis",
        _int_parser(100, 3_600_000),
        "a watch whose last message has waited this long for its client to read it is ended, ms",
        default=30_000,
    )
    """A watch whose last message has waited this long for its client to read it is ended."""
    grpc_write_buffer_high_water_mark: int = key_field(
        "grpcWriteBufferHighWaterMark",
        _int_parser(64 * 1024, 2**31 - 1),
        "bytes of unread gRPC answers of one connection at which its new calls wait (then are refused)",
        default=16 * 1024 * 1024,
    )
    """Bytes of unread gRPC answers of one connection at which its new calls wait (then are refused)."""
    grpc_write_buffer_max_total_bytes: int = key_field(
        "grpcWriteBufferMaxTotalBytes",
        _int_parser(1024 * 1024, 2**40),
        "bytes of unread gRPC answers of all connections (per serving process) above which those "
        "holding more than their share have their calls wait (then refused)",
        default=256 * 1024 * 1024,
    )
    """Bytes of unread gRPC answers of all connections (per serving process) above which the
    connections holding more than their share have their calls held back."""
    grpc_write_buffer_wait_millis: int = key_field(
        "grpcWriteBufferWaitMillis",
        _int_parser(0, 600_000),
        "how long a gRPC call held back by unread answers waits before it is RESOURCE_EXHAUSTED, ms",
        default=10_000,
    )
    """How long a call held back by the unread-answer bounds waits before it is refused."""
    max_unbound_broker_sessions_per_peer: int = key_field(
        "maxUnboundBrokerSessionsPerPeer",
        _int_parser(1, 1_000_000),
        "broker sessions of one client IP address not bound to a registered broker, per serving process",
        default=128,
    )
    """Broker sessions of one client IP address not bound to a registered broker, per serving process."""
    max_unbound_broker_sessions: int = key_field(
        "maxUnboundBrokerSessions",
        _int_parser(1, 1_000_000),
        "broker sessions not bound to a registered broker, all clients, per serving process",
        default=1_000,
    )
    """Broker sessions not bound to a registered broker, all clients, per serving process."""
    grpc_max_stream_resets_per_second: int = key_field(
        "grpcMaxStreamResetsPerSecond",
        _int_parser(0, 10_000_000),
        "a gRPC connection whose client resets more streams a second is closed (HTTP/2 rapid reset; 0 = never)",
        default=1_000,
    )
    """A gRPC connection whose client resets more streams than this per second is closed (0 = never)."""
    server_channel_max_idle_time_seconds: int = key_field(
        "serverChannelMaxIdleTimeSeconds",
        _int_parser(1, 86_400),
        "close idle remoting connections, seconds",
        default=120,
    )
    """Remoting connections silent this long are closed (RocketMQ ``NettyServerConfig``)."""
    remoting_frame_max_length: int = key_field(
        "remotingFrameMaxLength",
        _int_parser(64 * 1024, 2**31 - 1),
        "largest remoting frame, bytes",
        default=16 * 1024 * 1024,
        restart=True,
    )
    """Largest remoting frame, bytes (RocketMQ's ``com.rocketmq.remoting.frameMaxLength``, 16 MiB)."""
    remoting_header_max_fields: int = key_field(
        "remotingHeaderMaxFields",
        _int_parser(64, 1_000_000),
        "extFields in one remoting header at most",
        default=1024,
        restart=True,
    )
    """extFields in one remoting header at most (``remotingHeaderMaxFields``)."""
    remoting_header_max_length: int = key_field(
        "remotingHeaderMaxLength",
        _int_parser(64 * 1024, 16 * 1024 * 1024),
        "bytes of one remoting header at most (PUT_KV_CONFIG's value travels in it)",
        default=1024 * 1024,
        restart=True,
    )
    """Bytes of one remoting header at most (``remotingHeaderMaxLength``), refused when its length arrives."""
    max_connections: int = key_field(
        "maxConnections",
        _int_parser(0, 10_000_000),
        "remoting connections open at once (0 = the file-descriptor limit minus a quarter, at least 256)",
        default=0,
        restart=True,
    )
    """Remoting connections open at once (``maxConnections``); 0 = from the file-descriptor limit."""
    remoting_max_connections_per_ip: int = key_field(
        "remotingMaxConnectionsPerIp",
        _int_parser(0, 10_000_000),
        "remoting connections from one IP address at once (0 = only maxConnections); its least recently "
        "active one makes room",
        default=10_000,
        restart=True,
    )
    """Remoting connections from one IP address at once, all serving processes together
    (``remotingMaxConnectionsPerIp``; 0 = no bound of its own)."""
    remoting_max_frames_per_read: int = key_field(
        "remotingMaxFramesPerRead",
        _int_parser(1, 100_000),
        "requests of one connection handled per loop turn",
        default=16,
        restart=True,
    )
    """Requests of one remoting connection handled per event-loop turn (``remotingMaxFramesPerRead``)."""
    remoting_max_frames_per_turn: int = key_field(
        "remotingMaxFramesPerTurn",
        _int_parser(1, 100_000),
        "requests of all remoting connections together handled per loop turn",
        default=64,
        restart=True,
    )
    """Requests of all remoting connections together handled per event-loop turn
    (``remotingMaxFramesPerTurn``)."""
    remoting_accepts_per_turn: int = key_field(
        "remotingAcceptsPerTurn",
        _int_parser(1, 1024),
        "remoting connections accepted per loop turn (the kernel's queue stays 1024)",
        default=4,
        restart=True,
    )
    """Remoting connections accepted per event-loop turn (``remotingAcceptsPerTurn``)."""
    remoting_max_requests_in_flight: int = key_field(
        "remotingMaxRequestsInFlight",
        _int_parser(1, 100_000),
        "requests of one remoting connection processed off the event loop at once; then it is not read",
        default=16,
        restart=True,
    )
    """Requests of one remoting connection processed off the loop at once (``remotingMaxRequestsInFlight``)."""
    write_buffer_high_water_mark: int = key_field(
        "writeBufferHighWaterMark",
        _zero_is(64 * 1024, 1024, 1024 * 1024 * 1024),
        "bytes of answers waiting on one remoting connection above which it is not read (0: Netty's 65536)",
        default=64 * 1024,
        restart=True,
    )
    """Answers waiting on one remoting connection above which it is not read (RocketMQ ``NettyServerConfig``)."""
    write_buffer_low_water_mark: int = key_field(
        "writeBufferLowWaterMark",
        _zero_is(32 * 1024, 1, 1024 * 1024 * 1024),
        "a paused remoting connection is read again when its waiting answers fall to this many bytes "
        "(0: Netty's 32768)",
        default=32 * 1024,
        restart=True,
    )
    """Reading resumes when the waiting answers fall to this (RocketMQ ``NettyServerConfig``)."""
    remoting_partial_frames_max_bytes: int = key_field(
        "remotingPartialFramesMaxBytes",
        _int_parser(1024 * 1024, 2**40),
        "bytes held in unfinished remoting frames, all connections together; the largest holders are closed",
        default=128 * 1024 * 1024,
        restart=True,
    )
    """Bytes held in unfinished remoting frames, all connections together (``remotingPartialFramesMaxBytes``)."""
    remoting_frame_read_timeout_millis: int = key_field(
        "remotingFrameReadTimeoutMillis",
        _int_parser(100, 3_600_000),
        "a remoting frame must be complete this many ms after its first bytes arrived",
        default=30_000,
        restart=True,
    )
    """A remoting frame must be complete this long after its first bytes (``remotingFrameReadTimeoutMillis``)."""
    peer_log_lines_per_kind: int = key_field(
        "peerLogLinesPerKind",
        _int_parser(1, 1_000_000),
        "log lines of one kind a peer can cause per 10 s",
        default=20,
        restart=True,
    )
    """Log lines of one kind a peer can cause per 10 s; the rest are counted (``peerLogLinesPerKind``)."""
    return_order_topic_config_to_broker: bool = key_field(
        "returnOrderTopicConfigToBroker", _parse_bool, "REGISTER_BROKER answers carry ORDER_TOPIC_CONFIG", default=True
    )
    """REGISTER_BROKER answers carry the ORDER_TOPIC_CONFIG KV table (RocketMQ 5.x, S11)."""
    tls_server_mode: str = key_field(
        "tls.server.mode",
        _choice("disabled", "permissive", "enforcing"),
        "TLS: disabled, permissive, enforcing",
        default="enforcing",
        security=True,
    )
    """``tls.server.mode`` (RocketMQ ``TlsSystemConfig``): disabled, permissive (remoting only), enforcing."""
    tls_server_cert_path: str = key_field(
        "tls.server.certPath", str.strip, "server certificate chain, PEM (TLS on)", default="", security=True
    )
    tls_server_key_path: str = key_field(
        "tls.server.keyPath", str.strip, "server private key, PEM, unencrypted", default="", security=True
    )
    tls_server_trust_cert_path: str = key_field(
        "tls.server.trustCertPath", str.strip, "CA certificates of client certificates", default="", security=True
    )
    tls_server_need_client_auth: str = key_field(
        "tls.server.need.client.auth",
        _choice("", "none", "optional", "require"),
        "client certificates",
        default="",
        security=True,
    )
    """none, optional or require; empty = require when a trust path is set, else none."""
    acl_file: str = key_field(
        "aclFile", str.strip, "accounts and what they may do, YAML (empty = open)", default="", security=True
    )
    audit_log_file: str = key_field(
        "auditLogFile", str.strip, "also write audit lines to this file", default="", security=True
    )
    audit_repeat_window_seconds: int = key_field(
        "auditRepeatWindowSeconds",
        _int_parser(0, 86_400),
        "identical audit events (RPC, result, identity, peer address, fields) within this many seconds write "
        "one line, then a summary with their count (0 = every one)",
        default=60,
        security=True,
    )
    """Identical audit events within this long write one line and a summary (``auditRepeatWindowSeconds``; 0 = off)."""
    audit_log_lines_per_second: int = key_field(
        "auditLogLinesPerSecond",
        _int_parser(1, 1_000_000),
        "audit lines written per second at most, all serving processes together; the rest are counted and summarised",
        default=100,
        security=True,
    )
    """Audit lines the NameServer writes per second at most, divided among its serving processes
    (``auditLogLinesPerSecond``): the audit trail grows as fast on 8 cores as on 2."""
    health_port: int = key_field(
        "healthPort", _int_parser(0, 65535), "plaintext grpc.health.v1-only port (0 = off)", default=0, security=True
    )
    """A plaintext port serving only ``grpc.health.v1`` (Kubernetes probes with TLS on); 0 = off."""
    enable_all_topic_list: bool = key_field(
        "enableAllTopicList", _parse_bool, "answer the list of every topic (false: 'disable', S41)", default=True
    )
    """GET_ALL_TOPIC_LIST_FROM_NAMESERVER / GetAllTopicList answer (RocketMQ 5.x, S41); read per request."""
    enable_topic_list: bool = key_field(
        "enableTopicList",
        _parse_bool,
        "answer topic lists by cluster and unit flags (false: 'disable', S41)",
        default=True,
    )
    """Topic lists by cluster and by unit flags answer (RocketMQ 5.x, S41); read per request."""
    enable_controller_in_namesrv: bool = key_field(
        "enableControllerInNamesrv",
        _only_false(CONTROLLER_REFUSAL),
        "only false: no embedded controller",
        default=False,
    )
    """RocketMQ 5.x's embedded controller: not part of this NameServer, only false is accepted."""
    cluster_test: bool = key_field(
        "clusterTest", _only_false(CLUSTER_TEST_REFUSAL), "only false: no cluster-test mode", default=False
    )
    """RocketMQ's ``ClusterTestRequestProcessor``: not part of this NameServer, only false is accepted."""
    rocketmq_home: str = key_field("rocketmqHome", str.strip, NO_OP_NOTE, default="")
    product_env_name: str = key_field("productEnvName", str.strip, NO_OP_NOTE, default="center")
    client_request_thread_pool_nums: int = key_field(
        "clientRequestThreadPoolNums", _int_parser(1, 100_000), NO_OP_NOTE, default=8
    )
    default_thread_pool_nums: int = key_field("defaultThreadPoolNums", _int_parser(1, 100_000), NO_OP_NOTE, default=16)
    client_request_thread_pool_queue_capacity: int = key_field(
        "clientRequestThreadPoolQueueCapacity", _int_parser(1, 2**31 - 1), NO_OP_NOTE, default=50_000
    )
    default_thread_pool_queue_capacity: int = key_field(
        "defaultThreadPoolQueueCapacity", _int_parser(1, 2**31 - 1), NO_OP_NOTE, default=10_000
    )
    un_register_broker_queue_capacity: int = key_field(
        "unRegisterBrokerQueueCapacity", _int_parser(1, 2**31 - 1), NO_OP_NOTE, default=3_000
    )
    """RocketMQ 5.x ``NamesrvConfig`` keys accepted so a Java NameServer's file starts this one
    unchanged, without effect here (docs/rocketmq-5x.md says why): requests are served by one event
    loop and worker threads, not by Java thread pools with bounded queues."""
    java_only: dict[str, str] = field(default_factory=dict)
    """Keys of :data:`JAVA_ONLY_KEYS` given (``-c FILE``, ``UpdateNamesrvConfig``) -> their text as
    given: no effect here; kept, printed and persisted as RocketMQ's ``Configuration`` keeps the keys
    of its file. Replaced, never changed in place."""

    def to_properties(self) -> dict[str, str]:
        """The configuration as RocketMQ key -> text, sorted by key (``-p``, ``GetNamesrvConfig``):
        every key of :data:`KEYS`, and the keys of :data:`JAVA_ONLY_KEYS` that were given."""
        result = dict(self.java_only)
        for key in KEYS:
            value = getattr(self, KEYS[key].attribute)
            result[key] = str(value).lower() if isinstance(value, bool) else str(value)
        return dict(sorted(result.items()))

    def blacklisted_keys(self) -> set[str]:
        """Keys of ``configBlackList`` (``;``-separated), always including the three defaults and
        :data:`ALWAYS_REFUSED`."""
        keys = {k.strip() for k in self.config_black_list.split(";") if k.strip()}
        return keys | set(DEFAULT_CONFIG_BLACKLIST.split(";")) | ALWAYS_REFUSED


KEYS: dict[str, _Key] = {
    spec.name: dataclasses.replace(spec, attribute=item.name)
    for item in dataclasses.fields(NamesrvConfig)
    if (spec := item.metadata.get("key")) is not None
}
"""Every configuration key used here (and every key of RocketMQ 5.x's ``NamesrvConfig``), in RocketMQ
spelling, in the order of :class:`NamesrvConfig`'s fields, where each is declared (:func:`key_field`)."""

SECURITY_KEYS = frozenset(name for name, spec in KEYS.items() if spec.security)
"""Transport security, ACL and audit settings: read at start only, never changed by a request (a
caller must not be able to thin out the audit trail of what it does)."""

ALWAYS_REFUSED = frozenset({"snapshotDir"}) | SECURITY_KEYS
"""Keys ``UpdateNamesrvConfig`` refuses whatever ``configBlackList`` says: a caller must not choose
where the server writes files (as RocketMQ blacklists ``kvConfigPath``), nor which certificates,
accounts or audit file it uses."""

RESTART_KEYS = frozenset(name for name, spec in KEYS.items() if spec.restart)
"""Keys that ``UpdateNamesrvConfig`` stores but that take effect only at the next start."""


def _java_int(bits: int) -> Callable[[str], str]:
    """Java's ``Integer.parseInt`` (``bits`` 32) or ``Long.parseLong`` (64): an optional sign and
    ASCII digits, in range. Returns the text (stripped); raises ValueError."""
    low, high = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1

    def parse(text: str) -> str:
        value = text.strip()
        if not re.fullmatch(r"[+-]?[0-9]+", value) or not low <= int(value) <= high:
            raise ValueError(
                f"must be a whole number from {low} to {high} (Java's {'int' if bits == 32 else 'long'}), got {text!r}"
            )
        return value

    return parse


def _java_bool(text: str) -> str:
    """``true`` or ``false`` in any case (Java's ``Boolean.parseBoolean`` reads anything else as false:
    refused here, as for every boolean key), returned in lower case."""
    return str(_parse_bool(text)).lower()


@dataclass(frozen=True, slots=True)
class JavaOnlyKey:
    """A key of the Java NameServer's configuration that has no use here."""

    java_class: str
    """Where RocketMQ declares it: ``NettyServerConfig`` or ``NettyClientConfig``."""
    check: Callable[[str], str]
    """Checks the text as Java reads it (int, long, boolean or String); returns the text kept (stripped,
    a boolean in lower case); raises ValueError."""
    why: str
    """Why it has no effect here, or what does its job (docs/configuration.md shows it)."""


_INT, _LONG = _java_int(32), _java_int(64)
_LOOP = "no Netty event-loop groups or executor threads here: one asyncio event loop and worker threads"
_SOCKET = "the kernel's socket buffer sizes are used (Netty's 0 = not set)"
_CLIENT = "the Java NameServer's connections to brokers; here only notifyMinBrokerIdChanged makes such connections"
_NO_SEMAPHORE = "no per-connection semaphores: remotingMaxRequestsInFlight bounds a connection's requests"

JAVA_ONLY_KEYS: dict[str, JavaOnlyKey] = {
    # NettyServerConfig (RocketMQ 5.5.0), beyond listenPort, bindAddress, serverChannelMaxIdleTimeSeconds
    # and the water marks, which are KEYS
    "serverWorkerThreads": JavaOnlyKey("NettyServerConfig", _INT, _LOOP),
    "serverCallbackExecutorThreads": JavaOnlyKey("NettyServerConfig", _INT, _LOOP),
    "serverSelectorThreads": JavaOnlyKey("NettyServerConfig", _INT, _LOOP),
    "serverNettyWorkerGroupEnable": JavaOnlyKey("NettyServerConfig", _java_bool, _LOOP),
    "useEpollNativeSelector": JavaOnlyKey("NettyServerConfig", _java_bool, "the event loop uses epoll on Linux anyway"),
    "serverOnewaySemaphoreValue": JavaOnlyKey("NettyServerConfig", _INT, _NO_SEMAPHORE),
    "serverAsyncSemaphoreValue": JavaOnlyKey("NettyServerConfig", _INT, _NO_SEMAPHORE),
    "serverSocketSndBufSize": JavaOnlyKey("NettyServerConfig", _INT, _SOCKET),
    "serverSocketRcvBufSize": JavaOnlyKey("NettyServerConfig", _INT, _SOCKET),
    "serverSocketBacklog": JavaOnlyKey(
        "NettyServerConfig", _INT, "the remoting port's accept queue is 1024, Java's default"
    ),
    "serverPooledByteBufAllocatorEnable": JavaOnlyKey("NettyServerConfig", _java_bool, "no Netty buffers here"),
    "enableShutdownGracefully": JavaOnlyKey(
        "NettyServerConfig", _java_bool, "SIGTERM always drains in-flight calls (shutdownGracePeriodMillis)"
    ),
    "shutdownWaitTimeSeconds": JavaOnlyKey("NettyServerConfig", _INT, "see shutdownGracePeriodMillis"),
    # NettyClientConfig (RocketMQ 5.5.0): NamesrvStartup reads the file into it too
    "clientWorkerThreads": JavaOnlyKey("NettyClientConfig", _INT, _CLIENT),
    "clientCallbackExecutorThreads": JavaOnlyKey("NettyClientConfig", _INT, _CLIENT),
    "clientOnewaySemaphoreValue": JavaOnlyKey("NettyClientConfig", _INT, _CLIENT),
    "clientAsyncSemaphoreValue": JavaOnlyKey("NettyClientConfig", _INT, _CLIENT),
    "connectTimeoutMillis": JavaOnlyKey("NettyClientConfig", _INT, _CLIENT),
    "channelNotActiveInterval": JavaOnlyKey("NettyClientConfig", _LONG, _CLIENT),
    "clientChannelMaxIdleTimeSeconds": JavaOnlyKey("NettyClientConfig", _INT, _CLIENT),
    "clientSocketSndBufSize": JavaOnlyKey("NettyClientConfig", _INT, _CLIENT),
    "clientSocketRcvBufSize": JavaOnlyKey("NettyClientConfig", _INT, _CLIENT),
    "clientPooledByteBufAllocatorEnable": JavaOnlyKey("NettyClientConfig", _java_bool, _CLIENT),
    "clientCloseSocketIfTimeout": JavaOnlyKey("NettyClientConfig", _java_bool, _CLIENT),
    "useTLS": JavaOnlyKey("NettyClientConfig", _java_bool, _CLIENT),
    "socksProxyConfig": JavaOnlyKey("NettyClientConfig", str.strip, _CLIENT),
    "disableCallbackExecutor": JavaOnlyKey("NettyClientConfig", _java_bool, _CLIENT),
    "disableNettyWorkerGroup": JavaOnlyKey("NettyClientConfig", _java_bool, _CLIENT),
    "maxReconnectIntervalTimeSeconds": JavaOnlyKey("NettyClientConfig", _LONG, _CLIENT),
    "enableReconnectForGoAway": JavaOnlyKey("NettyClientConfig", _java_bool, _CLIENT),
    "scanAvailableNameSrv": JavaOnlyKey("NettyClientConfig", _java_bool, _CLIENT),
    "isScanAvailableNameSrv": JavaOnlyKey(
        "NettyClientConfig",
        _java_bool,
        "the field name Java's namesrv -p prints for scanAvailableNameSrv (Java reads no key of this name)",
    ),
}
"""The keys of the Java NameServer's configuration that this NameServer has no use for, with the Java
class each belongs to. RocketMQ 5.5.0's ``NamesrvStartup`` reads ``-c FILE`` into ``NamesrvConfig``,
``NettyServerConfig`` and ``NettyClientConfig`` (``MixAll.properties2Object``: a key per public
setter of an int, long, boolean or String; ``ControllerConfig`` only with
``enableControllerInNamesrv=true``, refused here). Every ``NamesrvConfig`` key is in :data:`KEYS`;
these are the Netty keys that are not (RocketMQ 4.9.7's are a subset). Accepted from ``-c FILE``
and ``UpdateNamesrvConfig``, checked as Java reads them, kept as given in
:attr:`NamesrvConfig.java_only` and shown and persisted with the others: they change nothing."""


MAX_VALUE_LENGTH = 4096
"""Longest configuration value accepted (paths, ``configBlackList``)."""

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _check_text(text: str) -> None:
    if len(text) > MAX_VALUE_LENGTH:
        raise ValueError(f"is {len(text)} characters, more than {MAX_VALUE_LENGTH}")
    match = _CONTROL.search(text)
    if match is not None:
        raise ValueError(f"contains the control character {match.group()!r} at {match.start()}")


def nearest_key(key: str) -> str | None:
    """The known key (:data:`KEYS` or :data:`JAVA_ONLY_KEYS`) closest to ``key`` by ``difflib``
    (case ignored), or None when none is close (ratio below 0.6)."""
    known = {name.lower(): name for name in (*KEYS, *JAVA_ONLY_KEYS)}
    matches = difflib.get_close_matches(key.lower(), list(known), n=1)
    return known[matches[0]] if matches else None


def _shown(key: str) -> str:
    return key if len(key) <= 64 and not _CONTROL.search(key) else f"{key[:64]!r}"


def _hint(key: str) -> str:
    near = nearest_key(key[:256])
    return f"did you mean {near}?" if near else "no known key is close"


class UnknownKeyError(ConfigError):
    """Keys that are neither in :data:`KEYS` nor in :data:`JAVA_ONLY_KEYS`; the message names each
    with the nearest known key (``listenPrt: unknown key (did you mean listenPort?)``). ``keys``:
    the unknown keys as given."""

    def __init__(self, source: str, keys: list[str]) -> None:
        self.keys = keys
        if len(keys) == 1:
            key, problem = _shown(keys[0]), f"unknown key ({_hint(keys[0])})"
        else:
            key = ", ".join(_shown(k) for k in keys)
            problem = "unknown keys (" + "; ".join(f"{_shown(k)}: {_hint(k)}" for k in keys) + ")"
        super().__init__(source, key, f"{problem}; every key: docs/configuration.md")


def apply_properties(
    config: NamesrvConfig, properties: Mapping[str, str], source: str, *, strict: bool | Literal["typos"]
) -> tuple[NamesrvConfig, list[str]]:
    """Return a new config with ``properties`` applied, and warnings for unknown keys.

    Keys of :data:`JAVA_ONLY_KEYS` are checked as Java reads them and kept as given in
    :attr:`NamesrvConfig.java_only`. With ``strict`` (``UpdateNamesrvConfig``) an unknown key raises
    :class:`UnknownKeyError` naming every unknown key and the nearest known one; with ``strict``
    ``"typos"`` (``namesrv -c FILE`` without ``--allow-unknown-keys``) only the unknown keys close
    to a known one do (a typo such as ``listenPrt``: it would silently leave the default in force),
    and the others are warnings, as CONTRACT.md has it ("unknown keys are warned about, not
    fatal"); without ``strict`` every unknown key is a warning (``FILE: KEY: unknown key (did you
    mean ...), ignored``). Raises ConfigError(source, key,
    problem) for a bad value (including one longer than :data:`MAX_VALUE_LENGTH` or with a control
    character such as a newline); ``config`` is never changed. An unknown key is quoted shortened
    and escaped.
    """
    changes: dict[str, object] = {}
    java_only: dict[str, str] = {}
    unknown: list[str] = []
    for key, text in properties.items():
        spec = KEYS.get(key)
        try:
            if spec is not None:
                _check_text(text)
                changes[spec.attribute] = spec.parse(text)
            elif key in JAVA_ONLY_KEYS:
                _check_text(text)
                java_only[key] = JAVA_ONLY_KEYS[key].check(text)
            else:
                unknown.append(key)
        except ValueError as exc:
            raise ConfigError(source, key, str(exc)) from None
    typos = [key for key in unknown if nearest_key(key[:256])] if strict == "typos" else unknown
    if typos and strict:
        raise UnknownKeyError(source, typos)
    warnings = [f"{source}: {_shown(key)}: unknown key ({_hint(key)}), ignored" for key in unknown]
    if java_only:
        changes["java_only"] = {**config.java_only, **java_only}
    return dataclasses.replace(config, **changes), warnings  # type: ignore[arg-type]


def properties_text(values: Mapping[str, str]) -> str:
    """``values`` as Java properties text, written by ``jproperties`` (separators, ``#``, ``\\``,
    leading spaces and line breaks escaped, so every value reads back exactly and no value can add a
    key)."""
    properties = jproperties.Properties()
    for key, value in values.items():
        properties[key] = value
    out = io.BytesIO()
    properties.store(out, encoding="utf-8", timestamp=False)
    return out.getvalue().decode("utf-8")


def check_security_settings(config: NamesrvConfig, source: str) -> None:
    """Settings that only make sense together: a certificate needs its key (and the reverse), a
    trust path needs a certificate. Raises ConfigError."""
    cert, key = config.tls_server_cert_path, config.tls_server_key_path
    if bool(cert) != bool(key):
        missing = "tls.server.keyPath (--tls-key-file)" if cert else "tls.server.certPath (--tls-cert-file)"
        raise ConfigError(source, missing, "TLS needs both a certificate and its private key")
    if config.tls_server_trust_cert_path and not cert and config.tls_server_mode != "disabled":
        raise ConfigError(
            source, "tls.server.trustCertPath (--tls-client-ca-file)", "client certificates need TLS: set a certificate"
        )


def persisted_properties(config: NamesrvConfig) -> dict[str, str]:
    """What ``UpdateNamesrvConfig`` writes to ``configStorePath`` (S26): the keys whose value differs
    from the default (the keys of the Java NameServer that have no effect here included, as given),
    sorted. The Java NameServer writes every key of its config objects instead
    (``Configuration.persist``); a file of the differences keeps what an operator chose apart from
    the defaults of the version that wrote it, so that a later version's new defaults apply."""
    defaults = NamesrvConfig().to_properties()
    return {key: value for key, value in config.to_properties().items() if defaults.get(key) != value}


def persist_properties(config: NamesrvConfig, path: Path) -> None:
    """Write :func:`persisted_properties` of the configuration as a Java properties file, atomically
    (S26 ``configStorePath``). Raises OSError."""
    write_atomically(path, properties_text(persisted_properties(config)))
