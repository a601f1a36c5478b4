"""What every job shares: the Spark session, reading snapshots, writing outputs, exit codes.

Reading (:func:`load_snapshots`): the manifest (``snapshots/``) decides which snapshots exist. Only
its rows are collected to the driver (one per snapshot, never per topic), to build the list of data
files to read, so

- a snapshot whose manifest row is missing (a commit interrupted by a crash) is not read,
- a snapshot of another ``schema_version`` is skipped with a warning (:attr:`Snapshots.skipped`,
  shown in every report); when no snapshot is left that is an error, not an empty answer,
- an input without any snapshot is an error (:class:`SnapshotInputError`, exit code 2),
- a corrupt or unreadable file fails the job with Spark's message naming the file (exit code 1);
  it is never skipped, because a snapshot missing a file would give wrong numbers.

Every data table is read with the ``StructType`` derived from the pyarrow schema the writers use
(:func:`spark_schema`), so a writer and the readers cannot drift apart unnoticed.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

import pyarrow as pa
from pyspark.errors import PySparkException
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from namesrv_grpc.snapshot_schema import (
    MANIFEST,
    PARTITION_COLUMN,
    READABLE_SCHEMA_VERSIONS,
    TABLE_SINCE,
    TABLES,
)

KEY = ["namesrv", "snapshot_time"]
"""Identifies one snapshot in every table."""


class SnapshotInputError(Exception):
    """The input holds no usable snapshot (missing, empty, only other schema versions)."""


# ------------------------------------------------------------------------------------ system topics

SYSTEM_TOPICS = frozenset(
    {
        "TBW102",  # AUTO_CREATE_TOPIC_KEY_TOPIC
        "SELF_TEST_TOPIC",
        "BenchmarkTest",
        "OFFSET_MOVED_EVENT",
        "SCHEDULE_TOPIC_XXXX",
        "RMQ_SYS_TRANS_HALF_TOPIC",
        "RMQ_SYS_TRANS_OP_HALF_TOPIC",
        "TRANS_CHECK_MAX_TIME_TOPIC",
        "RMQ_SYS_TRACE_TOPIC",
        "RMQ_SYS_WHEEL_TIMER",
        "rmq_sys_REVIVE_LOG",
    }
)
"""Topics RocketMQ brokers create for themselves (``TopicValidator.SYSTEM_TOPIC_SET`` of RocketMQ
4.9/5.x and the topics a fresh broker registers, rule S38)."""

SYSTEM_TOPIC_PREFIXES = ("rmq_sys_", "%RETRY%", "%DLQ%", "%LMQ%")
"""``TopicValidator.SYSTEM_TOPIC_PREFIX`` and the per-consumer-group retry and dead-letter topics
(``MixAll.RETRY_GROUP_TOPIC_PREFIX``, ``DLQ_GROUP_TOPIC_PREFIX``) and light message queues."""


def is_system_topic(topic: Column, own_names: Column) -> Column:
    """A boolean column: ``topic`` is a system topic — a built-in one (:data:`SYSTEM_TOPICS`), one
    with a system prefix (:data:`SYSTEM_TOPIC_PREFIXES`), or the name of a cluster or broker name of
    the same snapshot (a broker registers topics named after its cluster and itself, S38);
    ``own_names`` is true where the topic is such a name. Everything else is a business topic."""
    prefixed = F.lit(False)
    for prefix in SYSTEM_TOPIC_PREFIXES:
        prefixed = prefixed | topic.startswith(prefix)
    return topic.isin(*sorted(SYSTEM_TOPICS)) | prefixed | F.coalesce(own_names, F.lit(False))


def with_system_flag(df: DataFrame, broker_data: DataFrame) -> DataFrame:
    """``df`` (with ``namesrv``, ``snapshot_time``, ``topic``) plus ``system_topic`` (see
    :func:`is_system_topic`)."""
    names = (
        broker_data.select(*KEY, F.col("cluster").alias("topic"))
        .union(broker_data.select(*KEY, F.col("broker_name").alias("topic")))
        .distinct()
        .withColumn("own_name", F.lit(True))
    )
    return (
        df.join(names, [*KEY, "topic"], "left")
        .withColumn("system_topic", is_system_topic(F.col("topic"), F.col("own_name")))
        .drop("own_name")
    )


def check_input(uri: str) -> None:
    """Fail fast, before a JVM starts, on a local input that cannot hold snapshots: missing, not a
    directory, or without the manifest table (``snapshots/``) and any Parquet file in it. Remote URIs
    (hdfs:, s3a:, ...) are checked by :func:`load_snapshots`. Raises SnapshotInputError."""
    if not is_local(uri):
        return
    path = local_path(uri)
    if not path.exists():
        raise SnapshotInputError(f"no snapshots under {uri}: the directory does not exist")
    if not path.is_dir():
        raise SnapshotInputError(f"no snapshots under {uri}: not a directory")
    manifest = path / MANIFEST
    if not manifest.is_dir():
        raise SnapshotInputError(
            f"no snapshots under {uri}: {manifest} does not exist (give the directory namesrv --snapshot-dir "
            "or namesrv-snapshot --out wrote)"
        )
    if next(manifest.rglob("*.parquet"), None) is None:
        raise SnapshotInputError(f"no snapshots under {uri}: {manifest} holds no snapshot file")


# ------------------------------------------------------------------------------------------ schemas


def spark_type(arrow_type: pa.DataType) -> T.DataType:
    """The Spark type a Parquet column of ``arrow_type`` reads as."""
    if pa.types.is_string(arrow_type):
        return T.StringType()
    if pa.types.is_int32(arrow_type):
        return T.IntegerType()
    if pa.types.is_int64(arrow_type):
        return T.LongType()
    if pa.types.is_boolean(arrow_type):
        return T.BooleanType()
    if pa.types.is_timestamp(arrow_type):
        return T.TimestampType()
    if pa.types.is_list(arrow_type):
        return T.ArrayType(spark_type(arrow_type.value_type), True)
    raise TypeError(f"no Spark type for {arrow_type}")


def spark_schema(table_name: str, *, with_partition: bool = True) -> T.StructType:
    """The ``StructType`` of a snapshot table as Spark reads it: every column nullable (Spark reads
    file columns so), plus ``snapshot_date`` (the partition, a date) unless ``with_partition`` is False."""
    fields = [T.StructField(f.name, spark_type(f.type), True) for f in TABLES[table_name]]
    if with_partition:
        fields.append(T.StructField(PARTITION_COLUMN, T.DateType(), True))
    return T.StructType(fields)


# ------------------------------------------------------------------------------------------ session


def build_session(app_name: str, master: str | None) -> SparkSession:
    """A session for a job. ``master`` wins; else spark-submit's; else ``local[*]``. Time zone UTC.

    In local mode shuffles use a few partitions per core instead of Spark's 200 (which suit a
    cluster); no console progress bars."""
    builder = (
        SparkSession.builder.appName(app_name)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.showConsoleProgress", "false")
    )
    if not master and "PYSPARK_GATEWAY_PORT" not in os.environ:  # not under spark-submit, which sets it
        master = "local[*]"
    if master:
        builder = builder.master(master)
        if master.startswith("local"):
            builder = builder.config("spark.sql.shuffle.partitions", str(4 * (os.cpu_count() or 2)))
            # A local job serves nothing to the network: no web UI (it would listen on every
            # interface), and the driver binds to loopback, so Spark does not warn about choosing an
            # interface. SPARK_UI=1 turns the UI on, on 127.0.0.1 only.
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
            builder = builder.config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1")
            builder = builder.config("spark.ui.enabled", "true" if os.environ.get("SPARK_UI") == "1" else "false")
    return builder.getOrCreate()


# ------------------------------------------------------------------------------------------ reading


@dataclass(frozen=True)
class SkippedSnapshot:
    """A snapshot left out because of its schema version."""

    namesrv: str
    file_name: str
    schema_version: int


@dataclass
class Snapshots:
    """The usable snapshots of an input: the manifest and a reader of each data table."""

    spark: SparkSession
    uri: str
    paths: dict[str, list[str]]
    count: int
    skipped: list[SkippedSnapshot]

    def table(self, table_name: str) -> DataFrame:
        """The rows of ``table_name`` of the usable snapshots (with the ``snapshot_date`` column); no
        rows when every usable snapshot is older than the table (``TABLE_SINCE``)."""
        if not self.paths[table_name]:
            return self.spark.createDataFrame([], spark_schema(table_name))
        return (
            self.spark.read.schema(spark_schema(table_name))
            .option("basePath", f"{self.uri}/{table_name}")
            .parquet(*self.paths[table_name])
        )

    @property
    def manifest(self) -> DataFrame:
        """One row per usable snapshot (the ``snapshots`` table)."""
        return self.table(MANIFEST).dropDuplicates(KEY)


def load_snapshots(spark: SparkSession, uri: str, *, namesrv: str | None = None) -> Snapshots:
    """The snapshots under ``uri`` (of ``namesrv`` only, when given). Raises SnapshotInputError.

    Only the manifest's identifying columns are read here (Parquet reads only the columns asked
    for), so a manifest file of another schema version cannot break the read."""
    uri = uri.rstrip("/")
    manifest_uri = f"{uri}/{MANIFEST}"
    try:
        manifest = spark.read.schema(spark_schema(MANIFEST)).option("basePath", manifest_uri).parquet(manifest_uri)
        rows = (
            manifest.select("namesrv", "snapshot_time", "schema_version", "file_name", PARTITION_COLUMN)
            .dropDuplicates(["namesrv", "snapshot_time", "file_name"])
            .collect()
        )
    except PySparkException as error:
        if error.getCondition() == "PATH_NOT_FOUND":
            raise SnapshotInputError(f"no snapshots under {uri}: {manifest_uri} does not exist") from None
        raise
    if namesrv is not None:
        rows = [r for r in rows if r["namesrv"] == namesrv]
    if not rows:
        which = f" of NameServer {namesrv!r}" if namesrv is not None else ""
        raise SnapshotInputError(f"no snapshots{which} under {uri} ({manifest_uri} has no snapshot files)")
    usable = [r for r in rows if r["schema_version"] in READABLE_SCHEMA_VERSIONS]
    skipped = [
        SkippedSnapshot(r["namesrv"], r["file_name"], r["schema_version"])
        for r in rows
        if r["schema_version"] not in READABLE_SCHEMA_VERSIONS
    ]
    readable = _versions(READABLE_SCHEMA_VERSIONS)
    for s in skipped:
        print(
            f"warning: skipped snapshot {s.file_name} of {s.namesrv}: schema version {s.schema_version}, "
            f"this job reads {readable}",
            file=sys.stderr,
        )
    if not usable:
        versions = sorted({s.schema_version for s in skipped})
        raise SnapshotInputError(
            f"no snapshot of schema {readable} under {uri} "
            f"(found {len(skipped)} of version(s) {versions}); use the analytics of that release"
        )
    paths = {
        table: [
            f"{uri}/{table}/{PARTITION_COLUMN}={r[PARTITION_COLUMN]:%Y-%m-%d}/{r['file_name']}"
            for r in usable
            if r["schema_version"] >= TABLE_SINCE.get(table, 1)
        ]
        for table in TABLES
    }
    return Snapshots(spark, uri, paths, len(usable), skipped)


def _versions(versions: frozenset[int]) -> str:
    """``version 2`` or ``versions 1, 2``: the schema versions a job reads, for messages."""
    ordered = sorted(versions)
    return f"version {ordered[0]}" if len(ordered) == 1 else "versions " + ", ".join(map(str, ordered))


# ------------------------------------------------------------------------------------------ writing


def is_local(uri: str) -> bool:
    """True for a plain path or a ``file:`` URI."""
    return urlparse(uri).scheme in ("", "file")


def local_path(uri: str) -> Path:
    """The path of a plain path or ``file:`` URI."""
    parsed = urlparse(uri)
    return Path(parsed.path if parsed.scheme == "file" else uri)


def csv_ready(df: DataFrame) -> DataFrame:
    """``df`` with array columns joined by ``;`` and timestamps as ISO text, for CSV."""
    columns: list[Column] = []
    for field in df.schema.fields:
        if isinstance(field.dataType, T.ArrayType):
            columns.append(F.concat_ws(";", F.col(field.name)).alias(field.name))
        elif isinstance(field.dataType, T.TimestampType):
            columns.append(F.date_format(F.col(field.name), "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'").alias(field.name))
        else:
            columns.append(F.col(field.name))
    return df.select(*columns)


def write_table(df: DataFrame, out: str, name: str) -> DataFrame:
    """Write ``df`` as Parquet to ``<out>/<name>`` and as CSV (header) to ``<out>/csv/<name>``; return
    the written Parquet as a DataFrame (later reads do not compute ``df`` again)."""
    spark = df.sparkSession
    df.write.mode("overwrite").parquet(f"{out}/{name}")
    written = spark.read.parquet(f"{out}/{name}")
    csv_ready(written).coalesce(1).write.mode("overwrite").option("header", True).csv(f"{out}/csv/{name}")
    return written


def write_text(spark: SparkSession, uri: str, text: str) -> None:
    """Write a text file (the HTML report) to a local path or any Hadoop file system URI."""
    if is_local(uri):
        path = local_path(uri)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    path = jvm.org.apache.hadoop.fs.Path(uri)
    fs = path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    stream = fs.create(path, True)
    try:
        stream.write(bytearray(text.encode("utf-8")))
    finally:
        stream.close()


# ------------------------------------------------------------------------------------------ running


def base_parser(prog: str, description: str) -> argparse.ArgumentParser:
    """``--snapshots URI --out URI [--master M] [--namesrv ID]``."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument(
        "--snapshots", required=True, metavar="URI", help="snapshot directory (path, file:, hdfs:, s3a:, ...)"
    )
    parser.add_argument("--out", required=True, metavar="URI", help="output directory (replaced tables)")
    parser.add_argument(
        "--master", default=None, help="Spark master (default: spark-submit's, else local[*]); e.g. yarn, k8s://..."
    )
    return parser


def spark_error_summary(error: BaseException) -> str:
    """The lines of a Spark/Py4J error that say what failed (its first line, file, cause)."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    wanted = [
        line.lstrip(": ")
        for line in lines
        if not line.startswith("at ") and ("Exception" in line or "Error" in line or line.startswith("["))
    ]
    causes = [line for line in wanted if line.startswith("Caused by")]
    summary = wanted[:1] + causes[-1:]
    return " / ".join(summary) if summary else (lines[0] if lines else type(error).__name__)


def run_job(
    prog: str,
    args: argparse.Namespace,
    spark: SparkSession | None,
    body: Callable[[SparkSession, argparse.Namespace], str],
) -> int:
    """Run a job's ``body`` (it returns the report's URI) with a session (``spark`` or a new one,
    stopped afterwards); map errors to exit codes: 2 bad input, 1 a read or Spark failure."""
    own = spark is None
    try:
        check_input(args.snapshots)
    except SnapshotInputError as error:
        print(f"{prog}: {error}", file=sys.stderr)
        return 2
    session = spark if spark is not None else build_session(prog, args.master)
    # Outputs carry UTC instants as Parquet TIMESTAMP (isAdjustedToUTC), not Spark's legacy INT96.
    session.conf.set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
    started = time.monotonic()
    try:
        report = body(session, args)
    except SnapshotInputError as error:
        print(f"{prog}: {error}", file=sys.stderr)
        return 2
    except Exception as error:
        if isinstance(error, PySparkException) or type(error).__module__.startswith("py4j"):
            print(f"{prog}: the job failed: {spark_error_summary(error)}", file=sys.stderr)
            return 1
        raise
    finally:
        if own:
            session.stop()
    print(f"{prog}: done in {time.monotonic() - started:.1f} s; report: {report}", flush=True)
    return 0


def parse(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse ``argv`` and strip trailing slashes of the URIs."""
    args = parser.parse_args(argv)
    args.snapshots = args.snapshots.rstrip("/")
    args.out = args.out.rstrip("/")
    return args
