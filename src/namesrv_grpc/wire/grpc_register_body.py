"""The gRPC door's registration body: a serialized ``RegisterBrokerBody`` (protobuf), optionally
zlib-compressed, with the CRC32C (Castagnoli) of the bytes exactly as sent (CONTRACT.md, rules S01,
S02, S32).

The agent encodes with :func:`encode_body`; the NameServer checks and decodes with
:func:`decode_body` (:func:`decode_protobuf_body` in the route-table process, which receives the body
bytes as the serving process got them).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Mapping
from types import MappingProxyType

import google_crc32c
from google.protobuf.message import DecodeError

from namesrv.v1 import types_pb2
from namesrv_grpc.core.body import DEFAULT_MAX_INFLATED_BODY_BYTES, DEFAULT_MAX_TOPICS, DecodedBody, RegisterBrokerBody
from namesrv_grpc.core.errors import BodyChecksumMismatchError, LimitExceededError, MalformedBodyError
from namesrv_grpc.core.model import DataVersion, TopicConfig, TopicQueueMappingInfo
from namesrv_grpc.core.validation import (
    MAX_PERM,
    MAX_QUEUE_NUMS,
    TOPIC_PATTERN,
    quote,
    require_non_negative,
    require_perm,
    require_queue_nums,
    require_topic,
)

INFLATE_CHUNK_BYTES = 1024 * 1024
"""Output of one inflate step."""

PARSE_BATCH_TOPICS = 2048
"""Topic entries decoded by one protobuf call (about a millisecond with the GIL held)."""

_FILTER_TYPE_TO_NAME = {
    types_pb2.TOPIC_FILTER_TYPE_UNSPECIFIED: "SINGLE_TAG",
    types_pb2.TOPIC_FILTER_TYPE_SINGLE_TAG: "SINGLE_TAG",
    types_pb2.TOPIC_FILTER_TYPE_MULTI_TAG: "MULTI_TAG",
}
_NO_ATTRIBUTES: dict[str, str] = {}
"""Shared by every topic without attributes (TopicConfig attributes are never mutated)."""

_FILTER_NAME_TO_TYPE = {
    "SINGLE_TAG": types_pb2.TOPIC_FILTER_TYPE_SINGLE_TAG,
    "MULTI_TAG": types_pb2.TOPIC_FILTER_TYPE_MULTI_TAG,
}


def mapping_to_proto(mapping: TopicQueueMappingInfo) -> types_pb2.TopicQueueMappingInfo:
    """TopicQueueMappingInfo -> ``namesrv.v1.TopicQueueMappingInfo``."""
    return types_pb2.TopicQueueMappingInfo(
        topic=mapping.topic,
        scope=mapping.scope,
        total_queues=mapping.total_queues,
        bname=mapping.bname,
        epoch=mapping.epoch,
        dirty=mapping.dirty,
        curr_id_map=mapping.curr_id_map,
    )


def mapping_from_proto(message: types_pb2.TopicQueueMappingInfo) -> TopicQueueMappingInfo:
    """``namesrv.v1.TopicQueueMappingInfo`` -> TopicQueueMappingInfo (not validated; an empty
    ``scope`` reads as RocketMQ's default ``__global__``)."""
    return TopicQueueMappingInfo(
        topic=message.topic,
        bname=message.bname,
        scope=message.scope or "__global__",
        total_queues=message.total_queues,
        epoch=message.epoch,
        dirty=message.dirty,
        curr_id_map=MappingProxyType(dict(message.curr_id_map)),
    )


def crc32c(data: bytes) -> int:
    """CRC32C (Castagnoli) of ``data`` as an unsigned 32-bit int (google-crc32c)."""
    return int(google_crc32c.value(data))


def data_version_to_proto(version: DataVersion) -> types_pb2.DataVersion:
    """DataVersion -> ``namesrv.v1.DataVersion``."""
    return types_pb2.DataVersion(
        state_version=version.state_version, timestamp=version.timestamp, counter=version.counter
    )


def data_version_from_proto(message: types_pb2.DataVersion) -> DataVersion:
    """``namesrv.v1.DataVersion`` -> DataVersion."""
    return DataVersion(message.state_version, message.timestamp, message.counter)


def topic_config_to_proto(config: TopicConfig) -> types_pb2.TopicConfig:
    """TopicConfig -> ``namesrv.v1.TopicConfig`` (unknown filter types are sent as SINGLE_TAG)."""
    return types_pb2.TopicConfig(
        topic_name=config.topic_name,
        read_queue_nums=config.read_queue_nums,
        write_queue_nums=config.write_queue_nums,
        perm=config.perm,
        topic_sys_flag=config.topic_sys_flag,
        order=config.order,
        topic_filter_type=_FILTER_NAME_TO_TYPE.get(config.topic_filter_type, types_pb2.TOPIC_FILTER_TYPE_SINGLE_TAG),
        attributes=config.attributes,
    )


def encode_body(
    topic_configs: Mapping[str, TopicConfig],
    data_version: DataVersion,
    filter_server_list: Iterable[str] = (),
    *,
    compress: bool = False,
    topic_queue_mappings: Mapping[str, TopicQueueMappingInfo] | None = None,
) -> tuple[bytes, int]:
    """Serialize a registration body (S32); return ``(body, crc32c of body)``.

    ``topic_queue_mappings`` (topic -> mapping, RocketMQ 5.x static topics, S40) go into
    ``topic_queue_mapping_info_map``.

    With ``compress`` the serialized message is zlib-compressed (RocketMQ ``compressedRegister``) and
    the checksum covers the compressed bytes, as sent. Serialization is deterministic (map keys sorted),
    so the same topics give the same bytes and checksum.
    """
    message = types_pb2.RegisterBrokerBody(
        data_version=data_version_to_proto(data_version), filter_server_list=list(filter_server_list)
    )
    for name, config in topic_configs.items():
        message.topic_config_table[name].CopyFrom(topic_config_to_proto(config))
    for topic, mapping in (topic_queue_mappings or {}).items():
        message.topic_queue_mapping_info_map[topic].CopyFrom(mapping_to_proto(mapping))
    body = message.SerializeToString(deterministic=True)
    if compress:
        body = zlib.compress(body)
    return body, crc32c(body)


def verify_checksum(body: bytes, body_crc32c: int, actual: int | None = None) -> None:
    """S01: raise BodyChecksumMismatchError when CRC32C(body) != ``body_crc32c`` (``actual``: the
    CRC32C already computed)."""
    if actual is None:
        actual = crc32c(body)
    if actual != body_crc32c:
        raise BodyChecksumMismatchError(
            f"body_crc32c is {body_crc32c:#010x} but the CRC32C of the {len(body)} body bytes is {actual:#010x}; "
            "compute it over the body exactly as sent (after compression)",
            {"expected": f"{body_crc32c:#010x}", "actual": f"{actual:#010x}"},
        )


def decode_body(
    body: bytes,
    body_crc32c: int,
    *,
    compressed: bool,
    max_inflated_bytes: int = DEFAULT_MAX_INFLATED_BODY_BYTES,
    max_topics: int = DEFAULT_MAX_TOPICS,
) -> RegisterBrokerBody:
    """S01/S02: check the checksum (first), then :func:`parse_body`.

    Raises BodyChecksumMismatchError, then what :func:`parse_body` raises.
    """
    verify_checksum(body, body_crc32c)
    return parse_body(body, compressed=compressed, max_inflated_bytes=max_inflated_bytes, max_topics=max_topics)


def parse_body(
    body: bytes,
    *,
    compressed: bool,
    max_inflated_bytes: int = DEFAULT_MAX_INFLATED_BODY_BYTES,
    max_topics: int = DEFAULT_MAX_TOPICS,
) -> RegisterBrokerBody:
    """Decompress, decode and validate a registration body whose checksum was verified.

    An empty body is no topics and DataVersion (0, 0, 0) (S02). A topic config without
    ``topic_name`` takes its map key. The topic table is decoded in batches of
    :data:`PARSE_BATCH_TOPICS` entries, so a thread decoding a large body never holds the GIL for
    long, and counting stops at ``max_topics`` entries: the work is bounded by the limits, not by
    what the body claims.

    Static-topic mappings (field 4, S40) are decoded in batches too, at most ``max_topics`` of them.

    Raises MalformedBodyError (not zlib, not a RegisterBrokerBody, more than ``max_inflated_bytes``
    decompressed), LimitExceededError (more than ``max_topics`` topic entries or mapping entries,
    ``registerBodyMaxTopics``) or InvalidFieldError (a topic's name, queue numbers, perm or sys flag
    out of range; the field path names the topic).
    """
    if not body:
        return RegisterBrokerBody({}, DataVersion(), ())
    raw = decompress_body(body, compressed=compressed, max_bytes=max_inflated_bytes)
    topics: dict[str, TopicConfig] = {}
    mappings: dict[str, TopicQueueMappingInfo] = {}
    rest: list[bytes] = []
    mapping_entries: list[bytes] = []
    mapping_count = 0
    position, size = 0, len(raw)
    batch_start = batch_entries = entries = 0
    while position < size:
        start = position
        tag, position = _read_varint(raw, position)
        wire_type = tag & 7
        if wire_type == 2:
            length, position = _read_varint(raw, position)
            end = position + length
        elif wire_type == 0:
            end = _read_varint(raw, position)[1]
        elif wire_type == 1:
            end = position + 8
        elif wire_type == 5:
            end = position + 4
        else:
            raise MalformedBodyError(_not_a_body(raw, f"wire type {wire_type} at byte {start}"))
        if end > size:
            raise MalformedBodyError(_not_a_body(raw, f"a field at byte {start} runs past the end"))
        if tag == 0x0A:  # field 1, topic_config_table entry
            entries += 1
            if entries > max_topics:
                raise _too_many(max_topics, "topics")
            if not batch_entries:
                batch_start = start
            batch_entries += 1
            if batch_entries == PARSE_BATCH_TOPICS:
                _decode_topics(raw[batch_start:end], topics)
                batch_entries = 0
        else:
            if batch_entries:
                _decode_topics(raw[batch_start:start], topics)
                batch_entries = 0
            if tag == 0x22:  # field 4, topic_queue_mapping_info_map entry
                mapping_count += 1
                if mapping_count > max_topics:
                    raise _too_many(max_topics, "topic queue mappings")
                mapping_entries.append(raw[start:end])
                if len(mapping_entries) == PARSE_BATCH_TOPICS:
                    _decode_mappings(b"".join(mapping_entries), mappings)
                    mapping_entries.clear()
            else:
                rest.append(raw[start:end])
        position = end
    if batch_entries:
        _decode_topics(raw[batch_start:size], topics)
    if mapping_entries:
        _decode_mappings(b"".join(mapping_entries), mappings)
    return _assemble_body(topics, mappings, b"".join(rest), raw)


def _too_many(max_topics: int, what: str) -> LimitExceededError:
    """The error for a body with more than ``max_topics`` entries of ``what`` (registerBodyMaxTopics)."""
    return LimitExceededError(
        "registerBodyMaxTopics", f"body holds more than {max_topics} {what} (registerBodyMaxTopics)"
    )


def _assemble_body(
    topics: dict[str, TopicConfig], mappings: dict[str, TopicQueueMappingInfo], rest: bytes, raw: bytes
) -> RegisterBrokerBody:
    """The body of the decoded ``topics`` and ``mappings`` and of ``rest`` (the other fields, serialized;
    ``raw``: the whole body, for the error hint). Raises MalformedBodyError."""
    message = _parse_message(rest, raw)
    return RegisterBrokerBody(
        topics, data_version_from_proto(message.data_version), tuple(message.filter_server_list), mappings
    )


def _decode_mappings(entries: bytes, mappings: dict[str, TopicQueueMappingInfo]) -> None:
    """Decode serialized ``topic_queue_mapping_info_map`` entries into ``mappings`` (later entries
    win). Raises MalformedBodyError."""
    message = _parse_message(entries, entries)
    for topic, mapping in message.topic_queue_mapping_info_map.items():
        mappings[topic] = mapping_from_proto(mapping)


def _read_varint(raw: bytes, position: int) -> tuple[int, int]:
    """The varint at ``position`` and the position after it. Raises MalformedBodyError."""
    value = shift = 0
    while True:
        if position >= len(raw) or shift > 63:
            raise MalformedBodyError(_not_a_body(raw, f"a varint at byte {position} does not end"))
        byte = raw[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, position
        shift += 7


def _not_a_body(raw: bytes, problem: str) -> str:
    hint = " (is it zlib-compressed? then set compressed)" if raw[:1] == b"\x78" else ""
    return f"body is not a serialized namesrv.v1.RegisterBrokerBody: {problem}{hint}"


def _parse_message(data: bytes, raw: bytes) -> types_pb2.RegisterBrokerBody:
    message = types_pb2.RegisterBrokerBody()
    try:
        message.ParseFromString(data)
    except DecodeError as exc:
        raise MalformedBodyError(_not_a_body(raw, str(exc))) from None
    return message


def _decode_topics(entries: bytes, topics: dict[str, TopicConfig]) -> None:
    """Decode serialized ``topic_config_table`` entries into ``topics`` (later entries win, as in a
    protobuf map). Raises MalformedBodyError, InvalidFieldError."""
    message = _parse_message(entries, entries)
    filter_names = _FILTER_TYPE_TO_NAME
    topic_pattern = TOPIC_PATTERN
    for key, config in message.topic_config_table.items():
        name = config.topic_name or key
        read, write, perm, sys_flag = (
            config.read_queue_nums,
            config.write_queue_nums,
            config.perm,
            config.topic_sys_flag,
        )
        # One combined check per topic (this loop runs 100,000 times for a large broker); the
        # detailed checks below only run to name what is wrong.
        if not (
            0 <= read <= MAX_QUEUE_NUMS
            and 0 <= write <= MAX_QUEUE_NUMS
            and 0 <= perm <= MAX_PERM
            and sys_flag >= 0
            and topic_pattern.fullmatch(name) is not None
        ):
            path = f"body.topic_config_table[{quote(key)}]"
            require_topic(f"{path}.topic_name", name)
            require_queue_nums(f"{path}.read_queue_nums", read)
            require_queue_nums(f"{path}.write_queue_nums", write)
            require_perm(f"{path}.perm", perm)
            require_non_negative(f"{path}.topic_sys_flag", sys_flag)
        attributes = config.attributes
        topics[name] = TopicConfig(
            name,
            read,
            write,
            perm,
            sys_flag,
            config.order,
            filter_names.get(config.topic_filter_type, "SINGLE_TAG"),
            dict(attributes) if attributes else _NO_ATTRIBUTES,
        )


def _decompress(body: bytes, max_bytes: int) -> bytes:
    """Inflate ``body`` in chunks of :data:`INFLATE_CHUNK_BYTES`, stopping as soon as the output
    passes ``max_bytes`` (memory stays near the cap, whatever the stream claims)."""
    decompressor = zlib.decompressobj()
    parts: list[bytes] = []
    total = 0
    data = body
    try:
        while True:
            chunk = decompressor.decompress(data, INFLATE_CHUNK_BYTES)
            total += len(chunk)
            if total > max_bytes:
                raise MalformedBodyError(f"body inflates to more than {max_bytes} bytes (registerBodyMaxInflatedSize)")
            parts.append(chunk)
            data = decompressor.unconsumed_tail
            if decompressor.eof or (not data and not chunk):
                break
    except zlib.error as exc:
        raise MalformedBodyError(f"compressed is set but body is not zlib data: {exc}") from None
    if not decompressor.eof:
        raise MalformedBodyError("compressed body is truncated (zlib stream does not end)")
    return parts[0] if len(parts) == 1 else b"".join(parts)


def decompress_body(body: bytes, *, compressed: bool, max_bytes: int = DEFAULT_MAX_INFLATED_BODY_BYTES) -> bytes:
    """The serialized RegisterBrokerBody: ``body`` itself, or zlib-decompressed to at most
    ``max_bytes``. Raises MalformedBodyError."""
    return _decompress(body, max_bytes) if compressed else body


def split_topic_table(raw: bytes, max_entries: int = DEFAULT_MAX_TOPICS) -> tuple[int, bytes] | None:
    """Split a serialized RegisterBrokerBody into the fingerprint of its topic table and the rest.

    Serializers write fields in field-number order, so the body is ``[topic_config_table entries]
    [data_version][filter_server_list]``. Returns ``(CRC32C of the entries, the remaining bytes)``,
    or None when the body does not start that way or holds more than ``max_entries`` topic entries (it
    is then decoded in full as usual, which enforces the limits). The caller
    must check that the rest holds no further topic entries (fields may come in any order).

    This lets a registration that only changed its DataVersion skip decoding 100,000 topics.
    """
    position, size = 0, len(raw)
    entries = 0
    while position < size and raw[position] == 0x0A:  # field 1 (topic_config_table), length-delimited
        entries += 1
        if entries > max_entries:
            return None
        position += 1
        length = shift = 0
        while True:
            if position >= size or shift > 28:
                return None
            byte = raw[position]
            position += 1
            length |= (byte & 0x7F) << shift
            if byte < 0x80:
                break
            shift += 7
        position += length
    if position > size:
        return None
    return crc32c(raw[:position]) ^ (position << 32), raw[position:]


def decode_protobuf_body(
    body: bytes, compressed: bool, max_inflated_bytes: int, max_topics: int, known_fingerprint: int | None
) -> DecodedBody:
    """A protobuf registration body (S01 checked before) as :class:`DecodedBody`: decompressed within
    ``max_inflated_bytes`` and decoded within ``max_topics``. When its topic table has the fingerprint
    ``known_fingerprint`` (the table holds what it makes: ``RouteInfoManager.stored_topics_fingerprint``),
    only the rest is decoded and ``topic_configs`` is None. Raises MalformedBodyError,
    LimitExceededError, InvalidFieldError."""
    raw = decompress_body(body, compressed=compressed, max_bytes=max_inflated_bytes)
    split = split_topic_table(raw)
    topics_fingerprint = split[0] if split else None
    decoded = None
    topic_configs: Mapping[str, TopicConfig] | None = None
    if split and split[0] == known_fingerprint:
        # Same topic table as last time, only the DataVersion or filter servers differ: S07
        # would change nothing, so only the rest of the body is decoded.
        decoded = parse_body(split[1], compressed=False)
    if decoded is None or decoded.topic_config_table:
        decoded = parse_body(raw, compressed=False, max_topics=max_topics)
        topic_configs = decoded.topic_config_table
    return DecodedBody(
        topic_configs,
        decoded.data_version,
        decoded.filter_server_list,
        topics_fingerprint,
        decoded.topic_queue_mappings or None,
    )
