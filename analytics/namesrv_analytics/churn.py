"""Churn between consecutive snapshots of each NameServer: brokers appearing and disappearing
(flaps), topics created and deleted.

    python -m namesrv_analytics.churn --snapshots URI --out URI [--namesrv ID] [--master M]

Each NameServer's snapshots are taken in time order; every snapshot is compared with the one before
it (the first has nothing to compare with). A broker is (cluster, broker name, id, address): a
restarted broker on the same address with the same id is the same broker. A topic exists in a
snapshot when it has QueueData there.

Outputs (Parquet ``<out>/<name>``, CSV ``<out>/csv/<name>``, ``<out>/report.html``):

- ``broker_events``: namesrv, snapshot_time, previous_snapshot_time, event (``appeared`` /
  ``disappeared``), cluster, broker_name, broker_id, broker_addr
- ``topic_events``: namesrv, snapshot_time, previous_snapshot_time, event (``created`` /
  ``deleted``), topic
- ``broker_flaps``: per broker with events: ``appeared``, ``disappeared``, ``flaps`` (times it came
  back after disappearing), first and last event
- ``churn_summary``: per compared pair of snapshots: the four event counts
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from datetime import datetime

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from namesrv_analytics.common import KEY, base_parser, load_snapshots, parse, run_job, write_table, write_text
from namesrv_analytics.report import Report, bar_chart, line_chart

BROKER_KEY = ["cluster", "broker_name", "broker_id", "broker_addr"]

# ---------------------------------------------------------------------------------------- transforms


def snapshot_pairs(manifest: DataFrame) -> DataFrame:
    """Per NameServer, each snapshot (``seq`` 2, 3, ...) with its predecessor's time."""
    order = Window.partitionBy("namesrv").orderBy("snapshot_time")
    return (
        manifest.select(*KEY)
        .withColumn("seq", F.row_number().over(order))
        .withColumn("previous_snapshot_time", F.lag("snapshot_time").over(order))
        .where(F.col("seq") >= 2)
    )


def presence_events(present: DataFrame, key: Sequence[str], pairs: DataFrame, added: str, removed: str) -> DataFrame:
    """Events between consecutive snapshots of rows ``(namesrv, snapshot_time, *key)`` that exist:
    ``added`` when a key is in a snapshot and not in its predecessor, ``removed`` the other way."""
    current = present.join(pairs, KEY).select("namesrv", "seq", *key, F.lit(True).alias("now"))
    previous = (
        present.withColumnRenamed("snapshot_time", "previous_snapshot_time")
        .join(pairs, ["namesrv", "previous_snapshot_time"])
        .select("namesrv", "seq", *key, F.lit(True).alias("before"))
    )
    changes = current.join(previous, ["namesrv", "seq", *key], "full_outer").where(
        F.col("now").isNull() | F.col("before").isNull()
    )
    return changes.join(pairs, ["namesrv", "seq"]).select(
        "namesrv",
        "snapshot_time",
        "previous_snapshot_time",
        F.when(F.col("now").isNotNull(), F.lit(added)).otherwise(F.lit(removed)).alias("event"),
        *key,
    )


def broker_events(broker_data: DataFrame, pairs: DataFrame) -> DataFrame:
    """Brokers that appeared or disappeared between consecutive snapshots."""
    present = broker_data.select(*KEY, *BROKER_KEY).distinct()
    return presence_events(present, BROKER_KEY, pairs, "appeared", "disappeared")


def topic_events(queue_data: DataFrame, pairs: DataFrame) -> DataFrame:
    """Topics that were created or deleted between consecutive snapshots."""
    present = queue_data.select(*KEY, "topic").distinct()
    return presence_events(present, ["topic"], pairs, "created", "deleted")


def broker_flaps(events: DataFrame) -> DataFrame:
    """Per broker with events: how often it appeared, disappeared, and came back (flaps)."""
    order = Window.partitionBy("namesrv", *BROKER_KEY).orderBy("snapshot_time")
    came_back = (F.col("event") == "appeared") & (F.lag("event").over(order) == "disappeared")
    return (
        events.withColumn("came_back", came_back)
        .groupBy("namesrv", *BROKER_KEY)
        .agg(
            F.count(F.when(F.col("event") == "appeared", 1)).alias("appeared"),
            F.count(F.when(F.col("event") == "disappeared", 1)).alias("disappeared"),
            F.count(F.when(F.col("came_back"), 1)).alias("flaps"),
            F.min("snapshot_time").alias("first_event"),
            F.max("snapshot_time").alias("last_event"),
        )
    )


def churn_summary(pairs: DataFrame, brokers: DataFrame, topics: DataFrame) -> DataFrame:
    """Per compared pair of snapshots, the number of each event (0 when none)."""
    b = brokers.groupBy(*KEY).agg(
        F.count(F.when(F.col("event") == "appeared", 1)).alias("brokers_appeared"),
        F.count(F.when(F.col("event") == "disappeared", 1)).alias("brokers_disappeared"),
    )
    t = topics.groupBy(*KEY).agg(
        F.count(F.when(F.col("event") == "created", 1)).alias("topics_created"),
        F.count(F.when(F.col("event") == "deleted", 1)).alias("topics_deleted"),
    )
    counts = ["brokers_appeared", "brokers_disappeared", "topics_created", "topics_deleted"]
    return (
        pairs.join(b, KEY, "left")
        .join(t, KEY, "left")
        .select(*KEY, "previous_snapshot_time", *(F.coalesce(F.col(c), F.lit(0)).alias(c) for c in counts))
    )


# ---------------------------------------------------------------------------------------- job


def run(spark: SparkSession, args: argparse.Namespace) -> str:
    """Read, transform, write; return the report's URI."""
    snapshots = load_snapshots(spark, args.snapshots, namesrv=args.namesrv)
    pairs = snapshot_pairs(snapshots.manifest).cache()
    brokers = write_table(broker_events(snapshots.table("broker_data"), pairs), args.out, "broker_events")
    topics = write_table(topic_events(snapshots.table("queue_data"), pairs), args.out, "topic_events")
    flaps = write_table(broker_flaps(brokers), args.out, "broker_flaps")
    summary = write_table(churn_summary(pairs, brokers, topics), args.out, "churn_summary")
    report = build_report(summary, brokers, topics, flaps, snapshots=snapshots.count, top=args.top)
    uri = f"{args.out}/report.html"
    write_text(spark, uri, report.html())
    return uri


def build_report(
    summary: DataFrame, brokers: DataFrame, topics: DataFrame, flaps: DataFrame, *, snapshots: int, top: int = 20
) -> Report:
    """The HTML report; only small aggregates reach the driver."""
    totals = summary.agg(
        F.count(F.lit(1)).alias("pairs"),
        *(
            F.coalesce(F.sum(c), F.lit(0)).alias(c)
            for c in ("brokers_appeared", "brokers_disappeared", "topics_created", "topics_deleted")
        ),
    ).collect()[0]
    flapping = flaps.where(F.col("flaps") > 0).count()
    report = Report("Route churn", f"{snapshots} snapshot(s), {totals['pairs']} consecutive pair(s) compared")
    report.headline(
        [
            ("brokers appeared", totals["brokers_appeared"]),
            ("brokers disappeared", totals["brokers_disappeared"], totals["brokers_disappeared"] > 0),
            ("flapping brokers (came back)", flapping, flapping > 0),
            ("topics created", totals["topics_created"]),
            ("topics deleted", totals["topics_deleted"]),
        ]
    )
    rows = summary.orderBy(F.desc("snapshot_time")).limit(2000).collect()
    series: dict[str, tuple[list[datetime], list[float]]] = {}
    for r in sorted(rows, key=lambda r: r["snapshot_time"]):
        for column in ("brokers_appeared", "brokers_disappeared", "topics_created", "topics_deleted"):
            xs, ys = series.setdefault(f"{column.replace('_', ' ')} ({r['namesrv']})", ([], []))
            xs.append(r["snapshot_time"])
            ys.append(r[column])
    if rows:
        report.figure(
            line_chart(series, title="Events between consecutive snapshots", ylabel="events"),
            "events per snapshot",
        )
    top_flaps = (
        flaps.where(F.col("flaps") > 0).orderBy(F.desc("flaps"), F.desc("disappeared"), *BROKER_KEY).limit(top)
    ).collect()
    report.heading("Flapping brokers")
    if top_flaps:
        report.figure(
            bar_chart(
                [f"{r['broker_name']}/{r['broker_id']} {r['broker_addr']}" for r in top_flaps],
                [r["flaps"] for r in top_flaps],
                title="Times a broker came back after disappearing",
                ylabel="flaps",
            ),
            "flapping brokers",
        )
    report.table(
        ["NameServer", "cluster", "broker", "id", "address", "appeared", "disappeared", "flaps", "last event"],
        [[r[c] for c in ("namesrv", *BROKER_KEY, "appeared", "disappeared", "flaps", "last_event")] for r in top_flaps],
    )
    report.heading("Latest broker events")
    report.table(
        ["time", "NameServer", "event", "cluster", "broker", "id", "address"],
        [
            [r[c] for c in ("snapshot_time", "namesrv", "event", *BROKER_KEY)]
            for r in brokers.orderBy(F.desc("snapshot_time"), *BROKER_KEY).limit(top).collect()
        ],
    )
    report.heading("Latest topic events")
    report.table(
        ["time", "NameServer", "event", "topic"],
        [
            [r["snapshot_time"], r["namesrv"], r["event"], r["topic"]]
            for r in topics.orderBy(F.desc("snapshot_time"), "topic").limit(top).collect()
        ],
    )
    return report


def build_parser() -> argparse.ArgumentParser:
    """The command line."""
    parser = base_parser("churn", "Brokers appearing/disappearing and topics created/deleted between snapshots.")
    parser.add_argument("--namesrv", default=None, help="only the snapshots of this NameServer identity")
    parser.add_argument("--top", type=int, default=20, help="rows in the report's tables (default 20)")
    return parser


def main(argv: Sequence[str] | None = None, spark: SparkSession | None = None) -> int:
    """Run the job; ``spark`` reuses a session (tests). Returns the exit code."""
    args = parse(build_parser(), argv)
    return run_job("churn", args, spark, run)


if __name__ == "__main__":
    raise SystemExit(main())
