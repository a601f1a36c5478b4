"""Protobuf <-> domain records, for the servicers. Pure functions, no logic beyond copying fields."""

from __future__ import annotations

from typing import Protocol

from namesrv.v1 import admin_service_pb2 as admin_pb2
from namesrv.v1 import name_server_service_pb2 as ns_pb2
from namesrv.v1 import types_pb2
from namesrv_grpc.core.body import BrokerIdentity
from namesrv_grpc.core.model import BrokerData, BrokerLiveInfo, ClusterInfo, QueueData, TopicRouteData
from namesrv_grpc.wire.grpc_register_body import data_version_to_proto, mapping_to_proto

PROTOCOL_TO_PROTO = {
    "grpc": admin_pb2.REGISTRATION_PROTOCOL_GRPC,
    "remoting": admin_pb2.REGISTRATION_PROTOCOL_REMOTING,
}
"""``BrokerLiveInfo.protocol`` -> ``namesrv.v1.RegistrationProtocol``."""


class _NamesABroker(Protocol):
    cluster_name: str
    broker_name: str
    broker_id: int
    broker_addr: str


def identity_from_proto(message: _NamesABroker) -> BrokerIdentity:
    """The four fields that name a broker (``cluster_name``, ``broker_name``, ``broker_id``,
    ``broker_addr``), as every broker request and a session's hello carry them."""
    return BrokerIdentity(message.cluster_name, message.broker_name, message.broker_id, message.broker_addr)


def queue_data_to_proto(queue_data: QueueData) -> types_pb2.QueueData:
    """QueueData -> ``namesrv.v1.QueueData``."""
    return types_pb2.QueueData(
        broker_name=queue_data.broker_name,
        read_queue_nums=queue_data.read_queue_nums,
        write_queue_nums=queue_data.write_queue_nums,
        perm=queue_data.perm,
        topic_sys_flag=queue_data.topic_sys_flag,
    )


def queue_data_from_proto(message: types_pb2.QueueData) -> QueueData:
    """``namesrv.v1.QueueData`` -> QueueData (not validated)."""
    return QueueData(
        broker_name=message.broker_name,
        read_queue_nums=message.read_queue_nums,
        write_queue_nums=message.write_queue_nums,
        perm=message.perm,
        topic_sys_flag=message.topic_sys_flag,
    )


def broker_data_to_proto(broker_data: BrokerData) -> types_pb2.BrokerData:
    """BrokerData -> ``namesrv.v1.BrokerData``."""
    return types_pb2.BrokerData(
        cluster=broker_data.cluster,
        broker_name=broker_data.broker_name,
        broker_addrs=broker_data.broker_addrs,
        zone_name=broker_data.zone_name,
        enable_acting_master=broker_data.enable_acting_master,
    )


def route_to_proto(route: TopicRouteData) -> types_pb2.TopicRouteData:
    """TopicRouteData -> ``namesrv.v1.TopicRouteData``."""
    message = types_pb2.TopicRouteData(
        queue_datas=[queue_data_to_proto(q) for q in route.queue_datas],
        broker_datas=[broker_data_to_proto(b) for b in route.broker_datas],
        order_topic_conf=route.order_topic_conf,
    )
    for addr, servers in route.filter_server_table.items():
        message.filter_server_table[addr].filter_server_addrs.extend(servers)
    for bname, mapping in route.topic_queue_mapping_by_broker.items():
        message.topic_queue_mapping_by_broker[bname].CopyFrom(mapping_to_proto(mapping))
    return message


def cluster_info_to_proto(info: ClusterInfo) -> ns_pb2.GetBrokerClusterInfoResponse:
    """ClusterInfo -> ``GetBrokerClusterInfoResponse``."""
    message = ns_pb2.GetBrokerClusterInfoResponse()
    for name, broker_data in info.broker_addr_table.items():
        message.broker_addr_table[name].CopyFrom(broker_data_to_proto(broker_data))
    for cluster, names in info.cluster_addr_table.items():
        message.cluster_addr_table[cluster].broker_names.extend(names)
    return message


def broker_live_entry_to_proto(broker_addr: str, live: BrokerLiveInfo, now_millis: int) -> admin_pb2.BrokerLiveEntry:
    """One live-table entry -> ``namesrv.v1.BrokerLiveEntry``; ``age_millis`` against ``now_millis``."""
    return admin_pb2.BrokerLiveEntry(
        broker_addr=broker_addr,
        cluster_name=live.cluster,
        broker_name=live.broker_name,
        broker_id=live.broker_id,
        last_update_timestamp_millis=live.last_update_timestamp,
        age_millis=max(0, now_millis - live.last_update_timestamp),
        heartbeat_timeout_millis=live.heartbeat_timeout_millis,
        data_version=data_version_to_proto(live.data_version),
        ha_server_addr=live.ha_server_addr,
        session=live.session_id != 0,
        protocol=PROTOCOL_TO_PROTO.get(live.protocol, admin_pb2.REGISTRATION_PROTOCOL_UNSPECIFIED),
        instance_id=live.instance_id,
    )
