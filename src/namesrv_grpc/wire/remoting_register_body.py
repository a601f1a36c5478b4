"""The remoting door's registration body: RocketMQ's ``RegisterBrokerBody`` as a Java broker sends it
(plain JSON, or the compressed format of 4.9.4+), decoded by :func:`decode_java_register_body` in the
route-table process, which receives the body bytes as the serving process got them (``bodyCrc32``
checked there, S01). The formats themselves: :mod:`.bodies`."""

from __future__ import annotations

import zlib

from namesrv_grpc.core.body import DEFAULT_MAX_INFLATED_BODY_BYTES, DecodedBody
from namesrv_grpc.core.errors import LimitExceededError, MalformedBodyError
from namesrv_grpc.core.model import DataVersion
from namesrv_grpc.wire import bodies, fastjson

REMOTING_FINGERPRINT_TAG = 1 << 32
"""Added to the CRC32 in a remoting body fingerprint, so it never equals a gRPC one (CRC32C < 2**32)."""


def body_fingerprint(body: bytes, compressed: bool, crc32: int) -> tuple[int, int, bool]:
    """The fingerprint of a remoting body whose CRC32 (& 0x7FFFFFFF) is ``crc32``."""
    return crc32 + REMOTING_FINGERPRINT_TAG, len(body), compressed


_DATA_VERSION_KEY = b'"dataVersion":{'
_DATA_VERSION_FIELDS = frozenset({"counter", "stateVersion", "timestamp"})


def split_data_version(
    body: bytes, compressed: bool, max_inflated: int = DEFAULT_MAX_INFLATED_BODY_BYTES
) -> tuple[int, bytes] | None:
    """Split a Java REGISTER_BROKER body into a fingerprint of everything but its DataVersion, and
    the DataVersion's JSON; None when the body does not have the shape a Java broker writes.

    JSON body: the first ``"dataVersion":{...}`` object (the wrapper's: fastjson writes
    ``filterServerList`` first, then ``topicConfigSerializeWrapper`` starting with ``dataVersion``)
    is cut out. Compressed body: the inflated stream starts with ``int32 length, DataVersion JSON``;
    the rest (topics, filter servers, mappings) is fingerprinted. The caller decodes the DataVersion
    JSON and falls back to a full decode when it is not one. A compressed body that inflates to more
    than ``max_inflated`` bytes (``registerBodyMaxInflatedSize``) is not split (None): the full
    decode refuses it, naming the key.
    """
    if not body:
        return None
    if compressed:
        return _split_compressed(body, max_inflated)
    start = body.find(_DATA_VERSION_KEY)
    end = body.find(b"}", start) if start >= 0 else -1
    if end < 0:
        return None
    head, tail = memoryview(body)[:start], memoryview(body)[end + 1 :]
    return zlib.crc32(tail, zlib.crc32(head)) | (len(head) + len(tail)) << 32 | 1 << 81, body[
        start + len(_DATA_VERSION_KEY) - 1 : end + 1
    ]


_SPLIT_STEP = 1024 * 1024
_DATA_VERSION_JSON_MAX_BYTES = 64 * 1024


def _split_compressed(body: bytes, max_inflated: int) -> tuple[int, bytes] | None:
    """:func:`split_data_version` of a compressed body, inflated 1 MiB at a time: only the DataVersion
    is kept, the rest is fingerprinted as it comes (one call inflating up to 64 MiB held the
    interpreter lock for about 170 ms on a deflate bomb, and the memory until it returned)."""
    inflater = zlib.decompressobj()
    head = b""
    """``int32 length`` + the DataVersion JSON, while incomplete."""
    length = -1
    crc, rest_length, total = 0, 0, 0
    data = body
    try:
        while True:
            piece = inflater.decompress(data, _SPLIT_STEP)
            data = inflater.unconsumed_tail
            total += len(piece)
            if total > max_inflated:
                return None
            if length < 0 or len(head) < 4 + length:
                head += piece
                if length < 0 and len(head) >= 4:
                    length = int.from_bytes(head[:4], "big", signed=True)
                    if not 0 < length <= _DATA_VERSION_JSON_MAX_BYTES:
                        return None
                piece = b""
                if length >= 0 and len(head) > 4 + length:
                    head, piece = head[: 4 + length], head[4 + length :]
            if piece:
                crc = zlib.crc32(piece, crc)
                rest_length += len(piece)
            if inflater.eof or not data:
                break
    except zlib.error:
        return None
    if not inflater.eof or length < 0 or len(head) < 4 + length:
        return None
    return crc | rest_length << 32 | 1 << 80, head[4:]


def _only_data_version(data: bytes) -> DataVersion | None:
    """``data`` as a DataVersion when it is a JSON object of DataVersion's fields only, else None."""
    try:
        value = fastjson.loads(data)
        if not isinstance(value, dict) or not set(value) <= _DATA_VERSION_FIELDS:
            return None
        return bodies.decode_data_version(data)
    except (ValueError, MalformedBodyError):
        return None


def decode_java_register_body(
    body: bytes,
    compressed: bool,
    max_inflated_bytes: int,
    max_topics: int,
    known_fingerprint: int | None,
    rocketmq5: bool = True,
) -> DecodedBody:
    """A Java REGISTER_BROKER body (``bodyCrc32`` checked before) as :class:`DecodedBody`, its topics
    as :class:`~namesrv_grpc.core.compact_topics.CompactTopics` (decoded by
    ``bodies.decode_register_broker_body_compact``). When only its DataVersion differs from the body
    whose fingerprint is ``known_fingerprint`` (a broker's periodic registration after a config
    change elsewhere), only the DataVersion is decoded: ``topic_configs`` is None and the filter
    servers are left empty for the caller to fill in (the same shortcut as the gRPC path's
    ``split_topic_table``). ``rocketmq5``: the sender is at least RocketMQ 5.0 (request version), so
    a compressed body's trailing static-topic mappings are read
    (S40). Raises MalformedBodyError, LimitExceededError, InvalidFieldError."""
    split = split_data_version(body, compressed, max_inflated_bytes)
    if split is not None:
        fingerprint, version_json = split
        if fingerprint == known_fingerprint:
            data_version = _only_data_version(version_json)
            if data_version is not None:
                return DecodedBody(None, data_version, (), fingerprint)
    decoded = bodies.decode_register_broker_body_compact(
        body, compressed=compressed, max_inflated=max_inflated_bytes, rocketmq5=rocketmq5
    )
    if len(decoded.topics) > max_topics:
        raise LimitExceededError(
            "registerBodyMaxTopics",
            f"body holds {len(decoded.topics)} topics, more than {max_topics} (registerBodyMaxTopics)",
        )
    return DecodedBody(
        decoded.topics,
        decoded.data_version,
        decoded.filter_server_list,
        split[0] if split is not None else None,
        decoded.topic_queue_mappings or None,
    )
