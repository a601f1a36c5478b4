"""The remoting listener: one :class:`RemotingConnection` (an ``asyncio.Protocol``) per TCP
connection, RocketMQ ``NettyRemotingServer`` in a few hundred lines.

What one connection does, in the order bytes flow::

    data_received -> FrameDecoder.feed (framing only)  -> RemotingHandlers.dispatch (one per command)
                     FrameError: one log line, close     -> a RemotingCommand now: written at once
                                                         -> an awaitable (large REGISTER_BROKER, decoded
                                                            in a worker thread): written when done
    oneway requests get no answer; answers carry the request's opaque, so pipelined requests may be
    answered out of order (RocketMQ clients match by opaque)

Flow control as in uvicorn's ``h11_impl``: when the transport's write buffer is full
(``pause_writing``) the connection stops reading until it drains (``resume_writing``), so a client
that pipelines requests without reading answers cannot make the server buffer without bound.
A connection that sends nothing for ``serverChannelMaxIdleTimeSeconds`` is closed (RocketMQ's
``IdleStateHandler`` + ``NettyConnectManageHandler``); closing a connection removes the brokers that
registered over it (S15, :meth:`RemotingHandlers.connection_closed`).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import socket
import ssl
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from namesrv_grpc.remoting.codec import FrameDecoder, FrameError, RemotingCommand, encode_command
from namesrv_grpc.remoting.codes import ResponseCode
from namesrv_grpc.remoting.tls_sniff import TlsSniffer

if TYPE_CHECKING:
    from namesrv_grpc.remoting.handlers import RemotingHandlers

log = logging.getLogger(__name__)

_connection_ids = itertools.count(1)


def printable(text: str, limit: int = 200) -> str:
    """``text`` safe for one log line: control characters escaped, at most ``limit`` characters."""
    if text.isprintable() and len(text) <= limit:
        return text
    escaped = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text[:limit])
    return escaped + ("..." if len(text) > limit else "")


class RemotingConnection(asyncio.Protocol):
    """One client or broker connection. Created by :class:`RemotingServer` for every accepted socket."""

    def __init__(self, server: RemotingServer) -> None:
        self.server = server
        self.connection_id = next(_connection_ids)
        """Unique in this process; names the connection as a liveness session owner (S15)."""
        self.peer = "?"
        self.peer_ip = ""
        """The peer's IP address (``globalWhiteRemoteAddresses``)."""
        self.peer_certificate: bytes | None = None
        """The TLS client certificate (DER) the peer presented, if any (an ACL identity)."""
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.registered: dict[str, int] = {}
        """broker address -> session id bound by a registration over this connection (S15)."""
        self._decoder = FrameDecoder(server.frame_max_length)
        self._tasks: set[asyncio.Task[None]] = set()
        self._batch: list[bytes] | None = None
        """Answers collected while one read's pipelined requests are handled (written together)."""
        self._last_activity = 0.0
        self._idle_timer: asyncio.TimerHandle | None = None
        self._loop = asyncio.get_running_loop()

    # ------------------------------------------------------------------ asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self.peer_ip = str(peer[0]) if isinstance(peer, tuple) else ""
        ssl_object = transport.get_extra_info("ssl_object")
        if ssl_object is not None:
            self.peer_certificate = ssl_object.getpeercert(binary_form=True)
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.connection_opened(self)
        self._last_activity = self._loop.time()
        self._schedule_idle_check(self.server.idle_timeout_seconds())

    def data_received(self, data: bytes) -> None:
        self._last_activity = self._loop.time()
        try:
            commands = self._decoder.feed(data)
        except FrameError as exc:
            self.server.frame_error(self, exc)
            self.close()
            return
        if len(commands) == 1:
            self._handle(commands[0])
            return
        # Pipelined requests: their answers leave in one write (one system call, not one each).
        self._batch = []
        try:
            for command in commands:
                if self.closed:
                    return
                self._handle(command)
        finally:
            batch, self._batch = self._batch, None
            if batch and not self.closed and self.transport is not None and not self.transport.is_closing():
                self.transport.write(b"".join(batch))

    def eof_received(self) -> bool | None:
        if self._decoder.buffered:
            log.warning(
                "remoting %s: connection closed by the peer inside a frame (%d bytes of it received)",
                self.peer,
                self._decoder.buffered,
            )
        return None  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._idle_timer is not None:
            self._idle_timer.cancel()
        self.server.connection_closed(self)

    def pause_writing(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.resume_reading()

    # ------------------------------------------------------------------ requests

    def _handle(self, command: RemotingCommand) -> None:
        if command.is_response:
            return  # a NameServer sends no requests, so no response can be meant for it
        result = self.server.handlers.dispatch(command, self)
        if isinstance(result, RemotingCommand):
            self.send(command, result)
        elif result is not None:
            task = self._loop.create_task(self._finish(command, result))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _finish(self, command: RemotingCommand, pending: Awaitable[RemotingCommand]) -> None:
        self.send(command, await pending)

    def send(self, request: RemotingCommand, response: RemotingCommand) -> None:
        """Write the answer to ``request`` unless it is oneway or the connection is gone."""
        if request.is_oneway or self.closed or self.transport is None or self.transport.is_closing():
            return
        try:
            frame = encode_command(response)
        except ValueError as exc:  # an answer that does not fit its frame (e.g. a header over 16 MiB)
            log.warning("remoting %s: answer to request code %d cannot be sent: %s", self.peer, request.code, exc)
            frame = encode_command(request.make_response(ResponseCode.SYSTEM_ERROR, f"answer not encodable: {exc}"))
        if self._batch is not None:
            self._batch.append(frame)
        else:
            self.transport.write(frame)

    @property
    def in_flight(self) -> int:
        """Requests being processed off the event loop."""
        return len(self._tasks)

    async def drain(self) -> None:
        """Wait for the requests in flight on this connection."""
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    def close(self) -> None:
        """Close the connection (buffered answers are still sent)."""
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    # ------------------------------------------------------------------ idle timeout

    def _schedule_idle_check(self, delay: float) -> None:
        self._idle_timer = self._loop.call_later(delay, self._idle_check)

    def _idle_check(self) -> None:
        if self.closed:
            return
        timeout = self.server.idle_timeout_seconds()
        idle = self._loop.time() - self._last_activity
        if idle >= timeout and not self._tasks:
            log.info("remoting %s: idle for %.0f s (serverChannelMaxIdleTimeSeconds), closing", self.peer, idle)
            self.close()
            return
        self._schedule_idle_check(max(timeout - idle, 0.05))


class RemotingServer:
    """The remoting listener of one NameServer: ``await start(host, port)``, ``await stop(grace)``."""

    def __init__(
        self,
        handlers: RemotingHandlers,
        *,
        frame_max_length: int,
        idle_timeout_seconds: Callable[[], float],
        ssl_context: ssl.SSLContext | None = None,
        permissive_tls: bool = False,
    ) -> None:
        """``idle_timeout_seconds`` is read for every check (``serverChannelMaxIdleTimeSeconds`` may be
        updated at run time); ``frame_max_length`` counts the 4 length bytes, as RocketMQ does."""
        self.handlers = handlers
        self.ssl_context = ssl_context
        """TLS on every connection when set (``tls.server.mode=enforcing``), or on those that start
        with a TLS handshake when ``permissive_tls`` (:mod:`.tls_sniff`)."""
        self.permissive_tls = permissive_tls and ssl_context is not None
        self.sniffing: set[asyncio.Task[None]] = set()
        """Connections whose first byte is awaited (permissive TLS)."""
        self.frame_max_length = frame_max_length
        self.idle_timeout_seconds = idle_timeout_seconds
        self.connections: set[RemotingConnection] = set()
        self.port = 0
        self.stopping = False
        """Set by :meth:`stop`: connections closed by the shutdown remove no brokers (the table goes too)."""
        self._server: asyncio.Server | None = None

    async def start(self, host: str, port: int) -> int:
        """Listen on ``host:port`` (0 = any free port); return the bound port. Raises RuntimeError
        when the address cannot be bound."""
        loop = asyncio.get_running_loop()
        try:
            if self.permissive_tls:
                assert self.ssl_context is not None
                context = self.ssl_context
                self._server = await loop.create_server(
                    lambda: TlsSniffer(self, context), host or None, port, reuse_address=True, backlog=1024
                )
            else:
                self._server = await loop.create_server(
                    lambda: RemotingConnection(self),
                    host or None,
                    port,
                    reuse_address=True,
                    backlog=1024,
                    ssl=self.ssl_context,
                    ssl_handshake_timeout=10.0 if self.ssl_context is not None else None,
                )
        except OSError as exc:
            raise RuntimeError(f"cannot listen on {host}:{port} (remoting): {exc.strerror or exc}") from None
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    def connection_opened(self, connection: RemotingConnection) -> None:
        self.connections.add(connection)
        self.handlers.metrics.connection_opened()

    def connection_closed(self, connection: RemotingConnection) -> None:
        if connection in self.connections:
            self.connections.discard(connection)
            self.handlers.metrics.connection_closed()
        if not self.stopping:
            self.handlers.connection_closed(connection)

    def frame_error(self, connection: RemotingConnection, error: FrameError) -> None:
        """One log line naming the problem and the peer (no raw bytes), then the caller closes."""
        self.handlers.metrics.frame_errors.inc()
        log.warning("remoting %s: bad frame, closing the connection: %s", connection.peer, printable(str(error)))

    async def stop(self, grace_seconds: float) -> None:
        """Stop accepting, let requests in flight finish (up to ``grace_seconds``), then close every
        connection."""
        self.stopping = True
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
