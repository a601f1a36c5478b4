"""The Spark jobs' transformations on small DataFrames with exact expected values, and the readers'
schemas against the writer's."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual, assertSchemaEqual

from namesrv_analytics import churn, namesrv_consistency, topic_distribution
from namesrv_analytics.common import KEY, load_snapshots, spark_schema
from namesrv_grpc.snapshot import SnapshotExporter
from namesrv_grpc.snapshot_schema import TABLES
from tests.analytics_support import at, broker_data, expect, manifest, queue_data
from tests.support import FakeClock
from tests.test_snapshot import NOW, build_table

pytestmark = pytest.mark.spark

NS1, NS2 = "ns1:9876", "ns2:9876"
S1, S2 = at(0), at(300)


def test_the_readers_schemas_are_the_writers(spark: SparkSession, tmp_path: Path) -> None:
    clock = FakeClock(NOW)
    SnapshotExporter(build_table(clock), tmp_path, NS1, clock=clock).export()
    snapshots = load_snapshots(spark, str(tmp_path))
    for name in TABLES:
        (path,) = (tmp_path / name).glob("*/*.parquet")
        assertSchemaEqual(spark.read.parquet(str(path)).schema, spark_schema(name, with_partition=False))
        table = snapshots.table(name)
        assertSchemaEqual(table.schema, spark_schema(name))
        assert (
            table.count()
            == {"queue_data": 3, "broker_data": 3, "cluster_data": 2, "topic_queue_mapping": 1, "snapshots": 1}[name]
        )
    assert snapshots.table("queue_data").select("snapshot_date").distinct().collect()[0][0].isoformat() == "2026-11-18"


# ------------------------------------------------------------------------------- topic distribution


@pytest.fixture(scope="module")
def distribution_input(spark: SparkSession) -> tuple[object, ...]:
    """S1: c1 = broker-a (master + slave), broker-b (master), broker-d (slave only); c2 = broker-e
    (master, no topics). T1 on a and b; T2 read-only on a; T3 only on slave-only d; T4 on b and on
    x (no BrokerData). S2: an empty snapshot."""
    qd = queue_data(
        spark,
        [
            (NS1, S1, "T1", "broker-a", 8, 8, 6),
            (NS1, S1, "T1", "broker-b", 4, 4, 6),
            (NS1, S1, "T2", "broker-a", 4, 2, 4),
            (NS1, S1, "T3", "broker-d", 4, 4, 6),
            (NS1, S1, "T4", "broker-b", 16, 16, 6),
            (NS1, S1, "T4", "broker-x", 4, 4, 6),
        ],
    )
    bd = broker_data(
        spark,
        [
            (NS1, S1, "c1", "broker-a", 0, "10.0.0.1:10911"),
            (NS1, S1, "c1", "broker-a", 1, "10.0.0.2:10911"),
            (NS1, S1, "c1", "broker-b", 0, "10.0.0.3:10911"),
            (NS1, S1, "c1", "broker-d", 1, "10.0.0.4:10911"),
            (NS1, S1, "c2", "broker-e", 0, "10.0.0.5:10911"),
        ],
    )
    return qd, bd, manifest(spark, [(NS1, S1), (NS1, S2)])


def test_topic_distribution(spark: SparkSession, distribution_input: tuple[object, ...]) -> None:
    qd, bd, _ = distribution_input
    actual = topic_distribution.topic_distribution(qd, bd)  # type: ignore[arg-type]
    required = ["snapshot_time", "topic", "brokers", "read_queues", "write_queues", "max_broker_write_share"]
    assert {*required, "single_broker", "writable"} <= set(actual.columns)
    assert actual.columns == [
        *KEY,
        "topic",
        "brokers",
        "read_queues",
        "write_queues",
        "writable_queues",
        "min_broker_write_queues",
        "max_broker_write_queues",
        "max_broker_write_share",
        "single_broker",
        "writable",
        "masterless_brokers",
        "system_topic",
    ]
    assert [f.dataType.simpleString() for f in actual.schema.fields[3:]] == [
        "bigint",
        "bigint",
        "bigint",
        "bigint",
        "int",
        "int",
        "double",
        "boolean",
        "boolean",
        "bigint",
        "boolean",
    ]
    assertDataFrameEqual(
        actual,
        expect(
            spark,
            actual,
            [
                (NS1, S1, "T1", 2, 12, 12, 12, 4, 8, 8 / 12, False, True, 0, False),
                (NS1, S1, "T2", 1, 4, 2, 0, 2, 2, 1.0, True, False, 0, False),  # read-only: no writable queue
                (NS1, S1, "T3", 0, 0, 0, 0, None, None, 0.0, False, False, 1, False),  # only a slave: nothing counts
                (NS1, S1, "T4", 1, 16, 16, 16, 16, 16, 1.0, True, True, 1, False),  # broker-x has no BrokerData
            ],
        ),
    )


def test_broker_distribution(spark: SparkSession, distribution_input: tuple[object, ...]) -> None:
    qd, bd, _ = distribution_input
    actual = topic_distribution.broker_distribution(qd, bd)  # type: ignore[arg-type]
    assert actual.columns[:7] == [*KEY, "cluster", "broker_name", "topics", "read_queues", "write_queues"]
    assertDataFrameEqual(
        actual,
        expect(
            spark,
            actual,
            [
                (NS1, S1, "c1", "broker-a", 2, 12, 10, 10 / 30, True, 2, 0),
                (NS1, S1, "c1", "broker-b", 2, 20, 20, 20 / 30, True, 1, 0),
                (NS1, S1, "c1", "broker-d", 0, 0, 0, 0.0, False, 1, 1),  # slave only: holds T3, counts nothing
                (NS1, S1, "c2", "broker-e", 0, 0, 0, 0.0, True, 1, 0),  # a cluster without queues: share 0
            ],
        ),
    )


def test_cluster_distribution_and_summary(spark: SparkSession, distribution_input: tuple[object, ...]) -> None:
    qd, bd, snapshots = distribution_input
    brokers = topic_distribution.broker_distribution(qd, bd)  # type: ignore[arg-type]
    clusters = topic_distribution.cluster_distribution(brokers, qd, bd)  # type: ignore[arg-type]
    # c1: master brokers write 10 and 20: mean 15, max/mean 4/3, CV 5/15, Gini |10-20| / (2 * 2 * 15) = 1/6.
    assertDataFrameEqual(
        clusters,
        expect(
            spark,
            clusters,
            [
                (NS1, S1, "c1", 2, 1, 3, 30, 10, 20, 15.0, 20 / 15, 5 / 15, 1 / 6),
                (NS1, S1, "c2", 1, 0, 0, 0, 0, 0, 0.0, None, None, None),
            ],
        ),
    )
    topics = topic_distribution.topic_distribution(qd, bd)  # type: ignore[arg-type]
    summary = topic_distribution.snapshot_summary(snapshots, topics, brokers, clusters)  # type: ignore[arg-type]
    assertDataFrameEqual(
        summary,
        expect(
            spark,
            summary,
            [
                (NS1, S1, "namesrv", 4, 4, 0, 2, 2, 1, 30, 4, 3, 2, 1 / 6),
                (NS1, S2, "namesrv", 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, None),  # the empty snapshot is in the trend
            ],
        ),
    )


def test_system_topics_are_flagged_and_left_out_of_the_business_counts(spark: SparkSession) -> None:
    """Each topic on broker-a alone: only T9 is a business topic (single-broker, counted)."""
    names = ["T9", "%RETRY%g1", "%DLQ%g1", "c9", "broker-a", "TBW102", "SELF_TEST_TOPIC", "rmq_sys_wheel"]
    qd = queue_data(spark, [(NS1, S1, name, "broker-a", 4, 4, 6) for name in names])
    bd = broker_data(spark, [(NS1, S1, "c9", "broker-a", 0, "10.0.0.1:10911")])
    topics = topic_distribution.topic_distribution(qd, bd)
    flags = {r["topic"]: r["system_topic"] for r in topics.collect()}
    assert flags == {name: name != "T9" for name in names}
    assert all(r["single_broker"] for r in topics.collect()), "every topic is on one broker"
    brokers = topic_distribution.broker_distribution(qd, bd)
    clusters = topic_distribution.cluster_distribution(brokers, qd, bd)
    summary = topic_distribution.snapshot_summary(manifest(spark, [(NS1, S1)]), topics, brokers, clusters).collect()
    assert [(r["topics"], r["business_topics"], r["system_topics"], r["single_broker_topics"]) for r in summary] == [
        (8, 1, 7, 1)
    ]


def test_gini_and_cv_of_an_uneven_cluster(spark: SparkSession) -> None:
    qd = queue_data(spark, [(NS1, S1, "U1", "g", 10, 10, 6), (NS1, S1, "U2", "h", 30, 30, 6)])
    bd = broker_data(spark, [(NS1, S1, "c3", name, 0, f"10.0.1.{i}:10911") for i, name in enumerate("fgh")])
    brokers = topic_distribution.broker_distribution(qd, bd)
    clusters = topic_distribution.cluster_distribution(brokers, qd, bd)
    # write queues 0, 10, 30: mean 40/3; Gini = sum|xi - xj| / (2 n^2 mean) = 120 / 240; CV = sqrt(1400/9) / (40/3).
    cv = (1400 / 9) ** 0.5 / (40 / 3)
    assertDataFrameEqual(
        clusters, expect(spark, clusters, [(NS1, S1, "c3", 3, 0, 2, 40, 0, 30, 40 / 3, 2.25, cv, 0.5)])
    )


# ------------------------------------------------------------------------------- consistency


def test_namesrv_consistency_rounds_differences_and_spans(spark: SparkSession) -> None:
    # Rounds of 60 s: A (ns1 at 1 s, ns2 at 2 s), B (ns1 at 61 s and 70 s, ns2 at 62 s),
    # C (ns1 only: not comparable), D (ns1 at 181 s, ns2 at 182 s).
    times = {("A", NS1): at(1), ("A", NS2): at(2), ("B", NS1): at(70), ("B", NS2): at(62)}
    times |= {("D", NS1): at(181), ("D", NS2): at(182)}
    snapshots = manifest(spark, [(ns, t) for (_, ns), t in times.items()] + [(NS1, at(61)), (NS1, at(121))])
    a, b = ("c1", "broker-a", 0, "10.0.0.1:10911"), ("c1", "broker-b", 0, "10.0.0.2:10911")
    present = {("A", NS1): [a, b], ("A", NS2): [a], ("B", NS1): [a, b], ("B", NS2): [a, b]}
    present |= {("D", NS1): [a, b], ("D", NS2): [a]}
    bd = broker_data(
        spark,
        [(ns, times[(r, ns)], *broker) for (r, ns), brokers in present.items() for broker in brokers]
        + [(NS1, at(61), *a), (NS1, at(121), *a)],  # ns1's earlier snapshot in B and its lone one in C
    )
    routes = {
        ("A", NS1): [("T1", 6), ("T2", 6)],
        ("A", NS2): [("T1", 6)],
        ("B", NS1): [("T1", 6), ("T2", 6)],
        ("B", NS2): [("T1", 2), ("T2", 6)],  # T1 with another perm
        ("D", NS1): [("T1", 6), ("T2", 6)],
        ("D", NS2): [("T1", 6), ("T2", 6)],
    }
    qd = queue_data(
        spark, [(ns, times[(r, ns)], t, "broker-a", 8, 8, p) for (r, ns), ts in routes.items() for t, p in ts]
    )
    chosen, rounds = namesrv_consistency.choose_rounds(snapshots, 60)
    round_a, round_b, round_d = at(0), at(60), at(180)
    assertDataFrameEqual(
        rounds,
        expect(
            spark,
            rounds,
            [
                (round_a, at(2), [NS1, NS2], 2, 1),
                (round_b, at(70), [NS1, NS2], 2, 2),
                (round_d, at(182), [NS1, NS2], 2, 3),
            ],
        ),
    )
    brokers = namesrv_consistency.broker_differences(bd, chosen, rounds)
    assertDataFrameEqual(
        brokers,
        expect(spark, brokers, [(round_a, 1, at(2), *b, [NS1], [NS2]), (round_d, 3, at(182), *b, [NS1], [NS2])]),
    )
    topics = namesrv_consistency.topic_differences(qd, chosen, rounds)
    assertDataFrameEqual(
        topics,
        expect(
            spark,
            topics,
            [
                (round_a, 1, at(2), "T2", [NS1], [NS2], 1, []),  # missing on ns2: said by "missing from"
                (round_b, 2, at(70), "T1", [NS1, NS2], [], 2, [f"broker-a perm: {NS1}=6, {NS2}=2"]),
            ],
        ),
    )
    broker_spans = namesrv_consistency.difference_spans(brokers, namesrv_consistency.BROKER_KEY, rounds)
    assertDataFrameEqual(
        broker_spans,
        expect(spark, broker_spans, [(*b, at(2), at(2), 1, 0.0, at(70)), (*b, at(182), at(182), 1, 0.0, None)]),
    )
    topic_spans = namesrv_consistency.difference_spans(topics, ["topic"], rounds)
    assertDataFrameEqual(
        topic_spans,
        expect(spark, topic_spans, [("T2", at(2), at(2), 1, 0.0, at(70)), ("T1", at(70), at(70), 1, 0.0, at(182))]),
    )
    summary = namesrv_consistency.round_summary(rounds, brokers, topics)
    assert [
        (r["round_seq"], r["broker_differences"], r["topic_differences"])
        for r in summary.orderBy("round_seq").collect()
    ] == [
        (1, 1, 1),
        (2, 0, 1),
        (3, 1, 0),
    ]


def test_a_difference_over_consecutive_rounds_is_one_span(spark: SparkSession) -> None:
    b = ("c1", "broker-b", 0, "10.0.0.2:10911")
    rounds = spark.createDataFrame(
        [(at(60 * i), at(60 * i + 5), [NS1, NS2], 2, i + 1) for i in range(4)],
        "round_start timestamp, round_time timestamp, namesrvs array<string>, namesrv_count bigint, round_seq int",
    )
    differences = spark.createDataFrame(
        [(at(60 * i), i + 1, at(60 * i + 5), *b) for i in (0, 1, 2)],
        "round_start timestamp, round_seq int, round_time timestamp, cluster string, broker_name string, "
        "broker_id int, broker_addr string",
    )
    spans = namesrv_consistency.difference_spans(differences, namesrv_consistency.BROKER_KEY, rounds)
    assertDataFrameEqual(spans, expect(spark, spans, [(*b, at(5), at(125), 3, 120.0, at(185))]))


# ------------------------------------------------------------------------------- churn


def test_churn_events_flaps_and_summary(spark: SparkSession) -> None:
    s1, s2, s3, s4 = at(0), at(60), at(120), at(180)
    a, b = ("c1", "broker-a", 0, "10.0.0.1:10911"), ("c1", "broker-b", 0, "10.0.0.2:10911")
    snapshots = manifest(spark, [(NS1, s1), (NS1, s2), (NS1, s3), (NS1, s4), (NS2, s1)])
    bd = broker_data(
        spark,
        [
            (NS1, s1, *a),
            (NS1, s1, *b),
            (NS1, s2, *a),
            (NS1, s3, *a),
            (NS1, s3, *b),
            (NS1, s4, *a),
            (NS1, s4, *b),
            (NS2, s1, *a),
        ],
    )
    qd = queue_data(
        spark,
        [
            (ns, t, name, "broker-a", 4, 4, 6)
            for ns, t, name in (
                (NS1, s1, "T1"),
                (NS1, s1, "T2"),
                (NS1, s2, "T1"),
                (NS1, s3, "T1"),
                (NS1, s3, "T3"),
                (NS1, s4, "T1"),
                (NS1, s4, "T3"),
                (NS2, s1, "T9"),
            )
        ],
    )
    pairs = churn.snapshot_pairs(snapshots)
    brokers = churn.broker_events(bd, pairs)
    assertDataFrameEqual(
        brokers, expect(spark, brokers, [(NS1, s2, s1, "disappeared", *b), (NS1, s3, s2, "appeared", *b)])
    )
    topics = churn.topic_events(qd, pairs)
    assertDataFrameEqual(
        topics, expect(spark, topics, [(NS1, s2, s1, "deleted", "T2"), (NS1, s3, s2, "created", "T3")])
    )
    flaps = churn.broker_flaps(brokers)
    assertDataFrameEqual(flaps, expect(spark, flaps, [(NS1, *b, 1, 1, 1, s2, s3)]))
    summary = churn.churn_summary(pairs, brokers, topics)
    assertDataFrameEqual(
        summary,
        expect(spark, summary, [(NS1, s2, s1, 0, 1, 0, 1), (NS1, s3, s2, 1, 0, 1, 0), (NS1, s4, s3, 0, 0, 0, 0)]),
    )
    assert summary.where(F.col("namesrv") == NS2).count() == 0  # a single snapshot has nothing to compare
