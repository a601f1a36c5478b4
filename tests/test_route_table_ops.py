"""Route table features for operators: the liveness view (protocol, sessions), two runs of one
broker fighting over its registration, and the route content digest (docs/rules.md S15, S17)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from namesrv_grpc.core.digest import DIGEST_PIECE_TOPICS, MAX_PENDING_PIECES, RouteDigest, full_digest
from namesrv_grpc.core.model import PERM_READ, DataVersion, TopicConfig
from namesrv_grpc.core.route_table import DISPLACED_MEMORY_MILLIS, RouteInfoManager
from tests.support import FakeClock, topic
from tests.test_route_table import V1, V2, A, B, register


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def rt(clock: FakeClock) -> RouteInfoManager:
    return RouteInfoManager(clock)


def test_live_table_lists_every_address_with_protocol_and_session(clock: FakeClock) -> None:
    rt = RouteInfoManager(clock)
    register(rt, addr=A, instance_id="run-a", timeout=30_000)
    rt.register_broker(
        cluster_name="c1",
        broker_name="broker-a",
        broker_id=1,
        broker_addr=B,
        data_version=V2,
        protocol="remoting",
    )
    bound = rt.bind_session(cluster_name="c1", broker_name="broker-a", broker_id=0, broker_addr=A, instance_id="run-a")
    assert bound is not None
    clock.advance(1_500)
    now, entries = rt.live_table()
    assert now == clock.now
    assert [(addr, live.broker_id, live.protocol) for addr, live in entries] == [(A, 0, "grpc"), (B, 1, "remoting")]
    master, slave = (live for _, live in entries)
    assert master.session_id == bound[0]
    assert slave.session_id == 0
    assert master.heartbeat_timeout_millis == 30_000
    assert now - master.last_update_timestamp == 1_500
    assert slave.data_version == V2


def test_s17_unregister_by_another_run_leaves_the_live_registration(rt: RouteInfoManager) -> None:
    """Two agents for one broker at one address; the one that stops must not remove the other's
    registration (the route vanished until the survivor's next heartbeat)."""
    register(rt, topics=[topic("T1")], instance_id="run-1")
    register(rt, topics=[topic("T1")], instance_id="run-2", version=V2)
    assert (
        rt.unregister_broker(cluster_name="c1", broker_name="broker-a", broker_id=0, broker_addr=A, instance_id="run-1")
        is None
    )
    assert rt.pickup_topic_route_data("T1") is not None
    removed = rt.unregister_broker(
        cluster_name="c1", broker_name="broker-a", broker_id=0, broker_addr=A, instance_id="run-2"
    )
    assert removed is not None
    assert rt.pickup_topic_route_data("T1") is None


def test_unregister_without_instance_id_removes_any_run(rt: RouteInfoManager) -> None:
    """RocketMQ brokers (remoting) send no instance id: matched on the four fields as before."""
    register(rt, instance_id="run-1")
    assert rt.unregister_broker(cluster_name="c1", broker_name="broker-a", broker_id=0, broker_addr=A) is not None


def test_two_runs_taking_a_broker_from_each_other_are_a_conflict(rt: RouteInfoManager, clock: FakeClock) -> None:
    assert register(rt, instance_id="run-1").conflicting_instance_id == ""
    # run-2 starts: it replaces run-1 (could be a restart; not yet a conflict)
    assert register(rt, instance_id="run-2").conflicting_instance_id == ""
    # run-1 is still alive and registers again: now they fight
    clock.advance(10_000)
    assert register(rt, instance_id="run-1").conflicting_instance_id == "run-2"
    assert register(rt, instance_id="run-2").conflicting_instance_id == "run-1"
    # the same run again is no conflict
    assert register(rt, instance_id="run-2").conflicting_instance_id == ""


def test_a_restart_is_no_conflict(rt: RouteInfoManager, clock: FakeClock) -> None:
    for run in ("run-1", "run-2", "run-3"):
        assert register(rt, instance_id=run).conflicting_instance_id == ""
        clock.advance(1_000)
    # a run that comes back after the memory expired is not counted
    clock.advance(DISPLACED_MEMORY_MILLIS + 1)
    assert register(rt, instance_id="run-1").conflicting_instance_id == ""


def test_conflict_across_addresses_and_without_instance_ids(rt: RouteInfoManager) -> None:
    """Two runs of broker-a id 0 on two hosts fight too; brokers without instance ids never do."""
    register(rt, addr=A, instance_id="run-1")
    register(rt, addr=B, instance_id="run-2")
    assert register(rt, addr=A, instance_id="run-1").conflicting_instance_id == "run-2"
    register(rt, name="broker-b", addr="10.0.0.9:10911")
    register(rt, name="broker-b", addr="10.0.0.9:10911")
    assert register(rt, name="broker-b", addr="10.0.0.9:10911").conflicting_instance_id == ""


def test_route_digest_same_content_same_digest_whatever_the_order(clock: FakeClock) -> None:
    one, two = RouteInfoManager(clock), RouteInfoManager(clock)
    register(one, name="broker-a", addr=A, topics=[topic("T1"), topic("T2")])
    register(one, name="broker-b", addr=B, topics=[topic("T2")])
    register(two, name="broker-b", addr=B, topics=[topic("T2")])
    register(two, name="broker-a", addr=A, topics=[topic("T2"), topic("T1")], version=DataVersion(0, 5, 5))
    assert one.route_digest() == two.route_digest() != 0
    assert one.route_digest() == full_digest(one.topic_queue_table, one.broker_addr_table.values())
    assert one.route_digest() < 2**52


def test_route_digest_sees_a_permission_split(clock: FakeClock) -> None:
    """Same counts, different content: the case the count-based alerts missed (issue: wipe-write-perm
    sent to one NameServer only)."""
    one, two = RouteInfoManager(clock), RouteInfoManager(clock)
    for rt in (one, two):
        register(rt, topics=[topic("T1"), topic("T2")], version=V1)
    two.wipe_write_perm_of_broker("broker-a")
    assert one.stats() == two.stats()
    assert one.route_digest() != two.route_digest()
    one.wipe_write_perm_of_broker("broker-a")
    assert one.route_digest() == two.route_digest()
    assert one.topic_queue_table["T1"]["broker-a"].perm == PERM_READ


def test_route_digest_of_empty_table_is_zero_again(rt: RouteInfoManager) -> None:
    register(rt, topics=[topic("T1")])
    assert rt.route_digest() != 0
    rt.unregister_broker(cluster_name="c1", broker_name="broker-a", broker_id=0, broker_addr=A)
    assert rt.route_digest() == 0


def test_route_digest_worked_out_piece_by_piece_equals_the_full_digest(clock: FakeClock) -> None:
    """A registration's share of the digest is left as pieces of DIGEST_PIECE_TOPICS QueueData; the
    route-table process works them out one per event-loop turn (settle_digest_piece), and the
    result is the digest worked out from scratch."""
    rt = RouteInfoManager(clock)
    topics = {f"T{i}": TopicConfig(f"T{i}", 4, 4, 6 if i % 3 else 2) for i in range(2 * DIGEST_PIECE_TOPICS + 7)}
    rt.register_broker(cluster_name="c", broker_name="b", broker_id=0, broker_addr="10.0.0.1:10911",
                       data_version=DataVersion(1, 1), topic_configs=topics)  # fmt: skip
    changed = {name: TopicConfig(name, 8, 8, 6) for name in list(topics)[: DIGEST_PIECE_TOPICS + 1]}
    rt.register_broker(cluster_name="c", broker_name="b", broker_id=0, broker_addr="10.0.0.1:10911",
                       data_version=DataVersion(1, 2), topic_configs={**topics, **changed})  # fmt: skip
    pieces = 1
    while rt.settle_digest_piece():
        pieces += 1
    assert pieces == 3 + 2 + 2  # added, then the changed ones added and their old QueueData removed
    assert not rt.settle_digest_piece()
    assert rt.route_digest() == full_digest(rt.topic_queue_table, rt.broker_addr_table.values())


def test_route_digest_pieces_past_the_bound_are_paid_by_the_write_that_adds_them() -> None:
    """A burst of writes with no pause never works out the whole backlog in one write: past
    MAX_PENDING_PIECES each write works out as many pieces as it adds, and the total stays exact."""
    digest = RouteDigest()
    calls: list[int] = []

    def piece(value: int) -> Callable[[], int]:
        def work() -> int:
            calls.append(value)
            return value

        return work

    digest.add_later(piece(1) for _ in range(MAX_PENDING_PIECES))
    assert calls == []
    digest.add_later([piece(2), piece(2), piece(2)])
    assert len(calls) == 3  # the three oldest, not the whole backlog
    assert digest.value == MAX_PENDING_PIECES + 6
