"""Unit tests of the registration body codec (S01, S02, S32): protobuf, optional zlib, CRC32C."""

from __future__ import annotations

import zlib

import google_crc32c
import pytest

from namesrv.v1 import types_pb2
from namesrv_grpc.core.body import RegisterBrokerBody
from namesrv_grpc.core.errors import BodyChecksumMismatchError, InvalidFieldError, MalformedBodyError
from namesrv_grpc.core.model import DataVersion, TopicConfig
from namesrv_grpc.wire.grpc_register_body import (
    crc32c,
    decode_body,
    encode_body,
    parse_body,
    verify_checksum,
)
from tests.support import topic

VERSION = DataVersion(3, 1_700_000_000_123, 42)
TOPICS = {
    "TopicTest": TopicConfig(
        "TopicTest",
        read_queue_nums=8,
        write_queue_nums=4,
        perm=7,
        topic_sys_flag=3,
        order=True,
        topic_filter_type="MULTI_TAG",
        attributes={"+message.type": "FIFO"},
    ),
    "SELF_TEST_TOPIC": topic("SELF_TEST_TOPIC", read=1, write=1),
    "%RETRY%order_group-1|x": topic("%RETRY%order_group-1|x", read=0, write=65535, perm=0),
}
FILTERS = ("10.9.0.1:30000", "10.9.0.2:30000")


def test_crc32c_is_castagnoli() -> None:
    # The standard CRC-32C check value.
    assert crc32c(b"123456789") == 0xE3069283
    assert crc32c(b"") == 0
    assert crc32c(b"abc") == int(google_crc32c.value(b"abc"))


# ---------------------------------------------------------------------------- S01


def test_s01_checksum_mismatch_raises() -> None:
    body, crc = encode_body(TOPICS, VERSION)
    with pytest.raises(BodyChecksumMismatchError) as info:
        decode_body(body, crc ^ 1, compressed=False)
    assert info.value.reason == "BODY_CHECKSUM_MISMATCH"
    assert info.value.metadata == {"expected": f"{crc ^ 1:#010x}", "actual": f"{crc:#010x}"}


def test_s01_checksum_checked_before_decoding() -> None:
    garbage = b"\xff\xff\xff\xff definitely not protobuf"
    with pytest.raises(BodyChecksumMismatchError):
        decode_body(garbage, crc32c(garbage) ^ 0xFFFF, compressed=True)
    with pytest.raises(BodyChecksumMismatchError):
        decode_body(garbage, 0, compressed=False)
    # With the right checksum the same bytes are a decoding problem.
    with pytest.raises(MalformedBodyError):
        decode_body(garbage, crc32c(garbage), compressed=True)


def test_s01_checksum_covers_bytes_as_sent_compressed() -> None:
    raw, raw_crc = encode_body(TOPICS, VERSION)
    sent, sent_crc = encode_body(TOPICS, VERSION, compress=True)
    assert sent != raw
    assert sent_crc == crc32c(sent)
    assert raw_crc == crc32c(raw)
    with pytest.raises(BodyChecksumMismatchError):
        decode_body(sent, raw_crc, compressed=True)
    verify_checksum(sent, sent_crc)  # no error


def test_s01_single_bit_flip_detected() -> None:
    body, crc = encode_body(TOPICS, VERSION)
    flipped = bytes([body[0] ^ 0x01]) + body[1:]
    with pytest.raises(BodyChecksumMismatchError):
        decode_body(flipped, crc, compressed=False)


# ---------------------------------------------------------------------------- S02


@pytest.mark.parametrize("compressed", [False, True])
def test_s02_empty_body_is_no_topics_and_zero_version(compressed: bool) -> None:
    decoded = decode_body(b"", crc32c(b""), compressed=compressed)
    assert decoded == RegisterBrokerBody({}, DataVersion(0, 0, 0), ())


def test_s02_empty_body_checksum_still_checked() -> None:
    with pytest.raises(BodyChecksumMismatchError):
        decode_body(b"", 1, compressed=False)


def test_s02_encoded_empty_table_decodes_to_zero_version() -> None:
    body, crc = encode_body({}, DataVersion())
    assert decode_body(body, crc, compressed=False) == RegisterBrokerBody({}, DataVersion(), ())


# ---------------------------------------------------------------------------- round trips


@pytest.mark.parametrize("compressed", [False, True])
def test_round_trip(compressed: bool) -> None:
    body, crc = encode_body(TOPICS, VERSION, FILTERS, compress=compressed)
    decoded = decode_body(body, crc, compressed=compressed)
    assert decoded.topic_config_table == TOPICS
    assert decoded.data_version == VERSION
    assert decoded.filter_server_list == FILTERS
    # attributes are not part of TopicConfig equality: check them explicitly.
    assert decoded.topic_config_table["TopicTest"].attributes == {"+message.type": "FIFO"}
    assert decoded.topic_config_table["TopicTest"].topic_filter_type == "MULTI_TAG"
    assert decoded.topic_config_table["TopicTest"].order is True


def test_compressed_body_is_zlib_of_uncompressed() -> None:
    raw, _ = encode_body(TOPICS, VERSION, FILTERS)
    sent, _ = encode_body(TOPICS, VERSION, FILTERS, compress=True)
    assert zlib.decompress(sent) == raw


def test_body_is_a_register_broker_body_message() -> None:
    body, _ = encode_body(TOPICS, VERSION, FILTERS)
    message = types_pb2.RegisterBrokerBody()
    message.ParseFromString(body)
    assert set(message.topic_config_table) == set(TOPICS)
    assert message.data_version.counter == 42
    assert list(message.filter_server_list) == list(FILTERS)


def test_encoding_is_deterministic() -> None:
    forward = dict(TOPICS)
    backward = dict(reversed(list(TOPICS.items())))
    assert list(forward) != list(backward)
    first = encode_body(forward, VERSION, FILTERS)
    assert encode_body(backward, VERSION, FILTERS) == first
    assert encode_body(forward, VERSION, FILTERS) == first
    assert encode_body(backward, VERSION, FILTERS, compress=True) == encode_body(
        forward, VERSION, FILTERS, compress=True
    )


def test_unknown_filter_type_sent_as_single_tag() -> None:
    config = TopicConfig("T", topic_filter_type="WHATEVER")
    body, crc = encode_body({"T": config}, VERSION)
    assert decode_body(body, crc, compressed=False).topic_config_table["T"].topic_filter_type == "SINGLE_TAG"


def test_topic_name_empty_takes_map_key() -> None:
    message = types_pb2.RegisterBrokerBody()
    message.topic_config_table["FromKey"].read_queue_nums = 2
    message.topic_config_table["FromKey"].write_queue_nums = 3
    message.topic_config_table["FromKey"].perm = 6
    body = message.SerializeToString()
    decoded = decode_body(body, crc32c(body), compressed=False)
    assert decoded.topic_config_table == {"FromKey": TopicConfig("FromKey", 2, 3, 6)}


# ---------------------------------------------------------------------------- malformed


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(b"\x0a\x05ab", id="truncated-length-delimited"),
        pytest.param(b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", id="bad-varint"),
        pytest.param(b"\x0a\x02\x0a\xff", id="broken-map-entry"),
    ],
)
def test_malformed_bytes_raise_malformed_body(raw: bytes) -> None:
    with pytest.raises(MalformedBodyError) as info:
        decode_body(raw, crc32c(raw), compressed=False)
    assert info.value.reason == "MALFORMED_BODY"


def test_compressed_flag_with_non_zlib_body() -> None:
    raw, _ = encode_body(TOPICS, VERSION)
    with pytest.raises(MalformedBodyError, match="zlib"):
        parse_body(raw, compressed=True)


def test_zlib_body_without_compressed_flag() -> None:
    sent, crc = encode_body(TOPICS, VERSION, compress=True)
    with pytest.raises(MalformedBodyError):
        decode_body(sent, crc, compressed=False)


@pytest.mark.parametrize("cut", [1, 4, 10])
def test_truncated_zlib(cut: int) -> None:
    sent, _ = encode_body(TOPICS, VERSION, FILTERS, compress=True)
    truncated = sent[:-cut]
    with pytest.raises(MalformedBodyError):
        decode_body(truncated, crc32c(truncated), compressed=True)


# ---------------------------------------------------------------------------- field ranges


@pytest.mark.parametrize(
    ("config", "field"),
    [
        (topic("Bad", read=-1), "body.topic_config_table['Bad'].read_queue_nums"),
        (topic("Bad", read=65536), "body.topic_config_table['Bad'].read_queue_nums"),
        (topic("Bad", write=-5), "body.topic_config_table['Bad'].write_queue_nums"),
        (topic("Bad", write=70000), "body.topic_config_table['Bad'].write_queue_nums"),
        (topic("Bad", perm=16), "body.topic_config_table['Bad'].perm"),
        (topic("Bad", perm=-1), "body.topic_config_table['Bad'].perm"),
        (topic("Bad", sys_flag=-1), "body.topic_config_table['Bad'].topic_sys_flag"),
    ],
)
def test_out_of_range_fields_name_the_topic_path(config: TopicConfig, field: str) -> None:
    body, crc = encode_body({"Good": topic("Good"), "Bad": config}, VERSION)
    with pytest.raises(InvalidFieldError) as info:
        decode_body(body, crc, compressed=False)
    assert info.value.field == field
    assert info.value.reason == "INVALID_FIELD"
    assert info.value.metadata == {"field": field}


def test_queue_nums_bounds_accepted() -> None:
    configs = {"Low": topic("Low", read=0, write=0, perm=0), "High": topic("High", read=65535, write=65535, perm=15)}
    body, crc = encode_body(configs, VERSION)
    assert decode_body(body, crc, compressed=False).topic_config_table == configs


def test_bad_topic_name_in_body_rejected() -> None:
    message = types_pb2.RegisterBrokerBody()
    message.topic_config_table["K"].topic_name = " padded "
    body = message.SerializeToString()
    with pytest.raises(InvalidFieldError) as info:
        decode_body(body, crc32c(body), compressed=False)
    assert info.value.field == "body.topic_config_table['K'].topic_name"
