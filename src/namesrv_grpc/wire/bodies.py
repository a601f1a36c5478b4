"""RocketMQ's remoting bodies <-> the domain types of :mod:`namesrv_grpc.core.model`.

Each body is written exactly as the Java class of ``apache/rocketmq`` 5.x writes it with fastjson
(``RemotingSerializable.encode``: bean properties in alphabetical order, nulls left out, integer map
keys unquoted; see :mod:`.fastjson`) and read leniently (unknown fields ignored, both JSON forms).

======================================  ==========================================================
Java class (``remoting/.../protocol``)  shape
======================================  ==========================================================
``body/RegisterBrokerBody``             ``{"filterServerList":[..],"topicConfigSerializeWrapper":
                                        {"dataVersion":{..},"topicConfigTable":{name:TopicConfig}}}``
                                        or, compressed, the Deflater stream of ``encode(true)``
``common/TopicConfig``                  ``{"attributes":{},"order":false,"perm":6,"readQueueNums":4,
                                        "topicFilterType":"SINGLE_TAG","topicName":"T",
                                        "topicSysFlag":0,"writeQueueNums":4}``
``DataVersion``                         ``{"counter":1,"stateVersion":0,"timestamp":1700000000000}``
``route/TopicRouteData``                ``{"brokerDatas":[BrokerData],"filterServerTable":{},
                                        "orderTopicConf":"..","queueDatas":[QueueData],
                                        "topicQueueMappingByBroker":{bname:TopicQueueMappingInfo}}``
                                        (5.x; the last only for static topics)
``statictopic/TopicQueueMappingInfo``   ``{"bname":"b","currIdMap":{0:0},"dirty":false,"epoch":..,
                                        "scope":"__global__","topic":"T","totalQueues":8}``
``route/BrokerData``                    ``{"brokerAddrs":{0:"h:p"},"brokerName":"b","cluster":"c",
                                        "enableActingMaster":false,"zoneName":"z"}``
``route/QueueData``                     ``{"brokerName":"b","perm":6,"readQueueNums":4,
                                        "topicSysFlag":0,"writeQueueNums":4}``
``body/ClusterInfo``                    ``{"brokerAddrTable":{name:BrokerData},"clusterAddrTable":
                                        {cluster:[broker names]}}``
``body/KVTable``                        ``{"table":{key:value}}``
``body/TopicList``                      ``{"brokerAddr":"h:p","topicList":[..]}`` (brokerAddr only when set)
``body/GetBrokerMemberGroupResponseBody`` ``{"brokerMemberGroup":{"brokerAddrs":{..},"brokerName":..,"cluster":..}}``
======================================  ==========================================================

The compressed ``RegisterBrokerBody`` (``RegisterBrokerBody.encode(true)`` / ``decode``) is a zlib
(``java.util.zip.Deflater``) stream of, all ints big-endian int32::

    len, DataVersion JSON
    topic count, then per topic: len, TopicConfig.encode()  ("name read write perm FILTER {attrs JSON}";
                                                             4.x stops after FILTER; no sysFlag/order)
    len, filter-server list JSON
    5.x only: mapping count, then per mapping: len, TopicQueueMappingInfo JSON   (read when the
                                                             request's version is at least V5_0_0)

Every decoder raises :class:`~namesrv_grpc.core.errors.MalformedBodyError` with a message naming the
field (``topicConfigTable['T'].perm``) for a body that does not parse or holds a value of the wrong
type or out of range; nothing is half-applied because decoding happens before anything changes.
"""

from __future__ import annotations

import contextlib
import functools
import operator
import re
import struct
import zlib
from array import array
from collections.abc import Iterable, Mapping
from itertools import repeat
from typing import Annotated, Any, Final, Literal, NamedTuple

import jproperties
import msgspec

from namesrv_grpc.core.body import DEFAULT_MAX_INFLATED_BODY_BYTES, RegisterBrokerBody
from namesrv_grpc.core.compact_topics import CompactTopics, QueueNums
from namesrv_grpc.core.errors import MalformedBodyError
from namesrv_grpc.core.model import (
    METADATA_SCOPE_GLOBAL,
    BrokerData,
    ClusterInfo,
    DataVersion,
    QueueData,
    TopicConfig,
    TopicQueueMappingInfo,
    TopicRouteData,
)
from namesrv_grpc.core.validation import MAX_PERM, MAX_QUEUE_NUMS, MAX_TOPIC_LENGTH, is_valid_name, is_valid_topic
from namesrv_grpc.wire.fastjson import FastjsonDecodeError, dumps, dumps_text, loads

__all__ = [
    "MAX_CONFIG_BODY_BYTES",
    "CompactRegisterBody",
    "decode_cluster_info",
    "decode_data_version",
    "decode_kv_table",
    "decode_namesrv_config",
    "decode_register_broker_body",
    "decode_register_broker_body_compact",
    "decode_register_topic_body",
    "decode_topic_list",
    "decode_topic_queue_mapping_info",
    "decode_topic_route_data",
    "encode_broker_member_group",
    "encode_cluster_info",
    "encode_data_version",
    "encode_kv_table",
    "encode_namesrv_config",
    "encode_register_broker_body",
    "encode_topic_config_text",
    "encode_topic_list",
    "encode_topic_route_data",
]

MAX_CONFIG_BODY_BYTES: Final = 1024 * 1024
"""Largest UPDATE_NAMESRV_CONFIG body (1 MiB of properties text)."""

_INT32: Final = struct.Struct(">i")
_INFLATE_STEP: Final = 1 << 20
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_FILTER_TYPES: Final = frozenset({"SINGLE_TAG", "MULTI_TAG"})
_JAVA_INT: Final = re.compile(r"[+-]?[0-9]{1,10}")
_TOPIC_LINE: Final = re.compile(
    r"([^ ]+) ([0-9]{1,5}) ([0-9]{1,5}) ([0-9]{1,2}) (SINGLE_TAG|MULTI_TAG)(?: (.*))?", re.DOTALL
)
"""``TopicConfig.encode()`` of a usual topic; anything else is parsed by ``_decode_topic_config_text``."""
_NO_ATTRIBUTES: Final[Mapping[str, str]] = {}
"""Shared by every topic without attributes (TopicConfig attributes are never mutated)."""


# --------------------------------------------------------------------------------- small readers


def _parse_json(body: bytes, what: str) -> Any:
    try:
        return loads(body)
    except FastjsonDecodeError as exc:
        raise MalformedBodyError(f"{what} body is not JSON: {exc}") from None


def _object(value: Any, path: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise MalformedBodyError(f"{path} must be a JSON object, got {_type_name(value)}")
    return value


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _long(value: Any, path: str, default: int = 0) -> int:
    if value is None:
        return default
    if type(value) is not int or not _INT64_MIN <= value <= _INT64_MAX:
        raise MalformedBodyError(f"{path} must be a 64-bit integer, got {value!r:.60}")
    return value


def _text(value: Any, path: str) -> str:
    if not isinstance(value, str):
        raise MalformedBodyError(f"{path} must be a string, got {_type_name(value)}")
    return value


def _topic_name(value: Any, path: str) -> str:
    """A topic name as RocketMQ's ``TopicValidator`` allows it, the same rule as the gRPC door's."""
    if not isinstance(value, str) or not is_valid_topic(value):
        raise MalformedBodyError(
            f"{path} must be a topic name of 1 to {MAX_TOPIC_LENGTH} characters from %|a-zA-Z0-9_- "
            f"(RocketMQ TopicValidator), got {value!r:.80}"
        )
    return value


def _name(value: Any, path: str) -> str:
    if not isinstance(value, str) or not is_valid_name(value):
        raise MalformedBodyError(
            f"{path} must be a non-empty name of at most 255 characters without control characters "
            f"or surrounding white space, got {value!r:.80}"
        )
    return value


def _bounded(value: Any, path: str, low: int, high: int, default: int) -> int:
    if value is None:
        return default
    if type(value) is not int or not low <= value <= high:
        raise MalformedBodyError(f"{path} must be an integer from {low} to {high}, got {value!r:.60}")
    return value


def _string_map(value: Any, path: str) -> dict[str, str]:
    if value is None:
        return {}
    table = _object(value, path)
    for key, item in table.items():
        if not isinstance(item, str):
            raise MalformedBodyError(f"{path}[{key!r:.60}] must be a string, got {_type_name(item)}")
    return table


def _string_list(value: Any, path: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise MalformedBodyError(f"{path} must be a JSON array, got {_type_name(value)}")
    for index, item in enumerate(value):
        if not isinstance(item, str):
            raise MalformedBodyError(f"{path}[{index}] must be a string, got {_type_name(item)}")
    return value


# ------------------------------------------------------------------------------------ DataVersion


def _data_version(value: Any, path: str) -> DataVersion:
    if value is None:
        return DataVersion()
    table = _object(value, path)
    return DataVersion(
        _long(table.get("stateVersion"), f"{path}.stateVersion"),
        _long(table.get("timestamp"), f"{path}.timestamp"),
        _long(table.get("counter"), f"{path}.counter"),
    )


def _data_version_json(version: DataVersion, *, rocketmq5: bool = True) -> dict[str, int]:
    if rocketmq5:
        return {"counter": version.counter, "stateVersion": version.state_version, "timestamp": version.timestamp}
    return {"counter": version.counter, "timestamp": version.timestamp}


def decode_data_version(body: bytes) -> DataVersion:
    """A ``DataVersion`` JSON body (QUERY_DATA_VERSION); an empty body is ``DataVersion()``.

    Raises MalformedBodyError naming the field."""
    if not body:
        return DataVersion()
    return _data_version(_parse_json(body, "DataVersion"), "dataVersion")


def encode_data_version(version: DataVersion) -> bytes:
    """``DataVersion.encode()``: ``{"counter":..,"stateVersion":..,"timestamp":..}``."""
    return dumps(_data_version_json(version))


# ------------------------------------------------------------------------------ RegisterBrokerBody


_TABLE_PATH: Final = "topicConfigSerializeWrapper.topicConfigTable"


def _topic_config(key: str, config: Any) -> TopicConfig:
    if type(config) is not dict:
        _object(config, f"{_TABLE_PATH}[{key!r:.80}]")
    get = config.get
    name = get("topicName")
    if name is None:
        name = key
    # Absent or null fields take TopicConfig's Java defaults.
    read = get("readQueueNums")
    read = 16 if read is None else read
    write = get("writeQueueNums")
    write = 16 if write is None else write
    perm = get("perm")
    perm = 6 if perm is None else perm
    sys_flag = get("topicSysFlag")
    sys_flag = 0 if sys_flag is None else sys_flag
    order = get("order")
    order = False if order is None else order
    filter_type = get("topicFilterType")
    filter_type = "SINGLE_TAG" if filter_type is None else filter_type
    attributes = get("attributes")
    # One combined check (this runs 100,000 times for a large broker); the detailed checks only
    # run to name what is wrong.
    if not (
        type(read) is int
        and 0 <= read <= MAX_QUEUE_NUMS
        and type(write) is int
        and 0 <= write <= MAX_QUEUE_NUMS
        and type(perm) is int
        and 0 <= perm <= MAX_PERM
        and type(sys_flag) is int
        and 0 <= sys_flag <= _INT32_MAX
        and type(order) is bool
        and type(filter_type) is str
        and filter_type in _FILTER_TYPES
        and isinstance(name, str)
        and is_valid_topic(name)
    ):
        path = f"{_TABLE_PATH}[{key!r:.80}]"
        _topic_name(name, f"{path}.topicName")
        _bounded(read, f"{path}.readQueueNums", 0, MAX_QUEUE_NUMS, 16)
        _bounded(write, f"{path}.writeQueueNums", 0, MAX_QUEUE_NUMS, 16)
        _bounded(perm, f"{path}.perm", 0, MAX_PERM, 6)
        _bounded(sys_flag, f"{path}.topicSysFlag", 0, _INT32_MAX, 0)
        if type(order) is not bool:
            raise MalformedBodyError(f"{path}.order must be true or false, got {order!r:.60}")
        raise MalformedBodyError(f"{path}.topicFilterType must be SINGLE_TAG or MULTI_TAG, got {filter_type!r:.60}")
    return TopicConfig(
        name,
        read,
        write,
        perm,
        sys_flag,
        order,
        filter_type,
        _string_map(attributes, f"{_TABLE_PATH}[{key!r:.80}].attributes") if attributes else _NO_ATTRIBUTES,
    )


def _decode_json_register_body(body: bytes) -> RegisterBrokerBody:
    root = _object(_parse_json(body, "RegisterBrokerBody"), "RegisterBrokerBody")
    wrapper = root.get("topicConfigSerializeWrapper")
    if wrapper is None:
        wrapper = {}
    wrapper = _object(wrapper, "topicConfigSerializeWrapper")
    path = "topicConfigSerializeWrapper"
    data_version = _data_version(wrapper.get("dataVersion"), f"{path}.dataVersion")
    raw_table = wrapper.get("topicConfigTable")
    topics: dict[str, TopicConfig] = {}
    if raw_table is not None:
        for key, value in _object(raw_table, f"{path}.topicConfigTable").items():
            config = _topic_config(key, value)
            topics[config.topic_name] = config
    filter_servers = _string_list(root.get("filterServerList"), "filterServerList")
    mappings: dict[str, TopicQueueMappingInfo] = {}
    raw_mappings = wrapper.get("topicQueueMappingInfoMap")
    if raw_mappings:
        for key, value in _object(raw_mappings, f"{path}.topicQueueMappingInfoMap").items():
            mappings[key] = _mapping(value, f"{path}.topicQueueMappingInfoMap[{key!r:.80}]")
    return RegisterBrokerBody(topics, data_version, tuple(filter_servers), mappings)


def _mapping(value: Any, path: str) -> TopicQueueMappingInfo:
    """A ``TopicQueueMappingInfo`` JSON object (either JSON form; unknown fields such as
    ``TopicQueueMappingDetail.hostedQueues`` ignored). Raises MalformedBodyError naming the field."""
    table = _object(value, path)
    topic = table.get("topic")
    scope = table.get("scope")
    bname = table.get("bname")
    dirty = table.get("dirty", False)
    if type(dirty) is not bool:
        raise MalformedBodyError(f"{path}.dirty must be true or false, got {dirty!r:.60}")
    ids: dict[int, int] = {}
    raw_ids = table.get("currIdMap")
    if raw_ids is not None:
        for key, physical in _object(raw_ids, f"{path}.currIdMap").items():
            if not isinstance(key, str) or not _JAVA_INT.fullmatch(key):
                raise MalformedBodyError(f"{path}.currIdMap key must be a queue id, got {key!r:.60}")
            ids[_bounded(int(key), f"{path}.currIdMap key", 0, _INT32_MAX, 0)] = _bounded(
                physical, f"{path}.currIdMap[{key}]", 0, _INT32_MAX, 0
            )
    return TopicQueueMappingInfo(
        topic="" if topic is None else _text(topic, f"{path}.topic"),
        bname="" if bname is None else _text(bname, f"{path}.bname"),
        scope=METADATA_SCOPE_GLOBAL if scope is None else _text(scope, f"{path}.scope"),
        total_queues=_bounded(table.get("totalQueues"), f"{path}.totalQueues", 0, _INT32_MAX, 0),
        epoch=_long(table.get("epoch"), f"{path}.epoch"),
        dirty=dirty,
        curr_id_map=ids,
    )


def decode_topic_queue_mapping_info(body: bytes) -> TopicQueueMappingInfo:
    """One ``TopicQueueMappingInfo`` JSON document (``topicQueueMapping.json`` entries, compressed
    bodies). Raises MalformedBodyError naming the field."""
    return _mapping(_parse_json(body, "TopicQueueMappingInfo"), "topicQueueMappingInfo")


def _mapping_json(mapping: TopicQueueMappingInfo) -> dict[str, Any]:
    """``TopicQueueMappingInfo`` as fastjson writes it (properties in alphabetical order)."""
    return {
        "bname": mapping.bname,
        "currIdMap": dict(sorted(mapping.curr_id_map.items())),
        "dirty": mapping.dirty,
        "epoch": mapping.epoch,
        "scope": mapping.scope,
        "topic": mapping.topic,
        "totalQueues": mapping.total_queues,
    }


def _inflate(body: bytes, max_inflated: int) -> bytearray:
    """Inflate in steps of at most 1 MiB of output, so that memory never exceeds the cap by more
    than one step (a deflate bomb is stopped as soon as it passes the cap)."""
    inflater = zlib.decompressobj()
    out = bytearray()
    data = body
    try:
        while not inflater.eof:
            piece = inflater.decompress(data, _INFLATE_STEP)
            out += piece
            if len(out) > max_inflated:
                raise MalformedBodyError(
                    f"compressed body inflates to more than the {max_inflated}-byte cap (a deflate bomb?); "
                    "the cap is the largest inflated registration body accepted"
                )
            data = inflater.unconsumed_tail
            if not data and not piece:
                break
    except zlib.error as exc:
        raise MalformedBodyError(f"compressed=true but the body is not a zlib (Deflater) stream: {exc}") from None
    if not inflater.eof:
        raise MalformedBodyError("compressed body is truncated: the zlib stream does not end")
    return out


class _Reader:
    """Sequential reads of the inflated compressed body; every length checked against what is left."""

    __slots__ = ("data", "position")

    def __init__(self, data: bytearray) -> None:
        self.data = data
        self.position = 0

    @property
    def left(self) -> int:
        return len(self.data) - self.position

    def int32(self, what: str) -> int:
        if self.left < 4:
            raise MalformedBodyError(f"compressed body ends inside {what} (offset {self.position})")
        (value,) = _INT32.unpack_from(self.data, self.position)
        self.position += 4
        return int(value)

    def chunk(self, what: str) -> bytes:
        length = self.int32(f"the length of {what}")
        if length < 0 or length > self.left:
            raise MalformedBodyError(
                f"compressed body: {what} length {length} at offset {self.position - 4} "
                f"does not fit the {self.left} bytes left"
            )
        start = self.position
        self.position += length
        return bytes(self.data[start : self.position])


def _decode_topic_config_text(raw: bytes, path: str) -> TopicConfig:
    """``TopicConfig.decode``: ``"name read write perm FILTER[ {attributes JSON}]"`` (space separated)."""
    try:
        text = raw.decode()
    except UnicodeDecodeError as exc:
        raise MalformedBodyError(f"{path} is not UTF-8: {exc.reason} at byte {exc.start}") from None
    fields = text.split(" ", 5)
    if len(fields) < 5:
        raise MalformedBodyError(
            f"{path} must be 'name readQueueNums writeQueueNums perm topicFilterType [attributes]', got {text!r:.120}"
        )
    name, read_text, write_text, perm_text, filter_type = fields[:5]
    path = f"{path}[{name!r:.80}]"
    numbers = []
    for field_name, number_text in (("readQueueNums", read_text), ("writeQueueNums", write_text), ("perm", perm_text)):
        if not _JAVA_INT.fullmatch(number_text):
            raise MalformedBodyError(f"{path}.{field_name} must be an integer, got {number_text!r:.60}")
        numbers.append(int(number_text))
    read, write, perm = numbers
    _topic_name(name, f"{path}.topicName")
    _bounded(read, f"{path}.readQueueNums", 0, MAX_QUEUE_NUMS, 16)
    _bounded(write, f"{path}.writeQueueNums", 0, MAX_QUEUE_NUMS, 16)
    _bounded(perm, f"{path}.perm", 0, MAX_PERM, 6)
    if filter_type not in _FILTER_TYPES:
        raise MalformedBodyError(f"{path}.topicFilterType must be SINGLE_TAG or MULTI_TAG, got {filter_type!r:.60}")
    attributes: Mapping[str, str] = _NO_ATTRIBUTES
    if len(fields) == 6 and fields[5]:
        attributes = _string_map(_parse_json(fields[5].encode(), f"{path}.attributes"), f"{path}.attributes") or (
            _NO_ATTRIBUTES
        )
    return TopicConfig(name, read, write, perm, 0, False, filter_type, attributes)


def _compressed_head(body: bytes, max_inflated: int) -> tuple[_Reader, DataVersion, int]:
    """A compressed body inflated, its DataVersion read and its topic count (checked against what is
    left), the reader at the first topic."""
    reader = _Reader(_inflate(body, max_inflated))
    data_version = _data_version(_parse_json(reader.chunk("dataVersion"), "dataVersion"), "dataVersion")
    count = reader.int32("the topic count")
    if count < 0 or count * 4 > reader.left:
        raise MalformedBodyError(f"compressed body: topic count {count} does not fit the {reader.left} bytes left")
    return reader, data_version, count


def _compressed_topics(reader: _Reader, count: int) -> dict[str, TopicConfig]:
    """The ``count`` topic entries at the reader's position (the reader moves past them)."""
    topics: dict[str, TopicConfig] = {}
    data, position, end = reader.data, reader.position, len(reader.data)
    unpack, line_match, valid_name = _INT32.unpack_from, _TOPIC_LINE.fullmatch, is_valid_topic
    filter_types = {"SINGLE_TAG": "SINGLE_TAG", "MULTI_TAG": "MULTI_TAG"}  # shared strings
    for index in range(count):
        # Fast path per topic (100,000 of them for a large broker); anything unusual goes through
        # _decode_topic_config_text, which names what is wrong.
        length = unpack(data, position)[0] if end - position >= 4 else -1
        if 0 <= length <= end - position - 4:
            start = position + 4
            position = start + length
            match = None
            with contextlib.suppress(UnicodeDecodeError):
                match = line_match(data[start:position].decode())
            if match is not None:
                name, read_text, write_text, perm_text, filter_type, attributes_text = match.groups()
                read, write, perm = int(read_text), int(write_text), int(perm_text)
                if (
                    0 <= read <= MAX_QUEUE_NUMS
                    and 0 <= write <= MAX_QUEUE_NUMS
                    and 0 <= perm <= MAX_PERM
                    and valid_name(name)
                    and (attributes_text is None or attributes_text in ("", "{}"))
                ):
                    topics[name] = TopicConfig(name, read, write, perm, 0, False, filter_types[filter_type])
                    continue
            reader.position = start - 4
        else:
            reader.position = position
        config = _decode_topic_config_text(reader.chunk(f"topic config #{index}"), "topicConfigTable")
        topics[config.topic_name] = config
        position = reader.position
    reader.position = position
    return topics


def _compressed_tail(reader: _Reader, with_mappings: bool) -> tuple[tuple[str, ...], dict[str, TopicQueueMappingInfo]]:
    """The filter servers and (``with_mappings``) the static-topic mappings after the topics."""
    filter_servers = _string_list(_parse_json(reader.chunk("filterServerList"), "filterServerList"), "filterServerList")
    mappings: dict[str, TopicQueueMappingInfo] = {}
    if with_mappings and reader.left:  # RocketMQ 5.x: the topic-queue mappings (static topics, S40)
        count = reader.int32("the topic queue mapping count")
        if count < 0 or count * 4 > reader.left:
            raise MalformedBodyError(
                f"compressed body: topic queue mapping count {count} does not fit the {reader.left} bytes left"
            )
        for index in range(count):
            mapping = _mapping(
                _parse_json(reader.chunk(f"topic queue mapping #{index}"), "topicQueueMappingInfo"),
                f"topicQueueMappingInfo #{index}",
            )
            mappings[mapping.topic] = mapping  # keyed by the mapping's own topic, as RocketMQ does
        if reader.left:
            raise MalformedBodyError(f"compressed body has {reader.left} bytes after its last section")
    return tuple(filter_servers), mappings


def _decode_compressed_register_body(body: bytes, max_inflated: int, with_mappings: bool) -> RegisterBrokerBody:
    reader, data_version, count = _compressed_head(body, max_inflated)
    topics = _compressed_topics(reader, count)
    filter_servers, mappings = _compressed_tail(reader, with_mappings)
    return RegisterBrokerBody(topics, data_version, filter_servers, mappings)


_TOPIC_TEXTS: Final = re.compile(
    r"(?:[%|a-zA-Z0-9_-]{1,127} [0-9]{1,5} [0-9]{1,5} [0-9]{1,2} (?:SINGLE_TAG|MULTI_TAG)(?: \{\}| )?(?:\n|\Z))+"
)
"""Newline-separated ``TopicConfig.encode()`` texts of topics without attributes (4.x: no attributes at
all, 5.x: ``{}``): what :func:`_compressed_topics` reads without ``_decode_topic_config_text``."""
_ENTRY_START: Final = "\x00\x00\x00"
"""The first three bytes of a topic entry whose text is shorter than 256 bytes (all usual ones)."""


def _compressed_topics_bulk(
    data: bytearray, position: int, count: int
) -> tuple[list[str], list[QueueNums], int] | None:
    """The ``count`` topic entries at ``position`` read with a few C-level passes instead of a loop:
    the result of :func:`_compressed_topics` in compact form, and the position after them. None
    unless every entry is a usual one (a text of fewer than 256 bytes, without attributes, numbers in
    range, a valid and unique name): the caller then reads them with :func:`_compressed_topics`.

    The bytes are read as Latin-1 (one code point per byte) and split at each entry's int32 length,
    whose first three bytes are zero; each piece is then the length's last byte and the text, which
    must be as long as it says."""
    if count == 0:
        return [], [], position
    section = data[position : position + 4 + 259 * count].decode("latin-1")  # an entry has at most 259 bytes
    pieces = section.split(_ENTRY_START, count + 1)
    if len(pieces) < count + 1 or pieces[0] or "" in pieces[1 : count + 1]:
        return None
    pieces = pieces[1 : count + 1]
    pieces[-1] = pieces[-1][: 1 + ord(pieces[-1][0])]  # the last one runs on into the filter servers
    if list(map(ord, map(operator.itemgetter(0), pieces))) != list(map(operator.sub, map(len, pieces), repeat(1))):
        return None  # a length that is not its text's
    texts = "\n".join(map(operator.itemgetter(slice(1, None)), pieces))
    if texts.count("\n") != count - 1 or _TOPIC_TEXTS.fullmatch(texts) is None:
        return None
    fields = texts.replace(" {}", "").split()  # five per topic: name read write perm filter
    reads, writes, perms = (list(map(int, fields[column::5])) for column in (1, 2, 3))
    if max(reads) > MAX_QUEUE_NUMS or max(writes) > MAX_QUEUE_NUMS or max(perms) > MAX_PERM:
        return None
    names = fields[0::5]
    if len(set(names)) != count:
        return None  # a topic twice: the reference keeps its first position, last value
    nums = list(zip(reads, writes, perms, repeat(0, count), strict=True))
    return names, nums, position + 4 * count + sum(map(len, pieces)) - count


def _decode_compressed_register_body_compact(
    body: bytes, max_inflated: int, with_mappings: bool
) -> CompactRegisterBody:
    """:func:`_decode_compressed_register_body` in compact form: the same result and errors, the topic
    entries parsed in bulk when they are all usual ones."""
    reader, data_version, count = _compressed_head(body, max_inflated)
    bulk = _compressed_topics_bulk(reader.data, reader.position, count)
    if bulk is None:
        topics = CompactTopics.from_topic_configs(_compressed_topics(reader, count))
    else:
        names, nums, reader.position = bulk
        topics = CompactTopics.from_queue_nums(names, nums)
    filter_servers, mappings = _compressed_tail(reader, with_mappings)
    return CompactRegisterBody(topics, data_version, filter_servers, mappings)


def decode_register_broker_body(
    body: bytes,
    *,
    compressed: bool,
    max_inflated: int = DEFAULT_MAX_INFLATED_BODY_BYTES,
    rocketmq5: bool = True,
) -> RegisterBrokerBody:
    """A REGISTER_BROKER body as a Java broker sends it (``RegisterBrokerBody.decode``): JSON, or with
    ``compressed`` (header ``compressed=true``) the Deflater format of the module docstring.

    An empty body is no topics and ``DataVersion()`` (S02). A topic without ``topicName`` takes its
    map key. The compressed form is inflated with at most ``max_inflated`` bytes of output (a deflate
    bomb costs no more than that) and carries no ``topicSysFlag``/``order`` (they read as 0/false, as
    in RocketMQ). Static-topic mappings (S40) come from the wrapper's ``topicQueueMappingInfoMap``
    (JSON, keyed by topic) or the compressed body's trailing section, read only with ``rocketmq5``
    (the request's version is at least ``V5_0_0``; older senders' trailing bytes are ignored, as
    RocketMQ does) and keyed by each mapping's ``topic``. Other unknown JSON fields are ignored.

    CPU-heavy for large bodies (100,000 topics): call it off the event loop. Raises MalformedBodyError.
    """
    if not body:
        return RegisterBrokerBody({}, DataVersion(), ())
    if compressed:
        return _decode_compressed_register_body(body, max_inflated, rocketmq5)
    return _decode_json_register_body(body)


# ------------------------------------------------------- RegisterBrokerBody, straight to compact form


class CompactRegisterBody(NamedTuple):
    """A REGISTER_BROKER body as the route table applies it: the topics in compact form (names and
    QueueNums only, :class:`~namesrv_grpc.core.compact_topics.CompactTopics`), the DataVersion, the
    filter servers and the static-topic mappings (topic -> mapping, S40)."""

    topics: CompactTopics
    data_version: DataVersion
    filter_server_list: tuple[str, ...]
    topic_queue_mappings: Mapping[str, TopicQueueMappingInfo]


_Int64 = Annotated[int, msgspec.Meta(ge=_INT64_MIN, le=_INT64_MAX)]
_QueueCount = Annotated[int, msgspec.Meta(ge=0, le=MAX_QUEUE_NUMS)]


class _TopicConfigJson(msgspec.Struct, gc=False):
    """``TopicConfig`` as :func:`_topic_config` accepts it (types and ranges checked by msgspec, in
    C). A null number (which fastjson never writes) is left to the reference decoder."""

    topicName: str | None = None
    readQueueNums: _QueueCount = 16
    writeQueueNums: _QueueCount = 16
    perm: Annotated[int, msgspec.Meta(ge=0, le=MAX_PERM)] = 6
    topicSysFlag: Annotated[int, msgspec.Meta(ge=0, le=_INT32_MAX)] = 0
    order: bool | None = None
    topicFilterType: Literal["SINGLE_TAG", "MULTI_TAG"] | None = None
    attributes: dict[str, str] | None = None


class _DataVersionJson(msgspec.Struct, gc=False):
    stateVersion: _Int64 | None = None
    timestamp: _Int64 | None = None
    counter: _Int64 | None = None


class _WrapperJson(msgspec.Struct, gc=False):
    dataVersion: _DataVersionJson | None = None
    topicConfigTable: dict[str, _TopicConfigJson] | None = None
    topicQueueMappingInfoMap: Any = None
    """Read by :func:`_mapping` (small; its fastjson form with unquoted integer keys is not strict
    JSON and goes to the reference decoder anyway)."""


class _RegisterBrokerBodyJson(msgspec.Struct, gc=False):
    filterServerList: list[str] | None = None
    topicConfigSerializeWrapper: _WrapperJson | None = None


_REGISTER_BODY_JSON: Final = msgspec.json.Decoder(_RegisterBrokerBodyJson)
_TOPIC_NAMES: Final = re.compile(r"[%|a-zA-Z0-9_-]{1,127}(?:\n[%|a-zA-Z0-9_-]{1,127})*")
"""Newline-separated names, each a whole topic name (``validation.TOPIC_PATTERN``), checked at once."""
_TOPIC_NAME_OF: Final = operator.attrgetter("topicName")
_QUEUE_NUMS_OF: Final = operator.attrgetter("readQueueNums", "writeQueueNums", "perm", "topicSysFlag")


def _decode_json_register_body_compact(body: bytes) -> CompactRegisterBody | None:
    """A plain JSON REGISTER_BROKER body decoded by msgspec straight into compact form: the same
    result as :func:`_decode_json_register_body` (the reference), about five times faster for a large
    body (no dict per topic, types and ranges checked in C, names checked by one regex match).

    None when the fast path does not apply and the reference must decode it: not strict JSON
    (fastjson's unquoted integer keys, NaN, lone surrogate escapes), a value the reference refuses
    (it names the field), one the reference reads leniently (a null number, which means the Java
    default; a falsy non-object ``attributes``), two entries naming the same topic. Raises
    MalformedBodyError only for the static-topic mappings, exactly as the reference does."""
    if not body.isascii():
        try:
            body.decode()  # msgspec checks UTF-8 only in the strings it keeps, the reference everywhere
        except UnicodeDecodeError:
            return None
    try:
        root = _REGISTER_BODY_JSON.decode(body)
    except (msgspec.DecodeError, ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        return None
    wrapper = root.topicConfigSerializeWrapper
    version = None if wrapper is None else wrapper.dataVersion
    data_version = (
        DataVersion()
        if version is None
        else DataVersion(version.stateVersion or 0, version.timestamp or 0, version.counter or 0)
    )
    table = None if wrapper is None else wrapper.topicConfigTable
    names: list[str] = []
    nums: list[tuple[int, int, int, int]] = []
    if table:
        keys = list(table)
        configs = list(table.values())
        names = list(map(_TOPIC_NAME_OF, configs))
        if names == keys:
            names = keys  # the same strings, their hashes already worked out
        else:
            names = [key if name is None else name for key, name in zip(keys, names, strict=True)]
            if names != keys and len(set(names)) != len(names):
                return None  # two entries name one topic: the reference keeps the first position, last value
        joined = "\n".join(names)
        if joined.count("\n") != len(names) - 1 or _TOPIC_NAMES.fullmatch(joined) is None:
            return None  # a name TopicValidator refuses: the reference names it
        nums = list(map(_QUEUE_NUMS_OF, configs))
    mappings: dict[str, TopicQueueMappingInfo] = {}
    raw_mappings = None if wrapper is None else wrapper.topicQueueMappingInfoMap
    if raw_mappings:
        path = "topicConfigSerializeWrapper.topicQueueMappingInfoMap"
        for key, value in _object(raw_mappings, path).items():
            mappings[key] = _mapping(value, f"{path}[{key!r:.80}]")
    return CompactRegisterBody(
        CompactTopics.from_queue_nums(names, nums), data_version, tuple(root.filterServerList or ()), mappings
    )


def decode_register_broker_body_compact(
    body: bytes,
    *,
    compressed: bool,
    max_inflated: int = DEFAULT_MAX_INFLATED_BODY_BYTES,
    rocketmq5: bool = True,
) -> CompactRegisterBody:
    """:func:`decode_register_broker_body` with the topics in compact form, what the route table
    applies (the remoting door decodes every Java broker's body with it). The same result and
    the same errors: a plain JSON body is decoded by msgspec (strict JSON, the reference's checks as
    a typed schema); whatever that does not decode (fastjson's unquoted integer keys, a bad value) is
    decoded by the reference decoder, which reads fastjson's forms and names what is wrong. A
    compressed body is decoded by the reference. Raises MalformedBodyError."""
    if not body:
        return CompactRegisterBody(CompactTopics([], array("i")), DataVersion(), (), {})
    if compressed:
        return _decode_compressed_register_body_compact(body, max_inflated, rocketmq5)
    fast = _decode_json_register_body_compact(body)
    if fast is not None:
        return fast
    decoded = decode_register_broker_body(body, compressed=compressed, max_inflated=max_inflated, rocketmq5=rocketmq5)
    return CompactRegisterBody(
        CompactTopics.from_topic_configs(decoded.topic_config_table),
        decoded.data_version,
        decoded.filter_server_list,
        decoded.topic_queue_mappings,
    )


def _topic_config_json(config: TopicConfig, rocketmq5: bool) -> dict[str, Any]:
    result: dict[str, Any] = {}
    if rocketmq5:
        result["attributes"] = dict(config.attributes)
    result.update(
        order=config.order,
        perm=config.perm,
        readQueueNums=config.read_queue_nums,
        topicFilterType=config.topic_filter_type,
        topicName=config.topic_name,
        topicSysFlag=config.topic_sys_flag,
        writeQueueNums=config.write_queue_nums,
    )
    return result


def encode_topic_config_text(config: TopicConfig, *, rocketmq5: bool = True) -> str:
    """``TopicConfig.encode()``: ``"name read write perm FILTER {attributes JSON}"`` (4.x: no attributes).

    Raises ValueError for a topic name with a space (the format is space separated; RocketMQ's
    topic names never have one)."""
    if " " in config.topic_name:
        raise ValueError(f"topic name {config.topic_name!r} has a space: TopicConfig.encode() cannot carry it")
    text = (
        f"{config.topic_name} {config.read_queue_nums} {config.write_queue_nums} {config.perm} "
        f"{config.topic_filter_type}"
    )
    if rocketmq5:
        text += " " + dumps(dict(config.attributes)).decode()
    return text


def encode_register_broker_body(
    topic_configs: Mapping[str, TopicConfig],
    data_version: DataVersion,
    filter_servers: Iterable[str] = (),
    *,
    compressed: bool,
    rocketmq5: bool = True,
    topic_queue_mappings: Mapping[str, TopicQueueMappingInfo] | None = None,
) -> bytes:
    """A REGISTER_BROKER body exactly as a Java broker writes it (``RegisterBrokerBody.encode(compressed)``).

    ``topic_queue_mappings`` (topic -> mapping, 5.x static topics) fill ``topicQueueMappingInfoMap``
    (JSON) or the trailing mapping section (compressed).

    JSON: ``{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":..,
    "mappingDataVersion":..,"topicConfigTable":..,"topicQueueMappingDetailMap":{},
    "topicQueueMappingInfoMap":{}}}`` (5.x's ``TopicConfigAndMappingSerializeWrapper``; with
    ``rocketmq5=False`` a 4.9 broker's shape: no mapping fields, no attributes, no stateVersion).
    Compressed: ``zlib`` level 9 (``Deflater.BEST_COMPRESSION``) of the binary layout in the module
    docstring. Send ``zlib.crc32(body) & 0x7FFFFFFF`` as ``bodyCrc32``.
    """
    filters = list(filter_servers)
    if compressed:
        parts: list[bytes] = []

        def chunk(data: bytes) -> None:
            parts.extend((_INT32.pack(len(data)), data))

        chunk(dumps(_data_version_json(data_version, rocketmq5=rocketmq5)))
        parts.append(_INT32.pack(len(topic_configs)))
        for config in topic_configs.values():
            chunk(encode_topic_config_text(config, rocketmq5=rocketmq5).encode("utf-8", "replace"))
        chunk(dumps(filters))
        if rocketmq5:
            mappings = list((topic_queue_mappings or {}).values())
            parts.append(_INT32.pack(len(mappings)))
            for mapping in mappings:
                chunk(dumps(_mapping_json(mapping)))
        return zlib.compress(b"".join(parts), 9)
    wrapper: dict[str, Any] = {"dataVersion": _data_version_json(data_version, rocketmq5=rocketmq5)}
    if rocketmq5:
        wrapper["mappingDataVersion"] = _data_version_json(DataVersion(timestamp=data_version.timestamp))
    wrapper["topicConfigTable"] = {
        name: _topic_config_json(config, rocketmq5) for name, config in topic_configs.items()
    }
    if rocketmq5:
        wrapper["topicQueueMappingDetailMap"] = {}
        wrapper["topicQueueMappingInfoMap"] = {
            topic: _mapping_json(mapping) for topic, mapping in sorted((topic_queue_mappings or {}).items())
        }
    return dumps({"filterServerList": filters, "topicConfigSerializeWrapper": wrapper})


# ----------------------------------------------------------------------------------- TopicRouteData


def _broker_data_json(broker: BrokerData) -> dict[str, Any]:
    return {
        "brokerAddrs": dict(sorted(broker.broker_addrs.items())),
        "brokerName": broker.broker_name,
        "cluster": broker.cluster,
        "enableActingMaster": broker.enable_acting_master,
        "zoneName": broker.zone_name or None,
    }


def _queue_data_json(queue: QueueData) -> dict[str, Any]:
    return {
        "brokerName": queue.broker_name,
        "perm": queue.perm,
        "readQueueNums": queue.read_queue_nums,
        "topicSysFlag": queue.topic_sys_flag,
        "writeQueueNums": queue.write_queue_nums,
    }


ROUTE_FRAGMENTS_CACHED: Final = 16_384
"""Encoded QueueData and BrokerData kept per form (:func:`encode_topic_route_data`): a route that is
not cached yet is mostly these, shared by every topic of the same broker names (a 16-broker route
of RocketMQ's route workloads took ~300 µs to write value by value)."""


@functools.lru_cache(maxsize=ROUTE_FRAGMENTS_CACHED, typed=True)
def _queue_data_text(queue: QueueData, standard: bool) -> str:
    return dumps_text(_queue_data_json(queue), standard=standard)


@functools.lru_cache(maxsize=ROUTE_FRAGMENTS_CACHED, typed=True)
def _broker_data_text(
    cluster: str,
    broker_name: str,
    broker_addrs: tuple[tuple[int, str], ...],
    enable_acting_master: bool,
    zone_name: str,
    standard: bool,
) -> str:
    broker = BrokerData(
        cluster, broker_name, dict(broker_addrs), zone_name=zone_name, enable_acting_master=enable_acting_master
    )
    return dumps_text(_broker_data_json(broker), standard=standard)


def encode_topic_route_data(route: TopicRouteData, *, standard_json: bool = False) -> bytes:
    """GET_ROUTEINFO_BY_TOPIC's body (``TopicRouteData.encode()``), ``orderTopicConf`` only when set,
    ``topicQueueMappingByBroker`` only for a static topic (S40; RocketMQ leaves it null otherwise).

    ``standard_json`` gives the form ``ClientRequestProcessor`` writes when the request's version is
    at least ``V4_9_4`` or its header says ``acceptStandardJsonOnly=true`` (quoted integer keys,
    BrowserCompatible escaping); otherwise fastjson's default (``{0:"h:p"}``).

    The same bytes as :func:`encode_topic_route_data_plain` (``tests/test_remoting_bodies.py``),
    joined from cached texts of its QueueData and BrokerData (:data:`ROUTE_FRAGMENTS_CACHED`).
    """
    standard = standard_json
    brokers = ",".join(
        [
            _broker_data_text(
                b.cluster,
                b.broker_name,
                tuple(sorted(b.broker_addrs.items())),
                b.enable_acting_master,
                b.zone_name,
                standard,
            )
            for b in route.broker_datas
        ]
    )
    queues = ",".join([_queue_data_text(q, standard) for q in route.queue_datas])
    filter_servers = {addr: list(servers) for addr, servers in route.filter_server_table.items()}
    parts = ['{"brokerDatas":[', brokers, '],"filterServerTable":', dumps_text(filter_servers, standard=standard)]
    if route.order_topic_conf:
        parts += [',"orderTopicConf":', dumps_text(route.order_topic_conf, standard=standard)]
    parts += [',"queueDatas":[', queues, "]"]
    if route.topic_queue_mapping_by_broker:
        mappings = {
            bname: _mapping_json(mapping) for bname, mapping in sorted(route.topic_queue_mapping_by_broker.items())
        }
        parts += [',"topicQueueMappingByBroker":', dumps_text(mappings, standard=standard)]
    parts.append("}")
    return "".join(parts).encode("utf-8", "replace")


def encode_topic_route_data_plain(route: TopicRouteData, *, standard_json: bool = False) -> bytes:
    """:func:`encode_topic_route_data` written value by value with no cache (what it is checked against)."""
    return dumps(
        {
            "brokerDatas": [_broker_data_json(broker) for broker in route.broker_datas],
            "filterServerTable": {addr: list(servers) for addr, servers in route.filter_server_table.items()},
            "orderTopicConf": route.order_topic_conf or None,
            "queueDatas": [_queue_data_json(queue) for queue in route.queue_datas],
            "topicQueueMappingByBroker": {
                bname: _mapping_json(mapping) for bname, mapping in sorted(route.topic_queue_mapping_by_broker.items())
            }
            if route.topic_queue_mapping_by_broker
            else None,
        },
        standard=standard_json,
    )


def _broker_data(value: Any, path: str) -> BrokerData:
    table = _object(value, path)
    addrs: dict[int, str] = {}
    raw_addrs = table.get("brokerAddrs")
    for key, addr in _string_map(raw_addrs, f"{path}.brokerAddrs").items():
        if not re.fullmatch(r"-?[0-9]{1,19}", key):
            raise MalformedBodyError(f"{path}.brokerAddrs key must be a broker id, got {key!r:.60}")
        addrs[int(key)] = addr
    zone = table.get("zoneName")
    acting = table.get("enableActingMaster", False)
    if type(acting) is not bool:
        raise MalformedBodyError(f"{path}.enableActingMaster must be true or false, got {acting!r:.60}")
    return BrokerData(
        _text(table.get("cluster", ""), f"{path}.cluster"),
        _name(table.get("brokerName"), f"{path}.brokerName"),
        addrs,
        "" if zone is None else _text(zone, f"{path}.zoneName"),
        acting,
    )


def _queue_data(value: Any, path: str) -> QueueData:
    table = _object(value, path)
    return QueueData(
        _name(table.get("brokerName"), f"{path}.brokerName"),
        _bounded(table.get("readQueueNums"), f"{path}.readQueueNums", 0, MAX_QUEUE_NUMS, 0),
        _bounded(table.get("writeQueueNums"), f"{path}.writeQueueNums", 0, MAX_QUEUE_NUMS, 0),
        _bounded(table.get("perm"), f"{path}.perm", 0, MAX_PERM, 0),
        _bounded(table.get("topicSysFlag"), f"{path}.topicSysFlag", 0, _INT64_MAX, 0),
    )


def _list(value: Any, path: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise MalformedBodyError(f"{path} must be a JSON array, got {_type_name(value)}")
    return value


def decode_topic_route_data(body: bytes) -> TopicRouteData:
    """A ``TopicRouteData`` JSON body (either form). Raises MalformedBodyError naming the field."""
    root = _object(_parse_json(body, "TopicRouteData"), "TopicRouteData")
    filters = _object(root.get("filterServerTable") or {}, "filterServerTable")
    order_conf = root.get("orderTopicConf")
    raw_mappings = root.get("topicQueueMappingByBroker")
    mappings = {
        bname: _mapping(value, f"topicQueueMappingByBroker[{bname!r:.60}]")
        for bname, value in _object(raw_mappings or {}, "topicQueueMappingByBroker").items()
    }
    return TopicRouteData(
        tuple(_queue_data(q, f"queueDatas[{i}]") for i, q in enumerate(_list(root.get("queueDatas"), "queueDatas"))),
        tuple(
            _broker_data(b, f"brokerDatas[{i}]") for i, b in enumerate(_list(root.get("brokerDatas"), "brokerDatas"))
        ),
        {addr: tuple(_string_list(servers, f"filterServerTable[{addr!r:.60}]")) for addr, servers in filters.items()},
        "" if order_conf is None else _text(order_conf, "orderTopicConf"),
        mappings,
    )


def decode_register_topic_body(body: bytes) -> list[QueueData]:
    """REGISTER_TOPIC_IN_NAMESRV's body: a ``TopicRouteData`` whose ``queueDatas`` are registered.

    Raises MalformedBodyError naming the field (an empty body is a MalformedBodyError too)."""
    if not body:
        raise MalformedBodyError("REGISTER_TOPIC_IN_NAMESRV needs a TopicRouteData body with queueDatas")
    return list(decode_topic_route_data(body).queue_datas)


# ------------------------------------------------------------------------- ClusterInfo and the rest


def encode_cluster_info(info: ClusterInfo) -> bytes:
    """GET_BROKER_CLUSTER_INFO's body (``ClusterInfo.encode()``; always the fastjson form)."""
    return dumps(
        {
            "brokerAddrTable": {name: _broker_data_json(broker) for name, broker in info.broker_addr_table.items()},
            "clusterAddrTable": {cluster: list(names) for cluster, names in info.cluster_addr_table.items()},
        }
    )


def decode_cluster_info(body: bytes) -> ClusterInfo:
    """A ``ClusterInfo`` JSON body. Raises MalformedBodyError naming the field."""
    root = _object(_parse_json(body, "ClusterInfo"), "ClusterInfo")
    brokers = _object(root.get("brokerAddrTable") or {}, "brokerAddrTable")
    clusters = _object(root.get("clusterAddrTable") or {}, "clusterAddrTable")
    return ClusterInfo(
        {name: _broker_data(value, f"brokerAddrTable[{name!r:.60}]") for name, value in brokers.items()},
        {name: tuple(_string_list(value, f"clusterAddrTable[{name!r:.60}]")) for name, value in clusters.items()},
    )


def encode_kv_table(table: Mapping[str, str]) -> bytes:
    """``KVTable.encode()``: ``{"table":{key:value}}`` (GET_KVLIST_BY_NAMESPACE, REGISTER_BROKER's answer)."""
    return dumps({"table": dict(table)})


def decode_kv_table(body: bytes) -> dict[str, str]:
    """A ``KVTable`` JSON body. Raises MalformedBodyError naming the field."""
    root = _object(_parse_json(body, "KVTable"), "KVTable")
    return dict(_string_map(root.get("table"), "table"))


def encode_topic_list(topics: Iterable[str], broker_addr: str | None = None) -> bytes:
    """``TopicList.encode()``: ``{"brokerAddr":"h:p","topicList":[..]}``; ``brokerAddr`` only when
    given (GET_SYSTEM_TOPIC_LIST_FROM_NS sets it; fastjson leaves out the null)."""
    return dumps({"brokerAddr": broker_addr, "topicList": list(topics)})


def decode_topic_list(body: bytes) -> tuple[list[str], str | None]:
    """A ``TopicList`` JSON body: ``(topics, brokerAddr or None)``. Raises MalformedBodyError."""
    root = _object(_parse_json(body, "TopicList"), "TopicList")
    addr = root.get("brokerAddr")
    return list(_string_list(root.get("topicList"), "topicList")), None if addr is None else _text(addr, "brokerAddr")


def encode_broker_member_group(cluster: str, broker_name: str, broker_addrs: Mapping[int, str]) -> bytes:
    """GET_BROKER_MEMBER_GROUP's body (``GetBrokerMemberGroupResponseBody``)."""
    return dumps(
        {
            "brokerMemberGroup": {
                "brokerAddrs": dict(sorted(broker_addrs.items())),
                "brokerName": broker_name,
                "cluster": cluster,
            }
        }
    )


# ------------------------------------------------------------------------- NameServer configuration


def decode_namesrv_config(body: bytes, *, max_bytes: int = MAX_CONFIG_BODY_BYTES) -> dict[str, str]:
    """UPDATE_NAMESRV_CONFIG's body: Java properties text (``MixAll.string2Properties``), read with
    jproperties; keys and values stripped as ``MixAll.properties2Object`` trims them. UTF-8 (Java reads
    ISO-8859-1 here; a UTF-8 client's non-ASCII values survive with us).

    Raises MalformedBodyError (larger than ``max_bytes``, not UTF-8, not properties text)."""
    if len(body) > max_bytes:
        raise MalformedBodyError(f"config body of {len(body)} bytes is larger than {max_bytes}")
    try:
        body.decode()
    except UnicodeDecodeError as exc:
        raise MalformedBodyError(f"config body is not UTF-8: {exc.reason} at byte {exc.start}") from None
    properties = jproperties.Properties()
    try:
        properties.load(body, encoding="utf-8")
    except Exception as exc:  # jproperties raises several error types for broken escapes
        raise MalformedBodyError(f"config body is not Java properties text: {exc}") from None
    return {str(key).strip(): str(value.data).strip() for key, value in properties.items()}


def encode_namesrv_config(config: Mapping[str, str]) -> bytes:
    """GET_NAMESRV_CONFIG's body (``MixAll.properties2String``): ``key=value\\n`` per entry, keys sorted."""
    return "".join(f"{key}={value}\n" for key, value in sorted(config.items())).encode("utf-8", "replace")
