"""The server's event loop handles a bounded number of ready sockets per turn (namesrv_grpc.runtime.event_loop)."""

from __future__ import annotations

import asyncio
import selectors
import socket

import pytest

from namesrv_grpc.runtime import event_loop

pytestmark = pytest.mark.skipif(not hasattr(selectors, "EpollSelector"), reason="epoll is Linux's")


def add_readers(
    loop: asyncio.AbstractEventLoop,
    pairs: list[tuple[socket.socket, socket.socket]],
    seen: list[int],
    payload: bytes,
    first: int = 0,
) -> None:
    """Each pair's reader reads one byte per callback and notes its index (counted from ``first``)
    in ``seen``; ``payload`` is written to each pair (more than one byte: readable in the next turns
    too)."""
    for index, (reader, writer) in enumerate(pairs, first):
        reader.setblocking(False)

        def readable(index: int = index, reader: socket.socket = reader) -> None:
            reader.recv(1)
            seen.append(index)

        loop.add_reader(reader, readable)
        writer.send(payload)


def close_readers(loop: asyncio.AbstractEventLoop, pairs: list[tuple[socket.socket, socket.socket]]) -> None:
    for reader, writer in pairs:
        loop.remove_reader(reader)
        reader.close()
        writer.close()


def test_at_most_max_events_per_turn_and_the_rest_in_the_next_turns(monkeypatch: pytest.MonkeyPatch) -> None:
    """40 readable sockets, 16 events a turn: 16, 16 and 8 callbacks in three turns, each socket's once."""
    monkeypatch.setattr(event_loop, "MAX_EVENTS_PER_TURN", 16)
    loop = event_loop.new_event_loop()
    pairs = [socket.socketpair() for _ in range(40)]
    turns: list[list[int]] = []
    try:

        async def run() -> None:
            current: list[int] = []
            add_readers(loop, pairs, current, b"x")
            while sum(map(len, turns)) + len(current) < 40:
                await asyncio.sleep(0)
                if current:
                    turns.append(list(current))
                    current.clear()

        loop.run_until_complete(asyncio.wait_for(run(), 10))
    finally:
        close_readers(loop, pairs)
        loop.close()
    assert [len(turn) for turn in turns] == [16, 16, 8]
    assert sorted(index for turn in turns for index in turn) == list(range(40))


def test_a_prioritized_socket_is_handled_in_every_turn(monkeypatch: pytest.MonkeyPatch) -> None:
    """40 busy sockets, 16 events a turn: the prioritized one (a serving process's link to the
    route-table process) is reported in each of the turns, the others in turn; it stays prioritized
    after asyncio unregistered it (its reading paused) and registered it again."""
    monkeypatch.setattr(event_loop, "MAX_EVENTS_PER_TURN", 16)
    loop = event_loop.new_event_loop()
    pairs = [socket.socketpair() for _ in range(40)]
    link, peer = socket.socketpair()
    turns: list[list[int]] = []
    try:
        assert event_loop.prioritize(loop, link)
        other = asyncio.new_event_loop()
        assert not event_loop.prioritize(other, link)  # not a loop of ours
        other.close()

        async def run() -> None:
            current: list[int] = []
            add_readers(loop, pairs, current, b"x" * 100)  # readable in every turn
            loop.add_reader(link, lambda: current.append(-1))
            loop.remove_reader(link)  # unregistered ...
            loop.add_reader(link, lambda: current.append(-1))  # ... and registered again
            peer.send(b"y")  # never read: ready in every turn
            for _ in range(6):
                await asyncio.sleep(0)
                turns.append(list(current))
                current.clear()

        loop.run_until_complete(asyncio.wait_for(run(), 10))
    finally:
        close_readers(loop, pairs)
        loop.remove_reader(link)
        link.close()
        peer.close()
        loop.close()
    busy = [turn for turn in turns if turn]
    assert len(busy) >= 3
    assert all(turn.count(-1) == 1 and turn[0] == -1 for turn in busy), turns
    assert all(len(turn) <= 17 for turn in busy), turns  # 16 others at most, and the link


def test_held_back_sockets_come_after_the_others_and_keep_a_share_of_every_turn(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """16 events a turn, and 4 held-back sockets (a remoting connection that has sent no request yet)
    besides: with 40 held-back sockets ready (a flood of idle connections closing) and 20 busy ones,
    every turn reports the busy ones first and 4 held-back ones; with 8 busy ones, still 4. A
    released socket is one of the others again, and a held-back one stays held back after asyncio
    unregistered it and registered it again."""
    monkeypatch.setattr(event_loop, "MAX_EVENTS_PER_TURN", 16)
    monkeypatch.setattr(event_loop, "HELD_BACK_PER_TURN", 4)
    loop = event_loop.new_event_loop()
    held = [socket.socketpair() for _ in range(40)]
    busy = [socket.socketpair() for _ in range(20)]
    turns: list[list[int]] = []
    try:
        for reader, _ in held:
            assert event_loop.hold_back(loop, reader.fileno())
        other = asyncio.new_event_loop()
        assert not event_loop.hold_back(other, held[0][0].fileno())  # not a loop of ours
        other.close()

        async def run(pairs: list[tuple[socket.socket, socket.socket]], count: int) -> None:
            current: list[int] = []
            add_readers(loop, held, current, b"x" * 100)  # index 0-39: held back
            add_readers(loop, pairs, current, b"y" * 100, first=100)  # index 100-119: the others

            def first_again() -> None:
                held[0][0].recv(1)
                current.append(0)

            loop.remove_reader(held[0][0])  # unregistered ...
            loop.add_reader(held[0][0], first_again)  # ... and registered again
            for _ in range(count):
                await asyncio.sleep(0)
                if current:
                    turns.append(list(current))
                    current.clear()

        loop.run_until_complete(asyncio.wait_for(run(busy, 4), 10))
        assert turns
        for turn in turns:  # the busy ones first (up to 16: the nested epoll's wake-up takes a slot)
            kinds = [index >= 100 for index in turn]
            assert kinds == sorted(kinds, reverse=True), turns
            assert 15 <= kinds.count(True) <= 16, turns
            assert kinds.count(False) == 4, turns
        for reader, _ in busy:
            loop.remove_reader(reader)
        for reader, _ in held:
            loop.remove_reader(reader)
        turns.clear()
        loop.run_until_complete(asyncio.wait_for(run(busy[:8], 4), 10))
        assert turns
        for turn in turns:  # 4 a turn, however much room is left
            assert [index >= 100 for index in turn] == [True] * 8 + [False] * 4, turns
        for reader, _ in busy + held:
            loop.remove_reader(reader)
        for reader, _ in held:
            event_loop.release(loop, reader.fileno())
        turns.clear()
        loop.run_until_complete(asyncio.wait_for(run([], 3), 10))
        assert all(len(turn) == 16 for turn in turns), turns  # no longer held back: 16 a turn
    finally:
        close_readers(loop, held)
        for reader, writer in busy:
            if loop.is_running():
                loop.remove_reader(reader)
            reader.close()
            writer.close()
        loop.close()


GRPC_COMPLETIONS_CHECK = """
import asyncio
import grpc
from namesrv_grpc.runtime import event_loop

loop = event_loop.new_event_loop()

async def run() -> None:
    server = grpc.aio.server()
    server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        found = event_loop.prioritize_grpc_completions(loop)
        selector = event_loop._SELECTORS[loop]
        prioritized = selector._priority_fds & set(selector.get_map())
        print(found, len(prioritized), event_loop.prioritize_grpc_completions(asyncio.new_event_loop()))
    finally:
        await server.stop(0)

loop.run_until_complete(run())
"""


def test_grpc_completions_are_prioritized_on_our_loop_only() -> None:
    """The socket through which grpcio's asyncio server hears of its calls is found among the loop's
    readers and prioritized (so a flood of ready connections does not delay each step of a gRPC
    call); a loop not of new_event_loop() is left as it is. Fails when grpcio stops registering it
    so. In a fresh interpreter: grpcio makes that socket once per process, on the loop current then."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", GRPC_COMPLETIONS_CHECK], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1", "1", "0"]
