"""The RocketMQ 5.x rules through both front doors of a real ``python -m namesrv_grpc`` process over
loopback: zones (S39), static topics through JSON, compressed and protobuf bodies (S40), the
topic-list switches (S41), the one-topic first registration (S42) and the 5.x config keys (S43).
Remoting requests are built as Java 5.x brokers and clients send them (ext fields ``__ZONE_NAME``,
``__ZONE_MODE``)."""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from namesrv.v1 import admin_service_pb2 as admin_pb2
from namesrv.v1 import name_server_service_pb2 as ns_pb2
from namesrv_grpc.config import KEYS
from namesrv_grpc.core.model import DataVersion, TopicQueueMappingInfo
from namesrv_grpc.remoting.codec import RemotingCommand
from namesrv_grpc.remoting.codes import RequestCode, ResponseCode
from namesrv_grpc.wire import bodies, fastjson
from namesrv_grpc.wire.grpc_register_body import encode_body
from tests.remoting_support import RemotingTestClient
from tests.support import NamesrvProcess, Stubs, error_info, run_cli, running_namesrv, topic

V1 = DataVersion(0, 1_000, 1)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NamesrvProcess]:
    with running_namesrv(tmp_path_factory.mktemp("rocketmq5")) as namesrv:
        yield namesrv


@pytest.fixture(scope="module")
def stubs(server: NamesrvProcess) -> Iterator[Stubs]:
    with server.channel() as channel:
        yield Stubs(channel)


@pytest.fixture
def client(server: NamesrvProcess) -> Iterator[RemotingTestClient]:
    with RemotingTestClient(server.remoting_address) as remoting:
        yield remoting


def remoting_register(
    client: RemotingTestClient,
    name: str,
    broker_id: int,
    addr: str,
    topics: list[str],
    *,
    zone: str | None = None,
    version: DataVersion = V1,
    compressed: bool = False,
    mappings: dict[str, TopicQueueMappingInfo] | None = None,
    request_version: int = 479,
    cluster: str = "c5",
) -> RemotingCommand:
    """REGISTER_BROKER as a Java 5.x broker sends it (zone in the ext field ``__ZONE_NAME``)."""
    body = bodies.encode_register_broker_body(
        {t: topic(t) for t in topics}, version, compressed=compressed, topic_queue_mappings=mappings
    )
    fields = {
        "clusterName": cluster,
        "brokerName": name,
        "brokerId": str(broker_id),
        "brokerAddr": addr,
        "haServerAddr": "",
        "compressed": "true" if compressed else "false",
        "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF),
        "enableActingMaster": "false",
        "heartbeatTimeoutMillis": "120000",
    }
    if zone is not None:
        fields["__ZONE_NAME"] = zone
    return client.call(RequestCode.REGISTER_BROKER, fields, body, version=request_version)


def remoting_route(client: RemotingTestClient, topic_name: str, **ext: str) -> RemotingCommand:
    return client.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic_name, **ext})


def brokers_of(body: bytes) -> list[str]:
    return sorted(b["brokerName"] for b in fastjson.loads(body)["brokerDatas"])


def queue_brokers_of(body: bytes) -> list[str]:
    return sorted(q["brokerName"] for q in fastjson.loads(body)["queueDatas"])


def mapping(topic_name: str, bname: str, ids: dict[int, int]) -> TopicQueueMappingInfo:
    return TopicQueueMappingInfo(topic_name, bname, total_queues=4, epoch=1_700_000_000_000, curr_id_map=ids)


# ------------------------------------------------------------------------------------ S39 zones


def test_s39_remoting_zone_mode_filters_keeps_master_less_groups_and_answers_old_json(
    client: RemotingTestClient,
) -> None:
    topics = ["Z39", "Z39b"]
    assert remoting_register(client, "z39-a", 0, "127.0.0.1:39011", topics, zone="zone-a").code == 0
    assert remoting_register(client, "z39-b", 0, "127.0.0.1:39021", topics, zone="zone-b").code == 0
    assert remoting_register(client, "z39-c", 0, "127.0.0.1:39031", topics, zone="zone-b").code == 0
    assert remoting_register(client, "z39-c", 1, "127.0.0.1:39032", topics, zone="zone-b").code == 0
    ids = {"clusterName": "c5", "brokerName": "z39-c", "brokerId": "0", "brokerAddr": "127.0.0.1:39031"}
    assert client.call(RequestCode.UNREGISTER_BROKER, ids).code == 0  # z39-c has no master now

    whole = remoting_route(client, "Z39")
    assert brokers_of(whole.body) == ["z39-a", "z39-b", "z39-c"]
    zoned = remoting_route(client, "Z39", __ZONE_MODE="true", __ZONE_NAME="ZONE-A")
    assert zoned.code == ResponseCode.SUCCESS
    assert brokers_of(zoned.body) == ["z39-a", "z39-c"]
    assert queue_brokers_of(zoned.body) == ["z39-a", "z39-c"]
    assert b'"brokerAddrs":{0:"127.0.0.1:39011"}' in zoned.body  # old form, though version 479
    assert b'"brokerAddrs":{"0":' in whole.body
    # zone name without zone mode, or zone mode without a zone: the whole route
    assert brokers_of(remoting_route(client, "Z39", __ZONE_NAME="zone-a").body) == ["z39-a", "z39-b", "z39-c"]
    assert brokers_of(remoting_route(client, "Z39", __ZONE_MODE="true").body) == ["z39-a", "z39-b", "z39-c"]
    nowhere = remoting_route(client, "Z39", __ZONE_MODE="true", __ZONE_NAME="zone-x")
    assert (nowhere.code, brokers_of(nowhere.body)) == (ResponseCode.SUCCESS, ["z39-c"])


def test_s39_registration_without_zone_name_clears_the_zone(client: RemotingTestClient, stubs: Stubs) -> None:
    assert remoting_register(client, "z39-clear", 0, "127.0.0.1:39041", ["Z39c", "Z39d"], zone="zone-a").code == 0
    info = stubs.ns.GetBrokerClusterInfo(ns_pb2.GetBrokerClusterInfoRequest(), timeout=5)
    assert info.broker_addr_table["z39-clear"].zone_name == "zone-a"
    assert remoting_register(client, "z39-clear", 0, "127.0.0.1:39041", ["Z39c", "Z39d"]).code == 0
    info = stubs.ns.GetBrokerClusterInfo(ns_pb2.GetBrokerClusterInfoRequest(), timeout=5)
    assert info.broker_addr_table["z39-clear"].zone_name == ""
    zoned = remoting_route(client, "Z39c", __ZONE_MODE="true", __ZONE_NAME="zone-a")
    assert brokers_of(zoned.body) == []


def test_s39_grpc_zone_name_on_lookups_and_watches(stubs: Stubs, client: RemotingTestClient) -> None:
    for name, addr, zone in (("z39g-a", "127.0.0.1:39051", "zone-a"), ("z39g-b", "127.0.0.1:39061", "zone-b")):
        body, crc = encode_body({"G39": topic("G39"), "G39b": topic("G39b")}, V1)
        stubs.ns.RegisterBroker(
            ns_pb2.RegisterBrokerRequest(
                cluster_name="c5", broker_name=name, broker_id=0, broker_addr=addr, body=body, body_crc32c=crc,
                zone_name=zone,
            ),
            timeout=5,
        )  # fmt: skip
    route = stubs.ns.PickupTopicRoute(ns_pb2.PickupTopicRouteRequest(topic="G39", zone_name="Zone-B"), timeout=5)
    assert [b.broker_name for b in route.route.broker_datas] == ["z39g-b"]
    assert [q.broker_name for q in route.route.queue_datas] == ["z39g-b"]
    routes = stubs.ns.PickupTopicRoutes(
        ns_pb2.PickupTopicRoutesRequest(topics=["G39", "G39b"], zone_name="zone-a"), timeout=5
    )
    assert {t: [b.broker_name for b in r.broker_datas] for t, r in routes.routes.items()} == {
        "G39": ["z39g-a"],
        "G39b": ["z39g-a"],
    }
    with pytest.raises(grpc.RpcError) as refused:
        stubs.ns.PickupTopicRoute(ns_pb2.PickupTopicRouteRequest(topic="G39", zone_name="bad\nzone"), timeout=5)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT

    watch = stubs.ns.WatchTopicRoutes(ns_pb2.WatchTopicRoutesRequest(topics=["G39"], zone_name="zone-a"), timeout=20)
    first = next(watch)
    assert [b.broker_name for b in first.changes[0].route.broker_datas] == ["z39g-a"]
    # z39g-b moves to zone-a (a 5.x broker restarted with another ROCKETMQ_ZONE, over remoting)
    assert remoting_register(client, "z39g-b", 0, "127.0.0.1:39061", ["G39", "G39b"], zone="zone-a").code == 0
    second = next(watch)
    assert [b.broker_name for b in second.changes[0].route.broker_datas] == ["z39g-a", "z39g-b"]
    watch.cancel()


# ----------------------------------------------------------------------------- S40 static topics


@pytest.mark.parametrize("compressed", [False, True], ids=["json", "deflater"])
def test_s40_remoting_bodies_carry_mappings_into_both_doors_routes(
    client: RemotingTestClient, stubs: Stubs, compressed: bool
) -> None:
    suffix = "z" if compressed else "j"
    static = f"S40{suffix}"
    ids = {0: 0, 1: 1}
    mappings = {static: mapping(static, f"s40{suffix}-a", ids)}
    reply = remoting_register(
        client, f"s40{suffix}-a", 0, f"127.0.0.1:400{len(suffix)}{int(compressed)}", [static, f"P40{suffix}"],
        compressed=compressed, mappings=mappings,
    )  # fmt: skip
    assert reply.code == ResponseCode.SUCCESS, reply.remark
    answer = remoting_route(client, static)
    got = fastjson.loads(answer.body)["topicQueueMappingByBroker"]
    assert got == {
        f"s40{suffix}-a": {
            "bname": f"s40{suffix}-a",
            "currIdMap": {"0": 0, "1": 1},
            "dirty": False,
            "epoch": 1_700_000_000_000,
            "scope": "__global__",
            "topic": static,
            "totalQueues": 4,
        }
    }
    assert "topicQueueMappingByBroker" not in fastjson.loads(remoting_route(client, f"P40{suffix}").body)
    route = stubs.ns.PickupTopicRoute(ns_pb2.PickupTopicRouteRequest(topic=static), timeout=5).route
    grpc_mapping = route.topic_queue_mapping_by_broker[f"s40{suffix}-a"]
    assert (grpc_mapping.topic, grpc_mapping.total_queues, dict(grpc_mapping.curr_id_map)) == (static, 4, ids)


def test_s40_compressed_body_of_a_sender_before_5_0_carries_no_mappings(client: RemotingTestClient) -> None:
    mappings = {"S40old": mapping("S40old", "s40old-a", {0: 0})}
    reply = remoting_register(
        client, "s40old-a", 0, "127.0.0.1:40021", ["S40old", "P40old"], compressed=True, mappings=mappings,
        request_version=400,
    )  # fmt: skip
    assert reply.code == ResponseCode.SUCCESS, reply.remark
    assert "topicQueueMappingByBroker" not in fastjson.loads(remoting_route(client, "S40old").body)


def test_s40_grpc_body_carries_mappings_and_remoting_clients_see_them(stubs: Stubs, client: RemotingTestClient) -> None:
    mappings = {"S40g": mapping("S40g", "s40g-a", {3: 0})}
    body, crc = encode_body({"S40g": topic("S40g"), "P40g": topic("P40g")}, V1, topic_queue_mappings=mappings)
    stubs.ns.RegisterBroker(
        ns_pb2.RegisterBrokerRequest(
            cluster_name="c5", broker_name="s40g-a", broker_id=0, broker_addr="127.0.0.1:40031", body=body,
            body_crc32c=crc,
        ),
        timeout=5,
    )  # fmt: skip
    route = stubs.ns.PickupTopicRoute(ns_pb2.PickupTopicRouteRequest(topic="S40g"), timeout=5).route
    assert dict(route.topic_queue_mapping_by_broker["s40g-a"].curr_id_map) == {3: 0}
    answer = fastjson.loads(remoting_route(client, "S40g").body)
    assert answer["topicQueueMappingByBroker"]["s40g-a"]["currIdMap"] == {"3": 0}
    bad = {"S40h": TopicQueueMappingInfo("S40h", "")}
    body, crc = encode_body({"S40h": topic("S40h"), "P40h": topic("P40h")}, V1, topic_queue_mappings=bad)
    with pytest.raises(grpc.RpcError) as refused:
        stubs.ns.RegisterBroker(
            ns_pb2.RegisterBrokerRequest(
                cluster_name="c5", broker_name="s40h-a", broker_id=0, broker_addr="127.0.0.1:40041", body=body,
                body_crc32c=crc,
            ),
            timeout=5,
        )  # fmt: skip
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error_info(refused.value).metadata["field"] == "body.topic_queue_mapping_info_map['S40h'].bname"


# ------------------------------------------------------------------------------- S41 topic lists


def test_s41_switches_over_both_doors(namesrv: NamesrvProcess) -> None:
    with namesrv.channel() as channel, RemotingTestClient(namesrv.remoting_address) as client:
        own = Stubs(channel)
        assert remoting_register(client, "s41-a", 0, "127.0.0.1:41011", ["L1", "L2"]).code == 0
        off = bodies.encode_namesrv_config({"enableAllTopicList": "false"})
        assert client.call(RequestCode.UPDATE_NAMESRV_CONFIG, {}, off).code == 0
        refused = client.call(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        assert (refused.code, refused.remark) == (ResponseCode.SYSTEM_ERROR, "disable")
        with pytest.raises(grpc.RpcError) as info:
            own.ns.GetAllTopicList(ns_pb2.GetAllTopicListRequest(), timeout=5)
        assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert error_info(info.value).reason == "TOPIC_LIST_DISABLED"
        by_cluster = client.call(RequestCode.GET_TOPICS_BY_CLUSTER, {"cluster": "c5"})
        assert bodies.decode_topic_list(by_cluster.body)[0] == ["L1", "L2"]

        own.admin.UpdateNamesrvConfig(
            admin_pb2.UpdateNamesrvConfigRequest(config={"enableAllTopicList": "true", "enableTopicList": "false"}),
            timeout=5,
        )
        assert client.call(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER).code == ResponseCode.SUCCESS
        for code, fields in (
            (RequestCode.GET_TOPICS_BY_CLUSTER, {"cluster": "c5"}),
            (RequestCode.GET_UNIT_TOPIC_LIST, {}),
            (RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST, {}),
            (RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST, {}),
        ):
            answer = client.call(code, fields)
            assert (answer.code, answer.remark) == (ResponseCode.SYSTEM_ERROR, "disable"), code
        with pytest.raises(grpc.RpcError) as info:
            own.ns.GetTopicsByCluster(ns_pb2.GetTopicsByClusterRequest(cluster_name="c5"), timeout=5)
        assert error_info(info.value).reason == "TOPIC_LIST_DISABLED"
        assert client.call(RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS).code == ResponseCode.SUCCESS


# --------------------------------------------------------------------- S42 one-topic registration


def test_s42_first_remoting_registration_with_one_topic_is_refused_grpc_takes_it_as_the_table(
    client: RemotingTestClient, stubs: Stubs
) -> None:
    refused = remoting_register(client, "s42-a", 0, "127.0.0.1:42011", ["One"], zone="zone-a")
    assert (refused.code, refused.remark) == (ResponseCode.SYSTEM_ERROR, "register broker failed")
    info = stubs.ns.GetBrokerClusterInfo(ns_pb2.GetBrokerClusterInfoRequest(), timeout=5)
    assert "s42-a" not in info.broker_addr_table
    assert remoting_register(client, "s42-a", 0, "127.0.0.1:42011", ["One", "Two"]).code == ResponseCode.SUCCESS
    again = remoting_register(client, "s42-a", 0, "127.0.0.1:42011", ["Three"], version=DataVersion(0, 1_000, 2))
    assert again.code == ResponseCode.SUCCESS  # a topic increment of a registered broker
    # over gRPC the body is the broker's whole table: one topic is a broker with one topic
    body, crc = encode_body({"One": topic("One")}, V1)
    stubs.ns.RegisterBroker(
        ns_pb2.RegisterBrokerRequest(
            cluster_name="c5", broker_name="s42-b", broker_id=0, broker_addr="127.0.0.1:42021", body=body,
            body_crc32c=crc,
        ),
        timeout=5,
    )  # fmt: skip
    route = stubs.ns.PickupTopicRoute(ns_pb2.PickupTopicRouteRequest(topic="One"), timeout=5).route
    assert sorted(b.broker_name for b in route.broker_datas) == ["s42-a", "s42-b"]


# -------------------------------------------------------------------- S43 the 5.x NamesrvConfig keys


def test_s43_print_lists_every_key_and_controller_in_namesrv_is_refused_at_start(tmp_path: Path) -> None:
    printed = run_cli("namesrv_grpc", "-p")
    assert printed.returncode == 0, printed.stderr
    keys = {line.split("=", 1)[0].strip() for line in printed.stdout.splitlines() if "=" in line}
    assert set(KEYS) <= keys
    assert "enableControllerInNamesrv=false" in printed.stdout.replace(" ", "")
    conf = tmp_path / "namesrv.conf"
    conf.write_text("listenPort=0\ndefaultThreadPoolNums=32\nenableControllerInNamesrv=true\n")
    started = run_cli("namesrv_grpc", "-c", str(conf), "-p")
    assert started.returncode == 2
    lines = started.stderr.strip().splitlines()
    assert len(lines) == 1, started.stderr
    assert "enableControllerInNamesrv" in lines[0]
    assert "controllerAddr" in lines[0]
    assert str(conf) in lines[0]


def test_s43_update_refuses_the_controller_with_the_same_words(client: RemotingTestClient, stubs: Stubs) -> None:
    with pytest.raises(grpc.RpcError) as info:
        stubs.admin.UpdateNamesrvConfig(
            admin_pb2.UpdateNamesrvConfigRequest(config={"enableControllerInNamesrv": "true"}), timeout=5
        )
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "standalone controller" in (info.value.details() or "")
    body = bodies.encode_namesrv_config({"enableControllerInNamesrv": "true"})
    answer = client.call(RequestCode.UPDATE_NAMESRV_CONFIG, {}, body)
    assert answer.code == ResponseCode.SYSTEM_ERROR
    assert "controllerAddr" in (answer.remark or "")
    config = dict(stubs.admin.GetNamesrvConfig(admin_pb2.GetNamesrvConfigRequest(), timeout=5).config)
    assert config["enableControllerInNamesrv"] == "false"
