"""Group commit of KV writes (issue 30, "KV write amplification"): KV writes that arrive while the
KV config file is being written share the next write of it, each is answered only once durable and
visible, refusals (bad input, ``kvConfigMaxTotalSize`` counting the writes queued with it) come
before anything changes, and a failed file write changes nothing.

In process with a real file and a disk made slow by hand (:class:`SlowDisk`), then over a real
NameServer flooded with pipelined PUT_KV_CONFIG while a broker keeps sending heartbeats."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest

from namesrv_grpc.config import NamesrvConfig
from namesrv_grpc.core.errors import InvalidFieldError, LimitExceededError, PersistError
from namesrv_grpc.core.kvconfig import KVBatch, KVConfigManager, load_config_table
from namesrv_grpc.core.processor import NameServer
from namesrv_grpc.core.route_table import RouteInfoManager
from namesrv_grpc.metrics import NamesrvMetrics
from namesrv_grpc.processes.kv_group_commit import KVGroupCommit
from namesrv_grpc.remoting.codec import FrameDecoder, RemotingCommand, encode_command
from namesrv_grpc.remoting.codes import RequestCode, ResponseCode
from tests.metrics_support import free_port, scrape
from tests.remoting_support import RemotingTestClient
from tests.support import running_namesrv
from tests.test_security_remoting import register_body, register_fields


class SlowDisk:
    """Holds every write of the KV file until :meth:`release` (so writes pile up behind it), and
    records the batches written."""

    def __init__(self, kv: KVConfigManager) -> None:
        self.batches: list[KVBatch] = []
        self.started = threading.Semaphore(0)
        self._gate = threading.Event()
        self._write = kv.write
        self.fail: Exception | None = None
        self.held = True
        """False: writes go through at once and are not counted as started (a test's set-up, or
        after :meth:`release_all`)."""
        kv.write = self._slow_write  # type: ignore[method-assign]

    def _slow_write(self, batch: KVBatch) -> None:
        if self.held:
            self.started.release()
            assert self._gate.wait(30), "a write of the KV file was held for 30 s"
            self._gate.clear()
        if self.fail is not None:
            raise self.fail
        self._write(batch)
        self.batches.append(batch)

    def release(self) -> None:
        self._gate.set()

    def release_all(self) -> None:
        """Release the held write and hold none after it."""
        self.held = False
        self._gate.set()

    async def next_write_started(self) -> None:
        assert await asyncio.to_thread(self.started.acquire, True, 30), "no write of the KV file started"


def make(tmp_path: Path, **config: Any) -> tuple[NameServer, KVGroupCommit, SlowDisk, NamesrvMetrics]:
    ns = NameServer(NamesrvConfig(**config), RouteInfoManager(), KVConfigManager(tmp_path / "kvConfig.json"))
    ns.track_changes()
    metrics = NamesrvMetrics(ns.route_table, standard=False)
    return ns, KVGroupCommit(ns, metrics), SlowDisk(ns.kv_config), metrics


def run(test: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(asyncio.wait_for(test(), 60))


def test_writes_arriving_during_a_file_write_share_the_next_one(tmp_path: Path) -> None:
    ns, commit, disk, metrics = make(tmp_path)

    async def scenario() -> None:
        first = asyncio.ensure_future(commit.put("N", "k0", "v0"))
        await disk.next_write_started()  # k0 is being written: the next 49 writes wait for one write
        rest = [asyncio.ensure_future(commit.put("N", f"k{i}", f"v{i}")) for i in range(1, 50)]
        rest.append(asyncio.ensure_future(commit.delete("N", "k1")))  # the same batch: k1 ends absent
        await asyncio.sleep(0.05)
        assert not any(task.done() for task in [first, *rest]), "answered before durable"
        # Not visible to readers (nor to the replicas' change stream) before it is durable.
        assert ns.get_kv_list_by_namespace("N") == {}
        assert ns.take_change() is None
        disk.release()
        await first
        change = ns.take_change()
        assert change is not None
        assert change.kv == {("N", "k0"): "v0"}
        await disk.next_write_started()
        assert ns.get_kv_list_by_namespace("N") == {"k0": "v0"}
        disk.release()
        await asyncio.gather(*rest)

    run(scenario)
    assert [batch.writes for batch in disk.batches] == [1, 50]
    expected = {f"k{i}": f"v{i}" for i in range(50) if i != 1}
    assert load_config_table(tmp_path / "kvConfig.json") == {"N": expected}
    assert ns.get_kv_list_by_namespace("N") == expected
    change = ns.take_change()
    assert change is not None
    assert change.kv is not None
    assert change.kv[("N", "k1")] is None
    assert metrics.registry.get_sample_value("namesrv_kv_config_flushes_total", {"result": "ok"}) == 2
    assert metrics.registry.get_sample_value("namesrv_kv_config_writes_per_flush_sum") == 51
    assert metrics.registry.get_sample_value("namesrv_kv_config_writes_per_flush_count") == 2


def test_the_size_bound_counts_the_writes_queued_with_a_write(tmp_path: Path) -> None:
    ns, commit, disk, _ = make(tmp_path, kv_config_max_total_size=1024)

    async def scenario() -> None:
        first = asyncio.ensure_future(commit.put("N", "a", "x" * 500))
        await disk.next_write_started()
        second = asyncio.ensure_future(commit.put("N", "b", "x" * 500))  # 1,004 bytes with a
        with pytest.raises(LimitExceededError) as info:
            _ = commit.put("N", "c", "x" * 100)  # refused at once, though neither a nor b is on disk yet
        assert info.value.limit == "kvConfigMaxTotalSize"
        with pytest.raises(InvalidFieldError):
            _ = commit.put("N", "", "x")
        with pytest.raises(InvalidFieldError, match="surrogate"):
            _ = commit.put("N", "d", "lone \ud800")
        disk.release()
        await first
        await disk.next_write_started()
        disk.release()
        await second

    run(scenario)
    assert [batch.writes for batch in disk.batches] == [1, 1]
    assert ns.get_kv_list_by_namespace("N") == {"a": "x" * 500, "b": "x" * 500}


def test_a_failed_file_write_fails_its_batch_and_the_writes_behind_it(tmp_path: Path) -> None:
    ns, commit, disk, metrics = make(tmp_path)

    async def scenario() -> None:
        first = asyncio.ensure_future(commit.put("N", "a", "1"))
        await disk.next_write_started()
        behind = [asyncio.ensure_future(commit.put("N", "b", "2")), asyncio.ensure_future(commit.delete("N", "a"))]
        disk.fail = PersistError("cannot write KV config file: No space left on device")
        disk.release()
        for task in (first, *behind):
            with pytest.raises(PersistError):
                await task
        assert ns.get_kv_list_by_namespace("N") == {}
        assert ns.take_change() is None
        disk.fail = None
        # The disk works again: so do writes, checked against the table as it is.
        again = asyncio.ensure_future(commit.put("N", "c", "3"))
        await disk.next_write_started()
        disk.release()
        await again

    run(scenario)
    assert ns.get_kv_list_by_namespace("N") == {"c": "3"}
    assert load_config_table(tmp_path / "kvConfig.json") == {"N": {"c": "3"}}
    assert metrics.registry.get_sample_value("namesrv_kv_config_flushes_total", {"result": "failed"}) == 1


def test_a_delete_of_a_key_being_deleted_waits_for_that_write(tmp_path: Path) -> None:
    """The second delete stages nothing (the key is gone once the first is written), but its answer
    must not come before the first one's: when that write fails, the key is still there."""
    ns, commit, disk, _ = make(tmp_path)
    disk.held = False
    ns.kv_config.put("N", "k", "v")  # the set-up's write, not held (it waited the gate's 30 s)
    disk.held = True

    async def scenario() -> None:
        first = asyncio.ensure_future(commit.delete("N", "k"))
        await disk.next_write_started()
        second = asyncio.ensure_future(commit.delete("N", "k"))
        await asyncio.sleep(0.05)
        assert not second.done()
        disk.fail = PersistError("cannot write KV config file")
        disk.release_all()  # the second delete writes again once the first failed (the key is back)
        for task in (first, second):
            with pytest.raises(PersistError):
                await task
        await commit.delete("N", "absent")  # nothing pending: answered at once

    run(scenario)
    assert ns.get_kv_list_by_namespace("N") == {"k": "v"}


# ------------------------------------------------------------------------------ a real NameServer

FLOOD_CONNECTIONS = 6
PIPELINED = 16


def _flood(address: str, stop: threading.Event, acknowledged: list[tuple[str, str]], index: int) -> None:
    """Pipelined PUT_KV_CONFIG on one connection until ``stop``; record every acknowledged write."""
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        decoder, opaque = FrameDecoder(), 0
        while not stop.is_set():
            sent: dict[int, tuple[str, str]] = {}
            frames = []
            for _ in range(PIPELINED):
                opaque += 1
                key, value = f"c{index}-k{opaque % 40}", f"v{opaque}"
                sent[opaque] = (key, value)
                fields = {"namespace": "flood", "key": key, "value": value}
                frames.append(encode_command(RemotingCommand(RequestCode.PUT_KV_CONFIG, opaque, 0, None, fields)))
            sock.sendall(b"".join(frames))
            answered = 0
            while answered < PIPELINED:
                data = sock.recv(1 << 16)
                assert data, "the server closed the connection"
                for answer in decoder.feed(data):
                    assert answer.code == ResponseCode.SUCCESS, answer.remark
                    acknowledged.append(sent[answer.opaque])
                    answered += 1


def test_a_flood_of_kv_writes_is_written_in_batches_and_registrations_go_on(tmp_path: Path) -> None:
    """With a 1 MiB table, pipelined PUT_KV_CONFIG from several connections: far fewer file writes
    than writes, every acknowledged write on disk, and a broker's heartbeats still answered (the
    route-table process's event loop is not held by the disk)."""
    workdir = tmp_path / "ns"
    workdir.mkdir()
    fill = {f"key-{i:04d}": "v" * 1000 for i in range(1000)}
    (workdir / "kvConfig.json").write_text(json.dumps({"configTable": {"fill": fill}}))
    metrics_port = free_port()
    with running_namesrv(workdir, "--metrics-port", str(metrics_port)) as server:
        broker = RemotingTestClient(server.remoting_address, timeout=30)
        body = register_body(topics=("TopicA", "TopicB"))
        fields = register_fields("broker-kv", "127.0.0.1:10911", body)
        assert broker.call(RequestCode.REGISTER_BROKER, fields, body).code == ResponseCode.SUCCESS
        stop = threading.Event()
        acknowledged: list[tuple[str, str]] = []
        threads = [
            threading.Thread(target=_flood, args=(server.remoting_address, stop, acknowledged, i))
            for i in range(FLOOD_CONNECTIONS)
        ]
        for thread in threads:
            thread.start()
        heartbeats = 0
        deadline = time.monotonic() + 4
        who = {k: fields[k] for k in ("clusterName", "brokerName", "brokerId", "brokerAddr")}
        while time.monotonic() < deadline:
            assert broker.call(RequestCode.BROKER_HEARTBEAT, who).code == ResponseCode.SUCCESS
            heartbeats += 1
        stop.set()
        for thread in threads:
            thread.join(60)
        broker.close()
        metrics = scrape(f"http://127.0.0.1:{metrics_port}/metrics")
    writes = len(acknowledged)
    flushes = metrics.value("namesrv_kv_config_flushes_total", result="ok")
    assert heartbeats > 1
    assert writes >= FLOOD_CONNECTIONS * PIPELINED
    assert metrics.value("namesrv_kv_config_writes_per_flush_sum") == writes
    assert flushes < writes / 4, f"{writes} writes in {flushes} file writes: not coalesced"
    on_disk = load_config_table(workdir / "kvConfig.json")["flood"]
    last: dict[str, str] = {}
    for key, value in acknowledged:  # per connection in order: the last acknowledged value of a key
        if key not in last or int(value[1:]) > int(last[key][1:]):
            last[key] = value
    assert on_disk == last
