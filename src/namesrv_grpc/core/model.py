"""The route table's records, named as Apache RocketMQ names them.

Pure data: no gRPC, no I/O. Times are milliseconds since the Unix epoch (``int``), as in RocketMQ.

- :class:`DataVersion` -- ``(state_version, timestamp ms, counter)`` of a broker's topic config.
- :class:`TopicConfig` -- one topic as a broker holds it (registration body).
- :class:`QueueData` -- per (topic, broker name) in ``topicQueueTable``.
- :class:`BrokerData` -- per broker name in ``brokerAddrTable``.
- :class:`BrokerLiveInfo` -- per broker address in ``brokerLiveTable``.
- :class:`TopicRouteData` -- what a route lookup returns.
- :class:`TopicQueueMappingInfo` -- how one broker holds a static topic's logic queues (RocketMQ 5.x).
- :class:`MinBrokerIdChange` -- a broker name's smallest broker id changed (slave acting master).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import NamedTuple

MASTER_ID = 0
"""Broker id of a master (RocketMQ ``MixAll.MASTER_ID``); ids > 0 are slaves."""

DEFAULT_HEARTBEAT_TIMEOUT_MILLIS = 120_000
"""Silence after which a broker is removed when the registration names no timeout (S08)."""

PERM_PRIORITY = 8
PERM_READ = 4
PERM_WRITE = 2
PERM_INHERIT = 1
"""``perm`` bits (RocketMQ ``PermName``)."""

TOPIC_SYS_FLAG_UNIT = 1
TOPIC_SYS_FLAG_UNIT_SUB = 2
"""``topicSysFlag`` bits (RocketMQ ``TopicSysFlag``)."""

PROTOCOLS = ("grpc", "remoting")
"""Front doors a broker can register through (``BrokerLiveInfo.protocol``)."""

SYNC_BROKER_MEMBER_GROUP_PREFIX = "rmq_sys_SYNC_BROKER_MEMBER_"
"""Topics of this prefix are never shown with an acting master (RocketMQ
``TopicValidator.SYNC_BROKER_MEMBER_GROUP_PREFIX``, ``RouteInfoManager.pickupTopicRouteData``)."""

ORDER_TOPIC_CONFIG_NAMESPACE = "ORDER_TOPIC_CONFIG"
"""KV namespace of order-topic settings (RocketMQ ``NamesrvUtil.NAMESPACE_ORDER_TOPIC_CONFIG``)."""


@dataclass(frozen=True, slots=True)
class DataVersion:
    """Version of a broker's topic configuration; equal when all three fields are equal.

    ``timestamp`` is milliseconds since the epoch. ``DataVersion()`` (all zero) is the version of
    an empty registration body (S02).
    """

    state_version: int = 0
    timestamp: int = 0
    counter: int = 0


class TopicConfig(NamedTuple):
    """One topic as a broker registers it (RocketMQ ``TopicConfig``; defaults are RocketMQ's).

    An immutable tuple (cheap to build and compare by the hundred thousand, S07); ``attributes``
    must not be mutated."""

    topic_name: str
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = PERM_READ | PERM_WRITE
    topic_sys_flag: int = 0
    order: bool = False
    topic_filter_type: str = "SINGLE_TAG"
    attributes: Mapping[str, str] = MappingProxyType({})


class QueueData(NamedTuple):
    """Where one topic lives on one broker name (RocketMQ ``QueueData``). Compared field by field
    (S07); an immutable tuple, shared by the table, the route cache and copies."""

    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int = 0


@dataclass(slots=True)
class BrokerData:
    """One broker name's addresses (RocketMQ ``BrokerData``).

    ``broker_addrs`` maps broker id (0 = master) to ``host:port``; an address appears once (S05).
    """

    cluster: str
    broker_name: str
    broker_addrs: dict[int, str] = field(default_factory=dict)
    zone_name: str = ""
    enable_acting_master: bool = False

    def copy(self) -> BrokerData:
        """Return a copy whose ``broker_addrs`` can be changed without touching this one."""
        return BrokerData(
            self.cluster, self.broker_name, dict(self.broker_addrs), self.zone_name, self.enable_acting_master
        )


@dataclass(slots=True)
class BrokerLiveInfo:
    """Liveness of one broker address (RocketMQ ``BrokerLiveInfo``).

    ``last_update_timestamp`` is ms since the epoch (shown: the admin API, snapshots), and
    ``last_seen_millis`` the same moment on the liveness clock (``time.monotonic`` in ms); the broker
    is expired once ``last_seen_millis + heartbeat_timeout_millis < now`` on that clock (S13), so a
    step of the system clock expires nobody (issue 39: +300 s expired a broker registered 2 s before).
    ``instance_id`` names the broker run that registered the address (empty = unknown);
    ``session_id`` is the liveness session bound to it (0 = none). A session only removes the
    broker while it is still the bound one (S15, S17). ``protocol`` names the front door of the
    registration that wrote the entry: ``"grpc"`` or ``"remoting"`` (:data:`PROTOCOLS`).
    """

    cluster: str
    broker_name: str
    broker_id: int
    last_update_timestamp: int
    heartbeat_timeout_millis: int
    data_version: DataVersion
    ha_server_addr: str
    instance_id: str = ""
    session_id: int = 0
    body_fingerprint: tuple[int, int, bool] | None = None
    """(CRC32C, length, compressed) of the last registration body: an identical body needs no decoding."""
    topics_fingerprint: int | None = None
    """Fingerprint of the topic table of the last registration body when the route table is known
    to hold exactly what those topics make (cleared when anything else changes this broker name's
    QueueData): a body with the same topics and a new DataVersion needs no topic decoding."""
    protocol: str = "grpc"
    """Front door of the registration that wrote this entry, one of :data:`PROTOCOLS`."""
    last_seen_millis: int = 0
    """When the broker was last heard from, ms on the liveness clock (monotonic; S13)."""

    def expired(self, now_millis: int) -> bool:
        """True when the broker has been silent for longer than its heartbeat timeout;
        ``now_millis`` on the liveness clock (:attr:`last_seen_millis`)."""
        return self.last_seen_millis + self.heartbeat_timeout_millis < now_millis


METADATA_SCOPE_GLOBAL = "__global__"
"""Default ``scope`` of a static topic's mapping (RocketMQ ``MixAll.METADATA_SCOPE_GLOBAL``)."""

ZONE_NAME_EXT_FIELD = "__ZONE_NAME"
"""Remoting ext field carrying the sender's zone (RocketMQ ``MixAll.ZONE_NAME``): Java brokers and
clients started with ``ROCKETMQ_ZONE`` (or ``-Drocketmq.zone``) add it to every request."""

ZONE_MODE_EXT_FIELD = "__ZONE_MODE"
"""Remoting ext field asking for a zone-filtered route (RocketMQ ``MixAll.ZONE_MODE``, ``true``)."""


@dataclass(frozen=True, slots=True)
class TopicQueueMappingInfo:
    """How one broker holds a static topic's logic queues (RocketMQ 5.x ``TopicQueueMappingInfo``).

    ``bname`` is the broker name the mapping belongs to (the route is keyed by it),
    ``total_queues`` the topic's logic queue count across brokers, ``epoch`` ms since the epoch of the
    mapping's last change, ``curr_id_map`` logic queue id -> physical queue id on ``bname`` (must not
    be mutated). The NameServer keeps and returns it; it never interprets it."""

    topic: str
    bname: str
    scope: str = METADATA_SCOPE_GLOBAL
    total_queues: int = 0
    epoch: int = 0
    dirty: bool = False
    curr_id_map: Mapping[int, int] = field(default_factory=dict)

    def __reduce__(self) -> tuple[object, ...]:
        """Pickled with ``curr_id_map`` as a plain dict (a read-only ``MappingProxyType`` cannot be
        pickled): mappings cross from the route-table process to the serving processes."""
        fields = (self.topic, self.bname, self.scope, self.total_queues, self.epoch, self.dirty, dict(self.curr_id_map))
        return TopicQueueMappingInfo, fields


@dataclass(frozen=True, slots=True)
class TopicRouteData:
    """A topic's route (RocketMQ ``TopicRouteData``): copies, safe to hand out.

    ``topic_queue_mapping_by_broker`` (RocketMQ 5.x ``topicQueueMappingByBroker``): broker name -> its
    static-topic mapping of this topic; empty for a topic that is not static (Java: absent)."""

    queue_datas: tuple[QueueData, ...]
    broker_datas: tuple[BrokerData, ...]
    filter_server_table: dict[str, tuple[str, ...]]
    order_topic_conf: str = ""
    topic_queue_mapping_by_broker: Mapping[str, TopicQueueMappingInfo] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RegisterBrokerResult:
    """What a registration answers (S10): the live master's addresses, for a slave; else empty.

    ``conflicting_instance_id`` is set when this registration takes the broker back from another
    run of the same broker (same cluster, name and id) that had taken it from this run: two
    agents fight over one broker (see ``RouteInfoManager.register_broker``).

    ``changed`` is False when the registration only refreshed the broker's liveness: the address
    was registered already, by the same run (instance id), under the same cluster, name and id,
    with the same DataVersion, HA address and heartbeat timeout, and its BrokerData (addresses,
    zone, acting master) and filter servers stayed as they were. That is a broker's periodic
    re-registration (every 30 s from a Java broker): it is not audited. Not part of equality."""

    master_addr: str = ""
    ha_server_addr: str = ""
    conflicting_instance_id: str = ""
    changed: bool = field(default=True, compare=False)


@dataclass(frozen=True, slots=True)
class ClusterInfo:
    """``GET_BROKER_CLUSTER_INFO`` (S22): copies of brokerAddrTable and clusterAddrTable."""

    broker_addr_table: dict[str, BrokerData]
    cluster_addr_table: dict[str, tuple[str, ...]]


@dataclass(frozen=True, slots=True)
class RemovedBroker:
    """One broker address taken out of the table by expiry, unregistration or session loss."""

    broker_addr: str
    cluster: str
    broker_name: str
    broker_id: int
    reason: str
    instance_id: str = field(default="", compare=False)
    """The broker run whose registration was removed (empty = unknown); not part of equality."""


@dataclass(frozen=True, slots=True)
class MinBrokerIdChange:
    """The smallest broker id of a broker name changed (RocketMQ 5.x slave acting master, S53): who
    must be told, and what (``NOTIFY_MIN_BROKER_ID_CHANGE``; RocketMQ
    ``RouteInfoManager.notifyMinBrokerIdChanged`` / ``chooseBrokerAddrsToNotify``).

    ``min_broker_id`` / ``min_broker_addr`` are the new smallest id of the broker name and its
    address; ``offline_broker_addr`` is the address that left ("" when a broker arrived);
    ``ha_broker_addr`` is the HA address of the broker that arrived ("" when one left or it named
    none). ``recipients`` are the broker addresses to tell, in broker id order.
    """

    cluster: str
    broker_name: str
    min_broker_id: int
    min_broker_addr: str
    offline_broker_addr: str
    ha_broker_addr: str
    recipients: tuple[str, ...]
