"""End to end: two real NameServers and broker agents from examples/ -> route snapshots (the export
RPC) -> each Spark job (the distribution job through spark-submit) -> the numbers, checked against
values computed here from the NameServers' own route lookups."""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from namesrv.v1 import admin_service_pb2 as admin_pb2
from namesrv.v1 import name_server_service_pb2 as ns_pb2
from namesrv.v1 import types_pb2
from namesrv_analytics import churn, namesrv_consistency
from tests.support import (
    ROOT,
    SHORT_JVM_OPTIONS,
    NamesrvProcess,
    Stubs,
    fixture_path,
    poll_until,
    register_request,
    running_namesrv,
    spawn_agent,
    topic,
)

pytestmark = [pytest.mark.spark, pytest.mark.slow]

WINDOW = 5  # seconds per consistency round: both exports of a round must fit in one, even on a loaded box

AGENTS = {
    "broker-a master": ("broker-a.properties", "topics-quickstart.json", []),
    "broker-a slave": ("broker-a-s.properties", "topics-quickstart.json", ["--set", "listenPort=10921"]),
    "broker-b master": ("broker-b.properties", "topics-dev.json", ["--set", "listenPort=10931"]),
}


def start_agent(name: str, namesrv_addr: str) -> subprocess.Popen[str]:
    conf, topics, extra = AGENTS[name]
    return spawn_agent(
        "--broker-config", str(fixture_path(conf)), "--topics-json", str(fixture_path(topics)),
        "--namesrv-addr", namesrv_addr, "--set", "brokerIP1=127.0.0.1", *extra,
    )  # fmt: skip


def stop(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        process.communicate(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()


def broker_addrs(stubs: Stubs) -> dict[str, dict[int, str]]:
    info = stubs.ns.GetBrokerClusterInfo(ns_pb2.GetBrokerClusterInfoRequest(), timeout=5)
    return {name: dict(data.broker_addrs) for name, data in info.broker_addr_table.items()}


def export_round(stubs: list[Stubs]) -> None:
    """One snapshot of each NameServer, all in the same consistency window (started just after a
    window boundary)."""
    time.sleep(WINDOW - time.time() % WINDOW + 0.05)
    for s in stubs:
        s.admin.ExportRouteSnapshot(admin_pb2.ExportRouteSnapshotRequest(), timeout=30)


def expected_distribution(stubs: Stubs) -> tuple[dict[str, tuple[int, int, int, bool, bool]], dict[str, object]]:
    """From route lookups: per topic (brokers, read, write, single broker, writable) counting master
    QueueData; per broker name (cluster, topics, write queues, share of cluster); per cluster Gini."""
    info = stubs.ns.GetBrokerClusterInfo(ns_pb2.GetBrokerClusterInfoRequest(), timeout=5)
    masters = {name for name, data in info.broker_addr_table.items() if 0 in data.broker_addrs}
    topics = stubs.ns.GetAllTopicList(ns_pb2.GetAllTopicListRequest(), timeout=5).topics
    per_topic: dict[str, tuple[int, int, int, bool, bool]] = {}
    per_broker: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
    for name in topics:
        route = stubs.ns.PickupTopicRoute(ns_pb2.PickupTopicRouteRequest(topic=name), timeout=5).route
        counted: list[types_pb2.QueueData] = [q for q in route.queue_datas if q.broker_name in masters]
        per_topic[name] = (
            len(counted),
            sum(q.read_queue_nums for q in counted),
            sum(q.write_queue_nums for q in counted),
            len(counted) == 1,
            any(q.perm & 2 and q.write_queue_nums > 0 for q in counted),
        )
        for q in counted:
            per_broker[q.broker_name][0] += 1
            per_broker[q.broker_name][1] += q.write_queue_nums
    cluster_of = {name: data.cluster for name, data in info.broker_addr_table.items()}
    cluster_writes: dict[str, list[int]] = collections.defaultdict(list)
    for name in masters:
        cluster_writes[cluster_of[name]].append(per_broker[name][1])
    brokers = {
        name: (cluster_of[name], per_broker[name][0], per_broker[name][1], per_broker[name][1] / sum(
            cluster_writes[cluster_of[name]]))
        for name in masters
    }  # fmt: skip
    gini = {}
    for cluster, xs in cluster_writes.items():
        mean = sum(xs) / len(xs)
        gini[cluster] = sum(abs(a - b) for a in xs for b in xs) / (2 * len(xs) ** 2 * mean)
    return per_topic, {"brokers": brokers, "gini": gini}


@pytest.fixture
def two_namesrvs(tmp_path: Path) -> Iterator[tuple[NamesrvProcess, NamesrvProcess]]:
    with (
        running_namesrv(tmp_path / "ns1", "--snapshot-dir", str(tmp_path / "snapshots")) as ns1,
        running_namesrv(tmp_path / "ns2", "--snapshot-dir", str(tmp_path / "snapshots")) as ns2,
    ):
        yield ns1, ns2


def test_snapshots_of_real_namesrvs_through_every_job(
    spark: SparkSession, tmp_path: Path, two_namesrvs: tuple[NamesrvProcess, NamesrvProcess]
) -> None:
    ns1, ns2 = two_namesrvs
    snapshots = tmp_path / "snapshots"
    with ExitStack() as stack:
        channels = [stack.enter_context(ns.channel()) for ns in (ns1, ns2)]
        stubs = [Stubs(c) for c in channels]
        addrs = f"{ns1.address};{ns2.address}"
        agents = {name: start_agent(name, addrs) for name in AGENTS}

        def stop_agents() -> None:
            for agent in agents.values():
                stop(agent)

        stack.callback(stop_agents)

        def full(s: Stubs) -> bool:
            table = broker_addrs(s)
            return len(table.get("broker-a", {})) == 2 and "broker-b" in table

        poll_until(lambda: all(full(s) for s in stubs), timeout=30, interval=0.1)
        # A broker only the first NameServer knows (its registration to the other one got lost).
        stubs[0].ns.RegisterBroker(
            register_request(broker_name="broker-c", broker_addr="127.0.0.1:10941", topics=[topic("OnlyOnNs1", 2, 2)]),
            timeout=5,
        )
        export_round(stubs)

        # The slave goes away (it unregisters) and comes back: a flap.
        stop(agents.pop("broker-a slave"))
        poll_until(lambda: all(len(broker_addrs(s)["broker-a"]) == 1 for s in stubs), timeout=15, interval=0.1)
        export_round(stubs)
        agents["broker-a slave"] = start_agent("broker-a slave", addrs)
        poll_until(lambda: all(full(s) for s in stubs), timeout=30, interval=0.1)
        stubs[0].admin.RegisterTopic(
            admin_pb2.RegisterTopicRequest(
                topic="NewTopic",
                queue_datas=[
                    types_pb2.QueueData(broker_name="broker-b", read_queue_nums=3, write_queue_nums=3, perm=6)
                ],
            ),
            timeout=5,
        )
        export_round(stubs)
        expected_topics, expected = expected_distribution(stubs[0])

    # 1. Topic distribution, through spark-submit, for the first NameServer.
    out = tmp_path / "distribution"
    submitted = subprocess.run(
        [
            str(Path(sys.executable).parent / "spark-submit"),
            "--master", "local[2]", "--conf", "spark.ui.enabled=false", "--conf", "spark.sql.shuffle.partitions=2",
            "--driver-java-options", SHORT_JVM_OPTIONS,
            str(ROOT / "analytics" / "namesrv_analytics" / "topic_distribution.py"),
            "--snapshots", f"file://{snapshots}", "--out", f"file://{out}", "--namesrv", ns1.address,
        ],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
             "PYTHONPATH": f"{ROOT / 'src'}:{ROOT / 'analytics'}"},
    )  # fmt: skip
    assert submitted.returncode == 0, submitted.stderr[-3000:]
    assert f"report: file://{out}/report.html" in submitted.stdout
    topics = pq.read_table(out / "topic_distribution").to_pylist()
    latest = max(r["snapshot_time"] for r in topics)
    assert len({r["snapshot_time"] for r in topics}) == 3
    actual_topics = {
        r["topic"]: (r["brokers"], r["read_queues"], r["write_queues"], r["single_broker"], r["writable"])
        for r in topics
        if r["snapshot_time"] == latest
    }
    assert actual_topics == expected_topics
    assert actual_topics["OnlyOnNs1"] == (1, 2, 2, True, True)
    brokers = pq.read_table(out / "broker_distribution").to_pylist()
    actual_brokers = {
        r["broker_name"]: (r["cluster"], r["topics"], r["write_queues"], r["write_queue_share"])
        for r in brokers
        if r["snapshot_time"] == latest
    }
    assert actual_brokers.keys() == expected["brokers"].keys()  # type: ignore[attr-defined]
    for name, (cluster, count, writes, share) in actual_brokers.items():
        e_cluster, e_count, e_writes, e_share = expected["brokers"][name]  # type: ignore[index]
        assert (cluster, count, writes) == (e_cluster, e_count, e_writes)
        assert share == pytest.approx(e_share)
    clusters = pq.read_table(out / "cluster_distribution").to_pylist()
    gini = {r["cluster"]: r["write_queues_gini"] for r in clusters if r["snapshot_time"] == latest}
    assert gini == pytest.approx(expected["gini"])
    assert (out / "report.html").read_text().count("data:image/png") == 4

    # 2. Consistency: broker-c and OnlyOnNs1 differ in all three rounds, NewTopic in the last.
    consistency = tmp_path / "consistency"
    args = ["--snapshots", str(snapshots), "--out", str(consistency), "--window", str(WINDOW)]
    assert namesrv_consistency.main(args, spark=spark) == 0
    rounds = pq.read_table(consistency / "rounds").to_pylist()
    assert [(r["round_seq"], r["namesrvs"]) for r in sorted(rounds, key=lambda r: r["round_seq"])] == [
        (i, sorted([ns1.address, ns2.address])) for i in (1, 2, 3)
    ]
    spans = pq.read_table(consistency / "broker_difference_spans").to_pylist()
    assert [(r["broker_name"], r["broker_addr"], r["rounds"], r["resolved_at"]) for r in spans] == [
        ("broker-c", "127.0.0.1:10941", 3, None)
    ]
    topic_spans = {
        r["topic"]: (r["rounds"], r["resolved_at"])
        for r in pq.read_table(consistency / "topic_difference_spans").to_pylist()
    }
    assert topic_spans == {"OnlyOnNs1": (3, None), "NewTopic": (1, None)}
    differences = pq.read_table(consistency / "broker_differences").to_pylist()
    assert {(tuple(r["namesrvs_with"]), tuple(r["namesrvs_without"])) for r in differences} == {
        ((ns1.address,), (ns2.address,))
    }

    # 3. Churn: the slave disappeared and came back on both NameServers; NewTopic was created on one.
    churned = tmp_path / "churn"
    assert churn.main(["--snapshots", str(snapshots), "--out", str(churned)], spark=spark) == 0
    flaps = pq.read_table(churned / "broker_flaps").to_pylist()
    assert sorted((r["namesrv"], r["broker_name"], r["broker_id"], r["broker_addr"], r["flaps"]) for r in flaps) == [
        (ns.address, "broker-a", 1, "127.0.0.1:10921", 1) for ns in sorted((ns1, ns2), key=lambda n: n.address)
    ]
    topic_events = pq.read_table(churned / "topic_events").to_pylist()
    assert [(r["namesrv"], r["event"], r["topic"]) for r in topic_events] == [(ns1.address, "created", "NewTopic")]
    summary = pq.read_table(churned / "churn_summary").to_pylist()
    assert sorted((r["namesrv"], r["brokers_appeared"], r["brokers_disappeared"]) for r in summary) == sorted(
        [(ns.address, 0, 1) for ns in (ns1, ns2)] + [(ns.address, 1, 0) for ns in (ns1, ns2)]
    )
