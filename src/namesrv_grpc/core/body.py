"""The registration body: a serialized ``RegisterBrokerBody`` (protobuf), optionally zlib-compressed,
with the CRC32C (Castagnoli) of the bytes exactly as sent (CONTRACT.md, rules S01, S02, S32).

The agent encodes with :func:`encode_body`; the NameServer checks and decodes with :func:`decode_body`.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import google_crc32c
from google.protobuf.message import DecodeError

from namesrv.v1 import types_pb2
from namesrv_grpc.core.errors import BodyChecksumMismatchError, MalformedBodyError
from namesrv_grpc.core.model import DataVersion, TopicConfig
from namesrv_grpc.core.validation import (
    MAX_PERM,
    MAX_QUEUE_NUMS,
    is_valid_name,
    require_name,
    require_non_negative,
    require_perm,
    require_queue_nums,
)

MAX_DECOMPRESSED_BODY_BYTES = 512 * 1024 * 1024
"""Largest body after decompression (512 MiB); a larger one is MALFORMED_BODY (no zlib bombs)."""

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


@dataclass(frozen=True, slots=True)
class RegisterBrokerBody:
    """A decoded body: topic name -> TopicConfig, the DataVersion, the filter-server addresses."""

    topic_config_table: dict[str, TopicConfig]
    data_version: DataVersion
    filter_server_list: tuple[str, ...]


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
) -> tuple[bytes, int]:
    """Serialize a registration body (S32); return ``(body, crc32c of body)``.

    With ``compress`` the serialized message is zlib-compressed (RocketMQ ``compressedRegister``) and
    the checksum covers the compressed bytes, as sent. Serialization is deterministic (map keys sorted),
    so the same topics give the same bytes and checksum.
    """
    message = types_pb2.RegisterBrokerBody(
        data_version=data_version_to_proto(data_version), filter_server_list=list(filter_server_list)
    )
    for name, config in topic_configs.items():
        message.topic_config_table[name].CopyFrom(topic_config_to_proto(config))
    body = message.SerializeToString(deterministic=True)
    if compress:
        body = zlib.compress(body)
    return body, crc32c(body)


def verify_checksum(body: bytes, body_crc32c: int) -> None:
    """S01: raise BodyChecksumMismatchError when CRC32C(body) != ``body_crc32c``."""
    actual = crc32c(body)
    if actual != body_crc32c:
        raise BodyChecksumMismatchError(
            f"body_crc32c is {body_crc32c:#010x} but the CRC32C of the {len(body)} body bytes is {actual:#010x}; "
            "compute it over the body exactly as sent (after compression)",
            {"expected": f"{body_crc32c:#010x}", "actual": f"{actual:#010x}"},
        )


def decode_body(body: bytes, body_crc32c: int, *, compressed: bool) -> RegisterBrokerBody:
    """S01/S02: check the checksum (first), then :func:`parse_body`.

    Raises BodyChecksumMismatchError, then what :func:`parse_body` raises.
    """
    verify_checksum(body, body_crc32c)
    return parse_body(body, compressed=compressed)


def parse_body(body: bytes, *, compressed: bool) -> RegisterBrokerBody:
    """Decompress, decode and validate a registration body whose checksum was verified.

    An empty body is no topics and DataVersion (0, 0, 0) (S02). A topic config without
    ``topic_name`` takes its map key.

    Raises MalformedBodyError (not zlib, not a RegisterBrokerBody, larger than 512 MiB decompressed)
    or InvalidFieldError (a topic's name, queue numbers, perm or sys flag out of range; the field
    path names the topic).
    """
    if not body:
        return RegisterBrokerBody({}, DataVersion(), ())
    raw = decompress_body(body, compressed=compressed)
    message = types_pb2.RegisterBrokerBody()
    try:
        message.ParseFromString(raw)
    except DecodeError as exc:
        hint = " (is it zlib-compressed? then set compressed)" if raw[:1] == b"\x78" else ""
        raise MalformedBodyError(f"body is not a serialized namesrv.v1.RegisterBrokerBody: {exc}{hint}") from None
    topics: dict[str, TopicConfig] = {}
    filter_names = _FILTER_TYPE_TO_NAME
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
            and is_valid_name(name)
        ):
            path = f"body.topic_config_table[{key!r}]"
            require_name(f"{path}.topic_name", name)
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
    return RegisterBrokerBody(topics, data_version_from_proto(message.data_version), tuple(message.filter_server_list))


def _decompress(body: bytes) -> bytes:
    decompressor = zlib.decompressobj()
    try:
        raw = decompressor.decompress(body, MAX_DECOMPRESSED_BODY_BYTES)
    except zlib.error as exc:
        raise MalformedBodyError(f"compressed is set but body is not zlib data: {exc}") from None
    if decompressor.unconsumed_tail:
        raise MalformedBodyError(f"body decompresses to more than {MAX_DECOMPRESSED_BODY_BYTES} bytes")
    if not decompressor.eof:
        raise MalformedBodyError("compressed body is truncated (zlib stream does not end)")
    return raw


def decompress_body(body: bytes, *, compressed: bool) -> bytes:
    """The serialized RegisterBrokerBody: ``body`` itself, or zlib-decompressed. Raises MalformedBodyError."""
    return _decompress(body) if compressed else body


def split_topic_table(raw: bytes) -> tuple[int, bytes] | None:
    """Split a serialized RegisterBrokerBody into the fingerprint of its topic table and the rest.

    Serializers write fields in field-number order, so the body is ``[topic_config_table entries]
    [data_version][filter_server_list]``. Returns ``(CRC32C of the entries, the remaining bytes)``,
    or None when the body does not start that way (it is then decoded in full as usual). The caller
    must check that the rest holds no further topic entries (fields may come in any order).

    This lets a registration that only changed its DataVersion skip decoding 100,000 topics.
    """
    position, size = 0, len(raw)
    while position < size and raw[position] == 0x0A:  # field 1 (topic_config_table), length-delimited
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
