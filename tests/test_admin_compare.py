"""The report of ``namesrv-admin compare`` (issue 28, "An operator's first week"): by broker and by
topic, not by field, over real NameServer processes registering brokers over remoting:

- a broker absent from one NameServer is one line with its topic count, however many topics it
  serves (2,000 here: at most 5 lines without ``--verbose``); ``--verbose`` and ``--json`` give
  every field that differs;
- one NameServer is a valid baseline: it is read, and what it holds is printed (exit 0);
- no broker on any NameServer is a warning with its own exit status, 3, and ``result="empty"``;
- how differences are grouped (pure: :func:`summarize_differences`).

The Prometheus sample stays the last line in every case (README step 6: ``tail -1``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from namesrv_grpc.admin.compare import (
    CompareResult,
    Snapshot,
    differences,
    prometheus_line,
    summarize,
    summarize_differences,
)
from namesrv_grpc.admin.readers import Endpoint
from namesrv_grpc.core.model import BrokerData, ClusterInfo, QueueData, TopicRouteData
from namesrv_grpc.remoting.codes import RequestCode
from tests.remoting_support import RemotingTestClient
from tests.support import NamesrvProcess, free_port, run_cli_in_process, running_namesrv, topic
from tests.test_admin_remoting import BROKER_A, populate, register

ADMIN = "namesrv_grpc.admin.cli"
PROMETHEUS = re.compile(r'^namesrv_compare_differences\{namesrvs="[^"]*",result="(\w+)"\} (\S+)$')


def admin(*args: str) -> Any:
    """namesrv-admin ARGS, run in this process (tests/support.py ``run_cli_in_process``)."""
    return run_cli_in_process(ADMIN, *args)


# ------------------------------------------------------------------------------ one absent broker


@pytest.fixture(scope="module")
def three(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[NamesrvProcess, NamesrvProcess, NamesrvProcess]]:
    """ns1 and ns2 have broker-a (2 topics) and broker-b (2,000 topics, TopicTest shared with
    broker-a); ns3 has broker-a only: broker-b has not been restarted with ns3 in its namesrvAddr."""
    root = tmp_path_factory.mktemp("three")
    many = {f"T{i:04d}": topic(f"T{i:04d}") for i in range(1999)} | {"TopicTest": topic("TopicTest")}
    with (
        running_namesrv(root / "ns1") as ns1,
        running_namesrv(root / "ns2") as ns2,
        running_namesrv(root / "ns3") as ns3,
    ):
        clients = [RemotingTestClient(ns.remoting_address) for ns in (ns1, ns2, ns3)]
        try:
            for client in clients:
                register(client, "broker-a", "127.0.0.1:10911", BROKER_A)
            for client in clients[:2]:
                register(client, "broker-b", "127.0.0.1:10921", many)
            yield ns1, ns2, ns3
        finally:
            for client in clients:
                client.close()


def test_an_absent_broker_is_one_line_however_many_topics(
    three: tuple[NamesrvProcess, NamesrvProcess, NamesrvProcess],
) -> None:
    ns1, ns2, ns3 = (ns.remoting_address for ns in three)
    names = f"{ns1};{ns2};{ns3}"
    result = admin("-n", names, "compare", "--recheck-after", "0")
    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) <= 5, result.stdout
    assert lines[0].startswith(
        f"1 difference: 3 NameServers [{ns1} (remoting), {ns2} (remoting), {ns3} (remoting)], 2 broker names, "
        "2 broker addresses, 2001 topics, 0 KV entries in ORDER_TOPIC_CONFIG in "
    )
    assert lines[1] == f"broker DefaultCluster/broker-b (127.0.0.1:10921) absent on {ns3} (2000 topics)"
    assert lines[-1] == f'namesrv_compare_differences{{namesrvs="{names}",result="differ"}} 1'
    assert len(lines) == 3

    verbose = admin("-n", names, "compare", "--recheck-after", "0", "--verbose")
    assert verbose.returncode == 1
    details = verbose.stdout.splitlines()
    assert details[1] == lines[1]
    assert details[-1] == lines[-1]
    assert "    perm: topic T1998 on broker-b" in details
    assert f"        {ns3}  (absent)" in details
    assert len(details) > 4 * 2000  # every field of every topic, with its value on each NameServer

    report = json.loads(admin("-n", names, "compare", "--recheck-after", "0", "--json").stdout)
    assert report["result"] == "differ"
    assert [(s["kind"], s["subject"], s["text"]) for s in report["summary"]] == [
        ("broker", "DefaultCluster/broker-b", lines[1])
    ]
    assert report["summary"][0]["differences"] == len(report["differences"]) > 3 * 2000
    assert (report["brokers"], report["broker_addresses"], report["topics"]) == (2, 2, 2001)


def test_the_two_namesrvs_with_the_broker_agree(
    three: tuple[NamesrvProcess, NamesrvProcess, NamesrvProcess],
) -> None:
    ns1, ns2, _ = three
    result = admin("-n", f"{ns1.remoting_address};{ns2.address}", "compare")
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("all agree: 2 NameServers")
    assert "2 broker names, 2 broker addresses, 2001 topics" in lines[0]
    assert PROMETHEUS.match(lines[1]).groups() == ("agree", "0")  # type: ignore[union-attr]


# ------------------------------------------------------------------------------------ one NameServer


def test_one_namesrv_is_a_baseline(tmp_path: Path) -> None:
    with running_namesrv(tmp_path / "ns1") as one:
        client = populate(one.remoting_address)
        try:
            result = admin("-n", one.remoting_address, "compare")
            as_json = json.loads(admin("-n", one.address, "compare", "--json").stdout)
        finally:
            client.close()
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith(
        f"baseline: 1 NameServer [{one.remoting_address} (remoting)] holds 2 broker names, 2 broker addresses, "
        "3 topics, 1 KV entry in ORDER_TOPIC_CONFIG (one NameServer: nothing to compare it with), in "
    )
    assert lines[1] == f'namesrv_compare_differences{{namesrvs="{one.remoting_address}",result="agree"}} 0'
    assert as_json["result"] == "agree"
    assert (as_json["brokers"], as_json["topics"], as_json["kv_entries"]) == (2, 3, 1)
    assert as_json["summary"] == as_json["differences"] == []


def test_one_namesrv_that_cannot_be_read() -> None:
    dead = f"127.0.0.1:{free_port()}"
    result = admin("-n", dead, "compare")
    assert result.returncode == 2
    assert f"namesrv-admin: compare: {dead} could not be read: UNAVAILABLE" in result.stderr
    assert result.stdout.splitlines() == [
        "not compared: 1 of 1 NameServers could not be read",
        f'namesrv_compare_differences{{namesrvs="{dead}",result="unreadable"}} NaN',
    ]


# ----------------------------------------------------------------------------------------- no broker


def test_no_broker_on_any_namesrv_is_a_warning(tmp_path: Path) -> None:
    with running_namesrv(tmp_path / "ns1") as one, running_namesrv(tmp_path / "ns2") as two:
        both = f"{one.remoting_address};{two.address}"
        empty = admin("-n", both, "compare")
        alone = admin("-n", two.address, "compare")
        as_json = json.loads(admin("-n", both, "compare", "--json").stdout)
        with RemotingTestClient(one.remoting_address) as client:
            answer = client.call(
                RequestCode.PUT_KV_CONFIG, {"namespace": "ORDER_TOPIC_CONFIG", "key": "T", "value": "b:4"}
            )
            assert answer.code == 0
            kv_only = admin("-n", both, "compare", "--recheck-after", "0")
    assert empty.returncode == 3, empty.stdout + empty.stderr
    lines = empty.stdout.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith(
        f"WARNING no broker on any NameServer: 2 NameServers [{one.remoting_address} (remoting), {two.address} "
        "(grpc)] hold 0 broker names, 0 broker addresses, 0 topics, 0 KV entries in ORDER_TOPIC_CONFIG, in "
    )
    assert lines[0].endswith("nothing to compare (no broker registered yet, or -n names the wrong NameServers)")
    assert lines[1] == f'namesrv_compare_differences{{namesrvs="{both}",result="empty"}} 0'
    assert empty.stderr == "namesrv-admin: compare: warning: no broker on any NameServer: nothing compared\n"
    assert alone.returncode == 3
    assert alone.stdout.startswith("WARNING no broker on any NameServer: 1 NameServer [")
    assert as_json["result"] == "empty"
    # A difference is a difference, brokers or not.
    assert kv_only.returncode == 1
    assert (
        kv_only.stdout.splitlines()[1]
        == f"kv ORDER_TOPIC_CONFIG T: b:4 on {one.remoting_address} vs absent on {two.address}"
    )


# ------------------------------------------------------------------------------------------ grouping

C = "DefaultCluster"


def snapshot(
    address: str,
    brokers: dict[str, dict[int, str]],
    routes: dict[str, list[QueueData]],
    *,
    unlisted: tuple[str, ...] = (),
    order: dict[str, str] | None = None,
) -> Snapshot:
    info = ClusterInfo(
        {name: BrokerData(C, name, addrs) for name, addrs in brokers.items()}, {C: tuple(sorted(brokers))}
    )
    summaries = {
        t: summarize(TopicRouteData(tuple(queues), (), {}, (order or {}).get(t, ""))) if queues else None
        for t, queues in routes.items()
    }
    listed = {t for t, queues in routes.items() if queues and t not in unlisted}
    return Snapshot(address, "remoting", info, listed, summaries)


def report(*snapshots: Snapshot) -> list[str]:
    topics = sorted(set().union(*(s.routes for s in snapshots)))
    found = differences(snapshots, topics, [])
    findings = summarize_differences(snapshots, found)
    assert sorted(id(d) for f in findings for d in f.details) == sorted(id(d) for d in found)  # each once
    return [f.text for f in findings]


def q(broker: str, perm: int = 6, queues: int = 4) -> QueueData:
    return QueueData(broker, queues, queues, perm)


def test_nothing_differs_nothing_is_reported() -> None:
    """A NameServer whose cluster info was never read (it failed) is no reason for lines."""
    read = snapshot("x", {"b": {0: "h:1"}}, {"T": [q("b")]})
    assert summarize_differences([read, Snapshot("y")], []) == []


def test_a_missing_slave_is_a_broker_line_not_a_topic_line() -> None:
    both = {"b": {0: "h:1", 1: "h:2"}}
    master_only = {"b": {0: "h:1"}}
    routes = {"T": [q("b")]}
    assert report(snapshot("x", both, routes), snapshot("y", master_only, routes)) == [
        "broker DefaultCluster/b: id 1: h:2 on x vs absent on y"
    ]


def test_an_absent_broker_folds_what_its_absence_explains_only() -> None:
    brokers = {"a": {0: "h:1"}, "b": {0: "h:2"}}
    x = snapshot("x", brokers, {"Shared": [q("a"), q("b")], "OnlyB": [q("b")], "Wiped": [q("b")]})
    z = snapshot("z", brokers, {"Shared": [q("a"), q("b")], "OnlyB": [q("b")], "Wiped": [q("b", perm=4)]})
    y = snapshot("y", {"a": {0: "h:1"}}, {"Shared": [q("a")], "OnlyB": [], "Wiped": []})
    assert report(x, y, z) == [
        "broker DefaultCluster/b (h:2) absent on y (3 topics)",
        "topic Wiped: b's perm 6 (RW-) on x vs 4 (R--) on z",
    ]


def test_a_topic_missing_while_its_brokers_are_present_is_named() -> None:
    brokers = {"a": {0: "h:1"}}
    x = snapshot("x", brokers, {"Gone": [q("a")], "Stays": [q("a")]})
    y = snapshot("y", brokers, {"Gone": [], "Stays": [q("a")]})
    assert report(x, y) == ["topic Gone: absent on y"]
    unlisted = snapshot("y", brokers, {"Gone": [q("a")], "Stays": [q("a")]}, unlisted=("Gone",))
    assert report(x, unlisted) == ["topic Gone: routed but not listed on y"]
    other_queues = snapshot("y", brokers | {"c": {0: "h:3"}}, {"Gone": [q("a"), q("c")], "Stays": [q("a", queues=8)]})
    assert report(x, other_queues) == [
        "broker DefaultCluster/c (h:3) absent on x (1 topic)",
        "topic Stays: a's queues read 4, write 4 on x vs read 8, write 8 on y",
    ]


def test_the_same_difference_on_many_topics_is_one_line() -> None:
    brokers = {"a": {0: "h:1"}}
    x = snapshot("x", brokers, {f"T{i}": [q("a")] for i in range(5)})
    y = snapshot("y", brokers, {f"T{i}": [q("a", perm=4)] for i in range(5)})
    assert report(x, y) == ["topics T0, T1, T2 and 2 more: a's perm 6 (RW-) on x vs 4 (R--) on y"]
    y2 = snapshot("y", brokers, {f"T{i}": [q("a", perm=4 if i < 2 else 6)] for i in range(5)})
    assert report(x, y2) == ["topics T0, T1: a's perm 6 (RW-) on x vs 4 (R--) on y"]


def test_order_topic_conf_and_a_queue_missing_from_a_route() -> None:
    brokers = {"a": {0: "h:1"}, "b": {0: "h:2"}}
    x = snapshot("x", brokers, {"O": [q("a"), q("b")]}, order={"O": "a:4;b:4"})
    y = snapshot("y", brokers, {"O": [q("a")]}, order={"O": "a:4"})
    assert report(x, y) == ["topic O: b not in the route on y; orderTopicConf a:4;b:4 on x vs a:4 on y"]


def test_prometheus_line_counts_lines_and_escapes_label_values() -> None:
    info = ClusterInfo({"b": BrokerData(C, "b", {0: "h:1"})}, {C: ("b",)})
    agree = CompareResult([Snapshot("a", cluster_info=info)], [], [], [], 0, {}, 0.1)
    assert (
        prometheus_line(agree, [Endpoint('a"b:1')])
        == 'namesrv_compare_differences{namesrvs="a\\"b:1",result="agree"} 0'
    )
    empty = CompareResult([Snapshot("a")], [], [], [], 0, {}, 0.1)
    assert prometheus_line(empty, [Endpoint("a:1")]) == 'namesrv_compare_differences{namesrvs="a:1",result="empty"} 0'
    assert empty.exit_code == 3
