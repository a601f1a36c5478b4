"""Closing one connection from the server's side (``grpc_api/connections.py``) and the rapid-reset
guard's decisions (``grpc_api/stream_resets.py``), in process: real loopback sockets, and channelz
readings given by hand."""

from __future__ import annotations

import asyncio
import json
import socket

import pytest

from namesrv_grpc.grpc_api import stream_resets
from namesrv_grpc.grpc_api.connections import close_connection, close_connections, peer_endpoint
from namesrv_grpc.grpc_api.stream_resets import StreamResetGuard


@pytest.mark.parametrize(
    ("peer", "endpoint"),
    [
        ("ipv4:127.0.0.1:5555", ("127.0.0.1", 5555)),
        ("ipv6:[::1]:443", ("::1", 443)),
        ("ipv6:%5B::1%5D:443", ("::1", 443)),
        ("unix:/tmp/socket", None),
        ("ipv4:127.0.0.1:port", None),
    ],
)
def test_peer_endpoint(peer: str, endpoint: tuple[str, int] | None) -> None:
    assert peer_endpoint(peer) == endpoint


def test_the_connection_of_a_peer_is_shut_down_and_only_it() -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        clients = [socket.create_connection(listener.getsockname()) for _ in range(2)]
        accepted = [listener.accept()[0] for _ in clients]
        try:
            target, other = clients
            host, port = target.getsockname()
            assert close_connection(f"ipv4:{host}:{port}")
            target.settimeout(5)
            assert target.recv(1) == b""  # the server's side hung up
            accepted[1].sendall(b"x")
            other.settimeout(5)
            assert other.recv(1) == b"x"  # the other connection is untouched
            assert accepted[0].fileno() >= 0  # the owner's descriptor stays open: only a duplicate was closed
            assert not close_connection("ipv4:127.0.0.1:1")  # no such connection
            assert close_connections([]) == set()
        finally:
            for sock in (*clients, *accepted):
                sock.close()


class FakeChannelz:
    """channelz readings: one server, sockets with their ``streamsFailed``."""

    def __init__(self) -> None:
        self.calls_failed = 0
        self.sockets: dict[int, tuple[str, int]] = {}

    def channelz_get_servers(self, start: int) -> str:
        return json.dumps({"server": [{"ref": {"serverId": "1"}, "data": {"callsFailed": str(self.calls_failed)}}]})

    def channelz_get_server_sockets(self, server_id: int, start: int, page: int) -> str:
        refs = [
            {"socketId": str(sid), "name": f"chttp2 {name}"}
            for sid, (name, _) in sorted(self.sockets.items())
            if sid >= start
        ]
        return json.dumps({"socketRef": refs[:page], "end": len(refs) <= page})

    def channelz_get_socket(self, socket_id: int) -> str:
        return json.dumps({"socket": {"data": {"streamsFailed": str(self.sockets[socket_id][1])}}})

    def fail(self, socket_id: int, streams: int) -> None:
        name, failed = self.sockets[socket_id]
        self.sockets[socket_id] = (name, failed + streams)
        self.calls_failed += streams


def test_the_guard_closes_only_connections_that_reset_faster_than_the_bound() -> None:
    channelz = FakeChannelz()
    channelz.sockets = {1: ("ipv4:10.0.0.1:1000", 0), 2: ("ipv4:10.0.0.2:2000", 0)}
    asked: list[list[str]] = []
    told: list[str] = []

    def close(peers: list[str]) -> set[str]:
        asked.append(sorted(peers))
        return set(peers)

    now = [0.0]

    def clock() -> float:
        now[0] += 1.0  # a reading a second
        return now[0]

    guard = StreamResetGuard(
        lambda: 100, lambda peer, rate: told.append(peer), close=close, channelz=channelz, clock=clock
    )
    assert guard.check() == []  # the first reading only remembers
    channelz.fail(2, 50)
    assert guard.check() == []  # below the bound: the sockets are not even read
    channelz.fail(1, 100_000)
    channelz.fail(2, 1)
    assert guard.check() == []  # the burst is seen: socket readings start
    channelz.fail(1, 100_000)
    channelz.fail(2, 1)
    assert guard.check() == ["ipv4:10.0.0.1:1000"]
    assert asked == [["ipv4:10.0.0.1:1000"]]
    assert told == ["ipv4:10.0.0.1:1000"]


def test_a_connection_opened_during_a_flood_is_closed_at_the_first_reading() -> None:
    """A flooding client whose connection was closed reconnects at once: its new socket (numbered
    after every socket of the last reading) is closed at the next reading, its failures counted since
    that reading; a socket the last reading did not see for another reason (a quiet second before
    it) is not judged on its first reading."""
    channelz = FakeChannelz()
    channelz.sockets = {1: ("ipv4:10.0.0.1:1000", 0), 2: ("ipv4:10.0.0.2:2000", 0)}
    now = [0.0]

    def clock() -> float:
        now[0] += 1.0
        return now[0]

    guard = StreamResetGuard(lambda: 100, close=lambda peers: set(peers), channelz=channelz, clock=clock)
    guard.check()
    channelz.fail(1, 100_000)
    guard.check()  # the burst is seen: socket readings start
    channelz.fail(1, 100_000)
    assert guard.check() == ["ipv4:10.0.0.1:1000"]
    del channelz.sockets[1]
    channelz.sockets[3] = ("ipv4:10.0.0.1:1001", 0)  # it reconnected and floods again
    channelz.fail(3, 100_000)
    channelz.fail(2, 1)
    assert guard.check() == ["ipv4:10.0.0.1:1001"]
    del channelz.sockets[3]
    guard.check()  # a quiet second: the readings are forgotten
    channelz.sockets[4] = ("ipv4:10.0.0.1:1002", 0)
    channelz.fail(4, 100_000)
    assert guard.check() == []  # no reading to compare with: remembered only
    channelz.fail(4, 100_000)
    assert guard.check() == ["ipv4:10.0.0.1:1002"]


def test_a_bound_of_zero_turns_the_guard_off() -> None:
    channelz = FakeChannelz()
    channelz.sockets = {1: ("ipv4:10.0.0.1:1000", 0)}
    guard = StreamResetGuard(lambda: 0, close=lambda peers: set(peers), channelz=channelz)
    for _ in range(3):
        channelz.fail(1, 1_000_000)
        assert guard.check() == []


def test_slow_readings_are_spaced_out_to_a_hundredth_of_the_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """grpc-core renders a server's channelz node in time proportional to its connections, holding
    the GIL (~100 ms with 2,000 open): the guard waits 100 times as long as a reading took before
    the next one (``LOOP_SHARE``), so it never takes more than 1 % of the event loop; quick
    readings come every ``interval``. How long a reading takes is told by a fake timer, so a busy
    machine cannot make a quick reading look slow."""
    now = [0.0]

    class SlowChannelz(FakeChannelz):
        def __init__(self, seconds: float) -> None:
            super().__init__()
            self.seconds = seconds
            self.readings = 0

        def channelz_get_servers(self, start: int) -> str:
            self.readings += 1
            now[0] += self.seconds
            return super().channelz_get_servers(start)

    async def readings_in(seconds: float, reading_takes: float) -> int:
        channelz = SlowChannelz(reading_takes)
        guard = StreamResetGuard(
            lambda: 100, close=lambda peers: set(peers), channelz=channelz, interval=0.01, timer=lambda: now[0]
        )
        guard.start(asyncio.get_running_loop())
        await asyncio.sleep(seconds)
        guard.stop()
        return channelz.readings

    assert asyncio.run(readings_in(0.5, 0.0)) >= 3  # every 10 ms: ~50 on an idle machine
    assert asyncio.run(readings_in(0.5, 0.02)) <= 1  # 20 ms each: the next one 2 s later (none: a loaded box)
    monkeypatch.setattr(stream_resets, "MAX_SPACING_SECONDS", 0.02)  # however slow, at most this apart
    assert asyncio.run(readings_in(0.5, 10.0)) >= 3
