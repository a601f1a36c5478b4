"""The fast REGISTER_BROKER decoder (``bodies.decode_register_broker_body_compact``: msgspec straight
into ``CompactTopics``) against the reference decoder it falls back to (``decode_register_broker_body``),
and the bulk S07 apply (``RouteInfoManager._prepare`` / ``_commit``) against S07 one topic at a time.

Property tests: every body, valid or not, decodes to the same topics, numbers, DataVersion, filter
servers and static-topic mappings, or raises the same error with the same message; JSON as any writer
may produce it (whitespace, key order, escapes, non-ASCII, nulls, duplicate keys, fastjson's unquoted
integer keys). Routes encoded after registering the decoded bodies are byte for byte the same in both
JSON forms, and the route digest equals ``full_digest``.
"""

from __future__ import annotations

import json
import pickle
import random
import struct
import zlib
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from namesrv_grpc.core.compact_topics import CompactTopics
from namesrv_grpc.core.digest import full_digest, queue_nums_hash, queue_nums_hash_sum
from namesrv_grpc.core.errors import LimitExceededError, MalformedBodyError
from namesrv_grpc.core.model import DataVersion, TopicConfig, TopicQueueMappingInfo
from namesrv_grpc.core.route_table import RouteInfoManager
from namesrv_grpc.wire import bodies
from namesrv_grpc.wire.remoting_register_body import decode_java_register_body
from tests.support import FakeClock

PROPERTY = settings(max_examples=300, deadline=None)


# ----------------------------------------------------------------------------- JSON as any writer writes it


@dataclass(frozen=True)
class Obj:
    """A JSON object as written: its members in order, duplicates allowed; an int key is written
    unquoted (fastjson's ``{0:"a"}``)."""

    members: tuple[tuple[str | int, Any], ...]


def dump(value: Any, rnd: random.Random) -> str:
    """``value`` as JSON text with random white space between tokens and random escaping of strings."""

    def ws() -> str:
        return rnd.choice(["", "", "", " ", "\n", "\t", " \r\n  "])

    if isinstance(value, Obj):
        members = []
        for key, item in value.members:
            name = str(key) if isinstance(key, int) else dump(key, rnd)
            members.append(f"{ws()}{name}{ws()}:{ws()}{dump(item, rnd)}{ws()}")
        return "{" + ",".join(members) + ws() + "}"
    if isinstance(value, list):
        return "[" + ",".join(ws() + dump(item, rnd) + ws() for item in value) + "]"
    if isinstance(value, str):
        text = json.dumps(value, ensure_ascii=rnd.random() < 0.5)
        if rnd.random() < 0.2 and "\\" not in text:  # \u escapes of plain characters, as some writers do
            text = text[0] + "".join(f"\\u{ord(c):04x}" if c.isalnum() else c for c in text[1:-1]) + text[-1]
        return text
    return json.dumps(value)


def as_obj(mapping: dict[str, Any]) -> Obj:
    return Obj(tuple(mapping.items()))


good_topics = st.from_regex(r"[%|a-zA-Z0-9_-]{1,12}", fullmatch=True)
BAD_TOPICS = ["", "订单", "a b", "a.b", "a:b", "x" * 128, "T\n", "a\nb", "Ünïcode"]
bad_topics = st.sampled_from(BAD_TOPICS)
topic_keys = st.one_of(good_topics, good_topics, good_topics, bad_topics)
texts = st.text(max_size=8)  # any code point but lone surrogates: non-ASCII, control characters, quotes


def sometimes_odd(messy: bool, good: st.SearchStrategy[Any], *odd: Any) -> st.SearchStrategy[Any]:
    """``good``; in a messy body now and then a null or a value of another type or out of range."""
    if not messy:
        return good
    return st.one_of(good, good, good, good, good, good, st.none(), st.sampled_from(odd))


def topic_configs(messy: bool) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {},
        optional={
            "readQueueNums": sometimes_odd(messy, st.integers(0, 65535), -1, 65536, 4.0, "4", True),
            "writeQueueNums": sometimes_odd(messy, st.integers(0, 65535), -1, 70000, 1e3, "8", False),
            "perm": sometimes_odd(messy, st.integers(0, 15), 16, -1, 6.5, "6"),
            "topicSysFlag": sometimes_odd(messy, st.integers(0, 2**31 - 1), -1, 2**31, 2**40, 2**64, "0"),
            "order": sometimes_odd(messy, st.one_of(st.booleans(), st.none()), 0, 1, "true"),
            "topicFilterType": sometimes_odd(
                messy, st.sampled_from(["SINGLE_TAG", "MULTI_TAG", None]), "TAGS", 1, ["x"]
            ),
            "attributes": sometimes_odd(
                messy, st.one_of(st.dictionaries(texts, texts, max_size=2), st.none()), [], 0, "", [1], {"a": 1}
            ),
            "extra": st.one_of(st.integers(-(2**70), 2**70), texts, st.lists(st.integers(), max_size=2), st.none()),
        },
    )


@st.composite
def topic_tables(draw: st.DrawFn, messy: bool) -> Obj:
    """``topicConfigTable``: entries keyed by a topic name, each with topicName absent, null, the key,
    another name (so two entries may name one topic) or, in a messy body, an odd value or name."""
    members: list[tuple[str | int, Any]] = []
    keys = draw(st.lists(topic_keys if messy else good_topics, max_size=6))
    for key in keys:
        config = dict(draw(topic_configs(messy)))
        name_choice = draw(st.sampled_from(["absent", "key", "key", "null", "other"] + ["odd"] * messy))
        if name_choice == "key":
            config["topicName"] = key
        elif name_choice == "null":
            config["topicName"] = None
        elif name_choice == "other":
            config["topicName"] = draw(st.one_of(st.sampled_from(keys), topic_keys if messy else good_topics))
        elif name_choice == "odd":
            config["topicName"] = draw(st.sampled_from([5, [], "订单"]))
        items = list(config.items())
        draw(st.randoms(use_true_random=False)).shuffle(items)
        members.append((key, Obj(tuple(items))))
    return Obj(tuple(members))


int64s = st.integers(-(2**63), 2**63 - 1)


def data_versions(messy: bool) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.none(),
        st.fixed_dictionaries(
            {},
            optional={
                "counter": sometimes_odd(messy, int64s, 2**63, "1", 1.5),
                "stateVersion": sometimes_odd(messy, int64s, -(2**63) - 1, True),
                "timestamp": sometimes_odd(messy, int64s, 2**64),
            },
        ).map(as_obj),
    )


@st.composite
def mapping_tables(draw: st.DrawFn, messy: bool) -> Any:
    """``topicQueueMappingInfoMap``: mostly empty; or mappings whose currIdMap keys are quoted
    (standard JSON) or unquoted (fastjson: not strict JSON)."""
    if draw(st.integers(0, 3)):
        return draw(st.sampled_from([None, Obj(()), [], 0]))
    members = []
    for topic in draw(st.lists(good_topics, min_size=1, max_size=2)):
        unquoted = draw(st.booleans())
        ids = draw(st.dictionaries(st.integers(0, 3), st.integers(-1 if messy else 0, 3), max_size=2))
        fields = {
            "bname": draw(sometimes_odd(messy, st.just("broker-a"), 1)),
            "currIdMap": Obj(tuple((k if unquoted else str(k), v) for k, v in ids.items())),
            "dirty": draw(sometimes_odd(messy, st.booleans(), 1)),
            "epoch": draw(sometimes_odd(messy, int64s, "x")),
            "scope": "__global__",
            "topic": topic,
            "totalQueues": draw(sometimes_odd(messy, st.integers(0, 8), -1)),
        }
        members.append((topic, as_obj(fields)))
    return Obj(tuple(members))


@st.composite
def register_bodies(draw: st.DrawFn) -> bytes:
    """A REGISTER_BROKER JSON body as any writer may produce it: valid (every value of the right
    type and range, still with nulls, repeated names and keys, any escapes and white space) or
    messy (now and then a value of another type, out of range, a name TopicValidator refuses)."""
    messy = draw(st.booleans())
    wrapper: dict[str, Any] = {
        "dataVersion": draw(data_versions(messy)),
        "mappingDataVersion": as_obj({"counter": 0, "timestamp": 1}),
        "topicConfigTable": draw(
            st.one_of(topic_tables(messy), topic_tables(messy), topic_tables(messy), st.none(), st.just(Obj(())))
        ),
        "topicQueueMappingDetailMap": Obj(()),
        "topicQueueMappingInfoMap": draw(mapping_tables(messy)),
    }
    wrapper = {key: value for key, value in wrapper.items() if draw(st.integers(0, 5)) or key == "topicConfigTable"}
    filters = st.lists(st.sampled_from(["10.0.0.9:30000", "a:1", "订单:2"]), max_size=2)
    root: dict[str, Any] = {
        "filterServerList": draw(sometimes_odd(messy, st.one_of(filters, st.none()), "x", [1])),
        "topicConfigSerializeWrapper": draw(sometimes_odd(messy, st.just(as_obj(wrapper)), [])),
    }
    if draw(st.booleans()):
        root["unknown"] = draw(st.one_of(texts, st.lists(st.integers(), max_size=3)))
    members = list(root.items())
    rnd = draw(st.randoms(use_true_random=False))
    rnd.shuffle(members)
    return dump(Obj(tuple(members)), rnd).encode()


def reference(body: bytes, compressed: bool = False, rocketmq5: bool = True) -> Any:
    """What the reference decoder makes of ``body``, in the compact decoder's terms (or its error)."""
    try:
        decoded = bodies.decode_register_broker_body(body, compressed=compressed, rocketmq5=rocketmq5)
    except MalformedBodyError as exc:
        return MalformedBodyError, str(exc)
    table = decoded.topic_config_table
    return (
        list(table),
        [(c.read_queue_nums, c.write_queue_nums, c.perm, c.topic_sys_flag) for c in table.values()],
        decoded.data_version,
        decoded.filter_server_list,
        dict(decoded.topic_queue_mappings),
    )


def compact(body: bytes, compressed: bool = False, rocketmq5: bool = True) -> Any:
    try:
        decoded = bodies.decode_register_broker_body_compact(body, compressed=compressed, rocketmq5=rocketmq5)
    except MalformedBodyError as exc:
        return MalformedBodyError, str(exc)
    topics = decoded.topics
    assert list(topics.nums) == [n for nums in topics.nums_list() for n in nums]
    assert all(type(n) is int for nums in topics.nums_list() for n in nums)
    sent = pickle.loads(pickle.dumps(topics, pickle.HIGHEST_PROTOCOL))  # as the route-table process gets it
    assert (sent.names, sent.nums_list(), list(sent.nums)) == (topics.names, topics.nums_list(), list(topics.nums))
    return (
        list(topics.names),
        topics.nums_list(),
        decoded.data_version,
        decoded.filter_server_list,
        dict(decoded.topic_queue_mappings),
    )


# ------------------------------------------------------------------------------ decoding: the same result


@PROPERTY
@given(register_bodies())
def test_the_compact_decoder_and_the_reference_agree_on_any_json_body(body: bytes) -> None:
    assert compact(body) == reference(body)


@PROPERTY
@given(register_bodies(), st.integers(0, 4000), st.integers(0, 255))
def test_they_agree_on_damaged_bodies(body: bytes, position: int, value: int) -> None:
    damaged = bytearray(body)
    damaged[position % len(damaged)] = value
    for candidate in (bytes(damaged), body[: position % len(body)]):
        assert compact(candidate) == reference(candidate)


_configs = st.builds(
    TopicConfig,
    good_topics,
    st.integers(0, 65535),
    st.integers(0, 65535),
    st.integers(0, 15),
    st.integers(0, 2**31 - 1),
    st.booleans(),
    st.sampled_from(["SINGLE_TAG", "MULTI_TAG"]),
    st.dictionaries(texts, texts, max_size=2),
)
_versions = st.builds(DataVersion, int64s, int64s, int64s)


@PROPERTY
@given(st.lists(_configs, max_size=8), _versions, st.lists(texts, max_size=2), st.booleans())
def test_a_java_brokers_body_takes_the_fast_path(
    configs: list[TopicConfig], version: DataVersion, filters: list[str], rocketmq5: bool
) -> None:
    """What a broker writes with fastjson (no static topics) is strict JSON: msgspec decodes it, and
    the result is the reference's."""
    topics = {config.topic_name: config for config in configs}
    body = bodies.encode_register_broker_body(topics, version, filters, compressed=False, rocketmq5=rocketmq5)
    fast = bodies._decode_json_register_body_compact(body)
    assert fast is not None
    assert compact(body) == reference(body)
    assert fast.topics.names == list(topics)


def test_fastjson_integer_keys_of_static_topics_go_to_the_reference() -> None:
    """5.x static topics: fastjson writes ``currIdMap`` keys unquoted, which msgspec does not read;
    the reference decoder does, so such a body decodes as before."""
    mapping = TopicQueueMappingInfo("T", "broker-a", total_queues=8, epoch=3, curr_id_map={0: 4, 1: 5})
    body = bodies.encode_register_broker_body(
        {"T": TopicConfig("T", 8, 8)}, DataVersion(0, 1, 2), compressed=False, topic_queue_mappings={"T": mapping}
    )
    assert b"{0:4,1:5}" in body
    assert bodies._decode_json_register_body_compact(body) is None
    decoded = bodies.decode_register_broker_body_compact(body, compressed=False)
    assert decoded.topic_queue_mappings == {"T": mapping}
    assert (decoded.topics.names, decoded.topics.nums_list()) == (["T"], [(8, 8, 6, 0)])
    assert compact(body) == reference(body)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"T":{"perm":99}}}}', "['T'].perm must be"),
        (
            '{"topicConfigSerializeWrapper":{"topicConfigTable":{"订单":{}}}}'.encode(),
            "['订单'].topicName must be a topic name",
        ),
        (b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"A":{},"a\\nb":{}}}}', "['a\\nb'].topicName must be"),
        (b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"T":{"topicSysFlag":2147483648}}}}', "topicSysFlag"),
        (b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"T":{"topicFilterType":[]}}}}', "topicFilterType"),
        (b'{"filterServerList":["\xff"]}', "not UTF-8"),
        (b'{"unknown":"\xed\xa0\x80"}', "not UTF-8"),
    ],
)
def test_a_bad_body_gets_the_reference_error_naming_the_field(body: bytes, message: str) -> None:
    """Among them two the reference used to let through: a topicSysFlag beyond Java's int (it failed
    later, in the route table's int32 array) and a non-string topicFilterType (a TypeError)."""
    with pytest.raises(MalformedBodyError) as fast_error:
        bodies.decode_register_broker_body_compact(body, compressed=False)
    with pytest.raises(MalformedBodyError) as reference_error:
        bodies.decode_register_broker_body(body, compressed=False)
    assert str(fast_error.value) == str(reference_error.value)
    assert message in str(fast_error.value)


def test_odd_but_valid_json_decodes_the_same() -> None:
    """Nulls (Java defaults), a topicName other than its key, duplicate keys (the last wins), two
    entries naming one topic, escapes, white space: the reference's result, whichever path decodes it
    (the second body, with no null number, falsy non-object attributes or repeated name, by msgspec)."""
    template = (
        b' { "topicConfigSerializeWrapper" : { "topicConfigTable" : {\n'
        b'  "A" : { READ "perm" : 2 , "perm" : 4 , "topicName" : "\\u0041" } ,\n'
        b'  "B" : { "topicName" : "C" , "attributes" : { "k" : "\\u8ba2\\u5355" } } ,\n'
        b'  "D" : { "topicName" : null , "writeQueueNums" : 3 , "attributes" : ATTRIBUTES } ,\n'
        b'  "E" : { NAME "readQueueNums" : 1 }\n'
        b'} , "dataVersion" : { "counter" : 7 , "timestamp" : null } } , "filterServerList" : null } \n'
    )
    lenient = (
        template.replace(b"READ", b'"readQueueNums" : null ,')
        .replace(b"ATTRIBUTES", b"[ ]")
        .replace(b"NAME", b'"topicName" : "A" ,')
    )
    strict = (
        template.replace(b"READ", b"").replace(b"ATTRIBUTES", '{ "\u00e9" : "订单" }'.encode()).replace(b"NAME", b"")
    )
    rest = ((16, 16, 6, 0), (16, 3, 6, 0))
    version = DataVersion(0, 0, 7)
    assert bodies._decode_json_register_body_compact(lenient) is None
    assert bodies._decode_json_register_body_compact(strict) is not None
    cases: list[tuple[bytes, tuple[Any, ...]]] = [
        (lenient, (["A", "C", "D"], [(1, 16, 6, 0), *rest], version, (), {})),
        (strict, (["A", "C", "D", "E"], [(16, 16, 4, 0), *rest, (1, 16, 6, 0)], version, (), {})),
    ]
    for body, expected in cases:
        assert reference(body) == expected
        assert compact(body) == expected


def test_an_unknown_field_with_a_huge_number_is_ignored_as_fastjson_ignores_it() -> None:
    """The one difference: Python's int() refuses more than 4,300 digits, so the reference refused
    such a body; msgspec skips an unknown field without converting it, as RocketMQ's fastjson does."""
    body = b'{"huge":' + b"9" * 5000 + b',"topicConfigSerializeWrapper":{"topicConfigTable":{"T":{}}}}'
    assert reference(body)[0] is MalformedBodyError
    assert compact(body)[:2] == (["T"], [(16, 16, 6, 0)])


@PROPERTY
@given(
    st.lists(
        st.tuples(st.integers(0, 9), st.integers(0, 9), st.sampled_from([2, 4, 6]), st.integers(0, 3)), max_size=60
    )
)
def test_compact_topics_cross_a_process_boundary_as_they_are(nums: list[tuple[int, int, int, int]]) -> None:
    names = [f"t{i}" for i in range(len(nums))]
    for topics in (
        CompactTopics.from_queue_nums(names, nums),
        CompactTopics.from_topic_configs({name: TopicConfig(name, *n) for name, n in zip(names, nums, strict=True)}),
    ):
        sent = pickle.loads(pickle.dumps(topics, pickle.HIGHEST_PROTOCOL))
        assert sent.names == names
        assert sent.nums_list() == nums
        assert list(sent.nums) == [n for four in nums for n in four]
        assert dict(sent) == dict(topics)
        assert len({id(four) for four in sent.nums_list()}) == len(set(nums))  # shared, as the table keeps them


def test_registerbodymaxtopics_and_the_empty_body() -> None:
    body = bodies.encode_register_broker_body(
        {f"T{i}": TopicConfig(f"T{i}") for i in range(5)}, DataVersion(), compressed=False
    )
    assert len(decode_java_register_body(body, False, 1 << 20, 5, None).topic_configs or ()) == 5
    with pytest.raises(LimitExceededError, match="registerBodyMaxTopics"):
        decode_java_register_body(body, False, 1 << 20, 4, None)
    empty = bodies.decode_register_broker_body_compact(b"", compressed=False)
    assert (len(empty.topics), empty.data_version, empty.filter_server_list) == (0, DataVersion(), ())


# ------------------------------------------------------------------------ the compressed (4.9.4+) format


def _chunk(data: bytes) -> bytes:
    return struct.pack(">i", len(data)) + data


topic_fields = st.tuples(
    good_topics,
    st.integers(0, 65535),
    st.integers(0, 65535),
    st.integers(0, 15),
    st.sampled_from(["SINGLE_TAG", "MULTI_TAG"]),
    st.sampled_from(["", " {}", " "] * 4 + [' {"+message.type":"FIFO"}']),
)
"""``TopicConfig.encode()`` of a usual topic as its fields: name, read, write, perm, filter type, and
the attributes part (none: 4.x; ``{}``; a trailing space; now and then attributes)."""
FAULTS: dict[str, list[Any]] = {
    "name": BAD_TOPICS,
    "read": [65536, 99999, "-1", "+4", "004", "x"],
    "write": [65536, "x", ""],
    "perm": [16, 99, "6 "],
    "filter": ["TAGS", "SINGLE_TAG\n", "single_tag"],
    "tail": [" {} ", " {bad", "\n", "\nB 1 1 6 SINGLE_TAG", " {}\n"],
}
"""What a messy body gets wrong in one topic text, by field."""


@st.composite
def compressed_bodies(draw: st.DrawFn) -> bytes:
    """A compressed REGISTER_BROKER body (``RegisterBrokerBody.encode(true)``): topic texts with or
    without attributes, now and then an entry of 256 bytes or more; a messy body has one fault: an
    odd field in one text (:data:`FAULTS`), any text, a repeated name, or a topic count or an entry's
    length prefix that is off."""
    fields = [list(field) for field in draw(st.lists(topic_fields, max_size=8, unique_by=lambda field: field[0]))]
    fault = draw(st.sampled_from([None] * 10 + [*FAULTS, "text", "repeat", "count", "prefix"]))
    at = draw(st.integers(0, max(0, len(fields) - 1)))
    if fault in FAULTS and fields:
        fields[at][[*FAULTS].index(fault)] = draw(st.sampled_from(FAULTS[fault]))
    if fault == "repeat" and len(fields) > 1:
        fields[at][0] = fields[at - 1][0]
    texts = ["{} {} {} {} {}{}".format(*field) for field in fields]
    if fault == "text" and texts:
        texts[at] = draw(st.text(max_size=30))
    if draw(st.integers(0, 9)) == 0:
        texts.insert(at, "L" * draw(st.integers(120, 130)) + " 4 4 6 SINGLE_TAG {}")
    off = draw(st.sampled_from([1, -1]))
    out = _chunk(dump(draw(data_versions(False)) or Obj(()), random.Random(0)).encode())
    out += struct.pack(">i", len(texts) + (off if fault == "count" else 0))
    for index, text in enumerate(texts):
        data = text.encode()
        out += struct.pack(">i", len(data) + (off if fault == "prefix" and index == at else 0)) + data
    out += _chunk(json.dumps(draw(st.lists(st.sampled_from(["10.0.0.9:30000", "a" * 300]), max_size=2))).encode())
    if draw(st.booleans()):
        out += struct.pack(">i", 0)  # 5.x: no static-topic mapping
    return zlib.compress(out)


@PROPERTY
@given(compressed_bodies(), st.booleans())
def test_the_compact_decoder_and_the_reference_agree_on_any_compressed_body(body: bytes, rocketmq5: bool) -> None:
    assert compact(body, True, rocketmq5) == reference(body, True, rocketmq5)


def _layout(*entries: bytes, count: int | None = None, filters: bytes = b"[]") -> bytes:
    """A compressed body of these topic entries (each a length prefix and its text)."""
    head = _chunk(b'{"counter":1}') + struct.pack(">i", len(entries) if count is None else count)
    return zlib.compress(head + b"".join(entries) + _chunk(filters))


def _entry(text: bytes, off: int = 0) -> bytes:
    return struct.pack(">i", len(text) + off) + text


@pytest.mark.parametrize(
    ("body", "bulk"),
    [
        (_layout(_entry(b"A 4 4 6 SINGLE_TAG"), _entry(b"B 8 8 6 MULTI_TAG {}"), _entry(b"C 1 1 2 SINGLE_TAG ")), True),
        (_layout(_entry(b"A 4 4 6 SINGLE_TAG {}"), filters=json.dumps(["h" * 300]).encode()), True),
        (_layout(_entry(b"A 4 4 16 SINGLE_TAG")), False),
        (_layout(_entry(b"A 65536 4 6 SINGLE_TAG")), False),
        (_layout(_entry(b"A 4 65536 6 SINGLE_TAG")), False),
        (_layout(_entry(b"A 4 4 6 SINGLE_TAG", 1), _entry(b"B 4 4 6 SINGLE_TAG")), False),
        (_layout(_entry(b"A 4 4 6 SINGLE_TAG", -1), _entry(b"B 4 4 6 SINGLE_TAG")), False),
        (_layout(_entry(b"A 4 4 6 SINGLE_TAG\nB 1 1 6 SINGLE_TAG")), False),
        (_layout(_entry(b"A 4 4 6 SINGLE_TAG\nA 4 4 6 SINGLE_TAG")), False),
        (_layout(_entry(b"A 4 4 6 SINGLE_TAG"), _entry(b"A 8 8 6 SINGLE_TAG")), False),
        (_layout(_entry(b"A 4 4 6 SINGLE_TAG"), count=2), False),
        (_layout(_entry(b""), _entry(b"A 4 4 6 SINGLE_TAG")), False),
        (_layout(_entry(b'A 4 4 6 SINGLE_TAG {"a":"b"}')), False),
        (_layout(_entry(b"L" * 200 + b" 4 4 6 SINGLE_TAG {}")), False),
    ],
)
def test_compressed_topic_entries_in_bulk_or_one_at_a_time(body: bytes, bulk: bool) -> None:
    """Each guard of the bulk read: what it does not read as the reference would, it leaves to the
    reference (same result, same error)."""
    reader, _, count = bodies._compressed_head(body, 1 << 20)
    assert (bodies._compressed_topics_bulk(reader.data, reader.position, count) is not None) is bulk
    assert compact(body, True) == reference(body, True)


@PROPERTY
@given(
    st.lists(_configs, max_size=8), _versions, st.lists(st.sampled_from(["10.0.0.9:30000", "h" * 300])), st.booleans()
)
def test_a_java_brokers_compressed_body_takes_the_bulk_path(
    configs: list[TopicConfig], version: DataVersion, filters: list[str], rocketmq5: bool
) -> None:
    """Topics without attributes (what most brokers have) are read in bulk, with the reference's
    result, whatever follows them (a filter-server list of 256 bytes or more: no zero bytes there)."""
    topics = {config.topic_name: config._replace(attributes={}) for config in configs}
    body = bodies.encode_register_broker_body(topics, version, filters, compressed=True, rocketmq5=rocketmq5)
    inflated = zlib.decompress(body)
    position = 4 + struct.unpack_from(">i", inflated)[0]
    assert bodies._compressed_topics_bulk(bytearray(inflated), position + 4, len(topics)) is not None
    assert compact(body, True, rocketmq5) == reference(body, True, rocketmq5)


# --------------------------------------------------------------------- applying: S07 in bulk = one at a time


class PerTopicTable(RouteInfoManager):
    """S07 one topic at a time (the path a slave's topics take): the reference for the bulk
    ``_prepare``/``_commit`` of a master's topics."""

    def _prepare(self, broker_name: str, topics: CompactTopics) -> Any:
        return topics

    def _commit(self, broker_name: str, prepared: Any) -> None:
        for topic, nums in prepared.queue_nums():
            self._create_and_update_queue_nums(broker_name, topic, nums)


BROKERS = ["broker-a", "broker-b", "broker-c"]
TOPICS = [f"T{i}" for i in range(6)]
registrations = st.lists(
    st.tuples(
        st.sampled_from(BROKERS),
        st.lists(
            st.tuples(st.sampled_from(TOPICS), st.sampled_from([(8, 8, 6, 0), (4, 4, 6, 0), (8, 8, 2, 1)])),
            max_size=6,
            unique_by=lambda pair: pair[0],
        ),
    ),
    min_size=1,
    max_size=8,
)


def _routes(table: RouteInfoManager) -> dict[str, tuple[bytes, bytes]]:
    routes = {}
    for topic in TOPICS:
        route = table.pickup_topic_route_data(topic)
        if route is not None:
            routes[topic] = (
                bodies.encode_topic_route_data(route),
                bodies.encode_topic_route_data(route, standard_json=True),
            )
    return routes


@PROPERTY
@given(registrations)
def test_bulk_s07_writes_what_one_topic_at_a_time_writes(steps: list[tuple[str, list[tuple[str, Any]]]]) -> None:
    """Registrations decoded by the compact decoder and applied in bulk give the same tables, route
    bytes (fastjson and standard forms), route changes and digest as the reference decoder's topics
    applied one at a time."""
    fast, slow = RouteInfoManager(FakeClock()), PerTopicTable(FakeClock())
    notices: dict[str, list[Any]] = {"fast": [], "slow": []}
    fast.route_listeners.append(lambda revision, topics: notices["fast"].append((revision, topics)))
    slow.route_listeners.append(lambda revision, topics: notices["slow"].append((revision, topics)))
    for step, (broker, topics) in enumerate(steps):
        configs = {topic: TopicConfig(topic, *nums) for topic, nums in topics}
        body = bodies.encode_register_broker_body(configs, DataVersion(0, step, step), compressed=False)
        addr = f"10.0.0.{BROKERS.index(broker)}:10911"
        version = DataVersion(0, step, step)
        fast_topics = decode_java_register_body(body, False, 1 << 20, 100, None).topic_configs
        slow_topics = bodies.decode_register_broker_body(body, compressed=False).topic_config_table
        for table, decoded in ((fast, fast_topics), (slow, slow_topics)):
            table.register_broker(
                cluster_name="c1", broker_name=broker, broker_id=0, broker_addr=addr, data_version=version,
                topic_configs=decoded,
            )  # fmt: skip
        assert dict(fast.topic_queue_table) == dict(slow.topic_queue_table)
        assert {name: set(index) for name, index in fast.topics_by_broker_name.items()} == {
            name: set(index) for name, index in slow.topics_by_broker_name.items()
        }
        assert _routes(fast) == _routes(slow)
        assert fast.route_digest() == slow.route_digest()
        assert fast.route_digest() == full_digest(fast.topic_queue_table, fast.broker_addr_table.values())
    assert notices["fast"] == notices["slow"]


@PROPERTY
@given(
    st.lists(st.tuples(st.from_regex(r"[%|a-zA-Z0-9_-]{1,20}", fullmatch=True), st.integers(0, 3)), max_size=20),
    st.text(min_size=1, max_size=20),
)
def test_the_digest_sum_is_the_sum_of_the_element_hashes(pairs: list[tuple[str, int]], broker_name: str) -> None:
    topics = [topic for topic, _ in pairs]
    nums = [(n, n + 1, n % 16, 2**31 - 1 - n) for _, n in pairs]
    expected = sum(queue_nums_hash(topic, broker_name, n) for topic, n in zip(topics, nums, strict=True))
    assert queue_nums_hash_sum(topics, broker_name, nums) == expected % 2**52
