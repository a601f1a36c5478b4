"""``namesrv-admin`` over RocketMQ remoting as well as gRPC, and ``compare`` (issue 22), against real
namesrv-grpc processes over loopback (the Java NameServer side: ``tests/test_admin_java.py``).

- every read gives the same output over the remoting port as over the gRPC port, with the protocol
  detected on the port or named (``remoting://``, ``grpc://``); changes refuse ``remoting://``;
- ``compare``: exit 0 when all agree, 1 with each difference (brokers, addresses, queues, perm,
  order-topic config, KV), 2 when a NameServer cannot be read (named on stderr); ``--json``; the
  Prometheus line; a difference still in flight is re-checked once;
- the security options over remoting: TLS (and a gRPC port behind TLS still detected) and RocketMQ
  AccessKey/Signature.
"""

from __future__ import annotations

import asyncio
import json
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from namesrv.v1 import admin_service_pb2 as admin_pb2
from namesrv.v1 import kv_config_service_pb2 as kv_pb2
from namesrv_grpc.admin.compare import (
    Difference,
    Snapshot,
    compare,
    differences,
    perm_text,
    summarize,
)
from namesrv_grpc.admin.readers import Endpoint, parse_endpoint
from namesrv_grpc.client.security import ClientSecurity
from namesrv_grpc.core.model import BrokerData, ClusterInfo, DataVersion, QueueData, TopicConfig, TopicRouteData
from namesrv_grpc.remoting.codes import RequestCode
from namesrv_grpc.wire import bodies
from tests.remoting_support import RemotingTestClient
from tests.support import NamesrvProcess, SharedNamesrv, Stubs, free_port, run_cli_in_process, running_namesrv, topic
from tests.test_security_acl import write_acl
from tests.test_security_tls import SecureNamesrv, client, pki, start_secure  # noqa: F401 (fixtures)

ADMIN = "namesrv_grpc.admin.cli"


def register(
    remoting: RemotingTestClient, name: str, addr: str, topics: dict[str, TopicConfig], cluster: str = "DefaultCluster"
) -> None:
    """REGISTER_BROKER as a Java broker sends it (the connection must stay open: closing it unregisters
    the broker on a Java NameServer)."""
    body = bodies.encode_register_broker_body(topics, DataVersion(0, 1, 1), compressed=False)
    fields = {
        "clusterName": cluster,
        "brokerName": name,
        "brokerId": "0",
        "brokerAddr": addr,
        "haServerAddr": addr,
        "compressed": "false",
        "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF),
    }
    answer = remoting.call(RequestCode.REGISTER_BROKER, fields, body)
    assert answer.code == 0, answer.remark


BROKER_A = {"TopicTest": topic("TopicTest"), "Orders": topic("Orders", 8, 8)}
BROKER_B = {"TopicTest": topic("TopicTest"), "Other": topic("Other", 2, 2)}


def populate(server_remoting: str) -> RemotingTestClient:
    """broker-a (TopicTest, Orders) and broker-b (TopicTest, Other), and ORDER_TOPIC_CONFIG Orders."""
    remoting = RemotingTestClient(server_remoting)
    register(remoting, "broker-a", "127.0.0.1:10911", BROKER_A)
    register(remoting, "broker-b", "127.0.0.1:10921", BROKER_B)
    answer = remoting.call(
        RequestCode.PUT_KV_CONFIG, {"namespace": "ORDER_TOPIC_CONFIG", "key": "Orders", "value": "broker-a:8"}
    )
    assert answer.code == 0
    return remoting


@pytest.fixture
def pair(module_namesrv_pair: tuple[SharedNamesrv, SharedNamesrv]) -> Iterator[tuple[NamesrvProcess, NamesrvProcess]]:
    """Two NameServers with the same brokers and KV (:func:`populate`): the module's two
    (tests/conftest.py), emptied first (a broker whose connection closed is gone by S15 anyway; one
    registered since is not)."""
    (one, empty_one), (two, empty_two) = module_namesrv_pair
    empty_one()
    empty_two()
    first, second = populate(one.remoting_address), populate(two.remoting_address)
    try:
        yield one, two
    finally:
        first.close()
        second.close()


@pytest.fixture(scope="module")
def read_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[NamesrvProcess, RemotingTestClient]]:
    """One NameServer for the tests that only read, with :func:`populate`'s brokers and KV, and the
    connection that registered them (S15: they stay while it is open)."""
    with running_namesrv(tmp_path_factory.mktemp("reads") / "ns") as server:
        remoting = populate(server.remoting_address)
        try:
            yield server, remoting
        finally:
            remoting.close()


@pytest.fixture
def populated(read_server: tuple[NamesrvProcess, RemotingTestClient]) -> NamesrvProcess:
    """The module's read-only NameServer, its brokers registered again over the same connection
    first: their heartbeat, so S13's 120 s start anew however long the module runs."""
    server, remoting = read_server
    register(remoting, "broker-a", "127.0.0.1:10911", BROKER_A)
    register(remoting, "broker-b", "127.0.0.1:10921", BROKER_B)
    return server


def admin(*args: str) -> Any:
    """namesrv-admin ARGS, run in this process (tests/support.py ``run_cli_in_process``)."""
    return run_cli_in_process(ADMIN, *args)


# ------------------------------------------------------------------------------------------- parsing


def test_endpoints_name_or_detect_the_protocol() -> None:
    assert parse_endpoint("ns1:9876") == Endpoint("ns1:9876", None)
    assert parse_endpoint("remoting://ns1:9876") == Endpoint("ns1:9876", "remoting")
    assert parse_endpoint("GRPC://ns1:8081") == Endpoint("ns1:8081", "grpc")
    assert str(parse_endpoint("grpc://ns1:8081")) == "grpc://ns1:8081"
    with pytest.raises(ValueError, match="unknown protocol 'http'"):
        parse_endpoint("http://ns1:8081")
    result = admin("-n", "http://127.0.0.1:1", "topics")
    assert result.returncode == 2
    assert "unknown protocol 'http'" in result.stderr


def test_help_says_which_protocols() -> None:
    text = admin("--help").stdout
    assert "remoting://host:port" in text
    assert "grpc://host:port" in text
    assert "detected on each port" in text


# ----------------------------------------------------------------------------------------------- reads


@pytest.mark.parametrize(
    "read",
    [
        ("route", "TopicTest"),
        ("route", "TopicTest", "--format", "mqadmin"),
        ("clusters", "--json"),
        ("clusters", "--format", "mqadmin"),
        ("topics",),
        ("topics", "--cluster", "DefaultCluster"),
        ("kv-get", "ORDER_TOPIC_CONFIG", "Orders"),
        ("kv-list", "ORDER_TOPIC_CONFIG"),
    ],
)
def test_reads_over_remoting_print_what_grpc_prints(populated: NamesrvProcess, read: tuple[str, ...]) -> None:
    server = populated
    over_grpc = admin("-n", server.address, *read)
    assert over_grpc.returncode == 0, over_grpc.stderr
    for address in (server.remoting_address, f"remoting://{server.remoting_address}"):
        over_remoting = admin("-n", address, *read)
        assert over_remoting.returncode == 0, over_remoting.stderr
        if read == ("clusters", "--json"):  # remoting has no live table: the cluster info is the same
            grpc_json = json.loads(over_grpc.stdout)
            assert set(grpc_json) == {"cluster_info", "live_table"}
            assert json.loads(over_remoting.stdout) == {"cluster_info": grpc_json["cluster_info"]}
            continue
        assert over_remoting.stdout == over_grpc.stdout
    named = admin("-n", f"grpc://{server.address}", *read)
    assert named.returncode == 0
    if read[0] != "clusters":  # (the live table's ages move on)
        assert named.stdout == over_grpc.stdout


def test_config_and_missing_things_over_remoting(populated: NamesrvProcess) -> None:
    server = populated
    config = json.loads(admin("-n", server.remoting_address, "config").stdout)["config"]
    assert config == json.loads(admin("-n", server.address, "config").stdout)["config"]
    assert "scanNotActiveBrokerInterval" in config
    missing = admin("-n", server.remoting_address, "route", "NoSuchTopic")
    assert missing.returncode == 1
    assert "TOPIC_NOT_EXIST" in missing.stderr
    assert admin("-n", server.remoting_address, "kv-get", "ns", "nothing").returncode == 1
    table = admin("-n", server.remoting_address, "clusters")
    assert "broker-b" in table.stdout
    assert "only namesrv-grpc's gRPC API has a live table" in table.stdout


def test_remoting_read_falls_over_to_the_next_namesrv(pair: tuple[NamesrvProcess, NamesrvProcess]) -> None:
    dead = f"127.0.0.1:{free_port()}"
    result = admin("-n", f"{dead};{pair[1].remoting_address}", "topics")
    assert result.returncode == 0, result.stderr
    assert f"{dead} did not answer" in result.stderr
    assert "TopicTest" in result.stdout


def test_changes_over_remoting_and_the_grpc_only_ones(pair: tuple[NamesrvProcess, NamesrvProcess]) -> None:
    one, two = pair
    both = f"{one.remoting_address};remoting://{two.remoting_address}"
    put = admin("-n", both, "kv-put", "ns", "k", "v")
    assert put.returncode == 0, put.stdout + put.stderr
    assert put.stdout.splitlines() == [
        f"{one.remoting_address}: OK ns/k set",
        f"remoting://{two.remoting_address}: OK ns/k set",
    ]
    assert json.loads(admin("-n", two.address, "kv-get", "ns", "k").stdout) == {"value": "v"}
    wiped = admin("-n", both, "wipe-write-perm", "broker-a")
    assert wiped.stdout.splitlines()[0] == f"{one.remoting_address}: OK write permission wiped: 2 topics of broker-a"
    assert json.loads(admin("-n", two.address, "route", "Orders").stdout)["route"]["queue_datas"][0]["perm"] == 4
    assert admin("-n", both, "add-write-perm", "broker-a").returncode == 0
    assert admin("-n", both, "wipe-write-perm", "nobody").returncode == 1  # known nowhere
    assert admin("-n", both, "config", "scanNotActiveBrokerInterval=6000").returncode == 0
    assert json.loads(admin("-n", two.address, "config").stdout)["config"]["scanNotActiveBrokerInterval"] == "6000"
    refused = admin("-n", both, "config", "noSuchKey=1")
    assert refused.returncode == 1
    assert "FAILED" in refused.stdout
    assert admin("-n", both, "kv-delete", "ns", "k").returncode == 0
    assert admin("-n", both, "delete-topic", "Other").returncode == 0
    assert admin("-n", one.address, "route", "Other").returncode == 1
    # snapshot (and watch) are namesrv-grpc's own API
    named = admin("-n", f"remoting://{one.remoting_address}", "snapshot")
    assert named.returncode == 2
    assert "needs namesrv-grpc's gRPC API" in named.stderr
    detected = admin("-n", one.remoting_address, "snapshot")
    assert detected.returncode == 1
    assert "is a RocketMQ remoting port: snapshot needs namesrv-grpc's gRPC API" in detected.stdout


# --------------------------------------------------------------------------------------------- compare


def test_compare_two_that_agree(pair: tuple[NamesrvProcess, NamesrvProcess]) -> None:
    one, two = pair
    result = admin("-n", f"{one.remoting_address};{two.address}", "compare")
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("all agree: 2 NameServers")
    assert "(remoting)" in lines[0]
    assert "(grpc)" in lines[0]
    assert "3 topics" in lines[0]
    assert lines[-1] == (
        f'namesrv_compare_differences{{namesrvs="{one.remoting_address};{two.address}",result="agree"}} 0'
    )


def test_compare_reports_each_kind_of_difference(pair: tuple[NamesrvProcess, NamesrvProcess]) -> None:
    one, two = pair
    with RemotingTestClient(two.remoting_address) as extra:
        register(extra, "broker-c", "127.0.0.1:10931", {"Orders": topic("Orders", 8, 8), "More": topic("More")})
        register(extra, "broker-b", "127.0.0.1:10999", BROKER_B)  # broker-b moved to another address
        with two.channel() as channel:
            stubs = Stubs(channel)
            stubs.admin.WipeWritePermOfBroker(
                admin_pb2.WipeWritePermOfBrokerRequest(broker_name="broker-a"), timeout=10
            )
            stubs.kv.PutKVConfig(
                kv_pb2.PutKVConfigRequest(namespace="ORDER_TOPIC_CONFIG", key="Orders", value="broker-a:8;broker-c:8"),
                timeout=10,
            )
        result = admin(
            "-n", f"{one.remoting_address};{two.remoting_address}", "compare", "--recheck-after", "0.2", "--json"
        )
    assert result.returncode == 1, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert report["result"] == "differ"
    found = {(d["kind"], d["subject"]): list(d["values"].values()) for d in report["differences"]}
    assert found[("broker", "DefaultCluster/broker-c id 0")] == [None, "127.0.0.1:10931"]
    assert found[("broker", "DefaultCluster/broker-b id 0")] == ["127.0.0.1:10921", "127.0.0.1:10999"]
    assert found[("topic", "topic More")] == [None, "listed"]
    assert found[("queues", "topic Orders on broker-c")] == [None, "read 8, write 8"]
    assert found[("perm", "topic TopicTest on broker-a")] == ["6 (RW-)", "4 (R--)"]
    assert found[("kv", "ORDER_TOPIC_CONFIG Orders")] == ["broker-a:8", "broker-a:8;broker-c:8"]
    assert ("perm", "topic TopicTest on broker-b") not in found
    # The summary: one line per broker, per group of topics with the same difference, per KV key.
    a, b = one.remoting_address, two.remoting_address
    assert [s["text"] for s in report["summary"]] == [
        f"broker DefaultCluster/broker-b: id 0: 127.0.0.1:10921 on {a} vs 127.0.0.1:10999 on {b}",
        f"broker DefaultCluster/broker-c (127.0.0.1:10931) absent on {a} (2 topics)",
        f"topics Orders, TopicTest: broker-a's perm 6 (RW-) on {a} vs 4 (R--) on {b}",
        f"kv ORDER_TOPIC_CONFIG Orders: broker-a:8 on {a} vs broker-a:8;broker-c:8 on {b}",
    ]
    assert sum(s["differences"] for s in report["summary"]) == len(report["differences"])


def test_compare_order_topic_conf(tmp_path: Path) -> None:
    with (
        running_namesrv(tmp_path / "ns1", "--order-message-enable") as one,
        running_namesrv(tmp_path / "ns2", "--order-message-enable") as two,
    ):
        first, second = populate(one.remoting_address), populate(two.remoting_address)
        try:
            second.call(
                RequestCode.PUT_KV_CONFIG, {"namespace": "ORDER_TOPIC_CONFIG", "key": "Orders", "value": "broker-a:4"}
            )
            result = admin(
                "-n", f"{one.address};{two.address}", "compare", "--recheck-after", "0", "--kv-namespace", "none"
            )
        finally:
            first.close()
            second.close()
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert lines[0].startswith("1 difference: 2 NameServers")
    assert lines[1] == f"topic Orders: orderTopicConf broker-a:8 on {one.address} vs broker-a:4 on {two.address}"
    assert len(lines) == 3  # no kv line: only the namespace named is compared


def test_compare_rechecks_a_difference_in_flight_once(pair: tuple[NamesrvProcess, NamesrvProcess]) -> None:
    one, two = pair
    with RemotingTestClient(one.remoting_address) as early, RemotingTestClient(two.remoting_address) as late:
        register(early, "broker-new", "127.0.0.1:10941", {"Fresh": topic("Fresh"), "Fresh2": topic("Fresh2")})
        seen: list[list[Difference]] = []

        async def finish_registration(found: list[Difference]) -> None:
            seen.append(found)
            await asyncio.to_thread(
                register, late, "broker-new", "127.0.0.1:10941", {"Fresh": topic("Fresh"), "Fresh2": topic("Fresh2")}
            )

        endpoints = [parse_endpoint(one.remoting_address), parse_endpoint(two.address)]
        result = asyncio.run(
            compare(
                endpoints,
                ClientSecurity(),
                timeout=10,
                namespaces=[],
                recheck_after=0.1,
                before_recheck=finish_registration,
            )
        )
    assert seen
    assert any(d.kind == "broker" for d in seen[0])
    assert result.result == "agree"
    assert result.exit_code == 0
    assert result.resolved_on_recheck == 1  # one line: broker-new absent on the second NameServer


def test_compare_cannot_read_one_namesrv(pair: tuple[NamesrvProcess, NamesrvProcess]) -> None:
    dead = f"127.0.0.1:{free_port()}"
    result = admin("-n", f"{pair[0].remoting_address};{dead}", "compare")
    assert result.returncode == 2
    assert f"{dead} could not be read" in result.stderr
    assert result.stdout.splitlines()[-1].endswith('result="unreadable"} NaN')
    for bad in (("--concurrency", "0"), ("--recheck-after", "-1")):
        assert admin("-n", f"{pair[0].address};{dead}", "compare", *bad).returncode == 2


def test_compare_many_topics_with_bounded_concurrency(tmp_path: Path) -> None:
    topics = {f"T{i:04d}": topic(f"T{i:04d}") for i in range(1500)}
    with (
        running_namesrv(tmp_path / "ns1") as one,
        running_namesrv(tmp_path / "ns2") as two,
        RemotingTestClient(one.remoting_address) as a,
        RemotingTestClient(two.remoting_address) as b,
    ):
        register(a, "broker-a", "127.0.0.1:10911", topics)
        register(b, "broker-a", "127.0.0.1:10911", {**topics, "T0777": topic("T0777", 4, 4, 2)})
        if True:
            result = admin(
                "-n", f"{one.remoting_address};{two.address}", "compare", "--concurrency", "4",
                "--progress", "always", "--recheck-after", "0",
            )  # fmt: skip
    assert result.returncode == 1, result.stderr
    assert result.stdout.splitlines()[1] == (
        f"topic T0777: broker-a's perm 6 (RW-) on {one.remoting_address} vs 2 (-W-) on {two.address}"
    )
    assert "1501 topics" not in result.stdout
    assert "1500 topics" in result.stdout
    assert "route" in result.stderr  # the progress bar (tqdm) was drawn on stderr


# ------------------------------------------------------------------------------------------- pure parts


def test_differences_and_perm_text() -> None:
    route = TopicRouteData((QueueData("b", 4, 4, 6),), (BrokerData("C", "b", {0: "h:1"}),), {})
    info = ClusterInfo({"b": BrokerData("C", "b", {0: "h:1"})}, {"C": ("b",)})
    same = Snapshot("x", cluster_info=info, topics={"T"}, routes={"T": summarize(route)}, kv={"NS": {"k": "v"}})
    other = Snapshot("y", cluster_info=ClusterInfo({}, {}), topics=set(), routes={"T": None}, kv={"NS": {}})
    assert differences([same, same], ["T"], ["NS"]) == []
    found = differences([same, other], ["T"], ["NS"])
    assert [(d.kind, d.subject, d.broker) for d in found] == [
        ("broker", "C/b id 0", "b"),
        ("brokerData", "C/b", "b"),
        ("cluster", "C holds broker name b", "b"),
        ("kv", "NS k", ""),
        ("perm", "topic T on b", "b"),
        ("queues", "topic T on b", "b"),
        ("topic", "topic T", ""),
        ("topicSysFlag", "topic T on b", "b"),
    ]
    assert found[4].topic() == "T"
    assert found[1].values == {"x": "zoneName -, enableActingMaster false", "y": None}
    assert perm_text(6) == "6 (RW-)"
    assert perm_text(7) == "7 (RWX)"
    assert perm_text(0) == "0 (---)"


# ------------------------------------------------------------------------------------------- security


def test_signed_reads_and_compare_over_remoting(tmp_path: Path) -> None:
    acl = write_acl(tmp_path / "acl.yml", anonymous_read=False)
    with (
        running_namesrv(tmp_path / "ns1", "--acl-file", str(acl)) as one,
        running_namesrv(tmp_path / "ns2", "--acl-file", str(acl)) as two,
    ):
        both = f"{one.remoting_address};remoting://{two.remoting_address}"
        unsigned = admin("-n", both, "compare")
        assert unsigned.returncode == 2
        assert "NO_PERMISSION" in unsigned.stderr
        keys = ("--access-key", "reader", "--secret-key", "reader-secret")
        signed = admin("-n", both, *keys, "compare")
        assert signed.returncode == 3, signed.stdout + signed.stderr  # read, but no broker registered: a warning
        assert signed.stdout.startswith("WARNING no broker on any NameServer: 2 NameServers")
        assert admin("-n", one.remoting_address, *keys, "topics").returncode == 0
        wrong = admin("-n", one.remoting_address, "--access-key", "reader", "--secret-key", "wrong", "topics")
        assert wrong.returncode == 1


def test_tls_over_remoting_and_grpc(pki: Any, start_secure: Any, tmp_path: Path) -> None:  # noqa: F811
    server: SecureNamesrv = start_secure(
        "--tls-cert-file", str(pki.server.cert_file), "--tls-key-file", str(pki.server.key_file)
    )
    ca = ("--tls-ca-file", str(pki.ca.cert_file))
    remoting = f"127.0.0.1:{server.remoting_port}"
    assert admin("-n", remoting, "topics").returncode == 1  # plaintext against TLS
    over_remoting = admin("-n", remoting, *ca, "topics")
    assert over_remoting.returncode == 0, over_remoting.stderr
    over_grpc = admin("-n", server.address, *ca, "topics")  # detected through TLS
    assert over_grpc.returncode == 0, over_grpc.stderr
    assert over_grpc.stdout == over_remoting.stdout
    result = admin("-n", f"{remoting};{server.address}", *ca, "compare")
    assert result.returncode == 3, result.stdout + result.stderr  # both read; no broker registered: a warning
    assert result.stderr == "namesrv-admin: compare: warning: no broker on any NameServer: nothing compared\n"
    assert "(remoting)" in result.stdout
    assert "(grpc)" in result.stdout
    assert client(pki) is not None
