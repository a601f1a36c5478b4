"""``tls.server.mode=permissive`` on the remoting port: TLS and plaintext clients on one port, as
RocketMQ's ``TlsModeHandler`` does (it looks at the first byte: 0x16 is a TLS handshake record).

A remoting frame starts with its 4-byte big-endian length, so a first byte of 0x16 would announce a
frame of more than 369 MB, far over ``remotingFrameMaxLength``: the first byte tells the two apart.

How, with public asyncio only: the new connection's transport stops reading at once; a duplicate of
its socket waits (``add_reader``) until a byte is there and peeks at it (``MSG_PEEK``, nothing is
consumed); then either ``loop.start_tls`` wraps the transport (the ClientHello is still unread) or the
plain transport is handed over as it is. Either way the connection becomes an ordinary
:class:`~namesrv_grpc.remoting.connection.RemotingConnection` (made by the factory the listener
passes, so this module imports neither). A peer that sends nothing within
:data:`SNIFF_TIMEOUT_SECONDS` is disconnected.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
from collections.abc import Callable

log = logging.getLogger(__name__)

TLS_HANDSHAKE_RECORD = 0x16
SNIFF_TIMEOUT_SECONDS = 10.0
HANDSHAKE_TIMEOUT_SECONDS = 10.0


class TlsSniffer(asyncio.Protocol):
    """The first protocol of every connection on a permissive port; replaced once the first byte is known."""

    def __init__(
        self,
        make_connection: Callable[[], asyncio.Protocol],
        sniffing: set[asyncio.Task[None]],
        context: ssl.SSLContext,
        max_sniffing: int = 1 << 30,
    ) -> None:
        """``make_connection`` builds the protocol that takes the connection over; ``sniffing`` is
        the listener's set of sniffing tasks (cancelled when it stops); at ``max_sniffing`` of them
        (``maxConnections``) a new connection is closed at once: connections that have sent nothing
        yet must not exhaust file descriptors either."""
        self._make_connection = make_connection
        self._sniffing = sniffing
        self._context = context
        self._max_sniffing = max_sniffing
        self._transport: asyncio.Transport | None = None
        self._task: asyncio.Task[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        if len(self._sniffing) >= self._max_sniffing:
            log.warning(
                "remoting: %d connections have sent nothing yet (maxConnections); closing a new one",
                len(self._sniffing),
            )
            transport.abort()
            return
        transport.pause_reading()
        self._task = asyncio.get_running_loop().create_task(self._sniff(transport))
        self._sniffing.add(self._task)
        self._task.add_done_callback(self._sniffing.discard)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()

    async def _sniff(self, transport: asyncio.Transport) -> None:
        try:
            first = await asyncio.wait_for(self._peek(transport), SNIFF_TIMEOUT_SECONDS)
        except (TimeoutError, asyncio.TimeoutError, OSError):
            transport.close()
            return
        except Exception:  # never leave a connection hanging
            log.exception("remoting: cannot tell TLS from plaintext on a new connection; closing it")
            transport.close()
            return
        if first is None:  # closed before sending anything
            transport.close()
            return
        loop = asyncio.get_running_loop()
        connection = self._make_connection()
        if first == TLS_HANDSHAKE_RECORD:
            # Requests may arrive between the handshake and this coroutine resuming: a buffer takes
            # them, and hands them over once the connection is set up (synchronously, below).
            early = _Early()
            try:
                tls_transport = await loop.start_tls(
                    transport,
                    early,
                    self._context,
                    server_side=True,
                    ssl_handshake_timeout=HANDSHAKE_TIMEOUT_SECONDS,
                )
            except (ssl.SSLError, OSError, ConnectionError, TimeoutError, asyncio.TimeoutError) as exc:
                log.info("remoting: TLS handshake failed (%s)", exc)
                transport.close()
                return
            assert tls_transport is not None
            if early.lost:
                tls_transport.close()
                return
            connection.connection_made(tls_transport)
            tls_transport.set_protocol(connection)
            for chunk in early.chunks:
                connection.data_received(chunk)
            if early.eof:
                tls_transport.close()
            return
        transport.set_protocol(connection)
        connection.connection_made(transport)
        transport.resume_reading()

    @staticmethod
    async def _peek(transport: asyncio.Transport) -> int | None:
        """The first byte waiting on the connection (not consumed), or None at end of stream."""
        raw = transport.get_extra_info("socket")
        loop = asyncio.get_running_loop()
        with contextlib.closing(raw.dup()) as sock:  # a socket.socket of its own fd
            sock.setblocking(False)
            while True:
                readable: asyncio.Future[None] = loop.create_future()
                loop.add_reader(sock.fileno(), _set_done, readable)
                try:
                    await readable
                finally:
                    loop.remove_reader(sock.fileno())
                try:
                    data = sock.recv(1, socket.MSG_PEEK)
                except (BlockingIOError, InterruptedError):
                    continue
                return data[0] if data else None


def _set_done(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class _Early(asyncio.Protocol):
    """Holds what arrives on a TLS connection before its RemotingConnection takes it over."""

    def __init__(self) -> None:
        self.chunks: list[bytes] = []
        self.eof = False
        self.lost = False

    def data_received(self, data: bytes) -> None:
        self.chunks.append(data)

    def eof_received(self) -> bool | None:
        self.eof = True
        return True  # keep the transport open until the connection has answered

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
