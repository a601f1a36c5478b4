"""The server's event loop: asyncio's selector loop, handling a bounded number of I/O events per turn,
and :class:`LoopPacer`, with which a worker thread lets the loop go first.

asyncio's ``EpollSelector`` asks the kernel for every ready socket at once, and the loop runs all of
their callbacks in one turn before anything else. When 15,000 idle connections of a flood close at
the same moment, that one turn took ~280 ms, and every gRPC call (the gRPC door's completions come
back to this loop between turns) waited for it (issue 20, docs/benchmarks.md row 12d).
:class:`BoundedEpollSelector` takes at most :data:`MAX_EVENTS_PER_TURN` ready sockets per turn; the
kernel reports the others (level-triggered epoll) in the next turns, oldest first.

Where epoll is missing (not Linux) the default loop is used unchanged.

Route lookups run on this loop, and a worker thread doing Python work (preparing a big registration)
takes the GIL from it: each time the loop waits in epoll the worker takes the GIL, and the loop gets
it back only when the worker is asked to drop it, after the interpreter's switch interval (5 ms).
Ten 20,000-topic brokers registering at once made lookups wait ~4x as long as without them
(docs/benchmarks.md, row 14a). :class:`LoopPacer` is called by the worker between slices of its
work and waits until the loop has run what was ready, so the loop goes first and the worker takes
the turns the loop leaves. Where the worker holds the route table's lock (which the loop may be
waiting for) it must not wait for the loop: :meth:`LoopPacer.release_gil` only lets go of the GIL
for a moment, long enough for a loop that wants it to take it.
"""

from __future__ import annotations

import asyncio
import math
import select
import selectors
import threading
import time
from typing import Any

MAX_EVENTS_PER_TURN = 256
"""Ready sockets handled per turn of the event loop at most (about 6 ms of closing connections)."""

GIL_RELEASE_SECONDS = 0.0001
"""How long :meth:`LoopPacer.release_gil` sleeps: time enough for a waiting event loop to take the GIL."""

PACE_TIMEOUT_SECONDS = 0.05
"""A worker waits at most this long for the loop's turn (a loop stopped or blocked never holds it up for long)."""


class LoopPacer:
    """Lets an event loop go first: called from a worker thread, it waits until the loop has run the
    callbacks that were ready (one turn, at most :data:`PACE_TIMEOUT_SECONDS`); called on the loop's
    own thread, or before :meth:`attach` or after the loop closed, it returns at once. Meant for
    ``RouteInfoManager.pace`` (and :meth:`release_gil` for ``RouteInfoManager.pace_locked``)."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = 0
        self.waits = 0
        """Calls that waited for the loop (for tests)."""

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        """Pace against ``loop`` (call on its thread)."""
        self._loop = loop
        self._loop_thread = threading.get_ident()

    def __call__(self) -> None:
        loop = self._loop
        if loop is None or threading.get_ident() == self._loop_thread:
            return
        turn = threading.Event()
        try:
            loop.call_soon_threadsafe(turn.set)
        except RuntimeError:  # the loop is closed
            return
        self.waits += 1
        turn.wait(PACE_TIMEOUT_SECONDS)

    def release_gil(self) -> None:
        """Called from a worker thread that holds a lock the loop may wait for: lets go of the GIL for
        :data:`GIL_RELEASE_SECONDS`, so the loop, if it wants the GIL, takes it now instead of after
        the interpreter's switch interval (5 ms); never waits for the loop itself."""
        if self._loop is not None and threading.get_ident() != self._loop_thread:
            time.sleep(GIL_RELEASE_SECONDS)


if hasattr(selectors, "EpollSelector"):

    class BoundedEpollSelector(selectors.EpollSelector):
        """``selectors.EpollSelector`` returning at most :data:`MAX_EVENTS_PER_TURN` ready keys per
        call (the rest stay ready in the kernel). ``select`` is CPython 3.11's with ``maxevents``
        bounded."""

        def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
            if timeout is None:
                timeout = -1
            elif timeout <= 0:
                timeout = 0
            else:
                timeout = math.ceil(timeout * 1e3) * 1e-3  # epoll_wait() waits whole milliseconds
            max_events = max(min(len(self.get_map()), MAX_EVENTS_PER_TURN), 1)
            ready: list[tuple[selectors.SelectorKey, int]] = []
            try:
                fd_events: Any = self._selector.poll(timeout, max_events)  # type: ignore[attr-defined]
            except InterruptedError:
                return ready
            for fd, event in fd_events:
                events = 0
                if event & ~select.EPOLLIN:
                    events |= selectors.EVENT_WRITE
                if event & ~select.EPOLLOUT:
                    events |= selectors.EVENT_READ
                key = self._key_from_fd(fd)  # type: ignore[attr-defined]
                if key:
                    ready.append((key, events & key.events))
            return ready


def new_event_loop() -> asyncio.AbstractEventLoop:
    """The server's loop: a selector loop on :class:`BoundedEpollSelector` where epoll exists."""
    if hasattr(selectors, "EpollSelector"):
        return asyncio.SelectorEventLoop(BoundedEpollSelector())
    return asyncio.new_event_loop()
