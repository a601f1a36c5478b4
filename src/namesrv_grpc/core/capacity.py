"""How large the route table and its answers may grow (issue 30): server-wide bounds the route
table checks before a registration changes anything.

RocketMQ bounds neither: a peer that registers brokers or topics without end makes
``GET_BROKER_CLUSTER_INFO`` and the topic lists larger than any frame a client accepts, and they then
fail for every caller. Here a registration (or ``REGISTER_TOPIC_IN_NAMESRV``) that would pass a
bound is refused with LimitExceededError naming the key; what is registered already stays.

Answer sizes are upper estimates of the remoting JSON (the larger of the two encodings; gRPC's
protobuf is smaller), counted as the table changes, never by encoding an answer:

- the topic lists (``GET_ALL_TOPIC_LIST_FROM_NAMESERVER`` and the lists by cluster, unit flag or
  system flag, which are parts of it): :func:`topic_entry_bytes` per topic;
- the cluster info (``GET_BROKER_CLUSTER_INFO``), which also bounds the route of any one topic (its
  BrokerData, QueueData and filter servers are parts of it): :func:`cluster_entry_bytes`,
  :func:`member_entry_bytes`, :func:`broker_name_entry_bytes`, :func:`broker_addr_entry_bytes`.

An answer may be at most the smaller of ``remotingFrameMaxLength`` and ``grpcMaxMessageSize``, less
:data:`ANSWER_HEADROOM` for the frame's header and the message's envelope.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import filterfalse
from typing import TYPE_CHECKING

from namesrv_grpc.core.errors import LimitExceededError

if TYPE_CHECKING:
    from namesrv_grpc.config import NamesrvConfig
    from namesrv_grpc.core.compact_topics import CompactTopics
    from namesrv_grpc.core.model import TopicQueueMappingInfo
    from namesrv_grpc.core.route_tables import RouteTables

ANSWER_HEADROOM = 64 * 1024
"""Bytes of an answer's limit kept for the remoting header or the gRPC envelope."""

LIST_OVERHEAD = 64
"""JSON of an answer's envelope without its entries (``{"brokerAddr":"","topicList":[]}``,
``{"brokerAddrTable":{},"clusterAddrTable":{}}``): the estimate of an empty table."""

BROKER_NAME_OVERHEAD = 200
"""JSON of a BrokerData without its texts (``{"brokerAddrs":{},"brokerName":"","cluster":"",
"enableActingMaster":false,"zoneName":""}`` and its key), with room for the QueueData of one topic's
route (``{"brokerName":"","perm":6,"readQueueNums":65535,...}``)."""

BROKER_ADDR_OVERHEAD = 28
"""JSON of one ``brokerAddrs`` entry without the address (an id of up to 19 digits, quotes, colon,
comma) and of its ``filterServerTable`` key."""


def text_bytes(value: str) -> int:
    """Upper bound of ``value``'s bytes in a JSON string, quotes included: its length plus two when
    it is ASCII without ``"`` or ``\\``, else six bytes a character (``\\uXXXX``) plus two."""
    if value.isascii() and '"' not in value and "\\" not in value:
        return len(value) + 2
    return 6 * len(value) + 2


def topic_entry_bytes(topic: str) -> int:
    """One topic in a topic list: the name (ASCII, RocketMQ ``TopicValidator``), quotes and a comma
    (protobuf: a tag and a length of one or two bytes)."""
    return len(topic) + 3


def cluster_entry_bytes(cluster_name: str) -> int:
    """One cluster's key in ``clusterAddrTable`` with its brackets."""
    return text_bytes(cluster_name) + 6


def member_entry_bytes(broker_name: str) -> int:
    """One broker name in its cluster's list of ``clusterAddrTable``."""
    return text_bytes(broker_name) + 1


def broker_name_entry_bytes(cluster_name: str, broker_name: str, zone_name: str) -> int:
    """One BrokerData of ``brokerAddrTable`` without its addresses: its key and ``brokerName`` (and a
    third time for a route's QueueData), the cluster and zone names, :data:`BROKER_NAME_OVERHEAD`."""
    return 3 * text_bytes(broker_name) + text_bytes(cluster_name) + text_bytes(zone_name) + BROKER_NAME_OVERHEAD


def broker_addr_entry_bytes(broker_addr: str, filter_servers: Iterable[str]) -> int:
    """One address of a BrokerData (twice: ``brokerAddrs`` and a route's ``filterServerTable``) with
    its filter servers (S09)."""
    return 2 * text_bytes(broker_addr) + BROKER_ADDR_OVERHEAD + filter_servers_bytes(filter_servers)


def filter_servers_bytes(filter_servers: Iterable[str]) -> int:
    """The filter servers of one address in a route's ``filterServerTable``."""
    return sum(text_bytes(server) + 1 for server in filter_servers)


@dataclass(frozen=True, slots=True)
class RouteTableLimits:
    """The server-wide bounds of the route table; 0 = none (the default of a bare RouteInfoManager;
    the NameServer sets them from its configuration, :meth:`from_config`)."""

    max_brokers: int = 0
    """Broker addresses registered at once (``routeTableMaxBrokers``)."""
    max_topics: int = 0
    """Topics with QueueData at once, and topics with static-topic mappings (``routeTableMaxTopics``)."""
    max_answer_bytes: int = 0
    """Largest estimated answer (topic list, cluster info), bytes."""
    answer_limit_key: str = "remotingFrameMaxLength"
    """The configuration key that sets :attr:`max_answer_bytes` (the smaller limit)."""
    route_cache_max_bytes: int = 0
    """Bytes of encoded route answers one route table (one serving process) keeps
    (``routeCacheMaxBytes``, :mod:`namesrv_grpc.core.route_answers`)."""

    @classmethod
    def from_config(cls, config: NamesrvConfig) -> RouteTableLimits:
        """The bounds of ``config``: ``routeTableMaxBrokers``, ``routeTableMaxTopics``, answers at
        most the smaller of ``remotingFrameMaxLength`` and ``grpcMaxMessageSize`` less
        :data:`ANSWER_HEADROOM`, and ``routeCacheMaxBytes``."""
        frame, message = config.remoting_frame_max_length, config.grpc_max_message_size
        key, limit = ("remotingFrameMaxLength", frame) if frame <= message else ("grpcMaxMessageSize", message)
        return cls(
            max_brokers=config.route_table_max_brokers,
            max_topics=config.route_table_max_topics,
            max_answer_bytes=max(limit - ANSWER_HEADROOM, 1),
            answer_limit_key=key,
            route_cache_max_bytes=config.route_cache_max_bytes,
        )


class CapacityAccount:
    """The estimated bytes of the topic list and the cluster info, kept as the writer's table changes
    (never by encoding an answer), and the checks of the table's :class:`RouteTableLimits` against
    them and against its sizes. A replica's estimates are counted again when asked for
    (:meth:`forget`)."""

    def __init__(self, tables: RouteTables) -> None:
        self._tables = tables
        self.topic_list_bytes: int | None = LIST_OVERHEAD
        """Estimated bytes of the list of all topics, kept by every change of the topics; None: to be
        counted again."""
        self.broker_table_bytes: int | None = LIST_OVERHEAD
        """Estimated bytes of the cluster info, kept by registrations that add to it; None after
        anything leaves it (counted again when next needed)."""

    def topics_added(self, topics: list[str]) -> None:
        """``topics`` entered the topic list (:func:`topic_entry_bytes` each)."""
        if self.topic_list_bytes is not None:
            self.topic_list_bytes += sum(map(len, topics)) + 3 * len(topics)

    def topics_removed(self, topics: list[str]) -> None:
        """``topics`` left the topic list."""
        if self.topic_list_bytes is not None:
            self.topic_list_bytes -= sum(map(len, topics)) + 3 * len(topics)

    def registered(self, growth: int, moved: bool) -> None:
        """A registration that :meth:`check_registration` let in was applied."""
        if self.broker_table_bytes is not None:
            self.broker_table_bytes = None if moved else self.broker_table_bytes + growth

    def brokers_left(self) -> None:
        """An address or a broker name left the cluster info: count it again when next needed."""
        self.broker_table_bytes = None

    def forget(self) -> None:
        """Count both estimates again when next needed (a replica, after a change)."""
        self.topic_list_bytes = self.broker_table_bytes = None

    def check_broker_room(self, broker_name: str, broker_addr: str) -> None:
        """Raise LimitExceededError when ``broker_addr`` is not registered and ``routeTableMaxBrokers``
        addresses are: the part of a registration's capacity check that needs no body, so
        that a registration refused for it is refused before its body is decoded (a 200,000-topic
        body took a core for a second to decode, then was refused). Changes nothing."""
        live = self._tables.broker_live_table
        max_brokers = self._tables.limits.max_brokers
        if max_brokers and broker_addr not in live and len(live) >= max_brokers:
            raise LimitExceededError(
                "routeTableMaxBrokers",
                f"broker {broker_name} at {broker_addr} is not registered and {len(live)} "
                f"broker addresses are, the most at once (routeTableMaxBrokers)",
            )

    def check_registration(
        self,
        cluster_name: str,
        broker_name: str,
        broker_id: int,
        broker_addr: str,
        zone_name: str,
        filter_servers: list[str],
        topics: CompactTopics | None,
        mappings: Mapping[str, TopicQueueMappingInfo] | None,
    ) -> tuple[int, bool]:
        """Raise LimitExceededError (``metadata["limit"]``: the key) when this registration would pass
        one of :attr:`limits` (core.capacity): one broker address more than ``routeTableMaxBrokers``,
        more topics (or static-topic mappings) than ``routeTableMaxTopics``, or a topic list or
        cluster info larger than an answer may be. Changes nothing. Returns what the registration
        adds to the cluster info's estimate, bytes, and whether it moves an address (between ids or
        broker names: the estimate is then counted again)."""
        limits = self._tables.limits
        self.check_broker_room(broker_name, broker_addr)
        table = self._tables.topic_queue_nums
        if topics is not None and (limits.max_topics or limits.max_answer_bytes):
            new_topics = list(filterfalse(table.__contains__, topics.names))
            if new_topics and limits.max_topics and len(table) + len(new_topics) > limits.max_topics:
                raise LimitExceededError(
                    "routeTableMaxTopics",
                    f"broker {broker_name} at {broker_addr} registers {len(new_topics)} new topics; with the "
                    f"{len(table)} held that is more than {limits.max_topics} (routeTableMaxTopics)",
                )
            if new_topics and limits.max_answer_bytes:
                projected = self.topics_bytes() + sum(map(len, new_topics)) + 3 * len(new_topics)
                if projected > limits.max_answer_bytes:
                    raise LimitExceededError(
                        limits.answer_limit_key,
                        f"broker {broker_name} at {broker_addr} registers {len(new_topics)} new topics; the "
                        f"topic list would be about {projected} bytes, more than the {limits.max_answer_bytes} "
                        f"an answer may be ({limits.answer_limit_key} less 64 KiB)",
                    )
        if mappings and limits.max_topics:
            held = self._tables.topic_queue_mapping_info_table
            new_mappings = len(mappings.keys() - held.keys())
            if new_mappings and len(held) + new_mappings > limits.max_topics:
                raise LimitExceededError(
                    "routeTableMaxTopics",
                    f"broker {broker_name} at {broker_addr} maps {new_mappings} new static topics; with the "
                    f"{len(held)} held that is more than {limits.max_topics} (routeTableMaxTopics)",
                )
        growth, moved = self._broker_growth(
            cluster_name, broker_name, broker_id, broker_addr, zone_name, filter_servers
        )
        if limits.max_answer_bytes and growth > 0:
            projected = self.brokers_bytes() + growth
            if projected > limits.max_answer_bytes:
                raise LimitExceededError(
                    limits.answer_limit_key,
                    f"registering broker {broker_name} at {broker_addr} would make the cluster info about "
                    f"{projected} bytes, more than the {limits.max_answer_bytes} an answer may be "
                    f"({limits.answer_limit_key} less 64 KiB)",
                )
        return growth, moved

    def _broker_growth(
        self,
        cluster_name: str,
        broker_name: str,
        broker_id: int,
        broker_addr: str,
        zone_name: str,
        filter_servers: list[str],
    ) -> tuple[int, bool]:
        """What a registration adds to the cluster info's estimate (bytes, may be negative) and
        whether it moves an address between ids or broker names (see :meth:`check_registration`)."""
        growth = 0
        members = self._tables.cluster_addr_table.get(cluster_name)
        if members is None:
            growth += cluster_entry_bytes(cluster_name)
        if members is None or broker_name not in members:
            growth += member_entry_bytes(broker_name)
        broker_data = self._tables.broker_addr_table.get(broker_name)
        addrs = broker_data.broker_addrs if broker_data is not None else {}
        if broker_data is None:
            growth += broker_name_entry_bytes(cluster_name, broker_name, zone_name)
        else:
            growth += text_bytes(zone_name) - text_bytes(broker_data.zone_name)
        held = addrs.get(broker_id)
        previous = self._tables.broker_live_table.get(broker_addr)
        moved = (
            (held is not None and held != broker_addr)
            or (held is None and broker_addr in addrs.values())
            or (previous is not None and previous.broker_name != broker_name)
        )
        if held == broker_addr:
            growth += filter_servers_bytes(filter_servers) - filter_servers_bytes(
                self._tables.filter_server_table.get(broker_addr, ())
            )
        else:
            growth += broker_addr_entry_bytes(broker_addr, filter_servers)
        return growth, moved

    def topics_bytes(self) -> int:
        """The topic list's estimated bytes (core.capacity), counted again when unknown."""
        if self.topic_list_bytes is None:
            table = self._tables.topic_queue_nums
            self.topic_list_bytes = LIST_OVERHEAD + sum(map(len, table)) + 3 * len(table)
        return self.topic_list_bytes

    def brokers_bytes(self) -> int:
        """The cluster info's estimated bytes (core.capacity), counted again when unknown."""
        if self.broker_table_bytes is None:
            total = LIST_OVERHEAD
            for cluster_name, names in self._tables.cluster_addr_table.items():
                total += cluster_entry_bytes(cluster_name) + sum(map(member_entry_bytes, names))
            filter_servers = self._tables.filter_server_table
            for broker_data in self._tables.broker_addr_table.values():
                total += broker_name_entry_bytes(broker_data.cluster, broker_data.broker_name, broker_data.zone_name)
                for addr in broker_data.broker_addrs.values():
                    total += broker_addr_entry_bytes(addr, filter_servers.get(addr, ()))
            self.broker_table_bytes = total
        return self.broker_table_bytes

    def check_new_topic(self, topic: str) -> None:
        """Raise LimitExceededError when one topic more would pass ``routeTableMaxTopics`` or make the
        topic list larger than an answer may be (``REGISTER_TOPIC_IN_NAMESRV``)."""
        limits = self._tables.limits
        if limits.max_topics and len(self._tables.topic_queue_nums) >= limits.max_topics:
            raise LimitExceededError(
                "routeTableMaxTopics",
                f"topic {topic!r} is new and {len(self._tables.topic_queue_nums)} topics are held, the most at once "
                "(routeTableMaxTopics)",
            )
        if limits.max_answer_bytes and self.topics_bytes() + topic_entry_bytes(topic) > limits.max_answer_bytes:
            raise LimitExceededError(
                limits.answer_limit_key,
                f"topic {topic!r} is new and would make the topic list larger than the "
                f"{limits.max_answer_bytes} bytes an answer may be ({limits.answer_limit_key} less 64 KiB)",
            )

    def answer_sizes(self) -> tuple[int, int]:
        """``(topic list bytes, cluster info bytes)``: the estimates the answer bound is checked
        against (core.capacity; ``limits.max_answer_bytes``), for metrics."""
        return self.topics_bytes(), self.brokers_bytes()
