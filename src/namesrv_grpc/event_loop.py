"""The event loop of every ``namesrv`` process: asyncio's selector loop, handling a bounded number of
I/O events per turn.

asyncio's ``EpollSelector`` asks the kernel for every ready socket at once, and the loop runs all of
their callbacks in one turn before anything else. When 15,000 idle connections of a flood close at
the same moment, that one turn took ~280 ms, and every gRPC call (the gRPC door's completions come
back to this loop between turns) waited for it (issue 20, docs/benchmarks.md row 12d).
:class:`BoundedEpollSelector` takes at most :data:`MAX_EVENTS_PER_TURN` ready sockets per turn; the
kernel reports the others (level-triggered epoll) in the next turns, oldest first.

Where epoll is missing (not Linux) the default loop is used unchanged.
"""

from __future__ import annotations

import asyncio
import math
import select
import selectors
from typing import Any

MAX_EVENTS_PER_TURN = 256
"""Ready sockets handled per turn of the event loop at most (about 6 ms of closing connections)."""

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
