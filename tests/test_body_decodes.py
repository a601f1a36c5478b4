"""Where a serving process decodes registration bodies (namesrv_grpc.runtime.policy): small plain
ones on the event loop, larger plain ones in a worker thread one at a time, and compressed or very
large ones not at all (the route-table process does)."""

from __future__ import annotations

import asyncio
import threading
import time

from namesrv_grpc.runtime.policy import (
    DOOR_DECODE_MAX_BYTES,
    OFF_LOOP_DECODE_BYTES,
    OffLoopDecodes,
    decoded_by_door,
)


def test_the_door_decodes_plain_bodies_up_to_its_bound_only() -> None:
    assert decoded_by_door(DOOR_DECODE_MAX_BYTES, compressed=False)
    assert not decoded_by_door(DOOR_DECODE_MAX_BYTES + 1, compressed=False)
    assert not decoded_by_door(100, compressed=True)  # may inflate to registerBodyMaxInflatedSize


def test_large_bodies_are_decoded_in_a_worker_thread_one_at_a_time() -> None:
    decodes = OffLoopDecodes()
    running = 0
    most = 0
    threads: list[int] = []

    def decode(name: str) -> str:
        nonlocal running, most
        running += 1
        most = max(most, running)
        threads.append(threading.get_ident())
        time.sleep(0.02)
        running -= 1
        return name

    async def run() -> tuple[list[str], int]:
        loop_thread = threading.get_ident()
        small = await decodes.run(OFF_LOOP_DECODE_BYTES, decode, "small")
        assert threads == [loop_thread]  # on the event loop
        big = await asyncio.gather(*(decodes.run(OFF_LOOP_DECODE_BYTES + 1, decode, f"big{i}") for i in range(4)))
        return [small, *big], loop_thread

    names, loop_thread = asyncio.run(run())
    assert names == ["small", "big0", "big1", "big2", "big3"]
    assert loop_thread not in threads[1:]
    assert most == 1
