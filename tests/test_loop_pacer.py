"""A worker thread lets the server's event loop go first (namesrv_grpc.event_loop.LoopPacer): a
big registration's preparation calls it between slices (issue 21)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator

import pytest

from namesrv_grpc import event_loop
from namesrv_grpc.event_loop import LoopPacer


@pytest.fixture
def running_loop() -> Iterator[asyncio.AbstractEventLoop]:
    """An event loop running in a thread of its own."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield loop
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def attached(loop: asyncio.AbstractEventLoop) -> LoopPacer:
    pacer = LoopPacer()
    asyncio.run_coroutine_threadsafe(_attach(pacer), loop).result(10)
    return pacer


async def _attach(pacer: LoopPacer) -> None:
    pacer.attach(asyncio.get_running_loop())


def in_thread(call: Callable[[], None]) -> threading.Event:
    """Run ``call`` in a new thread; the event is set when it returned."""
    returned = threading.Event()

    def run() -> None:
        call()
        returned.set()

    threading.Thread(target=run, daemon=True).start()
    return returned


def keep_busy(loop: asyncio.AbstractEventLoop) -> threading.Event:
    """Keep ``loop`` busy with a ready callback until the returned event is set."""
    busy = threading.Event()
    loop.call_soon_threadsafe(busy.wait)
    return busy


def test_a_worker_waits_until_the_loop_ran_what_was_ready(
    running_loop: asyncio.AbstractEventLoop, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(event_loop, "PACE_TIMEOUT_SECONDS", 30.0)
    pacer = attached(running_loop)
    busy = keep_busy(running_loop)
    returned = in_thread(pacer)
    assert not returned.wait(0.2), "the worker went on while the loop had not had its turn"
    busy.set()
    assert returned.wait(10)
    assert pacer.waits == 1


def test_a_blocked_loop_holds_the_worker_up_for_the_timeout_only(
    running_loop: asyncio.AbstractEventLoop, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(event_loop, "PACE_TIMEOUT_SECONDS", 0.05)
    pacer = attached(running_loop)
    blocked = keep_busy(running_loop)
    try:
        assert in_thread(pacer).wait(10), "a blocked loop held the worker up past the timeout"
    finally:
        blocked.set()


def test_on_the_loop_itself_before_attach_and_after_close_it_returns_at_once() -> None:
    pacer = LoopPacer()
    pacer()  # not attached: nothing to wait for
    loop = asyncio.new_event_loop()

    async def on_the_loop() -> None:
        pacer.attach(asyncio.get_running_loop())
        pacer()  # waiting for its own turn would never end

    loop.run_until_complete(on_the_loop())
    loop.close()
    assert in_thread(pacer).wait(10), "a closed loop holds nobody up"
    assert pacer.waits == 0


def test_release_gil_never_waits_for_the_loop(
    running_loop: asyncio.AbstractEventLoop, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Called under the route table's lock, which a blocked loop may be waiting for: it returns
    although the loop never comes round."""
    monkeypatch.setattr(event_loop, "PACE_TIMEOUT_SECONDS", 30.0)
    pacer = attached(running_loop)
    blocked = keep_busy(running_loop)
    try:
        assert in_thread(pacer.release_gil).wait(10)
    finally:
        blocked.set()
    assert pacer.waits == 0
