"""``make report``: route snapshots of a short demo cluster, then the topic distribution job.

1. Start a NameServer (snapshots into demo-run/snapshots, emptied first) and the broker agents of
   ``make demo`` (broker-a master and slave, broker-b master, from examples/).
2. Export three snapshots through ``AdminService.ExportRouteSnapshot``: all brokers; without the
   broker-a slave (stopped: it unregisters); with it back.
3. Stop everything, run ``python -m namesrv_analytics.topic_distribution`` on the snapshots into
   demo-run/report, print the report's headline numbers and where the report is.

Exit code 0 when all of that happened; 1 with the reason otherwise.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import grpc
import pyarrow.parquet as pq

from namesrv.v1 import admin_service_pb2 as admin_pb2
from namesrv.v1 import admin_service_pb2_grpc as admin_grpc
from namesrv.v1 import name_server_service_pb2 as ns_pb2
from namesrv.v1 import name_server_service_pb2_grpc as ns_grpc

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
RUN = ROOT / "demo-run"
AGENTS = {
    "broker-a master": ("broker-a.properties", "topics-quickstart.json", []),
    "broker-a slave": ("broker-a-s.properties", "topics-quickstart.json", ["--set", "listenPort=10921"]),
    "broker-b master": ("broker-b.properties", "topics-dev.json", ["--set", "listenPort=10931"]),
}


def wait_for(what: str, check: Callable[[], bool], timeout: float = 30) -> None:
    """Poll ``check`` every 0.1 s; raise TimeoutError naming ``what``."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.1)


def stop(process: subprocess.Popen[str]) -> int:
    """SIGTERM and wait; the exit code (-9 when it had to be killed)."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        return process.wait(15)
    except subprocess.TimeoutExpired:
        process.kill()
        return -9


def take_snapshots(env: dict[str, str], snapshots: Path) -> None:
    """Steps 1 and 2."""
    processes: dict[str, subprocess.Popen[str]] = {}
    state = RUN / "namesrv"
    state.mkdir(parents=True, exist_ok=True)
    try:
        namesrv = subprocess.Popen(
            [sys.executable, "-m", "namesrv_grpc", "--host", "127.0.0.1", "--port", "0", "--remoting-port", "0",
             "--kv-config-path", str(state / "kvConfig.json"), "--config-store-path", str(state / "namesrv.properties"),
             "--snapshot-dir", str(snapshots), "--snapshot-retention", "0"],
            stdout=subprocess.PIPE, text=True, env=env,
        )  # fmt: skip
        processes["namesrv"] = namesrv
        assert namesrv.stdout is not None
        line = namesrv.stdout.readline().strip()
        if "boot success" not in line:
            raise RuntimeError("the NameServer did not start (see its messages above)")
        address = f"127.0.0.1:{int(line.rsplit(':', 1)[1])}"

        def start_agent(name: str) -> None:
            conf, topics, extra = AGENTS[name]
            processes[name] = subprocess.Popen(
                [sys.executable, "-m", "broker_agent", "--broker-config", str(EXAMPLES / conf),
                 "--topics-json", str(EXAMPLES / topics), "--namesrv-addr", address,
                 "--set", "brokerIP1=127.0.0.1", *extra],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True, env=env,
            )  # fmt: skip

        for name in AGENTS:
            start_agent(name)
        with grpc.insecure_channel(address) as channel:
            ns = ns_grpc.NameServerServiceStub(channel)
            admin = admin_grpc.AdminServiceStub(channel)

            def addresses() -> dict[str, int]:
                info = ns.GetBrokerClusterInfo(ns_pb2.GetBrokerClusterInfoRequest(), timeout=5)
                return {name: len(data.broker_addrs) for name, data in info.broker_addr_table.items()}

            def export(what: str) -> None:
                answer = admin.ExportRouteSnapshot(admin_pb2.ExportRouteSnapshotRequest(), timeout=60)
                print(f"snapshot {answer.file_name}: {what} ({answer.topics} topics, {answer.broker_addrs} brokers)")

            wait_for("every broker", lambda: addresses() == {"broker-a": 2, "broker-b": 1})
            export("every broker")
            if stop(processes.pop("broker-a slave")) != 0:
                raise RuntimeError("the broker-a slave agent did not stop cleanly")
            wait_for("the slave to leave", lambda: addresses().get("broker-a") == 1)
            export("without the broker-a slave")
            start_agent("broker-a slave")
            wait_for("the slave to return", lambda: addresses().get("broker-a") == 2)
            export("the slave is back")
    finally:
        for name in [n for n in processes if n != "namesrv"] + ["namesrv"]:
            if name in processes:
                stop(processes[name])


def headline(out: Path) -> None:
    """The report's headline numbers, read back from the job's Parquet outputs."""
    summary = pq.read_table(out / "snapshot_summary").to_pylist()
    latest = max(summary, key=lambda r: r["snapshot_time"])
    at = latest["snapshot_time"]
    brokers = [r for r in pq.read_table(out / "broker_distribution").to_pylist() if r["snapshot_time"] == at]
    clusters = [r for r in pq.read_table(out / "cluster_distribution").to_pylist() if r["snapshot_time"] == at]
    print(f"\nTopic distribution, latest of {len(summary)} snapshots ({at:%Y-%m-%d %H:%M:%S} UTC):")
    print(f"  topics {latest['topics']}, master brokers {latest['master_brokers']}, clusters {latest['clusters']}")
    print(f"  single-broker topics {latest['single_broker_topics']}, topics with no writable queue "
          f"{latest['unwritable_topics']}")  # fmt: skip
    for r in sorted(brokers, key=lambda r: -r["write_queue_share"]):
        print(f"  {r['broker_name']} ({r['cluster']}): {r['topics']} topics, {r['write_queues']} write queues, "
              f"{100 * r['write_queue_share']:.1f} % of its cluster")  # fmt: skip
    for r in clusters:
        gini = r["write_queues_gini"]
        print(f"  cluster {r['cluster']}: max/mean {r['max_over_mean']:.3f}, CV {r['write_queues_cv']:.3f}, "
              f"Gini {gini:.3f}" if gini is not None else f"  cluster {r['cluster']}: no write queues")  # fmt: skip


def main() -> int:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    snapshots = RUN / "snapshots"
    out = RUN / "report"
    shutil.rmtree(snapshots, ignore_errors=True)
    try:
        take_snapshots(env, snapshots)
    except (TimeoutError, RuntimeError, OSError, grpc.RpcError) as exc:
        print(f"report failed: {exc}", file=sys.stderr)
        return 1
    job = subprocess.run(
        [
            sys.executable,
            "-m",
            "namesrv_analytics.topic_distribution",
            "--snapshots",
            str(snapshots),
            "--out",
            str(out),
        ],
        env=env,
    )
    if job.returncode != 0:
        print(f"report failed: the topic distribution job exited {job.returncode}", file=sys.stderr)
        return 1
    headline(out)
    print(f"\nReport: {out / 'report.html'}  (tables: {out}/<name> Parquet, {out}/csv/<name> CSV)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
