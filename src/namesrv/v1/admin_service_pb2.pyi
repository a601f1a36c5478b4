from namesrv.v1 import types_pb2 as _types_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RegistrationProtocol(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    REGISTRATION_PROTOCOL_UNSPECIFIED: _ClassVar[RegistrationProtocol]
    REGISTRATION_PROTOCOL_GRPC: _ClassVar[RegistrationProtocol]
    REGISTRATION_PROTOCOL_REMOTING: _ClassVar[RegistrationProtocol]
REGISTRATION_PROTOCOL_UNSPECIFIED: RegistrationProtocol
REGISTRATION_PROTOCOL_GRPC: RegistrationProtocol
REGISTRATION_PROTOCOL_REMOTING: RegistrationProtocol

class WipeWritePermOfBrokerRequest(_message.Message):
    __slots__ = ("broker_name",)
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    def __init__(self, broker_name: _Optional[str] = ...) -> None: ...

class WipeWritePermOfBrokerResponse(_message.Message):
    __slots__ = ("wipe_topic_count",)
    WIPE_TOPIC_COUNT_FIELD_NUMBER: _ClassVar[int]
    wipe_topic_count: int
    def __init__(self, wipe_topic_count: _Optional[int] = ...) -> None: ...

class AddWritePermOfBrokerRequest(_message.Message):
    __slots__ = ("broker_name",)
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    def __init__(self, broker_name: _Optional[str] = ...) -> None: ...

class AddWritePermOfBrokerResponse(_message.Message):
    __slots__ = ("add_topic_count",)
    ADD_TOPIC_COUNT_FIELD_NUMBER: _ClassVar[int]
    add_topic_count: int
    def __init__(self, add_topic_count: _Optional[int] = ...) -> None: ...

class DeleteTopicRequest(_message.Message):
    __slots__ = ("topic", "cluster_name")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_NAME_FIELD_NUMBER: _ClassVar[int]
    topic: str
    cluster_name: str
    def __init__(self, topic: _Optional[str] = ..., cluster_name: _Optional[str] = ...) -> None: ...

class DeleteTopicResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RegisterTopicRequest(_message.Message):
    __slots__ = ("topic", "queue_datas")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_DATAS_FIELD_NUMBER: _ClassVar[int]
    topic: str
    queue_datas: _containers.RepeatedCompositeFieldContainer[_types_pb2.QueueData]
    def __init__(self, topic: _Optional[str] = ..., queue_datas: _Optional[_Iterable[_Union[_types_pb2.QueueData, _Mapping]]] = ...) -> None: ...

class RegisterTopicResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetNamesrvConfigRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetNamesrvConfigResponse(_message.Message):
    __slots__ = ("config",)
    class ConfigEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    config: _containers.ScalarMap[str, str]
    def __init__(self, config: _Optional[_Mapping[str, str]] = ...) -> None: ...

class UpdateNamesrvConfigRequest(_message.Message):
    __slots__ = ("config",)
    class ConfigEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    config: _containers.ScalarMap[str, str]
    def __init__(self, config: _Optional[_Mapping[str, str]] = ...) -> None: ...

class UpdateNamesrvConfigResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ExportRouteSnapshotRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ExportRouteSnapshotResponse(_message.Message):
    __slots__ = ("snapshot_time_millis", "namesrv", "snapshot_dir", "file_name", "topics", "queue_datas", "broker_names", "broker_addrs", "clusters", "schema_version")
    SNAPSHOT_TIME_MILLIS_FIELD_NUMBER: _ClassVar[int]
    NAMESRV_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_DIR_FIELD_NUMBER: _ClassVar[int]
    FILE_NAME_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    QUEUE_DATAS_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAMES_FIELD_NUMBER: _ClassVar[int]
    BROKER_ADDRS_FIELD_NUMBER: _ClassVar[int]
    CLUSTERS_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    snapshot_time_millis: int
    namesrv: str
    snapshot_dir: str
    file_name: str
    topics: int
    queue_datas: int
    broker_names: int
    broker_addrs: int
    clusters: int
    schema_version: int
    def __init__(self, snapshot_time_millis: _Optional[int] = ..., namesrv: _Optional[str] = ..., snapshot_dir: _Optional[str] = ..., file_name: _Optional[str] = ..., topics: _Optional[int] = ..., queue_datas: _Optional[int] = ..., broker_names: _Optional[int] = ..., broker_addrs: _Optional[int] = ..., clusters: _Optional[int] = ..., schema_version: _Optional[int] = ...) -> None: ...

class GetBrokerLiveTableRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetBrokerLiveTableResponse(_message.Message):
    __slots__ = ("brokers", "now_millis")
    BROKERS_FIELD_NUMBER: _ClassVar[int]
    NOW_MILLIS_FIELD_NUMBER: _ClassVar[int]
    brokers: _containers.RepeatedCompositeFieldContainer[BrokerLiveEntry]
    now_millis: int
    def __init__(self, brokers: _Optional[_Iterable[_Union[BrokerLiveEntry, _Mapping]]] = ..., now_millis: _Optional[int] = ...) -> None: ...

class BrokerLiveEntry(_message.Message):
    __slots__ = ("broker_addr", "cluster_name", "broker_name", "broker_id", "last_update_timestamp_millis", "age_millis", "heartbeat_timeout_millis", "data_version", "ha_server_addr", "session", "protocol", "instance_id")
    BROKER_ADDR_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    LAST_UPDATE_TIMESTAMP_MILLIS_FIELD_NUMBER: _ClassVar[int]
    AGE_MILLIS_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_TIMEOUT_MILLIS_FIELD_NUMBER: _ClassVar[int]
    DATA_VERSION_FIELD_NUMBER: _ClassVar[int]
    HA_SERVER_ADDR_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    broker_addr: str
    cluster_name: str
    broker_name: str
    broker_id: int
    last_update_timestamp_millis: int
    age_millis: int
    heartbeat_timeout_millis: int
    data_version: _types_pb2.DataVersion
    ha_server_addr: str
    session: bool
    protocol: RegistrationProtocol
    instance_id: str
    def __init__(self, broker_addr: _Optional[str] = ..., cluster_name: _Optional[str] = ..., broker_name: _Optional[str] = ..., broker_id: _Optional[int] = ..., last_update_timestamp_millis: _Optional[int] = ..., age_millis: _Optional[int] = ..., heartbeat_timeout_millis: _Optional[int] = ..., data_version: _Optional[_Union[_types_pb2.DataVersion, _Mapping]] = ..., ha_server_addr: _Optional[str] = ..., session: _Optional[bool] = ..., protocol: _Optional[_Union[RegistrationProtocol, str]] = ..., instance_id: _Optional[str] = ...) -> None: ...
