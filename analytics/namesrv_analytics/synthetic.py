"""Synthetic route snapshots at any scale, for tests and benchmarks, written with the NameServer's own
writer (:func:`namesrv_grpc.snapshot.commit_snapshot`), so they are exactly what a NameServer exports.

    python -m namesrv_analytics.synthetic --out DIR [--brokers 1000] [--topics 100000] [--snapshots 10]
        [--clusters 4] [--namesrvs 1] [--interval 300] [--seed 1]

The model (deterministic for a seed):

- broker names ``broker-0000`` ... in ``cluster-0`` ... (round robin), each with a master (id 0)
  and, for every other one, a slave (id 1);
- topic ``topic-000000`` ... lives on 1 (20 % of topics) to 8 consecutive broker names of one
  cluster, starting at a broker drawn with a skewed (Zipf-like) weight, so a few brokers carry
  much more than the mean; 4, 8 or 16 queues per broker; 1 % of the topics are read-only (perm 4);
- between snapshots 0.5 % of the topics are deleted and as many created, and in each snapshot 1 %
  of the broker names are down (gone with their QueueData, as the NameServer removes them) and
  0.5 % have lost their master (a slave keeps the broker name and its QueueData);
- with several NameServers, each one also misses 0.2 % of the broker names in each snapshot and
  takes its snapshot a few seconds after the first.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pyarrow as pa

from namesrv_grpc.snapshot import commit_snapshot, manifest_table
from namesrv_grpc.snapshot_schema import (
    BROKER_DATA,
    CLUSTER_DATA,
    MANIFEST,
    QUEUE_DATA,
    SCHEMA_VERSION,
    SNAPSHOT_TIME_TYPE,
    TOPIC_QUEUE_MAPPING,
)

DEFAULT_START = datetime(2026, 1, 1, tzinfo=timezone.utc)


def _common(n: int, time_ms: int, namesrv: str) -> list[pa.Array]:
    return [
        pa.array(np.full(n, time_ms, dtype=np.int64), SNAPSHOT_TIME_TYPE),
        pa.repeat(pa.scalar(namesrv, pa.string()), n),
        pa.array(np.full(n, SCHEMA_VERSION, dtype=np.int32), pa.int32()),
    ]


def generate(
    out: Path,
    *,
    brokers: int = 1000,
    topics: int = 100_000,
    snapshots: int = 10,
    clusters: int = 4,
    namesrvs: int = 1,
    interval_seconds: int = 300,
    seed: int = 1,
    start: datetime = DEFAULT_START,
) -> int:
    """Write ``snapshots`` snapshots of each of ``namesrvs`` NameServers into ``out``; return the
    number of snapshots written."""
    if brokers < clusters or clusters < 1 or topics < 1 or snapshots < 1 or namesrvs < 1:
        raise ValueError("need brokers >= clusters >= 1, topics >= 1, snapshots >= 1, namesrvs >= 1")
    rng = np.random.default_rng(seed)
    per_cluster = brokers // clusters
    broker_count = per_cluster * clusters
    broker_names = pa.array([f"broker-{i:04d}" for i in range(broker_count)], pa.string())
    cluster_of = np.arange(broker_count) % clusters
    cluster_names = pa.array([f"cluster-{c}" for c in range(clusters)], pa.string())
    has_slave = np.arange(broker_count) % 2 == 1

    churn = max(1, topics // 200)
    total_topics = topics + churn * (snapshots - 1)
    topic_names = pa.array([f"topic-{i:06d}" for i in range(total_topics)], pa.string())
    sizes = np.where(rng.random(total_topics) < 0.2, 1, rng.integers(2, 9, total_topics))
    sizes = np.minimum(sizes, per_cluster)
    topic_cluster = rng.integers(0, clusters, total_topics)
    weights = 1.0 / (np.arange(per_cluster) + 5.0) ** 0.9
    weights = rng.permutation(weights / weights.sum())
    first = rng.choice(per_cluster, total_topics, p=weights)
    queues = rng.choice(np.array([4, 8, 16], dtype=np.int32), total_topics)
    perms = np.where(rng.random(total_topics) < 0.01, 4, 6).astype(np.int32)
    # One QueueData per (topic, j < size): the j-th consecutive broker of the topic's cluster.
    topic_of = np.repeat(np.arange(total_topics), sizes)
    offsets = np.arange(topic_of.size) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    broker_of = topic_cluster[topic_of] + clusters * ((first[topic_of] + offsets) % per_cluster)

    written = 0
    for s in range(snapshots):
        live_topics = (topic_of >= s * churn) & (topic_of < s * churn + topics)
        down = rng.random(broker_count) < 0.01
        master_down = rng.random(broker_count) < 0.005  # the slave (if any) keeps the broker name
        for n in range(namesrvs):
            namesrv = f"ns-{n}:9876"
            missing = down | (rng.random(broker_count) < 0.002) if n else down
            time_ms = int(start.timestamp() * 1000) + s * interval_seconds * 1000 + n * 3000
            up = ~missing & (~master_down | has_slave)
            rows = live_topics & up[broker_of]
            t_idx = topic_of[rows]
            b_idx = broker_of[rows]
            order = np.lexsort((b_idx, t_idx))
            t_idx, b_idx = t_idx[order], b_idx[order]
            count = t_idx.size
            queue_data = pa.Table.from_arrays(
                [
                    *_common(count, time_ms, namesrv),
                    topic_names.take(pa.array(t_idx)),
                    broker_names.take(pa.array(b_idx)),
                    pa.array(queues[t_idx], pa.int32()),
                    pa.array(queues[t_idx], pa.int32()),
                    pa.array(perms[t_idx], pa.int32()),
                    pa.array(np.zeros(count, dtype=np.int32), pa.int32()),
                ],
                schema=QUEUE_DATA,
            )
            up_ids = np.flatnonzero(up)
            master_ids = up_ids[~master_down[up_ids]]
            slave_ids = up_ids[has_slave[up_ids]]
            names = np.concatenate([master_ids, slave_ids])
            ids = np.concatenate([np.zeros(master_ids.size, np.int32), np.ones(slave_ids.size, np.int32)])
            order = np.lexsort((ids, names))
            names, ids = names[order], ids[order]
            rows_b = names.size
            broker_data = pa.Table.from_arrays(
                [
                    *_common(rows_b, time_ms, namesrv),
                    cluster_names.take(pa.array(cluster_of[names])),
                    broker_names.take(pa.array(names)),
                    pa.array(ids, pa.int32()),
                    pa.array([f"10.{b // 250}.{b % 250}.{1 + i}:10911" for b, i in zip(names, ids, strict=True)]),
                    pa.repeat(pa.scalar("", pa.string()), rows_b),
                    pa.array(np.zeros(rows_b, dtype=bool)),
                    pa.repeat(pa.scalar("", pa.string()), rows_b),
                    pa.array(np.full(rows_b, time_ms - 5000, dtype=np.int64), SNAPSHOT_TIME_TYPE),
                    pa.array(np.full(rows_b, 120_000, dtype=np.int64)),
                    pa.array(np.zeros(rows_b, dtype=np.int64)),
                    pa.array(np.full(rows_b, time_ms - 60_000, dtype=np.int64)),
                    pa.array(np.ones(rows_b, dtype=np.int64)),
                    pa.array([[] for _ in range(rows_b)], pa.list_(pa.string())),
                ],
                schema=BROKER_DATA,
            )
            cluster_data = pa.Table.from_arrays(
                [
                    *_common(up_ids.size, time_ms, namesrv),
                    cluster_names.take(pa.array(cluster_of[up_ids])),
                    broker_names.take(pa.array(up_ids)),
                ],
                schema=CLUSTER_DATA,
            )
            manifest = manifest_table(
                snapshot_time_ms=time_ms,
                namesrv=namesrv,
                source="synthetic",
                topics=int(np.unique(t_idx).size),
                queue_datas=count,
                broker_names=int(up_ids.size),
                broker_addrs=rows_b,
                clusters=int(np.unique(cluster_of[up_ids]).size),
            )
            commit_snapshot(
                out,
                {
                    "queue_data": queue_data,
                    "broker_data": broker_data,
                    "cluster_data": cluster_data,
                    "topic_queue_mapping": TOPIC_QUEUE_MAPPING.empty_table(),  # no static topics
                    MANIFEST: manifest,
                },
            )
            written += 1
    return written


def main(argv: Sequence[str] | None = None) -> int:
    """Generate; print what was written."""
    parser = argparse.ArgumentParser(prog="namesrv_analytics.synthetic", description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path, help="snapshot directory")
    parser.add_argument("--brokers", type=int, default=1000)
    parser.add_argument("--topics", type=int, default=100_000)
    parser.add_argument("--snapshots", type=int, default=10, help="snapshots per NameServer")
    parser.add_argument("--clusters", type=int, default=4)
    parser.add_argument("--namesrvs", type=int, default=1)
    parser.add_argument("--interval", type=int, default=300, help="seconds between snapshots")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    started = time.monotonic()
    try:
        count = generate(
            args.out,
            brokers=args.brokers,
            topics=args.topics,
            snapshots=args.snapshots,
            clusters=args.clusters,
            namesrvs=args.namesrvs,
            interval_seconds=args.interval,
            seed=args.seed,
        )
    except ValueError as error:
        parser.error(str(error))
    print(f"wrote {count} snapshot(s) into {args.out} in {time.monotonic() - started:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
