"""Answers handed to gRPC and not sent yet: bounded per connection and per serving process (issue 30).

A unary handler returns its answer to gRPC, which frees the call slot at once; gRPC's core then keeps
the answer until the client's HTTP/2 flow-control window lets it out. A client that sets its window
to 0 and never sends WINDOW_UPDATE made a serving process keep every answer it asked for: 1,000
``GetAllTopicList`` calls of 2.4 MB each, +2.3 GB of RSS, growing with every call. gRPC's core has
no bound of its own for this (``grpc.http2.write_buffer_size`` only bounds what a stream queues
while the application sets ``GRPC_WRITE_BUFFER_HINT``; nothing refuses a call because its
connection's answers are not read).

What grpcio 1.85 does give: a call's ``context.add_done_callback`` runs only once the call is over,
that is once its answer and status were handed to the socket, or the call was cancelled (client
gone, connection closed) -- measured: 300 answers to a client with a window of 0 ran none of their
callbacks until it disconnected. So the bytes of a connection's answers that are not sent yet are
the sizes of its answers whose calls are not done, which :class:`UnsentAnswers` counts in the one
wrapper every handler goes through (:mod:`namesrv_grpc.grpc_api.handlers`):

- **per connection** (``grpcWriteBufferHighWaterMark``, default 16 MiB, the largest answer gRPC
  may send by default): while a connection's unsent answers reach it, its new calls wait before
  being handled (nothing is built for them), the gRPC twin of remoting's
  ``writeBufferHighWaterMark``, which stops reading such a connection (gRPC's Python API cannot
  pause one connection's reads). A call goes on as soon as the connection's answers fall below the
  mark; one that waited ``grpcWriteBufferWaitMillis`` (default 10 s) is refused with
  RESOURCE_EXHAUSTED (``LIMIT_EXCEEDED``, ``limit=grpcWriteBufferHighWaterMark``). So a client that
  reads gets every answer, however many large ones it asks for at once (50 topic lists of 3.6 MB in
  flight on one connection were refused when calls did not wait), and one that does not read gets
  refusals. One answer is always allowed, however large: the check is made before a call is handled.
- **per serving process** (``grpcWriteBufferMaxTotalBytes``, default 256 MiB): above it, a call
  waits (then is refused, the same way) when its connection holds more than its share (the total
  bound divided by the connections holding unsent answers), so the connections that do not read
  are held back and one that reads its answers keeps getting them.

A connection is ``context.peer()`` (``ipv4:IP:PORT``): each TCP connection has its own. Streams
(``WatchTopicRoutes``, ``OpenBrokerSession``) hold at most the one message they are waiting to send
(the aio server waits for each message to be sent before taking the next) and are bounded by the
route-watch bounds and the session bounds.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from namesrv_grpc.core.errors import LimitExceededError

RefusalCounter = Callable[[str], None]
"""Called with the ``reason`` of each refusal or wait (``write_buffer`` or ``write_buffer_total``)."""


def answer_size(response: object) -> int:
    """Bytes of an answer as it goes on the wire: a serialized one as is, a protobuf message's
    ``ByteSize()``; 0 for anything else."""
    if isinstance(response, (bytes, bytearray, memoryview)):
        return len(response)
    byte_size = getattr(response, "ByteSize", None)
    return int(byte_size()) if byte_size is not None else 0


class UnsentAnswers:
    """Bytes of answers handed to gRPC and not sent yet, per connection and in total. Used from the
    event loop's thread only (handlers and their done callbacks run there)."""

    def __init__(
        self,
        high_water_mark: Callable[[], int],
        max_total: Callable[[], int],
        refused: RefusalCounter | None = None,
        *,
        wait_seconds: Callable[[], float] = lambda: 10.0,
        paused: RefusalCounter | None = None,
    ) -> None:
        """``high_water_mark`` and ``max_total`` return the current bounds in bytes, ``wait_seconds``
        how long a call may wait for them (read per call, so ``UpdateNamesrvConfig`` changes them at
        once); ``refused(reason)`` and ``paused(reason)`` count refusals and waits."""
        self._high_water_mark = high_water_mark
        self._max_total = max_total
        self._wait_seconds = wait_seconds
        self._refused = refused
        self._paused = paused
        self.by_peer: dict[str, int] = {}
        """Connection (``context.peer()``) -> bytes of its answers not sent yet (no entry at 0)."""
        self.total = 0
        """Bytes of every connection's answers not sent yet."""
        self._waiting: dict[str, asyncio.Event] = {}
        """Connection -> set when its held answers go down (its waiting calls look again)."""

    def blocked(self, peer: str) -> str | None:
        """Why a call of ``peer`` may not be handled now: ``write_buffer`` (its connection's unsent
        answers reach ``grpcWriteBufferHighWaterMark``), ``write_buffer_total`` (all connections'
        reach ``grpcWriteBufferMaxTotalBytes`` and this one holds more than its share), or None."""
        held = self.by_peer.get(peer, 0)
        if not held:
            return None
        if held >= self._high_water_mark():
            return "write_buffer"
        max_total = self._max_total()
        if self.total >= max_total and held * len(self.by_peer) >= max_total:
            return "write_buffer_total"
        return None

    async def admit(self, peer: str) -> None:
        """Before a call of ``peer`` is handled: at once when :meth:`blocked` says nothing, else
        after the connection's answers went down enough. Raises LimitExceededError
        (RESOURCE_EXHAUSTED) when that took ``grpcWriteBufferWaitMillis``."""
        reason = self.blocked(peer)
        if reason is None:
            return
        self._count(self._paused, reason)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._wait_seconds()
        while reason is not None:
            remaining = deadline - loop.time()
            if remaining <= 0:
                self._refuse(peer, reason)
            event = self._waiting.get(peer)
            if event is None:
                event = self._waiting[peer] = asyncio.Event()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(event.wait(), remaining)
            reason = self.blocked(peer)

    def _refuse(self, peer: str, reason: str) -> None:
        self._count(self._refused, reason)
        held = self.by_peer.get(peer, 0)
        waited = self._wait_seconds()
        if reason == "write_buffer":
            raise LimitExceededError(
                "grpcWriteBufferHighWaterMark",
                f"{held} bytes of answers on this connection have not been read for {waited:.0f} s, the most "
                f"allowed is {self._high_water_mark()} (grpcWriteBufferHighWaterMark); read them, then call again",
            )
        raise LimitExceededError(
            "grpcWriteBufferMaxTotalBytes",
            f"{self.total} bytes of answers to all clients are not read, the most allowed is {self._max_total()} "
            f"(grpcWriteBufferMaxTotalBytes), and this connection's {held} of them have not been read for "
            f"{waited:.0f} s; read them, then call again",
        )

    def hold(self, peer: str, response: object, context: Any) -> None:
        """``response`` was handed to gRPC for ``peer``: count its bytes until the call is done
        (``context.add_done_callback``)."""
        size = answer_size(response)
        if not size:
            return
        self.by_peer[peer] = self.by_peer.get(peer, 0) + size
        self.total += size
        context.add_done_callback(lambda _: self.release(peer, size))

    def release(self, peer: str, size: int) -> None:
        """``size`` bytes of ``peer`` were sent (or dropped with the call); the calls waiting on
        this connection (or, when the total fell below its bound, on any) look again."""
        was_over_total = self.total >= self._max_total()
        self.total -= size
        left = self.by_peer.get(peer, 0) - size
        if left > 0:
            self.by_peer[peer] = left
        else:
            self.by_peer.pop(peer, None)
        if not self._waiting:
            return
        event = self._waiting.pop(peer, None)
        if event is not None:
            event.set()
        if was_over_total and self.total < self._max_total():
            for other in self._waiting.values():
                other.set()
            self._waiting.clear()

    @staticmethod
    def _count(counter: RefusalCounter | None, reason: str) -> None:
        if counter is not None:
            counter(reason)
