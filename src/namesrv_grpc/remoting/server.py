"""The remoting listener: RocketMQ ``NettyRemotingServer`` in a few hundred lines. It accepts
connections (each one a :class:`~.connection.RemotingConnection`, which holds the per-connection
bounds), counts them against the server-wide :class:`~.budget.RemotingBudget` (``maxConnections``,
bytes held in unfinished frames), and stops them gracefully.

Imports go one way (no circle): ``server`` -> ``connection``, ``tls_sniff``, ``budget``;
``handlers`` and ``access`` need only the connection's type; ``connection`` needs none of them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import socket
import ssl
import time
from collections.abc import Callable
from typing import Protocol

from namesrv_grpc.remoting.budget import RemotingBudget, RemotingLimits, SharedUsage
from namesrv_grpc.remoting.connection import Dispatcher, RemotingConnection
from namesrv_grpc.remoting.remoting_metrics import RemotingMetrics
from namesrv_grpc.remoting.tls_sniff import TlsSniffer
from namesrv_grpc.runtime.log_limits import printable

__all__ = ["RemotingConnection", "RemotingServer", "printable"]

log = logging.getLogger(__name__)

LISTEN_BACKLOG = 1024
"""The kernel's queue of connections not yet accepted (RocketMQ ``serverSocketBacklog``). asyncio
takes one number for this queue and for the connections it accepts per turn of the event loop; the
listener asks for ``remotingAcceptsPerTurn`` and then sets the queue to this (a flood's burst of
1,024 waiting connections set up in one turn stalled lookups on both doors for ~70 ms)."""


TRIM_INTERVAL_SECONDS = 0.1
"""How often a serving process that holds connections checks whether it must make room under
``maxConnections``. One that holds none has none to close and is not woken for it (an idle
NameServer's process would otherwise wake ten times a second for nothing)."""


class RemotingHandlersLike(Dispatcher, Protocol):
    """The handlers as the listener sees them (:class:`~.handlers.RemotingHandlers`)."""

    metrics: RemotingMetrics

    def connection_closed(self, connection: RemotingConnection) -> None: ...


class RemotingServer:
    """The remoting listener of one NameServer: ``await start(host, port)``, ``await stop(grace)``."""

    def __init__(
        self,
        handlers: RemotingHandlersLike,
        *,
        frame_max_length: int | None = None,
        idle_timeout_seconds: Callable[[], float],
        ssl_context: ssl.SSLContext | None = None,
        permissive_tls: bool = False,
        limits: RemotingLimits | None = None,
        shared: SharedUsage | None = None,
    ) -> None:
        """``idle_timeout_seconds`` is read for every check (``serverChannelMaxIdleTimeSeconds`` may be
        updated at run time); ``limits`` are the bounds (:class:`~.budget.RemotingLimits`);
        ``frame_max_length`` (counting the 4 length bytes, as RocketMQ does) overrides its field;
        ``shared``: what the other serving processes hold, counted against the server-wide bounds."""
        limits = limits or RemotingLimits.from_config()
        if frame_max_length is not None:
            limits = dataclasses.replace(limits, frame_max_length=frame_max_length)
        self.handlers = handlers
        self.budget = RemotingBudget(limits, handlers.metrics, shared)
        self.ssl_context = ssl_context
        """TLS on every connection when set (``tls.server.mode=enforcing``), or on those that start
        with a TLS handshake when ``permissive_tls`` (:mod:`.tls_sniff`)."""
        self.permissive_tls = permissive_tls and ssl_context is not None
        self.sniffing: set[asyncio.Task[None]] = set()
        """Connections whose first byte is awaited (permissive TLS)."""
        self.frame_max_length = limits.frame_max_length
        self.idle_timeout_seconds = idle_timeout_seconds
        self.port = 0
        self.stopping = False
        """Set by :meth:`stop`: connections closed by the shutdown remove no brokers (the table goes too)."""
        self._server: asyncio.Server | None = None
        self._trimming: asyncio.Task[None] | None = None
        self._holds_connections = asyncio.Event()
        """Set when a connection is admitted; the trim loop waits on it while this process holds none."""

    async def start(self, host: str, port: int, *, reuse_port: bool = False) -> int:
        """Listen on ``host:port`` (0 = any free port); return the bound port. ``reuse_port``: with
        ``SO_REUSEPORT``, beside the other serving processes on the same port. Raises RuntimeError
        when the address cannot be bound."""
        loop = asyncio.get_running_loop()
        try:
            if self.permissive_tls:
                assert self.ssl_context is not None
                context = self.ssl_context
                self._server = await loop.create_server(
                    lambda: TlsSniffer(
                        lambda: RemotingConnection(self), self.sniffing, context, self.budget.max_connections
                    ),
                    host or None,
                    port,
                    reuse_address=True,
                    reuse_port=reuse_port,
                    backlog=self.budget.limits.accepts_per_turn,
                )
            else:
                self._server = await loop.create_server(
                    lambda: RemotingConnection(self),
                    host or None,
                    port,
                    reuse_address=True,
                    reuse_port=reuse_port,
                    backlog=self.budget.limits.accepts_per_turn,
                    ssl=self.ssl_context,
                    ssl_handshake_timeout=10.0 if self.ssl_context is not None else None,
                )
            for listening in self._server.sockets:
                # asyncio uses one number for both; keep the kernel's accept queue at RocketMQ's size
                with socket.fromfd(listening.fileno(), listening.family, listening.type) as same:
                    same.listen(LISTEN_BACKLOG)
        except OSError as exc:
            raise RuntimeError(f"cannot listen on {host}:{port} (remoting): {exc.strerror or exc}") from None
        self.port = self._server.sockets[0].getsockname()[1]
        self._trimming = asyncio.create_task(self._trim_loop(), name="remoting-connection-trim")
        return self.port

    async def _trim_loop(self) -> None:
        """Make this process's share of room when the serving processes together hold more than
        ``maxConnections`` (:meth:`~.budget.RemotingBudget.trim`)."""
        while True:
            if not self.connections:
                self._holds_connections.clear()
                await self._holds_connections.wait()
            await asyncio.sleep(TRIM_INTERVAL_SECONDS)
            self.budget.trim()

    @property
    def connections(self) -> set[RemotingConnection]:
        """The connections open now."""
        return self.budget.connections  # type: ignore[return-value]

    def connection_opened(self, connection: RemotingConnection) -> bool:
        """Count a new connection against ``maxConnections``; False when it must be closed at once."""
        if not self.budget.admit(connection):
            return False
        self._holds_connections.set()
        return True

    def connection_closed(self, connection: RemotingConnection) -> None:
        self.budget.forget(connection)
        if not self.stopping:
            self.handlers.connection_closed(connection)

    async def stop(self, grace_seconds: float) -> None:
        """Stop accepting, let requests in flight finish (up to ``grace_seconds``), then close every
        connection."""
        self.stopping = True
        if self._trimming is not None:
            self._trimming.cancel()
        if self._server is not None:
            self._server.close()
        for task in list(self.sniffing):
            task.cancel()
        deadline = time.monotonic() + grace_seconds
        busy = [c for c in self.connections if c.in_flight]
        if busy:
            remaining = max(deadline - time.monotonic(), 0.0)
            await asyncio.wait([asyncio.ensure_future(c.drain()) for c in busy], timeout=remaining)
        for connection in list(self.connections):
            connection.close()
        if self._server is not None:
            try:
                await asyncio.wait_for(self._server.wait_closed(), timeout=max(deadline - time.monotonic(), 1.0))
            except TimeoutError:
                log.warning("remoting: connections still open after the grace period")
        self.budget.end_of_input.close()
