"""Property-based fuzzing of everything the NameServer and the agent parse from outside (issue 10):
registration bodies, broker.conf properties, topics.json and kvConfig.json. Any input yields a
result or the parser's documented error type, never another exception."""

from __future__ import annotations

import contextlib
import json
import zlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from broker_agent.config import load_broker_config
from broker_agent.topics import TopicsFileError, parse_topics_json
from namesrv.v1 import types_pb2
from namesrv_grpc.core.errors import (
    BodyChecksumMismatchError,
    InvalidFieldError,
    LimitExceededError,
    MalformedBodyError,
)
from namesrv_grpc.core.kvconfig import KVConfigFileError, load_config_table
from namesrv_grpc.core.model import DataVersion, TopicConfig
from namesrv_grpc.runtime.properties import ConfigError, read_properties
from namesrv_grpc.wire.grpc_register_body import crc32c, decode_body, encode_body, parse_body

BODY_ERRORS = (MalformedBodyError, InvalidFieldError, LimitExceededError, BodyChecksumMismatchError)
"""What :func:`decode_body` documents it raises."""

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

topic_names = st.text(alphabet="%|abcXYZ019_-", min_size=1, max_size=20)
topic_configs = st.builds(
    TopicConfig,
    topic_name=topic_names,
    read_queue_nums=st.integers(0, 65535),
    write_queue_nums=st.integers(0, 65535),
    perm=st.integers(0, 15),
    topic_sys_flag=st.integers(0, 2**31 - 1),
    order=st.booleans(),
    topic_filter_type=st.sampled_from(["SINGLE_TAG", "MULTI_TAG"]),
    attributes=st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=2),
)
versions = st.builds(DataVersion, st.integers(0, 2**63 - 1), st.integers(0, 2**63 - 1), st.integers(0, 2**63 - 1))


def _valid_body(configs: list[TopicConfig], version: DataVersion, compress: bool) -> bytes:
    return encode_body({c.topic_name: c for c in configs}, version, ["10.0.0.1:30000"], compress=compress)[0]


# --------------------------------------------------------------------------- registration bodies


@FUZZ
@given(data=st.binary(max_size=2048), compressed=st.booleans())
def test_any_bytes_decode_or_raise_a_body_error(data: bytes, compressed: bool) -> None:
    try:
        result = decode_body(data, crc32c(data), compressed=compressed)
    except BODY_ERRORS:
        return
    assert isinstance(result.topic_config_table, dict)


@FUZZ
@given(data=st.binary(max_size=2048))
def test_any_zlib_stream_decodes_or_raises_a_body_error(data: bytes) -> None:
    body = zlib.compress(data)
    with contextlib.suppress(*BODY_ERRORS):
        parse_body(body, compressed=True)


@FUZZ
@given(
    configs=st.lists(topic_configs, max_size=8),
    version=versions,
    compress=st.booleans(),
    cut=st.integers(0, 10_000),
    flips=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=4),
)
def test_mutated_valid_bodies_decode_or_raise_a_body_error(
    configs: list[TopicConfig], version: DataVersion, compress: bool, cut: int, flips: list[tuple[int, int]]
) -> None:
    body = bytearray(_valid_body(configs, version, compress))
    for position, value in flips:
        if body:
            body[position % len(body)] = value
    mutated = bytes(body[: cut % (len(body) + 1)])
    with contextlib.suppress(*BODY_ERRORS):
        parse_body(mutated, compressed=compress)


@FUZZ
@given(configs=st.lists(topic_configs, max_size=30), version=versions, compress=st.booleans())
def test_valid_bodies_round_trip(configs: list[TopicConfig], version: DataVersion, compress: bool) -> None:
    expected = {c.topic_name: c for c in configs}
    decoded = parse_body(_valid_body(configs, version, compress), compressed=compress)
    assert decoded.topic_config_table == expected
    assert decoded.data_version == version


@FUZZ
@given(configs=st.lists(topic_configs, min_size=1, max_size=30), version=versions)
def test_field_order_does_not_matter(configs: list[TopicConfig], version: DataVersion) -> None:
    """Fields may come in any order on the wire; the batched decoder gives what protobuf gives."""
    message = types_pb2.RegisterBrokerBody()
    message.ParseFromString(_valid_body(configs, version, False))
    head = types_pb2.RegisterBrokerBody(data_version=message.data_version).SerializeToString()
    tail = types_pb2.RegisterBrokerBody(filter_server_list=message.filter_server_list).SerializeToString()
    entries = types_pb2.RegisterBrokerBody()
    entries.topic_config_table.MergeFrom(message.topic_config_table)
    reordered = head + entries.SerializeToString() + tail
    decoded = parse_body(reordered, compressed=False)
    assert decoded.topic_config_table == {c.topic_name: c for c in configs}
    assert decoded.data_version == version
    assert decoded.filter_server_list == ("10.0.0.1:30000",)


def test_topic_and_inflated_limits_are_enforced() -> None:
    configs = {f"T{i}": TopicConfig(f"T{i}") for i in range(50)}
    body = encode_body(configs, DataVersion())[0]
    with pytest.raises(LimitExceededError, match="registerBodyMaxTopics"):
        parse_body(body, compressed=False, max_topics=49)
    assert len(parse_body(body, compressed=False, max_topics=50).topic_config_table) == 50
    bomb = zlib.compress(bytes(3 * 1024 * 1024))
    with pytest.raises(MalformedBodyError, match="registerBodyMaxInflatedSize"):
        parse_body(bomb, compressed=True, max_inflated_bytes=2 * 1024 * 1024)


# --------------------------------------------------------------------------- broker.conf

BROKER_KEYS = [
    "brokerClusterName",
    "brokerName",
    "brokerId",
    "brokerRole",
    "namesrvAddr",
    "brokerIP1",
    "brokerIP2",
    "listenPort",
    "haListenPort",
    "storePathRootDir",
    "registerBrokerTimeoutMills",
    "registerNameServerPeriod",
    "compressedRegister",
    "forceRegister",
    "enableControllerMode",
    "brokerPermission",
]
property_values = st.one_of(
    st.text(max_size=40),
    st.integers(-(2**40), 2**40).map(str),
    st.sampled_from(["true", "false", "127.0.0.1:9876", "SLAVE", "ASYNC_MASTER", "${HOME}", "[::1]:9876"]),
)


@FUZZ
@given(data=st.binary(max_size=1024))
def test_any_properties_file_reads_or_raises_config_error(
    tmp_path_factory: pytest.TempPathFactory, data: bytes
) -> None:
    path = tmp_path_factory.mktemp("conf") / "broker.conf"
    path.write_bytes(data)
    try:
        properties = read_properties(path)
    except ConfigError:
        return
    with contextlib.suppress(ConfigError):
        load_broker_config(properties, str(path), environ={})


@FUZZ
@given(properties=st.dictionaries(st.sampled_from(BROKER_KEYS), property_values, max_size=len(BROKER_KEYS)))
def test_any_broker_properties_load_or_raise_config_error(properties: dict[str, str]) -> None:
    with contextlib.suppress(ConfigError):
        load_broker_config(properties, "broker.conf", environ={})


# --------------------------------------------------------------------------- topics.json and kvConfig.json

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=20,
)
topic_fields = st.fixed_dictionaries(
    {},
    optional={
        "topicName": json_values | topic_names,
        "readQueueNums": json_values,
        "writeQueueNums": json_values,
        "perm": json_values,
        "topicSysFlag": json_values,
        "order": json_values,
        "topicFilterType": json_values | st.sampled_from(["SINGLE_TAG", "MULTI_TAG"]),
        "attributes": json_values,
    },
)
topics_documents = st.fixed_dictionaries(
    {},
    optional={
        "topicConfigTable": json_values | st.dictionaries(topic_names, topic_fields | json_values, max_size=4),
        "dataVersion": json_values
        | st.fixed_dictionaries({}, optional={"counter": json_values, "timestamp": json_values}),
    },
)


@FUZZ
@given(document=topics_documents | json_values)
def test_any_topics_json_parses_or_raises_topics_file_error(document: object) -> None:
    with contextlib.suppress(TopicsFileError):
        parse_topics_json(json.dumps(document), "topics.json")


@FUZZ
@given(text=st.text(max_size=300))
def test_any_topics_json_text_parses_or_raises_topics_file_error(text: str) -> None:
    with contextlib.suppress(TopicsFileError):
        parse_topics_json(text, "topics.json")


@FUZZ
@given(document=json_values | st.fixed_dictionaries({"configTable": json_values}), raw=st.binary(max_size=200))
def test_any_kv_config_file_loads_or_raises_kv_config_file_error(
    tmp_path_factory: pytest.TempPathFactory, document: object, raw: bytes
) -> None:
    directory = tmp_path_factory.mktemp("kv")
    for content in (json.dumps(document).encode(), raw):
        path = Path(directory) / "kvConfig.json"
        path.write_bytes(content)
        try:
            table = load_config_table(path)
        except KVConfigFileError:
            continue
        assume(table is not None)
        assert all(isinstance(v, str) for entries in table.values() for v in entries.values())
