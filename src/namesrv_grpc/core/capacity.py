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

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from namesrv_grpc.config import NamesrvConfig

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
