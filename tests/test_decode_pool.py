"""Large registration bodies decoded in a child process (namesrv_grpc.decode_pool): the same result
as in the calling thread, the same errors, a dead child replaced, and both front doors using it
in a real server."""

from __future__ import annotations

import os
import pickle
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from namesrv.v1 import name_server_service_pb2 as ns_pb2
from namesrv_grpc import decode_pool
from namesrv_grpc.core.body import DEFAULT_MAX_INFLATED_BODY_BYTES, encode_body, parse_body
from namesrv_grpc.core.compact_topics import CompactTopics, TopicsDelta
from namesrv_grpc.core.errors import InvalidFieldError, LimitExceededError, MalformedBodyError
from namesrv_grpc.core.model import DataVersion, QueueData, TopicConfig
from namesrv_grpc.core.processor import decode_protobuf_body
from namesrv_grpc.core.route_table import RouteInfoManager
from namesrv_grpc.decode_pool import LARGE_BODY_BYTES, LARGE_COMPRESSED_BODY_BYTES, BodyDecodePool
from namesrv_grpc.remoting import bodies
from namesrv_grpc.remoting.codes import ResponseCode
from tests.remoting_support import RemotingTestClient
from tests.support import Stubs, register_request, running_namesrv
from tests.test_remoting_server import register as remoting_register

MAX = DEFAULT_MAX_INFLATED_BODY_BYTES


def configs(count: int, prefix: str = "T", queues: int = 8) -> dict[str, TopicConfig]:
    return {f"{prefix}{i}": TopicConfig(f"{prefix}{i}", queues, queues, 6 if i % 3 else 4, i % 2) for i in range(count)}


@pytest.fixture
def pool() -> Iterator[BodyDecodePool]:
    decode_pool = BodyDecodePool(min_bytes=0, min_compressed_bytes=0)
    yield decode_pool
    decode_pool.close()


def test_compact_topics_is_the_mapping_of_the_four_numbers() -> None:
    topics = configs(5)
    compact = CompactTopics.from_topic_configs(topics)
    assert len(compact) == 5
    assert list(compact) == list(topics)
    assert compact["T4"] == TopicConfig("T4", 8, 8, 6, 0)
    assert dict(compact) == topics  # equal: every field but the four numbers is the default here
    assert list(compact.queue_nums())[:2] == [("T0", (8, 8, 4, 0)), ("T1", (8, 8, 6, 1))]
    with pytest.raises(ValueError, match="2 names need 8 numbers"):
        CompactTopics(["a", "b"], compact.nums[:4])


def test_topics_delta_names_what_changed_and_what_is_gone() -> None:
    old = CompactTopics.from_topic_configs(configs(3_000))
    changed = configs(3_000)
    changed["T5"] = TopicConfig("T5", 1, 1, 6, 1)
    changed["T2999"] = TopicConfig("T2999", 8, 8, 2, 0)
    same_order = TopicsDelta.between(77, old, CompactTopics.from_topic_configs(changed))
    assert (same_order.base_fingerprint, len(same_order), same_order.removed) == (77, 3_000, [])
    assert dict(same_order.changed) == {"T5": changed["T5"], "T2999": changed["T2999"]}
    # Another order, a topic gone, one new: compared by name.
    reordered = {name: changed[name] for name in reversed(changed) if name != "T9"} | {"New": TopicConfig("New")}
    delta = TopicsDelta.between(77, old, CompactTopics.from_topic_configs(reordered))
    assert (len(delta), delta.removed) == (3_000, ["T9"])
    assert sorted(delta.changed) == ["New", "T2999", "T5"]
    unchanged = TopicsDelta.between(1, old, old)
    assert (len(unchanged.changed), unchanged.removed) == (0, [])
    assert pickle.loads(pickle.dumps(delta)).changed.names == delta.changed.names


def test_the_child_keeps_a_bounded_number_of_tables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(decode_pool, "_tables", type(decode_pool._tables)())
    monkeypatch.setattr(decode_pool, "CHILD_CACHE_MAX_TOPICS", 250)
    for fingerprint in range(4):
        decode_pool._remember(fingerprint, CompactTopics.from_topic_configs(configs(100)))
    assert list(decode_pool._tables) == [2, 3]  # least recently used dropped first
    decode_pool._remember(9, CompactTopics.from_topic_configs(configs(300)))
    assert list(decode_pool._tables) == []  # one table over the bound is not kept either


def test_route_table_applies_compact_topics_as_topic_configs() -> None:
    def table(topic_configs: dict[str, TopicConfig] | CompactTopics) -> RouteInfoManager:
        rt = RouteInfoManager(lambda: 1_700_000_000_000)
        for version, changed in ((1, 0), (2, 7)):
            rt.register_broker(
                cluster_name="c", broker_name="b", broker_id=0, broker_addr="10.0.0.1:10911",
                data_version=DataVersion(0, version, version),
                topic_configs=topic_configs if changed == 0 else CompactTopics.from_topic_configs(configs(50, queues=4))
                if isinstance(topic_configs, CompactTopics) else configs(50, queues=4),
            )  # fmt: skip
        return rt

    plain, compact = table(configs(50)), table(CompactTopics.from_topic_configs(configs(50)))
    assert dict(plain.topic_queue_table) == dict(compact.topic_queue_table)
    assert compact.topic_queue_table["T7"] == {"b": QueueData("b", 4, 4, 6, 1)}
    assert plain.route_digest() == compact.route_digest()


def test_child_decodes_like_the_calling_thread(pool: BodyDecodePool) -> None:
    topics = configs(3_000)
    for compressed in (False, True):
        body, _ = encode_body(topics, DataVersion(0, 5, 6), ["10.0.0.9:45001"], compress=compressed)
        decoded = pool.decode(decode_protobuf_body, body, compressed, MAX, 200_000, None, True)
        assert isinstance(decoded.topic_configs, CompactTopics)
        assert dict(decoded.topic_configs) == parse_body(body, compressed=compressed).topic_config_table
        assert decoded.data_version == DataVersion(0, 5, 6)
        assert tuple(decoded.filter_server_list) == ("10.0.0.9:45001",)
        # The same topic table as the stored fingerprint: only the rest is decoded.
        again = pool.decode(decode_protobuf_body, body, compressed, MAX, 200_000, decoded.topics_fingerprint, True)
        assert again.topic_configs is None
        assert again.data_version == DataVersion(0, 5, 6)
    assert pool.decoded_in_child == 4
    assert pool.child_pid() not in (None, os.getpid())


def test_child_returns_a_delta_against_a_table_it_decoded(pool: BodyDecodePool) -> None:
    topics = configs(3_000)
    body, _ = encode_body(topics, DataVersion(0, 1, 1))
    first = pool.decode_delta(decode_protobuf_body, (body, False, MAX, 200_000, None, True), None)
    assert isinstance(first.topic_configs, CompactTopics)
    assert first.topics_fingerprint is not None
    topics["T42"] = TopicConfig("T42", 2, 2, 6, 0)
    changed, _ = encode_body(topics, DataVersion(0, 1, 2))
    args = (changed, False, MAX, 200_000, first.topics_fingerprint, True)
    delta = pool.decode_delta(decode_protobuf_body, args, first.topics_fingerprint)
    assert isinstance(delta.topic_configs, TopicsDelta)
    assert (len(delta.topic_configs), dict(delta.topic_configs.changed)) == (3_000, {"T42": topics["T42"]})
    assert delta.data_version == DataVersion(0, 1, 2)
    # A base the child never decoded: the whole table.
    unknown = pool.decode_delta(decode_protobuf_body, (changed, False, MAX, 200_000, None, True), 12345)
    assert isinstance(unknown.topic_configs, CompactTopics)
    assert len(unknown.topic_configs) == 3_000
    # Decoded in this process (no child): always whole, nothing kept here.
    pool.close()
    whole = pool.decode_delta(decode_protobuf_body, args, first.topics_fingerprint)
    assert isinstance(whole.topic_configs, CompactTopics)
    assert not decode_pool._tables


def test_errors_of_the_child_are_raised_whole(pool: BodyDecodePool) -> None:
    with pytest.raises(MalformedBodyError, match="not a serialized"):
        pool.decode(decode_protobuf_body, b"\x0f\x00garbage", False, MAX, 200_000, None, True)
    with pytest.raises(LimitExceededError) as too_many:
        pool.decode(decode_protobuf_body, encode_body(configs(20), DataVersion())[0], False, MAX, 10, None, True)
    assert too_many.value.metadata == {"limit": "registerBodyMaxTopics"}
    bad = {"bad topic": TopicConfig("bad topic", 4, 4)}
    with pytest.raises(InvalidFieldError) as invalid:
        pool.decode(decode_protobuf_body, encode_body(bad, DataVersion())[0], False, MAX, 10, None, True)
    assert invalid.value.field == "body.topic_config_table['bad topic'].topic_name"


def test_a_dead_child_is_replaced_and_its_body_decoded_in_the_caller(pool: BodyDecodePool) -> None:
    body, _ = encode_body(configs(100), DataVersion(0, 1, 1))
    pool.decode(decode_protobuf_body, body, False, MAX, 200_000, None, True)
    first = pool.child_pid()
    assert first is not None
    os.kill(first, signal.SIGKILL)
    time.sleep(0.2)
    decoded = pool.decode(decode_protobuf_body, body, False, MAX, 200_000, None, True)
    assert decoded.topic_configs is not None
    assert len(decoded.topic_configs) == 100
    assert pool.decoded_in_child == 1  # the second body was decoded here
    pool.decode(decode_protobuf_body, body, False, MAX, 200_000, None, True)
    assert pool.decoded_in_child == 2
    assert pool.child_pid() not in (None, first)


def test_no_child_possible_decodes_in_the_caller(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise OSError(38, "Function not implemented")  # what SemLock raises without /dev/shm

    monkeypatch.setattr(decode_pool, "ProcessPoolExecutor", refuse)
    pool = BodyDecodePool(min_bytes=0)
    body, _ = encode_body(configs(10), DataVersion())
    assert len(pool.decode(decode_protobuf_body, body, False, MAX, 200_000, None, True).topic_configs or ()) == 10
    assert pool.decoded_in_child == 0
    assert not pool.wants(10**9, False)  # given up: no retry on every body


def test_closed_pool_decodes_in_the_caller() -> None:
    closed = BodyDecodePool(min_bytes=0)
    closed.close()
    assert not closed.wants(10**9, False)
    body, _ = encode_body(configs(10), DataVersion())
    assert len(closed.decode(decode_protobuf_body, body, False, MAX, 200_000, None, True).topic_configs or ()) == 10
    assert closed.decoded_in_child == 0


def children_of(pid: int) -> list[int]:
    """Worker processes of multiprocessing (``spawn_main``) started by ``pid``, by any of its threads
    (the resource tracker that multiprocessing starts beside them is not one)."""
    children = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        children += [int(child) for child in (task / "children").read_text(encoding="ascii").split()]
    return sorted(child for child in children if b"spawn_main" in Path(f"/proc/{child}/cmdline").read_bytes())


def test_both_doors_decode_large_bodies_in_the_child(tmp_path: Path) -> None:
    """A real server: a large gRPC body and a large compressed remoting body are decoded by its
    child process, and their topics resolve as usual; small bodies start no child."""
    big = configs(16_000, prefix="grpc-")
    request = register_request(broker_name="broker-g", broker_addr="127.0.0.1:10911", topics=big)
    assert len(request.body) >= LARGE_BODY_BYTES
    java = configs(4_000, prefix="java-")
    java_body = bodies.encode_register_broker_body(java, DataVersion(0, 1, 1), compressed=True)
    assert len(java_body) >= LARGE_COMPRESSED_BODY_BYTES
    with running_namesrv(tmp_path / "ns") as server, server.channel() as channel:
        stubs = Stubs(channel)
        stubs.ns.RegisterBroker(register_request(broker_name="small", broker_addr="127.0.0.1:10811", topics=configs(5)))
        assert children_of(server.process.pid) == []
        stubs.ns.RegisterBroker(request, timeout=60)
        (child,) = children_of(server.process.pid)
        with RemotingTestClient(server.remoting_address, timeout=60) as client:  # its end unregisters broker-j
            answer = remoting_register(
                client, "c", "broker-j", 0, "127.0.0.1:10921", java, body=java_body, compressed=True
            )
            assert answer.code == ResponseCode.SUCCESS, answer.remark
            assert children_of(server.process.pid) == [child]
            for topic, broker in (("grpc-15999", "broker-g"), ("java-3999", "broker-j"), ("grpc-4", "broker-g")):
                route = stubs.ns.PickupTopicRoute(ns_pb2.PickupTopicRouteRequest(topic=topic)).route
                perm = 6 if int(topic.rsplit("-")[1]) % 3 else 4
                assert [(q.broker_name, q.read_queue_nums, q.perm) for q in route.queue_datas] == [(broker, 8, perm)]
            topics = stubs.ns.GetAllTopicList(ns_pb2.GetAllTopicListRequest()).topics
            assert len(topics) == 16_000 + 4_000 + 5
            # Re-registrations with a few topics changed (decoded as deltas in the child).
            big["grpc-7"] = TopicConfig("grpc-7", 3, 3, 2, 0)
            again = register_request(
                broker_name="broker-g", broker_addr="127.0.0.1:10911", topics=big, version=DataVersion(0, 2, 2)
            )
            stubs.ns.RegisterBroker(again, timeout=60)
            java["java-9"] = TopicConfig("java-9", 5, 5, 4, 0)
            java_body = bodies.encode_register_broker_body(java, DataVersion(0, 2, 2), compressed=True)
            answer = remoting_register(
                client, "c", "broker-j", 0, "127.0.0.1:10921", java, body=java_body, compressed=True,
                version=DataVersion(0, 2, 2),
            )  # fmt: skip
            assert answer.code == ResponseCode.SUCCESS, answer.remark
            for topic, expected in (("grpc-7", (3, 2)), ("java-9", (5, 4)), ("grpc-8", (8, 6)), ("java-8", (8, 6))):
                route = stubs.ns.PickupTopicRoute(ns_pb2.PickupTopicRouteRequest(topic=topic)).route
                assert [(q.read_queue_nums, q.perm) for q in route.queue_datas] == [expected]


def test_child_process_can_be_switched_off(tmp_path: Path) -> None:
    conf = tmp_path / "namesrv.conf"
    conf.write_text("registerBodyDecodeInChildProcess=false\n")
    request = register_request(broker_name="broker-g", topics=configs(16_000, prefix="off-"))
    with running_namesrv(tmp_path / "ns", "-c", str(conf)) as server, server.channel() as channel:
        stubs = Stubs(channel)
        stubs.ns.RegisterBroker(request, timeout=60)
        assert children_of(server.process.pid) == []
        route = stubs.ns.PickupTopicRoute(ns_pb2.PickupTopicRouteRequest(topic="off-15999")).route
        assert [q.broker_name for q in route.queue_datas] == ["broker-g"]
