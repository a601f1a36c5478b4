"""Route snapshots written by the NameServer (namesrv_grpc.snapshot): rows, schemas, all-or-nothing
commits, crash recovery and retention. No Spark here (tests/test_analytics_*.py read them)."""

from __future__ import annotations

import os
import time
from datetime import datetime, timezone
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from namesrv_grpc import snapshot as snapshot_module
from namesrv_grpc.core.errors import SnapshotWriteError
from namesrv_grpc.core.model import DataVersion, TopicQueueMappingInfo
from namesrv_grpc.core.route_table import RouteInfoManager
from namesrv_grpc.snapshot import (
    COMMIT_MARKER,
    SnapshotExporter,
    apply_retention,
    commit_snapshot,
    list_snapshots,
    namesrv_slug,
    parse_file_name,
    recover,
    snapshot_file_name,
    tables_from_copy,
)
from namesrv_grpc.snapshot_schema import METADATA_SCHEMA_VERSION, METADATA_TABLE, SCHEMA_VERSION, STAGING_DIR, TABLES
from tests.support import FakeClock, topic

NOW = 1_795_000_000_123  # 2026-11-18T11:06:40.123Z
NS = "ns1:9876"


def build_table(clock: FakeClock) -> RouteInfoManager:
    table = RouteInfoManager(clock)
    table.register_broker(
        cluster_name="c1",
        broker_name="broker-a",
        broker_id=0,
        broker_addr="10.0.0.1:10911",
        ha_server_addr="10.0.0.1:10912",
        data_version=DataVersion(2, 1000, 7),
        topic_configs={"T1": topic("T1", 8, 8), "T2": topic("T2", 4, 2, perm=4)},
        filter_server_list=["10.0.0.1:30000"],
        zone_name="z1",
        topic_queue_mappings={
            "T2": TopicQueueMappingInfo("T2", "broker-a", total_queues=6, epoch=99, curr_id_map={3: 1, 0: 0})
        },
    )
    table.register_broker(
        cluster_name="c1",
        broker_name="broker-a",
        broker_id=1,
        broker_addr="10.0.0.2:10911",
        data_version=DataVersion(),
        zone_name="z1",
    )
    table.register_broker(
        cluster_name="c1",
        broker_name="broker-b",
        broker_id=0,
        broker_addr="10.0.0.3:10911",
        data_version=DataVersion(0, 5, 1),
        topic_configs={"T1": topic("T1", 4, 4)},
        heartbeat_timeout_millis=30_000,
    )
    return table


def only_file(directory: Path, table: str) -> Path:
    (path,) = (directory / table).glob("snapshot_date=*/*.parquet")
    return path


def test_file_names_sort_by_time_and_name_the_identity() -> None:
    name = snapshot_file_name(NOW, NS)
    assert name == f"20261118T110640123Z-{namesrv_slug(NS)}.parquet"
    assert parse_file_name(name) == (NOW, namesrv_slug(NS))
    assert parse_file_name("part-0000.parquet") is None
    # Identities that only differ in characters a file name cannot hold still differ.
    assert namesrv_slug("a:1") != namesrv_slug("a/1")
    assert snapshot_file_name(NOW, NS) < snapshot_file_name(NOW + 1, NS)


def test_export_writes_every_table_with_its_schema_and_rows(tmp_path: Path) -> None:
    clock = FakeClock(NOW)
    exporter = SnapshotExporter(build_table(clock), tmp_path, NS, clock=clock)
    info = exporter.export()
    assert (info.topics, info.queue_datas, info.broker_names, info.broker_addrs, info.clusters) == (2, 3, 2, 3, 1)
    assert info.snapshot_date == "2026-11-18"
    when = datetime.fromtimestamp(NOW / 1000, timezone.utc)
    for name, schema in TABLES.items():
        path = only_file(tmp_path, name)
        assert path.name == info.file_name
        assert path.parent.name == "snapshot_date=2026-11-18"
        file_schema = pq.read_schema(path)
        assert file_schema.metadata[METADATA_SCHEMA_VERSION] == str(SCHEMA_VERSION).encode()
        assert file_schema.metadata[METADATA_TABLE] == name.encode()
        assert file_schema.remove_metadata() == schema  # the writer's schema is the one definition
        rows = pq.read_table(path).to_pylist()
        assert {(r["snapshot_time"], r["namesrv"], r["schema_version"]) for r in rows} == {(when, NS, SCHEMA_VERSION)}

    def strip(rows: list[dict[str, object]]) -> list[dict[str, object]]:
        return [{k: v for k, v in r.items() if k not in ("snapshot_time", "namesrv", "schema_version")} for r in rows]

    assert strip(pq.read_table(only_file(tmp_path, "queue_data")).to_pylist()) == [
        {"topic": "T1", "broker_name": "broker-a", "read_queue_nums": 8, "write_queue_nums": 8, "perm": 6}
        | {"topic_sys_flag": 0},
        {"topic": "T1", "broker_name": "broker-b", "read_queue_nums": 4, "write_queue_nums": 4, "perm": 6}
        | {"topic_sys_flag": 0},
        {"topic": "T2", "broker_name": "broker-a", "read_queue_nums": 4, "write_queue_nums": 2, "perm": 4}
        | {"topic_sys_flag": 0},
    ]
    brokers = strip(pq.read_table(only_file(tmp_path, "broker_data")).to_pylist())
    assert [(b["broker_name"], b["broker_id"], b["broker_addr"]) for b in brokers] == [
        ("broker-a", 0, "10.0.0.1:10911"),
        ("broker-a", 1, "10.0.0.2:10911"),
        ("broker-b", 0, "10.0.0.3:10911"),
    ]
    assert brokers[0] == {
        "cluster": "c1",
        "broker_name": "broker-a",
        "broker_id": 0,
        "broker_addr": "10.0.0.1:10911",
        "zone_name": "z1",
        "enable_acting_master": False,
        "ha_server_addr": "10.0.0.1:10912",
        "last_update_timestamp": when,
        "heartbeat_timeout_millis": 120_000,
        "data_version_state_version": 2,
        "data_version_timestamp": 1000,
        "data_version_counter": 7,
        "filter_servers": ["10.0.0.1:30000"],
    }
    assert brokers[2]["heartbeat_timeout_millis"] == 30_000
    assert strip(pq.read_table(only_file(tmp_path, "cluster_data")).to_pylist()) == [
        {"cluster": "c1", "broker_name": "broker-a"},
        {"cluster": "c1", "broker_name": "broker-b"},
    ]
    # RocketMQ 5.x static topics (S40): one row per topic and broker name, currIdMap as two lists
    assert strip(pq.read_table(only_file(tmp_path, "topic_queue_mapping")).to_pylist()) == [
        {"topic": "T2", "broker_name": "broker-a", "scope": "__global__", "total_queues": 6, "epoch": 99}
        | {"dirty": False, "logic_queue_ids": [0, 3], "queue_ids": [0, 1]}
    ]
    assert strip(pq.read_table(only_file(tmp_path, "snapshots")).to_pylist()) == [
        {
            "file_name": info.file_name,
            "source": "namesrv",
            "topics": 2,
            "queue_datas": 3,
            "broker_names": 2,
            "broker_addrs": 3,
            "clusters": 1,
        }
    ]
    assert not list((tmp_path / STAGING_DIR).iterdir())


def test_an_empty_table_is_a_snapshot_too(tmp_path: Path) -> None:
    clock = FakeClock(NOW)
    info = SnapshotExporter(RouteInfoManager(clock), tmp_path, NS, clock=clock).export()
    assert (info.topics, info.broker_addrs) == (0, 0)
    assert pq.read_table(only_file(tmp_path, "queue_data")).num_rows == 0
    assert pq.read_table(only_file(tmp_path, "snapshots")).num_rows == 1


def test_exports_in_the_same_millisecond_get_distinct_times(tmp_path: Path) -> None:
    clock = FakeClock(NOW)
    exporter = SnapshotExporter(build_table(clock), tmp_path, NS, clock=clock)
    first, second = exporter.export(), exporter.export()
    assert second.snapshot_time_ms == first.snapshot_time_ms + 1
    assert [t for t, _ in list_snapshots(tmp_path, NS)] == [NOW, NOW + 1]


def test_a_failed_write_leaves_nothing_a_reader_would_pick_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock(NOW)
    real_write = snapshot_module._write_parquet

    def failing_write(path: Path, table_name: str, table: object) -> None:
        if table_name == "broker_data":
            raise OSError(28, "No space left on device")
        real_write(path, table_name, table)

    monkeypatch.setattr(snapshot_module, "_write_parquet", failing_write)
    with pytest.raises(SnapshotWriteError, match="No space left"):
        SnapshotExporter(build_table(clock), tmp_path, NS, clock=clock).export()
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []


def test_a_crash_between_renames_is_invisible_and_finished_at_the_next_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = FakeClock(NOW)
    tables = tables_from_copy(build_table(clock).copy_tables(), snapshot_time_ms=NOW, namesrv=NS)
    real_replace = os.replace
    calls: list[str] = []

    def crash_after_first(src: str | Path, dst: str | Path) -> None:
        calls.append(str(dst))
        if len(calls) > 1:
            raise KeyboardInterrupt("power cut")  # not an OSError: nothing may clean up after it
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", crash_after_first)
    with pytest.raises(KeyboardInterrupt):
        commit_snapshot(tmp_path, tables)
    monkeypatch.setattr(os, "replace", real_replace)
    # queue_data was renamed into place, but the manifest is not there: readers see no snapshot.
    assert list((tmp_path / "queue_data").glob("*/*.parquet"))
    assert list_snapshots(tmp_path, NS) == []
    staged = tmp_path / STAGING_DIR / snapshot_file_name(NOW, NS).removesuffix(".parquet")
    assert (staged / COMMIT_MARKER).exists()
    # The next start finishes the commit.
    assert recover(tmp_path, NS) == [snapshot_file_name(NOW, NS)]
    assert [t for t, _ in list_snapshots(tmp_path, NS)] == [NOW]
    for name in TABLES:
        assert only_file(tmp_path, name).name == snapshot_file_name(NOW, NS)
    assert not staged.exists()


def test_a_crash_before_the_commit_marker_is_discarded_and_other_writers_are_left_alone(tmp_path: Path) -> None:
    mine = tmp_path / STAGING_DIR / snapshot_file_name(NOW, NS).removesuffix(".parquet")
    theirs = tmp_path / STAGING_DIR / snapshot_file_name(NOW, "ns2:9876").removesuffix(".parquet")
    for staged in (mine, theirs):
        staged.mkdir(parents=True)
        (staged / "queue_data.parquet").write_bytes(b"half a file")
    assert recover(tmp_path, NS) == []
    assert not mine.exists()
    assert theirs.exists()  # another NameServer may be writing it right now
    assert not list(tmp_path.glob("queue_data/**/*.parquet"))


def test_retention_deletes_old_snapshots_but_never_the_newest(tmp_path: Path) -> None:
    clock = FakeClock(NOW)
    table = build_table(clock)
    hour = 3_600_000
    exporter = SnapshotExporter(table, tmp_path, NS, retention_hours=lambda: 0, clock=clock)
    other = SnapshotExporter(table, tmp_path, "ns2:9876", clock=clock)
    for _ in range(3):
        exporter.export()
        other.export()
        clock.advance(24 * hour)  # across UTC dates
    assert len(list_snapshots(tmp_path, NS)) == 3
    # 30 days later everything is older than 1 hour: only the newest stays.
    deleted = apply_retention(tmp_path, NS, hour, NOW + 30 * 24 * hour)
    assert len(deleted) == 2
    (newest,) = list_snapshots(tmp_path, NS)
    assert newest[0] == NOW + 48 * hour
    for name in TABLES:
        files = [p for p in (tmp_path / name).glob("*/*.parquet") if namesrv_slug(NS) in p.name]
        assert [p.name for p in files] == [newest[1].name]
    assert len(list_snapshots(tmp_path, "ns2:9876")) == 3  # another identity's snapshots stay
    # Retention at export: keep 36 hours back from the newest export.
    clock.now = NOW + 60 * 24 * hour
    exporter = SnapshotExporter(table, tmp_path, "ns2:9876", retention_hours=lambda: 36, clock=clock)
    exporter.export()
    assert [t for t, _ in list_snapshots(tmp_path, "ns2:9876")] == [clock.now]
    assert apply_retention(tmp_path, NS, 0, NOW + 365 * 24 * hour) == []  # 0 = keep everything


def test_export_measures_its_lock_hold(tmp_path: Path) -> None:
    clock = FakeClock(NOW)
    exporter = SnapshotExporter(build_table(clock), tmp_path, NS, clock=clock)
    started = time.perf_counter()
    exporter.export()
    elapsed = time.perf_counter() - started
    # Measured, and part of the export (how short it is, is measured by scripts/bench_snapshot_export.py).
    assert 0 < exporter.last_copy_seconds <= elapsed
