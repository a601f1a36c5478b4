"""The ACL on the remoting port: every request code as every caller, signed the way RocketMQ 4.x's
``AclClientRPCHook`` signs (computed here by hand), refusals answered NO_PERMISSION (16) with nothing
changed, the hijack attempts of issue 10 over remoting, audit lines; and TLS on the remoting port."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from namesrv.v1 import admin_service_pb2 as admin_pb2
from namesrv.v1 import name_server_service_pb2 as ns_pb2
from namesrv_grpc.client.security import ClientSecurity
from namesrv_grpc.core.model import DataVersion
from namesrv_grpc.remoting.codec import RemotingCommand
from namesrv_grpc.remoting.codes import RequestCode, ResponseCode
from namesrv_grpc.wire import bodies, fastjson
from tests.metrics_support import scrape
from tests.remoting_support import RemotingTestClient
from tests.support import NamesrvProcess, Stubs, free_port, running_namesrv, topic
from tests.test_security_acl import write_acl

KEYS = {"broker-a-ak": "broker-a-secret", "ops": "ops-secret-123", "reader": "reader-secret"}


def sign(fields: dict[str, str], body: bytes, access_key: str) -> dict[str, str]:
    """``AclClientRPCHook.doBeforeRequest``: add AccessKey, then Signature = base64(HMAC-SHA1(secret,
    values of the sorted ext fields + body))."""
    signed = {**fields, "AccessKey": access_key}
    content = "".join(signed[name] for name in sorted(signed)).encode() + body
    digest = hmac.new(KEYS[access_key].encode(), content, hashlib.sha1).digest()
    return {**signed, "Signature": base64.b64encode(digest).decode()}


def register_fields(name: str, addr: str, body: bytes) -> dict[str, str]:
    return {
        "clusterName": "DefaultCluster",
        "brokerName": name,
        "brokerId": "0",
        "brokerAddr": addr,
        "haServerAddr": "",
        "compressed": "false",
        "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF),
    }


def register_body(version: DataVersion = DataVersion(0, 1, 1), topics: tuple[str, ...] = ("TopicTest",)) -> bytes:
    return bodies.encode_register_broker_body({t: topic(t) for t in topics}, version, compressed=False)


def request_for(code: RequestCode, broker_name: str) -> tuple[dict[str, str], bytes]:
    """Ext fields and body of a well-formed request of ``code``."""
    broker = {"clusterName": "DefaultCluster", "brokerName": broker_name, "brokerId": "0"}
    if code == RequestCode.REGISTER_BROKER:
        body = register_body()
        return register_fields(broker_name, "127.0.0.1:10911", body), body
    if code in (RequestCode.UNREGISTER_BROKER, RequestCode.BROKER_HEARTBEAT, RequestCode.QUERY_DATA_VERSION):
        return {**broker, "brokerAddr": "127.0.0.1:10911"}, b""
    if code == RequestCode.UPDATE_NAMESRV_CONFIG:
        return {}, b"scanNotActiveBrokerInterval=7000\n"
    if code == RequestCode.REGISTER_TOPIC_IN_NAMESRV:
        queues = {"queueDatas": [{"brokerName": "x", "perm": 6, "readQueueNums": 1, "writeQueueNums": 1}]}
        return {"topic": "AdminTopic"}, fastjson.dumps(queues)
    fields = {
        "topic": "TopicTest",
        "namespace": "ns",
        "key": "k",
        "value": "v",
        "clusterName": "DefaultCluster",
        "brokerName": "x",
    }
    return fields, b""


GROUPS = {
    RequestCode.REGISTER_BROKER: "broker",
    RequestCode.UNREGISTER_BROKER: "broker",
    RequestCode.BROKER_HEARTBEAT: "broker",
    RequestCode.QUERY_DATA_VERSION: "broker",
    RequestCode.GET_ROUTEINFO_BY_TOPIC: "read",
    RequestCode.GET_BROKER_CLUSTER_INFO: "read",
    RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: "read",
    RequestCode.GET_TOPICS_BY_CLUSTER: "read",
    RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS: "read",
    RequestCode.GET_UNIT_TOPIC_LIST: "read",
    RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST: "read",
    RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST: "read",
    RequestCode.GET_BROKER_MEMBER_GROUP: "read",
    RequestCode.GET_KV_CONFIG: "read",
    RequestCode.GET_KVLIST_BY_NAMESPACE: "read",
    RequestCode.PUT_KV_CONFIG: "admin",
    RequestCode.DELETE_KV_CONFIG: "admin",
    RequestCode.WIPE_WRITE_PERM_OF_BROKER: "admin",
    RequestCode.ADD_WRITE_PERM_OF_BROKER: "admin",
    RequestCode.DELETE_TOPIC_IN_NAMESRV: "admin",
    RequestCode.REGISTER_TOPIC_IN_NAMESRV: "admin",
    RequestCode.GET_NAMESRV_CONFIG: "admin",
    RequestCode.UPDATE_NAMESRV_CONFIG: "admin",
}
"""Every request code of RocketMQ's NameServer, grouped as the roles table does (written out here)."""


def test_every_request_code_is_grouped() -> None:
    assert set(GROUPS) == set(RequestCode)


def expected(group: str, caller: str, broker_name: str) -> str:
    if caller == "ops":
        return "allowed"
    if group == "read":
        return "allowed"  # anonymousRead: true
    if group == "broker":
        return "allowed" if caller == "broker-a-ak" and broker_name == "broker-a" else "refused"
    return "refused"


def outcome(answer: RemotingCommand) -> str:
    acl_remark = " may not " in (answer.remark or "") or "AccessKey" in (answer.remark or "")
    return "refused" if answer.code == ResponseCode.NO_PERMISSION and acl_remark else "allowed"


@pytest.fixture(scope="module")
def acl_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NamesrvProcess]:
    workdir = tmp_path_factory.mktemp("remoting-acl")
    metrics_port = free_port()
    args = ["--acl-file", str(write_acl(workdir / "acl.yml")), "--audit-log-file", str(workdir / "audit.log")]
    with running_namesrv(workdir / "ns", *args, "--metrics-port", str(metrics_port)) as server:
        server.metrics_port = metrics_port  # type: ignore[attr-defined]
        yield server


@pytest.mark.parametrize("code", sorted(GROUPS), ids=lambda c: RequestCode(c).name)
def test_every_request_code_as_every_caller(acl_server: NamesrvProcess, code: RequestCode) -> None:
    group = GROUPS[code]
    results, wanted = {}, {}
    with RemotingTestClient(acl_server.remoting_address) as client:
        for caller in ("anonymous", "broker-a-ak", "ops", "reader"):
            for broker_name in ("broker-a", "broker-b") if group == "broker" else ("",):
                fields, body = request_for(code, broker_name)
                if caller != "anonymous":
                    fields = sign(fields, body, caller)
                key = f"{caller} {broker_name}".strip()
                results[key] = outcome(client.call(code, fields, body))
                wanted[key] = expected(group, caller, broker_name)
    assert results == wanted


def grpc_state(server: NamesrvProcess) -> tuple[Any, ...]:
    with ClientSecurity(access_key="ops", secret_key=KEYS["ops"]).channel(server.address) as channel:
        stubs = Stubs(channel)
        route = stubs.ns.PickupTopicRoute(ns_pb2.PickupTopicRouteRequest(topic="Hijacked"), timeout=10)
        config = stubs.admin.GetNamesrvConfig(admin_pb2.GetNamesrvConfigRequest(), timeout=10)
        return route.SerializeToString(deterministic=True), dict(config.config)


def test_hijacks_over_remoting_are_refused_and_change_nothing(acl_server: NamesrvProcess) -> None:
    with RemotingTestClient(acl_server.remoting_address) as client:
        body = register_body(DataVersion(3, 1, 1), ("Hijacked", "SELF_TEST_TOPIC"))
        fields = sign(register_fields("broker-a", "127.0.0.1:10950", body), body, "broker-a-ak")
        assert client.call(RequestCode.REGISTER_BROKER, fields, body).code == ResponseCode.SUCCESS
        before = grpc_state(acl_server)
        huge = register_body(DataVersion(2**62, 1, 1), ("Hijacked", "SELF_TEST_TOPIC"))
        attacks: dict[str, tuple[RequestCode, dict[str, str], bytes]] = {
            "take over the master id": (
                RequestCode.REGISTER_BROKER,
                register_fields("broker-a", "6.6.6.6:10911", huge),
                huge,
            ),
            "graft with a broker key": (
                RequestCode.REGISTER_BROKER,
                sign(register_fields("evil", "6.6.6.6:10911", huge), huge, "broker-a-ak"),
                huge,
            ),
            "forged signature": (
                RequestCode.REGISTER_BROKER,
                {**register_fields("broker-a", "6.6.6.6:10911", huge), "AccessKey": "broker-a-ak", "Signature": "AAAA"},
                huge,
            ),
            "signature of another request": (
                RequestCode.REGISTER_BROKER,
                {**fields, "brokerAddr": "6.6.6.6:10911"},
                body,
            ),
            "delete the topic": (RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": "Hijacked"}, b""),
            "wipe write perm": (
                RequestCode.WIPE_WRITE_PERM_OF_BROKER,
                sign({"brokerName": "broker-a"}, b"", "broker-a-ak"),
                b"",
            ),
            "warm-up switch": (RequestCode.UPDATE_NAMESRV_CONFIG, {}, b"needWaitForService=true\n"),
            "unregister the real broker": (
                RequestCode.UNREGISTER_BROKER,
                {**register_fields("broker-a", "127.0.0.1:10950", b""), "brokerId": "0"},
                b"",
            ),
        }  # fmt: skip
        for name, (code, attack_fields, attack_body) in attacks.items():
            answer = client.call(code, attack_fields, attack_body)
            assert answer.code == ResponseCode.NO_PERMISSION, (name, answer.code, answer.remark)
        assert grpc_state(acl_server) == before
    metrics = scrape(f"http://127.0.0.1:{acl_server.metrics_port}/metrics")  # type: ignore[attr-defined]
    assert metrics.value("namesrv_auth_refusals_total", reason="bad_signature") >= 2
    assert metrics.value("namesrv_auth_refusals_total", reason="access_denied") >= 5
    audit = [
        json.loads(line.split(" ", 2)[2]) for line in (acl_server.workdir.parent / "audit.log").read_text().splitlines()
    ]
    mine = [e for e in audit if e.get("brokerAddr") == "127.0.0.1:10950" and e["result"] == "ok"]
    assert [(e["audit"], e["identity"], e["peer"].split(":")[0]) for e in mine] == [
        ("REGISTER_BROKER", "ak:broker-a-ak", "remoting")
    ]
    assert [e for e in audit if e["audit"] == "UnregisterBroker" and e["result"].startswith("refused")]


def test_without_acl_remoting_stays_open(tmp_path: Path) -> None:
    with running_namesrv(tmp_path / "ns") as server, RemotingTestClient(server.remoting_address) as client:
        answer = client.call(RequestCode.PUT_KV_CONFIG, {"namespace": "n", "key": "k", "value": "v"})
        assert answer.code == ResponseCode.SUCCESS
        signed = sign({"namespace": "n", "key": "k2", "value": "v"}, b"", "ops")  # signatures are ignored
        assert client.call(RequestCode.PUT_KV_CONFIG, signed).code == ResponseCode.SUCCESS
