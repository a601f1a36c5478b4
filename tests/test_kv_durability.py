"""KV config durability (issue 10, rule S21): a write is acknowledged only once it is on disk, so
every acknowledged write survives ``kill -9`` at any moment, the file is never torn, and temporary
files a killed write left behind are removed at the next start. Real server processes, killed
while a client writes."""

from __future__ import annotations

import random
import signal
import threading
import time
from pathlib import Path

import grpc

from namesrv.v1 import kv_config_service_pb2 as kv_pb2
from namesrv_grpc.core.kvconfig import load_config_table
from tests.support import Stubs, spawn_namesrv

NAMESPACE = "durability"
ROUNDS = 5


def _writer(address: str, start: int, acknowledged: list[int], stop: threading.Event) -> None:
    """Write keys start, start+1, ... until the server dies; record each acknowledged one."""
    with grpc.insecure_channel(address) as channel:
        stubs = Stubs(channel)
        index = start
        while not stop.is_set():
            # Values of varying size, so a torn file would be likely if writes were not atomic.
            value = f"{index}:" + "x" * random.randint(0, 20_000)
            try:
                stubs.kv.PutKVConfig(
                    kv_pb2.PutKVConfigRequest(namespace=NAMESPACE, key=f"k{index}", value=value), timeout=10
                )
            except grpc.RpcError:
                return
            acknowledged.append(index)
            index += 1


def test_acknowledged_writes_survive_kill_9_at_random_moments(tmp_path: Path) -> None:
    workdir = tmp_path / "namesrv"
    kv_file = workdir / "kvConfig.json"
    acknowledged: list[int] = []
    rng = random.Random(20261122)
    for round_number in range(ROUNDS):
        if round_number:
            # A temporary file as a write killed before its rename leaves it: removed at start.
            (workdir / ".kvConfig.json.killed.tmp").write_text('{"configTable": {"torn": ')
        server = spawn_namesrv(workdir)
        try:
            assert not (workdir / ".kvConfig.json.killed.tmp").exists(), "stray temporary file not removed"
            with server.channel() as channel:
                stubs = Stubs(channel)
                # Everything acknowledged before every earlier kill is still there.
                table = stubs.kv.GetKVListByNamespace(kv_pb2.GetKVListByNamespaceRequest(namespace=NAMESPACE)).table
                for index in acknowledged:
                    assert table[f"k{index}"].startswith(f"{index}:"), f"acknowledged write k{index} lost"
            stop = threading.Event()
            # Start past any key a killed, unacknowledged write may have left.
            start = max(acknowledged) + 1000 if acknowledged else 0
            thread = threading.Thread(target=_writer, args=(server.address, start, acknowledged, stop))
            thread.start()
            time.sleep(rng.uniform(0.3, 1.5))
            server.process.send_signal(signal.SIGKILL)
            server.process.wait(10)
            stop.set()
            thread.join(30)
        finally:
            if server.process.poll() is None:
                server.process.kill()
            server.process.stdout.close()  # type: ignore[union-attr]
        # The file on disk is whole (never torn) and holds every acknowledged write.
        table_on_disk = load_config_table(kv_file).get(NAMESPACE, {})
        missing = [index for index in acknowledged if f"k{index}" not in table_on_disk]
        assert not missing, f"acknowledged writes missing after kill -9: {missing[:10]}"
    assert len(acknowledged) > ROUNDS, "the writer hardly wrote anything"
