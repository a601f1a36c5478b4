"""The event loop of every ``namesrv`` process: asyncio's selector loop, handling a bounded number of
I/O events per turn.

asyncio's ``EpollSelector`` asks the kernel for every ready socket at once, and the loop runs all of
their callbacks in one turn before anything else. When 15,000 idle connections of a flood close at
the same moment, that one turn took ~280 ms, and every gRPC call (the gRPC door's completions come
back to this loop between turns) waited for it (issue 20, docs/benchmarks.md row 12d).
:class:`BoundedEpollSelector` takes at most :data:`MAX_EVENTS_PER_TURN` ready sockets per turn; the
kernel reports the others (level-triggered epoll) in the next turns, oldest first.

A few descriptors are *prioritized* (:func:`prioritize`): a serving process's link to the
route-table process, and the socket through which grpcio's asyncio server hears of its calls
(:func:`prioritize_grpc_completions`). They sit in a second epoll, nested in the first, that is read
at every turn before the bounded rest:
- under 512 busy client connections the link was reported every other turn and moved one socket
  buffer (~200 KB) each time, so 300 KB registration bodies queued up in it (145 MB, answers 3.8 s
  late; docs/performance.md);
- level-triggered epoll reports ready sockets oldest first, so when 10,000 connections of a flood
  closed at once, each step of a gRPC call (a unary call takes several) waited until all of them
  were handled: gRPC lookups took up to 385 ms, against ~20 ms with the socket prioritized
  (docs/benchmarks.md row 12d).

Other descriptors are *held back* (:func:`hold_back`): a remoting connection that has sent no
request yet, until it sends one (:func:`release`). They sit in a third epoll, also nested, read after
the others at every turn, :data:`HELD_BACK_PER_TURN` at most. When 10,000 idle connections of a
flood from one address closed at once, a remoting client's lookup waited until each of their closes
was handled before its own request was read (up to 385 ms, docs/benchmarks.md row 12w); held back,
their closes are taken a few at a time behind the connections in use, in short turns (a gRPC call
takes several turns), and a new client's first request still gets its share of each turn.

Where epoll is missing (not Linux) the default loop is used unchanged.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import select
import selectors
import socket
import weakref
from typing import Any

MAX_EVENTS_PER_TURN = 64
"""Ready sockets handled per turn of the event loop at most: about 6 ms of closing connections on a
2-core machine (~100 us each, mostly the kernel's close), the longest a prioritized socket waits.
It was 256 (~25 ms a turn; a gRPC call's steps each waited one turn)."""

HELD_BACK_PER_TURN = 16
"""Held-back descriptors (:func:`hold_back`) handled per turn, however busy or idle the others are:
a new connection's first request waits for the held-back closes ahead of it, not for the
connections in use, and a flood's closes lengthen no turn by more than ~1 ms (~70 us each)."""

if hasattr(selectors, "EpollSelector"):

    class BoundedEpollSelector(selectors.EpollSelector):
        """``selectors.EpollSelector`` returning at most :data:`MAX_EVENTS_PER_TURN` ready keys per
        call (the rest stay ready in the kernel), plus every ready prioritized descriptor
        (:meth:`prioritize`). ``select`` is CPython 3.11's with ``maxevents`` bounded."""

        def __init__(self) -> None:
            super().__init__()
            self._main: Any = self._selector  # type: ignore[attr-defined]
            self._priority = select.epoll()
            self._priority_fds: set[int] = set()
            self._main.register(self._priority.fileno(), select.EPOLLIN)  # readable when one of them is ready
            self._held = select.epoll()
            self._held_fds: set[int] = set()
            self._main.register(self._held.fileno(), select.EPOLLIN)
            self._nested = (self._priority.fileno(), self._held.fileno())

        def prioritize(self, fd: int) -> None:
            """Report ``fd``'s events at every turn, before the others (moved to the nested epoll if
            registered already). It stays so while the loop lives, registered or not (asyncio
            unregisters a descriptor whose reading is paused): a link lives as long as its process."""
            if fd in self._priority_fds:
                return
            self._move(fd, self._priority)
            self._held_fds.discard(fd)
            self._priority_fds.add(fd)

        def hold_back(self, fd: int) -> None:
            """Report ``fd``'s events after the others' at every turn (:data:`HELD_BACK_PER_TURN`
            held-back ones a turn), until :meth:`release`; a prioritized descriptor stays
            prioritized. It stays held back while unregistered and registered again."""
            if fd in self._priority_fds or fd in self._held_fds:
                return
            self._move(fd, self._held)
            self._held_fds.add(fd)

        def release(self, fd: int) -> None:
            """``fd`` is no longer held back (it is reported with the others); call it at the latest
            when its socket closes, before its number can be reused."""
            if fd in self._held_fds:
                self._move(fd, self._main)
                self._held_fds.discard(fd)

        def _move(self, fd: int, to: Any) -> None:
            key = self.get_map().get(fd)
            if key is not None:
                self._epoll(fd).unregister(fd)
                to.register(fd, _poller_events(key.events))

        def _epoll(self, fd: int) -> Any:
            if fd in self._priority_fds:
                return self._priority
            return self._held if fd in self._held_fds else self._main

        def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
            key = selectors._BaseSelectorImpl.register(self, fileobj, events, data)
            try:
                self._epoll(key.fd).register(key.fd, _poller_events(events))
            except BaseException:
                selectors._BaseSelectorImpl.unregister(self, fileobj)
                raise
            return key

        def unregister(self, fileobj: Any) -> selectors.SelectorKey:
            key = selectors._BaseSelectorImpl.unregister(self, fileobj)
            with contextlib.suppress(OSError):  # the descriptor was closed already
                self._epoll(key.fd).unregister(key.fd)
            return key

        def modify(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
            key = self.get_key(fileobj)
            if events != key.events:
                try:
                    self._epoll(key.fd).modify(key.fd, _poller_events(events))
                except BaseException:
                    selectors._BaseSelectorImpl.unregister(self, fileobj)
                    raise
            if events != key.events or data != key.data:
                key = key._replace(events=events, data=data)
                self._fd_to_key[key.fd] = key  # type: ignore[attr-defined]
            return key

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
                fd_events: Any = self._main.poll(timeout, max_events)
                if self._priority_fds:
                    fd_events = self._priority.poll(0) + fd_events
                if self._held_fds:
                    fd_events += self._held.poll(0, HELD_BACK_PER_TURN)
            except InterruptedError:
                return ready
            nested = self._nested
            for fd, event in fd_events:
                if fd in nested:
                    continue  # only the wake-up: the nested epolls were read above
                events = 0
                if event & ~select.EPOLLIN:
                    events |= selectors.EVENT_WRITE
                if event & ~select.EPOLLOUT:
                    events |= selectors.EVENT_READ
                key = self._key_from_fd(fd)  # type: ignore[attr-defined]
                if key:
                    ready.append((key, events & key.events))
            return ready

        def close(self) -> None:
            self._priority.close()
            self._held.close()
            super().close()

    def _poller_events(events: int) -> int:
        poller_events = 0
        if events & selectors.EVENT_READ:
            poller_events |= select.EPOLLIN
        if events & selectors.EVENT_WRITE:
            poller_events |= select.EPOLLOUT
        return poller_events


_SELECTORS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = weakref.WeakKeyDictionary()
"""The selector of each loop :func:`new_event_loop` made."""


def new_event_loop() -> asyncio.AbstractEventLoop:
    """The server's loop: a selector loop on :class:`BoundedEpollSelector` where epoll exists."""
    if hasattr(selectors, "EpollSelector"):
        selector = BoundedEpollSelector()
        loop = asyncio.SelectorEventLoop(selector)
        _SELECTORS[loop] = selector
        return loop
    return asyncio.new_event_loop()


def prioritize(loop: asyncio.AbstractEventLoop, sock: socket.socket | None) -> bool:
    """Have ``loop`` handle ``sock``'s events at every turn, before the bounded rest (a loop of
    :func:`new_event_loop`; any other loop is left as it is). Returns whether it was done."""
    selector = _SELECTORS.get(loop)
    if selector is None or sock is None:
        return False
    selector.prioritize(sock.fileno())
    return True


def hold_back(loop: asyncio.AbstractEventLoop, fd: int) -> bool:
    """Have ``loop`` handle descriptor ``fd``'s events after the others' (a loop of
    :func:`new_event_loop`; any other loop is left as it is) until :func:`release`. Returns whether
    it was done."""
    selector = _SELECTORS.get(loop)
    if selector is None or fd < 0:
        return False
    selector.hold_back(fd)
    return True


def release(loop: asyncio.AbstractEventLoop, fd: int) -> None:
    """Undo :func:`hold_back` (nothing when ``fd`` is not held back); at the latest when the socket
    closes, before its number can be reused."""
    selector = _SELECTORS.get(loop)
    if selector is not None:
        selector.release(fd)


def prioritize_grpc_completions(loop: asyncio.AbstractEventLoop) -> int:
    """Prioritize (:func:`prioritize`) the socket through which grpcio's asyncio stack hears from
    gRPC's core: the reader it registered with a method of its ``PollerCompletionQueue`` (grpcio's
    ``_cygrpc/aio/completion_queue.pyx.pxi``; it makes one per process, when its first server or
    channel starts). Returns how many readers were prioritized: 0 on a loop not of
    :func:`new_event_loop`, or when grpcio has not started (or no longer works so; a test checks)."""
    selector = _SELECTORS.get(loop)
    if selector is None:
        return 0
    found = 0
    for key in list(selector.get_map().values()):
        reader = key.data[0] if isinstance(key.data, tuple) and key.data else None
        callback = getattr(reader, "_callback", None)
        callback = getattr(callback, "func", callback)  # grpcio registers a functools.partial
        owner = getattr(callback, "__self__", None)
        if type(owner).__name__ == "PollerCompletionQueue":
            selector.prioritize(key.fd)
            found += 1
    return found
