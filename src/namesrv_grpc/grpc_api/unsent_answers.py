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
  may send by default): while a connection's unsent answers reach it, its new calls are refused
  with RESOURCE_EXHAUSTED (``LIMIT_EXCEEDED``, ``limit=grpcWriteBufferHighWaterMark``) before they
  are handled, the gRPC twin of remoting's ``writeBufferHighWaterMark`` (remoting stops reading
  the connection instead; gRPC's Python API cannot pause one connection's reads). One answer is
  always allowed, however large: the check is made before a call is handled.
- **per serving process** (``grpcWriteBufferMaxTotalBytes``, default 256 MiB): above it, a call is
  refused when its connection holds more than its share (the total bound divided by the
  connections holding unsent answers), so the connections that do not read are refused and one
  that reads its answers keeps getting them.

A connection is ``context.peer()`` (``ipv4:IP:PORT``): each TCP connection has its own. Streams
(``WatchTopicRoutes``, ``OpenBrokerSession``) hold at most the one message they are waiting to send
(the aio server waits for each message to be sent before taking the next) and are bounded by the
route-watch bounds and the session bounds.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from namesrv_grpc.core.errors import LimitExceededError

RefusalCounter = Callable[[str], None]
"""Called with the ``reason`` of each refusal (``write_buffer`` or ``write_buffer_total``)."""


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
    ) -> None:
        """``high_water_mark`` and ``max_total`` return the current bounds in bytes (read per call,
        so ``UpdateNamesrvConfig`` changes them at once)."""
        self._high_water_mark = high_water_mark
        self._max_total = max_total
        self._refused = refused
        self.by_peer: dict[str, int] = {}
        """Connection (``context.peer()``) -> bytes of its answers not sent yet (no entry at 0)."""
        self.total = 0
        """Bytes of every connection's answers not sent yet."""

    def check(self, peer: str) -> None:
        """Before a call of ``peer`` is handled. Raises LimitExceededError (RESOURCE_EXHAUSTED) when
        the connection's unsent answers reach ``grpcWriteBufferHighWaterMark``, or when all
        connections' reach ``grpcWriteBufferMaxTotalBytes`` and this one holds more than its share."""
        held = self.by_peer.get(peer, 0)
        if not held:
            return
        mark = self._high_water_mark()
        if held >= mark:
            self._refuse("write_buffer")
            raise LimitExceededError(
                "grpcWriteBufferHighWaterMark",
                f"{held} bytes of answers on this connection are not read yet, the most allowed is {mark} "
                "(grpcWriteBufferHighWaterMark); read them, then call again",
            )
        max_total = self._max_total()
        if self.total >= max_total and held * len(self.by_peer) >= max_total:
            self._refuse("write_buffer_total")
            raise LimitExceededError(
                "grpcWriteBufferMaxTotalBytes",
                f"{self.total} bytes of answers to all clients are not read yet, the most allowed is {max_total} "
                f"(grpcWriteBufferMaxTotalBytes), and this connection holds {held} of them; read them, then call again",
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
        """``size`` bytes of ``peer`` were sent (or dropped with the call)."""
        self.total -= size
        left = self.by_peer.get(peer, 0) - size
        if left > 0:
            self.by_peer[peer] = left
        else:
            self.by_peer.pop(peer, None)

    def _refuse(self, reason: str) -> None:
        if self._refused is not None:
            self._refused(reason)
