"""Unit tests of the route table (``RouteInfoManager``): rules S03-S18, S20, S22-S25 and the module's
documented extensions. Pure: no gRPC, no sockets, time from a FakeClock."""

from __future__ import annotations

import copy
import time
from collections.abc import Iterable, Sequence
from typing import Any

import pytest

from namesrv_grpc.core.errors import BrokerNameNotRegisteredError, BrokerNotRegisteredError, StaleBrokerStateError
from namesrv_grpc.core.model import (
    DEFAULT_HEARTBEAT_TIMEOUT_MILLIS,
    BrokerData,
    DataVersion,
    QueueData,
    RegisterBrokerResult,
    RemovedBroker,
    TopicConfig,
)
from namesrv_grpc.core.route_table import RouteInfoManager
from tests.support import FakeClock, topic

A = "10.0.0.1:10911"
B = "10.0.0.2:10911"
C = "10.0.0.3:10911"
D = "10.0.0.4:10911"
HA_A = "10.0.0.1:10912"
HA_B = "10.0.0.2:10912"
V1 = DataVersion(0, 1_000, 1)
V2 = DataVersion(0, 2_000, 2)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def rt(clock: FakeClock) -> RouteInfoManager:
    return RouteInfoManager(clock)


def register(
    rt: RouteInfoManager,
    *,
    cluster: str = "c1",
    name: str = "broker-a",
    broker_id: int = 0,
    addr: str = A,
    topics: Iterable[TopicConfig] = (),
    version: DataVersion = V1,
    ha: str = "",
    filters: Sequence[str] = (),
    timeout: int = 0,
    zone_name: str = "",
    enable_acting_master: bool | None = None,
    instance_id: str = "",
) -> RegisterBrokerResult:
    return rt.register_broker(
        cluster_name=cluster,
        broker_name=name,
        broker_id=broker_id,
        broker_addr=addr,
        ha_server_addr=ha,
        data_version=version,
        topic_configs={t.topic_name: t for t in topics},
        filter_server_list=filters,
        heartbeat_timeout_millis=timeout,
        zone_name=zone_name,
        enable_acting_master=enable_acting_master,
        instance_id=instance_id,
    )


def tables(rt: RouteInfoManager) -> Any:
    """A deep copy of the five tables and the index, for "nothing changed" checks."""
    return copy.deepcopy(
        (
            rt.topic_queue_table,
            rt.broker_addr_table,
            rt.cluster_addr_table,
            rt.broker_live_table,
            rt.filter_server_table,
            rt.topics_by_broker_name,
        )
    )


def topic_index(rt: RouteInfoManager) -> dict[str, set[str]]:
    """``topics_by_broker_name`` with its topic dicts as sets."""
    return {name: set(topics) for name, topics in rt.topics_by_broker_name.items()}


def qd(name: str, read: int = 4, write: int = 4, perm: int = 6, sys_flag: int = 0) -> QueueData:
    return QueueData(name, read, write, perm, sys_flag)


# ---------------------------------------------------------------------------- S03, S04


def test_s03_broker_name_joins_cluster_set_created_when_missing(rt: RouteInfoManager) -> None:
    assert rt.cluster_addr_table == {}
    register(rt, cluster="c1", name="broker-a", addr=A)
    assert rt.cluster_addr_table == {"c1": {"broker-a"}}
    register(rt, cluster="c1", name="broker-b", addr=B)
    assert rt.cluster_addr_table == {"c1": {"broker-a", "broker-b"}}
    register(rt, cluster="c2", name="broker-c", addr=C)
    assert rt.cluster_addr_table == {"c1": {"broker-a", "broker-b"}, "c2": {"broker-c"}}


def test_s03_registering_twice_keeps_one_name_in_set(rt: RouteInfoManager) -> None:
    register(rt)
    register(rt, version=V2)
    assert rt.cluster_addr_table == {"c1": {"broker-a"}}


def test_s04_broker_data_created_when_missing(rt: RouteInfoManager) -> None:
    register(rt, cluster="c1", name="broker-a", addr=A, zone_name="z1", enable_acting_master=True)
    assert rt.broker_addr_table == {
        "broker-a": BrokerData("c1", "broker-a", {0: A}, zone_name="z1", enable_acting_master=True)
    }


def test_s04_first_registration_applies_topics(rt: RouteInfoManager) -> None:
    # Even with the all-zero DataVersion of an empty body (S02), a first registration carries its topics.
    register(rt, topics=[topic("T1")], version=DataVersion())
    assert rt.topic_queue_table == {"T1": {"broker-a": qd("broker-a")}}


# ---------------------------------------------------------------------------- S05


def test_s05_same_addr_new_id_replaces_old_entry(rt: RouteInfoManager) -> None:
    register(rt, broker_id=1, addr=A)
    register(rt, broker_id=0, addr=A)
    assert rt.broker_addr_table["broker-a"].broker_addrs == {0: A}
    live = rt.live_info(A)
    assert live is not None
    assert live.broker_id == 0


def test_s05_other_ids_of_broker_name_kept(rt: RouteInfoManager) -> None:
    register(rt, broker_id=0, addr=A)
    register(rt, broker_id=1, addr=B)
    register(rt, broker_id=2, addr=C)
    assert rt.broker_addr_table["broker-a"].broker_addrs == {0: A, 1: B, 2: C}
    # B re-registers as id 3: its id 1 entry goes, A and C keep theirs.
    register(rt, broker_id=3, addr=B)
    assert rt.broker_addr_table["broker-a"].broker_addrs == {0: A, 2: C, 3: B}


def test_s05_new_id_slot_is_first_registration_and_applies_topics(rt: RouteInfoManager) -> None:
    """A slave promoted to master re-registers from the same address with id 0 and the same
    DataVersion: id 0 had no address, so it is a first registration and the topics are applied."""
    register(rt, broker_id=1, addr=A, topics=[topic("T1")], version=V1)
    assert rt.topic_queue_table == {}
    register(rt, broker_id=0, addr=A, topics=[topic("T1")], version=V1)
    assert rt.topic_queue_table == {"T1": {"broker-a": qd("broker-a")}}
    assert topic_index(rt) == {"broker-a": {"T1"}}


# ---------------------------------------------------------------------------- S06, S07


def test_s06_slave_topics_ignored(rt: RouteInfoManager) -> None:
    register(rt, broker_id=0, addr=A, topics=[topic("T1")], version=V1)
    before = tables(rt)[0]
    register(rt, broker_id=1, addr=B, topics=[topic("T1", read=8), topic("T2")], version=V2)
    assert rt.topic_queue_table == before
    assert rt.topic_queue_table == {"T1": {"broker-a": qd("broker-a")}}


def test_s06_slave_first_registration_carries_no_topics(rt: RouteInfoManager) -> None:
    register(rt, broker_id=1, addr=B, topics=[topic("T1")], version=V1)
    assert rt.topic_queue_table == {}
    assert topic_index(rt) == {}
    assert rt.broker_addr_table["broker-a"].broker_addrs == {1: B}


def test_s06_unchanged_data_version_skips_topic_work_even_if_body_differs(rt: RouteInfoManager) -> None:
    register(rt, topics=[topic("T1", read=4)], version=V1)
    register(rt, topics=[topic("T1", read=8), topic("T2")], version=V1)
    assert rt.topic_queue_table == {"T1": {"broker-a": qd("broker-a", read=4)}}
    assert topic_index(rt) == {"broker-a": {"T1"}}


def test_s06_changed_data_version_applies_topics(rt: RouteInfoManager) -> None:
    register(rt, topics=[topic("T1", read=4)], version=V1)
    register(rt, topics=[topic("T1", read=8), topic("T2")], version=V2)
    assert rt.topic_queue_table == {
        "T1": {"broker-a": qd("broker-a", read=8)},
        "T2": {"broker-a": qd("broker-a")},
    }
    assert topic_index(rt) == {"broker-a": {"T1", "T2"}}


def test_s06_version_differs_in_one_field_only_counts_as_changed(rt: RouteInfoManager) -> None:
    register(rt, topics=[topic("T1")], version=DataVersion(1, 1_000, 1))
    register(rt, topics=[topic("T2")], version=DataVersion(1, 1_000, 2))
    register(rt, topics=[topic("T3")], version=DataVersion(1, 1_001, 2))
    register(rt, topics=[topic("T4")], version=DataVersion(2, 1_001, 2))
    assert sorted(rt.topic_queue_table) == ["T1", "T2", "T3", "T4"]


def test_s06_first_registration_applies_even_with_stored_version_equal(rt: RouteInfoManager) -> None:
    """After an unregister the next registration is a first registration again."""
    register(rt, topics=[topic("T1")], version=V1)
    rt.unregister_broker(cluster_name="c1", broker_name="broker-a", broker_id=0, broker_addr=A)
    assert rt.topic_queue_table == {}
    register(rt, topics=[topic("T1")], version=V1)
    assert rt.topic_queue_table == {"T1": {"broker-a": qd("broker-a")}}


def test_s07_unknown_topic_created_with_one_entry(rt: RouteInfoManager) -> None:
    register(rt, topics=[topic("T1", read=3, write=5, perm=4, sys_flag=2)])
    assert rt.topic_queue_table == {"T1": {"broker-a": QueueData("broker-a", 3, 5, 4, 2)}}


def test_s07_equal_entry_unchanged_differing_replaced(rt: RouteInfoManager) -> None:
    register(rt, name="broker-a", addr=A, topics=[topic("T1"), topic("T2")], version=V1)
    register(rt, name="broker-b", addr=B, topics=[topic("T1", read=2)], version=V1)
    t1_a = rt.topic_queue_table["T1"]["broker-a"]
    t1_b = rt.topic_queue_table["T1"]["broker-b"]
    changes: list[frozenset[str] | None] = []
    rt.route_listeners.append(lambda revision, topics: changes.append(topics))

    register(rt, name="broker-a", addr=A, topics=[topic("T1"), topic("T2", perm=4)], version=V2)

    assert changes == [frozenset({"T2"})]  # only the differing entry was written (T1's route stays cached)
    assert rt.topic_queue_table["T1"]["broker-a"] == t1_a  # equal: left as it was
    assert rt.topic_queue_table["T2"]["broker-a"] == qd("broker-a", perm=4)  # differing: replaced
    assert rt.topic_queue_table["T1"]["broker-b"] == t1_b == qd("broker-b", read=2)  # other broker name untouched


def test_s07_topic_not_in_body_kept_by_default(rt: RouteInfoManager) -> None:
    register(rt, topics=[topic("T1"), topic("T2")], version=V1)
    register(rt, topics=[topic("T1")], version=V2)
    assert sorted(rt.topic_queue_table) == ["T1", "T2"]


# ---------------------------------------------------------------------------- S08, S09


def test_s08_live_entry_written(rt: RouteInfoManager, clock: FakeClock) -> None:
    register(rt, addr=A, ha=HA_A, version=V1, timeout=5_000)
    live = rt.live_info(A)
    assert live is not None
    assert (live.last_update_timestamp, live.heartbeat_timeout_millis) == (clock.now, 5_000)
    assert (live.data_version, live.ha_server_addr) == (V1, HA_A)
    assert (live.cluster, live.broker_name, live.broker_id) == ("c1", "broker-a", 0)

    clock.advance(3_000)
    register(rt, addr=A, ha=HA_B, version=V2, timeout=7_000)
    live = rt.live_info(A)
    assert live is not None
    assert (live.last_update_timestamp, live.heartbeat_timeout_millis) == (clock.now, 7_000)
    assert (live.data_version, live.ha_server_addr) == (V2, HA_B)


def test_s08_default_timeout_120000_when_zero(rt: RouteInfoManager) -> None:
    register(rt, timeout=0)
    live = rt.live_info(A)
    assert live is not None
    assert live.heartbeat_timeout_millis == 120_000 == DEFAULT_HEARTBEAT_TIMEOUT_MILLIS


def test_s08_unchanged_version_still_refreshes_live_entry(rt: RouteInfoManager, clock: FakeClock) -> None:
    register(rt, version=V1)
    clock.advance(50_000)
    register(rt, version=V1)
    live = rt.live_info(A)
    assert live is not None
    assert live.last_update_timestamp == clock.now


def test_s09_filter_servers_replace_then_empty_removes(rt: RouteInfoManager) -> None:
    register(rt, filters=["10.9.0.1:30000", "10.9.0.2:30000"])
    assert rt.filter_server_table == {A: ["10.9.0.1:30000", "10.9.0.2:30000"]}
    register(rt, filters=["10.9.0.3:30000"])
    assert rt.filter_server_table == {A: ["10.9.0.3:30000"]}
    register(rt, filters=[])
    assert rt.filter_server_table == {}


def test_s09_filter_servers_per_address(rt: RouteInfoManager) -> None:
    register(rt, broker_id=0, addr=A, filters=["10.9.0.1:30000"])
    register(rt, broker_id=1, addr=B, filters=["10.9.0.2:30000"])
    register(rt, broker_id=1, addr=B, filters=[])
    assert rt.filter_server_table == {A: ["10.9.0.1:30000"]}


# ---------------------------------------------------------------------------- S10


def test_s10_slave_gets_live_master_addr_and_master_ha_addr(rt: RouteInfoManager) -> None:
    assert register(rt, broker_id=0, addr=A, ha=HA_A) == RegisterBrokerResult()
    result = register(rt, broker_id=1, addr=B, ha=HA_B)
    assert result == RegisterBrokerResult(master_addr=A, ha_server_addr=HA_A)


def test_s10_slave_without_master_gets_empty(rt: RouteInfoManager) -> None:
    assert register(rt, broker_id=1, addr=B, ha=HA_B) == RegisterBrokerResult("", "")
    # A master of another broker name does not count.
    register(rt, name="broker-x", broker_id=0, addr=A, ha=HA_A)
    assert register(rt, broker_id=1, addr=B, ha=HA_B) == RegisterBrokerResult("", "")


def test_s10_slave_gets_empty_after_master_expired(rt: RouteInfoManager, clock: FakeClock) -> None:
    register(rt, broker_id=0, addr=A, ha=HA_A, timeout=1_000)
    register(rt, broker_id=1, addr=B, ha=HA_B, timeout=60_000)
    clock.advance(1_001)
    assert [r.broker_addr for r in rt.scan_not_active_broker()] == [A]
    assert register(rt, broker_id=1, addr=B, ha=HA_B) == RegisterBrokerResult()


# ---------------------------------------------------------------------------- S12


def test_s12_stale_state_version_from_new_addr_rejected_and_nothing_changes(rt: RouteInfoManager) -> None:
    register(rt, addr=A, topics=[topic("T1")], version=DataVersion(5, 1_000, 1), filters=["10.9.0.1:1"])
    before, version_before = tables(rt), rt.version
    with pytest.raises(StaleBrokerStateError):
        register(
            rt,
            addr=B,
            topics=[topic("T2")],
            version=DataVersion(4, 9_000, 9),
            filters=["10.9.0.2:1"],
        )
    assert tables(rt) == before
    assert rt.version == version_before


def test_s12_stale_check_also_covers_address_held_by_another_broker_name(rt: RouteInfoManager) -> None:
    register(rt, name="broker-a", addr=A, version=DataVersion(5, 1, 1))
    register(rt, name="broker-b", addr=B, version=DataVersion(0, 1, 1))
    before = tables(rt)
    with pytest.raises(StaleBrokerStateError):
        register(rt, name="broker-a", addr=B, version=DataVersion(4, 1, 1))
    assert tables(rt) == before


def test_s12_equal_or_higher_state_version_from_new_addr_accepted(rt: RouteInfoManager) -> None:
    register(rt, addr=A, version=DataVersion(5, 1_000, 1))
    register(rt, addr=B, version=DataVersion(5, 2_000, 1))
    assert rt.broker_addr_table["broker-a"].broker_addrs == {0: B}
    register(rt, addr=C, version=DataVersion(6, 3_000, 1))
    assert rt.broker_addr_table["broker-a"].broker_addrs == {0: C}


def test_s12_lower_state_version_from_same_addr_accepted(rt: RouteInfoManager) -> None:
    register(rt, addr=A, version=DataVersion(5, 1_000, 1))
    register(rt, addr=A, version=DataVersion(1, 2_000, 1))
    live = rt.live_info(A)
    assert live is not None
    assert live.data_version == DataVersion(1, 2_000, 1)


# ---------------------------------------------------------------------------- S13, S14


def test_s13_not_removed_before_timeout_removed_after(rt: RouteInfoManager, clock: FakeClock) -> None:
    register(rt, addr=A, timeout=10_000)
    clock.advance(9_999)
    assert rt.scan_not_active_broker() == []
    clock.advance(1)  # exactly last + timeout: the rule is last + timeout < now, so not yet
    assert rt.scan_not_active_broker() == []
    assert rt.live_info(A) is not None
    clock.advance(1)
    assert rt.scan_not_active_broker() == [RemovedBroker(A, "c1", "broker-a", 0, "expired")]
    assert rt.live_info(A) is None
    assert rt.broker_addr_table == {}


def test_s13_default_timeout_boundary(rt: RouteInfoManager, clock: FakeClock) -> None:
    register(rt, addr=A, timeout=0)
    clock.advance(120_000)
    assert rt.scan_not_active_broker() == []
    clock.advance(1)
    assert [r.broker_addr for r in rt.scan_not_active_broker()] == [A]


def test_s13_each_broker_expires_on_its_own_timeout(rt: RouteInfoManager, clock: FakeClock) -> None:
    register(rt, name="broker-a", addr=A, timeout=1_000)
    register(rt, name="broker-b", addr=B, timeout=5_000)
    clock.advance(2_000)
    assert [r.broker_addr for r in rt.scan_not_active_broker()] == [A]
    assert set(rt.broker_live_table) == {B}
    clock.advance(3_001)
    assert [r.broker_addr for r in rt.scan_not_active_broker()] == [B]
    assert rt.broker_live_table == {}


@pytest.mark.parametrize("step", [300_000, -300_000])
def test_s13_silence_is_measured_on_the_liveness_clock_not_the_wall_clock(step: int) -> None:
    """Issue 39: the system clock stepped +300 s expired a broker registered 2 s earlier. Silence is
    measured on the monotonic liveness clock; the wall clock only stamps what is shown."""
    wall, liveness = FakeClock(), FakeClock(now=5_000)
    rt = RouteInfoManager(wall, liveness_clock=liveness)
    register(rt, addr=A, timeout=10_000)
    wall.advance(step)  # a clock step: NTP, an operator, a VM resumed
    liveness.advance(2_000)
    assert rt.scan_not_active_broker() == []
    live = rt.live_info(A)
    assert live is not None
    assert live.last_update_timestamp == wall.now - step  # shown as stamped
    liveness.advance(8_001)
    assert [r.broker_addr for r in rt.scan_not_active_broker()] == [A]


def test_s13_the_default_liveness_clock_is_monotonic() -> None:
    rt = RouteInfoManager()
    register(rt, addr=A, timeout=10_000)
    live = rt.live_info(A)
    assert live is not None
    assert abs(live.last_seen_millis - time.monotonic_ns() // 1_000_000) < 60_000
    assert abs(live.last_update_timestamp - time.time_ns() // 1_000_000) < 60_000


def test_s14_heartbeat_refreshes_last_update(rt: RouteInfoManager, clock: FakeClock) -> None:
    register(rt, addr=A, timeout=10_000, version=V1)
    clock.advance(8_000)
    rt.heartbeat(cluster_name="c1", broker_name="broker-a", broker_id=0, broker_addr=A)
    live = rt.live_info(A)
    assert live is not None
    assert live.last_update_timestamp == clock.now
    assert live.data_version == V1
    clock.advance(10_000)  # 18 s after registration, 10 s after the heartbeat
    assert rt.scan_not_active_broker() == []
    clock.advance(1)
    assert [r.broker_addr for r in rt.scan_not_active_broker()] == [A]


def test_s14_heartbeat_not_registered_raises(rt: RouteInfoManager) -> None:
    with pytest.raises(BrokerNotRegisteredError):
        rt.heartbeat(cluster_name="c1", broker_name="broker-a", broker_id=0, broker_addr=A)
    assert rt.broker_live_table == {}


@pytest.mark.parametrize(("cluster", "addr"), [("c2", A), ("c1", B)])
def test_s14_heartbeat_needs_same_cluster_and_address(
    rt: RouteInfoManager, clock: FakeClock, cluster: str, addr: str
) -> None:
    register(rt)
    registered_at = clock.now
    clock.advance(1_000)
    with pytest.raises(BrokerNotRegisteredError):
        rt.heartbeat(cluster_name=cluster, broker_name="broker-a", broker_id=0, broker_addr=addr)
    live = rt.live_info(A)
    assert live is not None
    assert live.last_update_timestamp == registered_at


def test_s14_heartbeat_found_by_cluster_and_address_only(rt: RouteInfoManager, clock: FakeClock) -> None:
    """As RocketMQ 5.x keys brokerLiveTable by (cluster, address), broker name and id are only reported."""
    register(rt)
    clock.advance(1_000)
    rt.heartbeat(cluster_name="c1", broker_name="other", broker_id=3, broker_addr=A)
    live = rt.live_info(A)
    assert live is not None
    assert (live.last_update_timestamp, live.broker_name, live.broker_id) == (clock.now, "broker-a", 0)


def test_s14_unchanged_query_data_version_refreshes(rt: RouteInfoManager, clock: FakeClock) -> None:
    register(rt, version=V1, timeout=10_000)
    clock.advance(9_000)
    rt.query_data_version(cluster_name="c1", broker_name="broker-a", broker_id=0, broker_addr=A, data_version=V1)
    clock.advance(10_000)
    assert rt.scan_not_active_broker() == []


# ---------------------------------------------------------------------------- S15, S16


def test_s15_session_end_removes_bound_broker(rt: RouteInfoManager, clock: FakeClock) -> None:
    register(rt, topics=[topic("T1")], timeout=30_000, instance_id="run-1")
    clock.advance(1_000)
    bound = rt.bind_session(cluster_name="c1", broker_name="broker-a", broker_id=0, broker_addr=A, instance_id="run-1")
    assert bound is not None
    session_id, timeout = bound
    assert session_id != 0
    assert timeout == 30_000
    live = rt.live_info(A)
    assert live is not None
    assert (live.session_id, live.last_update_timestamp) == (session_id, clock.now)  # binding refreshes
    removed = rt.remove_if_session(A, session_id, "session ended")
    assert removed == RemovedBroker(A, "c1", "broker-a", 0, "session ended")
    assert tables(rt) == ({}, {}, {}, {}, {}, {})


@pytest.mark.parametrize(
    ("cluster", "name", "broker_id", "addr", "instance"),
    [
        pytest.param("c2", "broker-a", 0, A, "run-1", id="other-cluster"),
        pytest.param("c1", "broker-b", 0, A, "run-1", id="other-broker-name"),
        pytest.param("c1", "broker-a", 1, A, "run-1", id="other-broker-id"),
        pytest.param("c1", "broker-a", 0, B, "run-1", id="other-addr"),
        pytest.param("c1", "broker-a", 0, A, "run-2", id="other-instance"),
    ],
)
def test_s15_bind_session_needs_exact_registration(
    rt: RouteInfoManager, clock: FakeClock, cluster: str, name: str, broker_id: int, addr: str, instance: str
) -> None:
    register(rt, instance_id="run-1")
    before = tables(rt)
    clock.advance(1_000)
    assert (
        rt.bind_session(
            cluster_name=cluster, broker_name=name, broker_id=broker_id, broker_addr=addr, instance_id=instance
        )
        is None
    )
    assert tables(rt) == before


def test_s14_session_heartbeat_refreshes_bound_broker(rt: RouteInfoManager, clock: FakeClock) -> None:
    register(rt, instance_id="run-1", timeout=10_000)
    bound = rt.bind_session(cluster_name="c1", broker_name="broker-a", broker_id=0, broker_addr=A, instance_id="run-1")
    assert bound is not None
    clock.advance(9_000)
    assert rt.session_heartbeat(A, bound[0]) is True
    clock.advance(10_000)
    assert rt.scan_not_active_broker() == []
    assert rt.session_heartbeat(A, bound[0] + 1) is False
    assert rt.session_heartbeat(B, bound[0]) is False


def test_s10_master_of(rt: RouteInfoManager) -> None:
    assert rt.master_of("broker-a") == ("", "")
    register(rt, broker_id=1, addr=B, ha=HA_B)
    assert rt.master_of("broker-a") == ("", "")
    register(rt, broker_id=0, addr=A, ha=HA_A)
    assert rt.master_of("broker-a") == (A, HA_A)
    rt.unregister_broker(cluster_name="c1", broker_name="broker-a", broker_id=0, broker_addr=A)
    assert rt.master_of("broker-a") == ("", "")


def test_s16_full_cascade(rt: RouteInfoManager) -> None:
    register(rt, cluster="c1", name="broker-a", addr=A, topics=[topic("T1"), topic("T2")], filters=["f:1"])
    register(rt, cluster="c1", name="broker-b", addr=B, topics=[topic("T2"), topic("T3")])
    register(rt, cluster="c2", name="broker-c", addr=C, topics=[topic("T4")])

    removed = rt.unregister_broker(cluster_name="c1", broker_name="broker-a", broker_id=0, broker_addr=A)
    assert removed == RemovedBroker(A, "c1", "broker-a", 0, "unregistered")
    assert set(rt.broker_live_table) == {B, C}
    assert rt.filter_server_table == {}
    assert set(rt.broker_addr_table) == {"broker-b", "broker-c"}
    assert rt.cluster_addr_table == {"c1": {"broker-b"}, "c2": {"broker-c"}}
    # T1 only on broker-a: dropped; T2 keeps broker-b's QueueData.
    assert rt.topic_queue_table == {
        "T2": {"broker-b": qd("broker-b")},
        "T3": {"broker-b": qd("broker-b")},
        "T4": {"broker-c": qd("broker-c")},
    }
    assert topic_index(rt) == {"broker-b": {"T2", "T3"}, "broker-c": {"T4"}}

    rt.unregister_broker(cluster_name="c2", broker_name="broker-c", broker_id=0, broker_addr=C)
    assert rt.cluster_addr_table == {"c1": {"broker-b"}}  # empty cluster removed
    assert "T4" not in rt.topic_queue_table


def test_s16_removed_slave_keeps_topics(rt: RouteInfoManager) -> None:
    register(rt, broker_id=0, addr=A, topics=[topic("T1")])
    register(rt, broker_id=1, addr=B, filters=["f:1"])
    topics_before = tables(rt)[0]
    rt.unregister_broker(cluster_name="c1", broker_name="broker-a", broker_id=1, broker_addr=B)
    assert rt.topic_queue_table == topics_before
    assert rt.broker_addr_table["broker-a"].broker_addrs == {0: A}
    assert rt.filter_server_table == {}
    assert set(rt.broker_live_table) == {A}


def test_s16_removed_master_with_slave_keeps_topics(rt: RouteInfoManager, clock: FakeClock) -> None:
    register(rt, broker_id=0, addr=A, topics=[topic("T1")], timeout=1_000)
    register(rt, broker_id=1, addr=B, timeout=60_000)
    clock.advance(1_001)
    assert rt.scan_not_active_broker() == [RemovedBroker(A, "c1", "broker-a", 0, "expired")]
    assert rt.broker_addr_table["broker-a"].broker_addrs == {1: B}
    assert rt.topic_queue_table == {"T1": {"broker-a": qd("broker-a")}}
    assert rt.cluster_addr_table == {"c1": {"broker-a"}}
    route = rt.pickup_topic_route_data("T1")
    assert route is not None
    assert route.broker_datas[0].broker_addrs == {1: B}
    # The last one leaving removes everything.
    rt.unregister_broker(cluster_name="c1", broker_name="broker-a", broker_id=1, broker_addr=B)
    assert tables(rt) == ({}, {}, {}, {}, {}, {})


# ---------------------------------------------------------------------------- S17


@pytest.mark.parametrize(
    ("cluster", "name", "broker_id", "addr"),
    [
        pytest.param("c2", "broker-a", 0, A, id="other-cluster"),
        pytest.param("c1", "broker-b", 0, A, id="other-broker-name"),
        pytest.param("c1", "broker-a", 1, A, id="other-broker-id"),
        pytest.param("c1", "broker-a", 0, C, id="other-addr"),
        pytest.param("c1", "broker-a", 0, B, id="addr-of-other-broker"),
    ],
)
def test_s17_unregister_matched_by_all_four_fields(
    rt: RouteInfoManager, cluster: str, name: str, broker_id: int, addr: str
) -> None:
    register(rt, cluster="c1", name="broker-a", broker_id=0, addr=A, topics=[topic("T1")])
    register(rt, cluster="c1", name="broker-b", broker_id=0, addr=B)
    before = tables(rt)
    assert rt.unregister_broker(cluster_name=cluster, broker_name=name, broker_id=broker_id, broker_addr=addr) is None
    assert tables(rt) == before


def test_s17_unregister_with_all_four_fields_removes(rt: RouteInfoManager) -> None:
    register(rt, cluster="c1", name="broker-a", broker_id=0, addr=A, topics=[topic("T1")])
    register(rt, cluster="c1", name="broker-b", broker_id=0, addr=B)
    removed = rt.unregister_broker(cluster_name="c1", broker_name="broker-a", broker_id=0, broker_addr=A)
    assert removed == RemovedBroker(A, "c1", "broker-a", 0, "unregistered")
    assert set(rt.broker_live_table) == {B}
    assert set(rt.broker_addr_table) == {"broker-b"}


def test_s17_unknown_broker_unregister_is_not_an_error(rt: RouteInfoManager) -> None:
    assert rt.unregister_broker(cluster_name="c1", broker_name="nope", broker_id=0, broker_addr=A) is None
    assert tables(rt) == ({}, {}, {}, {}, {}, {})


def test_s17_late_unregister_does_not_wipe_newer_registration(rt: RouteInfoManager) -> None:
    """The address was a slave (id 1), then re-registered as master (id 0); the old slave's late
    unregister must leave the master alone."""
    register(rt, broker_id=1, addr=A)
    register(rt, broker_id=0, addr=A, topics=[topic("T1")])
    before = tables(rt)
    assert rt.unregister_broker(cluster_name="c1", broker_name="broker-a", broker_id=1, broker_addr=A) is None
    assert tables(rt) == before
    assert rt.broker_addr_table["broker-a"].broker_addrs == {0: A}


def test_s17_late_unregister_of_old_name_does_not_wipe_address_under_new_name(rt: RouteInfoManager) -> None:
    register(rt, name="broker-a", addr=A)
    register(rt, name="broker-b", addr=A, topics=[topic("T1")])
    before = tables(rt)
    assert rt.unregister_broker(cluster_name="c1", broker_name="broker-a", broker_id=0, broker_addr=A) is None
    assert tables(rt) == before


def _bind(rt: RouteInfoManager, instance_id: str = "run-1", addr: str = A) -> int:
    bound = rt.bind_session(
        cluster_name="c1", broker_name="broker-a", broker_id=0, broker_addr=addr, instance_id=instance_id
    )
    assert bound is not None
    return bound[0]


def test_s17_end_of_replaced_session_does_nothing(rt: RouteInfoManager) -> None:
    register(rt, topics=[topic("T1")], instance_id="run-1")
    old_session = _bind(rt)
    new_session = _bind(rt)
    assert new_session != old_session
    before = tables(rt)
    assert rt.remove_if_session(A, old_session, "session ended") is None
    assert rt.session_heartbeat(A, old_session) is False
    assert tables(rt) == before
    assert rt.session_heartbeat(A, new_session) is True
    assert rt.remove_if_session(B, new_session, "session ended") is None
    assert rt.remove_if_session(A, new_session, "session ended") is not None


def test_s17_registration_by_other_instance_drops_old_session(rt: RouteInfoManager) -> None:
    """The broker restarted (new instance id) and re-registered before the old stream's end was
    noticed: the old session's end must not wipe the new registration."""
    register(rt, topics=[topic("T1")], instance_id="run-1")
    old_session = _bind(rt, "run-1")
    register(rt, topics=[topic("T1")], instance_id="run-2", version=V2)
    before = tables(rt)
    assert rt.remove_if_session(A, old_session, "session ended") is None
    assert rt.session_heartbeat(A, old_session) is False
    assert tables(rt) == before
    new_session = _bind(rt, "run-2")
    assert new_session != old_session


def test_s17_registration_without_instance_id_drops_session(rt: RouteInfoManager) -> None:
    register(rt, instance_id="run-1")
    session = _bind(rt, "run-1")
    register(rt, instance_id="", version=V2)
    assert rt.remove_if_session(A, session, "session ended") is None
    assert rt.live_info(A) is not None


def test_s17_registration_by_same_instance_keeps_session(rt: RouteInfoManager) -> None:
    register(rt, instance_id="run-1", version=V1)
    session = _bind(rt, "run-1")
    register(rt, instance_id="run-1", version=V2)
    live = rt.live_info(A)
    assert live is not None
    assert live.session_id == session
    assert rt.session_heartbeat(A, session) is True


def test_s17_same_instance_under_other_id_drops_session(rt: RouteInfoManager) -> None:
    register(rt, instance_id="run-1")
    session = _bind(rt, "run-1")
    register(rt, broker_id=1, instance_id="run-1")
    assert rt.remove_if_session(A, session, "session ended") is None
    assert rt.broker_addr_table["broker-a"].broker_addrs == {1: A}


def test_s17_scan_does_not_remove_broker_that_re_registered(rt: RouteInfoManager, clock: FakeClock) -> None:
    register(rt, timeout=1_000)
    clock.advance(5_000)  # expired but not yet scanned
    register(rt, timeout=1_000)
    assert rt.scan_not_active_broker() == []
    assert set(rt.broker_live_table) == {A}


# ---------------------------------------------------------------------------- S18


def test_s18_no_route_is_none(rt: RouteInfoManager) -> None:
    assert rt.pickup_topic_route_data("T1") is None
    register(rt, topics=[topic("T1")])
    assert rt.pickup_topic_route_data("T2") is None


def test_s18_topic_whose_broker_names_have_no_broker_data_has_no_route(rt: RouteInfoManager) -> None:
    rt.topic_queue_nums["T1"] = (("ghost",), ((4, 4, 6, 0),))
    assert rt.pickup_topic_route_data("T1") is None


def test_s18_route_contents(rt: RouteInfoManager) -> None:
    register(rt, name="broker-b", broker_id=0, addr=B, topics=[topic("T1", read=2)], filters=["f:2"])
    register(rt, name="broker-a", broker_id=0, addr=A, topics=[topic("T1")], filters=["f:1", "f:11"])
    register(rt, name="broker-a", broker_id=1, addr=C)
    register(rt, name="broker-c", broker_id=0, addr=D, topics=[topic("T2")], filters=["f:4"])
    route = rt.pickup_topic_route_data("T1")
    assert route is not None
    assert route.queue_datas == (qd("broker-a"), qd("broker-b", read=2))
    assert route.broker_datas == (
        BrokerData("c1", "broker-a", {0: A, 1: C}),
        BrokerData("c1", "broker-b", {0: B}),
    )
    assert route.filter_server_table == {A: ("f:1", "f:11"), B: ("f:2",)}
    assert route.order_topic_conf == ""


def test_s18_route_contains_copies(rt: RouteInfoManager) -> None:
    register(rt, broker_id=0, addr=A, topics=[topic("T1")], filters=["f:1"])
    route = rt.pickup_topic_route_data("T1")
    assert route is not None
    route.broker_datas[0].broker_addrs[5] = D
    route.broker_datas[0].broker_addrs.pop(0)
    route.broker_datas[0].cluster = "changed"
    route.filter_server_table.clear()
    assert rt.broker_addr_table == {"broker-a": BrokerData("c1", "broker-a", {0: A})}
    assert rt.filter_server_table == {A: ["f:1"]}
    again = rt.pickup_topic_route_data("T1")
    assert again is not None
    assert again.broker_datas == (BrokerData("c1", "broker-a", {0: A}),)
    assert again.filter_server_table == {A: ("f:1",)}


# ---------------------------------------------------------------------------- S20


def test_s20_query_data_version_unregistered(rt: RouteInfoManager) -> None:
    assert rt.query_data_version(
        cluster_name="c1", broker_name="broker-a", broker_id=0, broker_addr=A, data_version=V1
    ) == (True, None)


def test_s20_query_data_version_unchanged_refreshes(rt: RouteInfoManager, clock: FakeClock) -> None:
    register(rt, version=V1)
    clock.advance(7_000)
    result = rt.query_data_version(
        cluster_name="c1", broker_name="broker-a", broker_id=0, broker_addr=A, data_version=V1
    )
    assert result == (False, V1)
    live = rt.live_info(A)
    assert live is not None
    assert live.last_update_timestamp == clock.now


def test_s20_query_data_version_changed_does_not_refresh(rt: RouteInfoManager, clock: FakeClock) -> None:
    register(rt, version=V1)
    registered_at = clock.now
    clock.advance(7_000)
    result = rt.query_data_version(
        cluster_name="c1", broker_name="broker-a", broker_id=0, broker_addr=A, data_version=V2
    )
    assert result == (True, V1)
    live = rt.live_info(A)
    assert live is not None
    assert live.last_update_timestamp == registered_at


def test_s20_query_data_version_found_by_cluster_and_address(rt: RouteInfoManager) -> None:
    register(rt, version=V1)
    assert rt.query_data_version(
        cluster_name="c2", broker_name="broker-a", broker_id=0, broker_addr=A, data_version=V1
    ) == (True, None)
    assert rt.query_data_version(
        cluster_name="c1", broker_name="broker-a", broker_id=0, broker_addr=B, data_version=V1
    ) == (True, None)
    assert rt.query_data_version(
        cluster_name="c1", broker_name="other", broker_id=2, broker_addr=A, data_version=V1
    ) == (False, V1)


# ---------------------------------------------------------------------------- S22


def test_s22_cluster_info(rt: RouteInfoManager) -> None:
    register(rt, cluster="c1", name="broker-b", addr=B)
    register(rt, cluster="c1", name="broker-a", addr=A)
    register(rt, cluster="c1", name="broker-a", broker_id=1, addr=C)
    register(rt, cluster="c2", name="broker-c", addr=D)
    info = rt.get_cluster_info()
    assert info.broker_addr_table == {
        "broker-a": BrokerData("c1", "broker-a", {0: A, 1: C}),
        "broker-b": BrokerData("c1", "broker-b", {0: B}),
        "broker-c": BrokerData("c2", "broker-c", {0: D}),
    }
    assert info.cluster_addr_table == {"c1": ("broker-a", "broker-b"), "c2": ("broker-c",)}
    info.broker_addr_table["broker-a"].broker_addrs.clear()
    assert rt.broker_addr_table["broker-a"].broker_addrs == {0: A, 1: C}


def test_s22_cluster_info_empty(rt: RouteInfoManager) -> None:
    info = rt.get_cluster_info()
    assert (info.broker_addr_table, info.cluster_addr_table) == ({}, {})


# ---------------------------------------------------------------------------- S23


def test_s23_wipe_write_perm_counts_every_entry(rt: RouteInfoManager) -> None:
    register(rt, name="broker-a", addr=A, topics=[topic("T1", perm=6), topic("T2", perm=7), topic("T3", perm=4)])
    register(rt, name="broker-b", addr=B, topics=[topic("T1", perm=6)])
    assert rt.wipe_write_perm_of_broker("broker-a") == 3
    assert rt.topic_queue_table["T1"]["broker-a"].perm == 4
    assert rt.topic_queue_table["T2"]["broker-a"].perm == 5
    assert rt.topic_queue_table["T3"]["broker-a"].perm == 4
    assert rt.topic_queue_table["T1"]["broker-b"].perm == 6  # other broker name untouched
    # Again: nothing changes, every entry still counts.
    assert rt.wipe_write_perm_of_broker("broker-a") == 3


def test_s23_add_write_perm_sets_exactly_6(rt: RouteInfoManager) -> None:
    register(
        rt,
        name="broker-a",
        addr=A,
        topics=[topic("T1", perm=4), topic("T2", perm=15), topic("T3", perm=6), topic("T4", perm=0)],
    )
    register(rt, name="broker-b", addr=B, topics=[topic("T1", perm=4)])
    assert rt.add_write_perm_of_broker("broker-a") == 4
    assert {t: m["broker-a"].perm for t, m in rt.topic_queue_table.items()} == {"T1": 6, "T2": 6, "T3": 6, "T4": 6}
    assert rt.topic_queue_table["T1"]["broker-b"].perm == 4
    # Other QueueData fields are kept.
    assert rt.topic_queue_table["T2"]["broker-a"] == qd("broker-a", perm=6)


def test_s23_unknown_broker_name_counts_zero(rt: RouteInfoManager) -> None:
    register(rt, topics=[topic("T1")])
    before = tables(rt)
    assert rt.wipe_write_perm_of_broker("nope") == 0
    assert rt.add_write_perm_of_broker("nope") == 0
    assert tables(rt) == before


# ---------------------------------------------------------------------------- S24


def test_s24_all_topic_list_and_by_cluster(rt: RouteInfoManager) -> None:
    assert rt.get_all_topic_list() == []
    register(rt, cluster="c1", name="broker-a", addr=A, topics=[topic("T2"), topic("T1")])
    register(rt, cluster="c1", name="broker-b", addr=B, topics=[topic("T3")])
    register(rt, cluster="c2", name="broker-c", addr=C, topics=[topic("T1"), topic("T4")])
    assert rt.get_all_topic_list() == ["T1", "T2", "T3", "T4"]
    assert rt.get_topics_by_cluster("c1") == ["T1", "T2", "T3"]
    assert rt.get_topics_by_cluster("c2") == ["T1", "T4"]
    assert rt.get_topics_by_cluster("nope") == []


def test_s24_system_topic_list(rt: RouteInfoManager) -> None:
    assert rt.get_system_topic_list() == ([], "")
    register(rt, cluster="c2", name="broker-b", broker_id=0, addr=B)
    register(rt, cluster="c1", name="broker-a", broker_id=2, addr=C)
    register(rt, cluster="c1", name="broker-a", broker_id=1, addr=A)
    names, broker_addr = rt.get_system_topic_list()
    assert names == ["broker-a", "broker-b", "c1", "c2"]
    assert broker_addr == A  # lowest id of the first broker name


def test_s24_unit_topic_lists(rt: RouteInfoManager) -> None:
    register(
        rt,
        name="broker-a",
        addr=A,
        topics=[
            topic("plain", sys_flag=0),
            topic("unit", sys_flag=1),
            topic("unit-sub", sys_flag=2),
            topic("both", sys_flag=3),
            topic("mixed", sys_flag=2),
        ],
    )
    register(rt, name="broker-b", addr=B, topics=[topic("mixed", sys_flag=1)])
    assert rt.get_unit_topic_list() == ["both", "mixed", "unit"]
    assert rt.get_has_unit_sub_topic_list() == ["both", "mixed", "unit-sub"]
    assert rt.get_has_unit_sub_ununit_topic_list() == ["unit-sub"]


# ---------------------------------------------------------------------------- S25


def test_s25_delete_topic_globally(rt: RouteInfoManager) -> None:
    register(rt, cluster="c1", name="broker-a", addr=A, topics=[topic("T1"), topic("T2")])
    register(rt, cluster="c2", name="broker-b", addr=B, topics=[topic("T1")])
    rt.delete_topic("T1")
    assert rt.topic_queue_table == {"T2": {"broker-a": qd("broker-a")}}
    assert topic_index(rt) == {"broker-a": {"T2"}}
    # Brokers stay registered.
    assert set(rt.broker_addr_table) == {"broker-a", "broker-b"}
    assert set(rt.broker_live_table) == {A, B}


def test_s25_delete_topic_in_one_cluster(rt: RouteInfoManager) -> None:
    register(rt, cluster="c1", name="broker-a", addr=A, topics=[topic("T1")])
    register(rt, cluster="c1", name="broker-b", addr=B, topics=[topic("T1")])
    register(rt, cluster="c2", name="broker-c", addr=C, topics=[topic("T1")])
    rt.delete_topic("T1", "c1")
    assert rt.topic_queue_table == {"T1": {"broker-c": qd("broker-c")}}
    assert topic_index(rt) == {"broker-c": {"T1"}}
    rt.delete_topic("T1", "c2")
    assert rt.topic_queue_table == {}
    assert topic_index(rt) == {}


def test_s25_delete_unknown_topic_or_cluster_changes_nothing(rt: RouteInfoManager) -> None:
    register(rt, topics=[topic("T1")])
    before, version = tables(rt), rt.version
    rt.delete_topic("nope")
    rt.delete_topic("T1", "no-cluster")
    assert tables(rt) == before
    assert rt.version == version


def test_s25_register_topic_adds_queue_data(rt: RouteInfoManager) -> None:
    register(rt, name="broker-a", addr=A, topics=[topic("T1")])
    register(rt, name="broker-b", addr=B)
    rt.register_topic("T9", [qd("broker-a", read=2), qd("broker-b", perm=4)])
    assert rt.topic_queue_table["T9"] == {"broker-a": qd("broker-a", read=2), "broker-b": qd("broker-b", perm=4)}
    assert topic_index(rt) == {"broker-a": {"T1", "T9"}, "broker-b": {"T9"}}
    rt.register_topic("T1", [qd("broker-a", read=1)])
    assert rt.topic_queue_table["T1"] == {"broker-a": qd("broker-a", read=1)}
    route = rt.pickup_topic_route_data("T9")
    assert route is not None
    assert [b.broker_name for b in route.broker_datas] == ["broker-a", "broker-b"]


def test_s25_register_topic_all_or_nothing_for_unknown_broker_name(rt: RouteInfoManager) -> None:
    register(rt, name="broker-a", addr=A, topics=[topic("T1")])
    before, version = tables(rt), rt.version
    with pytest.raises(BrokerNameNotRegisteredError):
        rt.register_topic("T1", [qd("broker-a", read=1), qd("ghost")])
    with pytest.raises(BrokerNameNotRegisteredError):
        rt.register_topic("T9", [qd("broker-a"), qd("ghost")])
    assert tables(rt) == before
    assert rt.version == version


# ---------------------------------------------------------------------------- documented extensions


def test_ext_address_under_new_broker_name_leaves_old_broker_data(rt: RouteInfoManager) -> None:
    register(rt, cluster="c1", name="broker-a", addr=A, topics=[topic("T1")])
    register(rt, cluster="c1", name="broker-a", broker_id=1, addr=B)
    register(rt, cluster="c2", name="broker-x", addr=A, topics=[topic("T2")], version=V1)
    assert rt.broker_addr_table["broker-a"].broker_addrs == {1: B}
    assert rt.broker_addr_table["broker-x"].broker_addrs == {0: A}
    live = rt.live_info(A)
    assert live is not None
    assert (live.cluster, live.broker_name) == ("c2", "broker-x")
    # broker-a keeps its topic via its slave; broker-x's first registration carried T2.
    assert rt.topic_queue_table == {"T1": {"broker-a": qd("broker-a")}, "T2": {"broker-x": qd("broker-x")}}


def test_ext_address_leaving_last_broker_name_cascades(rt: RouteInfoManager) -> None:
    register(rt, cluster="c1", name="broker-a", addr=A, topics=[topic("T1")], version=V1)
    register(rt, cluster="c2", name="broker-x", addr=A, topics=[topic("T2")], version=V1)
    assert set(rt.broker_addr_table) == {"broker-x"}
    assert rt.cluster_addr_table == {"c2": {"broker-x"}}
    assert rt.topic_queue_table == {"T2": {"broker-x": qd("broker-x")}}
    assert topic_index(rt) == {"broker-x": {"T2"}}


def test_ext_broker_id_moving_to_new_address_drops_old_live_entry(rt: RouteInfoManager) -> None:
    register(rt, addr=A, filters=["f:1"], topics=[topic("T1")])
    register(rt, broker_id=1, addr=C)
    register(rt, addr=B, version=V2)
    assert rt.broker_addr_table["broker-a"].broker_addrs == {0: B, 1: C}
    assert set(rt.broker_live_table) == {B, C}
    assert rt.filter_server_table == {}
    assert rt.topic_queue_table == {"T1": {"broker-a": qd("broker-a")}}
    # A late unregister of the old address changes nothing.
    before = tables(rt)
    assert rt.unregister_broker(cluster_name="c1", broker_name="broker-a", broker_id=0, broker_addr=A) is None
    assert tables(rt) == before


def test_ext_delete_topic_with_broker_registration_on(clock: FakeClock) -> None:
    rt = RouteInfoManager(clock, delete_topic_with_broker_registration=True)
    register(rt, name="broker-a", addr=A, topics=[topic("T1"), topic("T2")], version=V1)
    register(rt, name="broker-b", addr=B, topics=[topic("T2")], version=V1)
    register(rt, name="broker-a", addr=A, topics=[topic("T1"), topic("T3")], version=V2)
    assert rt.topic_queue_table == {
        "T1": {"broker-a": qd("broker-a")},
        "T2": {"broker-b": qd("broker-b")},
        "T3": {"broker-a": qd("broker-a")},
    }
    assert topic_index(rt) == {"broker-a": {"T1", "T3"}, "broker-b": {"T2"}}
    # Unchanged DataVersion: nothing is deleted.
    register(rt, name="broker-a", addr=A, topics=[], version=V2)
    assert sorted(rt.topic_queue_table) == ["T1", "T2", "T3"]
    # Changed DataVersion with no topics: all of broker-a's topics go.
    register(rt, name="broker-a", addr=A, topics=[], version=DataVersion(0, 3_000, 3))
    assert rt.topic_queue_table == {"T2": {"broker-b": qd("broker-b")}}
    assert topic_index(rt) == {"broker-b": {"T2"}}


def test_ext_delete_topic_with_broker_registration_off_by_default(rt: RouteInfoManager) -> None:
    assert rt.delete_topic_with_broker_registration is False
    register(rt, topics=[topic("T1"), topic("T2")], version=V1)
    register(rt, topics=[topic("T1")], version=V2)
    assert sorted(rt.topic_queue_table) == ["T1", "T2"]


def test_ext_delete_topic_with_broker_registration_ignores_slaves(clock: FakeClock) -> None:
    rt = RouteInfoManager(clock, delete_topic_with_broker_registration=True)
    register(rt, broker_id=0, addr=A, topics=[topic("T1")], version=V1)
    register(rt, broker_id=1, addr=B, topics=[], version=V2)
    assert rt.topic_queue_table == {"T1": {"broker-a": qd("broker-a")}}


def test_version_counter_increases_on_change(rt: RouteInfoManager) -> None:
    v0 = rt.version
    register(rt, topics=[topic("T1")])
    v1 = rt.version
    assert v1 > v0
    rt.wipe_write_perm_of_broker("broker-a")
    assert rt.version > v1


def test_stats(rt: RouteInfoManager) -> None:
    register(rt, cluster="c1", name="broker-a", addr=A, topics=[topic("T1"), topic("T2")])
    register(rt, cluster="c1", name="broker-a", broker_id=1, addr=B)
    register(rt, cluster="c2", name="broker-b", addr=C, topics=[topic("T1")])
    stats = rt.stats()
    assert (stats.brokers_live, stats.broker_names, stats.clusters, stats.topics, stats.queue_datas) == (
        3,
        2,
        2,
        2,
        3,
    )


def test_copy_tables_is_a_consistent_detached_copy() -> None:
    rt = RouteInfoManager(FakeClock())
    rt.register_broker(
        cluster_name="c1", broker_name="b1", broker_id=0, broker_addr="h:1",
        topic_configs={"t1": TopicConfig("t1", 4, 4)}, filter_server_list=["f:1"],
    )  # fmt: skip
    tables = rt.copy_tables()
    rt.register_broker(cluster_name="c1", broker_name="b1", broker_id=1, broker_addr="h:2")
    rt.delete_topic("t1")
    assert tables.topic_queue_table == {"t1": {"b1": QueueData("b1", 4, 4, 6, 0)}}
    assert tables.broker_addr_table["b1"].broker_addrs == {0: "h:1"}
    assert tables.cluster_addr_table == {"c1": frozenset({"b1"})}
    assert set(tables.broker_live_table) == {"h:1"}
    assert tables.filter_server_table == {"h:1": ("f:1",)}


def test_registration_result_says_whether_anything_beyond_liveness_changed(
    rt: RouteInfoManager, clock: FakeClock
) -> None:
    """``RegisterBrokerResult.changed`` (what decides an audit line): True for a new broker address
    and for a re-registration that changes what is held for it; False for one that only refreshes
    its liveness (a broker's periodic registration)."""
    topics = [topic("T1"), topic("T2")]
    base: dict[str, Any] = {"topics": topics, "ha": HA_A, "instance_id": "run-1"}
    assert register(rt, **base).changed
    clock.advance(30_000)
    assert not register(rt, **base).changed, "the same registration again refreshes liveness only"
    # A slave: new, then unchanged (its answer names the master either way).
    slave: dict[str, Any] = {"broker_id": 1, "addr": B, "ha": HA_B, "instance_id": "run-s"}
    assert register(rt, **slave).changed
    again = register(rt, **slave)
    assert (again.master_addr, again.changed) == (A, False)
    for change in (
        {"version": V2},  # the broker's topics changed (a new DataVersion)
        {"version": V1, "topics": [*topics, topic("T3")]},  # back to V1: a DataVersion change again
        {"ha": "10.0.0.1:10999"},
        {"timeout": 30_000},
        {"zone_name": "zone-1"},
        {"enable_acting_master": True},
        {"filters": ["10.0.0.9:9000"]},
        {"instance_id": "run-2"},  # another run of the broker
    ):
        base.update(change)
        assert register(rt, **base).changed, change
        assert not register(rt, **base).changed, change
    # The same address registered under another broker name is a change; the table holds what it says.
    assert register(rt, **{**base, "name": "broker-b"}).changed
    assert rt.unregister_broker(cluster_name="c1", broker_name="broker-b", broker_id=0, broker_addr=A) is not None
    assert register(rt, **base).changed, "registered again after it left"


def test_a_broker_registering_itself_and_its_agent_are_not_runs_fighting() -> None:
    """The Kubernetes example runs a Java broker (registering itself over remoting, one instance id
    per connection) and broker-agent beside it (over gRPC, its own instance id): one broker, not two
    runs taking the registration from each other (no conflict, however often they alternate). Two
    agents (the same door) still are."""
    rt = RouteInfoManager(FakeClock())

    def register(instance_id: str, protocol: str) -> str:
        result = rt.register_broker(
            cluster_name="c1", broker_name="broker-a", broker_id=0, broker_addr="10.0.0.1:10911",
            instance_id=instance_id, protocol=protocol,
        )  # fmt: skip
        return result.conflicting_instance_id

    for _ in range(3):
        assert register("remoting-connection-7-1", "remoting") == ""
        assert register("agent-run-1", "grpc") == ""
    assert register("agent-run-2", "grpc") == ""  # a second agent takes it over: not yet a fight
    assert register("agent-run-1", "grpc") == "agent-run-2"  # the first one takes it back: a fight
