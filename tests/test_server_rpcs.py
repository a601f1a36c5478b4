"""Every RPC of NameServerService, KVConfigService and AdminService over loopback against a real
NameServer process (``python -m namesrv_grpc``), checking the values the rules of docs/rules.md give."""

from __future__ import annotations

import json
import time
from pathlib import Path

import grpc
import pytest

from namesrv.v1 import admin_service_pb2 as admin_pb2
from namesrv.v1 import kv_config_service_pb2 as kv_pb2
from namesrv.v1 import name_server_service_pb2 as ns_pb2
from namesrv.v1 import types_pb2
from namesrv_grpc.core.model import DataVersion
from tests.support import NamesrvProcess, Stubs, register_request, running_namesrv, topic

# One NameServer for the module, emptied before each test (tests/conftest.py).
pytestmark = pytest.mark.shared_namesrv

MASTER_A = "127.0.0.1:10911"
MASTER_A_HA = "127.0.0.1:10912"
SLAVE_A = "127.0.0.1:10921"
SLAVE_A_HA = "127.0.0.1:10922"
MASTER_B = "127.0.0.1:10931"
MASTER_B_HA = "127.0.0.1:10932"


def route_of(stubs: Stubs, name: str) -> types_pb2.TopicRouteData:
    route: types_pb2.TopicRouteData = stubs.ns.PickupTopicRoute(ns_pb2.PickupTopicRouteRequest(topic=name)).route
    return route


def has_route(stubs: Stubs, name: str) -> bool:
    """True when the topic has a route, False when PickupTopicRoute says NOT_FOUND."""
    try:
        route_of(stubs, name)
    except grpc.RpcError as error:
        code = error.code()
    else:
        return True
    assert code == grpc.StatusCode.NOT_FOUND
    return False


def queue_tuples(route: types_pb2.TopicRouteData) -> list[tuple[str, int, int, int, int]]:
    return [(q.broker_name, q.read_queue_nums, q.write_queue_nums, q.perm, q.topic_sys_flag) for q in route.queue_datas]


def all_topics(stubs: Stubs) -> list[str]:
    return list(stubs.ns.GetAllTopicList(ns_pb2.GetAllTopicListRequest()).topics)


def cluster_info(stubs: Stubs) -> tuple[dict[str, dict[int, str]], dict[str, list[str]]]:
    info = stubs.ns.GetBrokerClusterInfo(ns_pb2.GetBrokerClusterInfoRequest())
    brokers = {name: dict(data.broker_addrs) for name, data in info.broker_addr_table.items()}
    clusters = {name: list(names.broker_names) for name, names in info.cluster_addr_table.items()}
    return brokers, clusters


def heartbeat(stubs: Stubs, broker_name: str, broker_addr: str, broker_id: int = 0) -> None:
    stubs.ns.BrokerHeartbeat(
        ns_pb2.BrokerHeartbeatRequest(
            cluster_name="DefaultCluster", broker_name=broker_name, broker_id=broker_id, broker_addr=broker_addr
        )
    )


def register_a_and_b(stubs: Stubs) -> None:
    """broker-b (ClusterB), broker-a master + slave (DefaultCluster), registered b first."""
    stubs.ns.RegisterBroker(
        register_request(
            cluster="ClusterB",
            broker_name="broker-b",
            broker_addr=MASTER_B,
            ha_server_addr=MASTER_B_HA,
            topics=[topic("TopicTest", read=8, write=8), topic("TopicB")],
        )
    )
    stubs.ns.RegisterBroker(
        register_request(broker_addr=MASTER_A, topics=[topic("TopicTest", read=4, write=4), topic("TopicA")])
    )
    stubs.ns.RegisterBroker(register_request(broker_id=1, broker_addr=SLAVE_A, ha_server_addr=SLAVE_A_HA))


# --------------------------------------------------------------------------- RegisterBroker / route


def test_s03_s10_s18_master_slave_and_second_broker_route(stubs: Stubs) -> None:
    """Route of a topic on broker-a (master + slave) and broker-b: QueueData sorted by broker name,
    broker_addrs {0: master, 1: slave}; the slave's response names the master (S10); a slave's
    topics are ignored (S06)."""
    first = stubs.ns.RegisterBroker(
        register_request(
            cluster="ClusterB",
            broker_name="broker-b",
            broker_addr=MASTER_B,
            ha_server_addr=MASTER_B_HA,
            topics=[topic("TopicTest", read=8, write=8, perm=6)],
        )
    )
    assert (first.master_addr, first.ha_server_addr) == ("", "")
    # S10: a slave whose master is not registered learns nothing.
    early = stubs.ns.RegisterBroker(register_request(broker_id=1, broker_addr=SLAVE_A, ha_server_addr=SLAVE_A_HA))
    assert (early.master_addr, early.ha_server_addr) == ("", "")
    master = stubs.ns.RegisterBroker(
        register_request(broker_addr=MASTER_A, ha_server_addr=MASTER_A_HA, topics=[topic("TopicTest", read=4, write=2)])
    )
    assert (master.master_addr, master.ha_server_addr) == ("", "")
    slave = stubs.ns.RegisterBroker(
        register_request(
            broker_id=1,
            broker_addr=SLAVE_A,
            ha_server_addr=SLAVE_A_HA,
            topics=[topic("SlaveOnlyTopic")],
            version=DataVersion(0, 5, 5),
        )
    )
    assert slave.master_addr == MASTER_A
    assert slave.ha_server_addr == MASTER_A_HA

    route = route_of(stubs, "TopicTest")
    assert queue_tuples(route) == [("broker-a", 4, 2, 6, 0), ("broker-b", 8, 8, 6, 0)]
    assert [b.broker_name for b in route.broker_datas] == ["broker-a", "broker-b"]
    broker_a, broker_b = route.broker_datas
    assert broker_a.cluster == "DefaultCluster"
    assert dict(broker_a.broker_addrs) == {0: MASTER_A, 1: SLAVE_A}
    assert broker_b.cluster == "ClusterB"
    assert dict(broker_b.broker_addrs) == {0: MASTER_B}
    assert dict(route.filter_server_table) == {}
    assert route.order_topic_conf == ""
    # S06: only a master carries topics.
    assert "SlaveOnlyTopic" not in all_topics(stubs)
    assert not has_route(stubs, "SlaveOnlyTopic")


def test_s11_register_response_carries_order_topic_config(stubs: Stubs) -> None:
    stubs.kv.PutKVConfig(
        kv_pb2.PutKVConfigRequest(namespace="ORDER_TOPIC_CONFIG", key="TopicTest", value="broker-a:4;broker-b:4")
    )
    stubs.kv.PutKVConfig(kv_pb2.PutKVConfigRequest(namespace="ORDER_TOPIC_CONFIG", key="Orders", value="broker-a:8"))
    stubs.kv.PutKVConfig(kv_pb2.PutKVConfigRequest(namespace="OTHER_NS", key="TopicTest", value="nope"))
    master = stubs.ns.RegisterBroker(register_request(topics=[topic("TopicTest")]))
    assert dict(master.kv_table) == {"TopicTest": "broker-a:4;broker-b:4", "Orders": "broker-a:8"}
    slave = stubs.ns.RegisterBroker(register_request(broker_id=1, broker_addr=SLAVE_A))
    assert dict(slave.kv_table) == {"TopicTest": "broker-a:4;broker-b:4", "Orders": "broker-a:8"}


def test_s02_empty_body_registers_broker_without_topics(stubs: Stubs) -> None:
    request = register_request()
    request.body = b""
    request.body_crc32c = 0
    stubs.ns.RegisterBroker(request)
    assert cluster_info(stubs) == ({"broker-a": {0: "127.0.0.1:10911"}}, {"DefaultCluster": ["broker-a"]})
    assert all_topics(stubs) == []
    stored = stubs.ns.QueryDataVersion(
        ns_pb2.QueryDataVersionRequest(
            cluster_name="DefaultCluster",
            broker_name="broker-a",
            broker_id=0,
            broker_addr="127.0.0.1:10911",
            data_version=types_pb2.DataVersion(),
        )
    )
    assert stored.changed is False


def test_s01_compressed_body_registers(stubs: Stubs) -> None:
    request = register_request(
        topics=[topic("Zipped", read=3, write=5, perm=4)], filter_servers=["127.0.0.1:45001"], compressed=True
    )
    assert request.compressed
    stubs.ns.RegisterBroker(request)
    route = route_of(stubs, "Zipped")
    assert queue_tuples(route) == [("broker-a", 3, 5, 4, 0)]
    assert list(route.filter_server_table[MASTER_A].filter_server_addrs) == ["127.0.0.1:45001"]


def test_s06_s07_unchanged_data_version_skips_topics_changed_version_updates(stubs: Stubs) -> None:
    stubs.ns.RegisterBroker(register_request(topics=[topic("T1", read=4, write=4)], version=DataVersion(0, 1, 1)))
    # Same DataVersion: the topic work is skipped.
    stubs.ns.RegisterBroker(
        register_request(topics=[topic("T1", read=16, write=16), topic("T2")], version=DataVersion(0, 1, 1))
    )
    assert queue_tuples(route_of(stubs, "T1")) == [("broker-a", 4, 4, 6, 0)]
    assert all_topics(stubs) == ["T1"]
    # New DataVersion: S07 replaces the changed QueueData and creates the new topic.
    stubs.ns.RegisterBroker(
        register_request(topics=[topic("T1", read=16, write=16), topic("T2")], version=DataVersion(0, 2, 2))
    )
    assert queue_tuples(route_of(stubs, "T1")) == [("broker-a", 16, 16, 6, 0)]
    assert all_topics(stubs) == ["T1", "T2"]


def test_s09_filter_servers_replaced_and_removed(stubs: Stubs) -> None:
    stubs.ns.RegisterBroker(
        register_request(topics=[topic("F")], filter_servers=["127.0.0.1:45001", "127.0.0.1:45002"])
    )
    route = route_of(stubs, "F")
    assert list(route.filter_server_table[MASTER_A].filter_server_addrs) == ["127.0.0.1:45001", "127.0.0.1:45002"]
    stubs.ns.RegisterBroker(register_request(topics=[topic("F")], filter_servers=["127.0.0.1:45003"]))
    route = route_of(stubs, "F")
    assert list(route.filter_server_table[MASTER_A].filter_server_addrs) == ["127.0.0.1:45003"]
    stubs.ns.RegisterBroker(register_request(topics=[topic("F")]))
    assert dict(route_of(stubs, "F").filter_server_table) == {}


def test_s05_slave_promoted_to_master_from_same_address(stubs: Stubs) -> None:
    stubs.ns.RegisterBroker(register_request(broker_addr=MASTER_A, topics=[topic("T")]))
    stubs.ns.RegisterBroker(register_request(broker_id=1, broker_addr=SLAVE_A))
    stubs.ns.UnregisterBroker(
        ns_pb2.UnregisterBrokerRequest(
            cluster_name="DefaultCluster", broker_name="broker-a", broker_id=0, broker_addr=MASTER_A
        )
    )
    assert dict(route_of(stubs, "T").broker_datas[0].broker_addrs) == {1: SLAVE_A}
    stubs.ns.RegisterBroker(register_request(broker_id=0, broker_addr=SLAVE_A, topics=[topic("T")]))
    assert dict(route_of(stubs, "T").broker_datas[0].broker_addrs) == {0: SLAVE_A}


def test_s12_new_address_with_higher_state_version_takes_over(stubs: Stubs) -> None:
    stubs.ns.RegisterBroker(register_request(broker_addr=MASTER_A, version=DataVersion(5, 1, 1), topics=[topic("T")]))
    stubs.ns.RegisterBroker(register_request(broker_addr=SLAVE_A, version=DataVersion(6, 1, 1), topics=[topic("T")]))
    assert cluster_info(stubs)[0] == {"broker-a": {0: SLAVE_A}}
    # Only a *new* address with a lower stateVersion is stale: the holder itself may re-register lower.
    stubs.ns.RegisterBroker(register_request(broker_addr=SLAVE_A, version=DataVersion(2, 1, 1), topics=[topic("T")]))
    assert cluster_info(stubs)[0] == {"broker-a": {0: SLAVE_A}}


def test_s17_unregister_of_old_id_does_not_wipe_promoted_address(stubs: Stubs) -> None:
    """A slave at SLAVE_A is promoted (re-registers as id 0); a late UnregisterBroker for its old
    id 1 must leave the new registration alone (RocketMQ #11043)."""
    stubs.ns.RegisterBroker(register_request(broker_id=1, broker_addr=SLAVE_A, topics=[topic("T")]))
    stubs.ns.RegisterBroker(register_request(broker_id=0, broker_addr=SLAVE_A, topics=[topic("T")]))
    stubs.ns.UnregisterBroker(
        ns_pb2.UnregisterBrokerRequest(
            cluster_name="DefaultCluster", broker_name="broker-a", broker_id=1, broker_addr=SLAVE_A
        )
    )
    assert dict(route_of(stubs, "T").broker_datas[0].broker_addrs) == {0: SLAVE_A}
    heartbeat(stubs, "broker-a", SLAVE_A, broker_id=0)


def test_route_broker_data_carries_zone_and_acting_master(stubs: Stubs) -> None:
    request = register_request(topics=[topic("T")])
    request.zone_name = "zone-1"
    request.enable_acting_master = True
    stubs.ns.RegisterBroker(request)
    broker_data = route_of(stubs, "T").broker_datas[0]
    assert (broker_data.zone_name, broker_data.enable_acting_master) == ("zone-1", True)
    info = stubs.ns.GetBrokerClusterInfo(ns_pb2.GetBrokerClusterInfoRequest())
    assert info.broker_addr_table["broker-a"].zone_name == "zone-1"


# --------------------------------------------------------------------------- liveness


def test_s14_broker_heartbeat_of_registered_broker(stubs: Stubs) -> None:
    stubs.ns.RegisterBroker(register_request(topics=[topic("T")]))
    response = stubs.ns.BrokerHeartbeat(
        ns_pb2.BrokerHeartbeatRequest(
            cluster_name="DefaultCluster", broker_name="broker-a", broker_id=0, broker_addr=MASTER_A
        )
    )
    assert response == ns_pb2.BrokerHeartbeatResponse()
    assert has_route(stubs, "T")


def test_s20_query_data_version_changed_and_unchanged(stubs: Stubs) -> None:
    stubs.ns.RegisterBroker(register_request(version=DataVersion(3, 1_700_000_000_000, 7), topics=[topic("T")]))

    def query(version: types_pb2.DataVersion, addr: str = MASTER_A) -> ns_pb2.QueryDataVersionResponse:
        response: ns_pb2.QueryDataVersionResponse = stubs.ns.QueryDataVersion(
            ns_pb2.QueryDataVersionRequest(
                cluster_name="DefaultCluster",
                broker_name="broker-a",
                broker_id=0,
                broker_addr=addr,
                data_version=version,
            )
        )
        return response

    stored = types_pb2.DataVersion(state_version=3, timestamp=1_700_000_000_000, counter=7)
    same = query(stored)
    assert same.changed is False
    assert same.name_server_data_version == stored
    newer = query(types_pb2.DataVersion(state_version=3, timestamp=1_700_000_000_001, counter=8))
    assert newer.changed is True
    assert newer.name_server_data_version == stored
    unknown = query(stored, addr="127.0.0.1:19999")
    assert unknown.changed is True
    assert not unknown.HasField("name_server_data_version")


def test_s13_expired_broker_removed_heartbeating_broker_stays(stubs: Stubs) -> None:
    """broker-a (timeout 300 ms, silent) disappears within one scan after its timeout; broker-b
    (timeout 600 ms, BrokerHeartbeat every 100 ms) and broker-c (timeout 600 ms, unchanged
    QueryDataVersion every 100 ms, S14/S20) stay well past their own timeout; broker-d (timeout
    600 ms, QueryDataVersion with a *changed* version, which refreshes nothing) expires."""
    start = time.monotonic()
    stubs.ns.RegisterBroker(
        register_request(broker_addr=MASTER_A, topics=[topic("Silent")], heartbeat_timeout_millis=300)
    )
    for name, addr in (("broker-b", MASTER_B), ("broker-c", "127.0.0.1:10941"), ("broker-d", "127.0.0.1:10951")):
        stubs.ns.RegisterBroker(
            register_request(
                broker_name=name, broker_addr=addr, topics=[topic(f"T-{name}")], heartbeat_timeout_millis=600
            )
        )
    assert has_route(stubs, "Silent"), "removed before its timeout"

    def query(broker_name: str, addr: str, counter: int) -> bool:
        response = stubs.ns.QueryDataVersion(
            ns_pb2.QueryDataVersionRequest(
                cluster_name="DefaultCluster",
                broker_name=broker_name,
                broker_id=0,
                broker_addr=addr,
                data_version=types_pb2.DataVersion(timestamp=1, counter=counter),
            )
        )
        changed: bool = response.changed
        return changed

    deadline = start + 5
    silent_gone_at = None
    while time.monotonic() < deadline:
        heartbeat(stubs, "broker-b", MASTER_B)
        assert query("broker-c", "127.0.0.1:10941", 1) is False
        query("broker-d", "127.0.0.1:10951", 2)
        if silent_gone_at is None and not has_route(stubs, "Silent"):
            silent_gone_at = time.monotonic()
        if silent_gone_at is not None and time.monotonic() - start > 1.5:
            break
        time.sleep(0.1)
    assert silent_gone_at is not None, "silent broker was not removed within 5 s"
    assert silent_gone_at - start >= 0.3, "removed earlier than its heartbeat timeout"
    assert time.monotonic() - start > 1.5
    assert has_route(stubs, "T-broker-b")
    assert has_route(stubs, "T-broker-c")
    assert not has_route(stubs, "T-broker-d"), "a changed QueryDataVersion must not refresh liveness"
    assert cluster_info(stubs)[0] == {"broker-b": {0: MASTER_B}, "broker-c": {0: "127.0.0.1:10941"}}


# --------------------------------------------------------------------------- removal


def test_s16_unregister_broker_removes_route(stubs: Stubs) -> None:
    stubs.ns.RegisterBroker(register_request(broker_addr=MASTER_A, topics=[topic("T")]))
    stubs.ns.RegisterBroker(register_request(broker_id=1, broker_addr=SLAVE_A))

    def unregister(broker_id: int, addr: str) -> None:
        stubs.ns.UnregisterBroker(
            ns_pb2.UnregisterBrokerRequest(
                cluster_name="DefaultCluster", broker_name="broker-a", broker_id=broker_id, broker_addr=addr
            )
        )

    # S17: the wrong id for an address is not that broker: nothing happens.
    unregister(1, MASTER_A)
    assert dict(route_of(stubs, "T").broker_datas[0].broker_addrs) == {0: MASTER_A, 1: SLAVE_A}
    # A removed master whose slave remains leaves the topic (readers fall back to the slave).
    unregister(0, MASTER_A)
    route = route_of(stubs, "T")
    assert dict(route.broker_datas[0].broker_addrs) == {1: SLAVE_A}
    assert queue_tuples(route) == [("broker-a", 4, 4, 6, 0)]
    # The last address goes: broker name, cluster and topic go too.
    unregister(1, SLAVE_A)
    with pytest.raises(grpc.RpcError) as caught:
        route_of(stubs, "T")
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND
    assert cluster_info(stubs) == ({}, {})
    assert all_topics(stubs) == []
    assert list(stubs.ns.GetSystemTopicList(ns_pb2.GetSystemTopicListRequest()).topics) == []
    # Unknown broker: not an error.
    unregister(0, "127.0.0.1:19999")
    # A heartbeat from the removed broker is refused now.
    with pytest.raises(grpc.RpcError) as caught:
        heartbeat(stubs, "broker-a", MASTER_A)
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND


# --------------------------------------------------------------------------- lookups


def test_s22_get_broker_cluster_info(stubs: Stubs) -> None:
    register_a_and_b(stubs)
    stubs.ns.RegisterBroker(register_request(cluster="ClusterB", broker_name="broker-c", broker_addr="127.0.0.1:10941"))
    info = stubs.ns.GetBrokerClusterInfo(ns_pb2.GetBrokerClusterInfoRequest())
    assert set(info.broker_addr_table) == {"broker-a", "broker-b", "broker-c"}
    broker_a = info.broker_addr_table["broker-a"]
    assert (broker_a.cluster, broker_a.broker_name) == ("DefaultCluster", "broker-a")
    assert dict(broker_a.broker_addrs) == {0: MASTER_A, 1: SLAVE_A}
    assert dict(info.broker_addr_table["broker-b"].broker_addrs) == {0: MASTER_B}
    assert info.broker_addr_table["broker-c"].cluster == "ClusterB"
    assert {k: list(v.broker_names) for k, v in info.cluster_addr_table.items()} == {
        "DefaultCluster": ["broker-a"],
        "ClusterB": ["broker-b", "broker-c"],
    }


def test_s24_topic_lists_and_system_topics(stubs: Stubs) -> None:
    register_a_and_b(stubs)
    assert all_topics(stubs) == ["TopicA", "TopicB", "TopicTest"]
    by_cluster = stubs.ns.GetTopicsByCluster
    assert list(by_cluster(ns_pb2.GetTopicsByClusterRequest(cluster_name="DefaultCluster")).topics) == [
        "TopicA",
        "TopicTest",
    ]
    assert list(by_cluster(ns_pb2.GetTopicsByClusterRequest(cluster_name="ClusterB")).topics) == [
        "TopicB",
        "TopicTest",
    ]
    assert list(by_cluster(ns_pb2.GetTopicsByClusterRequest(cluster_name="NoSuchCluster")).topics) == []
    system = stubs.ns.GetSystemTopicList(ns_pb2.GetSystemTopicListRequest())
    assert list(system.topics) == ["ClusterB", "DefaultCluster", "broker-a", "broker-b"]
    assert system.broker_addr == MASTER_A


def test_s24_unit_flag_topic_lists(stubs: Stubs) -> None:
    stubs.ns.RegisterBroker(
        register_request(
            topics=[
                topic("Plain", sys_flag=0),
                topic("Unit", sys_flag=1),
                topic("UnitSub", sys_flag=2),
                topic("UnitAndSub", sys_flag=3),
            ]
        )
    )
    unit = stubs.ns.GetUnitTopicList(ns_pb2.GetUnitTopicListRequest())
    assert list(unit.topics) == ["Unit", "UnitAndSub"]
    sub = stubs.ns.GetHasUnitSubTopicList(ns_pb2.GetHasUnitSubTopicListRequest())
    assert list(sub.topics) == ["UnitAndSub", "UnitSub"]
    sub_ununit = stubs.ns.GetHasUnitSubUnUnitTopicList(ns_pb2.GetHasUnitSubUnUnitTopicListRequest())
    assert list(sub_ununit.topics) == ["UnitSub"]
    assert queue_tuples(route_of(stubs, "UnitAndSub")) == [("broker-a", 4, 4, 6, 3)]


def test_s24_unit_lists_empty_without_topics(stubs: Stubs) -> None:
    assert list(stubs.ns.GetUnitTopicList(ns_pb2.GetUnitTopicListRequest()).topics) == []
    assert list(stubs.ns.GetHasUnitSubTopicList(ns_pb2.GetHasUnitSubTopicListRequest()).topics) == []
    assert list(stubs.ns.GetHasUnitSubUnUnitTopicList(ns_pb2.GetHasUnitSubUnUnitTopicListRequest()).topics) == []
    system = stubs.ns.GetSystemTopicList(ns_pb2.GetSystemTopicListRequest())
    assert (list(system.topics), system.broker_addr) == ([], "")


# --------------------------------------------------------------------------- admin


def test_s23_wipe_and_add_write_perm_of_broker(stubs: Stubs) -> None:
    stubs.ns.RegisterBroker(
        register_request(topics=[topic("RW", perm=6), topic("ReadOnly", perm=4), topic("Inherit", perm=7)])
    )
    stubs.ns.RegisterBroker(register_request(broker_name="broker-b", broker_addr=MASTER_B, topics=[topic("RW")]))

    wiped = stubs.admin.WipeWritePermOfBroker(admin_pb2.WipeWritePermOfBrokerRequest(broker_name="broker-a"))
    assert wiped.wipe_topic_count == 3
    assert queue_tuples(route_of(stubs, "RW")) == [("broker-a", 4, 4, 4, 0), ("broker-b", 4, 4, 6, 0)]
    assert queue_tuples(route_of(stubs, "ReadOnly")) == [("broker-a", 4, 4, 4, 0)]
    assert queue_tuples(route_of(stubs, "Inherit")) == [("broker-a", 4, 4, 5, 0)]
    # Every QueueData counts, changed or not.
    again = stubs.admin.WipeWritePermOfBroker(admin_pb2.WipeWritePermOfBrokerRequest(broker_name="broker-a"))
    assert again.wipe_topic_count == 3

    added = stubs.admin.AddWritePermOfBroker(admin_pb2.AddWritePermOfBrokerRequest(broker_name="broker-a"))
    assert added.add_topic_count == 3
    for name in ("RW", "ReadOnly", "Inherit"):
        assert route_of(stubs, name).queue_datas[0].perm == 6
    assert route_of(stubs, "RW").queue_datas[1].perm == 6

    unknown = stubs.admin.WipeWritePermOfBroker(admin_pb2.WipeWritePermOfBrokerRequest(broker_name="nobody"))
    assert unknown.wipe_topic_count == 0
    unknown_add = stubs.admin.AddWritePermOfBroker(admin_pb2.AddWritePermOfBrokerRequest(broker_name="nobody"))
    assert unknown_add.add_topic_count == 0


def test_s25_delete_topic_with_and_without_cluster(stubs: Stubs) -> None:
    register_a_and_b(stubs)
    stubs.admin.DeleteTopic(admin_pb2.DeleteTopicRequest(topic="TopicTest", cluster_name="ClusterB"))
    assert queue_tuples(route_of(stubs, "TopicTest")) == [("broker-a", 4, 4, 6, 0)]
    assert [b.broker_name for b in route_of(stubs, "TopicTest").broker_datas] == ["broker-a"]
    stubs.admin.DeleteTopic(admin_pb2.DeleteTopicRequest(topic="TopicB"))
    assert not has_route(stubs, "TopicB")
    assert all_topics(stubs) == ["TopicA", "TopicTest"]
    stubs.admin.DeleteTopic(admin_pb2.DeleteTopicRequest(topic="TopicTest"))
    assert not has_route(stubs, "TopicTest")
    assert all_topics(stubs) == ["TopicA"]
    # Unknown topic / unknown cluster: not an error, nothing changes.
    stubs.admin.DeleteTopic(admin_pb2.DeleteTopicRequest(topic="NoSuchTopic"))
    stubs.admin.DeleteTopic(admin_pb2.DeleteTopicRequest(topic="TopicA", cluster_name="NoSuchCluster"))
    assert all_topics(stubs) == ["TopicA"]
    # Brokers stay registered.
    assert set(cluster_info(stubs)[0]) == {"broker-a", "broker-b"}


def test_s25_register_topic_for_registered_broker_names(stubs: Stubs) -> None:
    register_a_and_b(stubs)
    stubs.admin.RegisterTopic(
        admin_pb2.RegisterTopicRequest(
            topic="AdminTopic",
            queue_datas=[
                types_pb2.QueueData(broker_name="broker-b", read_queue_nums=2, write_queue_nums=3, perm=6),
                types_pb2.QueueData(broker_name="broker-a", read_queue_nums=1, write_queue_nums=1, perm=4),
            ],
        )
    )
    route = route_of(stubs, "AdminTopic")
    assert queue_tuples(route) == [("broker-a", 1, 1, 4, 0), ("broker-b", 2, 3, 6, 0)]
    assert dict(route.broker_datas[0].broker_addrs) == {0: MASTER_A, 1: SLAVE_A}
    assert "AdminTopic" in all_topics(stubs)
    assert "AdminTopic" in stubs.ns.GetTopicsByCluster(ns_pb2.GetTopicsByClusterRequest(cluster_name="ClusterB")).topics
    # Replaces an existing QueueData.
    stubs.admin.RegisterTopic(
        admin_pb2.RegisterTopicRequest(
            topic="TopicTest",
            queue_datas=[types_pb2.QueueData(broker_name="broker-b", read_queue_nums=1, write_queue_nums=1, perm=2)],
        )
    )
    assert queue_tuples(route_of(stubs, "TopicTest")) == [("broker-a", 4, 4, 6, 0), ("broker-b", 1, 1, 2, 0)]


def test_s26_get_and_update_namesrv_config(stubs: Stubs, namesrv: NamesrvProcess) -> None:
    config = dict(stubs.admin.GetNamesrvConfig(admin_pb2.GetNamesrvConfigRequest()).config)
    assert config["scanNotActiveBrokerInterval"] == "200"
    assert config["orderMessageEnable"] == "false"
    assert config["kvConfigPath"] == str(namesrv.workdir / "kvConfig.json")
    assert config["configBlackList"] == "configBlackList;configStorePath;kvConfigPath"
    assert "listenPort" in config

    stubs.admin.UpdateNamesrvConfig(
        admin_pb2.UpdateNamesrvConfigRequest(
            config={"scanNotActiveBrokerInterval": "250", "orderMessageEnable": "true"}
        )
    )
    updated = dict(stubs.admin.GetNamesrvConfig(admin_pb2.GetNamesrvConfigRequest()).config)
    assert updated["scanNotActiveBrokerInterval"] == "250"
    assert updated["orderMessageEnable"] == "true"
    assert {k: v for k, v in updated.items() if k not in ("scanNotActiveBrokerInterval", "orderMessageEnable")} == {
        k: v for k, v in config.items() if k not in ("scanNotActiveBrokerInterval", "orderMessageEnable")
    }
    # orderMessageEnable takes effect at once (S19).
    stubs.kv.PutKVConfig(kv_pb2.PutKVConfigRequest(namespace="ORDER_TOPIC_CONFIG", key="T", value="broker-a:4"))
    stubs.ns.RegisterBroker(register_request(topics=[topic("T")]))
    assert route_of(stubs, "T").order_topic_conf == "broker-a:4"
    # Persisted to configStorePath.
    stored = Path(updated["configStorePath"]).read_text(encoding="utf-8")
    assert "scanNotActiveBrokerInterval=250" in stored.splitlines()


def test_s21_kv_put_get_delete_list(stubs: Stubs) -> None:
    kv = stubs.kv
    kv.PutKVConfig(kv_pb2.PutKVConfigRequest(namespace="NS1", key="k1", value="v1"))
    kv.PutKVConfig(kv_pb2.PutKVConfigRequest(namespace="NS1", key="k2", value="顺序:4"))
    kv.PutKVConfig(kv_pb2.PutKVConfigRequest(namespace="NS2", key="k1", value=""))
    assert kv.GetKVConfig(kv_pb2.GetKVConfigRequest(namespace="NS1", key="k1")).value == "v1"
    assert kv.GetKVConfig(kv_pb2.GetKVConfigRequest(namespace="NS1", key="k2")).value == "顺序:4"
    assert kv.GetKVConfig(kv_pb2.GetKVConfigRequest(namespace="NS2", key="k1")).value == ""
    assert dict(kv.GetKVListByNamespace(kv_pb2.GetKVListByNamespaceRequest(namespace="NS1")).table) == {
        "k1": "v1",
        "k2": "顺序:4",
    }
    # Overwrite.
    kv.PutKVConfig(kv_pb2.PutKVConfigRequest(namespace="NS1", key="k1", value="v1b"))
    assert kv.GetKVConfig(kv_pb2.GetKVConfigRequest(namespace="NS1", key="k1")).value == "v1b"
    # Delete, and delete of an absent key is fine.
    kv.DeleteKVConfig(kv_pb2.DeleteKVConfigRequest(namespace="NS1", key="k1"))
    kv.DeleteKVConfig(kv_pb2.DeleteKVConfigRequest(namespace="NS1", key="k1"))
    kv.DeleteKVConfig(kv_pb2.DeleteKVConfigRequest(namespace="NoSuchNs", key="x"))
    with pytest.raises(grpc.RpcError) as caught:
        kv.GetKVConfig(kv_pb2.GetKVConfigRequest(namespace="NS1", key="k1"))
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND
    assert dict(kv.GetKVListByNamespace(kv_pb2.GetKVListByNamespaceRequest(namespace="NS1")).table) == {"k2": "顺序:4"}
    assert dict(kv.GetKVListByNamespace(kv_pb2.GetKVListByNamespaceRequest(namespace="Unknown")).table) == {}


def test_s21_kv_persisted_across_restart(tmp_path: Path) -> None:
    workdir = tmp_path / "kvwork"
    with running_namesrv(workdir) as server, server.channel() as channel:
        stubs = Stubs(channel)
        stubs.kv.PutKVConfig(kv_pb2.PutKVConfigRequest(namespace="ORDER_TOPIC_CONFIG", key="T", value="broker-a:4"))
        stubs.kv.PutKVConfig(kv_pb2.PutKVConfigRequest(namespace="NS", key="a", value="1"))
        stubs.kv.PutKVConfig(kv_pb2.PutKVConfigRequest(namespace="NS", key="b", value="2"))
        stubs.kv.DeleteKVConfig(kv_pb2.DeleteKVConfigRequest(namespace="NS", key="b"))
        # Every change is on disk before the call returns, in RocketMQ's format.
        document = json.loads((workdir / "kvConfig.json").read_text(encoding="utf-8"))
        assert document == {"configTable": {"ORDER_TOPIC_CONFIG": {"T": "broker-a:4"}, "NS": {"a": "1"}}}
    assert server.process.returncode == 0
    with running_namesrv(workdir) as server, server.channel() as channel:
        stubs = Stubs(channel)
        assert stubs.kv.GetKVConfig(kv_pb2.GetKVConfigRequest(namespace="NS", key="a")).value == "1"
        assert dict(stubs.kv.GetKVListByNamespace(kv_pb2.GetKVListByNamespaceRequest(namespace="NS")).table) == {
            "a": "1"
        }
        assert dict(
            stubs.kv.GetKVListByNamespace(kv_pb2.GetKVListByNamespaceRequest(namespace="ORDER_TOPIC_CONFIG")).table
        ) == {"T": "broker-a:4"}
        # S11 after restart.
        response = stubs.ns.RegisterBroker(register_request(topics=[topic("T")]))
        assert dict(response.kv_table) == {"T": "broker-a:4"}
