"""The route snapshot's tables, defined once (pyarrow schemas). Writers (:mod:`namesrv_grpc.snapshot`,
``namesrv_analytics.synthetic``) build exactly these; the Spark readers (``analytics.snapshots``) derive their
``StructType`` from them. Imports nothing but pyarrow, so a Spark driver needs no gRPC.

Layout under a snapshot directory (Hive-style partitions; every file is one snapshot of one table)::

    snapshots/snapshot_date=YYYY-MM-DD/<file_name>      one row per snapshot: the manifest, written last
    queue_data/snapshot_date=YYYY-MM-DD/<file_name>     one row per (topic, broker name)
    broker_data/snapshot_date=YYYY-MM-DD/<file_name>    one row per (broker name, broker id, address)
    cluster_data/snapshot_date=YYYY-MM-DD/<file_name>   one row per (cluster, broker name)
    topic_queue_mapping/snapshot_date=YYYY-MM-DD/<file_name>  one row per static topic and broker (5.x)
    _staging/                                           work in progress; readers never look here

``file_name`` is ``<UTC time, yyyymmddThhmmssfffZ>-<namesrv slug>.parquet`` and is the same in every
table. A snapshot exists for readers once its manifest row exists; data files without one (a crash
in the middle of a commit) are ignored by ``analytics`` and completed at the writer's next start.
"""

from __future__ import annotations

import pyarrow as pa

SCHEMA_VERSION = 2
"""Version of these schemas; in every row (``schema_version``) and in each file's metadata. A reader
skips snapshots of another version (``namesrv_analytics.common``), so every change of a table or of
the set of tables bumps it. 2: the ``topic_queue_mapping`` table (RocketMQ 5.x static topics) was
added; version 1 snapshots have none."""

TABLE_SINCE: dict[str, int] = {"topic_queue_mapping": 2}
"""The schema version in which a table first appeared (a table not named here: version 1)."""

READABLE_SCHEMA_VERSIONS: frozenset[int] = frozenset({1, 2})
"""The versions today's readers read: 2 only added a table, so a version 1 snapshot reads the same
(with no ``topic_queue_mapping`` rows) and a history spanning the upgrade stays in the reports."""

PARTITION_COLUMN = "snapshot_date"
"""The Hive partition key (``snapshot_date=YYYY-MM-DD``, UTC date of ``snapshot_time``); in paths only."""

METADATA_SCHEMA_VERSION = b"namesrv.snapshot.schema_version"
METADATA_TABLE = b"namesrv.snapshot.table"
"""Parquet key-value metadata of every file."""

SNAPSHOT_TIME_TYPE = pa.timestamp("ms", tz="UTC")

_COMMON = [
    pa.field("snapshot_time", SNAPSHOT_TIME_TYPE, nullable=False),  # when the table was copied, UTC, ms
    pa.field("namesrv", pa.string(), nullable=False),  # the NameServer's identity (snapshotNamesrvId)
    pa.field("schema_version", pa.int32(), nullable=False),  # SCHEMA_VERSION
]

SNAPSHOTS = pa.schema(
    [
        *_COMMON,
        pa.field("file_name", pa.string(), nullable=False),  # name of this snapshot's file in every table
        pa.field(
            "source", pa.string(), nullable=False
        ),  # "namesrv" (its export), "rpc" (namesrv-snapshot), "synthetic"
        pa.field("topics", pa.int32(), nullable=False),  # topics in topicQueueTable
        pa.field("queue_datas", pa.int32(), nullable=False),  # rows of queue_data
        pa.field("broker_names", pa.int32(), nullable=False),  # BrokerData entries
        pa.field("broker_addrs", pa.int32(), nullable=False),  # rows of broker_data
        pa.field("clusters", pa.int32(), nullable=False),  # clusters in clusterAddrTable
    ]
)
"""The manifest: one row per snapshot."""

QUEUE_DATA = pa.schema(
    [
        *_COMMON,
        pa.field("topic", pa.string(), nullable=False),
        pa.field("broker_name", pa.string(), nullable=False),
        pa.field("read_queue_nums", pa.int32(), nullable=False),
        pa.field("write_queue_nums", pa.int32(), nullable=False),
        pa.field("perm", pa.int32(), nullable=False),  # PermName bits: 4 READ, 2 WRITE, 1 INHERIT, 8 PRIORITY
        pa.field("topic_sys_flag", pa.int32(), nullable=False),  # 1 UNIT, 2 UNIT_SUB
    ]
)
"""topicQueueTable: one row per QueueData (topic, broker name)."""

BROKER_DATA = pa.schema(
    [
        *_COMMON,
        pa.field("cluster", pa.string(), nullable=False),  # BrokerData.cluster
        pa.field("broker_name", pa.string(), nullable=False),
        pa.field("broker_id", pa.int32(), nullable=False),  # 0 = master
        pa.field("broker_addr", pa.string(), nullable=False),  # host:port
        pa.field("zone_name", pa.string(), nullable=False),
        pa.field("enable_acting_master", pa.bool_(), nullable=False),
        # From brokerLiveTable; null when the snapshot was taken through public RPCs (namesrv-snapshot).
        pa.field("ha_server_addr", pa.string()),
        pa.field("last_update_timestamp", SNAPSHOT_TIME_TYPE),
        pa.field("heartbeat_timeout_millis", pa.int64()),
        pa.field("data_version_state_version", pa.int64()),
        pa.field("data_version_timestamp", pa.int64()),  # ms since the epoch
        pa.field("data_version_counter", pa.int64()),
        pa.field("filter_servers", pa.list_(pa.string()), nullable=False),
    ]
)
"""brokerAddrTable joined with brokerLiveTable and filterServerTable: one row per broker address."""

CLUSTER_DATA = pa.schema(
    [
        *_COMMON,
        pa.field("cluster", pa.string(), nullable=False),
        pa.field("broker_name", pa.string(), nullable=False),
    ]
)
"""clusterAddrTable: one row per (cluster, broker name); a broker name may be in two clusters."""

TOPIC_QUEUE_MAPPING = pa.schema(
    [
        *_COMMON,
        pa.field("topic", pa.string(), nullable=False),
        pa.field("broker_name", pa.string(), nullable=False),  # the mapping's bname
        pa.field("scope", pa.string(), nullable=False),
        pa.field("total_queues", pa.int32(), nullable=False),  # logic queues of the topic, all brokers
        pa.field("epoch", pa.int64(), nullable=False),  # ms since the epoch
        pa.field("dirty", pa.bool_(), nullable=False),
        # currIdMap as two lists of equal length, sorted by logic queue id: logic id -> physical id.
        pa.field("logic_queue_ids", pa.list_(pa.int32()), nullable=False),
        pa.field("queue_ids", pa.list_(pa.int32()), nullable=False),
    ]
)
"""topicQueueMappingInfoTable (RocketMQ 5.x static topics, rule S40): one row per (topic, broker name)."""

TABLES: dict[str, pa.Schema] = {
    "queue_data": QUEUE_DATA,
    "broker_data": BROKER_DATA,
    "cluster_data": CLUSTER_DATA,
    "topic_queue_mapping": TOPIC_QUEUE_MAPPING,
    "snapshots": SNAPSHOTS,
}
"""Every dataset, in commit order: the manifest (``snapshots``) last."""

MANIFEST = "snapshots"
STAGING_DIR = "_staging"


def with_metadata(table_name: str, schema: pa.Schema) -> pa.Schema:
    """``schema`` carrying the file metadata of table ``table_name``."""
    return schema.with_metadata(
        {METADATA_SCHEMA_VERSION: str(SCHEMA_VERSION).encode(), METADATA_TABLE: table_name.encode()}
    )
