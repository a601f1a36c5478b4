"""Unit tests of the RocketMQ 5.x rules in the core (no sockets): zones (S39), static topics (S40),
the topic-list switches (S41), the one-topic first registration (S42) and the 5.x NamesrvConfig keys
(S43). Each test fails without its rule."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from namesrv_grpc.config import KEYS, NamesrvConfig, apply_properties
from namesrv_grpc.core.body import BrokerIdentity, DecodedBody
from namesrv_grpc.core.digest import full_digest
from namesrv_grpc.core.errors import InvalidFieldError, RegistrationRefusedError, TopicListDisabledError
from namesrv_grpc.core.kvconfig import KVConfigManager
from namesrv_grpc.core.model import DataVersion, TopicConfig, TopicQueueMappingInfo, TopicRouteData
from namesrv_grpc.core.processor import NameServer
from namesrv_grpc.core.route_table import RouteInfoManager
from namesrv_grpc.core.route_watch import RouteWatchHub
from namesrv_grpc.core.zones import filter_route_by_zone, route_zone_names, zone_key
from namesrv_grpc.runtime.properties import ConfigError
from namesrv_grpc.wire.grpc_register_body import encode_body, parse_body
from tests.support import FakeClock, register_broker, topic

V1 = DataVersion(0, 1_000, 1)
V2 = DataVersion(0, 1_000, 2)


def make_ns(tmp_path: Path, **config: Any) -> NameServer:
    return NameServer(
        NamesrvConfig(
            kv_config_path=str(tmp_path / "kv.json"), config_store_path=str(tmp_path / "ns.properties"), **config
        ),
        RouteInfoManager(FakeClock()),
        KVConfigManager(tmp_path / "kv.json"),
    )


def register(
    ns: NameServer,
    name: str,
    addr: str,
    *,
    broker_id: int = 0,
    topics: Sequence[str] = ("T1", "T2"),
    zone: str = "",
    version: DataVersion = V1,
    mappings: Mapping[str, TopicQueueMappingInfo] | None = None,
    filters: Sequence[str] = (),
) -> None:
    body, crc = encode_body({t: topic(t) for t in topics}, version, filters, topic_queue_mappings=mappings)
    register_broker(
        ns,
        cluster_name="c1",
        broker_name=name,
        broker_id=broker_id,
        broker_addr=addr,
        ha_server_addr="",
        body=body,
        body_crc32c=crc,
        compressed=False,
        heartbeat_timeout_millis=0,
        zone_name=zone,
    )


def names(route: TopicRouteData) -> tuple[list[str], list[str]]:
    return [b.broker_name for b in route.broker_datas], [q.broker_name for q in route.queue_datas]


@pytest.fixture
def zoned(tmp_path: Path) -> NameServer:
    """broker-a in zone-1, broker-b in zone-2 (with a filter server), broker-c in zone-2 whose master
    left (a slave remains: master-less), broker-d without a zone."""
    ns = make_ns(tmp_path)
    register(ns, "broker-a", "10.0.0.1:10911", zone="zone-1")
    register(ns, "broker-b", "10.0.0.2:10911", zone="zone-2", filters=["10.0.9.2:7000"])
    register(ns, "broker-c", "10.0.0.3:10911", zone="zone-2")
    register(ns, "broker-c", "10.0.0.4:10911", broker_id=1, zone="zone-2")
    ns.unregister_broker(cluster_name="c1", broker_name="broker-c", broker_id=0, broker_addr="10.0.0.3:10911")
    register(ns, "broker-d", "10.0.0.5:10911")
    return ns


# ------------------------------------------------------------------------------------ S39 zones


def test_s39_zone_route_keeps_own_zone_and_master_less_groups(zoned: NameServer) -> None:
    route = zoned.pickup_topic_route("T1", zone_name="ZONE-1")  # case is ignored (equalsIgnoreCase)
    assert names(route) == (["broker-a", "broker-c"], ["broker-a", "broker-c"])
    assert route.filter_server_table == {}
    route = zoned.pickup_topic_route("T1", zone_name="zone-2")
    assert names(route) == (["broker-b", "broker-c"], ["broker-b", "broker-c"])
    assert route.filter_server_table == {"10.0.0.2:10911": ("10.0.9.2:7000",)}


def test_s39_without_zone_or_blank_zone_the_route_is_whole(zoned: NameServer) -> None:
    whole = ["broker-a", "broker-b", "broker-c", "broker-d"]
    assert names(zoned.pickup_topic_route("T1"))[0] == whole
    assert names(zoned.pickup_topic_route("T1", zone_name="  "))[0] == whole


def test_s39_zone_of_no_broker_gets_only_master_less_groups_and_is_still_a_route(zoned: NameServer) -> None:
    assert names(zoned.pickup_topic_route("T1", zone_name="zone-9")) == (["broker-c"], ["broker-c"])
    zoned.register_topic("T9", [zoned.route_table.topic_queue_table["T1"]["broker-a"]])
    route = zoned.pickup_topic_route("T9", zone_name="zone-9")
    assert (route.broker_datas, route.queue_datas) == ((), ())  # SUCCESS with empty lists, as the hook


def test_s39_filtered_routes_follow_changes_and_a_registration_without_zone_clears_it(zoned: NameServer) -> None:
    assert names(zoned.pickup_topic_route("T1", zone_name="zone-1"))[0] == ["broker-a", "broker-c"]
    register(zoned, "broker-b", "10.0.0.2:10911", zone="zone-1", version=V2)
    assert names(zoned.pickup_topic_route("T1", zone_name="zone-1"))[0] == ["broker-a", "broker-b", "broker-c"]
    register(zoned, "broker-a", "10.0.0.1:10911", version=V2)  # no zone this time
    assert zoned.route_table.broker_addr_table["broker-a"].zone_name == ""
    assert names(zoned.pickup_topic_route("T1", zone_name="zone-1"))[0] == ["broker-b", "broker-c"]


def test_s39_cached_zone_routes_are_bounded_by_the_zones_of_the_brokers(zoned: NameServer) -> None:
    for index in range(200):
        zoned.pickup_topic_route("T1", zone_name=f"client-zone-{index}")
    zoned.pickup_topic_route("T1", zone_name="zone-1")
    zoned.pickup_topic_route("T1", zone_name="Zone-1")
    # the route's zones, zone-1 and "no broker's zone": not one entry per zone a client named
    assert sum("T1" in answers for answers in zoned.route_table.route_answers.dicts()) == 3


def test_s39_invalid_zone_name_is_refused(zoned: NameServer) -> None:
    with pytest.raises(InvalidFieldError) as info:
        zoned.pickup_topic_route("T1", zone_name="zone\x00")
    assert info.value.field == "zone_name"
    with pytest.raises(InvalidFieldError):
        zoned.pickup_topic_routes_encoded(["T1"], lambda route: route, zone_name="z" * 300)


def test_s39_filter_is_pure_and_keys_collapse_unknown_zones(zoned: NameServer) -> None:
    route = zoned.pickup_topic_route("T1")
    assert route_zone_names(route) == {"zone-1", "zone-2"}
    assert zone_key(route_zone_names(route), "ZONE-2") == "zone-2"
    assert zone_key(route_zone_names(route), "elsewhere") is None
    filtered = filter_route_by_zone(route, None)
    assert names(filtered)[0] == ["broker-c"]
    assert names(route)[0] == ["broker-a", "broker-b", "broker-c", "broker-d"]  # unchanged


def test_s39_zone_watchers_get_filtered_routes_and_see_zone_changes(zoned: NameServer) -> None:
    async def scenario() -> None:
        def encode(topic_name: str) -> list[str]:
            route = zoned.route_table.pickup_topic_route_data(topic_name)
            return names(route)[0] if route else []

        def encode_in_zone(topic_name: str, zone: str) -> list[str]:
            return names(zoned.pickup_topic_route(topic_name, zone_name=zone))[0]

        hub: RouteWatchHub[list[str]] = RouteWatchHub(
            encode,
            lambda: zoned.route_table.route_revision,
            max_watchers=lambda: 10,
            max_topics=lambda: 10,
            encode_in_zone=encode_in_zone,
        )
        zoned.route_table.route_listeners.append(hub.routes_changed)
        in_zone = hub.open(["T1"], "zone-1")
        plain = hub.open(["T1"])
        assert hub.take(in_zone) is not None
        assert hub.take(plain) is not None
        register(zoned, "broker-b", "10.0.0.2:10911", zone="zone-1", version=V2)  # only the zone changes
        taken = hub.take(in_zone)
        assert taken is not None
        assert taken[1] == [("T1", ["broker-a", "broker-b", "broker-c"])]
        taken = hub.take(plain)
        assert taken is not None
        assert taken[1] == [("T1", ["broker-a", "broker-b", "broker-c", "broker-d"])]
        hub.close(in_zone)
        hub.close(plain)
        assert hub.watched_topics == 0
        assert not hub._encoded
        assert not hub._zones

    asyncio.run(scenario())


# ----------------------------------------------------------------------------- S40 static topics


def mapping(topic_name: str, bname: str, epoch: int = 1, ids: Mapping[int, int] | None = None) -> TopicQueueMappingInfo:
    return TopicQueueMappingInfo(topic_name, bname, total_queues=4, epoch=epoch, curr_id_map=dict(ids or {0: 0, 1: 1}))


def test_s40_master_mappings_are_kept_per_topic_and_bname_and_returned_in_routes(tmp_path: Path) -> None:
    ns = make_ns(tmp_path)
    register(ns, "broker-a", "10.0.0.1:10911", topics=["S", "T1"], mappings={"S": mapping("S", "broker-a")})
    register(
        ns, "broker-b", "10.0.0.2:10911", topics=["S", "T1"], mappings={"S": mapping("S", "broker-b", ids={2: 0, 3: 1})}
    )
    route = ns.pickup_topic_route("S")
    assert route.topic_queue_mapping_by_broker == {
        "broker-a": mapping("S", "broker-a"),
        "broker-b": mapping("S", "broker-b", ids={2: 0, 3: 1}),
    }
    assert ns.pickup_topic_route("T1").topic_queue_mapping_by_broker == {}


def test_s40_mappings_change_only_with_a_new_data_version_and_stay_after_the_broker_leaves(tmp_path: Path) -> None:
    ns = make_ns(tmp_path)
    changes: list[Any] = []
    ns.route_table.route_listeners.append(lambda revision, topics: changes.append(topics))
    register(ns, "broker-a", "10.0.0.1:10911", topics=["S", "T1"], mappings={"S": mapping("S", "broker-a", 1)})
    # same DataVersion: RocketMQ skips the mapping update (isBrokerTopicConfigChanged)
    register(ns, "broker-a", "10.0.0.1:10911", topics=["S", "T1"], mappings={"S": mapping("S", "broker-a", 2)})
    assert ns.pickup_topic_route("S").topic_queue_mapping_by_broker["broker-a"].epoch == 1
    changes.clear()
    register(
        ns, "broker-a", "10.0.0.1:10911", topics=["S", "T1"], version=V2, mappings={"S": mapping("S", "broker-a", 2)}
    )
    assert ns.pickup_topic_route("S").topic_queue_mapping_by_broker["broker-a"].epoch == 2
    assert any(topics is not None and "S" in topics for topics in changes), "a mapping change is a route change"
    register(ns, "broker-b", "10.0.0.2:10911", topics=["S", "T1"])
    ns.unregister_broker(cluster_name="c1", broker_name="broker-a", broker_id=0, broker_addr="10.0.0.1:10911")
    assert list(ns.pickup_topic_route("S").topic_queue_mapping_by_broker) == ["broker-a"]  # never removed
    assert "S" in ns.route_table.copy_tables().topic_queue_mapping_info_table


def test_s40_slave_mappings_are_not_applied(tmp_path: Path) -> None:
    ns = make_ns(tmp_path)
    register(ns, "broker-a", "10.0.0.1:10911", topics=["S", "T1"])
    register(
        ns, "broker-a", "10.0.0.2:10911", broker_id=1, topics=["S", "T1"], mappings={"S": mapping("S", "broker-a")}
    )
    assert ns.pickup_topic_route("S").topic_queue_mapping_by_broker == {}


def test_s40_a_body_with_mappings_deletes_no_topics(tmp_path: Path) -> None:
    ns = make_ns(tmp_path, delete_topic_with_broker_registration=True)
    register(ns, "broker-a", "10.0.0.1:10911", topics=["S", "T1", "T2"])
    register(ns, "broker-a", "10.0.0.1:10911", topics=["S", "T1"], version=V2, mappings={"S": mapping("S", "broker-a")})
    assert "T2" in ns.route_table.topic_queue_table
    register(ns, "broker-a", "10.0.0.1:10911", topics=["S", "T1"], version=DataVersion(0, 1_000, 3))
    assert "T2" not in ns.route_table.topic_queue_table


def test_s40_mappings_are_in_the_route_digest(tmp_path: Path) -> None:
    one, two = make_ns(tmp_path / "one"), make_ns(tmp_path / "two")
    for ns, epoch in ((one, 1), (two, 2)):
        register(ns, "broker-a", "10.0.0.1:10911", topics=["S", "T1"], mappings={"S": mapping("S", "broker-a", epoch)})
    # same QueueData and BrokerData, another mapping: two NameServers that would answer differently
    assert one.route_table.route_digest() != two.route_table.route_digest()
    register(
        one, "broker-a", "10.0.0.1:10911", topics=["S", "T1"], version=V2, mappings={"S": mapping("S", "broker-a", 2)}
    )
    assert one.route_table.route_digest() == two.route_table.route_digest()
    table = one.route_table
    expected = full_digest(
        table.topic_queue_table, table.broker_addr_table.values(), table.topic_queue_mapping_info_table
    )
    assert table.route_digest() == expected


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        (TopicQueueMappingInfo("S", ""), "body.topic_queue_mapping_info_map['S'].bname"),
        (
            TopicQueueMappingInfo("S", "broker-a", total_queues=-1),
            "body.topic_queue_mapping_info_map['S'].total_queues",
        ),
        (
            TopicQueueMappingInfo("S", "broker-a", curr_id_map={0: -1}),
            "body.topic_queue_mapping_info_map['S'].curr_id_map",
        ),
    ],
)
def test_s40_invalid_mappings_are_refused_and_change_nothing(
    tmp_path: Path, bad: TopicQueueMappingInfo, field: str
) -> None:
    ns = make_ns(tmp_path)
    with pytest.raises(InvalidFieldError) as info:
        register(ns, "broker-a", "10.0.0.1:10911", topics=["S", "T1"], mappings={"S": bad})
    assert info.value.field == field
    assert ns.route_table.broker_addr_table == {}
    assert ns.route_table.topic_queue_mapping_info_table == {}


def test_s40_protobuf_body_round_trips_mappings() -> None:
    mappings = {"S": mapping("S", "broker-a", 7, {0: 3, 5: 4})}
    body, _ = encode_body({"S": topic("S")}, V1, topic_queue_mappings=mappings)
    decoded = parse_body(body, compressed=False)
    assert decoded.topic_queue_mappings == mappings
    assert decoded.topic_config_table == {"S": TopicConfig("S", 4, 4)}


# ------------------------------------------------------------------------------- S41 topic lists


def test_s41_switches_disable_their_lists_independently_at_run_time(tmp_path: Path) -> None:
    ns = make_ns(tmp_path)
    register(ns, "broker-a", "10.0.0.1:10911")
    ns.update_namesrv_config({"enableAllTopicList": "false"})
    with pytest.raises(TopicListDisabledError):
        ns.get_all_topic_list()
    assert ns.get_topics_by_cluster("c1") == ["T1", "T2"]
    assert ns.get_unit_topic_list() == []
    ns.update_namesrv_config({"enableAllTopicList": "true", "enableTopicList": "false"})
    assert ns.get_all_topic_list() == ["T1", "T2"]
    disabled_lists: list[Callable[[], list[str]]] = [
        lambda: ns.get_topics_by_cluster("c1"),
        ns.get_unit_topic_list,
        ns.get_has_unit_sub_topic_list,
        ns.get_has_unit_sub_ununit_topic_list,
    ]
    for disabled in disabled_lists:
        with pytest.raises(TopicListDisabledError):
            disabled()
    assert ns.get_system_topic_list()[0] == ["broker-a", "c1"]  # never disabled


# --------------------------------------------------------------------- S42 one-topic registration


def register_remoting(ns: NameServer, name: str, addr: str, topics: Sequence[str], *, broker_id: int = 0,
                      version: DataVersion = V1) -> None:  # fmt: skip
    """REGISTER_BROKER as the remoting door hands it to the core (protocol "remoting")."""
    configs = {t: topic(t) for t in topics}
    ns.apply_registration(
        BrokerIdentity("c1", name, broker_id, addr),
        DecodedBody(configs, version, ()),
        ha_server_addr="",
        heartbeat_timeout_millis=0,
        body_fingerprint=(hash((tuple(topics), version)) & 0xFFFF_FFFF, len(topics), False),
        protocol="remoting",
    )


def test_s42_first_remoting_registration_with_exactly_one_topic_is_refused_and_changes_nothing(
    tmp_path: Path,
) -> None:
    ns = make_ns(tmp_path)
    for broker_id in (0, 1):
        with pytest.raises(RegistrationRefusedError):
            register_remoting(ns, "broker-a", f"10.0.0.{broker_id + 1}:10911", ["T1"], broker_id=broker_id)
    assert ns.route_table.copy_tables().broker_addr_table == {}
    assert ns.route_table.cluster_addr_table == {}
    assert ns.route_table.broker_live_table == {}
    register_remoting(ns, "broker-a", "10.0.0.1:10911", [])  # none at all is fine
    register_remoting(ns, "broker-b", "10.0.0.2:10911", ["T1", "T2"])  # the whole table is fine
    # once registered, one topic (RocketMQ's topic-increment registration) is accepted
    register_remoting(ns, "broker-b", "10.0.0.2:10911", ["T3"], version=V2)
    assert "T3" in ns.route_table.topic_queue_table


def test_s42_a_grpc_body_is_the_whole_table_even_with_one_topic(tmp_path: Path) -> None:
    ns = make_ns(tmp_path)
    register(ns, "broker-a", "10.0.0.1:10911", topics=["Only"])
    assert list(ns.route_table.topic_queue_table) == ["Only"]


# -------------------------------------------------------------------- S43 the 5.x NamesrvConfig keys


def test_s43_controller_in_namesrv_is_refused_at_start_and_at_run_time(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        apply_properties(NamesrvConfig(), {"enableControllerInNamesrv": "true"}, "namesrv.conf", strict=False)
    assert "standalone controller" in str(info.value)
    assert "controllerAddr" in str(info.value)
    ns = make_ns(tmp_path)
    with pytest.raises(InvalidFieldError) as refused:
        ns.update_namesrv_config({"enableControllerInNamesrv": "true"})
    assert refused.value.field == "config[enableControllerInNamesrv]"
    assert "standalone controller" in refused.value.message
    assert "controllerAddr" in refused.value.message
    ns.update_namesrv_config({"enableControllerInNamesrv": "false"})


def test_s43_thread_pool_keys_are_accepted_without_effect_and_listed() -> None:
    java_keys = {
        "clientRequestThreadPoolNums": "4",
        "defaultThreadPoolNums": "32",
        "clientRequestThreadPoolQueueCapacity": "1000",
        "defaultThreadPoolQueueCapacity": "1000",
        "unRegisterBrokerQueueCapacity": "100",
        "rocketmqHome": "/opt/rocketmq",
        "productEnvName": "center",
        "clusterTest": "false",
    }
    config, warnings = apply_properties(NamesrvConfig(), java_keys, "namesrv.conf", strict=True)
    assert warnings == []
    printed = config.to_properties()
    for key, value in java_keys.items():
        assert printed[key] == value
    assert set(printed) == set(KEYS)
    with pytest.raises(ConfigError):
        apply_properties(NamesrvConfig(), {"defaultThreadPoolNums": "0"}, "namesrv.conf", strict=True)
