"""A small asyncio client of RocketMQ's remoting protocol (what ``NettyRemotingClient.invokeSync`` /
``invokeOneway`` do, on one connection): used by the tests, the bench and tools.

Requests are pipelined: each gets the next ``opaque`` and waits for the response that echoes it, so
any number may be in flight at once. Frames are built and parsed by :mod:`.codec`.

::

    async with await RemotingClient.connect("127.0.0.1", 9876) as client:
        response = await client.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicTest"})

Errors: :class:`RemotingConnectionError` when the connection is closed or delivers a broken frame
(every request in flight fails with it), ``TimeoutError`` when one response does not come in time.
When the peer answered before any remoting frame with something that is not RocketMQ remoting, the
error says what it was (:func:`foreign_protocol`: an HTTP/2 server's SETTINGS frame, so a gRPC port;
an ``HTTP/1.x`` status line, so an HTTP port) in its ``peer_protocol``.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import ssl
from collections.abc import Mapping
from types import TracebackType
from typing import Final

from namesrv_grpc.remoting.codec import FrameDecoder, FrameError, RemotingCommand, encode_command
from namesrv_grpc.remoting.codes import CURRENT_VERSION, DEFAULT_FRAME_MAX_LENGTH, FLAG_ONEWAY, SerializeType

__all__ = ["HTTP1", "HTTP2", "RemotingClient", "RemotingConnectionError", "foreign_protocol"]

_READ_SIZE = 256 * 1024
_HEAD_BYTES = 64
"""How much of what a peer sent before its first remoting frame is kept, to tell what it speaks."""

HTTP1: Final = "HTTP/1"
HTTP2: Final = "HTTP/2"


def foreign_protocol(head: bytes) -> str | None:
    """What the first bytes a server sent say it speaks, when not RocketMQ remoting: :data:`HTTP2`
    for an HTTP/2 server preface (a SETTINGS frame, type 4, on stream 0, whose length is a multiple
    of 6: RFC 9113 3.4 and 6.5; a gRPC server sends it as soon as the connection opens),
    :data:`HTTP1` for an ``HTTP/1.x`` status line (RFC 9112 4), None otherwise."""
    if head.startswith(b"HTTP/1."):
        return HTTP1
    settings_on_stream_0 = len(head) >= 9 and head[3] == 0x4 and int.from_bytes(head[5:9], "big") & 0x7FFFFFFF == 0
    if settings_on_stream_0 and int.from_bytes(head[:3], "big") % 6 == 0:
        return HTTP2
    return None


class RemotingConnectionError(ConnectionError):
    """The connection to the NameServer closed (or sent a frame that cannot be parsed).
    ``peer_protocol``: :data:`HTTP1` or :data:`HTTP2` when the peer answered in that protocol
    instead of RocketMQ remoting (``peer_answer``: its first bytes), else None."""

    def __init__(self, message: str, peer_protocol: str | None = None, peer_answer: bytes = b"") -> None:
        super().__init__(message)
        self.peer_protocol = peer_protocol
        self.peer_answer = peer_answer


class RemotingClient:
    """One remoting connection with pipelined requests. Create with :meth:`connect`."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        max_frame_length: int = DEFAULT_FRAME_MAX_LENGTH,
        language: str = "PYTHON",
        version: int = CURRENT_VERSION,
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._decoder = FrameDecoder(max_frame_length)
        self._pending: dict[int, asyncio.Future[RemotingCommand]] = {}
        self._opaques = itertools.count()
        self._closed_error: RemotingConnectionError | None = None
        self._head = b""
        """The first bytes received, until the first frame is decoded (:func:`foreign_protocol`)."""
        self._framed = False
        self.language = language
        self.version = version
        self._read_task = asyncio.get_running_loop().create_task(self._read_loop())

    @classmethod
    async def connect(
        cls,
        host: str,
        port: int,
        *,
        timeout: float = 5.0,
        max_frame_length: int = DEFAULT_FRAME_MAX_LENGTH,
        language: str = "PYTHON",
        version: int = CURRENT_VERSION,
        ssl_context: ssl.SSLContext | None = None,
        server_hostname: str | None = None,
    ) -> RemotingClient:
        """Open a connection to ``host:port`` within ``timeout`` seconds (raises OSError / TimeoutError);
        over TLS when ``ssl_context`` is given (``server_hostname``: the name to verify, default ``host``)."""
        tls: dict[str, object] = {}
        if ssl_context is not None:
            tls = {"ssl": ssl_context, "server_hostname": server_hostname or host}
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port, **tls), timeout)  # type: ignore[arg-type]
        return cls(reader, writer, max_frame_length=max_frame_length, language=language, version=version)

    @property
    def framed(self) -> bool:
        """True once a remoting frame was received: the peer speaks RocketMQ remoting."""
        return self._framed

    @property
    def closed(self) -> bool:
        """True once the connection is closed (by either side)."""
        return self._closed_error is not None

    def new_opaque(self) -> int:
        """A fresh opaque for a prebuilt command sent with :meth:`request_command`."""
        return next(self._opaques)

    def _command(
        self,
        code: int,
        ext_fields: Mapping[str, str] | None,
        body: bytes,
        serialize_type: int,
        flag: int,
        remark: str | None,
    ) -> RemotingCommand:
        return RemotingCommand(
            code,
            next(self._opaques),
            flag,
            remark,
            dict(ext_fields or {}),
            body,
            self.language,
            self.version,
            serialize_type,
        )

    async def request(
        self,
        code: int,
        ext_fields: Mapping[str, str] | None = None,
        body: bytes = b"",
        *,
        serialize_type: int = SerializeType.JSON,
        timeout: float = 5.0,
        remark: str | None = None,
    ) -> RemotingCommand:
        """Send a request and return its response (raises RemotingConnectionError, TimeoutError after
        ``timeout`` seconds)."""
        return await self.request_command(self._command(code, ext_fields, body, serialize_type, 0, remark), timeout)

    async def request_command(self, command: RemotingCommand, timeout: float = 5.0) -> RemotingCommand:
        """Send a prebuilt request (its ``opaque`` as given) and return the response echoing its opaque."""
        if self._closed_error is not None:
            raise self._closed_error
        future: asyncio.Future[RemotingCommand] = asyncio.get_running_loop().create_future()
        if command.opaque in self._pending:
            raise ValueError(f"a request with opaque {command.opaque} is already waiting")
        self._pending[command.opaque] = future
        try:
            await self.send_raw(encode_command(command))
            return await asyncio.wait_for(future, timeout)
        except asyncio.TimeoutError:  # the builtin TimeoutError from 3.11 on; not before
            raise TimeoutError(
                f"no response to request code {command.code} (opaque {command.opaque}) within {timeout} s"
            ) from None
        finally:
            self._pending.pop(command.opaque, None)
            if future.done() and not future.cancelled():
                future.exception()  # failed while sending: retrieved, so asyncio does not log it as lost

    async def send_oneway(
        self,
        code: int,
        ext_fields: Mapping[str, str] | None = None,
        body: bytes = b"",
        *,
        serialize_type: int = SerializeType.JSON,
    ) -> None:
        """Send a oneway request (flag bit 1): no response is expected or awaited."""
        await self.send_raw(encode_command(self._command(code, ext_fields, body, serialize_type, FLAG_ONEWAY, None)))

    async def send_raw(self, data: bytes) -> None:
        """Write bytes as they are (tests: split frames, garbage). Raises RemotingConnectionError when closed."""
        if self._closed_error is not None:
            raise self._closed_error
        try:
            self._writer.write(data)
            await self._writer.drain()
        except OSError as exc:
            error = RemotingConnectionError(f"connection lost: {exc}")
            self._fail(error)
            raise error from None

    async def wait_closed(self, timeout: float = 5.0) -> None:
        """Wait until the server closes the connection (raises TimeoutError after ``timeout`` seconds)."""
        try:
            await asyncio.wait_for(asyncio.shield(self._read_task), timeout)
        except asyncio.TimeoutError:
            raise TimeoutError(f"the server did not close the connection within {timeout} s") from None

    async def close(self) -> None:
        """Close the connection; requests still waiting fail with RemotingConnectionError."""
        self._fail(RemotingConnectionError("connection closed by the client"))
        self._read_task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._read_task
        self._writer.close()
        with contextlib.suppress(OSError):
            await self._writer.wait_closed()

    async def __aenter__(self) -> RemotingClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        await self.close()

    def _fail(self, error: RemotingConnectionError) -> None:
        if self._closed_error is None:
            self._closed_error = error
        for future in self._pending.values():
            if not future.done():
                future.set_exception(error)
        self._pending.clear()

    def _foreign(self, fallback: str) -> RemotingConnectionError:
        """The error for a connection that ended: ``fallback``, or what the peer spoke instead."""
        protocol = None if self._framed else foreign_protocol(self._head)
        if protocol == HTTP1:
            status = self._head.split(b"\r\n", 1)[0].split(b"\n", 1)[0].decode("ascii", "replace")
            return RemotingConnectionError(
                f"the server answered {status!r}: it speaks HTTP/1, not RocketMQ remoting", HTTP1, self._head
            )
        if protocol == HTTP2:
            return RemotingConnectionError(
                "the server answered with an HTTP/2 SETTINGS frame: it speaks HTTP/2 (gRPC), not RocketMQ remoting",
                HTTP2,
                self._head,
            )
        return RemotingConnectionError(fallback)

    async def _read_loop(self) -> None:
        try:
            while True:
                data = await self._reader.read(_READ_SIZE)
                if not data:
                    self._fail(self._foreign("connection closed by the server"))
                    return
                if not self._framed and len(self._head) < _HEAD_BYTES:
                    self._head += data[: _HEAD_BYTES - len(self._head)]
                for command in self._decoder.feed(data):
                    self._framed = True
                    if not command.is_response:
                        continue  # a request from the server (e.g. CHECK_TRANSACTION_STATE): not ours
                    future = self._pending.get(command.opaque)
                    if future is not None and not future.done():
                        future.set_result(command)
        except FrameError as exc:
            self._fail(self._foreign(f"the server sent a broken frame: {exc}"))
        except OSError as exc:
            self._fail(RemotingConnectionError(f"connection lost: {exc}"))
