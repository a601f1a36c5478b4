"""One remoting connection in process, with a recording transport: how answers are written
(pipelined answers in one write, none for oneway requests), what an unencodable answer becomes, and
that a bad frame closes the connection. The real-socket behaviour is in test_remoting_server.py."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from namesrv_grpc.config import NamesrvConfig
from namesrv_grpc.core.commands import RouteTableWrites
from namesrv_grpc.core.kvconfig import KVConfigManager
from namesrv_grpc.core.processor import NameServer
from namesrv_grpc.core.route_table import RouteInfoManager
from namesrv_grpc.metrics import NamesrvMetrics
from namesrv_grpc.remoting.codec import FrameDecoder, RemotingCommand, encode_command
from namesrv_grpc.remoting.codes import RequestCode, ResponseCode, SerializeType
from namesrv_grpc.remoting.handlers import RemotingHandlers
from namesrv_grpc.remoting.remoting_metrics import RemotingMetrics
from namesrv_grpc.remoting.server import RemotingConnection, RemotingServer, printable
from tests.support import LocalWrites


class RecordingTransport(asyncio.Transport):
    """Keeps every write; ``close`` only records."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: Any) -> None:
        self.writes.append(bytes(data))

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 40000) if name == "peername" else default

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


@pytest.fixture
def connection(tmp_path: Path) -> Iterator[tuple[RemotingConnection, RecordingTransport]]:
    config = NamesrvConfig(
        kv_config_path=str(tmp_path / "kv.json"), config_store_path=str(tmp_path / "namesrv.properties")
    )
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:

        async def make() -> tuple[RemotingConnection, RecordingTransport]:
            ns = NameServer(config, RouteInfoManager(), KVConfigManager(None))
            metrics = NamesrvMetrics(ns.route_table)
            handlers = RemotingHandlers(
                ns, cast(RouteTableWrites, LocalWrites(ns)), metrics, RemotingMetrics(metrics.registry)
            )
            server = RemotingServer(handlers, idle_timeout_seconds=lambda: 120.0)
            conn = RemotingConnection(server)
            transport = RecordingTransport()
            conn.connection_made(transport)
            return conn, transport

        conn, transport = loop.run_until_complete(make())
        yield conn, transport
        conn.connection_lost(None)
    finally:
        asyncio.set_event_loop(None)
        loop.close()


def answers(transport: RecordingTransport) -> list[RemotingCommand]:
    return FrameDecoder().feed(b"".join(transport.writes))


def request(code: int, opaque: int, *, oneway: bool = False, **fields: str) -> RemotingCommand:
    return RemotingCommand(code, opaque, 2 if oneway else 0, None, dict(fields))


def test_pipelined_answers_leave_in_one_write(connection: tuple[RemotingConnection, RecordingTransport]) -> None:
    conn, transport = connection
    frames = b"".join(encode_command(request(RequestCode.GET_KV_CONFIG, i, namespace="n", key="k")) for i in range(10))
    conn.data_received(frames)
    assert len(transport.writes) == 1
    assert [a.opaque for a in answers(transport)] == list(range(10))


def test_oneway_requests_get_no_answer(connection: tuple[RemotingConnection, RecordingTransport]) -> None:
    conn, transport = connection
    conn.data_received(encode_command(request(RequestCode.GET_NAMESRV_CONFIG, 1, oneway=True)))
    conn.data_received(encode_command(request(RequestCode.GET_NAMESRV_CONFIG, 2)))
    assert [a.opaque for a in answers(transport)] == [2]


def test_unencodable_answer_becomes_system_error(
    connection: tuple[RemotingConnection, RecordingTransport], monkeypatch: pytest.MonkeyPatch
) -> None:
    conn, transport = connection
    bad = RemotingCommand(70_000, 5, 1, None, {}, b"", "JAVA", 479, SerializeType.ROCKETMQ)  # code over int16
    monkeypatch.setattr(conn.server.handlers, "dispatch", lambda command, connection: bad)
    conn.data_received(encode_command(RemotingCommand(RequestCode.GET_NAMESRV_CONFIG, 5, serialize_type=1)))
    (answer,) = answers(transport)
    assert answer.opaque == 5
    assert answer.code == ResponseCode.SYSTEM_ERROR
    assert "answer not encodable" in (answer.remark or "")


def test_bad_frame_closes_the_connection(connection: tuple[RemotingConnection, RecordingTransport]) -> None:
    conn, transport = connection
    conn.data_received(b"GET / HTTP/1.1\r\n\r\n")
    assert transport.closed
    assert transport.writes == []


def test_printable_escapes_control_characters() -> None:
    assert printable("plain text") == "plain text"
    assert printable("a\x00b\r\n\x1b[31m") == "a\\x00b\\r\\n\\x1b[31m"
    assert printable("x" * 300, limit=10) == "x" * 10 + "..."


def test_the_trim_loop_sleeps_while_the_process_holds_no_connection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A listening server with no remoting connection is not woken by the connection trim (it has
    none to close); once one is admitted, the trim runs every ``TRIM_INTERVAL_SECONDS`` again, and
    stops again when it is gone."""
    config = NamesrvConfig(
        kv_config_path=str(tmp_path / "kv.json"), config_store_path=str(tmp_path / "namesrv.properties")
    )

    async def run() -> tuple[int, int, int]:
        ns = NameServer(config, RouteInfoManager(), KVConfigManager(None))
        metrics = NamesrvMetrics(ns.route_table)
        handlers = RemotingHandlers(
            ns, cast(RouteTableWrites, LocalWrites(ns)), metrics, RemotingMetrics(metrics.registry)
        )
        server = RemotingServer(handlers, idle_timeout_seconds=lambda: 120.0)
        trims = [0]
        monkeypatch.setattr(server.budget, "trim", lambda: trims.__setitem__(0, trims[0] + 1))
        port = await server.start("127.0.0.1", 0)
        try:
            await asyncio.sleep(0.5)  # five trim intervals
            idle = trims[0]
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            deadline = asyncio.get_running_loop().time() + 30
            while trims[0] < idle + 2:
                assert asyncio.get_running_loop().time() < deadline, "no trim while a connection is held"
                await asyncio.sleep(0.05)
            held = trims[0]
            writer.close()
            while server.connections:
                assert asyncio.get_running_loop().time() < deadline, "the connection was not closed"
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.3)  # at most the trim in progress when it went
            after = trims[0]
            await asyncio.sleep(0.5)
            return idle, held, trims[0] - after
        finally:
            await server.stop(1.0)

    idle, held, after_close = asyncio.run(run())
    assert idle == 0
    assert held >= 2
    assert after_close == 0
