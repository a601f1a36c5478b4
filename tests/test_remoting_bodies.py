"""RocketMQ body formats (namesrv_grpc.wire.bodies) against byte vectors built from RocketMQ itself.

There is no REGISTER_BROKER byte vector in apache/rocketmq's tests (``RegisterBrokerBodyTest`` only
round-trips through its own encoder), so the vectors here are built two ways:

- from a real broker file: ``examples/topics-quickstart.json`` is a 4.x broker's ``topics.json``, which
  the broker writes with fastjson from the same ``TopicConfigSerializeWrapper`` it sends in
  REGISTER_BROKER; our encoder must reproduce its content byte for byte (ignoring the pretty-printing);
- field by field from the Java source (``RegisterBrokerBody.encode(true)``, ``TopicConfig.encode()``,
  ``TopicConfigAndMappingSerializeWrapper``, ``DataVersion``), written out literally below with
  ``struct``, independent of the encoder under test.
"""

from __future__ import annotations

import json
import struct
import tracemalloc
import zlib
from pathlib import Path
from types import MappingProxyType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from namesrv_grpc.core.errors import MalformedBodyError
from namesrv_grpc.core.model import BrokerData, ClusterInfo, DataVersion, QueueData, TopicConfig, TopicRouteData
from namesrv_grpc.wire import bodies

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _compact(text: str) -> str:
    """fastjson's compact form of a pretty-printed fastjson file (same key order)."""
    return json.dumps(json.loads(text), separators=(",", ":"), ensure_ascii=False)


def _topics_from_file(path: Path) -> tuple[dict[str, TopicConfig], DataVersion]:
    wrapper = json.loads(path.read_text())
    topics = {
        name: TopicConfig(
            c["topicName"],
            c["readQueueNums"],
            c["writeQueueNums"],
            c["perm"],
            c["topicSysFlag"],
            c["order"],
            c["topicFilterType"],
        )
        for name, c in wrapper["topicConfigTable"].items()
    }
    version = wrapper["dataVersion"]
    return topics, DataVersion(version.get("stateVersion", 0), version["timestamp"], version["counter"])


# ------------------------------------------------------------------------- REGISTER_BROKER: JSON


def test_json_body_reproduces_a_real_brokers_topic_config_wrapper() -> None:
    """A 4.x broker's REGISTER_BROKER JSON is {"filterServerList":[],"topicConfigSerializeWrapper":W}
    where W is exactly what it writes to topics.json."""
    path = EXAMPLES / "topics-quickstart.json"
    topics, version = _topics_from_file(path)
    body = bodies.encode_register_broker_body(topics, version, [], compressed=False, rocketmq5=False)
    assert body.decode() == '{"filterServerList":[],"topicConfigSerializeWrapper":' + _compact(path.read_text()) + "}"
    decoded = bodies.decode_register_broker_body(body, compressed=False)
    assert decoded.topic_config_table == topics
    assert decoded.data_version == version
    assert decoded.filter_server_list == ()


def test_json_body_of_a_5x_broker_field_by_field() -> None:
    """RocketMQ 5.x: TopicConfigAndMappingSerializeWrapper (dataVersion, mappingDataVersion,
    topicConfigTable, topicQueueMappingDetailMap, topicQueueMappingInfoMap), TopicConfig with
    attributes, DataVersion with stateVersion -- properties in fastjson's alphabetical order."""
    expected = (
        b'{"filterServerList":["10.0.0.9:30000"],"topicConfigSerializeWrapper":{'
        b'"dataVersion":{"counter":7,"stateVersion":2,"timestamp":1700000000123},'
        b'"mappingDataVersion":{"counter":0,"stateVersion":0,"timestamp":1700000000123},'
        b'"topicConfigTable":{"TopicTest":{"attributes":{"+message.type":"FIFO"},"order":true,"perm":6,'
        b'"readQueueNums":4,"topicFilterType":"SINGLE_TAG","topicName":"TopicTest","topicSysFlag":0,'
        b'"writeQueueNums":4}},"topicQueueMappingDetailMap":{},"topicQueueMappingInfoMap":{}}}'
    )
    topic = TopicConfig("TopicTest", 4, 4, 6, 0, True, "SINGLE_TAG", MappingProxyType({"+message.type": "FIFO"}))
    version = DataVersion(2, 1700000000123, 7)
    assert bodies.encode_register_broker_body({"TopicTest": topic}, version, ["10.0.0.9:30000"], compressed=False) == (
        expected
    )
    decoded = bodies.decode_register_broker_body(expected, compressed=False)
    assert decoded.topic_config_table == {"TopicTest": topic}
    assert decoded.data_version == version
    assert decoded.filter_server_list == ("10.0.0.9:30000",)


def test_json_body_tolerates_unknown_fields_and_java_defaults() -> None:
    body = (
        b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"T":{"topicName":"T"},"K":{}},'
        b'"topicQueueMappingInfoMap":{"T":{"bname":"b","epoch":1,"hostedQueues":{0:[]}}},"extra":[1]},"new":1}'
    )
    decoded = bodies.decode_register_broker_body(body, compressed=False)
    assert decoded.topic_config_table == {"T": TopicConfig("T"), "K": TopicConfig("K")}
    assert decoded.data_version == DataVersion()
    assert bodies.decode_register_broker_body(b"", compressed=False).topic_config_table == {}
    assert bodies.decode_register_broker_body(b"", compressed=True).data_version == DataVersion()


# ------------------------------------------------------------------- REGISTER_BROKER: compressed


def _java_compressed_layout(rocketmq5: bool) -> bytes:
    """The inflated bytes of RegisterBrokerBody.encode(true), written out from the Java source."""

    def chunk(data: bytes) -> bytes:
        return struct.pack(">i", len(data)) + data

    if rocketmq5:
        out = chunk(b'{"counter":7,"stateVersion":2,"timestamp":1700000000123}')
    else:
        out = chunk(b'{"counter":7,"timestamp":1700000000123}')
    out += struct.pack(">i", 2)
    if rocketmq5:
        out += chunk(b"TopicTest 4 4 6 SINGLE_TAG {}")
        # The length prefix counts UTF-8 bytes, not characters: a non-ASCII attribute value checks it.
        out += chunk('%RETRY%orders 8 8 7 MULTI_TAG {"+message.type":"FIFO","+note":"订单"}'.encode())
    else:
        out += chunk(b"TopicTest 4 4 6 SINGLE_TAG")
        out += chunk(b"%RETRY%orders 8 8 7 MULTI_TAG")
    out += chunk(b'["10.0.0.9:30000"]')
    if rocketmq5:
        out += struct.pack(">i", 0)  # topic queue mapping count
    return out


_COMPRESSED_TOPICS_5 = {
    "TopicTest": TopicConfig("TopicTest", 4, 4, 6),
    "%RETRY%orders": TopicConfig(
        "%RETRY%orders", 8, 8, 7, 0, False, "MULTI_TAG", MappingProxyType({"+message.type": "FIFO", "+note": "订单"})
    ),
}


@pytest.mark.parametrize("compressed", [True, False])
@pytest.mark.parametrize("name", ["订单", "a:b", "a.b", "x" * 128])
def test_a_topic_name_topicvalidator_refuses_is_refused_as_on_grpc(name: str, compressed: bool) -> None:
    """The remoting door applies the gRPC door's topic rule (RocketMQ ``TopicValidator``)."""
    config = TopicConfig(name, 4, 4, 6)
    if compressed:
        layout = struct.pack(">i", 2) + b"{}" + struct.pack(">i", 1)
        line = f"{name} 4 4 6 SINGLE_TAG".encode()
        layout += struct.pack(">i", len(line)) + line + struct.pack(">i", 2) + b"[]"
        body = zlib.compress(layout)
    else:
        body = bodies.encode_register_broker_body({"T": config}, DataVersion(), compressed=False)
    with pytest.raises(MalformedBodyError, match="TopicValidator"):
        bodies.decode_register_broker_body(body, compressed=compressed)


@pytest.mark.parametrize("rocketmq5", [True, False])
def test_compressed_body_matches_the_java_layout(rocketmq5: bool) -> None:
    layout = _java_compressed_layout(rocketmq5)
    topics = (
        _COMPRESSED_TOPICS_5
        if rocketmq5
        else {
            "TopicTest": TopicConfig("TopicTest", 4, 4, 6),
            "%RETRY%orders": TopicConfig("%RETRY%orders", 8, 8, 7, 0, False, "MULTI_TAG"),
        }
    )
    version = DataVersion(2 if rocketmq5 else 0, 1700000000123, 7)
    # What a Java broker sends: Deflater(BEST_COMPRESSION) through DeflaterOutputStream (a zlib stream).
    java_body = zlib.compress(layout, 9)
    decoded = bodies.decode_register_broker_body(java_body, compressed=True)
    assert decoded.topic_config_table == topics
    assert decoded.data_version == version
    assert decoded.filter_server_list == ("10.0.0.9:30000",)
    ours = bodies.encode_register_broker_body(topics, version, ["10.0.0.9:30000"], compressed=True, rocketmq5=rocketmq5)
    assert zlib.decompress(ours) == layout


def test_compressed_body_drops_sys_flag_and_order_like_java() -> None:
    topic = TopicConfig("T", 2, 2, 6, 1, True)
    body = bodies.encode_register_broker_body({"T": topic}, DataVersion(), compressed=True)
    assert bodies.decode_register_broker_body(body, compressed=True).topic_config_table == {
        "T": TopicConfig("T", 2, 2, 6, 0, False)
    }


def test_compressed_body_of_a_real_broker_and_crc() -> None:
    topics, version = _topics_from_file(EXAMPLES / "topics-dev.json")
    body = bodies.encode_register_broker_body(topics, version, compressed=True, rocketmq5=False)
    decoded = bodies.decode_register_broker_body(body, compressed=True)
    assert decoded.topic_config_table == {
        name: config._replace(topic_sys_flag=0, order=False) for name, config in topics.items()
    }
    # bodyCrc32 as a broker computes it (UtilAll.crc32 = CRC32 & 0x7FFFFFFF) is over these bytes as sent.
    assert 0 <= zlib.crc32(body) & 0x7FFFFFFF < 2**31


def _bomb(mebibytes: int) -> bytes:
    """A valid zlib stream of ``mebibytes`` MiB of zeros, about 1 KiB per MiB (built from one
    full-flushed deflate block repeated, so it takes a second rather than minutes)."""
    block_input = bytes(1 << 20)
    deflater = zlib.compressobj(9, zlib.DEFLATED, -15)
    first = deflater.compress(block_input) + deflater.flush(zlib.Z_FULL_FLUSH)
    repeated = deflater.compress(block_input) + deflater.flush(zlib.Z_FULL_FLUSH)
    end = deflater.flush()
    adler = 1
    for _ in range(mebibytes):
        adler = zlib.adler32(block_input, adler)
    return b"\x78\xda" + first + repeated * (mebibytes - 1) + end + struct.pack(">I", adler)


def test_deflate_bomb_is_rejected_within_the_cap() -> None:
    bomb = _bomb(1100)  # ~1.1 MiB compressed, 1.1 GiB inflated
    assert len(bomb) < 1_200_000
    assert len(zlib.decompressobj().decompress(_bomb(3))) == 3 << 20  # the construction is a real stream
    cap = 32 << 20
    tracemalloc.start()
    try:
        with pytest.raises(MalformedBodyError, match=f"more than the {cap}-byte cap"):
            bodies.decode_register_broker_body(bomb, compressed=True, max_inflated=cap)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < cap + (8 << 20), f"peak {peak} bytes while inflating under a {cap}-byte cap"


# ------------------------------------------------------------------------------ malformed bodies


def _json_body(topic: dict[str, object] | str) -> bytes:
    return json.dumps({"topicConfigSerializeWrapper": {"topicConfigTable": {"T": topic}}}).encode()


def _compressed(layout: bytes) -> bytes:
    return zlib.compress(layout)


def _chunk(data: bytes) -> bytes:
    return struct.pack(">i", len(data)) + data


_GOOD_DV = _chunk(b'{"counter":1}')


@pytest.mark.parametrize(
    ("body", "compressed", "message"),
    [
        (b"{not json", False, "RegisterBrokerBody body is not JSON"),
        (b"[]", False, "RegisterBrokerBody must be a JSON object"),
        (b'{"topicConfigSerializeWrapper":[]}', False, "topicConfigSerializeWrapper must be a JSON object"),
        (
            b'{"topicConfigSerializeWrapper":{"dataVersion":{"counter":"1"}}}',
            False,
            "topicConfigSerializeWrapper.dataVersion.counter must be a 64-bit integer",
        ),
        (
            b'{"topicConfigSerializeWrapper":{"topicConfigTable":[]}}',
            False,
            "topicConfigSerializeWrapper.topicConfigTable must be a JSON object",
        ),
        (_json_body("x"), False, "topicConfigTable['T'] must be a JSON object"),
        (_json_body({"perm": 99}), False, "topicConfigTable['T'].perm must be an integer from 0 to 15"),
        (_json_body({"readQueueNums": -1}), False, "topicConfigTable['T'].readQueueNums must be an integer"),
        (_json_body({"writeQueueNums": "4"}), False, "topicConfigTable['T'].writeQueueNums must be an integer"),
        (_json_body({"topicSysFlag": -3}), False, "topicConfigTable['T'].topicSysFlag"),
        (_json_body({"order": 1}), False, "topicConfigTable['T'].order must be true or false"),
        (_json_body({"topicFilterType": "X"}), False, "topicConfigTable['T'].topicFilterType must be SINGLE_TAG"),
        (_json_body({"topicName": " bad "}), False, "topicConfigTable['T'].topicName must be a topic name"),
        (_json_body({"topicName": 5}), False, "topicConfigTable['T'].topicName"),
        (_json_body({"attributes": {"a": 1}}), False, "topicConfigTable['T'].attributes['a'] must be a string"),
        (b'{"filterServerList":"x"}', False, "filterServerList must be a JSON array"),
        (b'{"filterServerList":[1]}', False, "filterServerList[0] must be a string"),
        (b"\x78\x9c garbage", True, "not a zlib (Deflater) stream"),
        (zlib.compress(b"x" * 100)[:-8], True, "truncated"),
        (_compressed(b"\x00\x00"), True, "ends inside the length of dataVersion"),
        (_compressed(struct.pack(">i", 50) + b"{}"), True, "dataVersion length 50"),
        (_compressed(_chunk(b"{x")), True, "dataVersion body is not JSON"),
        (_compressed(_GOOD_DV + struct.pack(">i", 1_000_000)), True, "topic count 1000000 does not fit"),
        (_compressed(_GOOD_DV + struct.pack(">i", -1)), True, "topic count -1"),
        (_compressed(_GOOD_DV + struct.pack(">i", 1) + _chunk(b"T 4 4")), True, "must be 'name readQueueNums"),
        (
            _compressed(_GOOD_DV + struct.pack(">i", 1) + _chunk(b"T 4 x 6 SINGLE_TAG")),
            True,
            "topicConfigTable['T'].writeQueueNums must be an integer",
        ),
        (
            _compressed(_GOOD_DV + struct.pack(">i", 1) + _chunk(b"T 4 4 6 TAGS")),
            True,
            "topicConfigTable['T'].topicFilterType",
        ),
        (
            _compressed(_GOOD_DV + struct.pack(">i", 1) + _chunk(b"T 4 4 16 SINGLE_TAG")),
            True,
            "topicConfigTable['T'].perm must be an integer from 0 to 15",
        ),
        (
            _compressed(_GOOD_DV + struct.pack(">i", 1) + _chunk(b"T 4 4 6 SINGLE_TAG {bad")),
            True,
            "topicConfigTable['T'].attributes body is not JSON",
        ),
        (
            _compressed(_GOOD_DV + struct.pack(">i", 1) + _chunk(b"T\xff 4 4 6 SINGLE_TAG")),
            True,
            "topicConfigTable is not UTF-8",
        ),
        (_compressed(_GOOD_DV + struct.pack(">i", 0) + _chunk(b"{}")), True, "filterServerList must be a JSON array"),
        (
            _compressed(_GOOD_DV + struct.pack(">i", 0) + _chunk(b"[]") + struct.pack(">i", 5)),
            True,
            "topic queue mapping count 5 does not fit",
        ),
        (
            _compressed(_GOOD_DV + struct.pack(">i", 0) + _chunk(b"[]") + struct.pack(">i", 0) + b"zz"),
            True,
            "2 bytes after its last section",
        ),
    ],
)
def test_malformed_register_bodies_name_the_field(body: bytes, compressed: bool, message: str) -> None:
    with pytest.raises(MalformedBodyError) as info:
        bodies.decode_register_broker_body(body, compressed=compressed)
    assert message in str(info.value)


# ------------------------------------------------------------------------------- round trips

_names = st.text(alphabet=st.characters(blacklist_categories=("Cc", "Cs", "Zs", "Zl", "Zp")), min_size=1, max_size=12)
_topic_names = st.from_regex(r"[%|a-zA-Z0-9_-]{1,127}", fullmatch=True)
_topic_configs = st.builds(
    TopicConfig,
    _topic_names,
    st.integers(0, 65535),
    st.integers(0, 65535),
    st.integers(0, 15),
    st.integers(0, 7),
    st.booleans(),
    st.sampled_from(["SINGLE_TAG", "MULTI_TAG"]),
    st.dictionaries(_names, st.text(max_size=10), max_size=3),
)
_versions = st.builds(DataVersion, st.integers(0, 2**62), st.integers(0, 2**62), st.integers(0, 2**62))


@settings(max_examples=150, deadline=None)
@given(st.lists(_topic_configs, max_size=6), _versions, st.lists(st.text(max_size=15), max_size=3))
def test_register_body_round_trip(configs: list[TopicConfig], version: DataVersion, filters: list[str]) -> None:
    topics = {config.topic_name: config for config in configs}
    plain = bodies.encode_register_broker_body(topics, version, filters, compressed=False)
    decoded = bodies.decode_register_broker_body(plain, compressed=False)
    assert (decoded.topic_config_table, decoded.data_version, decoded.filter_server_list) == (
        topics,
        version,
        tuple(filters),
    )
    packed = bodies.encode_register_broker_body(topics, version, filters, compressed=True)
    decoded = bodies.decode_register_broker_body(packed, compressed=True)
    assert decoded.topic_config_table == {
        name: config._replace(topic_sys_flag=0, order=False) for name, config in topics.items()
    }
    assert (decoded.data_version, decoded.filter_server_list) == (version, tuple(filters))


# ----------------------------------------------------------------------------------- responses


def _route() -> TopicRouteData:
    return TopicRouteData(
        (QueueData("broker-a", 4, 4, 6, 0), QueueData("broker-b", 8, 8, 6, 0)),
        (
            BrokerData("DefaultCluster", "broker-a", {1: "10.0.0.2:10911", 0: "10.0.0.1:10911"}),
            BrokerData("DefaultCluster", "broker-b", {0: "10.0.0.3:10911"}, "zone-1", True),
        ),
        {},
    )


def test_topic_route_data_as_the_java_namesrv_writes_it() -> None:
    assert bodies.encode_topic_route_data(_route()) == (
        b'{"brokerDatas":[{"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"},"brokerName":"broker-a",'
        b'"cluster":"DefaultCluster","enableActingMaster":false},{"brokerAddrs":{0:"10.0.0.3:10911"},'
        b'"brokerName":"broker-b","cluster":"DefaultCluster","enableActingMaster":true,"zoneName":"zone-1"}],'
        b'"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,'
        b'"topicSysFlag":0,"writeQueueNums":4},{"brokerName":"broker-b","perm":6,"readQueueNums":8,'
        b'"topicSysFlag":0,"writeQueueNums":8}]}'
    )
    standard = bodies.encode_topic_route_data(_route(), standard_json=True)
    assert b'"brokerAddrs":{"0":"10.0.0.1:10911","1":"10.0.0.2:10911"}' in standard
    assert json.loads(standard)["queueDatas"][1]["readQueueNums"] == 8


_names = st.text(st.characters(codec="utf-8") | st.sampled_from('"\\\u2028<>&\x00\ud800'), max_size=8)
_queue_datas = st.builds(
    QueueData, _names, st.integers(0, 1024), st.integers(0, 1024), st.integers(0, 7), st.integers(-(2**31), 2**31 - 1)
)
_broker_datas = st.builds(
    BrokerData, _names, _names, st.dictionaries(st.integers(0, 20), _names, max_size=3), _names, st.booleans()
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(_queue_datas, max_size=4),
    st.lists(_broker_datas, max_size=4),
    st.dictionaries(_names, st.lists(_names, max_size=2).map(tuple), max_size=2),
    _names,
    st.booleans(),
)
def test_topic_route_data_from_cached_parts_is_byte_for_byte_the_plain_writing(
    queue_datas: list[QueueData],
    broker_datas: list[BrokerData],
    filter_servers: dict[str, tuple[str, ...]],
    order_topic_conf: str,
    standard: bool,
) -> None:
    """The route body joined from cached QueueData/BrokerData texts is what writing the whole route
    value by value gives, in both forms, escapes and lone surrogates included; asked twice (the
    second time from the cache), the same."""
    route = TopicRouteData(tuple(queue_datas), tuple(broker_datas), filter_servers, order_topic_conf)
    plain = bodies.encode_topic_route_data_plain(route, standard_json=standard)
    assert bodies.encode_topic_route_data(route, standard_json=standard) == plain
    assert bodies.encode_topic_route_data(route, standard_json=standard) == plain


def test_topic_route_data_with_order_conf_and_decoding_both_forms() -> None:
    route = TopicRouteData(_route().queue_datas, _route().broker_datas, {"10.0.0.1:10911": ("f:1",)}, "broker-a:4")
    body = bodies.encode_topic_route_data(route)
    assert b'"orderTopicConf":"broker-a:4","queueDatas"' in body
    assert b'"filterServerTable":{"10.0.0.1:10911":["f:1"]}' in body
    for form in (body, bodies.encode_topic_route_data(route, standard_json=True)):
        decoded = bodies.decode_topic_route_data(form)
        assert decoded.queue_datas == route.queue_datas
        assert decoded.broker_datas == route.broker_datas
        assert decoded.filter_server_table == route.filter_server_table
        assert decoded.order_topic_conf == "broker-a:4"


def test_register_topic_body() -> None:
    body = b'{"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":2,"topicSysFlag":0,"writeQueueNums":2}]}'
    assert bodies.decode_register_topic_body(body) == [QueueData("broker-a", 2, 2, 6, 0)]
    with pytest.raises(MalformedBodyError, match="needs a TopicRouteData body"):
        bodies.decode_register_topic_body(b"")
    with pytest.raises(MalformedBodyError, match=r"queueDatas\[0\].perm must be an integer from 0 to 15"):
        bodies.decode_register_topic_body(b'{"queueDatas":[{"brokerName":"b","perm":-1}]}')
    with pytest.raises(MalformedBodyError, match=r"brokerDatas\[0\].brokerAddrs key must be a broker id"):
        bodies.decode_topic_route_data(b'{"brokerDatas":[{"brokerName":"b","brokerAddrs":{"x":"a:1"}}]}')


def test_cluster_info_kv_table_topic_list_member_group() -> None:
    info = ClusterInfo(
        {"broker-a": BrokerData("c1", "broker-a", {0: "10.0.0.1:10911"})},
        {"c1": ("broker-a",)},
    )
    body = bodies.encode_cluster_info(info)
    assert body == (
        b'{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"10.0.0.1:10911"},"brokerName":"broker-a",'
        b'"cluster":"c1","enableActingMaster":false}},"clusterAddrTable":{"c1":["broker-a"]}}'
    )
    assert bodies.decode_cluster_info(body) == info
    assert bodies.encode_kv_table({"orders": "broker-a:4", "生产": "是"}) == (
        '{"table":{"orders":"broker-a:4","生产":"是"}}'.encode()
    )
    assert bodies.decode_kv_table(bodies.encode_kv_table({"k": "v"})) == {"k": "v"}
    assert bodies.encode_topic_list(["a", "b"]) == b'{"topicList":["a","b"]}'
    assert bodies.encode_topic_list(["c1"], "10.0.0.1:10911") == (b'{"brokerAddr":"10.0.0.1:10911","topicList":["c1"]}')
    assert bodies.decode_topic_list(b'{"brokerAddr":"h:1","topicList":["x"]}') == (["x"], "h:1")
    assert bodies.encode_broker_member_group("c1", "broker-a", {1: "h:2", 0: "h:1"}) == (
        b'{"brokerMemberGroup":{"brokerAddrs":{0:"h:1",1:"h:2"},"brokerName":"broker-a","cluster":"c1"}}'
    )


def test_data_version_and_namesrv_config() -> None:
    version = DataVersion(1, 1700000000000, 5)
    assert bodies.encode_data_version(version) == b'{"counter":5,"stateVersion":1,"timestamp":1700000000000}'
    assert bodies.decode_data_version(bodies.encode_data_version(version)) == version
    assert bodies.decode_data_version(b'{"counter":3,"timestamp":9}') == DataVersion(0, 9, 3)
    assert bodies.decode_data_version(b"") == DataVersion()
    with pytest.raises(MalformedBodyError, match=r"dataVersion.timestamp must be a 64-bit integer"):
        bodies.decode_data_version(b'{"timestamp":1.5}')
    assert bodies.decode_namesrv_config(
        b"# c\nkvConfigPath = /tmp/kv.json\norderMessageEnable=true\nzone=\\u751f\n"
    ) == {
        "kvConfigPath": "/tmp/kv.json",
        "orderMessageEnable": "true",
        "zone": "生",
    }
    assert bodies.encode_namesrv_config({"b": "2", "a": "1"}) == b"a=1\nb=2\n"
    with pytest.raises(MalformedBodyError, match="larger than 10"):
        bodies.decode_namesrv_config(b"a=1\n" * 5, max_bytes=10)
    with pytest.raises(MalformedBodyError, match="not UTF-8"):
        bodies.decode_namesrv_config(b"a=\xff")
