"""The per-connection and server-wide bounds of the remoting door in process (issue 20): a recording
transport that reports a full write buffer the way asyncio's does, stub handlers, a real event loop.
The same bounds against real sockets and a real server: tests/test_bounds.py."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from namesrv_grpc.config import NamesrvConfig
from namesrv_grpc.core.kvconfig import KVConfigManager
from namesrv_grpc.core.processor import NameServer
from namesrv_grpc.core.route_table import RouteInfoManager
from namesrv_grpc.processes.ledger import Ledger, LedgerRow
from namesrv_grpc.remoting.budget import (
    RemotingLimits,
    SharedUsage,
    default_grpc_max_connections,
    default_max_connections,
)
from namesrv_grpc.remoting.codec import FrameDecoder, RemotingCommand, encode_command
from namesrv_grpc.remoting.codes import RequestCode, ResponseCode
from namesrv_grpc.remoting.connection import RemotingConnection
from namesrv_grpc.remoting.remoting_metrics import RemotingMetrics
from namesrv_grpc.remoting.server import RemotingServer
from namesrv_grpc.runtime.log_limits import RateLimitFilter


class Transport(asyncio.Transport):
    """Keeps writes; calls ``pause_writing`` once more than ``high`` bytes are unsent (as asyncio's
    transports do), ``drain()`` sends them all and calls ``resume_writing``."""

    def __init__(self, high: int = 1 << 30) -> None:
        super().__init__()
        self.protocol: RemotingConnection | None = None
        self.sent: list[bytes] = []
        self.unsent = 0
        self.high = high
        self.writing_paused = False
        self.reading = True
        self.closed = False
        self.aborted = False

    def write(self, data: Any) -> None:
        self.sent.append(bytes(data))
        self.unsent += len(data)
        if self.unsent > self.high and not self.writing_paused and self.protocol is not None:
            self.writing_paused = True
            self.protocol.pause_writing()

    def drain(self) -> None:
        self.unsent = 0
        if self.writing_paused and self.protocol is not None:
            self.writing_paused = False
            self.protocol.resume_writing()

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = self.aborted = True

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 40000) if name == "peername" else default

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def answers(self) -> list[RemotingCommand]:
        return FrameDecoder().feed(b"".join(self.sent))


class Handlers:
    """Answers every request at once, or with a future of ours for KV writes (PUT_KV_CONFIG)."""

    def __init__(self) -> None:
        self.metrics = RemotingMetrics(CollectorRegistry())
        self.pending: list[asyncio.Future[RemotingCommand]] = []
        self.closed: list[RemotingConnection] = []

    def dispatch(
        self, request: RemotingCommand, connection: RemotingConnection
    ) -> RemotingCommand | Awaitable[RemotingCommand]:
        if request.code == RequestCode.PUT_KV_CONFIG:
            future: asyncio.Future[RemotingCommand] = asyncio.get_running_loop().create_future()
            self.pending.append(future)
            return future
        return request.make_response(ResponseCode.SUCCESS, body=b"x" * 1000)

    def connection_closed(self, connection: RemotingConnection) -> None:
        self.closed.append(connection)


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    try:
        yield loop
    finally:
        loop.close()


def listener(
    loop: asyncio.AbstractEventLoop, shared: SharedUsage | None = None, **limits: Any
) -> tuple[RemotingServer, Handlers]:
    handlers = Handlers()

    async def make() -> RemotingServer:
        return RemotingServer(
            handlers,
            idle_timeout_seconds=lambda: 120.0,
            limits=dataclasses.replace(RemotingLimits.from_config(), **limits),
            shared=shared,
        )

    return loop.run_until_complete(make()), handlers


def connect(
    loop: asyncio.AbstractEventLoop, server: RemotingServer, high: int = 1 << 30
) -> tuple[RemotingConnection, Transport]:
    async def make() -> tuple[RemotingConnection, Transport]:
        connection = RemotingConnection(server)
        transport = Transport(high)
        transport.protocol = connection
        connection.connection_made(transport)
        return connection, transport

    return loop.run_until_complete(make())


def frames(count: int, code: int = RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER) -> bytes:
    return b"".join(encode_command(RemotingCommand(code, i)) for i in range(count))


def turn(loop: asyncio.AbstractEventLoop, turns: int = 1) -> None:
    """Let the loop run ``turns`` rounds of ready callbacks."""
    for _ in range(turns):
        loop.run_until_complete(asyncio.sleep(0))


def test_a_bounded_number_of_frames_per_turn(loop: asyncio.AbstractEventLoop) -> None:
    server, _ = listener(loop, max_frames_per_read=16)
    connection, transport = connect(loop, server)

    async def read() -> tuple[int, frozenset[str], bool]:
        connection.data_received(frames(40))
        return len(transport.answers()), connection.reading_paused, transport.reading

    assert loop.run_until_complete(read()) == (16, frozenset({"backlog"}), False)
    turn(loop, 3)
    assert [a.opaque for a in transport.answers()] == list(range(40))
    assert connection.reading_paused == frozenset()
    assert transport.reading
    assert server.budget.metrics.reads_paused.labels("backlog")._value.get() == 1


def test_all_connections_together_handle_a_bounded_number_of_frames_per_turn(
    loop: asyncio.AbstractEventLoop,
) -> None:
    """remotingMaxFramesPerTurn: 10 connections pipelining 16 frames each get 32 frames handled in a
    turn, not 160 (the event loop serves gRPC too); the others wait for the next turns, in order."""
    server, _ = listener(loop, max_frames_per_read=16, max_frames_per_turn=32)
    pairs = [connect(loop, server) for _ in range(10)]

    async def turns() -> list[list[int]]:
        for connection, _ in pairs:
            connection.data_received(frames(16))
        answered = [[len(transport.answers()) for _, transport in pairs]]
        assert all("backlog" in connection.reading_paused for connection, _ in pairs[2:])
        for _ in range(4):
            await asyncio.sleep(0)  # the next turn
            answered.append([len(transport.answers()) for _, transport in pairs])
        return answered

    assert loop.run_until_complete(turns()) == [
        [16, 16] + [0] * 8,
        [16] * 4 + [0] * 6,
        [16] * 6 + [0] * 4,
        [16] * 8 + [0] * 2,
        [16] * 10,
    ]
    assert all(transport.reading for _, transport in pairs)


def test_a_connection_with_one_request_waits_a_few_turns_not_for_the_pipelining_ones(
    loop: asyncio.AbstractEventLoop,
) -> None:
    """Round robin: 10 connections pipelining 64 frames each take 20 turns at 32 frames a turn; a
    connection that sends one request meanwhile is answered within a round of the queue."""
    server, _ = listener(loop, max_frames_per_read=16, max_frames_per_turn=32)
    pairs = [connect(loop, server) for _ in range(10)]
    probe, probe_transport = connect(loop, server)

    async def turns_until_answered() -> tuple[int, int]:
        for connection, _ in pairs:
            connection.data_received(frames(64))
        await asyncio.sleep(0)
        probe.data_received(frames(1))
        for turn_number in range(1, 30):
            await asyncio.sleep(0)
            if probe_transport.answers():
                return turn_number, sum(len(transport.answers()) for _, transport in pairs)
        return -1, 0

    turns, answered_meanwhile = loop.run_until_complete(turns_until_answered())
    assert 0 < turns <= 7, turns
    assert answered_meanwhile < 10 * 64 // 2  # the pipelining connections are far from done


def test_answers_not_read_stop_handling_at_once(loop: asyncio.AbstractEventLoop) -> None:
    """Over writeBufferHighWaterMark the connection stops in the middle of a read (one read of
    thousands of pipelined requests used to be answered in full before the check)."""
    server, _ = listener(loop, max_frames_per_read=1000, write_buffer_high_water_mark=4096)
    connection, transport = connect(loop, server, high=4096)
    loop.call_soon(connection.data_received, frames(500))
    turn(loop, 5)
    answered = len(transport.answers())
    assert answered < 20  # about 4 KiB of 1 KB answers, not 500 KB
    assert "write_buffer" in connection.reading_paused
    assert not transport.reading
    for _ in range(200):
        transport.drain()
        turn(loop, 2)
    assert len(transport.answers()) == 500
    assert transport.reading


def test_requests_in_flight_are_bounded(loop: asyncio.AbstractEventLoop) -> None:
    server, handlers = listener(loop, max_requests_in_flight=3)
    connection, transport = connect(loop, server)
    loop.call_soon(connection.data_received, frames(10, RequestCode.PUT_KV_CONFIG))
    turn(loop, 3)
    assert len(handlers.pending) == 3
    assert "in_flight" in connection.reading_paused
    for future in list(handlers.pending):
        future.set_result(RemotingCommand(ResponseCode.SUCCESS, 0, 1))
    turn(loop, 5)
    assert len(handlers.pending) == 6
    while len(handlers.pending) < 10:
        for future in handlers.pending:
            if not future.done():
                future.set_result(RemotingCommand(ResponseCode.SUCCESS, 0, 1))
        turn(loop, 5)
    for future in handlers.pending:
        if not future.done():
            future.set_result(RemotingCommand(ResponseCode.SUCCESS, 0, 1))
    turn(loop, 5)
    assert connection.reading_paused == frozenset()
    assert len(transport.answers()) == 10


def test_the_oldest_never_active_then_the_least_recently_active_connection_makes_room(
    loop: asyncio.AbstractEventLoop,
) -> None:
    """maxConnections: a new client always gets in (issue 30). The oldest connection that has sent
    nothing goes first; then the least recently active one (by its last request); a connection over
    which a broker registered never goes (S15: it would take the broker with it)."""
    server, _ = listener(loop, max_connections=3)
    _, first_transport = connect(loop, server)
    second, second_transport = connect(loop, server)
    third, third_transport = connect(loop, server)
    loop.run_until_complete(asyncio.sleep(0))
    second.data_received(frames(1))  # second has sent a request: it stays
    fourth, fourth_transport = connect(loop, server)
    assert first_transport.aborted
    assert not second_transport.aborted
    assert not fourth_transport.aborted
    assert server.budget.metrics.connections_refused.labels("idle_evicted")._value.get() == 1
    for connection in (third, fourth):
        connection.data_received(frames(1))
    fifth, fifth_transport = connect(loop, server)  # all three are active: the least recent goes
    assert second_transport.aborted
    assert not fifth_transport.aborted
    assert not third_transport.aborted
    third.registered["10.0.0.1:10911"] = 1  # brokers registered over the others
    fourth.registered["10.0.0.2:10911"] = 2
    fifth.registered["10.0.0.3:10911"] = 3
    sixth, sixth_transport = connect(loop, server)  # nothing may make room: refused
    assert sixth_transport.aborted
    assert sixth.closed
    assert server.budget.metrics.connections_refused.labels("max_connections")._value.get() == 1
    assert len(server.connections) == 3


def test_at_the_per_address_bound_the_least_recently_active_connection_makes_room(
    loop: asyncio.AbstractEventLoop,
) -> None:
    """remotingMaxConnectionsPerIp: the connection that goes is the one whose *last* request is the
    oldest, not the one whose first request is (a client looking a topic up every 50 ms from the
    same address as a flood of connections that each sent one lookup was closed: scenario 12n)."""
    server, _ = listener(loop, max_connections_per_ip=3)
    client, client_transport = connect(loop, server)
    client.data_received(frames(1))
    others = [connect(loop, server) for _ in range(2)]
    for connection, _ in others:
        connection.data_received(frames(1))
    client.data_received(frames(1))  # the client asks again: now the most recently active
    _, newcomer_transport = connect(loop, server)
    assert not client_transport.aborted
    assert others[0][1].aborted
    assert not others[1][1].aborted
    assert not newcomer_transport.aborted
    assert server.budget.metrics.connections_refused.labels("per_ip_evicted")._value.get() == 1


def test_an_active_connection_stays_while_another_serving_process_holds_never_active_ones(
    loop: asyncio.AbstractEventLoop, tmp_path: Path
) -> None:
    """maxConnections counts every serving process (the ledger): a process whose only connection is
    active admits a new one without closing it while another process holds connections that sent
    nothing; that process closes those at its next trim. A lookup client sharing a box with an idle
    flood is never the one closed."""
    ledger = Ledger(tmp_path / "ledger", 3, create=True)
    first, _ = listener(loop, LedgerRow(ledger, 1), max_connections=4)
    second, _ = listener(loop, LedgerRow(ledger, 2), max_connections=4)
    client, client_transport = connect(loop, first)
    client.data_received(frames(1))
    idle = [connect(loop, second) for _ in range(3)]
    newcomer, newcomer_transport = connect(loop, first)  # 5 > 4: the room is made in the second
    assert not client_transport.aborted
    assert not newcomer_transport.aborted
    second.budget.trim()
    first.budget.trim()
    assert [transport.aborted for _, transport in idle] == [True, False, False]
    assert not client_transport.aborted
    assert ledger.total("remoting_connections") == 4
    assert ledger.total("remoting_never_active") == 3
    for connection, _ in idle[1:]:
        connection.data_received(frames(1))
    newcomer.data_received(frames(1))
    assert ledger.total("remoting_never_active") == 0
    connect(loop, second)  # no one is idle anywhere: the least recently active of its own goes
    assert idle[1][1].aborted
    assert not client_transport.aborted


def test_unfinished_frames_over_the_budget_close_the_largest_holders(loop: asyncio.AbstractEventLoop) -> None:
    server, _ = listener(loop, partial_frames_max_bytes=1 << 20)
    small, small_transport = connect(loop, server)
    large, large_transport = connect(loop, server)
    header_and_body = (8 << 20).to_bytes(4, "big")  # a declared frame of 8 MiB
    small.data_received(header_and_body + bytes(100_000))
    large.data_received(header_and_body + bytes(600_000))
    assert server.budget.partial_bytes == 700_008
    third, third_transport = connect(loop, server)
    third.data_received(header_and_body + bytes(500_000))  # 1.2 MB in all: the 600 KB holder goes
    assert large_transport.aborted
    assert not small_transport.aborted
    assert not third_transport.aborted
    assert server.budget.partial_bytes == 600_008


def test_a_trickle_does_not_restart_the_frame_deadline(loop: asyncio.AbstractEventLoop) -> None:
    server, _ = listener(loop, frame_read_timeout_millis=300)
    connection, transport = connect(loop, server)

    async def trickle() -> float:
        started = loop.time()
        connection.data_received((1 << 20).to_bytes(4, "big"))
        while not transport.aborted and loop.time() - started < 5:
            connection.data_received(b"\0")
            await asyncio.sleep(0.05)
        return loop.time() - started

    took = loop.run_until_complete(trickle())
    assert transport.aborted
    assert 0.25 < took < 2
    assert server.budget.metrics.frames_refused.labels("frame_timeout")._value.get() == 1


def test_complete_frames_are_not_timed_out(loop: asyncio.AbstractEventLoop) -> None:
    server, _ = listener(loop, frame_read_timeout_millis=200)
    connection, transport = connect(loop, server)

    async def steady() -> None:
        one = frames(1)
        for _ in range(10):
            connection.data_received(one[:5])
            await asyncio.sleep(0.05)
            connection.data_received(one[5:])
            await asyncio.sleep(0.05)

    loop.run_until_complete(steady())
    assert not transport.aborted
    assert len(transport.answers()) == 10


def test_default_connection_caps_leave_room() -> None:
    import resource

    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    assert default_max_connections() + default_grpc_max_connections() < soft or soft < 400


def test_rate_limit_filter_counts_and_reports_suppressed_lines() -> None:
    now = [0.0]
    dropped: list[str] = []
    limit = RateLimitFilter(burst=3, window_seconds=10, on_suppressed=dropped.append, clock=lambda: now[0])

    def record(msg: str, *args: object) -> logging.LogRecord:
        return logging.LogRecord("peer", logging.WARNING, __file__, 1, msg, args, None)

    results = [limit.filter(record("code %d unknown", i)) for i in range(10)]
    assert results == [True] * 3 + [False] * 7
    assert limit.filter(record("another kind"))
    assert dropped == ["peer"] * 7
    now[0] = 10.5
    passed = record("code %d unknown", 99)
    assert limit.filter(passed)
    assert passed.getMessage() == "code 99 unknown [7 similar lines suppressed in the last 10 s]"
    for _ in range(4):  # a '%' in the message survives the note (formatted before it is added)
        limit.filter(record("100%% of %s", "x"))
    now[0] = 21.0
    percent = record("100%% of %s", "x")
    assert limit.filter(percent)
    assert percent.getMessage() == "100% of x [1 similar lines suppressed in the last 10 s]"


def test_costly_answers_are_built_once_per_change(tmp_path: Path) -> None:
    config = NamesrvConfig(kv_config_path=str(tmp_path / "kv.json"), config_store_path=str(tmp_path / "c.properties"))
    ns = NameServer(config, RouteInfoManager(), KVConfigManager(tmp_path / "kv.json"))
    builds: list[int] = []

    def build() -> bytes:
        builds.append(1)
        return b"answer %d" % len(builds)

    assert ns.answer_per_change("k", build) == b"answer 1"
    assert ns.answer_per_change("k", build) == b"answer 1"
    ns.route_table.version += 1  # any change of the route table
    assert ns.answer_per_change("k", build) == b"answer 2"
    ns.update_namesrv_config({"orderMessageEnable": "true"})  # a new configuration
    assert ns.answer_per_change("k", build) == b"answer 3"
    assert ns.answer_per_change("other", build) == b"answer 4"
    assert len(builds) == 4


def test_tls_sniffing_connections_count_against_the_cap(loop: asyncio.AbstractEventLoop) -> None:
    """On a permissive TLS port, connections whose first byte is awaited are at most maxConnections."""
    import ssl

    from namesrv_grpc.remoting.tls_sniff import TlsSniffer

    async def run() -> tuple[bool, bool]:
        sniffing: set[asyncio.Task[None]] = set()
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        first, second = Transport(), Transport()
        TlsSniffer(asyncio.Protocol, sniffing, context, max_sniffing=1).connection_made(first)
        TlsSniffer(asyncio.Protocol, sniffing, context, max_sniffing=1).connection_made(second)
        for task in sniffing:
            task.cancel()
        return first.aborted, second.aborted

    assert loop.run_until_complete(run()) == (False, True)
