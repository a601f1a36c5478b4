"""A decoded registration body, whatever the door it came through (the doors decode their own wire
formats: :mod:`namesrv_grpc.wire.grpc_register_body` the protobuf one, :mod:`namesrv_grpc.wire.bodies`
RocketMQ's JSON and compressed ones), who sent it, and the bounds both doors decode within."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from namesrv_grpc.core.model import DataVersion, TopicConfig, TopicQueueMappingInfo

DEFAULT_MAX_INFLATED_BODY_BYTES = 64 * 1024 * 1024
"""Largest body after decompression by default (64 MiB, ``registerBodyMaxInflatedSize``); a larger
one is MALFORMED_BODY, found while inflating (no zlib bombs). A 100,000-topic body is about 4 MiB."""

DEFAULT_MAX_TOPICS = 200_000
"""Most topic entries in one body by default (``registerBodyMaxTopics``): twice a very large broker."""


@dataclass(frozen=True, slots=True)
class RegisterBrokerBody:
    """A decoded body: topic name -> TopicConfig, the DataVersion, the filter-server addresses, and
    (RocketMQ 5.x static topics, S40) topic name -> TopicQueueMappingInfo."""

    topic_config_table: dict[str, TopicConfig]
    data_version: DataVersion
    filter_server_list: tuple[str, ...]
    topic_queue_mappings: Mapping[str, TopicQueueMappingInfo] = field(default_factory=dict)


class BrokerIdentity(NamedTuple):
    """Who registers: the four fields every broker request names (keyword names of the route table)."""

    cluster_name: str
    broker_name: str
    broker_id: int
    broker_addr: str


class DecodedBody(NamedTuple):
    """A registration body as :meth:`~namesrv_grpc.core.processor.NameServer.apply_registration`
    needs it, whatever the wire format.

    ``topic_configs`` None means "the topics are known unchanged, do not apply them";
    ``topics_fingerprint`` (or None) lets the next registration skip decoding an unchanged topic table.
    ``topic_queue_mappings`` (RocketMQ 5.x static topics): topic -> mapping; None when the body
    carries none or they are known unchanged (they come with the topics' fingerprint).
    """

    topic_configs: Mapping[str, TopicConfig] | None
    data_version: DataVersion
    filter_server_list: Sequence[str]
    topics_fingerprint: int | None = None
    topic_queue_mappings: Mapping[str, TopicQueueMappingInfo] | None = None
