"""Topic distribution: how topics spread over brokers, for every snapshot of the input (a trend)
and, in the report, for the latest one.

    python -m namesrv_analytics.topic_distribution --snapshots URI --out URI [--master M] [--namesrv ID]
    spark-submit analytics/namesrv_analytics/topic_distribution.py --snapshots URI --out URI

Outputs (Parquet under ``<out>/<name>``, CSV under ``<out>/csv/<name>``, report ``<out>/report.html``),
one row per snapshot (``namesrv``, ``snapshot_time``) and ...:

- ``topic_distribution`` ... topic: ``brokers``, ``read_queues``, ``write_queues``, ``writable_queues``,
  ``min/max_broker_write_queues``, ``max_broker_write_share``, ``single_broker``, ``writable``,
  ``masterless_brokers``, ``system_topic``
- ``broker_distribution`` ... broker name: ``cluster``, ``has_master``, ``addresses``, ``topics``,
  ``read_queues``, ``write_queues``, ``write_queue_share`` (of its cluster), ``slave_only_topics``
- ``cluster_distribution`` ... cluster: write queues over its master brokers: ``max_over_mean``,
  ``write_queues_cv``, ``write_queues_gini``, and ``brokers``, ``slave_only_brokers``, ``topics``
- ``snapshot_summary`` ... snapshot: the trend (topics, business and system topics, single-broker and
  unwritable business topics, ...)

System topics (``system_topic``: RocketMQ's own such as ``TBW102`` and ``SELF_TEST_TOPIC``, names
starting ``rmq_sys_``, ``%RETRY%``, ``%DLQ%``, and topics named after a cluster or broker name of the
snapshot: see :func:`namesrv_analytics.common.is_system_topic`) are kept in ``topic_distribution`` but
left out of the business counts and of the report's findings: a broker creates them for itself, on
itself alone, so "single-broker" says nothing about them.

Queue counts come from master QueueData: a QueueData counts when its broker name has a master
(broker id 0) in the same snapshot. A broker name that has only slaves (its master is gone) counts
nowhere (no producer can write to it, RocketMQ's clients skip it); it shows in
``broker_distribution`` with ``has_master = false``, zero queues and share, and the topics it holds
in ``slave_only_topics``; a topic's QueueData on such broker names (or on broker names without any
BrokerData) is counted in ``masterless_brokers``. A topic with no master QueueData has ``brokers = 0``
and ``writable = false``. Shares are fractions in [0, 1] (0 when the total is 0); ratios of a
cluster without write queues (``max_over_mean``, CV, Gini) are null.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from datetime import datetime

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from namesrv_analytics.common import (
    KEY,
    base_parser,
    load_snapshots,
    parse,
    run_job,
    with_system_flag,
    write_table,
    write_text,
)
from namesrv_analytics.report import PALETTE, Report, bar_chart, fmt, has_trend, line_chart

PERM_WRITE = 2

# ---------------------------------------------------------------------------------------- transforms


def with_master_flag(queue_data: DataFrame, broker_data: DataFrame) -> DataFrame:
    """``queue_data`` with ``has_master``: its broker name has broker id 0 in the same snapshot."""
    masters = (
        broker_data.where(F.col("broker_id") == 0)
        .select(*KEY, "broker_name")
        .distinct()
        .withColumn("master_present", F.lit(True))
    )
    return (
        queue_data.join(masters, [*KEY, "broker_name"], "left")
        .withColumn("has_master", F.coalesce(F.col("master_present"), F.lit(False)))
        .drop("master_present")
    )


def topic_distribution(queue_data: DataFrame, broker_data: DataFrame) -> DataFrame:
    """One row per (snapshot, topic); see the module docstring."""
    qd = with_master_flag(queue_data, broker_data)
    master = F.col("has_master")
    writes = F.col("write_queue_nums")
    writable_perm = F.col("perm").bitwiseAND(PERM_WRITE) != 0
    per_topic = qd.groupBy(*KEY, "topic").agg(
        F.count(F.when(master, 1)).alias("brokers"),
        F.count(F.when(~master, 1)).alias("masterless_brokers"),
        F.coalesce(F.sum(F.when(master, F.col("read_queue_nums"))), F.lit(0)).cast("long").alias("read_queues"),
        F.coalesce(F.sum(F.when(master, writes)), F.lit(0)).cast("long").alias("write_queues"),
        F.coalesce(F.sum(F.when(master & writable_perm, writes)), F.lit(0)).cast("long").alias("writable_queues"),
        F.min(F.when(master, writes)).alias("min_broker_write_queues"),
        F.max(F.when(master, writes)).alias("max_broker_write_queues"),
    )
    return with_system_flag(per_topic, broker_data).select(
        *KEY,
        "topic",
        "brokers",
        "read_queues",
        "write_queues",
        "writable_queues",
        "min_broker_write_queues",
        "max_broker_write_queues",
        F.when(F.col("write_queues") > 0, F.col("max_broker_write_queues") / F.col("write_queues"))
        .otherwise(F.lit(0.0))
        .alias("max_broker_write_share"),
        (F.col("brokers") == 1).alias("single_broker"),
        (F.col("writable_queues") > 0).alias("writable"),
        "masterless_brokers",
        "system_topic",
    )


def broker_distribution(queue_data: DataFrame, broker_data: DataFrame) -> DataFrame:
    """One row per (snapshot, broker name of brokerAddrTable); see the module docstring."""
    brokers = broker_data.groupBy(*KEY, "broker_name").agg(
        F.min("cluster").alias("cluster"),  # BrokerData.cluster: one per broker name
        F.max(F.col("broker_id") == 0).alias("has_master"),
        F.count(F.lit(1)).alias("addresses"),
    )
    held = queue_data.groupBy(*KEY, "broker_name").agg(
        F.count(F.lit(1)).alias("held_topics"),
        F.sum("read_queue_nums").alias("held_read"),
        F.sum("write_queue_nums").alias("held_write"),
    )
    master = F.col("has_master")
    joined = brokers.join(held, [*KEY, "broker_name"], "left").select(
        *KEY,
        "cluster",
        "broker_name",
        "has_master",
        "addresses",
        F.when(master, F.coalesce(F.col("held_topics"), F.lit(0))).otherwise(F.lit(0)).cast("long").alias("topics"),
        F.when(master, F.coalesce(F.col("held_read"), F.lit(0))).otherwise(F.lit(0)).cast("long").alias("read_queues"),
        F.when(master, F.coalesce(F.col("held_write"), F.lit(0)))
        .otherwise(F.lit(0))
        .cast("long")
        .alias("write_queues"),
        F.when(~master, F.coalesce(F.col("held_topics"), F.lit(0)))
        .otherwise(F.lit(0))
        .cast("long")
        .alias("slave_only_topics"),
    )
    cluster_total = F.sum("write_queues").over(Window.partitionBy(*KEY, "cluster"))
    return joined.withColumn(
        "write_queue_share",
        F.when(cluster_total > 0, F.col("write_queues") / cluster_total).otherwise(F.lit(0.0)),
    ).select(
        *KEY,
        "cluster",
        "broker_name",
        "topics",
        "read_queues",
        "write_queues",
        "write_queue_share",
        "has_master",
        "addresses",
        "slave_only_topics",
    )


def cluster_distribution(broker_dist: DataFrame, queue_data: DataFrame, broker_data: DataFrame) -> DataFrame:
    """One row per (snapshot, cluster): spread of write queues over the cluster's master broker names.

    Gini over the n master brokers' write queues x sorted ascending (rank i from 1):
    ``2 * sum(i * x_i) / (n * sum(x)) - (n + 1) / n`` (0 = even, towards 1 = all on one broker);
    CV = population standard deviation / mean.
    """
    master = F.col("has_master")
    rank = F.row_number().over(Window.partitionBy(*KEY, "cluster", "has_master").orderBy("write_queues"))
    ranked = broker_dist.withColumn("rank", rank)
    writes = F.when(master, F.col("write_queues"))
    stats = ranked.groupBy(*KEY, "cluster").agg(
        F.count(F.when(master, 1)).alias("brokers"),
        F.count(F.when(~master, 1)).alias("slave_only_brokers"),
        F.coalesce(F.sum(writes), F.lit(0)).cast("long").alias("write_queues"),
        F.min(writes).alias("min_broker_write_queues"),
        F.max(writes).alias("max_broker_write_queues"),
        F.avg(writes).alias("mean_broker_write_queues"),
        F.stddev_pop(writes).alias("stddev"),
        F.sum(F.when(master, F.col("rank") * F.col("write_queues"))).alias("weighted"),
    )
    mean = F.col("mean_broker_write_queues")
    n = F.col("brokers")
    total = F.col("write_queues")
    clusters_of = broker_data.select(*KEY, "broker_name", "cluster").distinct()
    topics = (
        with_master_flag(queue_data, broker_data)
        .where("has_master")
        .join(clusters_of, [*KEY, "broker_name"])
        .groupBy(*KEY, "cluster")
        .agg(F.countDistinct("topic").alias("topics"))
    )
    return (
        stats.join(topics, [*KEY, "cluster"], "left")
        .select(
            *KEY,
            "cluster",
            "brokers",
            "slave_only_brokers",
            F.coalesce(F.col("topics"), F.lit(0)).cast("long").alias("topics"),
            "write_queues",
            "min_broker_write_queues",
            "max_broker_write_queues",
            "mean_broker_write_queues",
            F.when(mean > 0, F.col("max_broker_write_queues") / mean).alias("max_over_mean"),
            F.when(mean > 0, F.col("stddev") / mean).alias("write_queues_cv"),
            F.when(total > 0, F.lit(2.0) * F.col("weighted") / (n * total) - (n + F.lit(1)) / n).alias(
                "write_queues_gini"
            ),
        )
        .withColumn(
            "write_queues_gini", F.when(F.col("write_queues_gini").isNotNull(), F.round("write_queues_gini", 12))
        )
    )


def snapshot_summary(
    manifest: DataFrame, topic_dist: DataFrame, broker_dist: DataFrame, cluster_dist: DataFrame
) -> DataFrame:
    """One row per snapshot of the input (empty ones too): the trend. ``topics`` counts every
    topic, ``business_topics`` + ``system_topics`` split them; the single-broker, unwritable and
    masterless counts are of business topics only."""
    business = ~F.col("system_topic")
    topics = topic_dist.groupBy(*KEY).agg(
        F.count(F.lit(1)).alias("topics"),
        F.count(F.when(business, 1)).alias("business_topics"),
        F.count(F.when(~business, 1)).alias("system_topics"),
        F.count(F.when(business & F.col("single_broker"), 1)).alias("single_broker_topics"),
        F.count(F.when(business & ~F.col("writable"), 1)).alias("unwritable_topics"),
        F.count(F.when(business & (F.col("brokers") == 0), 1)).alias("masterless_topics"),
        F.sum("write_queues").alias("write_queues"),
    )
    brokers = broker_dist.groupBy(*KEY).agg(
        F.count(F.lit(1)).alias("broker_names"),
        F.count(F.when(F.col("has_master"), 1)).alias("master_brokers"),
        F.countDistinct("cluster").alias("clusters"),
    )
    clusters = cluster_dist.groupBy(*KEY).agg(F.max("write_queues_gini").alias("max_cluster_gini"))
    counts = [
        "topics",
        "business_topics",
        "system_topics",
        "single_broker_topics",
        "unwritable_topics",
        "masterless_topics",
        "write_queues",
        "broker_names",
        "master_brokers",
        "clusters",
    ]
    joined = (
        manifest.select(*KEY, "source").join(topics, KEY, "left").join(brokers, KEY, "left").join(clusters, KEY, "left")
    )
    return joined.select(
        *KEY,
        "source",
        *(F.coalesce(F.col(c), F.lit(0)).cast("long").alias(c) for c in counts),
        "max_cluster_gini",
    )


# ---------------------------------------------------------------------------------------- report


def build_report(
    topic: DataFrame,
    broker: DataFrame,
    cluster: DataFrame,
    summary: DataFrame,
    *,
    snapshots: int,
    skipped: int,
    top: int = 20,
) -> Report:
    """The HTML report from the written tables; only small aggregates reach the driver."""
    latest = summary.orderBy(F.desc("snapshot_time"), "namesrv").limit(1).collect()[0]
    is_latest = (F.col("namesrv") == latest["namesrv"]) & (F.col("snapshot_time") == latest["snapshot_time"])
    report = Report(
        "Topic distribution",
        f"latest snapshot {fmt(latest['snapshot_time'])} UTC of NameServer {latest['namesrv']}; "
        f"{snapshots} snapshot(s) in the input",
    )
    clusters = cluster.where(is_latest).orderBy("cluster").limit(500).collect()
    worst = max(clusters, key=lambda r: r["write_queues_gini"] or 0.0, default=None)
    topics = latest["business_topics"]
    single = latest["single_broker_topics"]
    unwritable = latest["unwritable_topics"]
    top_broker = broker.where(is_latest).orderBy(F.desc("write_queue_share"), "broker_name").limit(1).collect()
    report.headline(
        [
            ("business topics", topics),
            ("system topics (not counted below)", latest["system_topics"]),
            ("master brokers", latest["master_brokers"]),
            ("clusters", latest["clusters"]),
            (
                "single-broker business topics",
                f"{single:,} ({100.0 * single / topics:.1f} %)" if topics else "0",
                single > 0,
            ),
            ("business topics with no writable queue", unwritable, unwritable > 0),
            (
                "largest broker share of its cluster",
                f"{100 * top_broker[0]['write_queue_share']:.1f} % ({top_broker[0]['broker_name']})"
                if top_broker
                else "–",
            ),
            (
                "highest cluster Gini",
                f"{worst['write_queues_gini']:.3f} ({worst['cluster']})"
                if worst is not None and worst["write_queues_gini"] is not None
                else "–",
            ),
        ]
    )
    report.paragraph(
        "Business topics are the ones applications use. System topics — RocketMQ's own (TBW102, "
        "SELF_TEST_TOPIC, BenchmarkTest, OFFSET_MOVED_EVENT, rmq_sys_…), the per-consumer-group %RETRY% and "
        "%DLQ% topics, and the topics a broker names after its cluster and itself — live on the broker that "
        "made them by design, so they are left out of every count and table below.",
        note=True,
    )
    if skipped:
        report.paragraph(f"{skipped} snapshot(s) of another schema version were skipped.", note=True)

    report.heading("Clusters: write queues over master brokers")
    report.table(
        ["cluster", "brokers", "slave-only", "topics", "write queues", "max", "mean", "max/mean", "CV", "Gini"],
        [
            [
                r["cluster"],
                r["brokers"],
                r["slave_only_brokers"],
                r["topics"],
                r["write_queues"],
                r["max_broker_write_queues"],
                r["mean_broker_write_queues"],
                r["max_over_mean"],
                r["write_queues_cv"],
                r["write_queues_gini"],
            ]
            for r in clusters
        ],
    )
    report.paragraph(
        "How evenly each cluster spreads write queues over its master brokers. max/mean: the fullest "
        "broker against the average (1 = even, 2 = one broker carries twice its share). CV (coefficient "
        "of variation): standard deviation / mean of the brokers' write queues (0 = all equal; above "
        "about 0.5 the spread is wide). Gini: 0 = every broker has the same number of write queues, "
        "towards 1 = all on one broker; above about 0.3 a few brokers carry most of the writes.",
        note=True,
    )

    bars = broker.where(is_latest & F.col("has_master")).orderBy(F.desc("write_queues"), "broker_name").limit(40)
    bar_rows = bars.collect()
    colors = {c["cluster"]: PALETTE[i % len(PALETTE)] for i, c in enumerate(clusters)}
    brokers_total = latest["master_brokers"]
    mean_all = (latest["write_queues"] / brokers_total) if brokers_total else 0.0
    report.heading("Brokers with the most write queues")
    report.figure(
        bar_chart(
            [r["broker_name"] for r in bar_rows],
            [r["write_queues"] for r in bar_rows],
            title=f"Write queues per master broker (top {len(bar_rows)} of {brokers_total})",
            ylabel="write queues",
            colors=[colors.get(r["cluster"], PALETTE[0]) for r in bar_rows],
            legend={name: color for name, color in colors.items()} if len(colors) > 1 else None,
            hline=(mean_all, f"mean over all {brokers_total} master brokers"),
        ),
        "write queues per broker",
    )
    report.table(
        ["broker", "cluster", "topics", "read queues", "write queues", "share of cluster"],
        [
            [r["broker_name"], r["cluster"], r["topics"], r["read_queues"], r["write_queues"], r["write_queue_share"]]
            for r in bar_rows[:top]
        ],
    )
    slave_only = broker.where(is_latest & ~F.col("has_master")).orderBy("broker_name").limit(top).collect()
    if slave_only:
        report.paragraph(
            "Broker names with only slaves (no master: no producer can write there; their queues are not counted): "
            + ", ".join(f"{r['broker_name']} ({r['slave_only_topics']} topics)" for r in slave_only)
        )

    business = ~F.col("system_topic")
    histogram = topic.where(is_latest & business).groupBy("brokers").count().orderBy("brokers").limit(200).collect()
    report.heading("Brokers per topic")
    report.figure(
        bar_chart(
            [str(r["brokers"]) for r in histogram],
            [r["count"] for r in histogram],
            title="Business topics by number of master brokers carrying them (0 = no master, 1 = no redundancy)",
            ylabel="topics",
            colors=[PALETTE[3] if r["brokers"] <= 1 else PALETTE[0] for r in histogram],
        ),
        "topics by number of brokers",
    )
    _topic_table(
        report,
        f"Single-broker business topics (largest first; {single:,} in all)",
        topic.where(is_latest & business & F.col("single_broker")).orderBy(F.desc("write_queues"), "topic").limit(top),
    )
    _topic_table(
        report,
        f"Business topics with no writable queue ({unwritable:,} in all)",
        topic.where(is_latest & business & ~F.col("writable")).orderBy("topic").limit(top),
    )
    _topic_table(
        report,
        "Most skewed business topics on several brokers (largest broker share of write queues)",
        topic.where(is_latest & business & (F.col("brokers") > 1))
        .orderBy(F.desc("max_broker_write_share"), F.desc("write_queues"), "topic")
        .limit(top),
    )

    trend = summary.orderBy(F.desc("snapshot_time")).limit(2000).collect()
    first_time = min(r["snapshot_time"] for r in trend)
    report.heading(f"Trend over {snapshots} snapshot(s)" + (" (the last 2000)" if snapshots > 2000 else ""))
    series: dict[str, tuple[list[datetime], list[float]]] = {}
    for r in sorted(trend, key=lambda r: r["snapshot_time"]):
        for label in ("single_broker_topics", "unwritable_topics"):
            name = f"{label.replace('_', ' ')} ({r['namesrv']})"
            xs, ys = series.setdefault(name, ([], []))
            xs.append(r["snapshot_time"])
            ys.append(r[label])
    if has_trend(series):
        report.figure(
            line_chart(series, title="Business topics without redundancy or without a writable queue", ylabel="topics"),
            "trend of single-broker and unwritable business topics",
        )
    else:
        report.paragraph("One snapshot time only: no trend to draw.", note=True)
    cluster_trend = (
        cluster.where(F.col("snapshot_time") >= F.lit(first_time))
        .select("namesrv", "snapshot_time", "cluster", "write_queues_gini")
        .orderBy("snapshot_time")
        .limit(20_000)
        .collect()
    )
    gini: dict[str, tuple[list[datetime], list[float]]] = {}
    for r in cluster_trend:
        if r["write_queues_gini"] is not None:
            xs, ys = gini.setdefault(f"{r['cluster']} ({r['namesrv']})", ([], []))
            xs.append(r["snapshot_time"])
            ys.append(r["write_queues_gini"])
    if has_trend(gini):
        report.figure(
            line_chart(gini, title="Gini of write queues over master brokers, per cluster", ylabel="Gini"),
            "trend of the Gini coefficient per cluster",
        )
    report.table(
        [
            "snapshot (UTC)",
            "NameServer",
            "business topics",
            "system topics",
            "master brokers",
            "single-broker",
            "unwritable",
            "max cluster Gini",
        ],
        [
            [
                r["snapshot_time"],
                r["namesrv"],
                r["business_topics"],
                r["system_topics"],
                r["master_brokers"],
                r["single_broker_topics"],
                r["unwritable_topics"],
                r["max_cluster_gini"],
            ]
            for r in trend[:top]
        ],
        caption=f"the latest {min(top, len(trend))} snapshots",
    )
    return report


def _topic_table(report: Report, title: str, rows: DataFrame) -> None:
    report.heading(title)
    report.table(
        ["topic", "brokers", "read queues", "write queues", "writable queues", "max broker share"],
        [
            [
                r["topic"],
                r["brokers"],
                r["read_queues"],
                r["write_queues"],
                r["writable_queues"],
                r["max_broker_write_share"],
            ]
            for r in rows.collect()
        ],
    )


# ---------------------------------------------------------------------------------------- job


def run(spark: SparkSession, args: argparse.Namespace) -> str:
    """Read, transform, write; return the report's URI."""
    snapshots = load_snapshots(spark, args.snapshots, namesrv=args.namesrv)
    queue_data = snapshots.table("queue_data")
    broker_data = snapshots.table("broker_data")
    topic = write_table(topic_distribution(queue_data, broker_data), args.out, "topic_distribution")
    broker = write_table(broker_distribution(queue_data, broker_data), args.out, "broker_distribution")
    cluster = write_table(cluster_distribution(broker, queue_data, broker_data), args.out, "cluster_distribution")
    summary = write_table(snapshot_summary(snapshots.manifest, topic, broker, cluster), args.out, "snapshot_summary")
    report = build_report(
        topic, broker, cluster, summary, snapshots=snapshots.count, skipped=len(snapshots.skipped), top=args.top
    )
    uri = f"{args.out}/report.html"
    write_text(spark, uri, report.html())
    return uri


def build_parser() -> argparse.ArgumentParser:
    """The command line."""
    parser = base_parser("topic_distribution", "How topics spread over brokers (route snapshots -> report).")
    parser.add_argument("--namesrv", default=None, help="only the snapshots of this NameServer identity")
    parser.add_argument("--top", type=int, default=20, help="rows in the report's tables (default 20)")
    return parser


def main(argv: Sequence[str] | None = None, spark: SparkSession | None = None) -> int:
    """Run the job; ``spark`` reuses a session (tests). Returns the exit code."""
    args = parse(build_parser(), argv)
    return run_job("topic_distribution", args, spark, run)


if __name__ == "__main__":
    raise SystemExit(main())
