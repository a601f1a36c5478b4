"""Route snapshots from a running NameServer process: the ExportRouteSnapshot RPC, the periodic
export, configuration, and ``namesrv-snapshot`` (snapshots through public RPCs)."""

from __future__ import annotations

from pathlib import Path

import grpc
import pyarrow.parquet as pq
import pytest

from namesrv.v1 import admin_service_pb2 as admin_pb2
from namesrv_grpc.snapshot import list_snapshots
from namesrv_grpc.snapshot_schema import SCHEMA_VERSION
from tests.support import Stubs, error_info, poll_until, register_request, run_cli, running_namesrv, topic

LIVE_COLUMNS = (
    "ha_server_addr",
    "last_update_timestamp",
    "heartbeat_timeout_millis",
    "data_version_state_version",
    "data_version_timestamp",
    "data_version_counter",
)


def register_two_brokers(stubs: Stubs) -> None:
    stubs.ns.RegisterBroker(
        register_request(
            broker_name="broker-a",
            topics=[topic("TopicTest", 8, 8), topic("Solo", 4, 4)],
            filter_servers=["127.0.0.1:30000"],
        ),
        timeout=5,
    )
    stubs.ns.RegisterBroker(
        register_request(broker_name="broker-a", broker_id=1, broker_addr="127.0.0.1:10921"), timeout=5
    )
    stubs.ns.RegisterBroker(
        register_request(broker_name="broker-b", broker_addr="127.0.0.1:10931", topics=[topic("TopicTest", 4, 4)]),
        timeout=5,
    )


def rows(directory: Path, table: str, file_name: str) -> list[dict[str, object]]:
    """The rows of one snapshot file without time and identity, sorted (queue_data is written in the
    table's order, namesrv-snapshot's in the order its lookups answered)."""
    (path,) = (directory / table).glob(f"snapshot_date=*/{file_name}")
    found = [
        {k: v for k, v in row.items() if k not in ("snapshot_time", "namesrv")}
        for row in pq.read_table(path).to_pylist()
    ]
    return sorted(found, key=lambda row: [str(v) for v in row.values()])


def test_export_rpc_periodic_export_and_namesrv_snapshot(tmp_path: Path) -> None:
    out = tmp_path / "snapshots"
    with running_namesrv(
        tmp_path / "ns", "--snapshot-dir", str(out), "--snapshot-interval", "1", "--snapshot-retention", "0"
    ) as server:
        identity = server.address  # default: bind address and port
        with server.channel() as channel:
            stubs = Stubs(channel)
            register_two_brokers(stubs)
            answer = stubs.admin.ExportRouteSnapshot(admin_pb2.ExportRouteSnapshotRequest(), timeout=30)
            assert (answer.namesrv, answer.snapshot_dir, answer.schema_version) == (identity, str(out), SCHEMA_VERSION)
            assert (answer.topics, answer.queue_datas, answer.broker_names, answer.broker_addrs, answer.clusters) == (
                2,
                3,
                2,
                3,
                1,
            )
            assert answer.file_name in [p.name for _, p in list_snapshots(out, identity)]
            via_admin = run_cli("namesrv_grpc.admin.cli", "-n", identity, "snapshot")
            assert via_admin.returncode == 0, via_admin.stderr
            assert f"{identity}: OK snapshot of {identity}: " in via_admin.stdout
            assert rows(out, "queue_data", answer.file_name) == [
                {"schema_version": SCHEMA_VERSION, "topic": "Solo", "broker_name": "broker-a", "read_queue_nums": 4}
                | {"write_queue_nums": 4, "perm": 6, "topic_sys_flag": 0},
                {"schema_version": SCHEMA_VERSION, "topic": "TopicTest", "broker_name": "broker-a"}
                | {"read_queue_nums": 8}
                | {"write_queue_nums": 8, "perm": 6, "topic_sys_flag": 0},
                {"schema_version": SCHEMA_VERSION, "topic": "TopicTest", "broker_name": "broker-b"}
                | {"read_queue_nums": 4}
                | {"write_queue_nums": 4, "perm": 6, "topic_sys_flag": 0},
            ]
            # snapshotInterval=1: more snapshots follow on their own (two so far came from RPCs).
            poll_until(lambda: len(list_snapshots(out, identity)) >= 4, timeout=10, interval=0.1)

            # namesrv-snapshot sees the same table through the public RPCs (no live columns).
            cli_out = tmp_path / "via-rpc"
            result = run_cli("namesrv_grpc.admin.snapshot_cli", "--namesrv", identity, "--out", str(cli_out))
            assert result.returncode == 0, result.stderr
            assert "2 topics, 3 broker addresses" in result.stdout
            ((_, manifest),) = list_snapshots(cli_out, identity)
            assert rows(cli_out, "queue_data", manifest.name) == rows(out, "queue_data", answer.file_name)
            assert rows(cli_out, "cluster_data", manifest.name) == rows(out, "cluster_data", answer.file_name)
            exported = rows(out, "broker_data", answer.file_name)
            collected = rows(cli_out, "broker_data", manifest.name)
            assert [{k: v for k, v in r.items() if k not in LIVE_COLUMNS} for r in collected] == [
                {k: v for k, v in r.items() if k not in LIVE_COLUMNS} for r in exported
            ]
            assert {r[c] for r in collected for c in LIVE_COLUMNS} == {None}
            assert [r["filter_servers"] for r in collected] == [["127.0.0.1:30000"], [], []]
            assert rows(cli_out, "snapshots", manifest.name)[0]["source"] == "rpc"

            # A caller must not choose where the server writes files.
            with pytest.raises(grpc.RpcError) as refused:
                stubs.admin.UpdateNamesrvConfig(
                    admin_pb2.UpdateNamesrvConfigRequest(config={"snapshotDir": str(tmp_path / "elsewhere")}),
                    timeout=5,
                )
            assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
            # The interval can be changed at run time (0 = only on demand).
            stubs.admin.UpdateNamesrvConfig(
                admin_pb2.UpdateNamesrvConfigRequest(config={"snapshotInterval": "0"}), timeout=5
            )


def test_an_unwritable_snapshot_dir_is_an_internal_error(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where the snapshot directory should be")
    with (
        running_namesrv(tmp_path / "ns", "--snapshot-dir", str(blocker), "--snapshot-namesrv-id", "ns-a") as server,
        server.channel() as channel,
    ):
        with pytest.raises(grpc.RpcError) as failed:
            Stubs(channel).admin.ExportRouteSnapshot(admin_pb2.ExportRouteSnapshotRequest(), timeout=30)
        assert failed.value.code() == grpc.StatusCode.INTERNAL
        assert error_info(failed.value).reason == "SNAPSHOT_WRITE_FAILED"
        assert str(blocker) in (failed.value.details() or "")


def test_namesrv_snapshot_reports_an_unreachable_namesrv(tmp_path: Path) -> None:
    result = run_cli(
        "namesrv_grpc.admin.snapshot_cli", "-n", "127.0.0.1:1", "--out", str(tmp_path / "out"), "--timeout", "2"
    )
    assert result.returncode == 1
    assert "127.0.0.1:1: UNAVAILABLE" in result.stderr
    assert not list_snapshots(tmp_path / "out", "127.0.0.1:1")
