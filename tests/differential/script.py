"""The differential script: remoting requests sent, in this order, to a fresh Java NameServer and to a
fresh one of ours (``tests/test_differential.py``). Every one of the 23 request codes appears, valid
and invalid: unknown topic, bad checksum, missing header field, wrong types, both header
serializations, compressed and plain REGISTER_BROKER bodies, 4.x and 5.x brokers.

REGISTER_BROKER bodies are not written by us: a :class:`JavaBody` is encoded by RocketMQ's own
``RegisterBrokerBody.encode`` (4.9.7's jars for ``release="4"``, 5.5.0's for ``"5"``, see
``tests/differential/java/``), so what a real broker of each line sends is what both servers get.

Steps share state (registrations, KV config) in script order, like a real cluster's history. Every
broker's first registration carries at least two topics: RocketMQ 5.x refuses a first registration
with exactly one topic (``RouteInfoManager.registerBroker``), a rule of its own step below.

Step names are ``group/what``; ``docs/compatibility.md`` ("Intended differences") refers to them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from namesrv_grpc.remoting.codes import RequestCode as R
from namesrv_grpc.remoting.codes import SerializeType

V5 = 513
"""``MQVersion.CURRENT_VERSION`` of RocketMQ 5.5.0 (what a 5.5.0 broker or client puts in ``version``)."""
V4 = 407
"""``MQVersion.CURRENT_VERSION`` of RocketMQ 4.9.7."""
V_OLD = 317
"""A client before 4.9.4 (``MQVersion.Version.V4_5_2``): gets routes in fastjson's form (unquoted int keys)."""

CRC = "<crc32 of the body>"
"""An extFields value replaced by ``CRC32(body) & 0x7FFFFFFF`` (what a broker sends as ``bodyCrc32``)."""

ROCKETMQ = SerializeType.ROCKETMQ

TS = 1_700_000_000_000
"""The DataVersion timestamp of every body (ms): fixed, so both servers store the same."""


@dataclass(frozen=True)
class Topic:
    """One TopicConfig of a body (``TopicConfig``; perm 6 = read+write, sys_flag 1 = unit, 2 = has unit sub)."""

    name: str
    read: int = 4
    write: int = 4
    perm: int = 6
    sys_flag: int = 0
    order: bool = False
    attributes: tuple[tuple[str, str], ...] = ()

    def spec(self) -> dict[str, object]:
        return {
            "name": self.name,
            "read": self.read,
            "write": self.write,
            "perm": self.perm,
            "sysFlag": self.sys_flag,
            "order": self.order,
            "attributes": dict(self.attributes),
        }


@dataclass(frozen=True)
class JavaBody:
    """A REGISTER_BROKER body as RocketMQ ``release`` "4" (4.9.7) or "5" (5.5.0) encodes it."""

    release: str
    compressed: bool
    topics: tuple[Topic, ...]
    counter: int = 1
    state_version: int = 0
    filter_servers: tuple[str, ...] = ()

    def spec(self) -> dict[str, object]:
        return {
            "compressed": self.compressed,
            "counter": self.counter,
            "timestamp": TS,
            "stateVersion": self.state_version,
            "topics": [t.spec() for t in self.topics],
            "filterServers": list(self.filter_servers),
        }


@dataclass(frozen=True)
class Step:
    """One request. ``conn`` names the connection it goes over (a broker's registrations end with its
    connection, so each broker has its own). ``json_ext`` replaces the JSON header's extFields with
    these raw JSON values (numbers, booleans: wrong types); ``raw`` is sent as it is instead of a command.
    ``body_kind`` says how the answer's body is read: ``json`` (RocketMQ's JSON, fastjson quirks
    included) or ``properties`` (GET_NAMESRV_CONFIG). ``settle`` waits this long (s) after the step:
    Java applies UNREGISTER_BROKER in a background thread (``BatchUnregistrationService``)."""

    name: str
    code: int
    ext: Mapping[str, str] = field(default_factory=dict)
    body: bytes | JavaBody = b""
    serialize_type: int = SerializeType.JSON
    version: int = V5
    conn: str = "admin"
    oneway: bool = False
    json_ext: Mapping[str, object] | None = None
    raw: bytes | None = None
    body_kind: str = "json"
    settle: float = 0.0


def broker(cluster: str, name: str, broker_id: int, addr: str, **more: str) -> dict[str, str]:
    """The identity fields every broker request header carries."""
    return {"clusterName": cluster, "brokerName": name, "brokerId": str(broker_id), "brokerAddr": addr, **more}


B1 = broker("c1", "b1", 0, "127.0.0.1:10911")
B1_SLAVE = broker("c1", "b1", 1, "127.0.0.1:10921")
B4 = broker("c1", "b4", 0, "127.0.0.1:10931")
B4Z = broker("c2", "b4z", 0, "127.0.0.1:10941")
BZ = broker("c1", "bz", 0, "127.0.0.1:10951")


def register5(ident: dict[str, str], body: JavaBody, **more: str) -> dict[str, str]:
    """A 5.x broker's REGISTER_BROKER header (``BrokerOuterAPI.registerBroker``)."""
    return {
        **ident,
        "haServerAddr": ident["brokerAddr"].rsplit(":", 1)[0] + ":10912",
        "heartbeatTimeoutMillis": "120000",
        "enableActingMaster": "false",
        "compressed": "true" if body.compressed else "false",
        "bodyCrc32": CRC,
        **more,
    }


def register4(ident: dict[str, str], body: JavaBody) -> dict[str, str]:
    """A 4.9.x broker's REGISTER_BROKER header (no heartbeat timeout, no acting master)."""
    return {
        **ident,
        "haServerAddr": ident["brokerAddr"].rsplit(":", 1)[0] + ":10912",
        "compressed": "true" if body.compressed else "false",
        "bodyCrc32": CRC,
    }


B1_TOPICS = (
    Topic("T-a", attributes=(("+message.type", "NORMAL"),)),
    Topic("T-b", 8, 8),
    Topic("T-order", 2, 2, order=True),
    Topic("T-ro", perm=4),
    Topic("T-unit", sys_flag=1),
    Topic("T-unit-sub", sys_flag=2),
    Topic("T-unit-both", sys_flag=3),
    Topic("%RETRY%group-1", 1, 1),
    Topic("c1", 16, 16, perm=7),
    Topic("b1", 1, 1, perm=7),
)
B1_BODY = JavaBody("5", False, B1_TOPICS, counter=3)
B1_SLAVE_BODY = JavaBody("5", True, B1_TOPICS, counter=3)
B1_BODY_V4 = JavaBody("5", False, B1_TOPICS, counter=4)
B4_BODY = JavaBody("4", False, (Topic("T-a", 2, 2), Topic("T-four"), Topic("b4", 1, 1, perm=7)), counter=7)
B4Z_BODY = JavaBody("4", True, (Topic("T-four"), Topic("T-zip", 3, 3)), counter=2, filter_servers=("127.0.0.1:30000",))
BZ_BODY = JavaBody("5", False, (Topic("T-zone"), Topic("T-a")))
ONE_TOPIC_BODY = JavaBody("5", False, (Topic("T-lonely"),))

ROUTE_T_NEW = (
    b'{"brokerDatas":[],"queueDatas":[{"brokerName":"b1","perm":6,"readQueueNums":2,'
    b'"topicSysFlag":0,"writeQueueNums":2}]}'
)
DATA_VERSION_SAME = b'{"counter":3,"stateVersion":0,"timestamp":1700000000000}'
DATA_VERSION_B1_V4 = b'{"counter":4,"stateVersion":0,"timestamp":1700000000000}'
DATA_VERSION_OTHER = b'{"counter":9,"stateVersion":0,"timestamp":1700000000000}'

TOPIC_LISTS: tuple[tuple[str, int, dict[str, str]], ...] = (
    ("all", R.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, {}),
    ("by-cluster", R.GET_TOPICS_BY_CLUSTER, {"cluster": "c1"}),
    ("system", R.GET_SYSTEM_TOPIC_LIST_FROM_NS, {}),
    ("unit", R.GET_UNIT_TOPIC_LIST, {}),
    ("has-unit-sub", R.GET_HAS_UNIT_SUB_TOPIC_LIST, {}),
    ("has-unit-sub-ununit", R.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST, {}),
)


def _lists(when: str) -> list[Step]:
    return [Step(f"{when}/topic-list-{name}", code, ext) for name, code, ext in TOPIC_LISTS]


def _route(name: str, topic: str, **kw: object) -> Step:
    return Step(name, R.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}, **kw)  # type: ignore[arg-type]


SCRIPT: list[Step] = [
    # ----------------------------------------------------------------- an empty NameServer
    _route("empty/route-unknown-topic", "T-a"),
    _route("empty/route-unknown-topic-rocketmq-header", "T-a", serialize_type=ROCKETMQ),
    Step("empty/cluster-info", R.GET_BROKER_CLUSTER_INFO),
    *_lists("empty"),
    Step("empty/kv-get-missing", R.GET_KV_CONFIG, {"namespace": "N1", "key": "k1"}),
    Step("empty/kv-list-missing", R.GET_KVLIST_BY_NAMESPACE, {"namespace": "N1"}),
    Step("empty/member-group-unknown", R.GET_BROKER_MEMBER_GROUP, {"clusterName": "c1", "brokerName": "b1"}),
    Step("empty/query-data-version-unknown", R.QUERY_DATA_VERSION, B1, DATA_VERSION_SAME),
    Step("empty/heartbeat-unknown-broker", R.BROKER_HEARTBEAT, B1),
    Step("empty/unregister-unknown-broker", R.UNREGISTER_BROKER, B1, settle=0.3),
    Step("empty/wipe-write-perm-unknown", R.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "nope"}),
    Step("empty/add-write-perm-unknown", R.ADD_WRITE_PERM_OF_BROKER, {"brokerName": "nope"}),
    Step("empty/unknown-request-code", 9999),
    Step("empty/unknown-request-code-rocketmq-header", 9999, serialize_type=ROCKETMQ),
    # ----------------------------------------------------------------- invalid requests (no state change)
    Step("invalid/route-missing-topic", R.GET_ROUTEINFO_BY_TOPIC),
    Step("invalid/kv-put-missing-key", R.PUT_KV_CONFIG, {"namespace": "N1", "value": "v"}),
    Step("invalid/kv-get-missing-namespace", R.GET_KV_CONFIG, {"key": "k1"}),
    Step("invalid/kv-delete-missing-fields", R.DELETE_KV_CONFIG),
    Step("invalid/kv-list-missing-namespace", R.GET_KVLIST_BY_NAMESPACE),
    Step("invalid/topics-by-cluster-missing-cluster", R.GET_TOPICS_BY_CLUSTER),
    Step("invalid/member-group-missing-fields", R.GET_BROKER_MEMBER_GROUP),
    Step("invalid/wipe-missing-broker-name", R.WIPE_WRITE_PERM_OF_BROKER),
    Step("invalid/add-missing-broker-name", R.ADD_WRITE_PERM_OF_BROKER),
    Step("invalid/delete-topic-missing-topic", R.DELETE_TOPIC_IN_NAMESRV),
    Step("invalid/register-topic-missing-topic", R.REGISTER_TOPIC_IN_NAMESRV, body=ROUTE_T_NEW),
    Step("invalid/heartbeat-missing-fields", R.BROKER_HEARTBEAT),
    Step("invalid/query-data-version-missing-fields", R.QUERY_DATA_VERSION, body=DATA_VERSION_SAME),
    Step("invalid/register-missing-broker-id", R.REGISTER_BROKER,
         {k: v for k, v in register5(B1, B1_BODY).items() if k != "brokerId"}, B1_BODY, conn="b1"),
    Step("invalid/register-broker-id-not-a-number", R.REGISTER_BROKER,
         {**register5(B1, B1_BODY), "brokerId": "zero"}, B1_BODY, conn="b1"),
    Step("invalid/register-bad-crc32", R.REGISTER_BROKER, {**register5(B1, B1_BODY), "bodyCrc32": "12345"},
         B1_BODY, conn="b1"),
    Step("invalid/register-compressed-body-not-deflate", R.REGISTER_BROKER,
         {**register5(B1, B1_BODY), "compressed": "true"}, b"not deflate at all", conn="b1"),
    Step("invalid/register-body-not-json", R.REGISTER_BROKER, {**register5(B1, B1_BODY), "bodyCrc32": "0"},
         b"{not json", conn="b1"),
    Step("invalid/unregister-broker-id-not-a-number", R.UNREGISTER_BROKER, {**B1, "brokerId": "x"}, settle=0.3),
    Step("invalid/query-data-version-body-not-json", R.QUERY_DATA_VERSION, B1, b"{oops"),
    Step("invalid/register-topic-body-not-json", R.REGISTER_TOPIC_IN_NAMESRV, {"topic": "T-new"}, b"{oops"),
    Step("invalid/update-config-not-properties", R.UPDATE_NAMESRV_CONFIG, body=b"\xff\xfe\x00"),
    Step("invalid/route-after-invalid", R.GET_ROUTEINFO_BY_TOPIC, {"topic": "T-a"}),
    Step("invalid/cluster-info-after-invalid", R.GET_BROKER_CLUSTER_INFO),
    # ----------------------------------------------------------------- brokers register
    Step("register/5x-master-json", R.REGISTER_BROKER, register5(B1, B1_BODY), B1_BODY, conn="b1"),
    Step("register/5x-slave-compressed-rocketmq-header", R.REGISTER_BROKER, register5(B1_SLAVE, B1_SLAVE_BODY),
         B1_SLAVE_BODY, conn="b1-slave", serialize_type=ROCKETMQ),
    Step("register/4x-master-json", R.REGISTER_BROKER, register4(B4, B4_BODY), B4_BODY, conn="b4", version=V4),
    Step("register/4x-master-compressed", R.REGISTER_BROKER, register4(B4Z, B4Z_BODY), B4Z_BODY, conn="b4z",
         version=V4),
    Step("register/5x-master-again-same-body", R.REGISTER_BROKER, register5(B1, B1_BODY), B1_BODY, conn="b1"),
    Step("register/5x-crc32-zero-means-unchecked", R.REGISTER_BROKER,
         {**register5(B1, B1_BODY_V4), "bodyCrc32": "0"}, B1_BODY_V4, conn="b1"),
    # ----------------------------------------------------------------- reads of a populated NameServer
    _route("route/5x-client", "T-a"),
    _route("route/5x-client-rocketmq-header", "T-a", serialize_type=ROCKETMQ),
    _route("route/4x-client", "T-a", version=V4),
    _route("route/old-client-fastjson-form", "T-a", version=V_OLD),
    Step("route/old-client-accept-standard-json", R.GET_ROUTEINFO_BY_TOPIC,
         {"topic": "T-a", "acceptStandardJsonOnly": "true"}, version=V_OLD),
    Step("route/wrong-type-json-boolean", R.GET_ROUTEINFO_BY_TOPIC, version=V_OLD,
         json_ext={"topic": "T-a", "acceptStandardJsonOnly": True}),
    _route("route/read-only-topic", "T-ro"),
    _route("route/order-topic-without-kv", "T-order"),
    _route("route/filter-server", "T-zip"),
    _route("route/unknown-topic", "T-nope"),
    Step("read/cluster-info", R.GET_BROKER_CLUSTER_INFO),
    Step("read/cluster-info-rocketmq-header", R.GET_BROKER_CLUSTER_INFO, serialize_type=ROCKETMQ),
    *_lists("read"),
    Step("read/topics-by-unknown-cluster", R.GET_TOPICS_BY_CLUSTER, {"cluster": "c-nope"}),
    Step("read/member-group", R.GET_BROKER_MEMBER_GROUP, {"clusterName": "c1", "brokerName": "b1"}),
    Step("read/member-group-wrong-cluster", R.GET_BROKER_MEMBER_GROUP, {"clusterName": "c2", "brokerName": "b1"}),
    Step("read/query-data-version-same", R.QUERY_DATA_VERSION, B1, DATA_VERSION_B1_V4),
    Step("read/query-data-version-changed", R.QUERY_DATA_VERSION, B1, DATA_VERSION_OTHER),
    Step("read/query-data-version-no-body", R.QUERY_DATA_VERSION, B1),
    Step("read/heartbeat", R.BROKER_HEARTBEAT, B1),
    Step("read/heartbeat-oneway", R.BROKER_HEARTBEAT, B1, oneway=True),
    # ----------------------------------------------------------------- KV config
    Step("kv/put", R.PUT_KV_CONFIG, {"namespace": "N1", "key": "k1", "value": "v1"}),
    Step("kv/put-rocketmq-header", R.PUT_KV_CONFIG, {"namespace": "N1", "key": "k2", "value": "v2"},
         serialize_type=ROCKETMQ),
    Step("kv/put-missing-value", R.PUT_KV_CONFIG, {"namespace": "N1", "key": "k3"}),
    Step("kv/get", R.GET_KV_CONFIG, {"namespace": "N1", "key": "k1"}),
    Step("kv/get-missing-key", R.GET_KV_CONFIG, {"namespace": "N1", "key": "k9"}),
    Step("kv/list", R.GET_KVLIST_BY_NAMESPACE, {"namespace": "N1"}),
    Step("kv/delete", R.DELETE_KV_CONFIG, {"namespace": "N1", "key": "k1"}),
    Step("kv/delete-missing", R.DELETE_KV_CONFIG, {"namespace": "N1", "key": "k9"}),
    Step("kv/get-deleted", R.GET_KV_CONFIG, {"namespace": "N1", "key": "k1"}),
    Step("kv/list-after-delete", R.GET_KVLIST_BY_NAMESPACE, {"namespace": "N1"}),
    Step("kv/put-order-topic-conf", R.PUT_KV_CONFIG,
         {"namespace": "ORDER_TOPIC_CONFIG", "key": "T-order", "value": "b1:2"}),
    _route("kv/route-order-topic", "T-order"),
    Step("kv/register-returns-order-conf", R.REGISTER_BROKER, register5(B1, B1_BODY_V4), B1_BODY_V4, conn="b1"),
    # ----------------------------------------------------------------- write permission
    Step("perm/wipe", R.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "b1"}),
    _route("perm/route-after-wipe", "T-a"),
    Step("perm/wipe-again", R.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "b1"}),
    Step("perm/add", R.ADD_WRITE_PERM_OF_BROKER, {"brokerName": "b1"}),
    _route("perm/route-after-add", "T-a"),
    Step("perm/add-rocketmq-header", R.ADD_WRITE_PERM_OF_BROKER, {"brokerName": "b4"}, serialize_type=ROCKETMQ),
    # ----------------------------------------------------------------- topics by admin
    Step("topic/register", R.REGISTER_TOPIC_IN_NAMESRV, {"topic": "T-new"}, ROUTE_T_NEW),
    _route("topic/route-registered", "T-new"),
    Step("topic/register-no-body", R.REGISTER_TOPIC_IN_NAMESRV, {"topic": "T-new2"}),
    _route("topic/route-registered-no-body", "T-new2"),
    Step("topic/delete-in-cluster", R.DELETE_TOPIC_IN_NAMESRV, {"topic": "T-b", "clusterName": "c1"}),
    _route("topic/route-deleted", "T-b"),
    Step("topic/delete-everywhere", R.DELETE_TOPIC_IN_NAMESRV, {"topic": "T-four"}),
    _route("topic/route-deleted-everywhere", "T-four"),
    Step("topic/delete-unknown", R.DELETE_TOPIC_IN_NAMESRV, {"topic": "T-nope"}),
    Step("topic/delete-wrong-cluster", R.DELETE_TOPIC_IN_NAMESRV, {"topic": "T-zip", "clusterName": "c1"}),
    _route("topic/route-not-deleted-wrong-cluster", "T-zip"),
    # ----------------------------------------------------------------- NameServer config
    Step("config/get", R.GET_NAMESRV_CONFIG, body_kind="properties"),
    Step("config/update", R.UPDATE_NAMESRV_CONFIG, body=b"orderMessageEnable=true\n"),
    Step("config/get-after-update", R.GET_NAMESRV_CONFIG, body_kind="properties"),
    Step("config/update-blacklisted", R.UPDATE_NAMESRV_CONFIG, body=b"kvConfigPath=/tmp/elsewhere\n"),
    Step("config/update-no-body", R.UPDATE_NAMESRV_CONFIG),
    Step("config/get-rocketmq-header", R.GET_NAMESRV_CONFIG, body_kind="properties", serialize_type=ROCKETMQ),
    # ----------------------------------------------------------------- brokers leave
    Step("leave/unregister-slave", R.UNREGISTER_BROKER, B1_SLAVE, settle=0.5),
    Step("leave/member-group-without-slave", R.GET_BROKER_MEMBER_GROUP, {"clusterName": "c1", "brokerName": "b1"}),
    Step("leave/unregister-4x", R.UNREGISTER_BROKER, B4, settle=0.5),
    _route("leave/route-after-unregister", "T-a"),
    Step("leave/cluster-info", R.GET_BROKER_CLUSTER_INFO),
    *_lists("leave"),
    Step("leave/unregister-rocketmq-header", R.UNREGISTER_BROKER, B4Z, serialize_type=ROCKETMQ, settle=0.5),
    Step("leave/cluster-info-last", R.GET_BROKER_CLUSTER_INFO),
    # ----------------------------------------------------------------- RocketMQ 5.x rules (helpers parity/acting)
    Step("5x/register-zone-broker", R.REGISTER_BROKER, register5(BZ, BZ_BODY, __ZONE_NAME="zone-a"), BZ_BODY,
         conn="bz"),
    Step("5x/route-zone-mode-other-zone", R.GET_ROUTEINFO_BY_TOPIC,
         {"topic": "T-a", "__ZONE_MODE": "true", "__ZONE_NAME": "zone-b"}),
    Step("5x/route-zone-mode-same-zone", R.GET_ROUTEINFO_BY_TOPIC,
         {"topic": "T-a", "__ZONE_MODE": "true", "__ZONE_NAME": "zone-a"}),
    _route("5x/route-zone-broker", "T-zone"),
    Step("5x/first-registration-one-topic", R.REGISTER_BROKER,
         register5(broker("c1", "b-lonely", 0, "127.0.0.1:10961"), ONE_TOPIC_BODY), ONE_TOPIC_BODY, conn="lonely"),
    _route("5x/route-one-topic", "T-lonely"),
    Step("5x/disable-topic-lists", R.UPDATE_NAMESRV_CONFIG,
         body=b"enableAllTopicList=false\nenableTopicList=false\n"),
    *_lists("5x-disabled"),
    Step("5x/acting-master-register-slave", R.REGISTER_BROKER,
         register5(broker("c1", "bz", 1, "127.0.0.1:10952"), BZ_BODY, enableActingMaster="true"), BZ_BODY,
         conn="bz-slave"),
    _route("5x/route-acting-master", "T-zone"),
]  # fmt: skip
"""The script, in order."""

FRAMES = [
    Step("frame/header-not-json", 0, raw=b"\x00\x00\x00\x0a\x00\x00\x00\x06{oops!", conn="frame1"),
    Step("frame/unknown-serialize-type", 0, raw=b"\x00\x00\x00\x08\x07\x00\x00\x04abcd", conn="frame2"),
]
"""Frames no server can parse: both close the connection (RocketMQ ``NettyDecoder``)."""
