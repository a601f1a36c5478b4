"""NameServer consistency: NameServers never sync, so compare their route tables.

    python -m namesrv_analytics.namesrv_consistency --snapshots URI --out URI [--window SECONDS] [--master M]

Snapshots of several NameServers (their own exports into one directory, or ``namesrv-snapshot``
of all of them) are grouped into rounds: tumbling windows of ``--window`` seconds (default 60; use
at least the snapshot interval). In each round the latest snapshot of each NameServer is compared;
rounds with fewer than two NameServers are not comparable and left out. A broker (cluster, broker
name, id, address) differs when some NameServers of the round do not list it; a topic differs when
some have no route for it or the routes (the sorted QueueData) are not all equal.

Outputs (Parquet ``<out>/<name>``, CSV ``<out>/csv/<name>``, ``<out>/report.html``):

- ``rounds``: round_start, round_time (latest snapshot of the round), namesrvs, broker/topic differences
- ``broker_differences``: per round and broker: ``namesrvs_with``, ``namesrvs_without``
- ``topic_differences``: per round and topic: ``namesrvs_with_route``, ``namesrvs_without_route``,
  ``distinct_routes``, ``differences`` (what differs between the routes, one text per broker name and
  field: ``broker-a perm: ns1=6, ns2=4``, or ``broker-a: no QueueData on ns2``)
- ``broker_difference_spans`` / ``topic_difference_spans``: how long: consecutive comparable rounds
  with the same difference: ``first_seen``, ``last_seen`` (round times), ``rounds``,
  ``duration_seconds`` (last - first: 0 for one round, a lower bound), ``resolved_at`` (the next
  comparable round's time, where it was gone; null while it lasts)

A difference lasting a single round is often only the time between two snapshots (a broker that
registered in between); ones over several rounds are real.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from datetime import datetime

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from namesrv_analytics.common import KEY, base_parser, load_snapshots, parse, run_job, write_table, write_text
from namesrv_analytics.report import Report, fmt, has_trend, line_chart

BROKER_KEY = ["cluster", "broker_name", "broker_id", "broker_addr"]

# ---------------------------------------------------------------------------------------- transforms


def choose_rounds(manifest: DataFrame, window_seconds: int) -> tuple[DataFrame, DataFrame]:
    """``(chosen, rounds)``: the latest snapshot of each NameServer per round (round_start, namesrv,
    snapshot_time, round_seq) and the comparable rounds (round_start, round_seq, round_time,
    namesrvs sorted, namesrv_count); rounds numbered 1, 2, ... in time order."""
    window_ms = window_seconds * 1000
    millis = F.unix_millis(F.col("snapshot_time"))
    with_round = manifest.select(*KEY).withColumn(
        "round_start", F.timestamp_millis(F.floor(millis / window_ms) * window_ms)
    )
    latest = F.row_number().over(Window.partitionBy("round_start", "namesrv").orderBy(F.desc("snapshot_time")))
    chosen = with_round.withColumn("pick", latest).where("pick = 1").drop("pick")
    rounds = (
        chosen.groupBy("round_start")
        .agg(
            F.max("snapshot_time").alias("round_time"),
            F.array_sort(F.collect_list("namesrv")).alias("namesrvs"),
            F.count(F.lit(1)).alias("namesrv_count"),
        )
        .where(F.col("namesrv_count") >= 2)
        .withColumn("round_seq", F.row_number().over(Window.orderBy("round_start")))
    )
    chosen = chosen.join(rounds.select("round_start", "round_seq"), "round_start")
    return chosen, rounds


def broker_differences(broker_data: DataFrame, chosen: DataFrame, rounds: DataFrame) -> DataFrame:
    """Per comparable round, every broker some NameServers of the round do not list."""
    present = broker_data.select(*KEY, *BROKER_KEY).join(chosen, KEY)
    per_broker = present.groupBy("round_start", *BROKER_KEY).agg(
        F.array_sort(F.collect_set("namesrv")).alias("namesrvs_with")
    )
    return (
        per_broker.join(rounds, "round_start")
        .where(F.size("namesrvs_with") < F.col("namesrv_count"))
        .select(
            "round_start",
            "round_seq",
            "round_time",
            *BROKER_KEY,
            "namesrvs_with",
            F.array_except("namesrvs", "namesrvs_with").alias("namesrvs_without"),
        )
    )


QUEUE_DATA_FIELDS = ("read_queue_nums", "write_queue_nums", "perm", "topic_sys_flag")


def route_field_differences(entries: DataFrame) -> DataFrame:
    """Per (round_start, topic): ``differences``, the texts saying how the NameServers that route the
    topic disagree, per broker name: a QueueData field with several values
    (``broker-a perm: ns1=6, ns2=4``) or a broker name some of them lack (``broker-a: no QueueData on
    ns2``). ``entries``: round_start, namesrv, topic, broker_name and the QueueData fields."""
    routed_by = entries.groupBy("round_start", "topic").agg(F.array_sort(F.collect_set("namesrv")).alias("routed_by"))
    entry = F.struct("namesrv", *QUEUE_DATA_FIELDS)
    per_broker = (
        entries.groupBy("round_start", "topic", "broker_name")
        .agg(F.array_sort(F.collect_list(entry)).alias("entries"))
        .join(routed_by, ["round_start", "topic"])
    )
    texts = [_field_difference(name) for name in QUEUE_DATA_FIELDS]
    lacking = F.array_except("routed_by", F.transform("entries", lambda e: e["namesrv"]))
    texts.append(
        F.when(
            F.size(lacking) > 0,
            F.concat(F.col("broker_name"), F.lit(": no QueueData on "), F.array_join(lacking, ", ")),
        )
    )
    described = per_broker.select(
        "round_start", "topic", F.filter(F.array(*texts), lambda t: t.isNotNull()).alias("texts")
    )
    return described.groupBy("round_start", "topic").agg(
        F.array_sort(F.flatten(F.collect_list("texts"))).alias("differences")
    )


def _field_difference(name: str) -> Column:
    """``broker-a perm: ns1=6, ns2=4`` when the ``entries`` disagree on QueueData field ``name``, else null.
    (A function of its own: Spark reads a lambda's second parameter as the element index.)"""
    values = F.transform("entries", lambda e: e[name])
    listed = F.array_join(
        F.transform("entries", lambda e: F.concat(e["namesrv"], F.lit("="), e[name].cast("string"))), ", "
    )
    return F.when(F.size(F.array_distinct(values)) > 1, F.concat(F.col("broker_name"), F.lit(f" {name}: "), listed))


def topic_differences(queue_data: DataFrame, chosen: DataFrame, rounds: DataFrame) -> DataFrame:
    """Per comparable round, every topic that some NameServers lack or route differently, with what
    differs (:func:`route_field_differences`)."""
    entry = F.struct("broker_name", *QUEUE_DATA_FIELDS)
    entries = queue_data.join(chosen, KEY).select("round_start", "namesrv", "topic", "broker_name", *QUEUE_DATA_FIELDS)
    routes = entries.groupBy("round_start", "namesrv", "topic").agg(F.array_sort(F.collect_list(entry)).alias("route"))
    per_topic = routes.groupBy("round_start", "topic").agg(
        F.array_sort(F.collect_list("namesrv")).alias("namesrvs_with_route"),
        F.size(F.collect_set("route")).alias("distinct_routes"),
    )
    return (
        per_topic.join(rounds, "round_start")
        .where((F.size("namesrvs_with_route") < F.col("namesrv_count")) | (F.col("distinct_routes") > 1))
        .join(route_field_differences(entries), ["round_start", "topic"], "left")
        .select(
            "round_start",
            "round_seq",
            "round_time",
            "topic",
            "namesrvs_with_route",
            F.array_except("namesrvs", "namesrvs_with_route").alias("namesrvs_without_route"),
            F.col("distinct_routes").cast("long").alias("distinct_routes"),
            F.coalesce(F.col("differences"), F.array().cast("array<string>")).alias("differences"),
        )
    )


def difference_spans(differences: DataFrame, key: Sequence[str], rounds: DataFrame) -> DataFrame:
    """Runs of consecutive comparable rounds in which the same ``key`` differs (gaps and islands)."""
    order = Window.partitionBy(*key).orderBy("round_seq")
    islands = differences.withColumn("island", F.col("round_seq") - F.row_number().over(order))
    spans = islands.groupBy(*key, "island").agg(
        F.min("round_time").alias("first_seen"),
        F.max("round_time").alias("last_seen"),
        F.count(F.lit(1)).alias("rounds"),
        F.max("round_seq").alias("last_seq"),
    )
    following = rounds.select(F.col("round_seq").alias("next_seq"), F.col("round_time").alias("resolved_at"))
    return (
        spans.join(following, F.col("next_seq") == F.col("last_seq") + 1, "left")
        .select(
            *key,
            "first_seen",
            "last_seen",
            "rounds",
            (F.unix_millis(F.col("last_seen")) - F.unix_millis(F.col("first_seen")))
            .cast("double")
            .__truediv__(1000.0)
            .alias("duration_seconds"),
            "resolved_at",
        )
        .orderBy(F.desc("rounds"), *key)
    )


def round_summary(rounds: DataFrame, brokers: DataFrame, topics: DataFrame) -> DataFrame:
    """``rounds`` with the numbers of broker and topic differences."""
    b = brokers.groupBy("round_start").agg(F.count(F.lit(1)).alias("broker_differences"))
    t = topics.groupBy("round_start").agg(F.count(F.lit(1)).alias("topic_differences"))
    return (
        rounds.join(b, "round_start", "left")
        .join(t, "round_start", "left")
        .select(
            "round_start",
            "round_seq",
            "round_time",
            "namesrvs",
            "namesrv_count",
            F.coalesce(F.col("broker_differences"), F.lit(0)).alias("broker_differences"),
            F.coalesce(F.col("topic_differences"), F.lit(0)).alias("topic_differences"),
        )
    )


# ---------------------------------------------------------------------------------------- job


def run(spark: SparkSession, args: argparse.Namespace) -> str:
    """Read, transform, write; return the report's URI."""
    snapshots = load_snapshots(spark, args.snapshots)
    chosen, rounds = choose_rounds(snapshots.manifest, args.window)
    rounds = rounds.cache()
    brokers = write_table(
        broker_differences(snapshots.table("broker_data"), chosen, rounds), args.out, "broker_differences"
    )
    topics = write_table(
        topic_differences(snapshots.table("queue_data"), chosen, rounds), args.out, "topic_differences"
    )
    summary = write_table(round_summary(rounds, brokers, topics), args.out, "rounds")
    broker_spans = write_table(difference_spans(brokers, BROKER_KEY, rounds), args.out, "broker_difference_spans")
    topic_spans = write_table(difference_spans(topics, ["topic"], rounds), args.out, "topic_difference_spans")
    report = build_report(
        summary, brokers, topics, broker_spans, topic_spans, window=args.window, snapshots=snapshots.count
    )
    uri = f"{args.out}/report.html"
    write_text(spark, uri, report.html())
    return uri


def build_report(
    summary: DataFrame,
    brokers: DataFrame,
    topics: DataFrame,
    broker_spans: DataFrame,
    topic_spans: DataFrame,
    *,
    window: int,
    snapshots: int,
    top: int = 20,
) -> Report:
    """The HTML report; only small aggregates reach the driver."""
    rows = summary.orderBy(F.desc("round_start")).limit(2000).collect()
    namesrvs = sorted({n for r in rows for n in r["namesrvs"]})
    report = Report(
        "NameServer consistency",
        f"{snapshots} snapshot(s); rounds of {window} s; NameServers: {', '.join(namesrvs) or 'none comparable'}",
    )
    if not rows:
        report.paragraph("No round holds snapshots of two NameServers: nothing to compare. Use a larger --window.")
        return report
    latest = rows[0]
    open_brokers = broker_spans.where(F.col("resolved_at").isNull() & (F.col("rounds") >= 2)).count()
    open_topics = topic_spans.where(F.col("resolved_at").isNull() & (F.col("rounds") >= 2)).count()
    longest_each = [spans.agg(F.max("duration_seconds")).collect()[0][0] for spans in (broker_spans, topic_spans)]
    longest_seconds = max((v for v in longest_each if v is not None), default=None)
    report.headline(
        [
            ("comparable rounds", len(rows)),
            ("rounds with a difference", sum(1 for r in rows if r["broker_differences"] or r["topic_differences"])),
            ("brokers differing (latest round)", latest["broker_differences"], latest["broker_differences"] > 0),
            ("topics differing (latest round)", latest["topic_differences"], latest["topic_differences"] > 0),
            ("lasting differences still open (≥ 2 rounds)", open_brokers + open_topics, open_brokers + open_topics > 0),
            ("longest difference", f"{longest_seconds:,.0f} s" if longest_seconds is not None else "–"),
        ]
    )
    ordered = sorted(rows, key=lambda r: r["round_start"])
    times: list[datetime] = [r["round_time"] for r in ordered]
    series = {
        "brokers differing": (times, [float(r["broker_differences"]) for r in ordered]),
        "topics differing": (times, [float(r["topic_differences"]) for r in ordered]),
    }
    if not any(r["broker_differences"] or r["topic_differences"] for r in ordered):
        report.paragraph(f"The NameServers agreed in all {len(ordered)} comparable round(s).", note=True)
    elif has_trend(series):
        report.figure(
            line_chart(series, title="Differences between NameServers per round", ylabel="differences"),
            "differences per round",
        )
    else:
        report.paragraph("One comparable round only: no trend to draw.", note=True)
    report.heading("Longest broker differences")
    report.table(
        ["cluster", "broker", "id", "address", "first seen", "last seen", "rounds", "seconds", "resolved at"],
        [
            [r[c] for c in (*BROKER_KEY, "first_seen", "last_seen", "rounds", "duration_seconds", "resolved_at")]
            for r in broker_spans.orderBy(F.desc("duration_seconds"), F.desc("rounds")).limit(top).collect()
        ],
    )
    report.heading("Longest topic differences")
    report.table(
        ["topic", "first seen", "last seen", "rounds", "seconds", "resolved at"],
        [
            [r["topic"], r["first_seen"], r["last_seen"], r["rounds"], r["duration_seconds"], r["resolved_at"]]
            for r in topic_spans.orderBy(F.desc("duration_seconds"), F.desc("rounds")).limit(top).collect()
        ],
    )
    is_latest = F.col("round_start") == F.lit(latest["round_start"])
    report.heading(f"Latest round ({fmt(latest['round_time'])} UTC): brokers")
    report.table(
        ["cluster", "broker", "id", "address", "listed by", "missing from"],
        [
            [*(r[c] for c in BROKER_KEY), ", ".join(r["namesrvs_with"]), ", ".join(r["namesrvs_without"])]
            for r in brokers.where(is_latest).orderBy(*BROKER_KEY).limit(top).collect()
        ],
    )
    report.heading("Latest round: topics")
    report.table(
        ["topic", "routed by", "missing from", "distinct routes", "what differs"],
        [
            [
                r["topic"],
                ", ".join(r["namesrvs_with_route"]),
                ", ".join(r["namesrvs_without_route"]),
                r["distinct_routes"],
                "; ".join(r["differences"]) or "–",
            ]
            for r in topics.where(is_latest).orderBy("topic").limit(top).collect()
        ],
    )
    return report


def build_parser() -> argparse.ArgumentParser:
    """The command line."""
    parser = base_parser("namesrv_consistency", "Where the route tables of several NameServers differ, how long.")
    parser.add_argument(
        "--window", type=int, default=60, help="seconds per comparison round (default 60; >= snapshot interval)"
    )
    return parser


def main(argv: Sequence[str] | None = None, spark: SparkSession | None = None) -> int:
    """Run the job; ``spark`` reuses a session (tests). Returns the exit code."""
    args = parse(build_parser(), argv)
    if args.window < 1:
        build_parser().error("--window must be at least 1 second")
    return run_job("namesrv_consistency", args, spark, run)


if __name__ == "__main__":
    raise SystemExit(main())
