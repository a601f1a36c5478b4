"""How large the route table and its answers may grow (issue 30, core.capacity): registrations past
``routeTableMaxBrokers``, ``routeTableMaxTopics`` or the answers' size limit are refused before
anything changes, and the estimates the limits read are never below the real answers. Pure: no
sockets (the same over a real server: tests/test_bounds.py)."""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Sequence
from pathlib import Path

import grpc
import pytest

from namesrv.v1 import name_server_service_pb2 as ns_pb2
from namesrv.v1 import name_server_service_pb2_grpc as ns_grpc
from namesrv_grpc.config import NamesrvConfig
from namesrv_grpc.core.capacity import (
    ANSWER_HEADROOM,
    RouteTableLimits,
    broker_addr_entry_bytes,
    broker_name_entry_bytes,
    member_entry_bytes,
    topic_entry_bytes,
)
from namesrv_grpc.core.errors import LimitExceededError
from namesrv_grpc.core.model import DataVersion, QueueData
from namesrv_grpc.core.route_table import RouteInfoManager
from namesrv_grpc.grpc_api.convert import cluster_info_to_proto
from namesrv_grpc.remoting.codec import RemotingCommand
from namesrv_grpc.remoting.codes import RequestCode, ResponseCode
from namesrv_grpc.wire.bodies import (
    encode_cluster_info,
    encode_register_broker_body,
    encode_topic_list,
    encode_topic_route_data,
)
from namesrv_grpc.wire.grpc_register_body import crc32c
from tests.metrics_support import free_port, scrape
from tests.remoting_support import RemotingTestClient
from tests.support import FakeClock, error_info, register_request, running_namesrv, topic
from tests.test_route_table import tables


def register(
    rt: RouteInfoManager,
    name: str,
    addr: str,
    topics: Iterable[str] = (),
    *,
    broker_id: int = 0,
    cluster: str = "c1",
    zone_name: str = "",
    filters: Sequence[str] = (),
    version: int = 1,
) -> None:
    rt.register_broker(
        cluster_name=cluster,
        broker_name=name,
        broker_id=broker_id,
        broker_addr=addr,
        data_version=DataVersion(0, version, version),
        topic_configs={t: topic(t) for t in topics},
        filter_server_list=filters,
        zone_name=zone_name,
    )


def limited(max_brokers: int = 0, max_topics: int = 0, max_answer_bytes: int = 0) -> RouteInfoManager:
    return RouteInfoManager(FakeClock(), limits=RouteTableLimits(max_brokers, max_topics, max_answer_bytes))


def test_one_broker_address_past_route_table_max_brokers_is_refused_and_changes_nothing() -> None:
    rt = limited(max_brokers=2)
    register(rt, "broker-a", "10.0.0.1:10911", ["T1"])
    register(rt, "broker-b", "10.0.0.2:10911", ["T2"])
    before = tables(rt)
    with pytest.raises(
        LimitExceededError, match=r"2 broker addresses are, the most at once \(routeTableMaxBrokers\)"
    ) as info:
        register(rt, "broker-c", "10.0.0.3:10911", ["T3"])
    assert info.value.metadata == {"limit": "routeTableMaxBrokers"}
    assert tables(rt) == before
    register(rt, "broker-a", "10.0.0.1:10911", ["T1", "T4"], version=2)  # the registered ones go on
    assert "T4" in rt.topic_queue_nums
    rt.unregister_broker(cluster_name="c1", broker_name="broker-b", broker_id=0, broker_addr="10.0.0.2:10911")
    register(rt, "broker-c", "10.0.0.3:10911", ["T3"])  # room again


def test_new_topics_past_route_table_max_topics_are_refused_and_known_ones_are_not_counted() -> None:
    rt = limited(max_topics=4)
    register(rt, "broker-a", "10.0.0.1:10911", ["T1", "T2", "T3"])
    before = tables(rt)
    with pytest.raises(LimitExceededError, match=r"registers 2 new topics; with the 3 held that is more than 4"):
        register(rt, "broker-b", "10.0.0.2:10911", ["T1", "T4", "T5"])
    assert tables(rt) == before
    register(rt, "broker-b", "10.0.0.2:10911", ["T1", "T2", "T3", "T4"])  # one new topic: fits
    assert len(rt.topic_queue_nums) == 4
    with pytest.raises(LimitExceededError, match="routeTableMaxTopics"):
        rt.register_topic("T9", [QueueData("broker-a", 4, 4, 6, 0)])
    rt.register_topic("T1", [QueueData("broker-a", 8, 8, 6, 0)])  # a known topic changes freely


def test_a_registration_that_would_make_the_topic_list_too_large_for_an_answer_is_refused() -> None:
    rt = limited(max_answer_bytes=2_000)
    register(rt, "broker-a", "10.0.0.1:10911", [f"TOPIC_{i:04d}" for i in range(100)])  # 1,300 bytes
    before = tables(rt)
    with pytest.raises(LimitExceededError, match=r"topic list would be about 2\d{3} bytes, more than the 2000") as info:
        register(rt, "broker-b", "10.0.0.2:10911", [f"TOPIC_{i:04d}" for i in range(100, 160)])
    assert info.value.metadata == {"limit": "remotingFrameMaxLength"}
    assert tables(rt) == before
    added = 0
    while rt.capacity.answer_sizes()[0] + topic_entry_bytes(f"T{added}") <= 2_000:  # exactly as many as fit
        rt.register_topic(f"T{added}", [QueueData("broker-a", 4, 4, 6, 0)])
        added += 1
    assert added > 30
    with pytest.raises(LimitExceededError, match="larger than the 2000 bytes an answer may be"):
        rt.register_topic(f"T{added}", [QueueData("broker-a", 4, 4, 6, 0)])
    assert len(encode_topic_list(rt.get_all_topic_list())) <= 2_000


def test_a_registration_that_would_make_the_cluster_info_too_large_for_an_answer_is_refused() -> None:
    rt = limited(max_answer_bytes=4_000)
    added = 0

    def growth(i: int) -> int:
        name, addr = f"broker-{'x' * 200}-{i}", f"10.0.0.{i}:10911"
        return member_entry_bytes(name) + broker_name_entry_bytes("c1", name, "") + broker_addr_entry_bytes(addr, [])

    while rt.capacity.answer_sizes()[1] + growth(added) <= 4_000:  # exactly as many as fit
        register(rt, f"broker-{'x' * 200}-{added}", f"10.0.0.{added}:10911", ["T1"])
        added += 1
    with pytest.raises(LimitExceededError, match=r"would make the cluster info about \d+ bytes, more than the 4000"):
        register(rt, f"broker-{'x' * 200}-{added}", f"10.0.0.{added}:10911", ["T1"])
    assert 2 <= added < 10
    assert len(rt.broker_live_table) == added
    assert len(encode_cluster_info(rt.get_cluster_info())) <= 4_000


def test_the_estimates_are_never_below_the_real_answers_on_either_door() -> None:
    """Names with quotes, backslashes and non-ASCII letters (escaped by JSON), zones, slaves, filter
    servers, the largest ids gRPC carries: the estimates stay at or above the remoting JSON (both forms) and the
    gRPC message of the cluster info, the topic list and every topic's route."""
    rt = RouteInfoManager(FakeClock())
    for i in range(20):
        name = ['broker-"quoted"', "broker-\\back", "brökér-ñame-日本", "b"][i % 4] + str(i)
        cluster = ["c1", "clüster-2", 'c"3'][i % 3]
        topics = [f"T{j}" for j in range(i * 5, i * 5 + 40)]
        register(rt, name, f"host-{i}.example.com:10911", topics, cluster=cluster, zone_name=f"zöne{i % 2}")
        register(
            rt,
            name,
            f"[2001:db8::{i}]:10911",
            topics,
            broker_id=2**31 - 1 - i,
            cluster=cluster,
            filters=[f"filter-{i}-{k}.example.com:30000" for k in range(i % 4)],
        )
    topic_bytes, cluster_bytes = rt.capacity.answer_sizes()
    names = rt.get_all_topic_list()
    assert len(encode_topic_list(names)) <= topic_bytes
    info = rt.get_cluster_info()
    assert max(len(encode_cluster_info(info)), cluster_info_to_proto(info).ByteSize()) <= cluster_bytes
    for name in names:
        route = rt.pickup_topic_route_data(name)
        assert route is not None
        for standard in (False, True):
            assert len(encode_topic_route_data(route, standard_json=standard)) <= cluster_bytes


def test_limits_from_the_configuration_take_the_smaller_of_the_two_doors() -> None:
    config = NamesrvConfig(route_table_max_brokers=7, route_table_max_topics=9)
    limits = RouteTableLimits.from_config(config)
    assert (limits.max_brokers, limits.max_topics) == (7, 9)
    assert limits.max_answer_bytes == 16 * 1024 * 1024 - ANSWER_HEADROOM
    small = NamesrvConfig(grpc_max_message_size=8 * 1024 * 1024)
    assert RouteTableLimits.from_config(small).answer_limit_key == "grpcMaxMessageSize"
    assert RouteTableLimits.from_config(small).max_answer_bytes == 8 * 1024 * 1024 - ANSWER_HEADROOM


def test_a_bare_route_table_has_no_limits() -> None:
    rt = RouteInfoManager(FakeClock())
    for i in range(50):
        register(rt, f"broker-{i}", f"10.0.1.{i}:10911", [f"T{i}"])
    assert len(rt.broker_live_table) == 50


def test_both_doors_refuse_a_broker_past_route_table_max_brokers_and_keep_the_others(tmp_path: Path) -> None:
    """A real server with ``routeTableMaxBrokers=2``: the third broker address is refused on the
    remoting door (SYSTEM_ERROR naming the key, as a Java broker logs it) and on the gRPC door
    (RESOURCE_EXHAUSTED, LIMIT_EXCEEDED with the key); the two registered brokers keep their routes,
    and the refusals are counted."""
    config = tmp_path / "namesrv.conf"
    config.write_text("routeTableMaxBrokers=2\n")
    metrics_port = free_port()
    with running_namesrv(tmp_path, "-c", str(config), "--metrics-port", str(metrics_port)) as server:
        with RemotingTestClient(server.remoting_address) as client:
            for i in (1, 2):
                assert remoting_register(client, f"broker-{i}", f"10.0.0.{i}:10911").code == ResponseCode.SUCCESS
            answer = remoting_register(client, "broker-3", "10.0.0.3:10911")
            assert answer.code == ResponseCode.SYSTEM_ERROR
            assert "routeTableMaxBrokers" in (answer.remark or "")
            # Refused before its body is decoded: a body that does not decode gets the same refusal.
            answer = remoting_register(client, "broker-3", "10.0.0.3:10911", body=b"{not json")
            assert answer.code == ResponseCode.SYSTEM_ERROR
            assert "routeTableMaxBrokers" in (answer.remark or "")
            check_grpc_refuses_a_third(server.address)
        metrics = scrape(f"http://127.0.0.1:{metrics_port}/metrics")
        assert metrics.value("namesrv_registrations_total", result="limit_exceeded") >= 1


def check_grpc_refuses_a_third(address: str) -> None:
    """(While the remoting connection that registered two brokers stays open: S15.)"""
    with grpc.insecure_channel(address) as channel:
        stub = ns_grpc.NameServerServiceStub(channel)
        with pytest.raises(grpc.RpcError) as info:
            stub.RegisterBroker(register_request(broker_name="broker-4", broker_addr="10.0.0.4:10911"), timeout=10)
        assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert error_info(info.value).metadata["limit"] == "routeTableMaxBrokers"
        undecodable = register_request(broker_name="broker-4", broker_addr="10.0.0.4:10911")
        undecodable.body = b"\xff" * 64  # no RegisterBrokerBody; refused for the bound before decoding
        undecodable.body_crc32c = crc32c(undecodable.body)
        with pytest.raises(grpc.RpcError) as info:
            stub.RegisterBroker(undecodable, timeout=10)
        assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, info.value.details()
        assert error_info(info.value).metadata["limit"] == "routeTableMaxBrokers"
        route = stub.PickupTopicRoute(ns_pb2.PickupTopicRouteRequest(topic="TopicA"), timeout=10)
        assert sorted(b.broker_name for b in route.route.broker_datas) == ["broker-1", "broker-2"]


def remoting_register(client: RemotingTestClient, name: str, addr: str, body: bytes | None = None) -> RemotingCommand:
    if body is None:
        body = encode_register_broker_body(
            {t: topic(t) for t in ("TopicA", "SELF_TEST_TOPIC")}, DataVersion(0, 1, 1), compressed=False
        )
    fields = {
        "clusterName": "c1",
        "brokerName": name,
        "brokerId": "0",
        "brokerAddr": addr,
        "haServerAddr": "",
        "compressed": "false",
        "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF),
    }
    return client.call(RequestCode.REGISTER_BROKER, fields, body)
