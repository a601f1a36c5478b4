"""The remoting front door against a real ``python -m namesrv_grpc`` process over loopback: every one of
the 23 request codes, each checked against the same state seen through gRPC; rejections change
nothing; S15 on connection close (with the S17 guard); bad input; idle timeout; oneway requests.

One server serves the module (names are unique per test); tests that need their own configuration
start their own.
"""

from __future__ import annotations

import socket
import struct
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from namesrv.v1 import admin_service_pb2 as admin_pb2
from namesrv.v1 import kv_config_service_pb2 as kv_pb2
from namesrv.v1 import name_server_service_pb2 as ns_pb2
from namesrv.v1 import types_pb2
from namesrv_grpc.core.errors import MalformedBodyError
from namesrv_grpc.core.model import DataVersion, TopicConfig
from namesrv_grpc.remoting.codec import RemotingCommand, encode_command
from namesrv_grpc.remoting.codes import RequestCode, ResponseCode, SerializeType
from namesrv_grpc.wire import bodies, fastjson
from namesrv_grpc.wire.remoting_register_body import decode_java_register_body, split_data_version
from tests.metrics_support import free_port, scrape
from tests.remoting_support import RemotingTestClient
from tests.support import NamesrvProcess, Stubs, poll_until, register_request, running_namesrv, topic

SYSTEM = {"SELF_TEST_TOPIC": topic("SELF_TEST_TOPIC", 1, 1)}
"""What every Java broker registers besides its own topics (S38): a first REGISTER_BROKER with one
topic alone is refused (S42)."""

FAQ_LINE = "\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details."


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NamesrvProcess]:
    port = free_port()
    with running_namesrv(tmp_path_factory.mktemp("remoting"), "--metrics-port", str(port)) as namesrv:
        namesrv.metrics_port = port  # type: ignore[attr-defined]
        yield namesrv


@pytest.fixture(scope="module")
def stubs(server: NamesrvProcess) -> Iterator[Stubs]:
    with server.channel() as channel:
        yield Stubs(channel)


_REGISTERED_OVER: dict[int, set[str]] = {}
"""id of a test's client -> broker addresses it sent REGISTER_BROKER for (removed when it closes, S15)."""


@pytest.fixture
def client(server: NamesrvProcess, stubs: Stubs) -> Iterator[RemotingTestClient]:
    """A remoting connection for one test. Closing it removes the brokers registered over it (S15),
    a moment later: the next test starts once they are gone, so that its "state before" holds."""
    with RemotingTestClient(server.remoting_address) as remoting:
        addrs = _REGISTERED_OVER.setdefault(id(remoting), set())
        yield remoting
    _REGISTERED_OVER.pop(id(remoting), None)

    def removed() -> bool:
        info = stubs.ns.GetBrokerClusterInfo(ns_pb2.GetBrokerClusterInfoRequest(), timeout=5)
        held = {addr for data in info.broker_addr_table.values() for addr in data.broker_addrs.values()}
        return not held & addrs

    poll_until(removed, 10)


def identity(cluster: str, name: str, broker_id: int, addr: str) -> dict[str, str]:
    return {"clusterName": cluster, "brokerName": name, "brokerId": str(broker_id), "brokerAddr": addr}


def register(
    client: RemotingTestClient,
    cluster: str,
    name: str,
    broker_id: int,
    addr: str,
    topics: dict[str, TopicConfig],
    *,
    version: DataVersion = DataVersion(0, 1, 1),
    compressed: bool = False,
    crc: int | None = None,
    ha_server_addr: str = "",
    body: bytes | None = None,
    serialize_type: int = SerializeType.JSON,
) -> RemotingCommand:
    """REGISTER_BROKER as a Java broker sends it."""
    if body is None:
        body = bodies.encode_register_broker_body(topics, version, compressed=compressed)
    fields = {
        **identity(cluster, name, broker_id, addr),
        "haServerAddr": ha_server_addr,
        "compressed": "true" if compressed else "false",
        "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF if crc is None else crc),
    }
    _REGISTERED_OVER.get(id(client), set()).add(addr)
    return client.call(RequestCode.REGISTER_BROKER, fields, body, serialize_type=serialize_type)


def grpc_route(stubs: Stubs, name: str) -> types_pb2.TopicRouteData | None:
    try:
        response = stubs.ns.PickupTopicRoute(ns_pb2.PickupTopicRouteRequest(topic=name), timeout=5)
    except grpc.RpcError as error:
        if error.code() != grpc.StatusCode.NOT_FOUND:
            raise
        return None
    route: types_pb2.TopicRouteData = response.route
    return route


def state(stubs: Stubs) -> tuple[Any, ...]:
    """Everything a rejection must leave unchanged, as gRPC sees it: cluster info, every route, KV."""
    info = stubs.ns.GetBrokerClusterInfo(ns_pb2.GetBrokerClusterInfoRequest(), timeout=5)
    topics = list(stubs.ns.GetAllTopicList(ns_pb2.GetAllTopicListRequest(), timeout=5).topics)
    routes = {t: grpc_route(stubs, t) for t in topics}
    config = dict(stubs.admin.GetNamesrvConfig(admin_pb2.GetNamesrvConfigRequest(), timeout=5).config)
    return (
        info.SerializeToString(deterministic=True),
        {t: r.SerializeToString(deterministic=True) for t, r in routes.items() if r},
        config,
    )


def route_json(body: bytes) -> dict[str, Any]:
    decoded: dict[str, Any] = fastjson.loads(body)
    return decoded


def assert_same_route(remoting_body: bytes, grpc: types_pb2.TopicRouteData) -> None:
    """A remoting route body describes the same route as gRPC's."""
    route = bodies.decode_topic_route_data(remoting_body)
    assert [
        (q.broker_name, q.read_queue_nums, q.write_queue_nums, q.perm, q.topic_sys_flag) for q in route.queue_datas
    ] == [(q.broker_name, q.read_queue_nums, q.write_queue_nums, q.perm, q.topic_sys_flag) for q in grpc.queue_datas]
    assert [(b.cluster, b.broker_name, dict(b.broker_addrs)) for b in route.broker_datas] == [
        (b.cluster, b.broker_name, dict(b.broker_addrs)) for b in grpc.broker_datas
    ]


# ------------------------------------------------------------------------------ codes and framing


def test_all_23_request_codes_are_answered_and_unknown_codes_get_3(client: RemotingTestClient) -> None:
    assert len(RequestCode) == 23
    for code in RequestCode:
        if code in (RequestCode.REGISTER_BROKER, RequestCode.UPDATE_NAMESRV_CONFIG):
            continue  # covered below with real bodies
        answer = client.call(code, {})
        assert answer.code != ResponseCode.REQUEST_CODE_NOT_SUPPORTED, code.name
        assert answer.is_response
    answer = client.call(4242, {})
    assert answer.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert answer.remark == " request type 4242 not supported"


def test_missing_header_field_is_system_error_naming_it(client: RemotingTestClient) -> None:
    answer = client.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {})
    assert answer.code == ResponseCode.SYSTEM_ERROR
    assert "topic" in (answer.remark or "")


def test_rocketmq_serialization_is_answered_in_kind(client: RemotingTestClient, stubs: Stubs) -> None:
    answer = register(
        client,
        "rc-bin",
        "rb-bin",
        0,
        "127.0.0.1:21001",
        {**SYSTEM, "T-bin": topic("T-bin")},
        serialize_type=SerializeType.ROCKETMQ,
    )
    assert answer.code == ResponseCode.SUCCESS
    assert answer.serialize_type == SerializeType.ROCKETMQ
    route = client.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T-bin"}, serialize_type=SerializeType.ROCKETMQ)
    assert route.serialize_type == SerializeType.ROCKETMQ
    grpc_seen = grpc_route(stubs, "T-bin")
    assert grpc_seen is not None
    assert_same_route(route.body, grpc_seen)


def test_pipelined_requests_are_answered_by_opaque(client: RemotingTestClient) -> None:
    requests = [client.request(RequestCode.GET_KV_CONFIG, {"namespace": "pipe", "key": f"k{i}"}) for i in range(50)]
    client.send_raw(b"".join(encode_command(r) for r in requests))
    for request in reversed(requests):
        answer = client.receive(request.opaque)
        assert answer.code == ResponseCode.QUERY_NOT_FOUND
        assert answer.remark == f"No config item, Namespace: pipe Key: {request.ext_fields['key']}"


def test_oneway_request_gets_no_answer_but_is_applied(client: RemotingTestClient, stubs: Stubs) -> None:
    client.send(client.request(RequestCode.PUT_KV_CONFIG, {"namespace": "ow", "key": "k", "value": "v"}, oneway=True))
    assert client.nothing_within(0.5)
    value = stubs.kv.GetKVConfig(kv_pb2.GetKVConfigRequest(namespace="ow", key="k"), timeout=5).value
    assert value == "v"


# ---------------------------------------------------------------------------- brokers (S01-S17)


@pytest.mark.parametrize("compressed", [False, True], ids=["json", "deflater"])
def test_register_broker_as_java_writes_it_is_seen_over_grpc(
    client: RemotingTestClient, stubs: Stubs, compressed: bool
) -> None:
    """REGISTER_BROKER 103 (S03-S08): plain JSON and the compressed Deflater body; the route and the
    cluster info seen over gRPC match; the route over remoting equals gRPC's."""
    suffix = "z" if compressed else "j"
    topics = {f"reg-{suffix}-{i}": topic(f"reg-{suffix}-{i}", read=i + 1, write=i + 1) for i in range(3)}
    answer = register(
        client, f"c-{suffix}", f"b-{suffix}", 0, f"127.0.0.1:2200{int(compressed)}", topics, compressed=compressed
    )
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    for name, config in topics.items():
        seen = grpc_route(stubs, name)
        assert seen is not None
        assert [(q.broker_name, q.read_queue_nums) for q in seen.queue_datas] == [
            (f"b-{suffix}", config.read_queue_nums)
        ]
        assert dict(seen.broker_datas[0].broker_addrs) == {0: f"127.0.0.1:2200{int(compressed)}"}
        remoting = client.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": name})
        assert remoting.code == ResponseCode.SUCCESS
        assert_same_route(remoting.body, seen)
    info = stubs.ns.GetBrokerClusterInfo(ns_pb2.GetBrokerClusterInfoRequest(), timeout=5)
    assert list(info.cluster_addr_table[f"c-{suffix}"].broker_names) == [f"b-{suffix}"]


def test_register_broker_answer_carries_master_and_order_topic_config(client: RemotingTestClient, stubs: Stubs) -> None:
    """S10 (a slave learns its master and HA address from the header) and S11 (body = KVTable of
    ORDER_TOPIC_CONFIG)."""
    stubs.kv.PutKVConfig(kv_pb2.PutKVConfigRequest(namespace="ORDER_TOPIC_CONFIG", key="ord-T", value="b-m:4"))
    try:
        master = register(
            client,
            "c-m",
            "b-m",
            0,
            "127.0.0.1:23001",
            {**SYSTEM, "ord-T": topic("ord-T")},
            ha_server_addr="127.0.0.1:23002",
        )
        assert master.code == ResponseCode.SUCCESS
        assert "masterAddr" not in master.ext_fields
        assert bodies.decode_kv_table(master.body)["ord-T"] == "b-m:4"
        slave = register(client, "c-m", "b-m", 1, "127.0.0.1:23011", {})
        assert slave.ext_fields["masterAddr"] == "127.0.0.1:23001"
        assert slave.ext_fields["haServerAddr"] == "127.0.0.1:23002"
    finally:
        stubs.kv.DeleteKVConfig(kv_pb2.DeleteKVConfigRequest(namespace="ORDER_TOPIC_CONFIG", key="ord-T"))


def test_s01_wrong_body_crc32_is_system_error_and_changes_nothing(
    client: RemotingTestClient, stubs: Stubs, server: NamesrvProcess
) -> None:
    before = state(stubs)
    body = bodies.encode_register_broker_body(
        {**SYSTEM, "crc-T": topic("crc-T")}, DataVersion(0, 1, 1), compressed=False
    )
    answer = register(
        client, "c-crc", "b-crc", 0, "127.0.0.1:24001", {}, body=body, crc=(zlib.crc32(body) + 1) & 0x7FFFFFFF
    )
    assert (answer.code, answer.remark) == (ResponseCode.SYSTEM_ERROR, "crc32 not match")
    assert state(stubs) == before
    peer = f"127.0.0.1:{client.sock.getsockname()[1]}"
    poll_until(
        lambda: f"remoting {peer}: REGISTER_BROKER refused (BODY_CHECKSUM_MISMATCH)" in server.stderr_path.read_text(),
        5,
    )
    # bodyCrc32 = 0 means "not checked" (DefaultRequestProcessor.checksum)
    assert register(client, "c-crc", "b-crc", 0, "127.0.0.1:24001", {}, body=body, crc=0).code == ResponseCode.SUCCESS
    assert grpc_route(stubs, "crc-T") is not None


@pytest.mark.parametrize(
    ("body", "compressed"),
    [
        (b'{"topicConfigSerializeWrapper": [', False),
        (b"\x78\x9c not deflate", True),
        (b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"T":{"perm":"x"}}}}', False),
    ],
    ids=["truncated-json", "not-deflate", "wrong-type"],
)
def test_bad_register_body_is_system_error_and_changes_nothing(
    client: RemotingTestClient, stubs: Stubs, body: bytes, compressed: bool
) -> None:
    before = state(stubs)
    answer = register(client, "c-bad", "b-bad", 0, "127.0.0.1:24101", {}, body=body, compressed=compressed)
    assert answer.code == ResponseCode.SYSTEM_ERROR
    assert answer.remark
    assert state(stubs) == before


def test_deflate_bomb_is_refused_and_changes_nothing(
    client: RemotingTestClient, stubs: Stubs, server: NamesrvProcess
) -> None:
    compressor = zlib.compressobj(9)
    zeros = bytes(1 << 20)
    bomb = b"".join(compressor.compress(zeros) for _ in range(100)) + compressor.flush()  # 100 MiB inflated
    assert len(bomb) < 200_000
    before = state(stubs)
    with RemotingTestClient(server.remoting_address) as other:
        answer = register(client, "c-bomb", "b-bomb", 0, "127.0.0.1:24201", {}, body=bomb, compressed=True)
        assert answer.code == ResponseCode.SYSTEM_ERROR
        assert "byte" in (answer.remark or "")
        assert other.call(RequestCode.GET_BROKER_CLUSTER_INFO).code == ResponseCode.SUCCESS
    assert state(stubs) == before


def test_unregister_broker_and_query_data_version_and_heartbeat(client: RemotingTestClient, stubs: Stubs) -> None:
    """UNREGISTER_BROKER 104 (S16), QUERY_DATA_VERSION 322 (S20), BROKER_HEARTBEAT 904 (S14)."""
    who = identity("c-u", "b-u", 0, "127.0.0.1:25001")
    register(
        client,
        "c-u",
        "b-u",
        0,
        "127.0.0.1:25001",
        {**SYSTEM, "unreg-T": topic("unreg-T")},
        version=DataVersion(0, 5, 7),
    )
    same = client.call(RequestCode.QUERY_DATA_VERSION, who, bodies.encode_data_version(DataVersion(0, 5, 7)))
    assert same.code == ResponseCode.SUCCESS
    assert same.ext_fields["changed"] == "false"
    assert bodies.decode_data_version(same.body) == DataVersion(0, 5, 7)
    other = client.call(RequestCode.QUERY_DATA_VERSION, who, bodies.encode_data_version(DataVersion(0, 5, 8)))
    assert other.ext_fields["changed"] == "true"
    grpc_answer = stubs.ns.QueryDataVersion(
        ns_pb2.QueryDataVersionRequest(
            cluster_name="c-u", broker_name="b-u", broker_id=0, broker_addr="127.0.0.1:25001",
            data_version=types_pb2.DataVersion(state_version=0, timestamp=5, counter=8),
        )
    )  # fmt: skip
    assert grpc_answer.changed
    assert client.call(RequestCode.BROKER_HEARTBEAT, who).code == ResponseCode.SUCCESS
    unknown = identity("c-u", "b-u", 0, "127.0.0.1:25999")
    assert client.call(RequestCode.BROKER_HEARTBEAT, unknown).code == ResponseCode.SUCCESS, "as RocketMQ 5.x"
    unknown_version = client.call(RequestCode.QUERY_DATA_VERSION, unknown, bodies.encode_data_version(DataVersion()))
    assert unknown_version.ext_fields["changed"] == "true"
    assert unknown_version.body == b""
    assert client.call(RequestCode.UNREGISTER_BROKER, who).code == ResponseCode.SUCCESS
    assert grpc_route(stubs, "unreg-T") is None
    assert "c-u" not in stubs.ns.GetBrokerClusterInfo(ns_pb2.GetBrokerClusterInfoRequest()).cluster_addr_table


def test_s15_connection_close_removes_its_broker_within_1s(server: NamesrvProcess, stubs: Stubs) -> None:
    with RemotingTestClient(server.remoting_address) as broker:
        assert register(broker, "c-s15", "b-s15", 0, "127.0.0.1:26001", {**SYSTEM, "s15-T": topic("s15-T")}).code == 0
        assert grpc_route(stubs, "s15-T") is not None
    elapsed = poll_until(lambda: grpc_route(stubs, "s15-T") is None, timeout=1.0)
    assert elapsed <= 1.0
    metrics = scrape(f"http://127.0.0.1:{server.metrics_port}/metrics")  # type: ignore[attr-defined]
    assert metrics.value("namesrv_broker_session_losses_total") >= 1


def test_s17_newer_registration_survives_the_old_connection_close(server: NamesrvProcess, stubs: Stubs) -> None:
    """A newer registration of the same address from another connection, or over gRPC, is left alone
    when the old connection closes."""
    old = RemotingTestClient(server.remoting_address)
    assert register(old, "c-s17", "b-s17", 0, "127.0.0.1:27001", {**SYSTEM, "s17-T": topic("s17-T")}).code == 0
    with RemotingTestClient(server.remoting_address) as new:
        assert register(new, "c-s17", "b-s17", 0, "127.0.0.1:27001", {**SYSTEM, "s17-T": topic("s17-T")}).code == 0
        old.close()
        time.sleep(0.5)
        assert grpc_route(stubs, "s17-T") is not None, "the newer connection's registration was wiped"
    poll_until(lambda: grpc_route(stubs, "s17-T") is None, timeout=2.0)
    # Same with a gRPC registration taking over the address.
    old = RemotingTestClient(server.remoting_address)
    assert register(old, "c-s17", "b-s17", 0, "127.0.0.1:27001", {**SYSTEM, "s17-T": topic("s17-T")}).code == 0
    stubs.ns.RegisterBroker(
        register_request(
            cluster="c-s17", broker_name="b-s17", broker_addr="127.0.0.1:27001", topics={"s17-T": topic("s17-T")}
        )
    )
    old.close()
    time.sleep(0.5)
    assert grpc_route(stubs, "s17-T") is not None
    stubs.ns.UnregisterBroker(
        ns_pb2.UnregisterBrokerRequest(
            cluster_name="c-s17", broker_name="b-s17", broker_id=0, broker_addr="127.0.0.1:27001"
        )
    )


def test_brokers_of_both_protocols_are_seen_by_both(
    client: RemotingTestClient, stubs: Stubs, server: NamesrvProcess
) -> None:
    """Issue item 5: one table; lookups on either protocol, metrics and namesrv-admin see both."""
    register(client, "c-both", "b-remoting", 0, "127.0.0.1:28001", {**SYSTEM, "both-T": topic("both-T")})
    stubs.ns.RegisterBroker(
        register_request(
            cluster="c-both", broker_name="b-grpc", broker_addr="127.0.0.1:28002", topics={"both-T": topic("both-T")}
        )
    )
    seen = grpc_route(stubs, "both-T")
    assert seen is not None
    assert [q.broker_name for q in seen.queue_datas] == ["b-grpc", "b-remoting"]
    remoting = client.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "both-T"})
    assert_same_route(remoting.body, seen)
    info = bodies.decode_cluster_info(client.call(RequestCode.GET_BROKER_CLUSTER_INFO).body)
    assert set(info.cluster_addr_table["c-both"]) == {"b-remoting", "b-grpc"}
    grpc_info = stubs.ns.GetBrokerClusterInfo(ns_pb2.GetBrokerClusterInfoRequest())
    assert set(grpc_info.cluster_addr_table["c-both"].broker_names) == {"b-remoting", "b-grpc"}
    metrics = scrape(f"http://127.0.0.1:{server.metrics_port}/metrics")  # type: ignore[attr-defined]
    live = sum(len(b.broker_addrs) for b in grpc_info.broker_addr_table.values())
    assert metrics.value("namesrv_brokers_live") == live
    assert (
        metrics.value("namesrv_remoting_requests_total", request_code="REGISTER_BROKER", response_code="SUCCESS") >= 1
    )
    assert metrics.value("namesrv_remoting_connections") >= 1
    from tests.support import run_cli

    admin = run_cli("namesrv_grpc.admin.cli", "-n", server.address, "clusters")
    assert admin.returncode == 0, admin.stderr
    assert "b-remoting" in admin.stdout
    assert "b-grpc" in admin.stdout
    snapshot = stubs.admin.ExportRouteSnapshot(admin_pb2.ExportRouteSnapshotRequest(), timeout=60)
    assert snapshot.broker_names == len(grpc_info.broker_addr_table), "the snapshot counts brokers of both protocols"
    assert snapshot.broker_addrs == live


# ------------------------------------------------------------------------------------- routes


def test_get_routeinfo_forms_and_topic_not_exist(client: RemotingTestClient) -> None:
    """GET_ROUTEINFO_BY_TOPIC 105 (S18): fastjson's form for old clients (unquoted integer keys),
    standard JSON for 4.9.4+ and acceptStandardJsonOnly; TOPIC_NOT_EXIST 17 with RocketMQ's remark."""
    register(client, "c-r", "b-r", 0, "127.0.0.1:29001", {**SYSTEM, "route-T": topic("route-T")})
    old = client.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "route-T"}, version=121)
    assert b'"brokerAddrs":{0:"127.0.0.1:29001"}' in old.body
    new = client.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "route-T"}, version=479)
    assert b'"brokerAddrs":{"0":"127.0.0.1:29001"}' in new.body
    asked = client.call(
        RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "route-T", "acceptStandardJsonOnly": "true"}, version=63
    )
    assert asked.body == new.body
    missing = client.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "no-such-topic"})
    assert missing.code == ResponseCode.TOPIC_NOT_EXIST
    assert missing.remark == "No topic route info in name server for the topic: no-such-topic" + FAQ_LINE


def test_route_cache_is_invalidated_for_every_encoding(client: RemotingTestClient, stubs: Stubs) -> None:
    """A change drops the cached route in every encoding (gRPC, both JSON forms) together."""
    register(client, "c-inv", "b-inv", 0, "127.0.0.1:29101", {**SYSTEM, "inv-T": topic("inv-T", perm=6)})
    for version in (121, 479):
        client.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "inv-T"}, version=version)
    grpc_route(stubs, "inv-T")
    wiped = client.call(RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "b-inv"})
    assert wiped.ext_fields["wipeTopicCount"] == "2"
    for version in (121, 479):
        body = client.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "inv-T"}, version=version).body
        assert route_json(body)["queueDatas"][0]["perm"] == 4
    seen = grpc_route(stubs, "inv-T")
    assert seen is not None
    assert seen.queue_datas[0].perm == 4
    added = client.call(RequestCode.ADD_WRITE_PERM_OF_BROKER, {"brokerName": "b-inv"})
    assert added.ext_fields["addTopicCount"] == "2"
    seen = grpc_route(stubs, "inv-T")
    assert seen is not None
    assert seen.queue_datas[0].perm == 6
    assert (
        route_json(client.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "inv-T"}).body)["queueDatas"][0]["perm"]
        == 6
    )


def test_topic_lists_match_grpc(client: RemotingTestClient, stubs: Stubs) -> None:
    """GET_ALL_TOPIC_LIST 206, GET_TOPICS_BY_CLUSTER 224, GET_SYSTEM_TOPIC_LIST 304, unit lists 311-313 (S24)."""
    unit_topics = {
        "unit-T": topic("unit-T", sys_flag=1),
        "sub-T": topic("sub-T", sys_flag=2),
        "both-unit-T": topic("both-unit-T", sys_flag=3),
    }
    register(client, "c-list", "b-list", 0, "127.0.0.1:29201", unit_topics)

    def topics(code: int, fields: dict[str, str] | None = None) -> list[str]:
        answer = client.call(code, fields or {})
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        return sorted(bodies.decode_topic_list(answer.body)[0])

    assert topics(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER) == sorted(
        stubs.ns.GetAllTopicList(ns_pb2.GetAllTopicListRequest()).topics
    )
    assert topics(RequestCode.GET_TOPICS_BY_CLUSTER, {"cluster": "c-list"}) == ["both-unit-T", "sub-T", "unit-T"]
    system = client.call(RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS)
    grpc_system = stubs.ns.GetSystemTopicList(ns_pb2.GetSystemTopicListRequest())
    assert bodies.decode_topic_list(system.body) == (sorted(grpc_system.topics), grpc_system.broker_addr or None)
    assert topics(RequestCode.GET_UNIT_TOPIC_LIST) == sorted(
        stubs.ns.GetUnitTopicList(ns_pb2.GetUnitTopicListRequest()).topics
    )
    assert "unit-T" in topics(RequestCode.GET_UNIT_TOPIC_LIST)
    assert topics(RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST) == sorted(
        stubs.ns.GetHasUnitSubTopicList(ns_pb2.GetHasUnitSubTopicListRequest()).topics
    )
    ununit = topics(RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST)
    assert ununit == sorted(stubs.ns.GetHasUnitSubUnUnitTopicList(ns_pb2.GetHasUnitSubUnUnitTopicListRequest()).topics)
    assert "sub-T" in ununit
    assert "both-unit-T" not in ununit


def test_delete_and_register_topic(client: RemotingTestClient, stubs: Stubs) -> None:
    """DELETE_TOPIC_IN_NAMESRV 216 and REGISTER_TOPIC_IN_NAMESRV 217 (S25)."""
    register(client, "c-t", "b-t", 0, "127.0.0.1:29301", {**SYSTEM, "del-T": topic("del-T")})
    assert client.call(RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": "del-T", "clusterName": "other"}).code == 0
    assert grpc_route(stubs, "del-T") is not None, "another cluster's delete leaves it"
    assert client.call(RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": "del-T"}).code == 0
    assert grpc_route(stubs, "del-T") is None
    body = fastjson.dumps(
        {"queueDatas": [{"brokerName": "b-t", "perm": 6, "readQueueNums": 2, "topicSysFlag": 0, "writeQueueNums": 3}]}
    )
    assert client.call(RequestCode.REGISTER_TOPIC_IN_NAMESRV, {"topic": "new-T"}, body).code == 0
    seen = grpc_route(stubs, "new-T")
    assert seen is not None
    assert (seen.queue_datas[0].read_queue_nums, seen.queue_datas[0].write_queue_nums) == (2, 3)
    before = state(stubs)
    unknown = fastjson.dumps(
        {"queueDatas": [{"brokerName": "nobody", "perm": 6, "readQueueNums": 2, "writeQueueNums": 2}]}
    )
    refused = client.call(RequestCode.REGISTER_TOPIC_IN_NAMESRV, {"topic": "ghost-T"}, unknown)
    assert refused.code == ResponseCode.SYSTEM_ERROR
    assert "nobody" in (refused.remark or "")
    assert (
        client.call(RequestCode.REGISTER_TOPIC_IN_NAMESRV, {"topic": "ghost-T"}, b"{not json").code
        == ResponseCode.SYSTEM_ERROR
    )
    assert state(stubs) == before


def test_broker_member_group(client: RemotingTestClient) -> None:
    """GET_BROKER_MEMBER_GROUP 901."""
    register(client, "c-g", "b-g", 0, "127.0.0.1:29401", {})
    register(client, "c-g", "b-g", 1, "127.0.0.1:29402", {})
    answer = client.call(RequestCode.GET_BROKER_MEMBER_GROUP, {"clusterName": "c-g", "brokerName": "b-g"})
    assert answer.body == (
        b'{"brokerMemberGroup":{"brokerAddrs":{0:"127.0.0.1:29401",1:"127.0.0.1:29402"},'
        b'"brokerName":"b-g","cluster":"c-g"}}'
    )
    # RocketMQ 5.x answers SUCCESS with the remark createResponseCommand(null) left (DefaultRequestProcessor)
    assert (answer.code, answer.remark) == (ResponseCode.SUCCESS, "not set any response code")


# ----------------------------------------------------------------------------- KV and config


def test_kv_config_codes_match_grpc(client: RemotingTestClient, stubs: Stubs) -> None:
    """PUT_KV_CONFIG 100, GET_KV_CONFIG 101, DELETE_KV_CONFIG 102, GET_KVLIST_BY_NAMESPACE 219 (S21)."""
    assert client.call(RequestCode.PUT_KV_CONFIG, {"namespace": "ns-kv", "key": "a", "value": "1"}).code == 0
    assert stubs.kv.GetKVConfig(kv_pb2.GetKVConfigRequest(namespace="ns-kv", key="a")).value == "1"
    got = client.call(RequestCode.GET_KV_CONFIG, {"namespace": "ns-kv", "key": "a"})
    assert (got.code, got.ext_fields["value"]) == (0, "1")
    listed = client.call(RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": "ns-kv"})
    assert bodies.decode_kv_table(listed.body) == {"a": "1"}
    assert client.call(RequestCode.DELETE_KV_CONFIG, {"namespace": "ns-kv", "key": "a"}).code == 0
    missing = client.call(RequestCode.GET_KV_CONFIG, {"namespace": "ns-kv", "key": "a"})
    assert (missing.code, missing.remark) == (ResponseCode.QUERY_NOT_FOUND, "No config item, Namespace: ns-kv Key: a")
    empty = client.call(RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": "ns-kv"})
    assert (empty.code, empty.remark) == (ResponseCode.QUERY_NOT_FOUND, "No config item, Namespace: ns-kv")
    with pytest.raises(grpc.RpcError):
        stubs.kv.GetKVConfig(kv_pb2.GetKVConfigRequest(namespace="ns-kv", key="a"))


def test_namesrv_config_get_update_and_blacklist(client: RemotingTestClient, stubs: Stubs) -> None:
    """GET_NAMESRV_CONFIG 319, UPDATE_NAMESRV_CONFIG 318 (S26): the blacklist answers NO_PERMISSION 16."""
    text = client.call(RequestCode.GET_NAMESRV_CONFIG).body.decode()
    grpc_config = dict(stubs.admin.GetNamesrvConfig(admin_pb2.GetNamesrvConfigRequest()).config)
    assert dict(line.split("=", 1) for line in text.splitlines()) == grpc_config
    before = state(stubs)
    refused = client.call(RequestCode.UPDATE_NAMESRV_CONFIG, {}, b"kvConfigPath=/tmp/evil.json\n")
    assert (refused.code, refused.remark) == (ResponseCode.NO_PERMISSION, "Can not update config in black list.")
    unknown = client.call(RequestCode.UPDATE_NAMESRV_CONFIG, {}, b"noSuchKey=1\n")
    assert unknown.code == ResponseCode.SYSTEM_ERROR
    assert "noSuchKey" in (unknown.remark or "")
    assert state(stubs) == before
    changed = client.call(RequestCode.UPDATE_NAMESRV_CONFIG, {}, b"scanNotActiveBrokerInterval=7000\n")
    assert changed.code == ResponseCode.SUCCESS, changed.remark
    config = stubs.admin.GetNamesrvConfig(admin_pb2.GetNamesrvConfigRequest()).config
    assert config["scanNotActiveBrokerInterval"] == "7000"


# ------------------------------------------------------------------------------------ bad input


def _frame(header: bytes, serialize_type: int = 0, body: bytes = b"") -> bytes:
    return struct.pack(">ii", 4 + len(header) + len(body), (serialize_type << 24) | len(header)) + header + body


TLS_CLIENT_HELLO = bytes.fromhex("16030100c4010000c00303") + bytes(32) + b"\x00\x00\x02\x13\x01\x01\x00"
BAD_FRAMES = {
    "over-max": struct.pack(">i", 17 * 1024 * 1024) + bytes(64),
    "garbage-json-header": _frame(b"{not json at all"),
    "header-not-object": _frame(b"[1,2,3]"),
    "garbage-rocketmq-header": _frame(b"\x00\x01\x02", serialize_type=1),
    "unknown-serialize-type": _frame(b"{}", serialize_type=7),
    "http": b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
    "tls": TLS_CLIENT_HELLO,
    "negative-length": struct.pack(">i", -5) + bytes(8),
}


@pytest.mark.parametrize("data", BAD_FRAMES.values(), ids=BAD_FRAMES.keys())
def test_bad_frames_close_the_connection_and_change_nothing(server: NamesrvProcess, stubs: Stubs, data: bytes) -> None:
    before = state(stubs)
    with RemotingTestClient(server.remoting_address) as other, RemotingTestClient(server.remoting_address) as bad:
        bad.send_raw(data)
        assert bad.wait_closed(5), "the server kept a connection that sent garbage"
        assert (
            other.call(RequestCode.GET_KV_CONFIG, {"namespace": "x", "key": "y"}).code == ResponseCode.QUERY_NOT_FOUND
        )
    assert state(stubs) == before
    log = server.stderr_path.read_text()
    assert "bad frame" in log
    assert "\x00" not in log
    assert "\r" not in log


def test_truncated_frame_then_close_is_logged_and_changes_nothing(server: NamesrvProcess, stubs: Stubs) -> None:
    before = state(stubs)
    frame = encode_command(
        RemotingCommand(RequestCode.PUT_KV_CONFIG, 1, 0, None, {"namespace": "tr", "key": "k", "value": "v"})
    )
    with socket.create_connection(("127.0.0.1", server.remoting_port)) as sock:
        sock.sendall(frame[: len(frame) - 3])
    poll_until(lambda: "inside a frame" in server.stderr_path.read_text(), timeout=5)
    assert state(stubs) == before
    with pytest.raises(grpc.RpcError):
        stubs.kv.GetKVConfig(kv_pb2.GetKVConfigRequest(namespace="tr", key="k"))


def test_frames_split_and_coalesced_across_reads(server: NamesrvProcess) -> None:
    with RemotingTestClient(server.remoting_address) as client:
        requests = [client.request(RequestCode.GET_NAMESRV_CONFIG) for _ in range(3)]
        data = b"".join(encode_command(r) for r in requests)
        for index in range(0, len(data), 7):
            client.send_raw(data[index : index + 7])
            time.sleep(0.001)
        for request in requests:
            assert client.receive(request.opaque).code == ResponseCode.SUCCESS


# ------------------------------------------------------------------------------- own servers


def test_idle_connections_are_closed_after_server_channel_max_idle_time(tmp_path: Path) -> None:
    conf = tmp_path / "namesrv.conf"
    conf.write_text("serverChannelMaxIdleTimeSeconds=1\n")
    with running_namesrv(tmp_path / "ns", "-c", str(conf)) as server:
        idle = RemotingTestClient(server.remoting_address)
        busy = RemotingTestClient(server.remoting_address)
        started = time.monotonic()
        for _ in range(8):  # 2 s of activity on one connection
            assert busy.call(RequestCode.GET_NAMESRV_CONFIG).code == 0
            time.sleep(0.25)
        assert idle.wait_closed(5)
        assert time.monotonic() - started >= 0.9
        assert busy.call(RequestCode.GET_NAMESRV_CONFIG).code == 0, "an active connection was closed"
        busy.close()
        idle.close()


def test_small_frame_limit_from_config(tmp_path: Path) -> None:
    conf = tmp_path / "namesrv.conf"
    conf.write_text("remotingFrameMaxLength=65536\n")
    with running_namesrv(tmp_path / "ns", "-c", str(conf)) as server:
        with RemotingTestClient(server.remoting_address) as client:
            body = bytes(70_000)
            client.send(client.request(RequestCode.PUT_KV_CONFIG, {"namespace": "n", "key": "k", "value": "v"}, body))
            assert client.wait_closed(5)
        assert "over the 65536-byte limit" in server.stderr_path.read_text()


# ------------------------------------------------------------------ re-registration fast path


@pytest.mark.parametrize("compressed", [False, True], ids=["json", "deflater"])
def test_split_data_version_fingerprints_everything_but_the_data_version(compressed: bool) -> None:
    topics = {"a": topic("a"), "b": topic("b", perm=4)}
    first = split_data_version(
        bodies.encode_register_broker_body(topics, DataVersion(0, 1, 1), compressed=compressed), compressed
    )
    again = split_data_version(
        bodies.encode_register_broker_body(topics, DataVersion(0, 1, 2), compressed=compressed), compressed
    )
    other = split_data_version(
        bodies.encode_register_broker_body({**topics, "c": topic("c")}, DataVersion(0, 1, 2), compressed=compressed),
        compressed,
    )
    assert first is not None
    assert again is not None
    assert other is not None
    assert first[0] == again[0] != other[0]
    assert bodies.decode_data_version(again[1]) == DataVersion(0, 1, 2)


def test_a_compressed_body_over_the_configured_inflate_cap_is_not_split_and_is_refused_by_name() -> None:
    """``registerBodyMaxInflatedSize`` bounds the re-registration shortcut too: a body that inflates past
    the configured cap is not split (no fingerprint worked out from it) and the full decode refuses it."""
    topics = {f"cap-{i}": topic(f"cap-{i}") for i in range(200)}
    body = bodies.encode_register_broker_body(topics, DataVersion(0, 1, 1), compressed=True)
    inflated = len(zlib.decompress(body))
    assert split_data_version(body, True, inflated) is not None
    assert split_data_version(body, True, inflated - 1) is None
    split = split_data_version(body, True)
    assert split is not None
    with pytest.raises(MalformedBodyError, match=f"more than the {inflated - 1}-byte cap"):
        decode_java_register_body(body, True, inflated - 1, 1_000, split[0])


@pytest.mark.parametrize("compressed", [False, True], ids=["json", "deflater"])
def test_reregistration_with_a_new_data_version_only(
    client: RemotingTestClient, stubs: Stubs, compressed: bool
) -> None:
    """S06/S20: a new DataVersion with the same topics is stored (the topics are not decoded again);
    topics changed by an admin since are applied again; changed topics are applied."""
    suffix = "z" if compressed else "j"
    name, addr = f"b-fast-{suffix}", f"127.0.0.1:2950{int(compressed)}"
    who = identity("c-fast", name, 0, addr)
    topics = {**SYSTEM, f"fast-{suffix}": topic(f"fast-{suffix}", perm=6)}
    for counter in (1, 2):
        register(client, "c-fast", name, 0, addr, topics, version=DataVersion(0, 1, counter), compressed=compressed)
        answer = client.call(
            RequestCode.QUERY_DATA_VERSION, who, bodies.encode_data_version(DataVersion(0, 1, counter))
        )
        assert answer.ext_fields["changed"] == "false"
    client.call(RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": name})
    seen = grpc_route(stubs, f"fast-{suffix}")
    assert seen is not None
    assert seen.queue_datas[0].perm == 4
    register(client, "c-fast", name, 0, addr, topics, version=DataVersion(0, 1, 3), compressed=compressed)
    seen = grpc_route(stubs, f"fast-{suffix}")
    assert seen is not None
    assert seen.queue_datas[0].perm == 6, "the wiped topic was not applied again"
    changed = {**SYSTEM, f"fast-{suffix}": topic(f"fast-{suffix}", read=2, write=2)}
    register(client, "c-fast", name, 0, addr, changed, version=DataVersion(0, 1, 4), compressed=compressed)
    seen = grpc_route(stubs, f"fast-{suffix}")
    assert seen is not None
    assert seen.queue_datas[0].read_queue_nums == 2


def test_sigterm_with_open_remoting_connections_exits_0(tmp_path: Path) -> None:
    """Orderly shutdown: the listener stops accepting, open connections are closed, exit code 0."""
    with running_namesrv(tmp_path / "ns") as server:
        client = RemotingTestClient(server.remoting_address)
        assert (
            register(client, "c-stop", "b-stop", 0, "127.0.0.1:29601", {**SYSTEM, "stop-T": topic("stop-T")}).code == 0
        )
        started = time.monotonic()
        assert server.stop() == 0
        assert time.monotonic() - started < 10
        assert client.wait_closed(5)
        client.close()
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", server.remoting_port), timeout=2).close()


def test_boot_line_names_both_ports_grpc_last() -> None:
    from namesrv_grpc.cli import boot_line, parse_boot_line
    from namesrv_grpc.config import NamesrvConfig

    line = boot_line(NamesrvConfig(bind_address="0.0.0.0"), 9876, 8081, 2)
    assert line == (
        "The Name Server boot success. serializeType=JSON, 2 serving processes, "
        "remoting 0.0.0.0:9876, gRPC 0.0.0.0:8081"
    )
    assert parse_boot_line(line) == {"remoting": 9876, "gRPC": 8081, "serving processes": 2}
    assert int(line.rsplit(":", 1)[1]) == 8081, "parsers taking the text after the last ':' get the gRPC port"
    with pytest.raises(ValueError, match="not a NameServer boot line"):
        parse_boot_line("Traceback (most recent call last):")


def test_s19_order_topic_conf_and_warm_up_over_remoting(tmp_path: Path) -> None:
    """S19: with orderMessageEnable the route carries orderTopicConf (changed by a KV write at once);
    needWaitForService answers SYSTEM_ERROR "name server not ready" (ClientRequestProcessor)."""
    with (
        running_namesrv(tmp_path / "order", "--order-message-enable") as server,
        RemotingTestClient(server.remoting_address) as client,
    ):
        register(client, "c-o", "b-o", 0, "127.0.0.1:29701", {**SYSTEM, "ordered": topic("ordered")})
        put = {"namespace": "ORDER_TOPIC_CONFIG", "key": "ordered", "value": "b-o:4"}
        assert client.call(RequestCode.PUT_KV_CONFIG, put).code == ResponseCode.SUCCESS
        for version in (121, 479):
            body = client.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "ordered"}, version=version).body
            assert route_json(body)["orderTopicConf"] == "b-o:4"
        assert client.call(RequestCode.PUT_KV_CONFIG, {**put, "value": "b-o:8"}).code == ResponseCode.SUCCESS
        body = client.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "ordered"}).body
        assert route_json(body)["orderTopicConf"] == "b-o:8"
    conf = tmp_path / "wait.conf"
    conf.write_text("needWaitForService=true\nwaitSecondsForService=600\n")
    with (
        running_namesrv(tmp_path / "wait", "-c", str(conf)) as server,
        RemotingTestClient(server.remoting_address) as client,
    ):
        answer = client.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "any"})
        assert (answer.code, answer.remark) == (ResponseCode.SYSTEM_ERROR, "name server not ready")


def test_cpp_client_quirks_are_accepted(client: RemotingTestClient) -> None:
    """The C++ client: a JSON header ending in "\\n" (counted in its length), opaque 0, language CPP,
    version 63 (old route form), AccessKey/Signature/OnsChannel in extFields without an ACL."""
    register(client, "c-cpp", "b-cpp", 0, "127.0.0.1:29801", {**SYSTEM, "cpp-T": topic("cpp-T")})
    header = (
        b'{"code":105,"language":"CPP","version":63,"opaque":0,"flag":0,"remark":"",'
        b'"extFields":{"topic":"cpp-T","AccessKey":"","Signature":"","OnsChannel":"ALIYUN"}}\n'
    )
    client.send_raw(_frame(header))
    answer = client.receive(0)
    assert answer.code == ResponseCode.SUCCESS
    assert b'"brokerAddrs":{0:"127.0.0.1:29801"}' in answer.body


def test_register_body_max_topics_applies_to_java_bodies(tmp_path: Path) -> None:
    conf = tmp_path / "namesrv.conf"
    conf.write_text("registerBodyMaxTopics=2\n")
    with running_namesrv(tmp_path / "ns", "-c", str(conf)) as server, server.channel() as channel:
        stubs = Stubs(channel)
        with RemotingTestClient(server.remoting_address) as client:
            three = {f"lim-{i}": topic(f"lim-{i}") for i in range(3)}
            for compressed in (False, True):
                answer = register(client, "c-lim", "b-lim", 0, "127.0.0.1:29901", three, compressed=compressed)
                assert answer.code == ResponseCode.SYSTEM_ERROR
                assert "registerBodyMaxTopics" in (answer.remark or "")
            assert not stubs.ns.GetAllTopicList(ns_pb2.GetAllTopicListRequest()).topics
            two = {f"lim-{i}": topic(f"lim-{i}") for i in range(2)}
            assert register(client, "c-lim", "b-lim", 0, "127.0.0.1:29901", two).code == ResponseCode.SUCCESS


def test_register_body_max_filter_servers_applies_to_java_bodies(tmp_path: Path) -> None:
    conf = tmp_path / "namesrv.conf"
    conf.write_text("registerBodyMaxFilterServers=2\n")
    with running_namesrv(tmp_path / "ns", "-c", str(conf)) as server, server.channel() as channel:
        stubs = Stubs(channel)
        with RemotingTestClient(server.remoting_address) as client:
            topics = {**SYSTEM, "flt-0": topic("flt-0")}
            servers = ["127.0.0.1:45001", "127.0.0.1:45002", "127.0.0.1:45003"]
            for compressed in (False, True):
                body = bodies.encode_register_broker_body(topics, DataVersion(0, 1, 1), servers, compressed=compressed)
                answer = register(
                    client, "c-flt", "b-flt", 0, "127.0.0.1:29911", topics, body=body, compressed=compressed
                )
                assert answer.code == ResponseCode.SYSTEM_ERROR
                assert "more than 2 (registerBodyMaxFilterServers)" in (answer.remark or "")
            assert not stubs.ns.GetAllTopicList(ns_pb2.GetAllTopicListRequest()).topics
            body = bodies.encode_register_broker_body(topics, DataVersion(0, 1, 1), servers[:2], compressed=False)
            assert (
                register(client, "c-flt", "b-flt", 0, "127.0.0.1:29911", topics, body=body).code == ResponseCode.SUCCESS
            )
