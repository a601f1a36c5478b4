"""A remoting peer's end of input (TCP FIN, or a reset) noticed while its connection is not read.

Netty closes a channel when a read finds the end of input (``ChannelOption.ALLOW_HALF_CLOSURE``
false, its default, and RocketMQ's), and so does :class:`~.connection.RemotingConnection` when asyncio
reads it (``eof_received``). But a connection past a bound is *not read* (unread answers over
``writeBufferHighWaterMark``, ``remotingMaxRequestsInFlight``, a backlog of frames): asyncio sees its
end of input only once it is read again, and a peer that stopped reading its answers and then
half-closed kept its connection, and the brokers registered over it (S15), for ever.

:class:`EndOfInputWatch` watches the sockets of the connections not read now for ``EPOLLRDHUP``
(the peer shut its side down; reported although unread bytes wait before it) in an epoll instance of
its own, whose descriptor the event loop watches; a connection whose peer ended its input is told at
once. Where epoll is missing (not Linux) nothing is watched: such a connection goes at the idle
timeout (``serverChannelMaxIdleTimeSeconds``).
"""

from __future__ import annotations

import asyncio
import contextlib
import select
from typing import Protocol

MAX_EVENTS = 256
"""Ended inputs handled per turn of the event loop at most (the others stay ready)."""


class Watched(Protocol):
    """A connection, as the watch sees it."""

    def input_ended(self, reading: str) -> None:
        """The peer ended its input (``reading``: "paused", it was not read)."""


class EndOfInputWatch:
    """``EPOLLRDHUP`` (and errors) of the sockets of connections that are not read now."""

    def __init__(self) -> None:
        self._epoll = select.epoll() if hasattr(select, "epoll") else None
        self._watched: dict[int, Watched] = {}
        self._loop: asyncio.AbstractEventLoop | None = None

    def watch(self, fd: int, connection: Watched) -> None:
        """Tell ``connection`` when the peer of socket ``fd`` ends its input (until :meth:`unwatch`)."""
        if self._epoll is None or fd < 0 or fd in self._watched:
            return
        if not self._watched:
            self._loop = asyncio.get_running_loop()
            self._loop.add_reader(self._epoll.fileno(), self._ready)
        self._epoll.register(fd, select.EPOLLRDHUP)
        self._watched[fd] = connection

    def unwatch(self, fd: int) -> None:
        """Stop watching ``fd`` (a connection read again, or closing); nothing when not watched."""
        if self._watched.pop(fd, None) is None or self._epoll is None:
            return
        with contextlib.suppress(OSError, ValueError):  # already closed: the kernel dropped it
            self._epoll.unregister(fd)
        if not self._watched and self._loop is not None:
            self._loop.remove_reader(self._epoll.fileno())

    def _ready(self) -> None:
        assert self._epoll is not None
        for fd, _ in self._epoll.poll(0, MAX_EVENTS):
            connection = self._watched.get(fd)
            self.unwatch(fd)
            if connection is not None:
                connection.input_ended("paused")

    def close(self) -> None:
        """Stop watching anything (the listener stopped)."""
        for fd in list(self._watched):
            self.unwatch(fd)
        if self._epoll is not None:
            self._epoll.close()
            self._epoll = None
