from namesrv.v1 import types_pb2 as _types_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RegisterBrokerRequest(_message.Message):
    __slots__ = ("cluster_name", "broker_name", "broker_id", "broker_addr", "ha_server_addr", "body", "body_crc32c", "compressed", "heartbeat_timeout_millis", "enable_acting_master", "zone_name", "instance_id")
    CLUSTER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_ADDR_FIELD_NUMBER: _ClassVar[int]
    HA_SERVER_ADDR_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    BODY_CRC32C_FIELD_NUMBER: _ClassVar[int]
    COMPRESSED_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_TIMEOUT_MILLIS_FIELD_NUMBER: _ClassVar[int]
    ENABLE_ACTING_MASTER_FIELD_NUMBER: _ClassVar[int]
    ZONE_NAME_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    cluster_name: str
    broker_name: str
    broker_id: int
    broker_addr: str
    ha_server_addr: str
    body: bytes
    body_crc32c: int
    compressed: bool
    heartbeat_timeout_millis: int
    enable_acting_master: bool
    zone_name: str
    instance_id: str
    def __init__(self, cluster_name: _Optional[str] = ..., broker_name: _Optional[str] = ..., broker_id: _Optional[int] = ..., broker_addr: _Optional[str] = ..., ha_server_addr: _Optional[str] = ..., body: _Optional[bytes] = ..., body_crc32c: _Optional[int] = ..., compressed: _Optional[bool] = ..., heartbeat_timeout_millis: _Optional[int] = ..., enable_acting_master: _Optional[bool] = ..., zone_name: _Optional[str] = ..., instance_id: _Optional[str] = ...) -> None: ...

class RegisterBrokerResponse(_message.Message):
    __slots__ = ("master_addr", "ha_server_addr", "kv_table", "conflicting_instance_id")
    class KvTableEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    MASTER_ADDR_FIELD_NUMBER: _ClassVar[int]
    HA_SERVER_ADDR_FIELD_NUMBER: _ClassVar[int]
    KV_TABLE_FIELD_NUMBER: _ClassVar[int]
    CONFLICTING_INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    master_addr: str
    ha_server_addr: str
    kv_table: _containers.ScalarMap[str, str]
    conflicting_instance_id: str
    def __init__(self, master_addr: _Optional[str] = ..., ha_server_addr: _Optional[str] = ..., kv_table: _Optional[_Mapping[str, str]] = ..., conflicting_instance_id: _Optional[str] = ...) -> None: ...

class UnregisterBrokerRequest(_message.Message):
    __slots__ = ("cluster_name", "broker_name", "broker_id", "broker_addr", "instance_id")
    CLUSTER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_ADDR_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    cluster_name: str
    broker_name: str
    broker_id: int
    broker_addr: str
    instance_id: str
    def __init__(self, cluster_name: _Optional[str] = ..., broker_name: _Optional[str] = ..., broker_id: _Optional[int] = ..., broker_addr: _Optional[str] = ..., instance_id: _Optional[str] = ...) -> None: ...

class UnregisterBrokerResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class BrokerHeartbeatRequest(_message.Message):
    __slots__ = ("cluster_name", "broker_name", "broker_id", "broker_addr")
    CLUSTER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_ADDR_FIELD_NUMBER: _ClassVar[int]
    cluster_name: str
    broker_name: str
    broker_id: int
    broker_addr: str
    def __init__(self, cluster_name: _Optional[str] = ..., broker_name: _Optional[str] = ..., broker_id: _Optional[int] = ..., broker_addr: _Optional[str] = ...) -> None: ...

class BrokerHeartbeatResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class QueryDataVersionRequest(_message.Message):
    __slots__ = ("cluster_name", "broker_name", "broker_id", "broker_addr", "data_version")
    CLUSTER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_ADDR_FIELD_NUMBER: _ClassVar[int]
    DATA_VERSION_FIELD_NUMBER: _ClassVar[int]
    cluster_name: str
    broker_name: str
    broker_id: int
    broker_addr: str
    data_version: _types_pb2.DataVersion
    def __init__(self, cluster_name: _Optional[str] = ..., broker_name: _Optional[str] = ..., broker_id: _Optional[int] = ..., broker_addr: _Optional[str] = ..., data_version: _Optional[_Union[_types_pb2.DataVersion, _Mapping]] = ...) -> None: ...

class QueryDataVersionResponse(_message.Message):
    __slots__ = ("changed", "name_server_data_version")
    CHANGED_FIELD_NUMBER: _ClassVar[int]
    NAME_SERVER_DATA_VERSION_FIELD_NUMBER: _ClassVar[int]
    changed: bool
    name_server_data_version: _types_pb2.DataVersion
    def __init__(self, changed: _Optional[bool] = ..., name_server_data_version: _Optional[_Union[_types_pb2.DataVersion, _Mapping]] = ...) -> None: ...

class PickupTopicRouteRequest(_message.Message):
    __slots__ = ("topic", "zone_name")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    ZONE_NAME_FIELD_NUMBER: _ClassVar[int]
    topic: str
    zone_name: str
    def __init__(self, topic: _Optional[str] = ..., zone_name: _Optional[str] = ...) -> None: ...

class PickupTopicRouteResponse(_message.Message):
    __slots__ = ("route",)
    ROUTE_FIELD_NUMBER: _ClassVar[int]
    route: _types_pb2.TopicRouteData
    def __init__(self, route: _Optional[_Union[_types_pb2.TopicRouteData, _Mapping]] = ...) -> None: ...

class GetBrokerClusterInfoRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetBrokerClusterInfoResponse(_message.Message):
    __slots__ = ("broker_addr_table", "cluster_addr_table")
    class BrokerAddrTableEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: _types_pb2.BrokerData
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_types_pb2.BrokerData, _Mapping]] = ...) -> None: ...
    class ClusterAddrTableEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: _types_pb2.BrokerNameList
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_types_pb2.BrokerNameList, _Mapping]] = ...) -> None: ...
    BROKER_ADDR_TABLE_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ADDR_TABLE_FIELD_NUMBER: _ClassVar[int]
    broker_addr_table: _containers.MessageMap[str, _types_pb2.BrokerData]
    cluster_addr_table: _containers.MessageMap[str, _types_pb2.BrokerNameList]
    def __init__(self, broker_addr_table: _Optional[_Mapping[str, _types_pb2.BrokerData]] = ..., cluster_addr_table: _Optional[_Mapping[str, _types_pb2.BrokerNameList]] = ...) -> None: ...

class GetAllTopicListRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetAllTopicListResponse(_message.Message):
    __slots__ = ("topics",)
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, topics: _Optional[_Iterable[str]] = ...) -> None: ...

class GetTopicsByClusterRequest(_message.Message):
    __slots__ = ("cluster_name",)
    CLUSTER_NAME_FIELD_NUMBER: _ClassVar[int]
    cluster_name: str
    def __init__(self, cluster_name: _Optional[str] = ...) -> None: ...

class GetTopicsByClusterResponse(_message.Message):
    __slots__ = ("topics",)
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, topics: _Optional[_Iterable[str]] = ...) -> None: ...

class GetSystemTopicListRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetSystemTopicListResponse(_message.Message):
    __slots__ = ("topics", "broker_addr")
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    BROKER_ADDR_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedScalarFieldContainer[str]
    broker_addr: str
    def __init__(self, topics: _Optional[_Iterable[str]] = ..., broker_addr: _Optional[str] = ...) -> None: ...

class GetUnitTopicListRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetUnitTopicListResponse(_message.Message):
    __slots__ = ("topics",)
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, topics: _Optional[_Iterable[str]] = ...) -> None: ...

class GetHasUnitSubTopicListRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetHasUnitSubTopicListResponse(_message.Message):
    __slots__ = ("topics",)
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, topics: _Optional[_Iterable[str]] = ...) -> None: ...

class GetHasUnitSubUnUnitTopicListRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetHasUnitSubUnUnitTopicListResponse(_message.Message):
    __slots__ = ("topics",)
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, topics: _Optional[_Iterable[str]] = ...) -> None: ...

class SessionHello(_message.Message):
    __slots__ = ("cluster_name", "broker_name", "broker_id", "broker_addr", "instance_id")
    CLUSTER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_ADDR_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    cluster_name: str
    broker_name: str
    broker_id: int
    broker_addr: str
    instance_id: str
    def __init__(self, cluster_name: _Optional[str] = ..., broker_name: _Optional[str] = ..., broker_id: _Optional[int] = ..., broker_addr: _Optional[str] = ..., instance_id: _Optional[str] = ...) -> None: ...

class SessionHeartbeat(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class SessionHandover(_message.Message):
    __slots__ = ("reason",)
    REASON_FIELD_NUMBER: _ClassVar[int]
    reason: str
    def __init__(self, reason: _Optional[str] = ...) -> None: ...

class OpenBrokerSessionRequest(_message.Message):
    __slots__ = ("hello", "heartbeat", "handover")
    HELLO_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    HANDOVER_FIELD_NUMBER: _ClassVar[int]
    hello: SessionHello
    heartbeat: SessionHeartbeat
    handover: SessionHandover
    def __init__(self, hello: _Optional[_Union[SessionHello, _Mapping]] = ..., heartbeat: _Optional[_Union[SessionHeartbeat, _Mapping]] = ..., handover: _Optional[_Union[SessionHandover, _Mapping]] = ...) -> None: ...

class SessionAccepted(_message.Message):
    __slots__ = ("heartbeat_timeout_millis",)
    HEARTBEAT_TIMEOUT_MILLIS_FIELD_NUMBER: _ClassVar[int]
    heartbeat_timeout_millis: int
    def __init__(self, heartbeat_timeout_millis: _Optional[int] = ...) -> None: ...

class SessionRegisterRequired(_message.Message):
    __slots__ = ("reason",)
    REASON_FIELD_NUMBER: _ClassVar[int]
    reason: str
    def __init__(self, reason: _Optional[str] = ...) -> None: ...

class SessionMasterChanged(_message.Message):
    __slots__ = ("master_addr", "ha_server_addr")
    MASTER_ADDR_FIELD_NUMBER: _ClassVar[int]
    HA_SERVER_ADDR_FIELD_NUMBER: _ClassVar[int]
    master_addr: str
    ha_server_addr: str
    def __init__(self, master_addr: _Optional[str] = ..., ha_server_addr: _Optional[str] = ...) -> None: ...

class OpenBrokerSessionResponse(_message.Message):
    __slots__ = ("accepted", "register_required", "master_changed")
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    REGISTER_REQUIRED_FIELD_NUMBER: _ClassVar[int]
    MASTER_CHANGED_FIELD_NUMBER: _ClassVar[int]
    accepted: SessionAccepted
    register_required: SessionRegisterRequired
    master_changed: SessionMasterChanged
    def __init__(self, accepted: _Optional[_Union[SessionAccepted, _Mapping]] = ..., register_required: _Optional[_Union[SessionRegisterRequired, _Mapping]] = ..., master_changed: _Optional[_Union[SessionMasterChanged, _Mapping]] = ...) -> None: ...

class PickupTopicRoutesRequest(_message.Message):
    __slots__ = ("topics", "zone_name")
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    ZONE_NAME_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedScalarFieldContainer[str]
    zone_name: str
    def __init__(self, topics: _Optional[_Iterable[str]] = ..., zone_name: _Optional[str] = ...) -> None: ...

class PickupTopicRoutesResponse(_message.Message):
    __slots__ = ("routes", "not_found")
    class RoutesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: _types_pb2.TopicRouteData
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_types_pb2.TopicRouteData, _Mapping]] = ...) -> None: ...
    ROUTES_FIELD_NUMBER: _ClassVar[int]
    NOT_FOUND_FIELD_NUMBER: _ClassVar[int]
    routes: _containers.MessageMap[str, _types_pb2.TopicRouteData]
    not_found: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, routes: _Optional[_Mapping[str, _types_pb2.TopicRouteData]] = ..., not_found: _Optional[_Iterable[str]] = ...) -> None: ...

class WatchTopicRoutesRequest(_message.Message):
    __slots__ = ("topics", "zone_name")
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    ZONE_NAME_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedScalarFieldContainer[str]
    zone_name: str
    def __init__(self, topics: _Optional[_Iterable[str]] = ..., zone_name: _Optional[str] = ...) -> None: ...

class TopicRouteChange(_message.Message):
    __slots__ = ("topic", "route", "removed")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    ROUTE_FIELD_NUMBER: _ClassVar[int]
    REMOVED_FIELD_NUMBER: _ClassVar[int]
    topic: str
    route: _types_pb2.TopicRouteData
    removed: bool
    def __init__(self, topic: _Optional[str] = ..., route: _Optional[_Union[_types_pb2.TopicRouteData, _Mapping]] = ..., removed: _Optional[bool] = ...) -> None: ...

class WatchTopicRoutesResponse(_message.Message):
    __slots__ = ("revision", "changes")
    REVISION_FIELD_NUMBER: _ClassVar[int]
    CHANGES_FIELD_NUMBER: _ClassVar[int]
    revision: int
    changes: _containers.RepeatedCompositeFieldContainer[TopicRouteChange]
    def __init__(self, revision: _Optional[int] = ..., changes: _Optional[_Iterable[_Union[TopicRouteChange, _Mapping]]] = ...) -> None: ...
