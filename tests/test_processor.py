"""Unit tests of the NameServer facade (``processor.NameServer``): validation before any change, S01,
S11, S18, S19, S26, S27. No gRPC: the facade over a RouteInfoManager with a FakeClock."""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from namesrv_grpc.config import SECURITY_KEYS, NamesrvConfig
from namesrv_grpc.core.errors import (
    BodyChecksumMismatchError,
    BrokerNameNotRegisteredError,
    BrokerNotRegisteredError,
    ConfigKeyBlacklistedError,
    InvalidFieldError,
    KVConfigNotFoundError,
    MalformedBodyError,
    PersistError,
    StaleBrokerStateError,
    TopicRouteNotFoundError,
)
from namesrv_grpc.core.kvconfig import KVConfigManager
from namesrv_grpc.core.model import (
    ORDER_TOPIC_CONFIG_NAMESPACE,
    DataVersion,
    QueueData,
    RegisterBrokerResult,
    TopicConfig,
)
from namesrv_grpc.core.processor import NameServer
from namesrv_grpc.core.route_table import RouteInfoManager
from namesrv_grpc.runtime.properties import read_properties
from namesrv_grpc.wire.grpc_register_body import crc32c, encode_body
from tests.support import FakeClock, register_broker, topic

A = "10.0.0.1:10911"
B = "10.0.0.2:10911"
V1 = DataVersion(0, 1_000, 1)


@dataclass
class World:
    ns: NameServer
    clock: FakeClock
    kv_path: Path
    store_path: Path


def make_world(tmp_path: Path, **config: Any) -> World:
    kv_path = tmp_path / "kvConfig.json"
    store_path = tmp_path / "namesrv.properties"
    clock = FakeClock()
    ns = NameServer(
        NamesrvConfig(kv_config_path=str(kv_path), config_store_path=str(store_path), **config),
        RouteInfoManager(clock),
        KVConfigManager(kv_path),
    )
    return World(ns, clock, kv_path, store_path)


@pytest.fixture
def world(tmp_path: Path) -> World:
    return make_world(tmp_path)


def register(
    ns: NameServer,
    *,
    cluster: str = "c1",
    name: str = "broker-a",
    broker_id: int = 0,
    addr: str = A,
    ha: str = "",
    topics: Sequence[TopicConfig] = (),
    version: DataVersion = V1,
    filters: Sequence[str] = (),
    compressed: bool = False,
    timeout: int = 0,
    body: bytes | None = None,
    crc: int | None = None,
) -> tuple[RegisterBrokerResult, dict[str, str]]:
    encoded, encoded_crc = encode_body({t.topic_name: t for t in topics}, version, filters, compress=compressed)
    if body is None:
        body = encoded
        crc = encoded_crc if crc is None else crc
    elif crc is None:
        crc = crc32c(body)
    return register_broker(
        ns,
        cluster_name=cluster,
        broker_name=name,
        broker_id=broker_id,
        broker_addr=addr,
        ha_server_addr=ha,
        body=body,
        body_crc32c=crc,
        compressed=compressed,
        heartbeat_timeout_millis=timeout,
    )


def state(ns: NameServer) -> Any:
    rt = ns.route_table
    return copy.deepcopy(
        (
            rt.topic_queue_table,
            rt.broker_addr_table,
            rt.cluster_addr_table,
            rt.broker_live_table,
            rt.filter_server_table,
            rt.topics_by_broker_name,
            rt.version,
            ns.kv_config.snapshot(),
            ns.config,
        )
    )


# ---------------------------------------------------------------------------- S01, validation


def test_s01_checksum_checked_before_field_validation(world: World) -> None:
    before = state(world.ns)
    with pytest.raises(BodyChecksumMismatchError):
        register(world.ns, cluster="", name="", broker_id=-1, addr="nope", topics=[topic("T", read=-1)], crc=1)
    assert state(world.ns) == before


def test_s01_checksum_checked_before_decoding(world: World) -> None:
    garbage = b"\x0a\x05ab"
    with pytest.raises(BodyChecksumMismatchError):
        register(world.ns, body=garbage, crc=crc32c(garbage) ^ 1)
    with pytest.raises(MalformedBodyError):
        register(world.ns, body=garbage)


def test_register_valid_request(world: World) -> None:
    result, kv = register(world.ns, topics=[topic("T1")], filters=["10.9.0.1:30000"], compressed=True)
    assert (result, kv) == (RegisterBrokerResult(), {})
    assert world.ns.route_table.topic_queue_table == {"T1": {"broker-a": QueueData("broker-a", 4, 4, 6, 0)}}
    assert world.ns.route_table.filter_server_table == {A: ["10.9.0.1:30000"]}


INVALID_REGISTRATIONS: list[Any] = [
    pytest.param({"cluster": ""}, "cluster_name", id="empty-cluster"),
    pytest.param({"cluster": " c1"}, "cluster_name", id="padded-cluster"),
    pytest.param({"name": ""}, "broker_name", id="empty-broker-name"),
    pytest.param({"name": "x" * 256}, "broker_name", id="long-broker-name"),
    pytest.param({"broker_id": -1}, "broker_id", id="negative-id"),
    pytest.param({"addr": ""}, "broker_addr", id="empty-addr"),
    pytest.param({"addr": "10.0.0.1"}, "broker_addr", id="addr-without-port"),
    pytest.param({"addr": "10.0.0.1:"}, "broker_addr", id="addr-empty-port"),
    pytest.param({"addr": ":10911"}, "broker_addr", id="addr-without-host"),
    pytest.param({"addr": "10.0.0.1:0"}, "broker_addr", id="port-0"),
    pytest.param({"addr": "10.0.0.1:65536"}, "broker_addr", id="port-65536"),
    pytest.param({"addr": "10.0.0.1:abc"}, "broker_addr", id="port-not-number"),
    pytest.param({"addr": "::1:10911"}, "broker_addr", id="ipv6-without-brackets"),
    pytest.param({"ha": "10.0.0.1"}, "ha_server_addr", id="ha-without-port"),
    pytest.param({"timeout": -1}, "heartbeat_timeout_millis", id="negative-timeout"),
    pytest.param({"filters": ["10.9.0.1:1", "nope"]}, "body.filter_server_list[1]", id="bad-filter-server"),
    pytest.param(
        {"topics": [topic("T1", read=-1)]}, "body.topic_config_table['T1'].read_queue_nums", id="read-negative"
    ),
    pytest.param(
        {"topics": [topic("T1", read=65536)]}, "body.topic_config_table['T1'].read_queue_nums", id="read-65536"
    ),
    pytest.param(
        {"topics": [topic("T1", write=-1)]}, "body.topic_config_table['T1'].write_queue_nums", id="write-negative"
    ),
    pytest.param(
        {"topics": [topic("T1", write=65536)]}, "body.topic_config_table['T1'].write_queue_nums", id="write-65536"
    ),
    pytest.param({"topics": [topic("T1", perm=16)]}, "body.topic_config_table['T1'].perm", id="perm-16"),
]


@pytest.mark.parametrize(("changes", "field"), INVALID_REGISTRATIONS)
def test_invalid_field_raises_and_changes_nothing(world: World, changes: dict[str, Any], field: str) -> None:
    register(world.ns, name="broker-a", addr=A, topics=[topic("T0")])
    register(world.ns, name="broker-a", broker_id=1, addr=B)
    before = state(world.ns)
    kwargs: dict[str, Any] = {"name": "broker-b", "addr": "10.0.0.3:10911", "topics": [topic("T1")]}
    kwargs.update(changes)
    with pytest.raises(InvalidFieldError) as info:
        register(world.ns, **kwargs)
    assert info.value.field == field
    assert info.value.metadata == {"field": field}
    assert state(world.ns) == before


@pytest.mark.parametrize(
    "addr", ["10.0.0.1:1", "10.0.0.1:65535", "[::1]:10911", "[2001:db8::1]:9876", "broker-a.example.com:10911"]
)
def test_valid_addresses_accepted(world: World, addr: str) -> None:
    register(world.ns, addr=addr, ha=addr, topics=[topic("T1", read=0, write=65535)])
    assert world.ns.route_table.broker_addr_table["broker-a"].broker_addrs == {0: addr}


def test_malformed_body_changes_nothing(world: World) -> None:
    register(world.ns, topics=[topic("T0")])
    before = state(world.ns)
    body, _ = encode_body({"T1": topic("T1")}, DataVersion(0, 2, 2))
    with pytest.raises(MalformedBodyError):
        register(world.ns, name="broker-b", addr=B, body=body, compressed=True)
    assert state(world.ns) == before


def test_stale_registration_changes_nothing(world: World) -> None:
    register(world.ns, addr=A, version=DataVersion(5, 1, 1))
    before = state(world.ns)
    with pytest.raises(StaleBrokerStateError):
        register(world.ns, addr=B, version=DataVersion(4, 2, 2))
    assert state(world.ns) == before


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda ns: ns.unregister_broker(cluster_name="", broker_name="b", broker_id=0, broker_addr=A), "cluster_name"),
        (lambda ns: ns.broker_heartbeat(cluster_name="c1", broker_name="", broker_id=0, broker_addr=A), "broker_name"),
        (
            lambda ns: ns.query_data_version(
                cluster_name="c1", broker_name="b", broker_id=-2, broker_addr=A, data_version=V1
            ),
            "broker_id",
        ),
        (
            lambda ns: ns.unregister_broker(cluster_name="c1", broker_name="b", broker_id=0, broker_addr="x:0"),
            "broker_addr",
        ),
        (lambda ns: ns.pickup_topic_route(""), "topic"),
        (lambda ns: ns.get_topics_by_cluster(""), "cluster_name"),
        (lambda ns: ns.put_kv_config("", "k", "v"), "namespace"),
        (lambda ns: ns.put_kv_config("N", "", "v"), "key"),
        (lambda ns: ns.get_kv_config("N", ""), "key"),
        (lambda ns: ns.delete_kv_config("", "k"), "namespace"),
        (lambda ns: ns.get_kv_list_by_namespace(""), "namespace"),
        (lambda ns: ns.wipe_write_perm_of_broker(""), "broker_name"),
        (lambda ns: ns.add_write_perm_of_broker(""), "broker_name"),
        (lambda ns: ns.delete_topic("", ""), "topic"),
        (lambda ns: ns.delete_topic("T0", " c"), "cluster_name"),
        (lambda ns: ns.register_topic("", [QueueData("broker-a", 1, 1, 6)]), "topic"),
        (lambda ns: ns.register_topic("T9", []), "queue_datas"),
        (lambda ns: ns.register_topic("T9", [QueueData("", 1, 1, 6)]), "queue_datas[0].broker_name"),
        (
            lambda ns: ns.register_topic("T9", [QueueData("broker-a", 1, 1, 6), QueueData("broker-a", 2, 2, 6)]),
            "queue_datas[1].broker_name",
        ),
        (lambda ns: ns.register_topic("T9", [QueueData("broker-a", -1, 1, 6)]), "queue_datas[0].read_queue_nums"),
        (
            lambda ns: ns.register_topic("T9", [QueueData("broker-a", 1, 65536, 6)]),
            "queue_datas[0].write_queue_nums",
        ),
        (lambda ns: ns.register_topic("T9", [QueueData("broker-a", 1, 1, 99)]), "queue_datas[0].perm"),
        (lambda ns: ns.register_topic("T9", [QueueData("broker-a", 1, 1, 6, -1)]), "queue_datas[0].topic_sys_flag"),
    ],
)
def test_other_requests_validate_before_changing_anything(
    world: World, call: Callable[[NameServer], object], field: str
) -> None:
    register(world.ns, topics=[topic("T0")])
    world.ns.put_kv_config("N", "k", "v")
    before = state(world.ns)
    with pytest.raises(InvalidFieldError) as info:
        call(world.ns)
    assert info.value.field == field
    assert state(world.ns) == before


# ---------------------------------------------------------------------------- brokers through the facade


def test_unregister_heartbeat_query_scan(world: World) -> None:
    register(world.ns, topics=[topic("T1")], timeout=1_000)
    world.clock.advance(900)
    world.ns.broker_heartbeat(cluster_name="c1", broker_name="broker-a", broker_id=0, broker_addr=A)
    assert world.ns.query_data_version(
        cluster_name="c1", broker_name="broker-a", broker_id=0, broker_addr=A, data_version=V1
    ) == (False, V1)
    world.clock.advance(1_000)
    assert world.ns.scan_not_active_broker() == []
    world.clock.advance(1)
    assert [r.broker_addr for r in world.ns.scan_not_active_broker()] == [A]
    with pytest.raises(BrokerNotRegisteredError):
        world.ns.broker_heartbeat(cluster_name="c1", broker_name="broker-a", broker_id=0, broker_addr=A)
    assert world.ns.unregister_broker(cluster_name="c1", broker_name="broker-a", broker_id=0, broker_addr=A) is None


def test_register_topic_unknown_broker_name(world: World) -> None:
    register(world.ns)
    before = state(world.ns)
    with pytest.raises(BrokerNameNotRegisteredError):
        world.ns.register_topic("T9", [QueueData("broker-a", 1, 1, 6), QueueData("ghost", 1, 1, 6)])
    assert state(world.ns) == before
    world.ns.register_topic("T9", [QueueData("broker-a", 1, 1, 6)])
    assert world.ns.route_table.topic_queue_table["T9"] == {"broker-a": QueueData("broker-a", 1, 1, 6)}


def test_admin_write_perm_and_delete_topic(world: World) -> None:
    register(world.ns, cluster="c1", name="broker-a", addr=A, topics=[topic("T1"), topic("T2")])
    register(world.ns, cluster="c2", name="broker-b", addr=B, topics=[topic("T1")])
    assert world.ns.wipe_write_perm_of_broker("broker-a") == 2
    assert world.ns.add_write_perm_of_broker("broker-b") == 1
    world.ns.delete_topic("T1", "c1")
    assert world.ns.get_topics_by_cluster("c1") == ["T2"]
    assert world.ns.get_topics_by_cluster("c2") == ["T1"]
    world.ns.delete_topic("T1", "")
    assert world.ns.route_table.get_all_topic_list() == ["T2"]


# ---------------------------------------------------------------------------- S11, S18, S19


def test_s11_kv_table_returned_on_registration(world: World) -> None:
    assert register(world.ns)[1] == {}
    world.ns.put_kv_config(ORDER_TOPIC_CONFIG_NAMESPACE, "orders", "broker-a:4")
    world.ns.put_kv_config(ORDER_TOPIC_CONFIG_NAMESPACE, "payments", "broker-a:8;broker-b:8")
    world.ns.put_kv_config("OTHER", "x", "y")
    result, kv = register(world.ns, broker_id=1, addr=B)
    assert kv == {"orders": "broker-a:4", "payments": "broker-a:8;broker-b:8"}
    assert result == RegisterBrokerResult(master_addr=A, ha_server_addr="")


def test_s18_no_route_raises_not_found(world: World) -> None:
    with pytest.raises(TopicRouteNotFoundError) as info:
        world.ns.pickup_topic_route("T1")
    assert info.value.message == "No topic route info in name server for the topic: T1"
    assert info.value.reason == "TOPIC_ROUTE_NOT_FOUND"


def test_s19_order_topic_conf_only_when_enabled(tmp_path: Path) -> None:
    off = make_world(tmp_path / "off")
    on = make_world(tmp_path / "on", order_message_enable=True)
    for w in (off, on):
        register(w.ns, topics=[topic("T1"), topic("T2")])
        w.ns.put_kv_config(ORDER_TOPIC_CONFIG_NAMESPACE, "T1", "broker-a:4")
    assert off.ns.pickup_topic_route("T1").order_topic_conf == ""
    assert on.ns.pickup_topic_route("T1").order_topic_conf == "broker-a:4"
    assert on.ns.pickup_topic_route("T2").order_topic_conf == ""
    route = on.ns.pickup_topic_route("T1")
    assert [q.broker_name for q in route.queue_datas] == ["broker-a"]
    assert route.broker_datas[0].broker_addrs == {0: A}


def test_s19_enabled_at_run_time(world: World) -> None:
    register(world.ns, topics=[topic("T1")])
    world.ns.put_kv_config(ORDER_TOPIC_CONFIG_NAMESPACE, "T1", "broker-a:4")
    assert world.ns.pickup_topic_route("T1").order_topic_conf == ""
    world.ns.update_namesrv_config({"orderMessageEnable": "true"})
    assert world.ns.pickup_topic_route("T1").order_topic_conf == "broker-a:4"


# ---------------------------------------------------------------------------- S21 through the facade


def test_s21_kv_through_facade(world: World) -> None:
    world.ns.put_kv_config("N", "k", "生产")
    assert world.ns.get_kv_config("N", "k") == "生产"
    assert world.ns.get_kv_list_by_namespace("N") == {"k": "生产"}
    assert KVConfigManager(world.kv_path).get("N", "k") == "生产"
    world.ns.delete_kv_config("N", "k")
    with pytest.raises(KVConfigNotFoundError):
        world.ns.get_kv_config("N", "k")


# ---------------------------------------------------------------------------- S26, S27


@pytest.mark.parametrize("key", ["configBlackList", "configStorePath", "kvConfigPath"])
def test_s26_blacklisted_keys_refused(world: World, key: str) -> None:
    before = state(world.ns)
    with pytest.raises(ConfigKeyBlacklistedError) as info:
        world.ns.update_namesrv_config({"orderMessageEnable": "true", key: "/tmp/elsewhere"})
    assert info.value.reason == "CONFIG_KEY_BLACKLISTED"
    assert key in info.value.message
    assert state(world.ns) == before
    assert not world.store_path.exists()


def test_s26_extra_blacklisted_key_refused(tmp_path: Path) -> None:
    w = make_world(tmp_path, config_black_list="orderMessageEnable")
    with pytest.raises(ConfigKeyBlacklistedError):
        w.ns.update_namesrv_config({"orderMessageEnable": "true"})
    with pytest.raises(ConfigKeyBlacklistedError):  # the defaults stay on the list
        w.ns.update_namesrv_config({"kvConfigPath": "/x"})
    assert w.ns.config.order_message_enable is False


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        pytest.param({"noSuchKey": "1"}, "config[noSuchKey]", id="unknown-key"),
        pytest.param({"orderMessageEnable": "true", "noSuchKey": "1"}, "config[noSuchKey]", id="unknown-with-good"),
        pytest.param({"scanNotActiveBrokerInterval": "abc"}, "config[scanNotActiveBrokerInterval]", id="not-number"),
        pytest.param({"scanNotActiveBrokerInterval": "0"}, "config[scanNotActiveBrokerInterval]", id="out-of-range"),
        pytest.param(
            {"orderMessageEnable": "true", "listenPort": "70000"}, "config[listenPort]", id="bad-port-with-good"
        ),
        pytest.param({"orderMessageEnable": "yes"}, "config[orderMessageEnable]", id="not-bool"),
        pytest.param({}, "config", id="empty"),
    ],
)
def test_s26_unknown_key_or_bad_value_changes_nothing(world: World, changes: dict[str, str], field: str) -> None:
    before = state(world.ns)
    before_props = world.ns.get_namesrv_config()
    with pytest.raises(InvalidFieldError) as info:
        world.ns.update_namesrv_config(changes)
    assert info.value.field == field
    assert state(world.ns) == before
    assert world.ns.get_namesrv_config() == before_props
    assert not world.store_path.exists()


def test_s26_update_persists_and_is_reflected(world: World) -> None:
    world.ns.update_namesrv_config(
        {
            "orderMessageEnable": "true",
            "scanNotActiveBrokerInterval": "5000",
            "deleteTopicWithBrokerRegistration": "true",
        }
    )
    config = world.ns.get_namesrv_config()
    assert config["orderMessageEnable"] == "true"
    assert config["scanNotActiveBrokerInterval"] == "5000"
    assert config["deleteTopicWithBrokerRegistration"] == "true"
    assert world.ns.config.scan_not_active_broker_interval == 5_000
    assert world.ns.route_table.delete_topic_with_broker_registration is True
    # Only what differs from the defaults is written (scanNotActiveBrokerInterval=5000 is the
    # default: not written), so a later version's new defaults apply to everything else.
    stored = read_properties(world.store_path)
    defaults = NamesrvConfig().to_properties()
    assert stored == {key: value for key, value in config.items() if defaults[key] != value}
    assert stored == {
        "configStorePath": str(world.store_path),
        "deleteTopicWithBrokerRegistration": "true",
        "kvConfigPath": str(world.kv_path),
        "orderMessageEnable": "true",
    }
    # A second update keeps the first; one back to its default leaves the file.
    world.ns.update_namesrv_config({"listenPort": "19876"})
    stored = read_properties(world.store_path)
    assert (stored["listenPort"], stored["orderMessageEnable"]) == ("19876", "true")
    world.ns.update_namesrv_config({"orderMessageEnable": "false"})
    assert "orderMessageEnable" not in read_properties(world.store_path)


def test_s26_persist_failure_changes_nothing(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("x", encoding="utf-8")
    clock = FakeClock()
    ns = NameServer(
        NamesrvConfig(kv_config_path=str(tmp_path / "kv.json"), config_store_path=str(blocker / "namesrv.properties")),
        RouteInfoManager(clock),
        KVConfigManager(tmp_path / "kv.json"),
    )
    before = state(ns)
    with pytest.raises(PersistError):
        ns.update_namesrv_config({"orderMessageEnable": "true"})
    assert state(ns) == before
    assert ns.get_namesrv_config()["orderMessageEnable"] == "false"


def test_s26_get_namesrv_config_uses_rocketmq_key_names(world: World) -> None:
    config = world.ns.get_namesrv_config()
    assert list(config) == sorted(config)
    for key in ("listenPort", "kvConfigPath", "configStorePath", "scanNotActiveBrokerInterval", "orderMessageEnable"):
        assert key in config
    assert config["kvConfigPath"] == str(world.kv_path)


def test_s27_defaults() -> None:
    props = NamesrvConfig().to_properties()
    assert props["listenPort"] == "9876"
    assert props["bindAddress"] == "0.0.0.0"
    assert props["scanNotActiveBrokerInterval"] == "5000"  # RocketMQ 5.x NamesrvConfig
    assert props["orderMessageEnable"] == "false"
    assert props["deleteTopicWithBrokerRegistration"] == "false"
    assert props["configBlackList"] == "configBlackList;configStorePath;kvConfigPath"
    assert props["kvConfigPath"].endswith("kvConfig.json")
    assert (
        NamesrvConfig().blacklisted_keys()
        == {
            "configBlackList",
            "configStorePath",
            "kvConfigPath",
            "snapshotDir",
        }
        | SECURITY_KEYS
    ), "the defaults, where files go, and every security setting"


# ------------------------------------------------------------------ performance paths (issue: benchmarks)


def test_identical_body_is_not_decoded_again_but_refreshes_liveness(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    register(world.ns, topics=[topic("T1")], filters=["10.0.0.9:7000"])
    tables = copy.deepcopy((world.ns.route_table.topic_queue_table, world.ns.route_table.broker_addr_table))
    world.clock.advance(60_000)

    def no_decoding(*args: object, **kwargs: object) -> None:
        raise AssertionError("an identical body was decoded again")

    monkeypatch.setattr("namesrv_grpc.wire.grpc_register_body.parse_body", no_decoding)
    register(world.ns, topics=[topic("T1")], filters=["10.0.0.9:7000"], ha="10.0.0.1:10912")
    live = world.ns.route_table.live_info(A)
    assert live is not None
    assert live.last_update_timestamp == world.clock.now
    assert live.ha_server_addr == "10.0.0.1:10912"
    assert live.data_version == V1
    assert world.ns.route_table.filter_server_table == {A: ["10.0.0.9:7000"]}
    assert (world.ns.route_table.topic_queue_table, world.ns.route_table.broker_addr_table) == tables
    # A different body (same DataVersion, new topic) is decoded; S06 then skips the topic work.
    with pytest.raises(AssertionError, match="decoded again"):
        register(world.ns, topics=[topic("T1"), topic("T2")])


def test_cached_routes_follow_order_topic_config_changes(tmp_path: Path) -> None:
    world = make_world(tmp_path, order_message_enable=True)
    register(world.ns, topics=[topic("T1")])

    def encode(route: Any) -> str:
        return str(route.order_topic_conf)

    assert world.ns.pickup_topic_route_encoded("T1", encode) == ""
    world.ns.put_kv_config(ORDER_TOPIC_CONFIG_NAMESPACE, "T1", "broker-a:4")
    assert world.ns.pickup_topic_route_encoded("T1", encode) == "broker-a:4"
    world.ns.delete_kv_config(ORDER_TOPIC_CONFIG_NAMESPACE, "T1")
    assert world.ns.pickup_topic_route_encoded("T1", encode) == ""
    world.ns.put_kv_config(ORDER_TOPIC_CONFIG_NAMESPACE, "T1", "broker-a:8")
    world.ns.update_namesrv_config({"orderMessageEnable": "false"})
    assert world.ns.pickup_topic_route_encoded("T1", encode) == ""
    world.ns.update_namesrv_config({"orderMessageEnable": "true"})
    assert world.ns.pickup_topic_route_encoded("T1", encode) == "broker-a:8"
