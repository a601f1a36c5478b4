"""Deterministic pins of rules that the fast paths and caches could silently break: each test names
the shortcut that would make it fail.

* S01 holds for a body whose (CRC32C, length, compression) fingerprint was accepted before: the
  "same body as last time" shortcut must never skip the checksum.
* S15/S17 sessions and an empty ``instance_id``: a session survives a re-registration only of the
  same non-empty instance.
* S18: a cached route is dropped exactly when one of its QueueData changes (and only then).
"""

from __future__ import annotations

import copy
import zlib
from pathlib import Path
from typing import Any

import grpc
import pytest

from namesrv.v1 import name_server_service_pb2 as ns_pb2
from namesrv_grpc.config import NamesrvConfig
from namesrv_grpc.core.errors import BodyChecksumMismatchError
from namesrv_grpc.core.kvconfig import KVConfigManager
from namesrv_grpc.core.model import PERM_READ, DataVersion, QueueData, TopicConfig, TopicRouteData
from namesrv_grpc.core.processor import NameServer
from namesrv_grpc.core.route_table import RouteInfoManager
from namesrv_grpc.remoting.codes import RequestCode, ResponseCode
from namesrv_grpc.wire import bodies
from namesrv_grpc.wire.grpc_register_body import encode_body
from tests.remoting_support import RemotingTestClient
from tests.support import FakeClock, NamesrvProcess, Stubs, error_info, register_broker

ADDR = "10.0.0.1:10911"
TOPICS = {"TopicTest": TopicConfig("TopicTest", 4, 4), "Other": TopicConfig("Other", 2, 2)}


def nameserver(tmp_path: Path) -> tuple[NameServer, FakeClock]:
    clock = FakeClock()
    config = NamesrvConfig(kv_config_path=str(tmp_path / "kv.json"), config_store_path=str(tmp_path / "ns.properties"))
    return NameServer(config, RouteInfoManager(clock), KVConfigManager(None)), clock


def corrupt_same_length(body: bytes, marker: bytes = b"TopicTest") -> bytes:
    """The body with one letter of ``marker`` changed: same length, still a well-formed protobuf
    (a topic name changes), so only the checksum can tell it from the original."""
    index = body.index(marker)
    return body[:index] + b"X" + body[index + 1 :]


def register(ns: NameServer, body: bytes, crc: int, compressed: bool) -> None:
    register_broker(ns,
        cluster_name="c", broker_name="broker-a", broker_id=0, broker_addr=ADDR, ha_server_addr="",
        body=body, body_crc32c=crc, compressed=compressed, heartbeat_timeout_millis=10_000,
    )  # fmt: skip


def tables(ns: NameServer) -> Any:
    rt = ns.route_table
    return copy.deepcopy(
        (rt.topic_queue_table, rt.broker_addr_table, rt.broker_live_table, rt.filter_server_table, rt.version)
    )


# ---------------------------------------------------------------------------- S01 with a known fingerprint


@pytest.mark.parametrize("compressed", [False, True], ids=["plain", "compressed"])
def test_s01_corrupted_bytes_under_an_accepted_fingerprint_are_rejected(tmp_path: Path, compressed: bool) -> None:
    """The corrupted body has the length, compression flag and claimed CRC32C of a body this very
    broker registered a moment ago: a "skip the checksum for a known body" shortcut would take the
    fast path and accept it. S01 says: rejected, nothing changes, not even liveness."""
    ns, clock = nameserver(tmp_path)
    body, crc = encode_body(TOPICS, DataVersion(0, 1, 1), compress=compressed)
    register(ns, body, crc, compressed)
    clock.advance(5_000)
    # Compressed: one bit flipped inside the deflate stream. Same length, claimed CRC of the accepted body.
    corrupted = body[:-8] + bytes([body[-8] ^ 0x01]) + body[-7:] if compressed else corrupt_same_length(body)
    assert len(corrupted) == len(body)
    assert corrupted != body
    before = tables(ns)
    with pytest.raises(BodyChecksumMismatchError):
        register(ns, corrupted, crc, compressed)
    assert tables(ns) == before, "a rejected registration changed the tables (or refreshed liveness)"
    # The genuine body is still accepted after the rejection, through the fast path.
    register(ns, body, crc, compressed)
    assert ns.route_table.broker_live_table[ADDR].last_update_timestamp == clock.now


def test_s01_corrupted_resend_over_grpc_is_data_loss_and_changes_nothing(stubs: Stubs) -> None:
    """The same over a real server: RegisterBroker, then the corrupted bytes under the accepted
    CRC32C; DATA_LOSS with BODY_CHECKSUM_MISMATCH, and the route still has the original topic."""
    body, crc = encode_body(TOPICS, DataVersion(0, 1, 1))
    request = ns_pb2.RegisterBrokerRequest(
        cluster_name="c", broker_name="broker-a", broker_id=0, broker_addr="127.0.0.1:10911", body=body,
        body_crc32c=crc,
    )  # fmt: skip
    stubs.ns.RegisterBroker(request, timeout=5)
    corrupted = ns_pb2.RegisterBrokerRequest()
    corrupted.CopyFrom(request)
    corrupted.body = corrupt_same_length(body)
    with pytest.raises(grpc.RpcError) as caught:
        stubs.ns.RegisterBroker(corrupted, timeout=5)
    error: Any = caught.value
    assert error.code() == grpc.StatusCode.DATA_LOSS
    assert error_info(error).reason == "BODY_CHECKSUM_MISMATCH"
    route = stubs.ns.PickupTopicRoute(ns_pb2.PickupTopicRouteRequest(topic="TopicTest"), timeout=5).route
    assert [q.read_queue_nums for q in route.queue_datas] == [4]
    with pytest.raises(grpc.RpcError) as missing:
        stubs.ns.PickupTopicRoute(ns_pb2.PickupTopicRouteRequest(topic="XopicTest"), timeout=5)
    assert missing.value.code() == grpc.StatusCode.NOT_FOUND


def test_s01_corrupted_resend_over_remoting_is_crc32_not_match_and_changes_nothing(
    namesrv: NamesrvProcess, stubs: Stubs
) -> None:
    """The same over the remoting port: REGISTER_BROKER (JSON body, as a Java broker), then the
    corrupted bytes of the same length under the accepted ``bodyCrc32``: SYSTEM_ERROR "crc32 not
    match", and the route is the original one."""
    body = bodies.encode_register_broker_body(TOPICS, DataVersion(0, 1, 1), compressed=False)
    header = {
        "clusterName": "c", "brokerName": "broker-a", "brokerId": "0", "brokerAddr": "127.0.0.1:10911",
        "haServerAddr": "", "compressed": "false", "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF),
    }  # fmt: skip
    with RemotingTestClient(namesrv.remoting_address) as broker:
        assert broker.call(RequestCode.REGISTER_BROKER, header, body).code == ResponseCode.SUCCESS
        answer = broker.call(RequestCode.REGISTER_BROKER, header, corrupt_same_length(body))
        assert (answer.code, answer.remark) == (ResponseCode.SYSTEM_ERROR, "crc32 not match")
        route = stubs.ns.PickupTopicRoute(ns_pb2.PickupTopicRouteRequest(topic="TopicTest"), timeout=5).route
        assert [q.read_queue_nums for q in route.queue_datas] == [4]
        with pytest.raises(grpc.RpcError) as missing:
            stubs.ns.PickupTopicRoute(ns_pb2.PickupTopicRouteRequest(topic="XopicTest"), timeout=5)
        assert missing.value.code() == grpc.StatusCode.NOT_FOUND


# ---------------------------------------------------------------------------- sessions and empty instance_id


def registered_table(instance: str) -> tuple[RouteInfoManager, FakeClock]:
    clock = FakeClock()
    rt = RouteInfoManager(clock)
    register_in(rt, instance)
    return rt, clock


def register_in(rt: RouteInfoManager, instance: str, version: int = 1) -> None:
    rt.register_broker(
        cluster_name="c", broker_name="broker-a", broker_id=0, broker_addr=ADDR,
        data_version=DataVersion(0, 1, version), topic_configs=TOPICS, instance_id=instance,
    )  # fmt: skip


def bind(rt: RouteInfoManager, instance: str) -> tuple[int, int] | None:
    return rt.bind_session(
        cluster_name="c", broker_name="broker-a", broker_id=0, broker_addr=ADDR, instance_id=instance
    )


def test_s15_hello_with_empty_instance_binds_to_a_registration_without_instance() -> None:
    """A broker that names no instance (``instance_id`` "") can still open a session: the hello
    matches the registration, which also named none."""
    rt, _ = registered_table("")
    bound = bind(rt, "")
    assert bound is not None
    assert rt.session_heartbeat(ADDR, bound[0]) is True


def test_s17_re_registration_without_instance_drops_the_session() -> None:
    """With an empty ``instance_id`` the NameServer cannot tell a restarted broker from the same one,
    so a re-registration unbinds the session: the old session's end must not remove the broker."""
    rt, _ = registered_table("")
    bound = bind(rt, "")
    assert bound is not None
    register_in(rt, "", version=2)
    assert rt.session_heartbeat(ADDR, bound[0]) is False
    assert rt.remove_if_session(ADDR, bound[0], "session ended") is None
    assert ADDR in rt.broker_live_table


def test_s17_re_registration_of_the_same_named_instance_keeps_the_session() -> None:
    rt, _ = registered_table("run-1")
    bound = bind(rt, "run-1")
    assert bound is not None
    register_in(rt, "run-1", version=2)
    assert rt.session_heartbeat(ADDR, bound[0]) is True
    removed = rt.remove_if_session(ADDR, bound[0], "session ended")
    assert removed is not None
    assert ADDR not in rt.broker_live_table


@pytest.mark.parametrize(("registered", "hello"), [("run-1", ""), ("", "run-1"), ("run-1", "run-2")])
def test_s15_hello_from_another_instance_is_refused(registered: str, hello: str) -> None:
    rt, _ = registered_table(registered)
    assert bind(rt, hello) is None
    assert rt.broker_live_table[ADDR].session_id == 0


# ---------------------------------------------------------------------------- S18 route cache


def lookup(rt: RouteInfoManager, topic: str, encodes: list[str]) -> tuple[QueueData, ...]:
    def encode(route: TopicRouteData) -> tuple[QueueData, ...]:
        encodes.append(topic)
        return tuple(route.queue_datas)

    value = rt.pickup_topic_route_cached(topic, encode, key="queue-datas")
    assert value is not None
    return value  # type: ignore[no-any-return]


def test_s18_cached_route_follows_a_queue_data_change_and_only_that_topic_is_rebuilt() -> None:
    clock = FakeClock()
    rt = RouteInfoManager(clock)
    rt.register_broker(
        cluster_name="c", broker_name="broker-a", broker_id=0, broker_addr=ADDR,
        data_version=DataVersion(0, 1, 1), topic_configs=TOPICS,
    )  # fmt: skip
    encodes: list[str] = []
    assert lookup(rt, "TopicTest", encodes) == (QueueData("broker-a", 4, 4, 6, 0),)
    assert lookup(rt, "Other", encodes) == (QueueData("broker-a", 2, 2, 6, 0),)
    assert lookup(rt, "TopicTest", encodes) == (QueueData("broker-a", 4, 4, 6, 0),)
    assert encodes == ["TopicTest", "Other"], "a second lookup must be a cache hit"

    # A new DataVersion changes TopicTest's queue numbers (S07): its cached route goes, Other's stays.
    changed = {**TOPICS, "TopicTest": TopicConfig("TopicTest", 8, 8)}
    rt.register_broker(
        cluster_name="c", broker_name="broker-a", broker_id=0, broker_addr=ADDR,
        data_version=DataVersion(0, 1, 2), topic_configs=changed,
    )  # fmt: skip
    assert lookup(rt, "TopicTest", encodes) == (QueueData("broker-a", 8, 8, 6, 0),)
    assert lookup(rt, "Other", encodes) == (QueueData("broker-a", 2, 2, 6, 0),)
    assert encodes == ["TopicTest", "Other", "TopicTest"]

    # A permission change of the same QueueData (S07 again, perm only): rebuilt once more.
    read_only = {**changed, "TopicTest": TopicConfig("TopicTest", 8, 8, PERM_READ)}
    rt.register_broker(
        cluster_name="c", broker_name="broker-a", broker_id=0, broker_addr=ADDR,
        data_version=DataVersion(0, 1, 3), topic_configs=read_only,
    )  # fmt: skip
    assert lookup(rt, "TopicTest", encodes) == (QueueData("broker-a", 8, 8, PERM_READ, 0),)
    assert encodes == ["TopicTest", "Other", "TopicTest", "TopicTest"]

    # REGISTER_TOPIC_IN_NAMESRV replaces the QueueData (S25): rebuilt.
    rt.register_topic("TopicTest", [QueueData("broker-a", 1, 1, 6, 0)])
    assert lookup(rt, "TopicTest", encodes) == (QueueData("broker-a", 1, 1, 6, 0),)

    # An unchanged re-registration with a new DataVersion keeps every cached route.
    rt.register_broker(
        cluster_name="c", broker_name="broker-a", broker_id=0, broker_addr=ADDR,
        data_version=DataVersion(0, 1, 4), topic_configs={**read_only, "TopicTest": TopicConfig("TopicTest", 1, 1)},
    )  # fmt: skip
    count = len(encodes)
    lookup(rt, "Other", encodes)
    assert len(encodes) == count
