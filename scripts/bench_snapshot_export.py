"""Measure what a route snapshot export costs a NameServer with a large table.

    .venv/bin/python scripts/bench_snapshot_export.py [--topics 100000] [--brokers 8] [--seconds 3]

1. In process: how long ``RouteInfoManager.copy_tables()`` holds the table's lock (the only part
   of an export that blocks registrations and lookups), and how long the whole export takes
   (copy, Arrow tables, Parquet, commit), median of 5.
2. Against a real ``python -m namesrv_grpc`` process with the same table: PickupTopicRoute latency
   (sequential calls from one client) with no export running, then while ExportRouteSnapshot runs
   back to back.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import grpc

from namesrv.v1 import admin_service_pb2 as admin_pb2
from namesrv.v1 import admin_service_pb2_grpc as admin_grpc
from namesrv.v1 import name_server_service_pb2 as ns_pb2
from namesrv.v1 import name_server_service_pb2_grpc as ns_grpc
from namesrv_grpc.core.model import DataVersion, TopicConfig
from namesrv_grpc.core.route_table import RouteInfoManager
from namesrv_grpc.snapshot import SnapshotExporter
from namesrv_grpc.wire.grpc_register_body import encode_body


def topic_configs(topics: int) -> dict[str, TopicConfig]:
    return {f"topic-{i:06d}": TopicConfig(f"topic-{i:06d}", 8, 8) for i in range(topics)}


def in_process(topics: int, brokers: int, directory: Path) -> None:
    table = RouteInfoManager()
    configs = topic_configs(topics)
    for b in range(brokers):
        table.register_broker(
            cluster_name="bench",
            broker_name=f"broker-{b}",
            broker_id=0,
            broker_addr=f"10.0.0.{b}:10911",
            data_version=DataVersion(0, 1, 1),
            topic_configs=configs,
        )
    exporter = SnapshotExporter(table, directory, "bench:9876")
    holds, totals = [], []
    for _ in range(5):
        started = time.perf_counter()
        exporter.export()
        totals.append(time.perf_counter() - started)
        holds.append(exporter.last_copy_seconds)
    print(f"in process, {topics} topics x {brokers} brokers ({topics * brokers} QueueData):")
    print(
        f"  copy_tables (the owner waits): median {1000 * statistics.median(holds):.0f} ms, "
        f"max {1000 * max(holds):.0f} ms"
    )
    print(f"  whole export:          median {statistics.median(totals):.2f} s")


def percentiles(samples: list[float]) -> str:
    ordered = sorted(samples)
    p = {q: ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))] for q in (50, 99)}
    return f"n={len(samples)} p50 {1000 * p[50]:.2f} ms, p99 {1000 * p[99]:.2f} ms, max {1000 * ordered[-1]:.1f} ms"


def against_process(topics: int, brokers: int, seconds: float, directory: Path) -> None:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    server = subprocess.Popen(
        [sys.executable, "-m", "namesrv_grpc", "--host", "127.0.0.1", "--port", "0", "--remoting-port", "0",
         "--log-level", "INFO",
         "--kv-config-path", str(directory / "kv.json"), "--config-store-path", str(directory / "ns.properties"),
         "--snapshot-dir", str(directory / "snapshots")],
        stdout=subprocess.PIPE, stderr=(directory / "namesrv.log").open("w"), text=True, env=env,
    )  # fmt: skip
    try:
        assert server.stdout is not None
        address = f"127.0.0.1:{int(server.stdout.readline().rsplit(':', 1)[1])}"
        options = [("grpc.max_send_message_length", 256 << 20), ("grpc.max_receive_message_length", 256 << 20)]
        with grpc.insecure_channel(address, options=options) as channel:
            ns = ns_grpc.NameServerServiceStub(channel)
            admin = admin_grpc.AdminServiceStub(channel)
            body, crc = encode_body(topic_configs(topics), DataVersion(0, 1, 1), [])
            for b in range(brokers):
                ns.RegisterBroker(
                    ns_pb2.RegisterBrokerRequest(
                        cluster_name="bench", broker_name=f"broker-{b}", broker_id=0,
                        broker_addr=f"10.0.0.{b}:10911", body=body, body_crc32c=crc,
                    ),
                    timeout=120,
                )  # fmt: skip

            def lookups(stop: threading.Event) -> list[float]:
                samples = []
                i = 0
                while not stop.is_set():
                    request = ns_pb2.PickupTopicRouteRequest(topic=f"topic-{(i * 7919) % topics:06d}")
                    started = time.perf_counter()
                    ns.PickupTopicRoute(request, timeout=30)
                    samples.append(time.perf_counter() - started)
                    i += 1
                return samples

            stop = threading.Event()
            timer = threading.Timer(seconds, stop.set)
            timer.start()
            idle = lookups(stop)
            exports: list[float] = []
            stop = threading.Event()

            def export_loop() -> None:
                while not stop.is_set():
                    started = time.perf_counter()
                    admin.ExportRouteSnapshot(admin_pb2.ExportRouteSnapshotRequest(), timeout=120)
                    exports.append(time.perf_counter() - started)

            exporter = threading.Thread(target=export_loop)
            exporter.start()
            timer = threading.Timer(seconds, stop.set)
            timer.start()
            busy = lookups(stop)
            exporter.join()
            print(f"namesrv process, PickupTopicRoute from one client ({topics} topics x {brokers} brokers):")
            print(f"  no export:              {percentiles(idle)}")
            print(f"  exports back to back:   {percentiles(busy)}")
            print(
                f"  ExportRouteSnapshot RPC: {len(exports)} in {seconds:.0f} s, "
                f"median {statistics.median(exports):.2f} s"
            )
    finally:
        server.terminate()
        server.wait(30)
    holds = [
        float(line.split("table copied in ")[1].split(" ms")[0])
        for line in (directory / "namesrv.log").open()
        if "table copied in" in line
    ]
    if holds:
        print(f"  server's table copy per export: {', '.join(f'{h:.0f}' for h in holds)} ms")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=100_000)
    parser.add_argument("--brokers", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=5.0, help="length of each latency run")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-snapshot-") as tmp:
        in_process(args.topics, args.brokers, Path(tmp) / "in-process")
        against_process(args.topics, args.brokers, args.seconds, Path(tmp))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
