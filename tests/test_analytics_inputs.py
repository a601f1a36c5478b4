"""The jobs on bad input (a clear error or a documented skip, never a silent wrong answer) and on
synthetic snapshots (numbers checked against pyarrow's reading of the same files)."""

from __future__ import annotations

import collections
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from namesrv_analytics import synthetic, topic_distribution
from namesrv_grpc.snapshot import commit_snapshot, list_snapshots, tables_from_copy
from namesrv_grpc.snapshot_schema import MANIFEST, READABLE_SCHEMA_VERSIONS, SCHEMA_VERSION, TABLE_SINCE, TABLES
from tests.support import FakeClock
from tests.test_snapshot import NOW, build_table

pytestmark = pytest.mark.spark


def run_distribution(spark: SparkSession, snapshots: Path, out: Path, *extra: str) -> int:
    return topic_distribution.main(["--snapshots", str(snapshots), "--out", str(out), *extra], spark=spark)


def write_snapshot(
    directory: Path, time_ms: int, namesrv: str = "ns1:9876", schema_version: int = SCHEMA_VERSION
) -> str:
    """A real snapshot of tests.test_snapshot.build_table; an older ``schema_version`` gets a
    manifest of that version, and then either lacks the tables that version did not have yet (a
    readable version) or has a queue_data file of another layout (as an unreadable old release wrote it)."""
    tables = tables_from_copy(build_table(FakeClock(time_ms)).copy_tables(), snapshot_time_ms=time_ms, namesrv=namesrv)
    if schema_version != SCHEMA_VERSION:
        tables[MANIFEST] = tables[MANIFEST].set_column(2, "schema_version", pa.array([schema_version], pa.int32()))
    info = commit_snapshot(directory, tables)
    if schema_version in READABLE_SCHEMA_VERSIONS:
        for table, since in TABLE_SINCE.items():
            if schema_version < since:
                (path,) = (directory / table).glob(f"*/{info.file_name}")
                path.unlink()
    elif schema_version != SCHEMA_VERSION:
        (path,) = (directory / "queue_data").glob(f"*/{info.file_name}")
        old = pa.table({"topic": ["T1"], "queue_nums": ["eight"]})  # incompatible with this version
        pq.write_table(old, path)
    return info.file_name


def test_a_missing_or_empty_input_is_a_clear_error(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_distribution(spark, tmp_path / "nothing-here", tmp_path / "out") == 2
    assert "no snapshots under" in capsys.readouterr().err
    (tmp_path / "empty" / "snapshots").mkdir(parents=True)
    assert run_distribution(spark, tmp_path / "empty", tmp_path / "out") == 2
    assert "holds no snapshot file" in capsys.readouterr().err
    write_snapshot(tmp_path / "one", NOW)
    assert run_distribution(spark, tmp_path / "one", tmp_path / "out", "--namesrv", "other:1") == 2
    assert "no snapshots of NameServer 'other:1'" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_snapshots_of_another_schema_version_are_skipped_with_a_warning(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = write_snapshot(tmp_path / "in", NOW, schema_version=0)
    assert run_distribution(spark, tmp_path / "in", tmp_path / "out") == 2  # nothing of this version: an error
    err = capsys.readouterr().err
    assert f"skipped snapshot {old}" in err
    assert "no snapshot of schema versions 1, 2" in err
    write_snapshot(tmp_path / "in", NOW + 60_000)
    assert run_distribution(spark, tmp_path / "in", tmp_path / "out") == 0
    assert f"skipped snapshot {old}" in capsys.readouterr().err
    summary = pq.read_table(tmp_path / "out" / "snapshot_summary").to_pylist()
    assert [(r["topics"], r["master_brokers"]) for r in summary] == [(2, 2)]  # only the readable snapshot
    assert "1 snapshot(s) of another schema version were skipped" in (tmp_path / "out" / "report.html").read_text()


def test_a_corrupt_file_fails_the_job_naming_the_file(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_snapshot(tmp_path / "in", NOW)
    name = write_snapshot(tmp_path / "in", NOW + 60_000)
    (path,) = (tmp_path / "in" / "queue_data").glob(f"*/{name}")
    path.write_bytes(path.read_bytes()[:100])  # torn by something else than our writer
    assert run_distribution(spark, tmp_path / "in", tmp_path / "out") == 1
    err = capsys.readouterr().err
    assert "the job failed" in err
    assert name in err


def test_data_files_without_a_manifest_row_are_not_read(spark: SparkSession, tmp_path: Path) -> None:
    write_snapshot(tmp_path / "in", NOW)
    # A commit interrupted by a crash after moving queue_data: no manifest row, so no snapshot.
    orphan = write_snapshot(tmp_path / "in", NOW + 60_000)
    for table in TABLES:
        if table != "queue_data":
            for path in (tmp_path / "in" / table).glob(f"*/{orphan}"):
                path.unlink()
    assert len(list_snapshots(tmp_path / "in", "ns1:9876")) == 1
    assert run_distribution(spark, tmp_path / "in", tmp_path / "out") == 0
    summary = pq.read_table(tmp_path / "out" / "snapshot_summary").to_pylist()
    assert len(summary) == 1
    assert summary[0]["snapshot_time"].timestamp() * 1000 == NOW
    assert len(pq.read_table(tmp_path / "out" / "topic_distribution")) == 2


def test_distribution_of_synthetic_snapshots_matches_an_independent_count(spark: SparkSession, tmp_path: Path) -> None:
    written = synthetic.generate(tmp_path / "in", brokers=24, topics=600, snapshots=3, clusters=3, namesrvs=1)
    assert written == 3
    assert run_distribution(spark, tmp_path / "in", tmp_path / "out") == 0
    # Independently, per snapshot with pyarrow: broker names with a master, then per topic.
    brokers = pq.read_table(tmp_path / "in" / "broker_data").to_pylist()
    masters = {(r["snapshot_time"], r["broker_name"]) for r in brokers if r["broker_id"] == 0}
    cluster_of = {r["broker_name"]: r["cluster"] for r in brokers}
    expected: dict[tuple[object, str], tuple[int, int, bool, bool]] = {}
    per_topic: dict[tuple[object, str], list[dict[str, object]]] = collections.defaultdict(list)
    for r in pq.read_table(tmp_path / "in" / "queue_data").to_pylist():
        per_topic[(r["snapshot_time"], r["topic"])].append(r)
    for key, entries in per_topic.items():
        counted = [e for e in entries if (key[0], e["broker_name"]) in masters]
        writes = sum(int(e["write_queue_nums"]) for e in counted)  # type: ignore[call-overload]
        writable = any(int(e["perm"]) & 2 and int(e["write_queue_nums"]) > 0 for e in counted)  # type: ignore[call-overload]
        expected[key] = (len(counted), writes, len(counted) == 1, writable)
    actual = {
        (r["snapshot_time"], r["topic"]): (r["brokers"], r["write_queues"], r["single_broker"], r["writable"])
        for r in pq.read_table(tmp_path / "out" / "topic_distribution").to_pylist()
    }
    assert actual == expected
    shares: dict[tuple[object, str], float] = collections.defaultdict(float)
    for r in pq.read_table(tmp_path / "out" / "broker_distribution").to_pylist():
        assert 0.0 <= r["write_queue_share"] <= 1.0
        assert r["cluster"] == cluster_of[r["broker_name"]]
        shares[(r["snapshot_time"], r["cluster"])] += r["write_queue_share"]
    assert all(abs(total - 1.0) < 1e-9 for total in shares.values())
    report = (tmp_path / "out" / "report.html").read_text()
    assert report.count("data:image/png;base64,") == 4
    for name in ("topic_distribution", "broker_distribution", "cluster_distribution", "snapshot_summary"):
        assert list((tmp_path / "out" / "csv" / name).glob("part-*.csv"))


def test_version_1_snapshots_are_read_beside_version_2(spark: SparkSession, tmp_path: Path) -> None:
    """Version 2 only added the topic_queue_mapping table: a history spanning the upgrade stays whole."""
    write_snapshot(tmp_path / "in", NOW, schema_version=1)
    assert run_distribution(spark, tmp_path / "in", tmp_path / "only-v1") == 0
    write_snapshot(tmp_path / "in", NOW + 60_000)
    assert run_distribution(spark, tmp_path / "in", tmp_path / "out") == 0
    summary = pq.read_table(tmp_path / "out" / "snapshot_summary").to_pylist()
    assert [(r["topics"], r["master_brokers"]) for r in summary] == [(2, 2), (2, 2)]
    assert "skipped" not in (tmp_path / "out" / "report.html").read_text()
