"""The broker's identity and registration settings, read from its own ``broker.conf`` (S37).

Keys and defaults are RocketMQ's ``BrokerConfig`` / ``NettyServerConfig`` / ``MessageStoreConfig``.
Rules from RocketMQ's ``BrokerStartup``: a master role (``ASYNC_MASTER``/``SYNC_MASTER``) forces
broker id 0; a ``SLAVE`` needs an id > 0. Every problem is a
:class:`~namesrv_grpc.runtime.properties.ConfigError` naming the file, the key and what is wrong.

Settled where RocketMQ is lenient: a value that still holds a ``${...}`` placeholder is an error for
every key the agent uses (RocketMQ would fail later, or register a broker literally named
``${brokerName}``); booleans must be ``true`` or ``false`` (Java reads any other text as false).
"""

from __future__ import annotations

import ipaddress
import logging
import os
import re
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import psutil

from namesrv_grpc.core.model import PERM_READ, PERM_WRITE
from namesrv_grpc.core.validation import (
    MAX_HEARTBEAT_TIMEOUT_MILLIS,
    MIN_HEARTBEAT_TIMEOUT_MILLIS,
    is_valid_name,
    parse_host_port,
    quote,
)
from namesrv_grpc.runtime.properties import ConfigError

log = logging.getLogger(__name__)

PLACEHOLDER = re.compile(r"\$\{[^}]*\}?")
MASTER_ROLES = ("ASYNC_MASTER", "SYNC_MASTER")
ROLES = (*MASTER_ROLES, "SLAVE")


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    """Everything the agent needs from broker.conf. Times in ms."""

    broker_cluster_name: str
    broker_name: str
    broker_id: int
    broker_ip1: str
    broker_ip2: str
    listen_port: int
    ha_listen_port: int
    namesrv_addrs: tuple[str, ...]
    broker_role: str = "ASYNC_MASTER"
    register_name_server_period: int = 30_000
    force_register: bool = True
    compressed_register: bool = False
    register_broker_timeout_mills: int = 24_000
    broker_permission: int = PERM_READ | PERM_WRITE
    auto_create_topic_enable: bool = True
    default_topic_queue_nums: int = 8
    cluster_topic_enable: bool = True
    broker_topic_enable: bool = True
    enable_slave_acting_master: bool = False
    zone_name: str = ""
    """The zone sent with every registration (S44): ``ROCKETMQ_ZONE`` from the environment, as the
    Java broker reads it; broker.conf's ``zoneName`` only as a fallback (no Java broker key)."""
    store_path_root_dir: str = str(Path.home() / "store")
    heartbeat_timeout_millis: int = 0
    namesrv_addr_source: str = "namesrvAddr"
    """Where ``namesrv_addrs`` came from: ``--namesrv-addr``, ``grpcNamesrvAddr``, ``namesrvAddr`` (in
    broker.conf) or ``NAMESRV_ADDR`` (the environment); the remoting-port hint names it."""

    @property
    def broker_addr(self) -> str:
        """``brokerIP1:listenPort``, the address clients use."""
        return f"{_bracket(self.broker_ip1)}:{self.listen_port}"

    @property
    def ha_server_addr(self) -> str:
        """``brokerIP2:haListenPort``, the replication address."""
        return f"{_bracket(self.broker_ip2)}:{self.ha_listen_port}"

    @property
    def default_topics_json(self) -> Path:
        """``${storePathRootDir}/config/topics.json``, where the broker keeps its topics."""
        return Path(self.store_path_root_dir).expanduser() / "config" / "topics.json"


def _bracket(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def interface_addresses() -> list[tuple[str, str]]:
    """``(interface, address)`` of every IP address of this host's interfaces, in the order the OS
    lists them, leaving out the interfaces RocketMQ's ``NetworkUtil.getLocalAddress`` skips: down,
    point-to-point, Linux bridges (``/sys/class/net/NAME/bridge`` exists) and virtual sub-interfaces
    (``eth0:1``). Read with psutil; sends nothing."""
    stats = psutil.net_if_stats()
    found: list[tuple[str, str]] = []
    for name, addrs in psutil.net_if_addrs().items():
        stat = stats.get(name)
        if stat is None or not stat.isup or "pointopoint" in stat.flags.split(","):
            continue
        if ":" in name or Path("/sys/class/net", name, "bridge").exists():
            continue
        found.extend((name, a.address) for a in addrs if a.family in (socket.AF_INET, socket.AF_INET6))
    return found


def pick_local_address(addresses: Sequence[str]) -> str | None:
    """RocketMQ ``NetworkUtil.getLocalAddress`` over the host's addresses (in interface order):
    loopback addresses never count; IPv4 is preferred: the first one not starting with ``127.0``,
    ``192.168`` or ``0.``, else the last IPv4 one; without IPv4 the first IPv6 one (link-local ones,
    ``fe80::/10``, are left out here: no other host could reach them). None when nothing is left."""
    v4: list[str] = []
    v6: list[str] = []
    for text in addresses:
        try:
            ip = ipaddress.ip_address(text.split("%", 1)[0])
        except ValueError:
            continue
        if ip.is_loopback:
            continue
        if ip.version == 4:
            v4.append(str(ip))
        elif not ip.is_link_local:
            v6.append(str(ip))
    for ip4 in v4:
        if not ip4.startswith(("127.0", "192.168", "0.")):
            return ip4
    if v4:
        return v4[-1]
    return v6[0] if v6 else None


def local_address() -> str:
    """``brokerIP1`` when broker.conf has none, as RocketMQ computes it (``NetworkUtil.getLocalAddress``,
    BrokerConfig's default): from the network interfaces (:func:`pick_local_address`), not from the
    host name, which often resolves to 127.0.1.1 or 127.0.0.1. Falls back to the host name's
    address (Java's ``InetAddress.getLocalHost()``), then to 127.0.0.1."""
    try:
        picked = pick_local_address([address for _, address in interface_addresses()])
    except OSError as exc:
        log.warning("cannot list the network interfaces (%s); using the host name's address", exc)
        picked = None
    if picked is not None:
        return picked
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"


def loopback_warning(config: BrokerConfig) -> str | None:
    """A warning when the broker registers a loopback address (brokerIP1) with a NameServer that is
    not on this host (not a loopback address nor ``localhost``): clients elsewhere cannot reach it."""
    try:
        if not ipaddress.ip_address(config.broker_ip1.strip("[]")).is_loopback:
            return None
    except ValueError:
        return None
    for addr in config.namesrv_addrs:
        host = parse_host_port(addr)[0].strip("[]")
        try:
            remote = not ipaddress.ip_address(host).is_loopback
        except ValueError:
            remote = host.lower() != "localhost"
        if remote:
            return (
                f"brokerIP1 is {config.broker_ip1} (loopback) but NameServer {addr} is not on this host: clients "
                "on other hosts will get an address they cannot reach; set brokerIP1 in broker.conf"
            )
    return None


def parse_namesrv_addr(text: str, source: str, key: str = "namesrvAddr") -> tuple[str, ...]:
    """Split ``host:port;host:port`` (white space and empty items ignored); raise ConfigError for an
    item that is not host:port with a port 1..65535, for commas (RocketMQ separates NameServer
    addresses with ``;``), or when nothing is left."""
    addrs = []
    for item in text.split(";"):
        item = item.strip()
        if not item:
            continue
        if "," in item:
            raise ConfigError(
                source, key, f"separate NameServer addresses with ';', not ',': {item.replace(',', ';')!r}"
            )
        try:
            parse_host_port(item)
        except ValueError as exc:
            raise ConfigError(source, key, str(exc)) from None
        if item not in addrs:
            addrs.append(item)
    if not addrs:
        raise ConfigError(source, key, "names no NameServer (expected host:port;host:port)")
    return tuple(addrs)


class _Reader:
    """Typed access to properties with errors that name file and key."""

    def __init__(self, properties: Mapping[str, str], source: str) -> None:
        self.properties = properties
        self.source = source

    def text(self, key: str, default: str | None = None) -> str | None:
        value = self.properties.get(key)
        if value is None or value == "":
            return default
        placeholder = PLACEHOLDER.search(value)
        if placeholder:
            raise ConfigError(self.source, key, f"unresolved placeholder {placeholder.group(0)!r}")
        return value

    def integer(self, key: str, default: int, low: int, high: int) -> int:
        value = self.text(key)
        if value is None:
            return default
        if not re.fullmatch(r"[+-]?[0-9]{1,19}", value):  # what Java's Integer/Long.parseLong accept
            raise ConfigError(
                self.source,
                key,
                f"{value!r} is not a whole number (the Java broker would ignore it without a word and use {default})",
            )
        number = int(value)
        if not low <= number <= high:
            raise ConfigError(self.source, key, f"{number} is out of range {low}..{high}")
        return number

    def boolean(self, key: str, default: bool) -> bool:
        value = self.text(key)
        if value is None:
            return default
        if value.lower() not in ("true", "false"):
            raise ConfigError(
                self.source,
                key,
                f"{value!r} is not true or false (the Java broker's Boolean.parseBoolean reads it as false)",
            )
        return value.lower() == "true"


JAVA_ENUM_KEYS: Final = {
    "brokerRole": (ROLES, "ASYNC_MASTER"),
    "flushDiskType": (("SYNC_FLUSH", "ASYNC_FLUSH"), "ASYNC_FLUSH"),
    "defaultMessageRequestMode": (("PULL", "POP"), "PULL"),
}
"""broker.conf keys whose Java setter takes a String and calls ``Enum.valueOf`` (exact, case-sensitive
names): ``MessageStoreConfig.setBrokerRole`` / ``setFlushDiskType``, ``BrokerConfig
.setDefaultMessageRequestMode``, with each enum's names and the default the Java broker keeps when
``valueOf`` throws (``MixAll.properties2Object`` swallows the error). ``metricsExporterType`` is left
out: its setter is overloaded for int and String, and which one Java calls depends on method order."""


def check_java_enums(properties: Mapping[str, str], source: str) -> None:
    """Refuse (ConfigError) an enum value the Java broker beside the agent cannot parse: it would
    ignore it without a word and keep its default (a lower-case ``slave`` starts a master)."""
    for key, (names, default) in JAVA_ENUM_KEYS.items():
        value = properties.get(key)
        if value is None or value == "" or value in names:
            continue
        if key == "brokerRole" and value.upper() == "SLAVE":
            silently = "a master, not the slave it asks for"
        elif value.upper() in names and value.upper() != default:
            silently = f"not {value.upper()}"
        else:
            silently = "the default"
        raise ConfigError(
            source,
            key,
            f"{value!r} is not one of {', '.join(names)} (exact, upper case): the Java broker cannot parse it and "
            f"would silently run with {key}={default} ({silently})",
        )


def load_broker_config(
    properties: Mapping[str, str],
    source: str,
    *,
    namesrv_addr_override: str | None = None,
    environ: Mapping[str, str] = os.environ,
    warnings: list[str] | None = None,
) -> BrokerConfig:
    """Build a BrokerConfig from broker.conf properties (raises ConfigError).

    The NameServer addresses come from ``namesrv_addr_override`` (``--namesrv-addr``), else the file's
    ``grpcNamesrvAddr`` (our key: the gRPC ports), else its ``namesrvAddr``, else the ``NAMESRV_ADDR``
    environment variable, as RocketMQ does. Warnings (settings RocketMQ
    overrides) are appended to ``warnings`` when given, else logged.
    """
    r = _Reader(properties, source)
    check_java_enums(properties, source)
    broker_role = r.text("brokerRole", "ASYNC_MASTER") or "ASYNC_MASTER"
    broker_id = r.integer("brokerId", 0, 0, 2**31 - 1)
    dledger = r.boolean("enableDLegerCommitLog", False)
    if not dledger:
        if broker_role in MASTER_ROLES and broker_id != 0:
            message = f"{source}: brokerId: {broker_id} ignored, a {broker_role} always registers as id 0"
            if warnings is None:
                log.warning("%s", message)
            else:
                warnings.append(message)
            broker_id = 0
        elif broker_role == "SLAVE" and broker_id <= 0:
            raise ConfigError(source, "brokerId", "a SLAVE needs a brokerId greater than 0")

    namesrv_addrs, addr_source = _namesrv_addrs(r, namesrv_addr_override, environ)

    listen_port = r.integer("listenPort", 10911, 1, 65535)
    broker_ip1 = r.text("brokerIP1") or local_address()
    broker_ip2 = r.text("brokerIP2") or broker_ip1
    for key, host in (("brokerIP1", broker_ip1), ("brokerIP2", broker_ip2)):
        if any(c.isspace() for c in host) or ";" in host or "/" in host:
            raise ConfigError(source, key, f"{host!r} is not a host name or IP address")
    broker_permission = r.integer("brokerPermission", PERM_READ | PERM_WRITE, 0, 15)
    period = r.integer("registerNameServerPeriod", 30_000, 1, 2**31 - 1)
    return BrokerConfig(
        broker_cluster_name=_name(r, "brokerClusterName", "DefaultCluster"),
        broker_name=_name(r, "brokerName", socket.gethostname()),
        broker_id=broker_id,
        broker_ip1=broker_ip1,
        broker_ip2=broker_ip2,
        listen_port=listen_port,
        ha_listen_port=r.integer("haListenPort", listen_port + 1 if listen_port < 65535 else 65535, 1, 65535),
        namesrv_addrs=namesrv_addrs,
        namesrv_addr_source=addr_source,
        broker_role=broker_role,
        register_name_server_period=period,
        force_register=r.boolean("forceRegister", True),
        compressed_register=r.boolean("compressedRegister", False),
        register_broker_timeout_mills=r.integer("registerBrokerTimeoutMills", 24_000, 1, 600_000),
        broker_permission=broker_permission,
        auto_create_topic_enable=r.boolean("autoCreateTopicEnable", True),
        default_topic_queue_nums=r.integer("defaultTopicQueueNums", 8, 0, 65535),
        cluster_topic_enable=r.boolean("clusterTopicEnable", True),
        broker_topic_enable=r.boolean("brokerTopicEnable", True),
        enable_slave_acting_master=r.boolean("enableSlaveActingMaster", False),
        zone_name=_zone_name(r, environ, warnings),
        # Only needed without --topics-json: a placeholder here is reported when it is used.
        store_path_root_dir=properties.get("storePathRootDir") or str(Path.home() / "store"),
        heartbeat_timeout_millis=_heartbeat_timeout(r),
    )


def _namesrv_addrs(
    r: _Reader, namesrv_addr_override: str | None, environ: Mapping[str, str]
) -> tuple[tuple[str, ...], str]:
    """``(host:port addresses, where they came from)``: ``--namesrv-addr``, else ``grpcNamesrvAddr``,
    else ``namesrvAddr``, else ``NAMESRV_ADDR`` (the key or flag names the source). Raises ConfigError."""
    source = r.source
    if namesrv_addr_override is not None:
        return parse_namesrv_addr(namesrv_addr_override, "--namesrv-addr", "namesrvAddr"), "--namesrv-addr"
    if r.text("grpcNamesrvAddr") is not None:
        # The NameServers' gRPC ports; namesrvAddr keeps naming their remoting ports for the Java broker.
        return parse_namesrv_addr(r.text("grpcNamesrvAddr") or "", source, "grpcNamesrvAddr"), "grpcNamesrvAddr"
    if r.text("namesrvAddr") is not None:
        return parse_namesrv_addr(r.text("namesrvAddr") or "", source), "namesrvAddr"
    if environ.get("NAMESRV_ADDR"):
        return parse_namesrv_addr(environ["NAMESRV_ADDR"], "environment NAMESRV_ADDR", "NAMESRV_ADDR"), "NAMESRV_ADDR"
    raise ConfigError(source, "namesrvAddr", "not set: set it in the file, with --namesrv-addr or NAMESRV_ADDR")


ZONE_ENV = "ROCKETMQ_ZONE"
"""Where a Java broker takes its zone from (RocketMQ ``MixAll.ROCKETMQ_ZONE_ENV``; or the system
property ``rocketmq.zone``), sent as the ext field ``__ZONE_NAME`` by ``DynamicalExtFieldRPCHook``."""


def _zone_name(r: _Reader, environ: Mapping[str, str], warnings: list[str] | None) -> str:
    """S44: ``ROCKETMQ_ZONE`` (not blank) wins; else broker.conf's ``zoneName``, with a warning that a
    Java broker ignores that key (its registrations would carry no zone, or another one)."""
    env_zone = (environ.get(ZONE_ENV) or "").strip()
    conf_zone = _optional_name(r, "zoneName")
    if env_zone and not is_valid_name(env_zone):
        raise ConfigError(
            f"environment {ZONE_ENV}", ZONE_ENV, f"{quote(env_zone)} is not a valid zone name (at most 255 characters)"
        )
    message = None
    if conf_zone and env_zone and conf_zone != env_zone:
        message = (
            f"{r.source}: zoneName: {quote(conf_zone)} ignored, {ZONE_ENV}={quote(env_zone)} is the zone "
            "(zoneName is no RocketMQ broker key)"
        )
    elif conf_zone and not env_zone:
        message = (
            f"{r.source}: zoneName: no RocketMQ broker key, the Java broker ignores it and sends the zone of "
            f"its environment {ZONE_ENV} (or -Drocketmq.zone); set {ZONE_ENV}={conf_zone} for the broker "
            "and this agent alike"
        )
    if message is not None:
        if warnings is None:
            log.warning("%s", message)
        else:
            warnings.append(message)
    return env_zone or conf_zone


def _optional_name(r: _Reader, key: str) -> str:
    """Empty, or a name the NameServer accepts (at most 255 characters, no control characters)."""
    value = r.text(key, "") or ""
    if value and not is_valid_name(value):
        raise ConfigError(
            r.source, key, f"{quote(value)} is not a valid name (at most 255 characters, no control characters)"
        )
    return value


def _heartbeat_timeout(r: _Reader) -> int:
    """0 (the NameServer's default) or the range the NameServer accepts."""
    value = r.integer("brokerNotActiveTimeoutMillis", 0, 0, MAX_HEARTBEAT_TIMEOUT_MILLIS)
    if 0 < value < MIN_HEARTBEAT_TIMEOUT_MILLIS:
        raise ConfigError(
            r.source,
            "brokerNotActiveTimeoutMillis",
            f"{value} is below {MIN_HEARTBEAT_TIMEOUT_MILLIS} ms (0 = default)",
        )
    return value


def _name(r: _Reader, key: str, default: str) -> str:
    value = r.text(key, default) or default
    if any(c.isspace() or ord(c) < 0x20 for c in value) or len(value) > 255:
        raise ConfigError(r.source, key, f"{value!r} is not a valid name (no white space, at most 255 characters)")
    return value


def warn_unused_placeholders(properties: Mapping[str, str], source: str, used: set[str]) -> list[str]:
    """Warnings for keys the agent does not use whose values still hold ``${...}``."""
    return [
        f"{source}: {key}: unresolved placeholder in a key the agent does not use"
        for key, value in properties.items()
        if key not in used and PLACEHOLDER.search(value)
    ]
