"""Route snapshots: the whole route table as Parquet files that Spark jobs read (``analytics/``).

The tables and the directory layout are in :mod:`namesrv_grpc.snapshot_schema`. This module

- turns a :class:`~namesrv_grpc.core.route_tables.RouteTableCopy` into those Arrow tables
  (:func:`tables_from_copy`),
- commits them all or nothing (:func:`commit_snapshot`): every file is written and fsynced under
  ``_staging/<stem>/``, then a ``COMMIT`` marker, then each file is renamed into its dataset, the
  manifest (``snapshots/``) last. Readers only count a snapshot whose manifest row exists, so they
  never see half of one. A crash before the marker leaves only ``_staging`` (deleted at the next
  start); after it, the next start finishes the renames (:func:`recover`),
- deletes snapshots older than the retention, never the newest of an identity (:func:`apply_retention`),
- and exports a live NameServer's table (:class:`SnapshotExporter`; the server runs it in a thread).

One writer per (directory, NameServer identity) at a time; several identities may share a directory.
Needs pyarrow, which only the ``snapshots`` extra installs: without it, importing this module raises
:class:`~namesrv_grpc.core.errors.SnapshotsNotInstalledError` (the server imports it when a snapshot
is first asked for, so a NameServer without pyarrow runs and answers that RPC with the error).
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import logging
import os
import re
import shutil
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from namesrv_grpc.core.errors import SnapshotsNotInstalledError, SnapshotWriteError

try:
    import pyarrow as pa
    import pyarrow.parquet as pq
except ImportError as error:  # `pip install namesrv-grpc` without the snapshots extra
    raise SnapshotsNotInstalledError() from error
from namesrv_grpc.core.route_table import RouteInfoManager
from namesrv_grpc.core.route_tables import Clock, RouteTableCopy, wall_clock_millis
from namesrv_grpc.snapshot_schema import (
    BROKER_DATA,
    CLUSTER_DATA,
    MANIFEST,
    PARTITION_COLUMN,
    QUEUE_DATA,
    SCHEMA_VERSION,
    SNAPSHOTS,
    STAGING_DIR,
    TABLES,
    TOPIC_QUEUE_MAPPING,
    with_metadata,
)

log = logging.getLogger(__name__)

COMMIT_MARKER = "COMMIT"
"""In a staging directory: every file is complete, the renames may (and after a crash, must) proceed."""

_FILE_NAME = re.compile(r"^(\d{8}T\d{9}Z)-(.+)\.parquet$")


@dataclass(frozen=True, slots=True)
class SnapshotInfo:
    """A committed snapshot: where it is and how big."""

    directory: Path
    namesrv: str
    snapshot_time_ms: int
    file_name: str
    topics: int
    queue_datas: int
    broker_names: int
    broker_addrs: int
    clusters: int

    @property
    def snapshot_date(self) -> str:
        """``YYYY-MM-DD`` (UTC), the partition of every file of the snapshot."""
        return snapshot_date(self.snapshot_time_ms)


def namesrv_slug(namesrv: str) -> str:
    """A file-name-safe, unambiguous form of a NameServer identity: its safe characters and a hash."""
    safe = re.sub(r"[^A-Za-z0-9._]+", "_", namesrv)[:64]
    return f"{safe}-{hashlib.sha1(namesrv.encode()).hexdigest()[:8]}"


def snapshot_date(snapshot_time_ms: int) -> str:
    """The UTC date of a time in ms, ``YYYY-MM-DD``."""
    return datetime.fromtimestamp(snapshot_time_ms / 1000, timezone.utc).strftime("%Y-%m-%d")


def snapshot_file_name(snapshot_time_ms: int, namesrv: str) -> str:
    """``20261122T005344123Z-<slug>.parquet``: sorts by time, names the identity."""
    moment = datetime.fromtimestamp(snapshot_time_ms // 1000, timezone.utc)
    return f"{moment:%Y%m%dT%H%M%S}{snapshot_time_ms % 1000:03d}Z-{namesrv_slug(namesrv)}.parquet"


def parse_file_name(file_name: str) -> tuple[int, str] | None:
    """``(snapshot time ms, slug)`` of a snapshot file name, or None for any other name."""
    match = _FILE_NAME.match(file_name)
    if match is None:
        return None
    stamp, slug = match.groups()
    moment = datetime.strptime(stamp[:15], "%Y%m%dT%H%M%S").replace(tzinfo=timezone.utc)
    return int(moment.timestamp()) * 1000 + int(stamp[15:18]), slug


# ---------------------------------------------------------------------------------------------- tables


def _common(n: int, snapshot_time_ms: int, namesrv: str) -> list[pa.Array]:
    return [
        pa.array([snapshot_time_ms] * n, SNAPSHOTS.field("snapshot_time").type),
        pa.array([namesrv] * n, pa.string()),
        pa.array([SCHEMA_VERSION] * n, pa.int32()),
    ]


CHUNK_ROWS = 16_384
"""Rows converted to Arrow per call: pyarrow holds the GIL while converting a Python list, so big
lists would stall the event loop's thread (100 ms for 800k rows in one call)."""


def _queue_data_batches(copy: RouteTableCopy, snapshot_time_ms: int, namesrv: str) -> Iterator[pa.RecordBatch]:
    columns: tuple[list[str], list[str], list[int], list[int], list[int], list[int]] = ([], [], [], [], [], [])
    topics, names, reads, writes, perms, flags = columns

    def batch() -> pa.RecordBatch:
        result = pa.RecordBatch.from_arrays(
            [
                *_common(len(topics), snapshot_time_ms, namesrv),
                pa.array(topics, pa.string()),
                pa.array(names, pa.string()),
                *(pa.array(values, pa.int32()) for values in (reads, writes, perms, flags)),
            ],
            schema=QUEUE_DATA,
        )
        for values in columns:
            values.clear()
        return result

    for topic, queue_data_map in copy.topic_queue_table.items():
        for name, q in queue_data_map.items():
            topics.append(topic)
            names.append(name)
            reads.append(q.read_queue_nums)
            writes.append(q.write_queue_nums)
            perms.append(q.perm)
            flags.append(q.topic_sys_flag)
        if len(topics) >= CHUNK_ROWS:
            yield batch()
            time.sleep(0)  # let the event loop's thread take the GIL between chunks
    yield batch()


def tables_from_copy(
    copy: RouteTableCopy, *, snapshot_time_ms: int, namesrv: str, source: str = "namesrv"
) -> dict[str, pa.Table]:
    """The snapshot tables of a route table copy (``queue_data`` in the table's order, the others
    sorted by their keys).

    ``broker_data`` has one row per address of each BrokerData, joined with the address's live entry
    (live columns null when ``copy.broker_live_table`` has none, as for snapshots taken through RPCs).
    """
    batches = list(_queue_data_batches(copy, snapshot_time_ms, namesrv))
    n = sum(batch.num_rows for batch in batches)
    # In the table's order (topics as first registered), not sorted: sorting 800k rows costs 0.3 s.
    queue_data = pa.Table.from_batches(batches, schema=QUEUE_DATA)

    broker_rows: list[tuple[object, ...]] = []
    for name, data in copy.broker_addr_table.items():
        for broker_id, addr in data.broker_addrs.items():
            live = copy.broker_live_table.get(addr)
            version = live.data_version if live is not None else None
            broker_rows.append(
                (
                    data.cluster,
                    name,
                    broker_id,
                    addr,
                    data.zone_name,
                    data.enable_acting_master,
                    live.ha_server_addr if live is not None else None,
                    live.last_update_timestamp if live is not None else None,
                    live.heartbeat_timeout_millis if live is not None else None,
                    version.state_version if version is not None else None,
                    version.timestamp if version is not None else None,
                    version.counter if version is not None else None,
                    list(copy.filter_server_table.get(addr, ())),
                )
            )
    columns = list(zip(*broker_rows, strict=True)) if broker_rows else [()] * 13
    broker_data = pa.Table.from_arrays(
        [
            *_common(len(broker_rows), snapshot_time_ms, namesrv),
            *(
                pa.array(list(values), BROKER_DATA.field(i + 3).type)
                for i, values in enumerate(columns)  # the 13 columns after the common three
            ),
        ],
        schema=BROKER_DATA,
    ).sort_by([("broker_name", "ascending"), ("broker_id", "ascending")])

    cluster_rows = sorted((cluster, name) for cluster, names in copy.cluster_addr_table.items() for name in names)
    cluster_data = pa.Table.from_arrays(
        [
            *_common(len(cluster_rows), snapshot_time_ms, namesrv),
            pa.array([c for c, _ in cluster_rows], pa.string()),
            pa.array([b for _, b in cluster_rows], pa.string()),
        ],
        schema=CLUSTER_DATA,
    )
    manifest = manifest_table(
        snapshot_time_ms=snapshot_time_ms,
        namesrv=namesrv,
        source=source,
        topics=len(copy.topic_queue_table),
        queue_datas=n,
        broker_names=len(copy.broker_addr_table),
        broker_addrs=len(broker_rows),
        clusters=len(copy.cluster_addr_table),
    )
    return {
        "queue_data": queue_data,
        "broker_data": broker_data,
        "cluster_data": cluster_data,
        "topic_queue_mapping": mapping_table(copy, snapshot_time_ms, namesrv),
        MANIFEST: manifest,
    }


def mapping_table(copy: RouteTableCopy, snapshot_time_ms: int, namesrv: str) -> pa.Table:
    """``topic_queue_mapping`` (RocketMQ 5.x static topics): one row per topic and broker name,
    sorted by both."""
    rows = sorted(
        (topic, bname, mapping)
        for topic, by_broker in copy.topic_queue_mapping_info_table.items()
        for bname, mapping in by_broker.items()
    )
    ids = [sorted(mapping.curr_id_map.items()) for _, _, mapping in rows]
    return pa.Table.from_arrays(
        [
            *_common(len(rows), snapshot_time_ms, namesrv),
            pa.array([topic for topic, _, _ in rows], pa.string()),
            pa.array([bname for _, bname, _ in rows], pa.string()),
            pa.array([m.scope for _, _, m in rows], pa.string()),
            pa.array([m.total_queues for _, _, m in rows], pa.int32()),
            pa.array([m.epoch for _, _, m in rows], pa.int64()),
            pa.array([m.dirty for _, _, m in rows], pa.bool_()),
            pa.array([[logic for logic, _ in pairs] for pairs in ids], pa.list_(pa.int32())),
            pa.array([[queue for _, queue in pairs] for pairs in ids], pa.list_(pa.int32())),
        ],
        schema=TOPIC_QUEUE_MAPPING,
    )


def manifest_table(
    *,
    snapshot_time_ms: int,
    namesrv: str,
    source: str,
    topics: int,
    queue_datas: int,
    broker_names: int,
    broker_addrs: int,
    clusters: int,
    schema_version: int = SCHEMA_VERSION,
) -> pa.Table:
    """The one-row manifest of a snapshot."""
    return pa.Table.from_pylist(
        [
            {
                "snapshot_time": snapshot_time_ms,
                "namesrv": namesrv,
                "schema_version": schema_version,
                "file_name": snapshot_file_name(snapshot_time_ms, namesrv),
                "source": source,
                "topics": topics,
                "queue_datas": queue_datas,
                "broker_names": broker_names,
                "broker_addrs": broker_addrs,
                "clusters": clusters,
            }
        ],
        schema=SNAPSHOTS,
    )


# ---------------------------------------------------------------------------------------------- files


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:  # some filesystems refuse a directory fsync; the data files are synced
        log.debug("fsync of directory %s failed: %s", path, exc)


def _write_parquet(path: Path, table_name: str, table: pa.Table) -> None:
    schema = with_metadata(table_name, TABLES[table_name])
    with path.open("wb") as out:
        pq.write_table(table.cast(schema), out, compression="zstd")
        out.flush()
        os.fsync(out.fileno())


def commit_snapshot(directory: Path, tables: Mapping[str, pa.Table]) -> SnapshotInfo:
    """Write one snapshot (a table per dataset of :data:`~namesrv_grpc.snapshot_schema.TABLES`, each
    of its schema, the manifest of one row) into ``directory``, all or nothing. Raises OSError or an
    Arrow error; then nothing is visible to readers (the staging directory is removed).
    Raises FileExistsError when the identity already has a snapshot of that time.
    """
    manifest = tables[MANIFEST].to_pylist()
    if len(manifest) != 1 or set(tables) != set(TABLES):
        raise ValueError(f"a snapshot needs one manifest row and the tables {sorted(TABLES)}")
    row = manifest[0]
    file_name = str(row["file_name"])
    parsed = parse_file_name(file_name)
    if parsed is None:
        raise ValueError(f"bad snapshot file name {file_name!r}")
    time_ms = parsed[0]
    stem = file_name.removesuffix(".parquet")
    date = snapshot_date(time_ms)
    if (directory / MANIFEST / f"{PARTITION_COLUMN}={date}" / file_name).exists():
        raise FileExistsError(f"snapshot {file_name} already exists in {directory}")
    staging = directory / STAGING_DIR / stem
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        for table_name in TABLES:
            _write_parquet(staging / f"{table_name}.parquet", table_name, tables[table_name])
        (staging / COMMIT_MARKER).write_bytes(b"")
        _fsync_dir(staging)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    _finish_commit(directory, staging)
    return SnapshotInfo(
        directory=directory,
        namesrv=str(row["namesrv"]),
        snapshot_time_ms=time_ms,
        file_name=file_name,
        topics=int(row["topics"]),
        queue_datas=int(row["queue_datas"]),
        broker_names=int(row["broker_names"]),
        broker_addrs=int(row["broker_addrs"]),
        clusters=int(row["clusters"]),
    )


def _finish_commit(directory: Path, staging: Path) -> None:
    """Move a committed staging directory's files into the datasets (manifest last); idempotent."""
    file_name = f"{staging.name}.parquet"
    parsed = parse_file_name(file_name)
    if parsed is None:
        raise ValueError(f"not a snapshot staging directory: {staging}")
    date = snapshot_date(parsed[0])
    for table_name in TABLES:  # the manifest is last in TABLES
        source = staging / f"{table_name}.parquet"
        if not source.exists():
            continue  # moved before a crash
        partition = directory / table_name / f"{PARTITION_COLUMN}={date}"
        partition.mkdir(parents=True, exist_ok=True)
        os.replace(source, partition / file_name)
        _fsync_dir(partition)
    shutil.rmtree(staging)


def recover(directory: Path, namesrv: str | None = None) -> list[str]:
    """Finish or discard the staged snapshots left by a crash (of ``namesrv`` only, when given);
    return the file names of the snapshots finished."""
    finished: list[str] = []
    staging_root = directory / STAGING_DIR
    if not staging_root.is_dir():
        return finished
    slug = namesrv_slug(namesrv) if namesrv is not None else None
    for staging in sorted(staging_root.iterdir()):
        parsed = parse_file_name(f"{staging.name}.parquet")
        if parsed is None or (slug is not None and parsed[1] != slug):
            continue
        if (staging / COMMIT_MARKER).exists():
            _finish_commit(directory, staging)
            finished.append(f"{staging.name}.parquet")
            log.warning("finished snapshot %s interrupted by a crash", staging.name)
        else:
            shutil.rmtree(staging, ignore_errors=True)
            log.warning("discarded incomplete snapshot %s", staging.name)
    return finished


def list_snapshots(directory: Path, namesrv: str) -> list[tuple[int, Path]]:
    """``(time ms, manifest file)`` of every committed snapshot of ``namesrv``, oldest first."""
    slug = namesrv_slug(namesrv)
    found = []
    for path in (directory / MANIFEST).glob(f"{PARTITION_COLUMN}=*/*.parquet"):
        parsed = parse_file_name(path.name)
        if parsed is not None and parsed[1] == slug:
            found.append((parsed[0], path))
    return sorted(found)


def apply_retention(directory: Path, namesrv: str, retention_ms: int, now_ms: int) -> list[str]:
    """Delete the snapshots of ``namesrv`` older than ``now_ms - retention_ms`` (0 = keep all), never
    its newest; the manifest first, so readers stop counting a snapshot before its files go.
    Return the deleted file names."""
    if retention_ms <= 0:
        return []
    snapshots = list_snapshots(directory, namesrv)
    deleted = []
    for time_ms, manifest in snapshots[:-1]:
        if time_ms >= now_ms - retention_ms:
            break
        partition = manifest.parent.name
        for table_name in reversed(TABLES):  # manifest first
            path = directory / table_name / partition / manifest.name
            path.unlink(missing_ok=True)
            with contextlib.suppress(OSError):
                path.parent.rmdir()  # only when empty
        deleted.append(manifest.name)
    return deleted


# ---------------------------------------------------------------------------------------------- export


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector. An export allocates a dict per topic and Arrow buffers,
    which triggers collections; with a large table a full one takes 0.2 s, holding the GIL (and the
    event loop, during the copy), so RPCs would stall. An export makes no reference cycles: its
    objects are freed by reference counting when it ends, and collections resume then."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class SnapshotExporter:
    """Exports a live route table into ``directory`` (``snapshotDir``): :meth:`copy_table` on the
    thread that owns the table (the event loop), then :meth:`export` of the copy in a worker thread
    (``asyncio.to_thread``), never on the event loop. One export at a time.

    ``retention_hours`` is called at each export (the configuration may change at run time).
    """

    def __init__(
        self,
        route_table: RouteInfoManager,
        directory: Path,
        namesrv: str,
        retention_hours: Callable[[], int] = lambda: 0,
        clock: Clock = wall_clock_millis,
    ) -> None:
        self.route_table = route_table
        self.directory = directory
        self.namesrv = namesrv
        self._retention_hours = retention_hours
        self._clock = clock
        self._lock = threading.Lock()
        self._last_time_ms = 0
        self._recovered = False
        self.last_copy_seconds = 0.0
        """How long the last copy of the table took (``copy_tables``: the table's owner waits for it)."""

    def copy_table(self) -> RouteTableCopy:
        """A detached copy of the table, for :meth:`export` (on the thread that owns the table; the
        garbage collector paused while it is made)."""
        with _gc_paused():
            started = time.perf_counter()
            copy = self.route_table.copy_tables()
            self.last_copy_seconds = time.perf_counter() - started
            return copy

    def export(self, copy: RouteTableCopy | None = None) -> SnapshotInfo:
        """Write and commit the snapshot of ``copy`` (default: :meth:`copy_table` now), then apply
        the retention.

        Raises SnapshotWriteError when the snapshot cannot be written (nothing is then visible).
        """
        with self._lock, _gc_paused():
            try:
                if not self._recovered:
                    recover(self.directory, self.namesrv)
                    self._recovered = True
                now = max(self._clock(), self._last_time_ms + 1)
                started = time.perf_counter()
                if copy is None:
                    copy = self.copy_table()
                tables = tables_from_copy(copy, snapshot_time_ms=now, namesrv=self.namesrv)
                info = commit_snapshot(self.directory, tables)
                log.info(
                    "route snapshot %s: %d topics, %d broker addresses; table copied in %.0f ms, export %.2f s",
                    info.file_name,
                    info.topics,
                    info.broker_addrs,
                    1000 * self.last_copy_seconds,
                    time.perf_counter() - started,
                )
                self._last_time_ms = now
            except (OSError, pa.ArrowException, ValueError) as exc:
                raise SnapshotWriteError(
                    f"cannot write a route snapshot into {self.directory}: {exc}", {"snapshot_dir": str(self.directory)}
                ) from exc
            try:
                deleted = apply_retention(self.directory, self.namesrv, self._retention_hours() * 3_600_000, now)
                if deleted:
                    log.info("snapshot retention deleted %d old snapshot(s)", len(deleted))
            except OSError as exc:  # the new snapshot is committed; retention tries again next time
                log.warning("snapshot retention failed: %s", exc)
            return info
