"""Slave acting master (RocketMQ 5.x, S50-S53) in the core: the prime slave's topics, the WRITE bit
wiped when a master leaves (unregistration, expiry and session/connection end alike), the acting
master shown under id 0 only with ``supportActingMaster``, and which MinBrokerIdChange the core
decides to send, to whom. Brokers older than 5.x (``enable_acting_master`` None) are left alone.

RocketMQ source: ``namesrv/.../routeinfo/RouteInfoManager.java`` (registerBroker,
unRegisterBroker / cleanTopicByUnRegisterRequests, pickupTopicRouteData, notifyMinBrokerIdChanged,
chooseBrokerAddrsToNotify).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pytest

from namesrv_grpc.config import NamesrvConfig
from namesrv_grpc.core.kvconfig import KVConfigManager
from namesrv_grpc.core.model import (
    PERM_READ,
    PERM_WRITE,
    DataVersion,
    MinBrokerIdChange,
    QueueData,
    TopicConfig,
)
from namesrv_grpc.core.processor import NameServer
from namesrv_grpc.core.route_table import RouteInfoManager
from tests.support import FakeClock, topic

M, S1, S2 = "10.0.0.1:10911", "10.0.0.2:10911", "10.0.0.3:10911"
HA_M, HA_S1 = "10.0.0.1:10912", "10.0.0.2:10912"
V1, V2 = DataVersion(0, 1, 1), DataVersion(0, 2, 2)
RW = PERM_READ | PERM_WRITE


class World:
    def __init__(self, *, support: bool = False) -> None:
        self.clock = FakeClock()
        self.rt = RouteInfoManager(self.clock, support_acting_master=support)
        self.changes: list[MinBrokerIdChange] = []
        self.route_notices: list[frozenset[str] | None] = []
        self.rt.min_broker_id_listeners.append(self.changes.append)
        self.rt.route_listeners.append(lambda _revision, topics: self.route_notices.append(topics))

    def register(
        self,
        broker_id: int,
        addr: str,
        *,
        acting: bool | None = True,
        topics: Iterable[TopicConfig] = (topic("T1"), topic("T2")),
        version: DataVersion = V1,
        ha: str = "",
        timeout: int = 0,
        name: str = "broker-a",
    ) -> None:
        self.rt.register_broker(
            cluster_name="c1",
            broker_name=name,
            broker_id=broker_id,
            broker_addr=addr,
            ha_server_addr=ha,
            data_version=version,
            topic_configs={t.topic_name: t for t in topics},
            heartbeat_timeout_millis=timeout,
            enable_acting_master=acting,
        )

    def unregister(self, broker_id: int, addr: str, name: str = "broker-a") -> None:
        assert self.rt.unregister_broker(cluster_name="c1", broker_name=name, broker_id=broker_id, broker_addr=addr)

    def perms(self, name: str = "broker-a") -> dict[str, int]:
        return {t: m[name].perm for t, m in self.rt.topic_queue_table.items() if name in m}

    def addrs(self, topic_name: str = "T1") -> dict[int, str]:
        route = self.rt.pickup_topic_route_data(topic_name)
        assert route is not None
        return route.broker_datas[0].broker_addrs


def group(world: World, *, acting: bool | None = True) -> None:
    """Master 0 and slaves 1, 2 of broker-a, all registered with ``acting``."""
    world.register(0, M, acting=acting, ha=HA_M)
    world.register(1, S1, acting=acting, ha=HA_S1)
    world.register(2, S2, acting=acting)


# ------------------------------------------------------------------ S50 the prime slave


def test_s50_prime_slave_carries_topics_read_only_with_acting_master() -> None:
    world = World()
    world.register(1, S1, acting=True, topics=[topic("T1", perm=RW)])
    assert world.rt.topic_queue_table == {"T1": {"broker-a": QueueData("broker-a", 4, 4, PERM_READ)}}


def test_s50_prime_slave_of_a_5x_broker_without_acting_master_keeps_its_perm() -> None:
    world = World()
    world.register(1, S1, acting=False, topics=[topic("T1", perm=RW)])
    assert world.perms() == {"T1": RW}


def test_s50_old_broker_slave_carries_no_topics() -> None:
    world = World()
    world.register(1, S1, acting=None, topics=[topic("T1")])
    assert world.rt.topic_queue_table == {}


def test_s50_prime_slave_updates_the_table_while_the_master_is_away() -> None:
    world = World()
    group(world)
    world.unregister(0, M)
    world.register(1, S1, topics=[topic("T1", read=8, write=8), topic("T3")], version=V2)
    table = world.rt.topic_queue_table
    assert table["T1"]["broker-a"] == QueueData("broker-a", 8, 8, PERM_READ)
    assert table["T3"]["broker-a"] == QueueData("broker-a", 4, 4, PERM_READ)
    # a slave that is not the smallest id changes nothing
    world.register(2, S2, topics=[topic("T1", read=2, write=2), topic("T4")], version=V2)
    assert "T4" not in table
    assert table["T1"]["broker-a"].read_queue_nums == 8


def test_s50_a_slave_is_not_prime_while_the_master_is_registered() -> None:
    world = World()
    group(world)
    world.register(1, S1, topics=[topic("T1", read=8, write=8), topic("T9")], version=V2)
    assert "T9" not in world.rt.topic_queue_table
    assert world.rt.topic_queue_table["T1"]["broker-a"] == QueueData("broker-a", 4, 4, RW)


def test_s50_master_back_restores_write() -> None:
    world = World()
    group(world)
    world.unregister(0, M)
    assert set(world.perms().values()) == {PERM_READ}
    world.register(0, M, ha=HA_M)
    assert set(world.perms().values()) == {RW}


# ------------------------------------------------------------------ S51 WRITE wiped when the master leaves


@pytest.mark.parametrize("how", ["unregister", "expiry", "session"])
def test_s51_master_departure_wipes_write_bit(how: str) -> None:
    world = World()
    group(world)
    assert set(world.perms().values()) == {RW}
    if how == "unregister":
        world.unregister(0, M)
    elif how == "expiry":
        world.register(0, M, ha=HA_M, timeout=1_000)
        world.register(1, S1, timeout=60_000)
        world.register(2, S2, timeout=60_000)
        world.clock.advance(5_000)
        assert [b.broker_addr for b in world.rt.scan_not_active_broker()] == [M]
    else:
        session = world.rt.bind_session(
            cluster_name="c1", broker_name="broker-a", broker_id=0, broker_addr=M, instance_id=""
        )
        assert session is not None
        assert world.rt.remove_if_session(M, session[0], "connection closed") is not None
    assert world.perms() == {"T1": PERM_READ, "T2": PERM_READ}
    assert world.route_notices[-1] == frozenset({"T1", "T2"})  # watchers see the change


@pytest.mark.parametrize("acting", [False, None])
def test_s51_no_wipe_without_acting_master(acting: bool | None) -> None:
    world = World()
    group(world, acting=acting)
    world.unregister(0, M)
    assert set(world.perms().values()) == {RW}


def test_s51_slave_departure_with_master_present_keeps_write() -> None:
    world = World()
    group(world)
    world.unregister(1, S1)
    assert set(world.perms().values()) == {RW}


# ------------------------------------------------------------------ S52 the acting master in routes


def test_s52_route_shows_acting_master_under_id_0_only_with_support() -> None:
    for support, expected in ((True, {0: S1, 2: S2}), (False, {1: S1, 2: S2})):
        world = World(support=support)
        group(world)
        world.unregister(0, M)
        assert world.addrs() == expected
        # the table itself is untouched, and so is cluster info
        assert world.rt.broker_addr_table["broker-a"].broker_addrs == {1: S1, 2: S2}
        assert world.rt.get_cluster_info().broker_addr_table["broker-a"].broker_addrs == {1: S1, 2: S2}


def test_s52_no_rewrite_for_old_brokers_writable_queues_or_sync_topics() -> None:
    world = World(support=True)
    group(world, acting=None)
    world.unregister(0, M)
    assert world.addrs() == {1: S1, 2: S2}

    world = World(support=True)
    group(world)
    world.register(0, M, topics=[topic("T1"), topic("rmq_sys_SYNC_BROKER_MEMBER_broker-a")], version=V2)
    world.unregister(0, M)
    assert world.addrs("rmq_sys_SYNC_BROKER_MEMBER_broker-a") == {1: S1, 2: S2}
    assert world.addrs("T1") == {0: S1, 2: S2}
    world.rt.add_write_perm_of_broker("broker-a")  # writable again: no rewrite
    assert world.addrs("T1") == {1: S1, 2: S2}


def test_s52_switching_support_changes_cached_routes_and_tells_watchers() -> None:
    world = World()
    group(world)
    world.unregister(0, M)
    encode = lambda route: dict(route.broker_datas[0].broker_addrs)  # noqa: E731
    assert world.rt.pickup_topic_route_cached("T1", encode) == {1: S1, 2: S2}
    world.route_notices.clear()
    world.rt.set_support_acting_master(True)
    assert world.rt.pickup_topic_route_cached("T1", encode) == {0: S1, 2: S2}
    assert world.route_notices == [None]  # every route changed
    world.rt.set_support_acting_master(True)
    assert world.route_notices == [None]  # no change, no notice


def test_s52_watchers_see_the_rewrite_when_the_master_leaves() -> None:
    world = World(support=True)
    group(world)
    _, before = world.rt.routes_of(["T1"])
    world.unregister(0, M)
    revision, after = world.rt.routes_of(["T1"])
    assert before["T1"] is not None
    assert after["T1"] is not None
    assert before["T1"].broker_datas[0].broker_addrs == {0: M, 1: S1, 2: S2}
    assert after["T1"].broker_datas[0].broker_addrs == {0: S1, 2: S2}
    assert revision == world.rt.route_revision
    assert "T1" in (world.route_notices[-1] or ())


# ------------------------------------------------------------------ S53 who is told


def test_s53_master_departure_tells_every_remaining_broker() -> None:
    world = World()
    group(world)
    world.changes.clear()
    world.unregister(0, M)
    assert world.changes == [MinBrokerIdChange("c1", "broker-a", 1, S1, M, "", (S1, S2))]


def test_s53_master_arrival_tells_every_other_broker() -> None:
    world = World()
    world.register(1, S1)
    world.register(2, S2)
    assert world.changes == []  # first registration, then a larger id: no change
    world.register(0, M, ha=HA_M)
    assert world.changes == [MinBrokerIdChange("c1", "broker-a", 0, M, "", HA_M, (S1, S2))]


def test_s53_slave_promoted_on_the_same_address_is_told_itself() -> None:
    world = World()
    world.register(1, S1, ha=HA_S1)
    world.register(0, S1, ha=HA_S1)
    assert world.changes == [MinBrokerIdChange("c1", "broker-a", 0, S1, "", HA_S1, (S1,))]


def test_s53_departure_of_a_non_minimum_or_the_last_broker_tells_nobody() -> None:
    world = World()
    group(world)
    world.changes.clear()
    world.unregister(2, S2)
    world.unregister(0, M)
    assert [c.recipients for c in world.changes] == [(S1,)]
    world.unregister(1, S1)  # the last one
    assert len(world.changes) == 1


@pytest.mark.parametrize("how", ["expiry", "session"])
def test_s53_every_kind_of_departure_tells(how: str) -> None:
    world = World()
    world.register(0, M, timeout=1_000)
    world.register(1, S1, timeout=60_000)
    world.changes.clear()
    if how == "expiry":
        world.clock.advance(5_000)
        world.rt.scan_not_active_broker()
    else:
        session = world.rt.bind_session(
            cluster_name="c1", broker_name="broker-a", broker_id=0, broker_addr=M, instance_id=""
        )
        assert session is not None
        world.rt.remove_if_session(M, session[0], "connection closed")
    assert world.changes == [MinBrokerIdChange("c1", "broker-a", 1, S1, M, "", (S1,))]


@pytest.mark.parametrize("acting", [False, None])
def test_s53_departure_tells_nobody_without_acting_master(acting: bool | None) -> None:
    world = World()
    group(world, acting=acting)
    world.changes.clear()
    world.unregister(0, M)
    assert world.changes == []


def test_s53_listeners_run_outside_the_lock_after_the_change() -> None:
    world = World()
    group(world)
    seen: list[dict[int, str]] = []
    world.rt.min_broker_id_listeners.append(lambda change: seen.append(world.rt.broker_addrs_of(change.broker_name)))
    world.unregister(0, M)
    assert seen == [{1: S1, 2: S2}]


# ------------------------------------------------------------------ NameServer: the switches


def nameserver(tmp_path: Path, **config: bool) -> tuple[NameServer, list[MinBrokerIdChange]]:
    ns = NameServer(
        NamesrvConfig(config_store_path=str(tmp_path / "namesrv.properties"), **config),  # type: ignore[arg-type]
        RouteInfoManager(FakeClock()),
        KVConfigManager(tmp_path / "kv.json"),
    )
    sent: list[MinBrokerIdChange] = []
    ns.min_broker_id_senders.append(sent.append)
    return ns, sent


def test_s53_notifications_only_with_notify_min_broker_id_changed(tmp_path: Path) -> None:
    for enabled in (False, True):
        ns, sent = nameserver(tmp_path, notify_min_broker_id_changed=enabled)
        for broker_id, addr in ((1, S1), (0, M)):
            ns.route_table.register_broker(
                cluster_name="c1", broker_name="b", broker_id=broker_id, broker_addr=addr, enable_acting_master=True
            )
        assert [c.recipients for c in sent] == ([(S1,)] if enabled else [])


def test_s52_support_acting_master_from_config_and_at_run_time(tmp_path: Path) -> None:
    ns, _ = nameserver(tmp_path, support_acting_master=True)
    assert ns.route_table.support_acting_master
    ns.update_namesrv_config({"supportActingMaster": "false"})
    assert not ns.route_table.support_acting_master
    ns.update_namesrv_config({"notifyMinBrokerIdChanged": "true"})
    assert ns.config.notify_min_broker_id_changed


def test_s53_one_message_per_broker_name_per_batch_of_removals() -> None:
    """One expiry scan that removes the master and then the smallest slave tells the one broker
    left once, with the last address that left (RocketMQ: one BrokerStatusChangeInfo per broker
    name per unRegisterBroker batch, holding the live address map); a group that expires whole
    tells nobody."""
    world = World()
    world.register(0, M, timeout=1_000)
    world.register(1, S1, timeout=2_000)
    world.register(2, S2, timeout=60_000)
    world.changes.clear()
    world.clock.advance(5_000)
    assert len(world.rt.scan_not_active_broker()) == 2
    assert world.changes == [MinBrokerIdChange("c1", "broker-a", 2, S2, S1, "", (S2,))]

    world = World()
    world.register(0, M, timeout=1_000)
    world.register(1, S1, timeout=1_000)
    world.changes.clear()
    world.clock.advance(5_000)
    assert len(world.rt.scan_not_active_broker()) == 2
    assert world.changes == []


@pytest.mark.parametrize(("support", "seen_from_other_zone"), [(False, {1: S1}), (True, None)])
def test_s52_zone_mode_filters_the_rewritten_route(
    tmp_path: Path, support: bool, seen_from_other_zone: dict[int, str] | None
) -> None:
    """RocketMQ rewrites in ``pickupTopicRouteData`` and filters by zone afterwards
    (``ZoneRouteRPCHook``): a master-less group is kept for every zone ("consume from slave"), but
    once the acting master is shown under id 0 it is a group with a master, kept only in its zone."""
    ns, _ = nameserver(tmp_path, support_acting_master=support)
    for broker_id, addr in ((0, M), (1, S1)):
        ns.route_table.register_broker(
            cluster_name="c1",
            broker_name="broker-a",
            broker_id=broker_id,
            broker_addr=addr,
            topic_configs={"T1": topic("T1")},
            enable_acting_master=True,
            zone_name="zone-1",
        )
    ns.route_table.unregister_broker(cluster_name="c1", broker_name="broker-a", broker_id=0, broker_addr=M)
    own = ns.pickup_topic_route("T1", zone_name="ZONE-1").broker_datas
    assert [b.broker_addrs for b in own] == [{0: S1} if support else {1: S1}]
    other = ns.pickup_topic_route("T1", zone_name="zone-2").broker_datas
    assert [b.broker_addrs for b in other] == ([seen_from_other_zone] if seen_from_other_zone else [])
