"""The ACL (``--acl-file``): file checks, address patterns, the roles table, and real server
processes asked every RPC as every kind of caller; the route-hijack scenarios of issue 10 refused
with the state unchanged; replayed signatures refused; audit lines and refusal metrics."""

from __future__ import annotations

import functools
import json
import signal
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import grpc
import pytest
from hypothesis import given
from hypothesis import strategies as st

from namesrv.v1 import admin_service_pb2 as admin_pb2
from namesrv.v1 import kv_config_service_pb2 as kv_pb2
from namesrv.v1 import name_server_service_pb2 as ns_pb2
from namesrv.v1 import types_pb2
from namesrv_grpc.client.security import ClientSecurity
from namesrv_grpc.core.model import DataVersion
from namesrv_grpc.runtime.properties import ConfigError
from namesrv_grpc.security.acl import AclConfig, load_acl, parse_acl, parse_address_pattern, parse_ip
from namesrv_grpc.security.authz import Action, Principal, allowed
from namesrv_grpc.security.signature import format_date_time, grpc_signature_metadata
from tests.metrics_support import scrape
from tests.support import (
    NamesrvProcess,
    Stubs,
    error_info,
    fixture_path,
    free_port,
    poll_until,
    register_request,
    run_cli,
    running_namesrv,
    spawn_agent,
    topic,
)

BROKER_A_SECRET = "broker-a-secret"
OPS_SECRET = "ops-secret-123"
READER_SECRET = "reader-secret"

ACL = """\
anonymousRead: {anonymous_read}
globalWhiteRemoteAddresses: {white}
accounts:
  - accessKey: broker-a-ak
    secretKey: "broker-a-secret"
    brokerNames: [broker-a]
  - accessKey: ops
    secretKey: "ops-secret-123"
    admin: true
  - accessKey: reader
    secretKey: "reader-secret"
"""


def write_acl(path: Path, *, anonymous_read: bool = True, white: str = "[]") -> Path:
    path.write_text(ACL.format(anonymous_read=str(anonymous_read).lower(), white=white))
    return path


# --- the file ---------------------------------------------------------------------------------------


def test_the_contract_example_loads(tmp_path: Path) -> None:
    path = tmp_path / "acl.yml"
    path.write_text(
        textwrap.dedent(
            """\
            anonymousRead: true              # lookups and lists without credentials (default true)
            globalWhiteRemoteAddresses: []   # RocketMQ's meaning: these source addresses may do everything
            accounts:
              - accessKey: broker-a-ak
                secretKey: "0123456789"
                brokerNames: [broker-a]      # may register, heartbeat, open sessions and unregister these only
              - accessKey: ops
                secretKey: "abcdefghij"
                admin: true                  # AdminService, KV writes, UpdateNamesrvConfig, ExportRouteSnapshot
              - certificateSubject: "CN=broker-b"   # an mTLS client identity instead of a key pair
                brokerNames: [broker-b]
            """
        )
    )
    acl = load_acl(path)
    assert acl.anonymous_read
    assert [a.name for a in acl.accounts] == ["ak:broker-a-ak", "ak:ops", "cert:CN=broker-b"]
    assert acl.secret_of("ops") == "abcdefghij"
    assert acl.secret_of("nobody") is None
    assert "abcdefghij" not in repr(acl)


@pytest.mark.parametrize(
    ("text", "field", "problem"),
    [
        ("anonymousRead: maybe", "anonymousRead", "true or false"),
        ("accounts: {}", "accounts", "list"),
        ("accounts: [{accessKey: ab}]", "accounts[0].secretKey", "at least 7"),
        ("accounts: [{secretKey: abcdefgh}]", "accounts[0]", "needs accessKey"),
        ("accounts: [{accessKey: 'a b', secretKey: abcdefgh}]", "accounts[0].accessKey", "no spaces"),
        ("accounts: [{accessKey: 'a/b', secretKey: abcdefgh}]", "accounts[0].accessKey", "slashes"),
        ("accounts: [{accessKey: ak, secretKey: abcdefgh, brokerName: [x]}]", "accounts[0].brokerName", "unknown"),
        ("accounts: [{accessKey: ak, secretKey: abcdefgh, brokerNames: x}]", "accounts[0].brokerNames", "list"),
        ("accounts: [{accessKey: ak, secretKey: abcdefgh, admin: yes please}]", "accounts[0].admin", "true or false"),
        (
            "accounts: [{accessKey: ak, secretKey: abcdefgh}, {accessKey: ak, secretKey: ijklmnop}]",
            "accounts[1].accessKey",
            "earlier",
        ),
        ("accounts: [{certificateSubject: 'not a dn'}]", "accounts[0].certificateSubject", "distinguished name"),
        ("globalWhiteRemoteAddresses: [10.0.0.300]", "globalWhiteRemoteAddresses[0]", "10.0.0.300"),
        ("globalWhiteRemoteAddresses: [10.0.*]", "globalWhiteRemoteAddresses[0]", "4 parts"),
        ("globalWhiteRemoteAddresses: [10.0.0.9-3]", "globalWhiteRemoteAddresses[0]", "reversed"),
        ("globalWhiteRemoteAddresses: ['10.0.0.{1,x}']", "globalWhiteRemoteAddresses[0]", "not an IP"),
        ("dateTimeSkewSeconds: 0", "dateTimeSkewSeconds", "1..3600"),
        ("plainAcl: true", "plainAcl", "unknown key"),
        ("- just a list", None, "must be a mapping"),
    ],
)
def test_bad_files_name_the_field(tmp_path: Path, text: str, field: str | None, problem: str) -> None:
    path = tmp_path / "acl.yml"
    path.write_text(text + "\n")
    with pytest.raises(ConfigError) as caught:
        load_acl(path)
    assert caught.value.source == str(path)
    assert caught.value.key == field
    assert problem in caught.value.problem


def test_syntax_errors_size_and_encoding(tmp_path: Path) -> None:
    path = tmp_path / "acl.yml"
    path.write_text("accounts: [\n")
    with pytest.raises(ConfigError, match="not valid YAML at line"):
        load_acl(path)
    path.write_bytes(b"# " + b"x" * (1024 * 1024 + 10))
    with pytest.raises(ConfigError, match="larger than"):
        load_acl(path)
    path.write_bytes(b"anonymousRead: \xff\n")
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_acl(path)
    path.write_text("!!python/object/apply:os.system ['true']\n")
    with pytest.raises(ConfigError, match="not valid YAML"):  # safe_load: no object construction
        load_acl(path)
    with pytest.raises(ConfigError, match="cannot read"):
        load_acl(tmp_path / "missing.yml")


def test_namesrv_exits_2_with_one_line_for_a_bad_acl_file(tmp_path: Path) -> None:
    path = tmp_path / "acl.yml"
    path.write_text("accounts: [{accessKey: ak, secretKey: short}]\n")
    result = run_cli("namesrv_grpc", "--port", "0", "--remoting-port", "0", "--acl-file", str(path))
    assert result.returncode == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines == [f"namesrv: {path}: accounts[0].secretKey: must be a string of at least 7 characters"]


# --- address patterns (RocketMQ RemoteAddressStrategyFactory forms, plus CIDR) ---------------------


@pytest.mark.parametrize(
    ("pattern", "inside", "outside"),
    [
        ("*", ["10.1.2.3", "::1"], []),
        ("*.*.*.*", ["192.168.0.1"], []),
        ("192.168.1.7", ["192.168.1.7", "::ffff:192.168.1.7"], ["192.168.1.8"]),
        ("192.168.1.7,10.0.0.1", ["10.0.0.1", "192.168.1.7"], ["10.0.0.2"]),
        ("192.168.1.{1,2,3}", ["192.168.1.2"], ["192.168.1.4", "192.168.2.2"]),
        ("192.168.1.*", ["192.168.1.0", "192.168.1.255"], ["192.168.2.1"]),
        ("192.168.*.*", ["192.168.77.1"], ["192.169.0.1"]),
        ("192.168.1.10-20", ["192.168.1.10", "192.168.1.20"], ["192.168.1.9", "192.168.1.21"]),
        ("192.168.1-3.*", ["192.168.2.200"], ["192.168.4.1"]),
        ("10.0.0.0/8", ["10.200.3.4"], ["11.0.0.1", "::1"]),
        ("2001:db8::/32", ["2001:db8:1::5"], ["2001:db9::1", "10.0.0.1"]),
        ("1050::5:600:300c:326b", ["1050:0:0:0:5:600:300c:326b"], ["1050::5:600:300c:326c"]),
        ("1050::5:600:300c:*", ["1050::5:600:300c:ffff"], ["1050::5:600:300d:1"]),
        ("1050::5:600:300c:1-ff", ["1050::5:600:300c:a0"], ["1050::5:600:300c:100"]),
    ],
)
def test_address_patterns(pattern: str, inside: list[str], outside: list[str]) -> None:
    parsed = parse_address_pattern(pattern)
    for address in inside:
        ip = parse_ip(address)
        assert ip is not None
        assert parsed.matches(ip), address
    for address in outside:
        ip = parse_ip(address)
        assert ip is not None
        assert not parsed.matches(ip), address


# --- the roles table ---------------------------------------------------------------------------------

BROKER_ACTIONS = [
    Action.REGISTER_BROKER,
    Action.UNREGISTER_BROKER,
    Action.BROKER_HEARTBEAT,
    Action.QUERY_DATA_VERSION,
    Action.OPEN_BROKER_SESSION,
]
READ_ACTIONS = [Action.READ_ROUTES, Action.READ_KV]
ADMIN_ACTIONS = [Action.WRITE_KV, Action.ADMIN_READ, Action.ADMIN_WRITE, Action.UPDATE_CONFIG, Action.EXPORT_SNAPSHOT]


def test_every_action_is_in_one_group() -> None:
    assert sorted(a.value for a in BROKER_ACTIONS + READ_ACTIONS + ADMIN_ACTIONS) == sorted(a.value for a in Action)


@pytest.mark.parametrize("anonymous_read", [True, False])
def test_roles_table(tmp_path: Path, anonymous_read: bool) -> None:
    acl = load_acl(write_acl(tmp_path / "acl.yml", anonymous_read=anonymous_read))
    broker_a = Principal("ak:broker-a-ak", acl.by_access_key["broker-a-ak"])
    ops = Principal("ak:ops", acl.by_access_key["ops"])
    reader = Principal("ak:reader", acl.by_access_key["reader"])
    anonymous = Principal("anonymous")
    white = Principal("white:10.0.0.1", white=True)
    for action in BROKER_ACTIONS:
        assert allowed(acl, broker_a, action, "broker-a")
        assert not allowed(acl, broker_a, action, "broker-b")
        assert not allowed(acl, broker_a, action, "")
        assert allowed(acl, ops, action, "broker-b")
        assert allowed(acl, white, action, "broker-b")
        assert not allowed(acl, reader, action, "broker-a")
        assert not allowed(acl, anonymous, action, "broker-a")
    for action in READ_ACTIONS:
        for principal in (broker_a, ops, reader, white):
            assert allowed(acl, principal, action)
        assert allowed(acl, anonymous, action) is anonymous_read
    for action in ADMIN_ACTIONS:
        assert allowed(acl, ops, action)
        assert allowed(acl, white, action)
        for principal in (broker_a, reader, anonymous):
            assert not allowed(acl, principal, action)


def test_an_empty_acl_denies_all_but_reads() -> None:
    acl = parse_acl(None, "empty.yml")
    assert isinstance(acl, AclConfig)
    assert allowed(acl, Principal("anonymous"), Action.READ_ROUTES)
    assert not allowed(acl, Principal("anonymous"), Action.REGISTER_BROKER, "broker-a")


# --- real servers, every RPC as every caller --------------------------------------------------------


def signed(access_key: str, secret: str) -> ClientSecurity:
    return ClientSecurity(access_key=access_key, secret_key=secret)


CALLERS: dict[str, ClientSecurity] = {
    "anonymous": ClientSecurity(),
    "broker-a-ak": signed("broker-a-ak", BROKER_A_SECRET),
    "ops": signed("ops", OPS_SECRET),
    "reader": signed("reader", READER_SECRET),
}


def open_session(stubs: Stubs, broker_name: str) -> Any:
    hello = ns_pb2.OpenBrokerSessionRequest(
        hello=ns_pb2.SessionHello(
            cluster_name="DefaultCluster", broker_name=broker_name, broker_id=0, broker_addr="127.0.0.1:10911"
        )
    )
    return next(iter(stubs.ns.OpenBrokerSession(iter([hello]), timeout=10)))


Rpc = Callable[[Stubs, str], Any]
T = 10

RPCS: dict[str, tuple[str, Rpc]] = {
    # name: (group, call(stubs, broker_name))
    "RegisterBroker": ("broker", lambda s, b: s.ns.RegisterBroker(register_request(broker_name=b), timeout=T)),
    "UnregisterBroker": (
        "broker",
        lambda s, b: s.ns.UnregisterBroker(
            ns_pb2.UnregisterBrokerRequest(
                cluster_name="DefaultCluster", broker_name=b, broker_id=5, broker_addr="127.0.0.1:1"
            ),
            timeout=T,
        ),
    ),
    "BrokerHeartbeat": (
        "broker",
        lambda s, b: s.ns.BrokerHeartbeat(
            ns_pb2.BrokerHeartbeatRequest(
                cluster_name="DefaultCluster", broker_name=b, broker_id=0, broker_addr="127.0.0.1:10911"
            ),
            timeout=T,
        ),
    ),
    "QueryDataVersion": (
        "broker",
        lambda s, b: s.ns.QueryDataVersion(
            ns_pb2.QueryDataVersionRequest(
                cluster_name="DefaultCluster", broker_name=b, broker_id=0, broker_addr="127.0.0.1:10911"
            ),
            timeout=T,
        ),
    ),
    "OpenBrokerSession": ("broker", open_session),
    "PickupTopicRoute": (
        "read",
        lambda s, b: s.ns.PickupTopicRoute(ns_pb2.PickupTopicRouteRequest(topic="T"), timeout=T),
    ),
    "PickupTopicRoutes": (
        "read",
        lambda s, b: s.ns.PickupTopicRoutes(ns_pb2.PickupTopicRoutesRequest(topics=["T"]), timeout=T),
    ),
    "WatchTopicRoutes": (
        "read",
        lambda s, b: next(iter(s.ns.WatchTopicRoutes(ns_pb2.WatchTopicRoutesRequest(topics=["T"]), timeout=T))),
    ),
    "GetBrokerClusterInfo": (
        "read",
        lambda s, b: s.ns.GetBrokerClusterInfo(ns_pb2.GetBrokerClusterInfoRequest(), timeout=T),
    ),
    "GetAllTopicList": ("read", lambda s, b: s.ns.GetAllTopicList(ns_pb2.GetAllTopicListRequest(), timeout=T)),
    "GetTopicsByCluster": (
        "read",
        lambda s, b: s.ns.GetTopicsByCluster(
            ns_pb2.GetTopicsByClusterRequest(cluster_name="DefaultCluster"), timeout=T
        ),
    ),
    "GetSystemTopicList": ("read", lambda s, b: s.ns.GetSystemTopicList(ns_pb2.GetSystemTopicListRequest(), timeout=T)),
    "GetUnitTopicList": ("read", lambda s, b: s.ns.GetUnitTopicList(ns_pb2.GetUnitTopicListRequest(), timeout=T)),
    "GetHasUnitSubTopicList": (
        "read",
        lambda s, b: s.ns.GetHasUnitSubTopicList(ns_pb2.GetHasUnitSubTopicListRequest(), timeout=T),
    ),
    "GetHasUnitSubUnUnitTopicList": (
        "read",
        lambda s, b: s.ns.GetHasUnitSubUnUnitTopicList(ns_pb2.GetHasUnitSubUnUnitTopicListRequest(), timeout=T),
    ),
    "GetKVConfig": (
        "read",
        lambda s, b: s.kv.GetKVConfig(kv_pb2.GetKVConfigRequest(namespace="ns", key="k"), timeout=T),
    ),
    "GetKVListByNamespace": (
        "read",
        lambda s, b: s.kv.GetKVListByNamespace(kv_pb2.GetKVListByNamespaceRequest(namespace="ns"), timeout=T),
    ),
    "PutKVConfig": (
        "admin",
        lambda s, b: s.kv.PutKVConfig(kv_pb2.PutKVConfigRequest(namespace="ns", key="k", value="v"), timeout=T),
    ),
    "DeleteKVConfig": (
        "admin",
        lambda s, b: s.kv.DeleteKVConfig(kv_pb2.DeleteKVConfigRequest(namespace="ns", key="gone"), timeout=T),
    ),
    "WipeWritePermOfBroker": (
        "admin",
        lambda s, b: s.admin.WipeWritePermOfBroker(admin_pb2.WipeWritePermOfBrokerRequest(broker_name="x"), timeout=T),
    ),
    "AddWritePermOfBroker": (
        "admin",
        lambda s, b: s.admin.AddWritePermOfBroker(admin_pb2.AddWritePermOfBrokerRequest(broker_name="x"), timeout=T),
    ),
    "DeleteTopic": ("admin", lambda s, b: s.admin.DeleteTopic(admin_pb2.DeleteTopicRequest(topic="Nope"), timeout=T)),
    "RegisterTopic": (
        "admin",
        lambda s, b: s.admin.RegisterTopic(
            admin_pb2.RegisterTopicRequest(
                topic="AdminTopic",
                queue_datas=[types_pb2.QueueData(broker_name="x", read_queue_nums=1, write_queue_nums=1, perm=6)],
            ),
            timeout=T,
        ),
    ),
    "GetNamesrvConfig": (
        "admin",
        lambda s, b: s.admin.GetNamesrvConfig(admin_pb2.GetNamesrvConfigRequest(), timeout=T),
    ),
    "UpdateNamesrvConfig": (
        "admin",
        lambda s, b: s.admin.UpdateNamesrvConfig(
            admin_pb2.UpdateNamesrvConfigRequest(config={"scanNotActiveBrokerInterval": "200"}), timeout=T
        ),
    ),
    "ExportRouteSnapshot": (
        "admin",
        lambda s, b: s.admin.ExportRouteSnapshot(admin_pb2.ExportRouteSnapshotRequest(), timeout=60),
    ),
    "GetBrokerLiveTable": (
        "admin",
        lambda s, b: s.admin.GetBrokerLiveTable(admin_pb2.GetBrokerLiveTableRequest(), timeout=T),
    ),
}


def outcome(call: Callable[[], Any]) -> str:
    """``allowed`` (answered, or failed for a reason other than the ACL) or the ACL's reason."""
    try:
        call()
    except grpc.RpcError as error:
        code = error.code()
        if code in (grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED):
            reason = str(error_info(error).reason)
            if reason in ("ACCESS_DENIED", "BAD_SIGNATURE"):
                return reason
        return "allowed"
    return "allowed"


def expected(group: str, caller: str, broker_name: str, *, anonymous_read: bool, white: bool) -> str:
    """The roles table, written out independently of the server's."""
    if white or caller == "ops":
        return "allowed"
    if group == "read":
        return "allowed" if caller != "anonymous" or anonymous_read else "ACCESS_DENIED"
    if group == "broker":
        return "allowed" if caller == "broker-a-ak" and broker_name == "broker-a" else "ACCESS_DENIED"
    return "ACCESS_DENIED"


@dataclass
class AclServer:
    server: NamesrvProcess
    metrics_port: int
    anonymous_read: bool
    white: bool
    audit_file: Path

    def stubs(self, caller: str) -> Stubs:
        return Stubs(CALLERS[caller].channel(self.server.address))


@pytest.fixture(scope="module", params=["anonymousRead", "noAnonymousRead", "white"])
def acl_server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[AclServer]:
    workdir = tmp_path_factory.mktemp(request.param)
    anonymous_read = request.param != "noAnonymousRead"
    white = request.param == "white"
    acl = write_acl(workdir / "acl.yml", anonymous_read=anonymous_read, white="['127.0.0.*']" if white else "[]")
    metrics_port = free_port()
    audit = workdir / "audit.log"
    args = ["--acl-file", str(acl), "--metrics-port", str(metrics_port), "--audit-log-file", str(audit)]
    with running_namesrv(workdir / "ns", *args, "--snapshot-dir", str(workdir / "snapshots")) as server:
        yield AclServer(server, metrics_port, anonymous_read, white, audit)


def test_the_table_covers_every_rpc() -> None:
    services = ("NameServerService", "KVConfigService", "AdminService")
    modules = (ns_pb2, kv_pb2, admin_pb2)
    every = {
        m.name
        for module, name in zip(modules, services, strict=True)
        for m in module.DESCRIPTOR.services_by_name[name].methods
    }
    assert set(RPCS) == every


def test_every_rpc_is_in_the_table() -> None:
    from namesrv.v1 import admin_service_pb2, kv_config_service_pb2, name_server_service_pb2

    methods = {
        method.name
        for module in (admin_service_pb2, kv_config_service_pb2, name_server_service_pb2)
        for service in module.DESCRIPTOR.services_by_name.values()
        for method in service.methods
    }
    assert methods == set(RPCS)


@pytest.mark.parametrize("rpc", sorted(RPCS))
def test_every_rpc_as_every_caller(acl_server: AclServer, rpc: str) -> None:
    group, call = RPCS[rpc]
    results = {}
    wanted = {}
    for caller in CALLERS:
        stubs = acl_server.stubs(caller)
        for broker_name in ("broker-a", "broker-b") if group == "broker" else ("",):
            key = f"{caller} {broker_name}".strip()
            results[key] = outcome(functools.partial(call, stubs, broker_name))
            wanted[key] = expected(
                group, caller, broker_name, anonymous_read=acl_server.anonymous_read, white=acl_server.white
            )
        stubs.channel.close()
    assert results == wanted


def test_refusals_are_counted_by_reason_only(acl_server: AclServer) -> None:
    stubs = acl_server.stubs("anonymous")
    before = scrape(f"http://127.0.0.1:{acl_server.metrics_port}/metrics")
    for reason in ("access_denied", "bad_signature", "unknown_access_key", "stale_date_time"):
        assert before.find("namesrv_auth_refusals_total", reason=reason), reason
    outcome(lambda: stubs.admin.DeleteTopic(admin_pb2.DeleteTopicRequest(topic="x"), timeout=T))
    after = scrape(f"http://127.0.0.1:{acl_server.metrics_port}/metrics")
    denied = after.value("namesrv_auth_refusals_total", reason="access_denied")
    increase = denied - before.value("namesrv_auth_refusals_total", reason="access_denied")
    assert increase == (0 if acl_server.white else 1)
    labels = {key for sample in after.find("namesrv_auth_refusals_total") for key in sample.labels}
    assert labels == {"reason"}


# --- signatures on the wire ------------------------------------------------------------------------


def call_with(stubs: Stubs, metadata: tuple[tuple[str, str], ...]) -> None:
    stubs.kv.PutKVConfig(kv_pb2.PutKVConfigRequest(namespace="sig", key="k", value="v"), metadata=metadata, timeout=T)


@pytest.fixture(scope="module")
def plain_acl_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AclServer]:
    workdir = tmp_path_factory.mktemp("plain")
    acl = write_acl(workdir / "acl.yml")
    metrics_port = free_port()
    audit = workdir / "audit.log"
    args = ["--acl-file", str(acl), "--metrics-port", str(metrics_port), "--audit-log-file", str(audit)]
    with running_namesrv(workdir / "ns", *args) as server:
        yield AclServer(server, metrics_port, True, False, audit)


def test_replayed_and_forged_signatures_are_unauthenticated(plain_acl_server: AclServer) -> None:
    stubs = plain_acl_server.stubs("anonymous")
    now = datetime.now(timezone.utc)
    cases = {
        "fresh": (grpc_signature_metadata("ops", OPS_SECRET, now), "allowed"),
        # Captured 7 minutes ago (not a whole quarter hour: no time zone explains it).
        "replayed": (grpc_signature_metadata("ops", OPS_SECRET, now - timedelta(minutes=7)), "stale_date_time"),
        "a day old": (grpc_signature_metadata("ops", OPS_SECRET, now - timedelta(days=1)), "stale_date_time"),
        "wrong secret": (grpc_signature_metadata("ops", "guessed-secret", now), "bad_signature"),
        "unknown key": (grpc_signature_metadata("mallory", OPS_SECRET, now), "unknown_access_key"),
    }
    for name, (metadata, want) in cases.items():
        if want == "allowed":
            call_with(stubs, metadata)
            continue
        with pytest.raises(grpc.RpcError) as caught:
            call_with(stubs, metadata)
        assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED, name
        info = error_info(caught.value)
        assert (info.reason, info.domain, info.metadata["problem"]) == ("BAD_SIGNATURE", "namesrv.rocketmq", want)
    # The same date-time under another header value: the HMAC covers x-mq-date-time.
    forged = dict(grpc_signature_metadata("ops", OPS_SECRET, now))
    forged["x-mq-date-time"] = format_date_time(now + timedelta(seconds=1))
    with pytest.raises(grpc.RpcError) as caught:
        call_with(stubs, tuple(forged.items()))
    assert error_info(caught.value).reason == "BAD_SIGNATURE"


# --- the attacks of issue 10, under an ACL ------------------------------------------------------------


def snapshot_state(address: str) -> tuple[Any, ...]:
    """Everything the attacks could change: a route, the cluster info, KV entries, the config."""
    with CALLERS["ops"].channel(address) as channel:
        stubs = Stubs(channel)
        route = stubs.ns.PickupTopicRoute(ns_pb2.PickupTopicRouteRequest(topic="TopicTest"), timeout=T)
        info = stubs.ns.GetBrokerClusterInfo(ns_pb2.GetBrokerClusterInfoRequest(), timeout=T)
        kv = stubs.kv.GetKVListByNamespace(
            kv_pb2.GetKVListByNamespaceRequest(namespace="ORDER_TOPIC_CONFIG"), timeout=T
        )
        settings = stubs.admin.GetNamesrvConfig(admin_pb2.GetNamesrvConfigRequest(), timeout=T)
    return (route.SerializeToString(deterministic=True), info.SerializeToString(deterministic=True),
            dict(kv.table), dict(settings.config))  # fmt: skip


def test_hijack_attempts_are_refused_and_change_nothing(plain_acl_server: AclServer) -> None:
    address = plain_acl_server.server.address
    broker_a = Stubs(CALLERS["broker-a-ak"].channel(address))
    broker_a.ns.RegisterBroker(
        register_request(broker_name="broker-a", topics=[topic("TopicTest")], version=DataVersion(5, 1, 1)),
        timeout=T,
    )
    anonymous = Stubs(CALLERS["anonymous"].channel(address))
    before = snapshot_state(address)
    attacks: dict[str, tuple[Stubs, Callable[[Stubs], Any]]] = {
        # (a) a broker of the attacker's own, serving an existing topic at the attacker's address
        "graft fake broker": (
            anonymous,
            lambda s: s.ns.RegisterBroker(
                register_request(broker_name="evil", broker_addr="6.6.6.6:10911", topics=[topic("TopicTest")]),
                timeout=T,
            ),
        ),
        "graft with a broker account": (
            broker_a,
            lambda s: s.ns.RegisterBroker(
                register_request(broker_name="evil", broker_addr="6.6.6.6:10911", topics=[topic("TopicTest")]),
                timeout=T,
            ),
        ),
        # (b) taking over broker-a's master id from another address with a huge state_version (S12)
        "take over master id": (
            anonymous,
            lambda s: s.ns.RegisterBroker(
                register_request(
                    broker_name="broker-a",
                    broker_addr="6.6.6.6:10911",
                    topics=[topic("TopicTest")],
                    version=DataVersion(2**62, 1, 1),
                ),
                timeout=T,
            ),
        ),
        "unregister the real broker": (
            anonymous,
            lambda s: s.ns.UnregisterBroker(
                ns_pb2.UnregisterBrokerRequest(
                    cluster_name="DefaultCluster", broker_name="broker-a", broker_id=0, broker_addr="127.0.0.1:10911"
                ),
                timeout=T,
            ),
        ),
        # (c) admin operations by callers that are not admins
        "delete topic": (
            broker_a,
            lambda s: s.admin.DeleteTopic(admin_pb2.DeleteTopicRequest(topic="TopicTest"), timeout=T),
        ),
        "wipe write perm": (
            anonymous,
            lambda s: s.admin.WipeWritePermOfBroker(
                admin_pb2.WipeWritePermOfBrokerRequest(broker_name="broker-a"), timeout=T
            ),
        ),
        "KV write": (
            broker_a,
            lambda s: s.kv.PutKVConfig(
                kv_pb2.PutKVConfigRequest(namespace="ORDER_TOPIC_CONFIG", key="TopicTest", value="evil:8"), timeout=T
            ),
        ),
        "warm-up switch": (
            broker_a,
            lambda s: s.admin.UpdateNamesrvConfig(
                admin_pb2.UpdateNamesrvConfigRequest(
                    config={"needWaitForService": "true", "waitSecondsForService": "3600"}
                ),
                timeout=T,
            ),
        ),
    }
    for name, (stubs, attack) in attacks.items():
        with pytest.raises(grpc.RpcError) as caught:
            attack(stubs)
        assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED, name
        assert error_info(caught.value).reason == "ACCESS_DENIED", name
    assert snapshot_state(address) == before
    route = anonymous.ns.PickupTopicRoute(ns_pb2.PickupTopicRouteRequest(topic="TopicTest"), timeout=T).route
    assert [dict(b.broker_addrs) for b in route.broker_datas] == [{0: "127.0.0.1:10911"}]
    # The audit file names who tried what; refusals of state-changing calls are there too.
    lines = [json.loads(line.split(" ", 2)[2]) for line in plain_acl_server.audit_file.read_text().splitlines()]
    registered = [entry for entry in lines if entry["audit"] == "RegisterBroker" and entry["result"] == "ok"]
    assert registered[-1]["identity"] == "ak:broker-a-ak"
    assert registered[-1]["broker_name"] == "broker-a"
    assert registered[-1]["peer"].startswith("ipv")
    refused = [entry for entry in lines if entry["result"] == "refused: ACCESS_DENIED"]
    assert {entry["audit"] for entry in refused} >= {
        "RegisterBroker",
        "UnregisterBroker",
        "AdminWrite",
        "WriteKVConfig",
    }
    for stubs in (broker_a, anonymous):
        stubs.channel.close()


def test_admin_cli_signs_with_access_keys(plain_acl_server: AclServer) -> None:
    address = plain_acl_server.server.address
    denied = run_cli("namesrv_grpc.admin.cli", "-n", address, "kv-put", "ns", "cli", "v")
    assert denied.returncode == 1
    assert "PERMISSION_DENIED" in denied.stdout + denied.stderr
    keys = ["--access-key", "ops", "--secret-key", OPS_SECRET]
    ok = run_cli("namesrv_grpc.admin.cli", "-n", address, *keys, "kv-put", "ns", "cli", "v")
    assert ok.returncode == 0, ok.stderr
    got = run_cli("namesrv_grpc.admin.cli", "-n", address, "kv-get", "ns", "cli")
    assert json.loads(got.stdout) == {"value": "v"}
    half = run_cli("namesrv_grpc.admin.cli", "-n", address, "--access-key", "ops", "kv-get", "ns", "cli")
    assert half.returncode == 2
    assert "--access-key/--secret-key: give both or neither" in half.stderr


def test_without_an_acl_one_warning_names_the_risk(namesrv: NamesrvProcess) -> None:
    namesrv.stop()
    _, stderr = namesrv.output()
    warnings = [line for line in stderr.splitlines() if "no --acl-file" in line]
    assert len(warnings) == 1
    assert "WARNING" in warnings[0]
    assert "register or unregister brokers" in warnings[0]


def test_agent_signs_registrations_and_sessions_with_broker_conf_keys(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(
        fixture_path("broker-a.properties").read_text() + "\naccessKey=broker-a-ak\nsecretKey=broker-a-secret\n"
    )
    audit_file = tmp_path / "audit.log"
    acl = ["--acl-file", str(write_acl(tmp_path / "acl.yml")), "--audit-log-file", str(audit_file)]

    def audited(rpc: str) -> list[dict[str, Any]]:
        entries = [json.loads(line.split(" ", 2)[2]) for line in audit_file.read_text().splitlines()]
        return [e for e in entries if e["audit"] == rpc and e.get("broker_addr") == "127.0.0.1:10911"]

    with running_namesrv(tmp_path / "ns", *acl) as server:
        agent = spawn_agent(
            "--broker-config", str(conf), "--topics-json", str(fixture_path("topics-quickstart.json")),
            "--namesrv-addr", server.address, "--set", "brokerIP1=127.0.0.1",
        )  # fmt: skip
        try:
            poll_until(lambda: bool(audited("OpenBrokerSession")), timeout=30, interval=0.2)
            assert {e["identity"] for e in audited("RegisterBroker")} == {"ak:broker-a-ak"}
            assert {(e["identity"], e["result"]) for e in audited("OpenBrokerSession")} == {("ak:broker-a-ak", "ok")}
        finally:
            agent.send_signal(signal.SIGTERM)
            agent.communicate(timeout=20)
        assert agent.returncode == 0
        unregistered = [(e["identity"], e["result"], e["removed"]) for e in audited("UnregisterBroker")]
        assert unregistered == [("ak:broker-a-ak", "ok", True)]


def test_sighup_reloads_the_acl_and_a_bad_file_keeps_the_old_one(tmp_path: Path) -> None:
    acl = write_acl(tmp_path / "acl.yml")
    newcomer = signed("newcomer", "newcomer-secret")
    with (
        running_namesrv(tmp_path / "ns", "--acl-file", str(acl)) as server,
        newcomer.channel(server.address) as channel,
    ):
        put = Stubs(channel).kv.PutKVConfig
        request = kv_pb2.PutKVConfigRequest(namespace="n", key="k", value="v")
        with pytest.raises(grpc.RpcError) as caught:
            put(request, timeout=T)
        assert error_info(caught.value).metadata["problem"] == "unknown_access_key"
        acl.write_text(acl.read_text() + '  - accessKey: newcomer\n    secretKey: "newcomer-secret"\n    admin: true\n')
        server.process.send_signal(signal.SIGHUP)
        poll_until(lambda: outcome(lambda: put(request, timeout=T)) == "allowed", timeout=20, interval=0.2)
        acl.write_text("accounts: [oops\n")
        server.process.send_signal(signal.SIGHUP)
        poll_until(lambda: "ACL reload failed" in server.stderr_path.read_text(), timeout=20, interval=0.2)
        put(request, timeout=T)  # the last good ACL is still in force


def test_identity_precedence_white_list_then_signature_then_anonymous() -> None:
    from namesrv_grpc.security.audit import AuditLog
    from namesrv_grpc.security.authz import Guard

    acl = parse_acl(
        {
            "globalWhiteRemoteAddresses": ["10.9.9.9"],
            "accounts": [{"accessKey": "ops", "secretKey": OPS_SECRET, "admin": True}],
        },
        "inline",
    )
    guard = Guard(acl, AuditLog())

    class Context:
        def __init__(self, peer: str, metadata: tuple[tuple[str, str], ...]) -> None:
            self._peer, self._metadata = peer, metadata

        def peer(self) -> str:
            return self._peer

        def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
            return self._metadata

        def auth_context(self) -> dict[str, list[bytes]]:
            return {}

    now = datetime.now(timezone.utc)
    signed_md = grpc_signature_metadata("ops", OPS_SECRET, now)
    assert guard.identify_grpc(Context("ipv4:10.1.1.1:5000", signed_md)).name == "ak:ops"
    assert guard.identify_grpc(Context("ipv4:10.9.9.9:5000", signed_md)).name == "white:10.9.9.9"
    assert guard.identify_grpc(Context("ipv6:[::ffff:10.9.9.9]:5000", ())).white
    assert guard.identify_grpc(Context("ipv4:10.1.1.1:5000", ())).name == "anonymous"


@given(
    st.integers(0, 3),
    st.integers(0, 255),
    st.integers(0, 255),
    st.integers(0, 255),
    st.one_of(st.none(), st.tuples(st.integers(0, 3), st.integers(0, 255))),
)
def test_range_patterns_match_exactly_their_range(
    position: int, a: int, b: int, value: int, other: tuple[int, int] | None
) -> None:
    """``7.8.9.10`` with one part replaced by ``low-high``, against addresses equal to it but for that
    part (and sometimes one more part changed)."""
    low, high = min(a, b), max(a, b)
    fixed = [7, 8, 9, 10]
    parts = [str(p) for p in fixed]
    parts[position] = f"{low}-{high}"
    pattern = parse_address_pattern(".".join(parts))
    address = list(fixed)
    address[position] = value
    if other is not None:
        address[other[0]] = other[1]
    ip = parse_ip(".".join(map(str, address)))
    assert ip is not None
    inside = all(address[i] == fixed[i] for i in range(4) if i != position) and low <= address[position] <= high
    assert pattern.matches(ip) == inside


@pytest.mark.parametrize(
    "key",
    ["aclFile", "auditLogFile", "healthPort", "tls.server.mode", "tls.server.certPath", "tls.server.trustCertPath"],
)
def test_security_settings_cannot_be_changed_by_a_request(plain_acl_server: AclServer, key: str) -> None:
    with CALLERS["ops"].channel(plain_acl_server.server.address) as channel:
        admin = Stubs(channel).admin
        with pytest.raises(grpc.RpcError) as caught:
            admin.UpdateNamesrvConfig(admin_pb2.UpdateNamesrvConfigRequest(config={key: "/tmp/x"}), timeout=T)
        assert error_info(caught.value).reason == "CONFIG_KEY_BLACKLISTED"
        config = admin.GetNamesrvConfig(admin_pb2.GetNamesrvConfigRequest(), timeout=T).config
        assert config["aclFile"].endswith("acl.yml")


def test_refusal_audit_lines_are_rate_limited(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from namesrv_grpc.security import audit as audit_module

    clock = [1000.0]
    monkeypatch.setattr("namesrv_grpc.security.audit.time.monotonic", lambda: clock[0])
    log = audit_module.AuditLog()
    with caplog.at_level("INFO", logger=audit_module.AUDIT_LOGGER):
        for _ in range(500):
            log.refused("anonymous", "ipv4:6.6.6.6:1", "RegisterBroker", "ACCESS_DENIED", broker_name="broker-a")
        log.refused("ak:other", "ipv4:6.6.6.7:1", "RegisterBroker", "ACCESS_DENIED", broker_name="broker-a")
        log.ok("ak:ops", "ipv4:10.0.0.1:1", "PutKVConfig", namespace="n", key="k")  # never limited
        clock[0] += 61
        log.refused("anonymous", "ipv4:6.6.6.6:1", "RegisterBroker", "ACCESS_DENIED", broker_name="broker-a")
    lines = [json.loads(record.getMessage()) for record in caplog.records if record.name == audit_module.AUDIT_LOGGER]
    anonymous = [line for line in lines if line["identity"] == "anonymous"]
    # 10 a minute pass the per-identity limit; being identical, they write one line, and a summary
    # of the other 9 when their repeat window ends (tests/test_audit_bounds.py)
    assert len(anonymous) == 3
    assert anonymous[1]["repeats"] == audit_module.REFUSALS_PER_MINUTE - 1
    assert anonymous[-1]["suppressed"] == 500 - audit_module.REFUSALS_PER_MINUTE
    assert [line["identity"] for line in lines if line["identity"] != "anonymous"] == ["ak:other", "ak:ops"]
