"""``namesrv-admin`` against the real Apache RocketMQ 5.5.0 (issue 22): a Java NameServer and ours side
by side, as during a migration, with a real Java broker registered with both and fake brokers
(registered over remoting by this test, on connections kept open) in a cluster of their own.

- every read over remoting against the Java NameServer answers what ours answers;
- ``route --format mqadmin`` and ``clusters --format mqadmin`` print what ``mqadmin topicRoute`` /
  ``clusterList`` 5.5.0 print, byte for byte;
- ``compare`` of the Java NameServer and ours: they agree (exit 0); after a change on ours only they
  differ (exit 1, each difference named); a stopped NameServer cannot be compared (exit 2).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.remoting_support import RemotingTestClient
from tests.rocketmq_support import (
    ROCKETMQ_5,
    JavaProcess,
    java_processes,
    mqadmin,
    require_rocketmq,
    start_java_broker,
    start_java_namesrv,
    wait_registered,
)
from tests.support import NamesrvProcess, run_cli_in_process, running_namesrv, topic
from tests.test_admin_remoting import register

ADMIN = "namesrv_grpc.admin.cli"
FAKE_CLUSTER = "FakeCluster"


@dataclass
class Side:
    java: JavaProcess
    ours: NamesrvProcess
    broker: JavaProcess

    @property
    def both(self) -> str:
        return f"{self.java.addr};{self.ours.remoting_address}"


@pytest.fixture(scope="module")
def side(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Side]:
    require_rocketmq(ROCKETMQ_5)
    workdir = tmp_path_factory.mktemp("java-side")
    with java_processes() as started, running_namesrv(workdir / "ours") as ours:
        java = start_java_namesrv(ROCKETMQ_5, workdir / "namesrv")
        started.append(java)
        broker = start_java_broker(
            ROCKETMQ_5, workdir / "broker", f"{java.addr};{ours.remoting_address}", {"brokerName": "broker-java"}
        )
        started.append(broker)
        for namesrv in (java.addr, ours.remoting_address):
            wait_registered(namesrv, "broker-java")
        clients = [RemotingTestClient(java.addr), RemotingTestClient(ours.remoting_address)]
        try:
            for remoting in clients:
                for name, addr, topics in (
                    ("fake-a", "127.0.0.1:1091", {"TopicTest": topic("TopicTest"), "Orders": topic("Orders", 8, 8)}),
                    ("fake-b", "127.0.0.1:1092", {"TopicTest": topic("TopicTest", 2, 2), "Other": topic("Other")}),
                ):
                    register(remoting, name, addr, topics, cluster=FAKE_CLUSTER)
                fields = {"namespace": "ORDER_TOPIC_CONFIG", "key": "Orders", "value": "fake-a:8"}
                assert remoting.call(100, fields).code == 0
            yield Side(java, ours, broker)
        finally:
            for remoting in clients:
                remoting.close()


def normalized(text: str) -> object:
    """JSON output with the route's lists in broker-name order (Java's HashMap order is not ours)."""
    value = json.loads(text)
    route = value.get("route") if isinstance(value, dict) else None
    if route:
        for key in ("broker_datas", "queue_datas"):
            route[key].sort(key=lambda item: item["broker_name"])
    return value


def admin(*args: str) -> tuple[int, str, str]:
    """namesrv-admin ARGS, run in this process (tests/support.py ``run_cli_in_process``)."""
    result = run_cli_in_process(ADMIN, *args)
    return result.returncode, result.stdout, result.stderr


@pytest.mark.parametrize(
    "read",
    [
        ("route", "TopicTest"),
        ("route", "Orders"),
        ("topics", "--cluster", FAKE_CLUSTER),
        ("kv-get", "ORDER_TOPIC_CONFIG", "Orders"),
        ("kv-list", "ORDER_TOPIC_CONFIG"),
    ],
)
def test_reads_over_remoting_from_the_java_namesrv_answer_what_ours_answers(side: Side, read: tuple[str, ...]) -> None:
    code, java_out, err = admin("-n", side.java.addr, *read)
    assert code == 0, err
    code, ours_out, err = admin("-n", side.ours.address, *read)  # ours, over gRPC
    assert code == 0, err
    assert normalized(java_out) == normalized(ours_out)


def test_cluster_topic_list_and_config_from_the_java_namesrv(side: Side) -> None:
    code, out, err = admin("-n", f"remoting://{side.java.addr}", "clusters", "--json")
    assert code == 0, err
    info = json.loads(out)["cluster_info"]
    ours = json.loads(admin("-n", side.ours.address, "clusters", "--json")[1])["cluster_info"]
    for table in (info, ours):  # a set in Java and here: the order says nothing
        for names in table["cluster_addr_table"].values():
            names["broker_names"].sort()
    assert info == ours
    assert info["broker_addr_table"]["broker-java"]["broker_addrs"] == {"0": side.broker.addr}
    table = admin("-n", side.java.addr, "clusters")[1]
    assert f"DefaultCluster  broker-java  0   {side.broker.addr}" in table
    topics = json.loads(admin("-n", side.java.addr, "topics")[1])["topics"]
    assert {"TopicTest", "Orders", "Other", "broker-java", "DefaultCluster"} <= set(topics)
    config = json.loads(admin("-n", side.java.addr, "config")[1])["config"]
    assert config["listenPort"] == side.java.addr.rsplit(":", 1)[1]
    assert "rocketmqHome" in config  # a Java NameServer's key


def test_route_in_mqadmin_shape_is_what_mqadmin_prints(side: Side) -> None:
    for name in ("TopicTest", "Orders"):
        for namesrv in (side.java.addr, side.ours.remoting_address):
            expected = mqadmin(ROCKETMQ_5, namesrv, "topicRoute", "-t", name)
            assert expected.returncode == 0, expected.stderr
            code, out, err = admin("-n", namesrv, "route", name, "--format", "mqadmin")
            assert code == 0, err
            assert out == expected.stdout, namesrv
    # Over gRPC from ours: the same text as over remoting.
    assert (
        admin("-n", side.ours.address, "route", "TopicTest", "--format", "mqadmin")[1]
        == (admin("-n", side.ours.remoting_address, "route", "TopicTest", "--format", "mqadmin")[1])
    )


def test_clusters_in_mqadmin_shape_is_what_mqadmin_prints(side: Side) -> None:
    # The fake brokers cannot be reached: mqadmin prints its defaults for their statistics, as we do.
    expected = mqadmin(ROCKETMQ_5, side.java.addr, "clusterList", "-c", FAKE_CLUSTER)
    assert expected.returncode == 0, expected.stderr
    header, *rows = expected.stdout.splitlines()
    assert len(rows) == 2
    for namesrv in (side.java.addr, side.ours.address):
        code, out, err = admin("-n", namesrv, "clusters", "--format", "mqadmin")
        assert code == 0, err
        lines = out.splitlines()
        assert lines[0] == header
        assert [line for line in lines if line.startswith(FAKE_CLUSTER)] == rows
        assert any(line.startswith("DefaultCluster") and side.broker.addr in line for line in lines)


def test_compare_the_java_namesrv_and_ours(side: Side) -> None:
    code, out, err = admin("-n", side.both, "compare")
    assert code == 0, out + err
    assert out.splitlines()[0].startswith("all agree: 2 NameServers")
    assert out.splitlines()[-1].endswith('result="agree"} 0')
    # A change on ours only: both are named.
    assert admin("-n", side.ours.address, "wipe-write-perm", "fake-b")[0] == 0
    assert admin("-n", side.ours.address, "kv-put", "ORDER_TOPIC_CONFIG", "Orders", "fake-a:4")[0] == 0
    try:
        code, out, err = admin("-n", side.both, "compare", "--recheck-after", "0.5", "--json")
        assert code == 1, out + err
        report = json.loads(out)
        found = {(d["kind"], d["subject"]): d["values"] for d in report["differences"]}
        assert found[("perm", "topic TopicTest on fake-b")] == {
            side.java.addr: "6 (RW-)",
            side.ours.remoting_address: "4 (R--)",
        }
        assert found[("kv", "ORDER_TOPIC_CONFIG Orders")] == {
            side.java.addr: "fake-a:8",
            side.ours.remoting_address: "fake-a:4",
        }
        assert [n["protocol"] for n in report["namesrvs"]] == ["remoting", "remoting"]
        # The same changes on the Java NameServer, over remoting: they agree again.
        code, out, err = admin("-n", side.java.addr, "wipe-write-perm", "fake-b")
        assert code == 0, out + err
        assert out == f"{side.java.addr}: OK write permission wiped: 2 topics of fake-b\n"
        assert admin("-n", side.java.addr, "kv-put", "ORDER_TOPIC_CONFIG", "Orders", "fake-a:4")[0] == 0
        assert admin("-n", side.both, "compare")[0] == 0
    finally:
        # Both at once, Java over remoting and ours over gRPC.
        both = f"{side.java.addr};{side.ours.address}"
        assert admin("-n", both, "add-write-perm", "fake-b")[0] == 0
        assert admin("-n", both, "kv-put", "ORDER_TOPIC_CONFIG", "Orders", "fake-a:8")[0] == 0
    assert admin("-n", f"{side.java.addr};{side.ours.address}", "compare")[0] == 0


def test_compare_with_a_stopped_java_namesrv_cannot_compare(tmp_path: Path, side: Side) -> None:
    require_rocketmq(ROCKETMQ_5)
    with java_processes() as started:
        java = start_java_namesrv(ROCKETMQ_5, tmp_path / "namesrv")
        started.append(java)
        java.stop()
        code, out, err = admin("-n", f"{java.addr};{side.ours.address}", "compare")
    assert code == 2
    assert f"{java.addr} could not be read" in err
    assert out.splitlines()[-1].endswith('result="unreadable"} NaN')
