"""Every error row of CONTRACT.md ("Errors") over loopback against a real NameServer process: the gRPC
code, the ``google.rpc.ErrorInfo`` (reason, domain ``namesrv.rocketmq``, ``field`` metadata), and that
a rejected request changes no state (cluster info, topics, every route, KV namespaces, config)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import google_crc32c
import grpc
import pytest
from google.protobuf import json_format

from namesrv.v1 import admin_service_pb2 as admin_pb2
from namesrv.v1 import kv_config_service_pb2 as kv_pb2
from namesrv.v1 import name_server_service_pb2 as ns_pb2
from namesrv.v1 import types_pb2
from namesrv_grpc.core.model import DataVersion
from tests.support import Stubs, error_info, register_request, running_namesrv, topic

DOMAIN = "namesrv.rocketmq"
MASTER_A = "127.0.0.1:10911"
SLAVE_A = "127.0.0.1:10921"
MASTER_B = "127.0.0.1:10931"

KNOWN_NAMESPACES = ("ORDER_TOPIC_CONFIG", "NS", "LeakNs", "")
"""Namespaces whose tables are part of the state snapshot ("" is read as a rejected call's result)."""

EXTRA_TOPICS = ("LeakTopic", "NewTopic", "NoSuchTopic", "TopicA", "TopicB", "TopicTest")
"""Topics whose route (or NOT_FOUND) is captured even when GetAllTopicList does not list them."""


# --------------------------------------------------------------------------- state snapshots


@dataclass(frozen=True)
class State:
    """What a client can see of a NameServer."""

    cluster_info: dict[str, Any]
    topics: list[str]
    routes: dict[str, Any]
    kv: dict[str, Any]
    config: dict[str, str]


def _outcome(method: Callable[[Any], Any], request: Any) -> Any:
    """The response of ``method(request)`` as a dict, or the failure's code and message."""
    try:
        return json_format.MessageToDict(method(request))
    except grpc.RpcError as error:
        return f"{error.code().name}: {error.details()}"


def capture_state(stubs: Stubs) -> State:
    cluster_info = json_format.MessageToDict(stubs.ns.GetBrokerClusterInfo(ns_pb2.GetBrokerClusterInfoRequest()))
    topics = list(stubs.ns.GetAllTopicList(ns_pb2.GetAllTopicListRequest()).topics)
    routes = {
        name: _outcome(stubs.ns.PickupTopicRoute, ns_pb2.PickupTopicRouteRequest(topic=name))
        for name in sorted({*topics, *EXTRA_TOPICS})
    }
    kv = {
        namespace: _outcome(stubs.kv.GetKVListByNamespace, kv_pb2.GetKVListByNamespaceRequest(namespace=namespace))
        for namespace in KNOWN_NAMESPACES
    }
    config = dict(stubs.admin.GetNamesrvConfig(admin_pb2.GetNamesrvConfigRequest()).config)
    return State(cluster_info, topics, routes, kv, config)


def assert_rejected(
    stubs: Stubs,
    call: Callable[[Stubs], Any],
    code: grpc.StatusCode,
    reason: str | None,
    field: str | None = None,
) -> grpc.RpcError:
    """Run ``call``; it must fail with ``code`` and an ErrorInfo (``reason``, our domain, the
    ``field`` metadata as a regular expression) and leave the state exactly as it was."""
    before = capture_state(stubs)
    with pytest.raises(grpc.RpcError) as caught:
        call(stubs)
    error = caught.value
    assert error.code() == code, error
    assert error.details(), "no message a person can act on"
    if reason is not None:
        info = error_info(error)
        assert info.reason == reason
        assert info.domain == DOMAIN
        if field is not None:
            assert re.fullmatch(field, info.metadata["field"]), info.metadata
            assert info.metadata["field"] in (error.details() or ""), "the message does not name the field"
    after = capture_state(stubs)
    assert after == before, "a rejected request changed the state"
    return error


# --------------------------------------------------------------------------- the shared server


def seed(stubs: Stubs) -> None:
    """broker-a master + slave (DefaultCluster), broker-b (ClusterB), three topics, filter servers, KV."""
    stubs.ns.RegisterBroker(
        register_request(
            broker_addr=MASTER_A,
            topics=[topic("TopicTest", read=4, write=4), topic("TopicA", sys_flag=1)],
            filter_servers=["127.0.0.1:45001"],
        )
    )
    stubs.ns.RegisterBroker(register_request(broker_id=1, broker_addr=SLAVE_A, ha_server_addr="127.0.0.1:10922"))
    stubs.ns.RegisterBroker(
        register_request(
            cluster="ClusterB",
            broker_name="broker-b",
            broker_addr=MASTER_B,
            topics=[topic("TopicTest", read=8, write=8), topic("TopicB", perm=4)],
        )
    )
    stubs.kv.PutKVConfig(kv_pb2.PutKVConfigRequest(namespace="ORDER_TOPIC_CONFIG", key="TopicTest", value="broker-a:4"))
    stubs.kv.PutKVConfig(kv_pb2.PutKVConfigRequest(namespace="NS", key="k", value="v"))


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stubs]:
    """One NameServer for the module, seeded with brokers, topics and KV entries. Each test checks
    that its rejected calls leave that state alone."""
    workdir = tmp_path_factory.mktemp("errors")
    with running_namesrv(workdir, "--scan-not-active-broker-interval", "200") as server, server.channel() as ch:
        stubs = Stubs(ch)
        seed(stubs)
        yield stubs


def test_seeded_state_is_what_the_tests_expect(seeded: Stubs) -> None:
    state = capture_state(seeded)
    assert state.topics == ["TopicA", "TopicB", "TopicTest"]
    assert state.routes["NoSuchTopic"].startswith("NOT_FOUND")
    assert state.kv["NS"] == {"table": {"k": "v"}}
    assert state.kv[""].startswith("INVALID_ARGUMENT")


# --------------------------------------------------------------------------- S01 checksum, body


def _bad_crc(**kwargs: Any) -> ns_pb2.RegisterBrokerRequest:
    request = register_request(**kwargs)
    request.body_crc32c ^= 0x1
    return request


def _with_body(body: bytes, *, compressed: bool = False, **kwargs: Any) -> ns_pb2.RegisterBrokerRequest:
    request = register_request(**kwargs)
    request.body = body
    request.body_crc32c = int(google_crc32c.value(body))
    request.compressed = compressed
    return request


LEAK: dict[str, Any] = {"cluster": "LeakCluster", "broker_name": "broker-leak", "broker_addr": "127.0.0.1:10999"}


@pytest.mark.parametrize(
    "request_",
    [
        pytest.param(_bad_crc(topics=[topic("LeakTopic")], **LEAK), id="new-broker"),
        pytest.param(
            _bad_crc(broker_addr=MASTER_A, topics=[topic("TopicA", read=1)], version=DataVersion(0, 9, 9)),
            id="existing-master-new-version",
        ),
        pytest.param(_bad_crc(topics=[topic("LeakTopic")], compressed=True, **LEAK), id="compressed"),
        pytest.param(
            _bad_crc(topics=[topic("LeakTopic")], cluster="", broker_name="", broker_addr="nohost"),
            id="checked-before-fields",
        ),
    ],
)
def test_s01_body_checksum_mismatch_is_data_loss(seeded: Stubs, request_: ns_pb2.RegisterBrokerRequest) -> None:
    assert_rejected(
        seeded, lambda s: s.ns.RegisterBroker(request_), grpc.StatusCode.DATA_LOSS, "BODY_CHECKSUM_MISMATCH"
    )


@pytest.mark.parametrize(
    "request_",
    [
        pytest.param(_with_body(b"\x0a\xff\xff garbage", **LEAK), id="garbage-body"),
        pytest.param(_with_body(b"not zlib at all", compressed=True, **LEAK), id="compressed-not-zlib"),
        pytest.param(
            _with_body(register_request(topics=[topic("LeakTopic")]).body, compressed=True, broker_addr=MASTER_A),
            id="compressed-flag-on-plain-body",
        ),
        pytest.param(
            _with_body(register_request(topics=[topic("LeakTopic")], compressed=True).body[:-6], compressed=True),
            id="truncated-zlib",
        ),
    ],
)
def test_malformed_body_is_invalid_argument(seeded: Stubs, request_: ns_pb2.RegisterBrokerRequest) -> None:
    assert_rejected(seeded, lambda s: s.ns.RegisterBroker(request_), grpc.StatusCode.INVALID_ARGUMENT, "MALFORMED_BODY")


# --------------------------------------------------------------------------- INVALID_FIELD


def _register(**kwargs: Any) -> Callable[[Stubs], Any]:
    request = register_request(**kwargs)
    return lambda s: s.ns.RegisterBroker(request)


def _broker_fields(**overrides: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "cluster_name": "DefaultCluster",
        "broker_name": "broker-a",
        "broker_id": 0,
        "broker_addr": MASTER_A,
    }
    fields.update(overrides)
    return fields


def _body_field(topic_name: str, name: str) -> str:
    return rf"body\.topic_config_table\[.?{re.escape(topic_name)}.?\]\.{name}"


REGISTER_INVALID = [
    ("empty-cluster_name", _register(cluster="", topics=[topic("LeakTopic")]), "cluster_name"),
    ("empty-broker_name", _register(broker_name="", topics=[topic("LeakTopic")]), "broker_name"),
    ("broker_id--1", _register(broker_id=-1, **LEAK, topics=[topic("LeakTopic")]), "broker_id"),
    ("broker_id--1-existing", _register(broker_id=-1, broker_addr=SLAVE_A), "broker_id"),
    ("addr-nohost", _register(broker_addr="nohost", topics=[topic("LeakTopic")]), "broker_addr"),
    ("addr-port-0", _register(broker_addr="h:0", topics=[topic("LeakTopic")]), "broker_addr"),
    ("addr-port-65536", _register(broker_addr="h:65536", topics=[topic("LeakTopic")]), "broker_addr"),
    ("addr-port-abc", _register(broker_addr="h:abc", topics=[topic("LeakTopic")]), "broker_addr"),
    ("addr-empty", _register(broker_addr="", topics=[topic("LeakTopic")]), "broker_addr"),
    (
        "read-queue-nums--1",
        _register(**LEAK, topics=[topic("LeakTopic", read=-1)]),
        _body_field("LeakTopic", "read_queue_nums"),
    ),
    (
        "write-queue-nums-65536",
        _register(**LEAK, topics=[topic("LeakTopic", write=65536)]),
        _body_field("LeakTopic", "write_queue_nums"),
    ),
    (
        "read-queue-nums-65536-existing-master",
        _register(
            broker_addr=MASTER_A,
            version=DataVersion(0, 7, 7),
            topics=[topic("TopicA", read=1), topic("NewTopic"), topic("LeakTopic", read=65536)],
        ),
        _body_field("LeakTopic", "read_queue_nums"),
    ),
    (
        "write-queue-nums--1-existing-master",
        _register(
            broker_addr=MASTER_A,
            version=DataVersion(0, 7, 7),
            topics=[topic("TopicTest", write=-1), topic("NewTopic")],
        ),
        _body_field("TopicTest", "write_queue_nums"),
    ),
]

OTHER_INVALID = [
    (
        "unregister-broker_id--1",
        lambda s: s.ns.UnregisterBroker(ns_pb2.UnregisterBrokerRequest(**_broker_fields(broker_id=-1))),
        "broker_id",
    ),
    (
        "unregister-empty-cluster_name",
        lambda s: s.ns.UnregisterBroker(ns_pb2.UnregisterBrokerRequest(**_broker_fields(cluster_name=""))),
        "cluster_name",
    ),
    (
        "unregister-addr-h:0",
        lambda s: s.ns.UnregisterBroker(ns_pb2.UnregisterBrokerRequest(**_broker_fields(broker_addr="h:0"))),
        "broker_addr",
    ),
    (
        "heartbeat-empty-broker_name",
        lambda s: s.ns.BrokerHeartbeat(ns_pb2.BrokerHeartbeatRequest(**_broker_fields(broker_name=""))),
        "broker_name",
    ),
    (
        "heartbeat-addr-h:abc",
        lambda s: s.ns.BrokerHeartbeat(ns_pb2.BrokerHeartbeatRequest(**_broker_fields(broker_addr="h:abc"))),
        "broker_addr",
    ),
    (
        "query-data-version-addr-nohost",
        lambda s: s.ns.QueryDataVersion(ns_pb2.QueryDataVersionRequest(**_broker_fields(broker_addr="nohost"))),
        "broker_addr",
    ),
    (
        "query-data-version-broker_id--1",
        lambda s: s.ns.QueryDataVersion(ns_pb2.QueryDataVersionRequest(**_broker_fields(broker_id=-1))),
        "broker_id",
    ),
    ("pickup-empty-topic", lambda s: s.ns.PickupTopicRoute(ns_pb2.PickupTopicRouteRequest(topic="")), "topic"),
    (
        "topics-by-cluster-empty",
        lambda s: s.ns.GetTopicsByCluster(ns_pb2.GetTopicsByClusterRequest(cluster_name="")),
        "cluster_name",
    ),
    (
        "put-kv-empty-namespace",
        lambda s: s.kv.PutKVConfig(kv_pb2.PutKVConfigRequest(namespace="", key="k", value="v")),
        "namespace",
    ),
    (
        "put-kv-empty-key",
        lambda s: s.kv.PutKVConfig(kv_pb2.PutKVConfigRequest(namespace="LeakNs", key="", value="v")),
        "key",
    ),
    (
        "get-kv-empty-namespace",
        lambda s: s.kv.GetKVConfig(kv_pb2.GetKVConfigRequest(namespace="", key="k")),
        "namespace",
    ),
    ("get-kv-empty-key", lambda s: s.kv.GetKVConfig(kv_pb2.GetKVConfigRequest(namespace="NS", key="")), "key"),
    (
        "delete-kv-empty-namespace",
        lambda s: s.kv.DeleteKVConfig(kv_pb2.DeleteKVConfigRequest(namespace="", key="k")),
        "namespace",
    ),
    ("delete-kv-empty-key", lambda s: s.kv.DeleteKVConfig(kv_pb2.DeleteKVConfigRequest(namespace="NS", key="")), "key"),
    (
        "list-kv-empty-namespace",
        lambda s: s.kv.GetKVListByNamespace(kv_pb2.GetKVListByNamespaceRequest(namespace="")),
        "namespace",
    ),
    (
        "wipe-empty-broker_name",
        lambda s: s.admin.WipeWritePermOfBroker(admin_pb2.WipeWritePermOfBrokerRequest(broker_name="")),
        "broker_name",
    ),
    (
        "add-empty-broker_name",
        lambda s: s.admin.AddWritePermOfBroker(admin_pb2.AddWritePermOfBrokerRequest(broker_name="")),
        "broker_name",
    ),
    ("delete-topic-empty", lambda s: s.admin.DeleteTopic(admin_pb2.DeleteTopicRequest(topic="")), "topic"),
    (
        "register-topic-no-queue-datas",
        lambda s: s.admin.RegisterTopic(admin_pb2.RegisterTopicRequest(topic="NewTopic")),
        "queue_datas",
    ),
    (
        "register-topic-read-queue-nums--1",
        lambda s: s.admin.RegisterTopic(
            admin_pb2.RegisterTopicRequest(
                topic="TopicA",
                queue_datas=[
                    types_pb2.QueueData(broker_name="broker-a", read_queue_nums=-1, write_queue_nums=1, perm=6)
                ],
            )
        ),
        r"queue_datas\[0\]\.read_queue_nums",
    ),
    (
        "register-topic-write-queue-nums-65536",
        lambda s: s.admin.RegisterTopic(
            admin_pb2.RegisterTopicRequest(
                topic="NewTopic",
                queue_datas=[
                    types_pb2.QueueData(broker_name="broker-a", read_queue_nums=1, write_queue_nums=1, perm=6),
                    types_pb2.QueueData(broker_name="broker-b", read_queue_nums=1, write_queue_nums=65536, perm=6),
                ],
            )
        ),
        r"queue_datas\[1\]\.write_queue_nums",
    ),
    (
        "update-config-bad-value",
        lambda s: s.admin.UpdateNamesrvConfig(
            admin_pb2.UpdateNamesrvConfigRequest(
                config={"scanNotActiveBrokerInterval": "abc", "orderMessageEnable": "true"}
            )
        ),
        r".*scanNotActiveBrokerInterval.*",
    ),
    (
        "update-config-unknown-key",
        lambda s: s.admin.UpdateNamesrvConfig(
            admin_pb2.UpdateNamesrvConfigRequest(config={"noSuchKey": "1", "orderMessageEnable": "true"})
        ),
        r".*noSuchKey.*",
    ),
]


@pytest.mark.parametrize(
    ("call", "field"),
    [pytest.param(call, field, id=case_id) for case_id, call, field in REGISTER_INVALID + OTHER_INVALID],
)
def test_invalid_field_names_the_field(seeded: Stubs, call: Callable[[Stubs], Any], field: str) -> None:
    assert_rejected(seeded, call, grpc.StatusCode.INVALID_ARGUMENT, "INVALID_FIELD", field)


# --------------------------------------------------------------------------- RESOURCE_EXHAUSTED


def test_request_over_configured_limit_is_resource_exhausted(tmp_path: Path) -> None:
    config = tmp_path / "namesrv.conf"
    config.write_text("grpcMaxMessageSize=4194304\n", encoding="utf-8")
    with running_namesrv(tmp_path / "limit", "-c", str(config)) as server, server.channel() as channel:
        stubs = Stubs(channel)
        assert stubs.admin.GetNamesrvConfig(admin_pb2.GetNamesrvConfigRequest()).config["grpcMaxMessageSize"] == (
            "4194304"
        )
        seed(stubs)
        # A well-formed body of ~5 MiB (one topic with a large attribute): only its size is wrong.
        body = types_pb2.RegisterBrokerBody(data_version=types_pb2.DataVersion(counter=2))
        big = body.topic_config_table["LeakTopic"]
        big.MergeFrom(types_pb2.TopicConfig(topic_name="LeakTopic", read_queue_nums=4, write_queue_nums=4, perm=6))
        big.attributes["padding"] = "x" * (5 * 1024 * 1024)
        request = _with_body(body.SerializeToString(), broker_addr=MASTER_A)
        assert 5 * 1024 * 1024 <= request.ByteSize() < 6 * 1024 * 1024
        assert_rejected(stubs, lambda s: s.ns.RegisterBroker(request), grpc.StatusCode.RESOURCE_EXHAUSTED, None)
        # The server is still fine, and a request under the limit works.
        stubs.ns.RegisterBroker(
            register_request(broker_addr=MASTER_A, topics=[topic("After")], version=DataVersion(0, 3, 3))
        )
        assert "After" in stubs.ns.GetAllTopicList(ns_pb2.GetAllTopicListRequest()).topics


# --------------------------------------------------------------------------- NOT_FOUND


@pytest.mark.parametrize("name", ["NoSuchTopic", "主题-unknown", "%DLQ%group"])
def test_s18_topic_route_not_found_message(seeded: Stubs, name: str) -> None:
    error = assert_rejected(
        seeded,
        lambda s: s.ns.PickupTopicRoute(ns_pb2.PickupTopicRouteRequest(topic=name)),
        grpc.StatusCode.NOT_FOUND,
        "TOPIC_ROUTE_NOT_FOUND",
    )
    assert error.details() == f"No topic route info in name server for the topic: {name}"


@pytest.mark.parametrize(
    "fields",
    [
        pytest.param(_broker_fields(broker_addr="127.0.0.1:19999"), id="unknown-addr"),
        pytest.param(_broker_fields(broker_name="broker-zzz", broker_addr="127.0.0.1:19999"), id="unknown-name"),
        pytest.param(
            _broker_fields(cluster_name="NoCluster", broker_name="broker-zzz", broker_addr="127.0.0.1:19998"),
            id="unknown-cluster",
        ),
    ],
)
def test_s14_heartbeat_from_unregistered_broker(seeded: Stubs, fields: dict[str, Any]) -> None:
    assert_rejected(
        seeded,
        lambda s: s.ns.BrokerHeartbeat(ns_pb2.BrokerHeartbeatRequest(**fields)),
        grpc.StatusCode.NOT_FOUND,
        "BROKER_NOT_REGISTERED",
    )


@pytest.mark.parametrize(("namespace", "key"), [("NS", "absent"), ("NoSuchNs", "k"), ("ORDER_TOPIC_CONFIG", "TopicB")])
def test_s21_kv_config_not_found(seeded: Stubs, namespace: str, key: str) -> None:
    assert_rejected(
        seeded,
        lambda s: s.kv.GetKVConfig(kv_pb2.GetKVConfigRequest(namespace=namespace, key=key)),
        grpc.StatusCode.NOT_FOUND,
        "KV_CONFIG_NOT_FOUND",
    )


@pytest.mark.parametrize(
    ("topic_name", "broker_names"),
    [("NewTopic", ["broker-zzz"]), ("NewTopic", ["broker-a", "broker-zzz"]), ("TopicA", ["broker-b", "nobody"])],
)
def test_s25_register_topic_with_unknown_broker_name(seeded: Stubs, topic_name: str, broker_names: list[str]) -> None:
    request = admin_pb2.RegisterTopicRequest(
        topic=topic_name,
        queue_datas=[
            types_pb2.QueueData(broker_name=name, read_queue_nums=2, write_queue_nums=2, perm=6)
            for name in broker_names
        ],
    )
    assert_rejected(
        seeded,
        lambda s: s.admin.RegisterTopic(request),
        grpc.StatusCode.NOT_FOUND,
        "BROKER_NAME_NOT_REGISTERED",
    )


# --------------------------------------------------------------------------- FAILED_PRECONDITION


def test_s12_stale_broker_state_refused(seeded: Stubs) -> None:
    """broker-s id 0 registered at A with stateVersion 5; the same id from B with stateVersion 3 is
    refused and A stays the master with its topics."""
    addr_a, addr_b = "127.0.0.1:11011", "127.0.0.1:11021"
    seeded.ns.RegisterBroker(
        register_request(
            cluster="StaleCluster",
            broker_name="broker-s",
            broker_addr=addr_a,
            version=DataVersion(5, 100, 1),
            topics=[topic("StaleTopic", read=2, write=2)],
        )
    )
    try:
        assert_rejected(
            seeded,
            _register(
                cluster="StaleCluster",
                broker_name="broker-s",
                broker_addr=addr_b,
                version=DataVersion(3, 200, 9),
                topics=[topic("StaleTopic", read=9, write=9), topic("LeakTopic")],
            ),
            grpc.StatusCode.FAILED_PRECONDITION,
            "STALE_BROKER_STATE",
        )
        route = seeded.ns.PickupTopicRoute(ns_pb2.PickupTopicRouteRequest(topic="StaleTopic")).route
        assert dict(route.broker_datas[0].broker_addrs) == {0: addr_a}
        assert route.queue_datas[0].read_queue_nums == 2
    finally:
        seeded.ns.UnregisterBroker(
            ns_pb2.UnregisterBrokerRequest(
                cluster_name="StaleCluster", broker_name="broker-s", broker_id=0, broker_addr=addr_a
            )
        )


# --------------------------------------------------------------------------- PERMISSION_DENIED


@pytest.mark.parametrize(
    "config",
    [
        {"kvConfigPath": "/tmp/elsewhere/kvConfig.json"},
        {"configStorePath": "/tmp/elsewhere/namesrv.properties"},
        {"configBlackList": ""},
        {"scanNotActiveBrokerInterval": "300", "kvConfigPath": "/tmp/elsewhere/kvConfig.json"},
        {"orderMessageEnable": "true", "configBlackList": "nothing"},
    ],
    ids=["kvConfigPath", "configStorePath", "configBlackList", "mixed-valid-and-kvConfigPath", "mixed-blacklist"],
)
def test_s26_blacklisted_config_key_refused(seeded: Stubs, config: dict[str, str]) -> None:
    assert_rejected(
        seeded,
        lambda s: s.admin.UpdateNamesrvConfig(admin_pb2.UpdateNamesrvConfigRequest(config=config)),
        grpc.StatusCode.PERMISSION_DENIED,
        "CONFIG_KEY_BLACKLISTED",
    )


def test_s26_keys_listed_in_config_blacklist_refused(tmp_path: Path) -> None:
    """Keys a ``configBlackList`` from ``-c FILE`` names are refused too, as are the three defaults."""
    conf = tmp_path / "namesrv.conf"
    conf.write_text("configBlackList=orderMessageEnable;scanNotActiveBrokerInterval\n", encoding="utf-8")
    with running_namesrv(tmp_path / "bl", "-c", str(conf)) as server, server.channel() as channel:
        stubs = Stubs(channel)
        seed(stubs)
        for config in ({"orderMessageEnable": "true"}, {"scanNotActiveBrokerInterval": "300"}, {"kvConfigPath": "x"}):
            request = admin_pb2.UpdateNamesrvConfigRequest(config=config)

            def update(s: Stubs, request: admin_pb2.UpdateNamesrvConfigRequest = request) -> Any:
                return s.admin.UpdateNamesrvConfig(request)

            assert_rejected(stubs, update, grpc.StatusCode.PERMISSION_DENIED, "CONFIG_KEY_BLACKLISTED")
        stubs.admin.UpdateNamesrvConfig(
            admin_pb2.UpdateNamesrvConfigRequest(config={"shutdownGracePeriodMillis": "100"})
        )
        assert stubs.admin.GetNamesrvConfig(admin_pb2.GetNamesrvConfigRequest()).config[
            "shutdownGracePeriodMillis"
        ] == ("100")


def test_seeded_state_survived_every_rejection(seeded: Stubs) -> None:
    """Runs last in the module: the seed is still exactly as it was registered."""
    state = capture_state(seeded)
    assert state.topics == ["TopicA", "TopicB", "TopicTest"]
    assert state.cluster_info["clusterAddrTable"] == {
        "DefaultCluster": {"brokerNames": ["broker-a"]},
        "ClusterB": {"brokerNames": ["broker-b"]},
    }
    assert state.kv["ORDER_TOPIC_CONFIG"] == {"table": {"TopicTest": "broker-a:4"}}
    assert state.config["scanNotActiveBrokerInterval"] == "200"
    assert state.config["orderMessageEnable"] == "false"


def test_filter_server_list_over_limit_is_resource_exhausted(seeded: Stubs) -> None:
    """registerBodyMaxFilterServers (default 64): a longer list is refused and changes nothing; 64 pass."""
    servers = [f"10.9.{i // 250}.{i % 250}:45001" for i in range(65)]
    request = register_request(broker_addr=MASTER_A, topics=[topic("Filtered")], version=DataVersion(0, 7, 7),
                               filter_servers=servers)  # fmt: skip
    error = assert_rejected(
        seeded, lambda s: s.ns.RegisterBroker(request), grpc.StatusCode.RESOURCE_EXHAUSTED, "LIMIT_EXCEEDED"
    )
    assert error_info(error).metadata["limit"] == "registerBodyMaxFilterServers"
    assert "65 filter servers, more than 64 (registerBodyMaxFilterServers)" in (error.details() or "")
    request = register_request(broker_addr=MASTER_A, topics=[topic("Filtered")], version=DataVersion(0, 7, 7),
                               filter_servers=servers[:64])  # fmt: skip
    seeded.ns.RegisterBroker(request)
    route = seeded.ns.PickupTopicRoute(ns_pb2.PickupTopicRouteRequest(topic="Filtered")).route
    assert list(route.filter_server_table[MASTER_A].filter_server_addrs) == servers[:64]
