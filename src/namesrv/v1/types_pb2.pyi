from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class TopicFilterType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TOPIC_FILTER_TYPE_UNSPECIFIED: _ClassVar[TopicFilterType]
    TOPIC_FILTER_TYPE_SINGLE_TAG: _ClassVar[TopicFilterType]
    TOPIC_FILTER_TYPE_MULTI_TAG: _ClassVar[TopicFilterType]
TOPIC_FILTER_TYPE_UNSPECIFIED: TopicFilterType
TOPIC_FILTER_TYPE_SINGLE_TAG: TopicFilterType
TOPIC_FILTER_TYPE_MULTI_TAG: TopicFilterType

class DataVersion(_message.Message):
    __slots__ = ("state_version", "timestamp", "counter")
    STATE_VERSION_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    COUNTER_FIELD_NUMBER: _ClassVar[int]
    state_version: int
    timestamp: int
    counter: int
    def __init__(self, state_version: _Optional[int] = ..., timestamp: _Optional[int] = ..., counter: _Optional[int] = ...) -> None: ...

class TopicConfig(_message.Message):
    __slots__ = ("topic_name", "read_queue_nums", "write_queue_nums", "perm", "topic_sys_flag", "order", "topic_filter_type", "attributes")
    class AttributesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    TOPIC_NAME_FIELD_NUMBER: _ClassVar[int]
    READ_QUEUE_NUMS_FIELD_NUMBER: _ClassVar[int]
    WRITE_QUEUE_NUMS_FIELD_NUMBER: _ClassVar[int]
    PERM_FIELD_NUMBER: _ClassVar[int]
    TOPIC_SYS_FLAG_FIELD_NUMBER: _ClassVar[int]
    ORDER_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FILTER_TYPE_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    topic_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int
    order: bool
    topic_filter_type: TopicFilterType
    attributes: _containers.ScalarMap[str, str]
    def __init__(self, topic_name: _Optional[str] = ..., read_queue_nums: _Optional[int] = ..., write_queue_nums: _Optional[int] = ..., perm: _Optional[int] = ..., topic_sys_flag: _Optional[int] = ..., order: _Optional[bool] = ..., topic_filter_type: _Optional[_Union[TopicFilterType, str]] = ..., attributes: _Optional[_Mapping[str, str]] = ...) -> None: ...

class RegisterBrokerBody(_message.Message):
    __slots__ = ("topic_config_table", "data_version", "filter_server_list", "topic_queue_mapping_info_map")
    class TopicConfigTableEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: TopicConfig
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[TopicConfig, _Mapping]] = ...) -> None: ...
    class TopicQueueMappingInfoMapEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: TopicQueueMappingInfo
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[TopicQueueMappingInfo, _Mapping]] = ...) -> None: ...
    TOPIC_CONFIG_TABLE_FIELD_NUMBER: _ClassVar[int]
    DATA_VERSION_FIELD_NUMBER: _ClassVar[int]
    FILTER_SERVER_LIST_FIELD_NUMBER: _ClassVar[int]
    TOPIC_QUEUE_MAPPING_INFO_MAP_FIELD_NUMBER: _ClassVar[int]
    topic_config_table: _containers.MessageMap[str, TopicConfig]
    data_version: DataVersion
    filter_server_list: _containers.RepeatedScalarFieldContainer[str]
    topic_queue_mapping_info_map: _containers.MessageMap[str, TopicQueueMappingInfo]
    def __init__(self, topic_config_table: _Optional[_Mapping[str, TopicConfig]] = ..., data_version: _Optional[_Union[DataVersion, _Mapping]] = ..., filter_server_list: _Optional[_Iterable[str]] = ..., topic_queue_mapping_info_map: _Optional[_Mapping[str, TopicQueueMappingInfo]] = ...) -> None: ...

class TopicQueueMappingInfo(_message.Message):
    __slots__ = ("topic", "scope", "total_queues", "bname", "epoch", "dirty", "curr_id_map")
    class CurrIdMapEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: int
        def __init__(self, key: _Optional[int] = ..., value: _Optional[int] = ...) -> None: ...
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    TOTAL_QUEUES_FIELD_NUMBER: _ClassVar[int]
    BNAME_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    DIRTY_FIELD_NUMBER: _ClassVar[int]
    CURR_ID_MAP_FIELD_NUMBER: _ClassVar[int]
    topic: str
    scope: str
    total_queues: int
    bname: str
    epoch: int
    dirty: bool
    curr_id_map: _containers.ScalarMap[int, int]
    def __init__(self, topic: _Optional[str] = ..., scope: _Optional[str] = ..., total_queues: _Optional[int] = ..., bname: _Optional[str] = ..., epoch: _Optional[int] = ..., dirty: _Optional[bool] = ..., curr_id_map: _Optional[_Mapping[int, int]] = ...) -> None: ...

class QueueData(_message.Message):
    __slots__ = ("broker_name", "read_queue_nums", "write_queue_nums", "perm", "topic_sys_flag")
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    READ_QUEUE_NUMS_FIELD_NUMBER: _ClassVar[int]
    WRITE_QUEUE_NUMS_FIELD_NUMBER: _ClassVar[int]
    PERM_FIELD_NUMBER: _ClassVar[int]
    TOPIC_SYS_FLAG_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int
    def __init__(self, broker_name: _Optional[str] = ..., read_queue_nums: _Optional[int] = ..., write_queue_nums: _Optional[int] = ..., perm: _Optional[int] = ..., topic_sys_flag: _Optional[int] = ...) -> None: ...

class BrokerData(_message.Message):
    __slots__ = ("cluster", "broker_name", "broker_addrs", "zone_name", "enable_acting_master")
    class BrokerAddrsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: str
        def __init__(self, key: _Optional[int] = ..., value: _Optional[str] = ...) -> None: ...
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_ADDRS_FIELD_NUMBER: _ClassVar[int]
    ZONE_NAME_FIELD_NUMBER: _ClassVar[int]
    ENABLE_ACTING_MASTER_FIELD_NUMBER: _ClassVar[int]
    cluster: str
    broker_name: str
    broker_addrs: _containers.ScalarMap[int, str]
    zone_name: str
    enable_acting_master: bool
    def __init__(self, cluster: _Optional[str] = ..., broker_name: _Optional[str] = ..., broker_addrs: _Optional[_Mapping[int, str]] = ..., zone_name: _Optional[str] = ..., enable_acting_master: _Optional[bool] = ...) -> None: ...

class FilterServerList(_message.Message):
    __slots__ = ("filter_server_addrs",)
    FILTER_SERVER_ADDRS_FIELD_NUMBER: _ClassVar[int]
    filter_server_addrs: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, filter_server_addrs: _Optional[_Iterable[str]] = ...) -> None: ...

class BrokerNameList(_message.Message):
    __slots__ = ("broker_names",)
    BROKER_NAMES_FIELD_NUMBER: _ClassVar[int]
    broker_names: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, broker_names: _Optional[_Iterable[str]] = ...) -> None: ...

class TopicRouteData(_message.Message):
    __slots__ = ("queue_datas", "broker_datas", "filter_server_table", "order_topic_conf", "topic_queue_mapping_by_broker")
    class FilterServerTableEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: FilterServerList
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[FilterServerList, _Mapping]] = ...) -> None: ...
    class TopicQueueMappingByBrokerEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: TopicQueueMappingInfo
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[TopicQueueMappingInfo, _Mapping]] = ...) -> None: ...
    QUEUE_DATAS_FIELD_NUMBER: _ClassVar[int]
    BROKER_DATAS_FIELD_NUMBER: _ClassVar[int]
    FILTER_SERVER_TABLE_FIELD_NUMBER: _ClassVar[int]
    ORDER_TOPIC_CONF_FIELD_NUMBER: _ClassVar[int]
    TOPIC_QUEUE_MAPPING_BY_BROKER_FIELD_NUMBER: _ClassVar[int]
    queue_datas: _containers.RepeatedCompositeFieldContainer[QueueData]
    broker_datas: _containers.RepeatedCompositeFieldContainer[BrokerData]
    filter_server_table: _containers.MessageMap[str, FilterServerList]
    order_topic_conf: str
    topic_queue_mapping_by_broker: _containers.MessageMap[str, TopicQueueMappingInfo]
    def __init__(self, queue_datas: _Optional[_Iterable[_Union[QueueData, _Mapping]]] = ..., broker_datas: _Optional[_Iterable[_Union[BrokerData, _Mapping]]] = ..., filter_server_table: _Optional[_Mapping[str, FilterServerList]] = ..., order_topic_conf: _Optional[str] = ..., topic_queue_mapping_by_broker: _Optional[_Mapping[str, TopicQueueMappingInfo]] = ...) -> None: ...
