"""The remoting frame codec (namesrv_grpc.remoting.codec), the fastjson writer/reader and the client.

Frames written by hand below follow RocketMQ's ``RemotingCommand``/``RocketMQSerializable`` byte for byte
and the quirks of real clients listed in the module docstring of ``namesrv_grpc.remoting.codec``:
the C++ client (``rocketmq-client-cpp`` ``RemotingCommand::Encode``: jsoncpp ``FastWriter`` output, so
keys sorted and a trailing newline counted in the header length, ``remark`` always present, opaque from
0, ``AccessKey``/``Signature``/``OnsChannel`` in every request) and ali-ons (``language:"JAVA"``,
``version:121``, no ``remark``).
"""

from __future__ import annotations

import asyncio
import json
import struct
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from namesrv_grpc.client.remoting import RemotingClient, RemotingConnectionError
from namesrv_grpc.remoting.codec import (
    MAX_HEADER_FIELDS,
    FrameDecoder,
    FrameError,
    RemotingCommand,
    decode_command,
    encode_command,
)
from namesrv_grpc.remoting.codes import (
    CURRENT_VERSION,
    DEFAULT_FRAME_MAX_LENGTH,
    FLAG_ONEWAY,
    FLAG_RESPONSE,
    LANGUAGE_CODES,
    VERSION_V4_9_4,
    RequestCode,
    ResponseCode,
    SerializeType,
)
from namesrv_grpc.wire import fastjson


def frame(header: bytes, body: bytes = b"", serialize_type: int = 0) -> bytes:
    """A frame assembled by hand: total length, (type << 24) | header length, header, body."""
    return struct.pack(">ii", 4 + len(header) + len(body), (serialize_type << 24) | len(header)) + header + body


def rocketmq_header(
    code: int,
    language: int,
    version: int,
    opaque: int,
    flag: int,
    remark: bytes | None,
    ext: list[tuple[bytes, bytes]],
) -> bytes:
    """A ROCKETMQ binary header built field by field as RocketMQSerializable.rocketMQProtocolEncode does."""
    out = struct.pack(">hbhii", code, language, version, opaque, flag)
    out += struct.pack(">i", len(remark)) + remark if remark else struct.pack(">i", 0)
    ext_bytes = b"".join(struct.pack(">h", len(k)) + k + struct.pack(">i", len(v)) + v for k, v in ext)
    return out + struct.pack(">i", len(ext_bytes)) + ext_bytes


def decode_one(data: bytes) -> RemotingCommand:
    commands = FrameDecoder().feed(data)
    assert len(commands) == 1
    return commands[0]


# ------------------------------------------------------------------------------------ codes


def test_codes_are_rocketmq_numbers() -> None:
    """Checked against RequestCode.java / ResponseCode.java / LanguageCode.java of apache/rocketmq 5.3."""
    assert {code.name: code.value for code in RequestCode} == {
        "PUT_KV_CONFIG": 100,
        "GET_KV_CONFIG": 101,
        "DELETE_KV_CONFIG": 102,
        "REGISTER_BROKER": 103,
        "UNREGISTER_BROKER": 104,
        "GET_ROUTEINFO_BY_TOPIC": 105,
        "GET_BROKER_CLUSTER_INFO": 106,
        "WIPE_WRITE_PERM_OF_BROKER": 205,
        "GET_ALL_TOPIC_LIST_FROM_NAMESERVER": 206,
        "DELETE_TOPIC_IN_NAMESRV": 216,
        "REGISTER_TOPIC_IN_NAMESRV": 217,
        "GET_KVLIST_BY_NAMESPACE": 219,
        "GET_TOPICS_BY_CLUSTER": 224,
        "GET_SYSTEM_TOPIC_LIST_FROM_NS": 304,
        "GET_UNIT_TOPIC_LIST": 311,
        "GET_HAS_UNIT_SUB_TOPIC_LIST": 312,
        "GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST": 313,
        "UPDATE_NAMESRV_CONFIG": 318,
        "GET_NAMESRV_CONFIG": 319,
        "QUERY_DATA_VERSION": 322,
        "ADD_WRITE_PERM_OF_BROKER": 327,
        "GET_BROKER_MEMBER_GROUP": 901,
        "BROKER_HEARTBEAT": 904,
    }
    assert {code.name: code.value for code in ResponseCode} == {
        "SUCCESS": 0,
        "SYSTEM_ERROR": 1,
        "SYSTEM_BUSY": 2,
        "REQUEST_CODE_NOT_SUPPORTED": 3,
        "SERVICE_NOT_AVAILABLE": 14,
        "NO_PERMISSION": 16,
        "TOPIC_NOT_EXIST": 17,
        "QUERY_NOT_FOUND": 22,
        "INVALID_PARAMETER": 29,
    }
    assert (LANGUAGE_CODES["JAVA"], LANGUAGE_CODES["CPP"], LANGUAGE_CODES["PYTHON"], LANGUAGE_CODES["NODE_JS"]) == (
        0,
        1,
        3,
        13,
    )
    assert (FLAG_RESPONSE, FLAG_ONEWAY, DEFAULT_FRAME_MAX_LENGTH) == (1, 2, 16 * 1024 * 1024)
    assert (VERSION_V4_9_4, CURRENT_VERSION) == (401, 479)


# ------------------------------------------------------------------------------- round trips

_texts = st.text(max_size=40)
_ext_fields = st.dictionaries(_texts, _texts, max_size=6)
_int32 = st.integers(-(2**31), 2**31 - 1)
_int16 = st.integers(-(2**15), 2**15 - 1)


@settings(max_examples=300, deadline=None)
@given(
    code=_int32,
    opaque=_int32,
    flag=_int32,
    remark=st.none() | _texts,
    ext_fields=_ext_fields,
    body=st.binary(max_size=200),
    language=st.sampled_from(sorted(LANGUAGE_CODES)),
    version=_int32,
)
def test_json_header_round_trip(
    code: int,
    opaque: int,
    flag: int,
    remark: str | None,
    ext_fields: dict[str, str],
    body: bytes,
    language: str,
    version: int,
) -> None:
    command = RemotingCommand(code, opaque, flag, remark, ext_fields, body, language, version, SerializeType.JSON)
    assert decode_one(encode_command(command)) == command


@settings(max_examples=300, deadline=None)
@given(
    code=_int16,
    opaque=_int32,
    flag=_int32,
    remark=st.none() | _texts,
    ext_fields=_ext_fields,
    body=st.binary(max_size=200),
    language=st.sampled_from(sorted(LANGUAGE_CODES)),
    version=_int16,
)
def test_rocketmq_header_round_trip(
    code: int,
    opaque: int,
    flag: int,
    remark: str | None,
    ext_fields: dict[str, str],
    body: bytes,
    language: str,
    version: int,
) -> None:
    command = RemotingCommand(code, opaque, flag, remark, ext_fields, body, language, version, SerializeType.ROCKETMQ)
    decoded = decode_one(encode_command(command))
    # RocketMQSerializable writes an empty remark as length 0, which reads back as null.
    assert decoded == RemotingCommand(
        code, opaque, flag, remark or None, ext_fields, body, language, version, SerializeType.ROCKETMQ
    )


def test_json_header_is_what_fastjson_writes() -> None:
    command = RemotingCommand(105, 7, 0, None, {"topic": "TopicTest"}, b"", "JAVA", 401)
    header = encode_command(command)[8:]
    assert header == (
        b'{"code":105,"extFields":{"topic":"TopicTest"},"flag":0,"language":"JAVA","opaque":7,'
        b'"serializeTypeCurrentRPC":"JSON","version":401}'
    )
    response = command.make_response(ResponseCode.TOPIC_NOT_EXIST, "No topic route info", b"")
    assert encode_command(response)[8:] == (
        b'{"code":17,"flag":1,"language":"PYTHON","opaque":7,"remark":"No topic route info",'
        b'"serializeTypeCurrentRPC":"JSON","version":%d}' % CURRENT_VERSION
    )


def test_rocketmq_header_is_byte_exact() -> None:
    command = RemotingCommand(103, 5, 0, "hi", {"brokerName": "broker-a"}, b"BODY", "JAVA", 479, SerializeType.ROCKETMQ)
    expected_header = rocketmq_header(103, 0, 479, 5, 0, b"hi", [(b"brokerName", b"broker-a")])
    assert encode_command(command) == frame(expected_header, b"BODY", serialize_type=1)


def test_make_response_echoes_opaque_and_serialize_type() -> None:
    request = RemotingCommand(105, 42, 0, serialize_type=SerializeType.ROCKETMQ)
    response = request.make_response(ResponseCode.SUCCESS, None, b"{}", {"k": "v"})
    assert (response.opaque, response.serialize_type, response.is_response, response.is_oneway) == (
        42,
        SerializeType.ROCKETMQ,
        True,
        False,
    )
    assert (response.code, response.body, response.ext_fields) == (0, b"{}", {"k": "v"})
    assert not request.is_response
    assert RemotingCommand(105, 1, FLAG_ONEWAY).is_oneway


# ------------------------------------------------------------------------- framing over TCP reads


def _three_frames() -> tuple[bytes, list[RemotingCommand]]:
    commands = [
        RemotingCommand(105, 0, 0, None, {"topic": "A"}),
        RemotingCommand(103, 1, 0, "r", {"brokerName": "b"}, b"x" * 300, serialize_type=SerializeType.ROCKETMQ),
        RemotingCommand(106, 2, FLAG_ONEWAY, None, {}, b"\x00\x01"),
    ]
    return b"".join(encode_command(c) for c in commands), commands


def test_frames_split_at_every_byte_boundary() -> None:
    data, commands = _three_frames()
    for cut in range(len(data) + 1):
        decoder = FrameDecoder()
        got = decoder.feed(data[:cut]) + decoder.feed(data[cut:])
        assert got == commands, cut
        assert decoder.buffered == 0


def test_frames_split_at_two_boundaries_and_byte_by_byte() -> None:
    data, commands = _three_frames()
    for first in range(0, len(data), 7):
        for second in range(first, len(data) + 1, 11):
            decoder = FrameDecoder()
            got = decoder.feed(data[:first]) + decoder.feed(data[first:second]) + decoder.feed(data[second:])
            assert got == commands
    decoder = FrameDecoder()
    got = []
    for index in range(len(data)):
        got += decoder.feed(data[index : index + 1])
    assert got == commands


def test_coalesced_frames_in_one_read_and_a_partial_tail() -> None:
    data, commands = _three_frames()
    decoder = FrameDecoder()
    assert decoder.feed(data + data[:10]) == commands
    assert decoder.buffered == 10
    assert decoder.feed(data[10:]) == commands
    assert decoder.buffered == 0


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(1, 64), min_size=1, max_size=40))
def test_frames_decode_whatever_the_read_sizes(sizes: list[int]) -> None:
    data, commands = _three_frames()
    data = data * 3
    decoder = FrameDecoder()
    got: list[RemotingCommand] = []
    position = 0
    index = 0
    while position < len(data):
        size = sizes[index % len(sizes)]
        got += decoder.feed(data[position : position + size])
        position += size
        index += 1
    assert got == commands * 3


# -------------------------------------------------------------------------------- client quirks


def test_cpp_client_header_with_trailing_newline_and_credentials() -> None:
    header = (
        b'{"code":105,"extFields":{"AccessKey":"","OnsChannel":"ALIYUN","Signature":"","topic":"TopicTest"},'
        b'"flag":0,"language":"CPP","opaque":0,"remark":"","version":63}\n'
    )
    command = decode_one(frame(header))
    assert command.code == RequestCode.GET_ROUTEINFO_BY_TOPIC
    assert command.opaque == 0
    assert command.language == "CPP"
    assert command.version == 63
    assert command.remark == ""
    assert command.ext_fields == {"AccessKey": "", "OnsChannel": "ALIYUN", "Signature": "", "topic": "TopicTest"}
    assert command.serialize_type == SerializeType.JSON


def test_ali_ons_header_without_remark() -> None:
    header = json.dumps(
        {"code": 105, "language": "JAVA", "opaque": 3, "flag": 0, "version": 121, "extFields": {"topic": "T"}}
    ).encode()
    command = decode_one(frame(header))
    assert (command.code, command.language, command.version, command.opaque, command.remark) == (
        105,
        "JAVA",
        121,
        3,
        None,
    )
    assert command.ext_fields == {"topic": "T"}


def test_json_header_lenient_fields() -> None:
    header = b'{"code":104,"language":9,"opaque":1,"extFields":{"brokerId":0,"compressed":false,"x":null}}'
    command = decode_one(frame(header))
    assert command.language == "GO"
    assert command.ext_fields == {"brokerId": "0", "compressed": "false"}
    assert command.version == 0
    assert command.flag == 0
    minimal = decode_one(frame(b'{"code":106}'))
    assert (minimal.code, minimal.language, minimal.ext_fields, minimal.remark) == (106, "JAVA", {}, None)


def test_rocketmq_header_from_java_with_zero_length_strings() -> None:
    header = rocketmq_header(904, 0, 479, 9, 0, None, [(b"brokerAddr", b"10.0.0.1:10911"), (b"zone", b"")])
    command = decode_one(frame(header, serialize_type=1))
    assert command.code == RequestCode.BROKER_HEARTBEAT
    assert command.remark is None
    assert command.ext_fields == {"brokerAddr": "10.0.0.1:10911", "zone": ""}
    assert command.language == "JAVA"


# ---------------------------------------------------------------------------------- FrameError


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (struct.pack(">i", 16 * 1024 * 1024 - 3), "over the 16777216-byte limit"),
        (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", "HTTP request"),
        (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", "TLS ClientHello"),
        (struct.pack(">i", -5), "too small"),
        (struct.pack(">i", 2) + b"\x00\x00", "too small"),
        (struct.pack(">ii", 8, 100) + b"{}\x00\x00", "header length 100 is larger than the frame"),
        (struct.pack(">ii", 6, (2 << 24) | 2) + b"{}", "unknown serialize type 2"),
        (frame(b"\x00\x01garbage"), "not valid JSON"),
        (frame(b"[1,2]"), "must be an object"),
        (frame(b'{"opaque":1}'), "has no 'code'"),
        (frame(b'{"code":"105"}'), "'code' must be an int32"),
        (frame(b'{"code":true}'), "'code' must be an int32"),
        (frame(b'{"code":4294967296}'), "'code' must be an int32"),
        (frame(b'{"code":1,"remark":5}'), "'remark' must be a string"),
        (frame(b'{"code":1,"extFields":[]}'), "'extFields' must be an object"),
        (frame(b'{"code":1,"extFields":{"a":{}}}'), "extFields['a'] must be a string"),
        (frame(b'{"code":1,"language":[]}'), "'language' must be"),
        (frame(b'{"code":1}\xff'), "not valid JSON"),
        (frame(b"[" * 100_000), "commas and brackets, more than 1024 extFields need"),
        (frame(b"[" * 1_000), "nested too deeply"),
        (frame(b"[" + b"[]," * 5_000 + b"[]]"), "commas and brackets"),
        (frame(b"\x00\x69\x00", serialize_type=1), "shorter than"),
        (
            frame(rocketmq_header(1, 0, 0, 0, 0, b"xyzab", [])[:-4], serialize_type=1),
            "ends before the extFields length",
        ),
        (
            frame(
                struct.pack(">hbhii", 1, 0, 0, 0, 0) + struct.pack(">i", 50) + b"abc" + b"\x00" * 4, serialize_type=1
            ),
            "remark length 50 runs past the header",
        ),
        (
            frame(struct.pack(">hbhii", 1, 0, 0, 0, 0) + struct.pack(">i", -2) + b"\x00" * 4, serialize_type=1),
            "remark length -2",
        ),
        (frame(struct.pack(">hbhiiii", 1, 0, 0, 0, 0, 0, -1), serialize_type=1), "extFields length -1"),
        (frame(struct.pack(">hbhiiii", 1, 0, 0, 0, 0, 0, 100), serialize_type=1), "extFields length 100 does not fit"),
        (
            frame(struct.pack(">hbhiiii", 1, 0, 0, 0, 0, 0, 3) + b"\x00\x05a", serialize_type=1),
            "extFields key length 5 runs past",
        ),
        (
            frame(struct.pack(">hbhiiii", 1, 0, 0, 0, 0, 0, 4) + b"\x00\x01a\x00", serialize_type=1),
            "cut inside its value length",
        ),
        (
            frame(struct.pack(">hbhiiii", 1, 0, 0, 0, 0, 0, 7) + b"\x00\x01a" + struct.pack(">i", 9), serialize_type=1),
            "value length 9 runs past",
        ),
        (frame(struct.pack(">hbhiiii", 1, 0, 0, 0, 0, 0, 0) + b"zz", serialize_type=1), "2 bytes after its extFields"),
        (
            frame(
                struct.pack(">hbhii", 1, 0, 0, 0, 0) + struct.pack(">i", 2) + b"\xc3\x28" + b"\x00" * 4,
                serialize_type=1,
            ),
            "remark is not UTF-8",
        ),
    ],
)
def test_frame_errors(data: bytes, message: str) -> None:
    decoder = FrameDecoder()
    with pytest.raises(FrameError, match=message.replace("[", r"\[").replace("(", r"\(")) as info:
        decoder.feed(data)
    assert info.value.reason == str(info.value)
    assert decoder.buffered == 0
    with pytest.raises(FrameError, match="already failed"):
        decoder.feed(encode_command(RemotingCommand(105, 1)))


def test_over_limit_frame_is_rejected_before_its_body_arrives() -> None:
    decoder = FrameDecoder(max_frame_length=1024)
    ok = encode_command(RemotingCommand(105, 1, body=b"x" * (1024 - 200)))
    assert len(decoder.feed(ok)) == 1
    with pytest.raises(FrameError, match="frame of 1025 bytes is over the 1024-byte limit"):
        decoder.feed(struct.pack(">i", 1021))  # only the length: nothing of the body was sent


def test_limit_counts_the_length_field_like_netty() -> None:
    command = RemotingCommand(105, 1)
    size = len(encode_command(command))
    assert len(FrameDecoder(max_frame_length=size).feed(encode_command(command))) == 1
    with pytest.raises(FrameError):
        FrameDecoder(max_frame_length=size - 1).feed(encode_command(command))
    with pytest.raises(ValueError, match="at least 8"):
        FrameDecoder(max_frame_length=4)


def test_decode_command_without_length_prefix() -> None:
    command = RemotingCommand(101, 3, 0, None, {"namespace": "n", "key": "k"}, b"b")
    assert decode_command(encode_command(command)[4:]) == command
    with pytest.raises(FrameError, match="no header length"):
        decode_command(b"\x00")


def test_encode_rejects_values_that_do_not_fit() -> None:
    with pytest.raises(ValueError, match="int16"):
        encode_command(RemotingCommand(70000, 1, serialize_type=SerializeType.ROCKETMQ))
    with pytest.raises(ValueError, match="does not fit the ROCKETMQ header"):
        encode_command(RemotingCommand(1, 2**31, serialize_type=SerializeType.ROCKETMQ))
    with pytest.raises(ValueError, match="unknown serialize type"):
        encode_command(RemotingCommand(1, 1, serialize_type=7))


# ------------------------------------------------------------------------------------ fastjson


def test_fastjson_writes_integer_keys_unquoted() -> None:
    data = {"brokerAddrs": {0: "10.0.0.1:10911", 1: "10.0.0.2:10911"}, "brokerName": "b", "zone": None}
    assert fastjson.dumps(data) == b'{"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"},"brokerName":"b"}'
    assert fastjson.dumps(data, standard=True) == (
        b'{"brokerAddrs":{"0":"10.0.0.1:10911","1":"10.0.0.2:10911"},"brokerName":"b"}'
    )


def test_fastjson_string_escaping() -> None:
    text = 'a/b"\\\n\t\x01\x7f\u2028é中😀'
    assert fastjson.dumps(text) == ('"a/b\\"\\\\\\n\\t\\u0001\\u007F\\u2028é中😀"').encode()
    assert fastjson.dumps(text, standard=True) == (
        b'"a\\/b\\"\\\\\\n\\t\\u0001\\u007F\\u2028\\u00E9\\u4E2D\\uD83D\\uDE00"'
    )
    assert fastjson.loads(fastjson.dumps(text)) == text
    assert fastjson.loads(fastjson.dumps(text, standard=True)) == text
    assert fastjson.dumps([1, True, False, None, 2**60], standard=True) == b'[1,true,false,null,"1152921504606846976"]'


def test_fastjson_standard_form_sorts_map_keys() -> None:
    assert fastjson.dumps({"b": 1, "a": {2: "x", 1: "y"}}, standard=True) == b'{"a":{"1":"y","2":"x"},"b":1}'
    assert fastjson.dumps({"b": 1, "a": 2}) == b'{"b":1,"a":2}'


def test_fastjson_loads_leaves_strings_alone() -> None:
    body = b'{"brokerAddrs":{0:"a{1:b",1:",2:"},"x":"{3:4}","y":["{5:6}",",7:"],-1:"neg"}'
    assert fastjson.loads(body) == {
        "brokerAddrs": {"0": "a{1:b", "1": ",2:"},
        "x": "{3:4}",
        "y": ["{5:6}", ",7:"],
        "-1": "neg",
    }
    assert fastjson.loads('{"k":"\\"{8:9}"}') == {"k": '"{8:9}'}
    assert fastjson.loads(b'{ 0 : "spaced" , 12:"x"}') == {"0": "spaced", "12": "x"}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"{0:}", "not JSON"),
        (b"{a:1}", "not JSON"),
        (b"\xff", "not UTF-8"),
        (b"[" * 100_000, "nested too deeply"),
        (b'{"counter":1' + b"0" * 5_000 + b"}", "4300 digits"),
        (b'{0:"a","counter":1' + b"0" * 5_000 + b"}", "not JSON"),
    ],
)
def test_fastjson_loads_errors(data: bytes, message: str) -> None:
    with pytest.raises(fastjson.FastjsonDecodeError, match=message):
        fastjson.loads(data)


def test_fastjson_dumps_rejects_unknown_types() -> None:
    with pytest.raises(TypeError):
        fastjson.dumps(object())
    with pytest.raises(TypeError):
        fastjson.dumps({1.5: "x"})


_json_keys = st.text(max_size=8) | st.integers(-(2**63), 2**63 - 1)
_json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=12),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(_json_keys, children, max_size=4),
    max_leaves=20,
)


def _normalized(value: object) -> object:
    """What loads returns for what dumps wrote: keys as strings, None map values left out."""
    if isinstance(value, dict):
        return {str(k): _normalized(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_normalized(v) for v in value]
    return value


@settings(max_examples=300, deadline=None)
@given(_json_values)
def test_fastjson_round_trip(value: object) -> None:
    assert fastjson.loads(fastjson.dumps(value)) == _normalized(value)
    standard = fastjson.dumps(value, standard=True)
    assert json.loads(standard) == _normalized_standard(value)
    assert standard.isascii()


def _normalized_standard(value: object) -> object:
    if isinstance(value, dict):
        return {str(k): _normalized_standard(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_normalized_standard(v) for v in value]
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 2**53 - 1:
        return str(value)
    return value


def _reference_quote_integer_keys(text: str) -> str:
    """A character-by-character reading of the same rule, to check the regex against."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        char = text[i]
        if char == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(text[i:j])
            i = j
            continue
        if char in "{,":
            j = i + 1
            while j < n and text[j].isspace():
                j += 1
            k = j + 1 if j < n and text[j] == "-" else j
            m = k
            while m < n and text[m].isdigit():
                m += 1
            c = m
            while c < n and text[c].isspace():
                c += 1
            if m > k and c < n and text[c] == ":":
                out.append(f'{text[i:j]}"{text[j:m]}"{text[m:c]}')
                i = c
                continue
        out.append(char)
        i += 1
    return "".join(out)


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet='{}[],:"\\ \n-0123456789ax', max_size=60))
def test_integer_key_quoting_matches_a_character_by_character_reading(text: str) -> None:
    assert fastjson._quote_integer_keys(text) == _reference_quote_integer_keys(text)


@pytest.mark.parametrize(
    "text",
    [
        '{1:"' + '\\"' * 1_000_000,  # an unterminated string full of escaped quotes
        "{1:" * 500_000,
        "a" * 2_000_000 + '"',
        ",{" * 1_000_000 + "{1:",
    ],
)
def test_integer_key_quoting_is_linear_on_hostile_input(text: str) -> None:
    """2 MB of input that would make a rescanning tokenizer quadratic (hours) takes well under a second
    per MB here (the margin is for a loaded machine)."""
    started = time.perf_counter()
    with pytest.raises(fastjson.FastjsonDecodeError):
        fastjson.loads(text)
    assert time.perf_counter() - started < 10


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.integers(0, 2**40), st.text(max_size=20), max_size=6))
def test_fastjson_integer_keyed_maps_read_back(table: dict[int, str]) -> None:
    body = fastjson.dumps({"brokerAddrs": table, "s": [str(table)]})
    assert fastjson.loads(body) == {"brokerAddrs": {str(k): v for k, v in table.items()}, "s": [str(table)]}


# -------------------------------------------------------------------------------------- client


class _EchoServer:
    """A loopback server that answers each request with its ext fields as the body, in reverse
    order of arrival per read (to prove responses are matched by opaque), never answering oneway."""

    def __init__(self) -> None:
        self.received: list[RemotingCommand] = []
        self.server: asyncio.Server | None = None

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return int(self.server.sockets[0].getsockname()[1])

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        decoder = FrameDecoder()
        while data := await reader.read(65536):
            commands = decoder.feed(data)
            self.received += commands
            for command in reversed(commands):
                if command.is_oneway:
                    continue
                if command.code == 999:
                    writer.close()
                    return
                body = json.dumps(command.ext_fields).encode()
                writer.write(encode_command(command.make_response(ResponseCode.SUCCESS, None, body)))
            await writer.drain()
        writer.close()

    async def stop(self) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()


def test_client_pipelines_requests_and_matches_opaques() -> None:
    async def scenario() -> None:
        server = _EchoServer()
        port = await server.start()
        client = await RemotingClient.connect("127.0.0.1", port)
        try:
            responses = await asyncio.gather(
                *(
                    client.request(
                        105,
                        {"topic": f"T{i}"},
                        serialize_type=SerializeType.ROCKETMQ if i % 2 else SerializeType.JSON,
                    )
                    for i in range(200)
                )
            )
            for i, response in enumerate(responses):
                assert json.loads(response.body) == {"topic": f"T{i}"}
                assert response.serialize_type == (SerializeType.ROCKETMQ if i % 2 else SerializeType.JSON)
            assert len({c.opaque for c in server.received}) == 200
            await client.send_oneway(104, {"brokerAddr": "a:1"})
            after = await client.request(101, {"key": "k"})
            assert json.loads(after.body) == {"key": "k"}
            assert any(c.is_oneway and c.code == 104 for c in server.received)
            with pytest.raises(RemotingConnectionError, match="closed by the server"):
                await client.request(999)
            assert client.closed
        finally:
            await client.close()
            await server.stop()

    asyncio.run(scenario())


def test_client_request_times_out() -> None:
    async def scenario() -> None:
        server = _EchoServer()
        port = await server.start()
        async with await RemotingClient.connect("127.0.0.1", port) as client:
            command = RemotingCommand(105, client.new_opaque(), FLAG_ONEWAY)  # the server never answers it
            with pytest.raises(TimeoutError):
                await client.request_command(command, timeout=0.2)
            assert (await client.request(105, {"a": "b"})).code == ResponseCode.SUCCESS
        await server.stop()

    asyncio.run(scenario())


def test_lone_surrogates_from_received_json_are_written_as_question_marks() -> None:
    """A JSON header may carry "\\ud800"; echoing it (in a remark, a body) must not fail: Java's UTF-8
    encoder writes a lone surrogate as '?', so do we."""
    request = decode_one(frame(b'{"code":105,"extFields":{"topic":"a\\ud800b"}}'))
    topic = request.ext_fields["topic"]
    assert topic == "a\ud800b"
    for serialize_type in SerializeType:
        response = RemotingCommand(
            17, 1, FLAG_RESPONSE, f"No topic: {topic}", {"t": topic}, b"", "JAVA", 0, serialize_type
        )
        decoded = decode_one(encode_command(response))
        assert decoded.remark == "No topic: a?b"
        assert decoded.ext_fields == {"t": "a?b"}
    assert fastjson.dumps({"topicList": [topic]}) == b'{"topicList":["a?b"]}'
    assert fastjson.dumps([topic], standard=True) == b'["a\\uD800b"]'


@pytest.mark.parametrize("serialize_type", [SerializeType.JSON, SerializeType.ROCKETMQ])
def test_header_fields_are_bounded(serialize_type: int) -> None:
    """A header carries at most MAX_HEADER_FIELDS extFields (remotingHeaderMaxFields): decoding a huge
    one would cost seconds of CPU on the event loop (issue 20). Long values are not limited here."""
    fields = {f"k{i}": "v" for i in range(MAX_HEADER_FIELDS)}
    ok = RemotingCommand(RequestCode.GET_KV_CONFIG, 1, ext_fields=fields, serialize_type=serialize_type)
    assert FrameDecoder().feed(encode_command(ok))[0].ext_fields == fields
    long_value = RemotingCommand(1, 2, ext_fields={"value": "x" * 1_000_000}, serialize_type=serialize_type)
    assert len(FrameDecoder().feed(encode_command(long_value))[0].ext_fields["value"]) == 1_000_000
    fields["one-more"] = "v"
    too_many = RemotingCommand(RequestCode.GET_KV_CONFIG, 3, ext_fields=fields, serialize_type=serialize_type)
    with pytest.raises(FrameError, match="remotingHeaderMaxFields") as refused:
        FrameDecoder().feed(encode_command(too_many))
    assert refused.value.limit == "remotingHeaderMaxFields"
    with pytest.raises(FrameError, match="remotingHeaderMaxFields"):
        FrameDecoder(max_header_fields=10).feed(encode_command(ok))


def test_take_decodes_a_bounded_number_of_frames() -> None:
    decoder = FrameDecoder()
    decoder.add(b"".join(encode_command(RemotingCommand(RequestCode.GET_KV_CONFIG, i)) for i in range(10)))
    assert [c.opaque for c in decoder.take(3)] == [0, 1, 2]
    assert decoder.has_frame
    assert [c.opaque for c in decoder.take()] == list(range(3, 10))
    assert not decoder.has_frame
    assert decoder.buffered == 0


def test_a_header_over_its_length_bound_is_refused_when_its_length_arrives() -> None:
    """remotingHeaderMaxLength: the 8 bytes that give a frame's header length are enough to refuse
    it; nothing of the header is held or parsed (issue 30: a 16 MiB JSON header)."""
    decoder = FrameDecoder(max_header_length=64 * 1024)
    frame = encode_command(RemotingCommand(RequestCode.GET_KV_CONFIG, 1, ext_fields={"value": "x" * 70_000}))
    with pytest.raises(FrameError, match="remotingHeaderMaxLength") as refused:
        decoder.add(frame[:8])
    assert refused.value.limit == "remotingHeaderMaxLength"
    ok = encode_command(RemotingCommand(RequestCode.GET_KV_CONFIG, 2, ext_fields={"value": "x" * 60_000}))
    assert FrameDecoder(max_header_length=64 * 1024).feed(ok)[0].opaque == 2
