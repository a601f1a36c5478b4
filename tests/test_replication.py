"""The change stream between the route-table process and the serving processes' replicas
(core/replication.py): what crosses the process boundary (pickled) and what a replica does with
the parts that are not route-table records (KV config, configuration, session notices)."""

from __future__ import annotations

import pickle
from pathlib import Path
from types import MappingProxyType
from typing import Any

from namesrv_grpc.config import NamesrvConfig
from namesrv_grpc.core.kvconfig import KVConfigManager
from namesrv_grpc.core.model import ORDER_TOPIC_CONFIG_NAMESPACE, DataVersion, TopicConfig, TopicQueueMappingInfo
from namesrv_grpc.core.processor import NameServer
from namesrv_grpc.core.replication import Change
from namesrv_grpc.core.route_table import RouteInfoManager
from tests.support import FakeClock


def nameservers(tmp_path: Path, **config: Any) -> tuple[NameServer, NameServer]:
    """The route-table process's NameServer (tracking changes) and an empty replica."""
    settings = NamesrvConfig(
        kv_config_path=str(tmp_path / "kv.json"), config_store_path=str(tmp_path / "ns.properties"), **config
    )
    writer = NameServer(settings, RouteInfoManager(FakeClock()), KVConfigManager(tmp_path / "kv.json"))
    writer.track_changes()
    replica = NameServer(settings, RouteInfoManager(FakeClock()), KVConfigManager(None))
    replica.apply_change(crossed(writer.replica_state()))
    return writer, replica


def crossed(change: Change) -> Change:
    """``change`` as the serving process receives it."""
    copy: Change = pickle.loads(pickle.dumps(change, protocol=pickle.HIGHEST_PROTOCOL))
    return copy


def publish(writer: NameServer, replica: NameServer) -> Change | None:
    change = writer.take_change()
    if change is not None:
        replica.apply_change(crossed(change))
    return change


def register(ns: NameServer, mappings: dict[str, TopicQueueMappingInfo] | None = None) -> None:
    ns.route_table.register_broker(
        cluster_name="c1", broker_name="broker-a", broker_id=0, broker_addr="10.0.0.1:10911",
        data_version=DataVersion(0, 1, 1), topic_configs={"T1": TopicConfig("T1", 4, 4), "T2": TopicConfig("T2", 4, 4)},
        topic_queue_mappings=mappings,
    )  # fmt: skip


def test_static_topic_mappings_as_the_grpc_door_decodes_them_cross_to_the_replica(tmp_path: Path) -> None:
    """A mapping's ``curr_id_map`` is a read-only MappingProxyType when decoded from protobuf; the
    change holding it is still sent (it could not be pickled before: the route-table process failed)."""
    writer, replica = nameservers(tmp_path)
    mapping = TopicQueueMappingInfo("T1", "broker-a", total_queues=2, curr_id_map=MappingProxyType({0: 0, 1: 1}))
    register(writer, {"T1": mapping})
    publish(writer, replica)
    assert replica.route_table.topic_queue_mapping_info_table == {"T1": {"broker-a": mapping}}
    assert replica.pickup_topic_route("T1") == writer.pickup_topic_route("T1")


def test_kv_writes_and_order_topic_conf_reach_the_replica(tmp_path: Path) -> None:
    writer, replica = nameservers(tmp_path, order_message_enable=True)
    register(writer)
    publish(writer, replica)
    assert replica.pickup_topic_route("T1").order_topic_conf == ""
    writer.put_kv_config(ORDER_TOPIC_CONFIG_NAMESPACE, "T1", "broker-a:4")
    writer.put_kv_config("ns", "k", "v")
    publish(writer, replica)
    assert replica.get_kv_config("ns", "k") == "v"
    assert replica.pickup_topic_route("T1").order_topic_conf == "broker-a:4"  # the cached route was dropped
    writer.delete_kv_config("ns", "k")
    publish(writer, replica)
    assert replica.get_kv_list_by_namespace("ns") == {}
    assert replica.kv_config.total_bytes == writer.kv_config.total_bytes


def test_a_configuration_change_reaches_the_replica_and_drops_every_cached_route(tmp_path: Path) -> None:
    writer, replica = nameservers(tmp_path)
    register(writer)
    writer.put_kv_config(ORDER_TOPIC_CONFIG_NAMESPACE, "T2", "broker-a:8")
    publish(writer, replica)
    notices: list[object] = []
    replica.route_table.route_listeners.append(lambda revision, topics: notices.append((revision, topics)))
    assert replica.pickup_topic_route("T2").order_topic_conf == ""  # cached without the order conf
    writer.update_namesrv_config({"orderMessageEnable": "true"})
    change = publish(writer, replica)
    assert change is not None
    assert change.config is not None
    assert replica.config.order_message_enable
    assert replica.pickup_topic_route("T2").order_topic_conf == "broker-a:8"
    assert notices == [(writer.route_table.route_revision, None)], "watchers are told every route changed"


def test_session_notices_reach_the_replicas_listeners(tmp_path: Path) -> None:
    writer, replica = nameservers(tmp_path)
    masters: list[tuple[str, str, str]] = []
    removals: list[str] = []
    replica.master_listeners.append(lambda name, addr, ha: masters.append((name, addr, ha)))
    replica.removal_listeners.append(lambda removed: removals.append(removed.broker_addr))
    register(writer)
    publish(writer, replica)
    writer.unregister_broker(cluster_name="c1", broker_name="broker-a", broker_id=0, broker_addr="10.0.0.1:10911")
    publish(writer, replica)
    assert removals == ["10.0.0.1:10911"]
    assert masters[-1] == ("broker-a", "", "")
    assert replica.topic_route_encoded("T1", lambda route: route) is None
    assert writer.take_change() is None, "nothing more to send"


def test_cluster_membership_crosses_as_changes_not_as_the_whole_table(tmp_path: Path) -> None:
    """A broker name joining a cluster of 2,000 sends that one name, not the cluster's 2,000 (the
    whole table per change made a flood of new brokers quadratic: ~10 MB a change at 36,000 names);
    the replica's clusters match the writer's after joins, a move between clusters and removals."""
    writer, replica = nameservers(tmp_path)

    def join(cluster: str, index: int) -> None:
        addr = f"10.0.{index >> 8}.{index & 255}:1"
        writer.route_table.register_broker(
            cluster_name=cluster, broker_name=f"b{index:05d}", broker_id=0, broker_addr=addr,
            data_version=DataVersion(0, 1, 1), topic_configs={},
        )  # fmt: skip

    for index in range(2_000):
        join("big", index)
    publish(writer, replica)
    join("big", 2_000)
    change = writer.take_change()
    assert change is not None
    assert change.table is not None
    assert change.table.clusters is None
    assert change.table.cluster_log == [("big", "b02000", True)]
    assert len(pickle.dumps(change)) < 2_000
    replica.apply_change(crossed(change))
    join("small", 5)  # a second cluster now holds b00005 too (S03 keeps both)
    writer.unregister_broker(cluster_name="big", broker_name="b00007", broker_id=0, broker_addr="10.0.0.7:1")
    publish(writer, replica)
    assert replica.route_table.cluster_addr_table == writer.route_table.cluster_addr_table
    assert "b00007" not in replica.route_table.cluster_addr_table["big"]
    writer.unregister_broker(cluster_name="small", broker_name="b00005", broker_id=0, broker_addr="10.0.0.5:1")
    publish(writer, replica)
    assert replica.route_table.cluster_addr_table == writer.route_table.cluster_addr_table
    assert "small" not in replica.route_table.cluster_addr_table


def test_which_body_each_broker_registered_crosses_to_the_replica(tmp_path: Path) -> None:
    """The doors decode a body the table does not hold before sending it, so the replica knows each
    broker's last body (``registered_bodies``) as the writer does: after a first registration, a
    new body, a slave, the topics fingerprint forgotten by an admin write (S23), a broker id moved to
    another address and removals; an unchanged re-registration publishes nothing; a new replica
    starts with them."""
    writer, replica = nameservers(tmp_path)
    table = writer.route_table

    topics = {"T1": TopicConfig("T1", 4, 4), "T2": TopicConfig("T2", 4, 4)}

    def reg(addr: str, broker_id: int, body: int, counter: int = 1, unchanged: bool = False) -> None:
        """As RouteTableService applies it: a body the table holds comes without its topics."""
        table.register_broker(
            cluster_name="c1", broker_name="broker-a", broker_id=broker_id, broker_addr=addr,
            data_version=DataVersion(0, 1, counter), topic_configs=None if unchanged else topics,
            body_fingerprint=(body, 100, False), topics_fingerprint=body * 10,
        )  # fmt: skip

    def same() -> None:
        publish(writer, replica)
        assert replica.route_table.registered_bodies == table.registered_bodies

    reg("10.0.0.1:1", 0, 1)
    same()
    assert replica.route_table.registered_body(
        cluster_name="c1", broker_name="broker-a", broker_id=0, broker_addr="10.0.0.1:1"
    ) == ((1, 100, False), 10)
    assert (
        replica.route_table.registered_body(
            cluster_name="c1", broker_name="broker-a", broker_id=1, broker_addr="10.0.0.1:1"
        )
        is None
    )  # another broker at the address: nothing known
    reg("10.0.0.1:1", 0, 1, unchanged=True)  # a periodic registration
    assert writer.take_change() is None
    reg("10.0.0.1:1", 0, 2, counter=2)
    reg("10.0.0.2:1", 1, 3)  # a slave: its topics are not applied, its fingerprint is kept
    same()
    assert replica.route_table.registered_bodies["10.0.0.2:1"][3] == (3, 100, False)
    writer.wipe_write_perm_of_broker("broker-a")  # S23: the topics fingerprint is forgotten
    same()
    assert replica.route_table.registered_bodies["10.0.0.1:1"][4] is None
    reg("10.0.0.3:1", 1, 4)  # broker id 1 moves to another address
    same()
    assert "10.0.0.2:1" not in replica.route_table.registered_bodies
    writer.unregister_broker(cluster_name="c1", broker_name="broker-a", broker_id=0, broker_addr="10.0.0.1:1")
    same()
    assert set(replica.route_table.registered_bodies) == {"10.0.0.3:1"}
    _, fresh = nameservers(tmp_path)
    fresh.apply_change(crossed(writer.replica_state()))
    assert fresh.route_table.registered_bodies == table.registered_bodies
    pieces = list(writer.replica_state_pieces(1))
    _, pieced = nameservers(tmp_path)
    for piece in pieces:
        pieced.apply_change(crossed(piece))
    assert pieced.route_table.registered_bodies == table.registered_bodies
