"""One remoting connection: an ``asyncio.Protocol`` holding its own flow control (as uvicorn's
per-connection protocol classes do), RocketMQ ``NettyServerHandler`` + ``NettyDecoder`` in one object.

What one connection does, in the order bytes flow::

    data_received -> FrameDecoder.add (length checked at once)
    _process      -> FrameDecoder.take, one frame at a time -> dispatcher.dispatch (one per command)
                     FrameError: one log line, close            -> a RemotingCommand now: written
                                                                -> an awaitable (large REGISTER_BROKER,
                                                                   KV writes): written when done
    oneway requests get no answer; answers carry the request's opaque, so pipelined requests may be
    answered out of order (RocketMQ clients match by opaque)

Bounds of one connection (issue 20; the server-wide ones are in :mod:`.budget`):

- at most ``remotingMaxFramesPerRead`` requests are handled per turn of the event loop (and fewer
  when the server-wide ``remotingMaxFramesPerTurn`` of the turn is spent); the rest of a read waits
  (the connection is not read meanwhile) until every other connection had its turn;
- answers waiting to be sent above ``writeBufferHighWaterMark`` bytes stop the handling and the
  reading at once (not at the end of a read), until they drain to ``writeBufferLowWaterMark``
  (RocketMQ 5.x turns Netty's ``autoRead`` off while a channel is unwritable);
- at most ``remotingMaxRequestsInFlight`` requests processed off the event loop; at the bound the
  connection is not read;
- a frame must be complete ``remotingFrameReadTimeoutMillis`` after its first bytes arrived (a
  trickle of bytes does not restart it);
- a connection that sends nothing for ``serverChannelMaxIdleTimeSeconds`` is closed (RocketMQ's
  ``IdleStateHandler`` + ``NettyConnectManageHandler``), dropping answers its peer did not read
  (Netty's ``close()`` fails its outbound buffer); closing a connection removes the brokers that
  registered over it (S15, ``dispatcher.connection_closed``);
- a connection whose peer ends its input (TCP FIN: a half-close, or a close) is closed at once, as
  Netty closes a channel at end of input: answers not yet handed to the kernel and answers to
  requests still in flight are dropped (Netty fails its outbound buffer), and the brokers registered
  over it are removed (S15). While the connection is not read (a bound above), its end of input is
  noticed through ``EPOLLRDHUP`` (:mod:`.end_of_input`): frames received but not handled are dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import socket
from collections.abc import Awaitable, Callable
from typing import Protocol

from namesrv_grpc.remoting.budget import RemotingBudget
from namesrv_grpc.remoting.codec import FrameDecoder, FrameError, RemotingCommand, encode_command
from namesrv_grpc.remoting.codes import ResponseCode
from namesrv_grpc.runtime import event_loop
from namesrv_grpc.runtime.log_limits import printable

log = logging.getLogger(__name__)

_connection_ids = itertools.count(1)

_REFUSAL_REASONS = {
    "remotingFrameMaxLength": "frame_too_large",
    "remotingHeaderMaxFields": "header_too_large",
    "remotingHeaderMaxLength": "header_too_large",
}
"""``frames_refused`` reason of a FrameError's limit."""


class Dispatcher(Protocol):
    """The request handlers (:class:`~.handlers.RemotingHandlers`), as a connection sees them."""

    def dispatch(
        self, request: RemotingCommand, connection: RemotingConnection
    ) -> RemotingCommand | Awaitable[RemotingCommand]: ...


class ConnectionHost(Protocol):
    """The listener (:class:`~.server.RemotingServer`), as a connection sees it."""

    @property
    def budget(self) -> RemotingBudget: ...

    @property
    def handlers(self) -> Dispatcher: ...

    @property
    def idle_timeout_seconds(self) -> Callable[[], float]: ...

    def connection_opened(self, connection: RemotingConnection) -> bool: ...

    def connection_closed(self, connection: RemotingConnection) -> None: ...


class RemotingConnection(asyncio.Protocol):
    """One client or broker connection. Created by the listener for every accepted socket."""

    def __init__(self, server: ConnectionHost) -> None:
        self.server = server
        self.budget = server.budget
        self.limits = server.budget.limits
        self.connection_id = next(_connection_ids)
        """Unique in this process; names the connection as a liveness session owner (S15)."""
        self.peer = "?"
        self.peer_ip = ""
        """The peer's IP address (``globalWhiteRemoteAddresses``)."""
        self.peer_certificate: bytes | None = None
        """The TLS client certificate (DER) the peer presented, if any (an ACL identity)."""
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.active = False
        """Whether a complete frame arrived (connections that never sent one go first at the cap)."""
        self.registered: dict[str, int] = {}
        """broker address -> session id bound by a registration over this connection (S15)."""
        self._decoder = FrameDecoder(
            self.limits.frame_max_length, self.limits.header_max_fields, self.limits.header_max_length
        )
        self._tasks: set[asyncio.Task[None]] = set()
        self._batch: list[bytes] | None = None
        """Answers collected while one turn's requests are handled (written together)."""
        self._batch_bytes = 0
        self._paused: set[str] = set()
        """Why the transport is not read now: write_buffer, in_flight, backlog."""
        self._scheduled = False
        self._frame_started: float | None = None
        """When the first bytes of the incomplete frame held arrived (loop time)."""
        self._frame_timer: asyncio.TimerHandle | None = None
        self._last_activity = 0.0
        self._idle_timer: asyncio.TimerHandle | None = None
        self._fd = -1
        """The socket's descriptor (watched for the peer's end of input while not read)."""
        self._loop = asyncio.get_running_loop()

    # ------------------------------------------------------------------ asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self.peer_ip = str(peer[0]) if isinstance(peer, tuple) else ""
        if not self.server.connection_opened(self):
            self.closed = True
            transport.abort()
            return
        ssl_object = transport.get_extra_info("ssl_object")
        if ssl_object is not None:
            self.peer_certificate = ssl_object.getpeercert(binary_form=True)
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if sock is not None:
            self._fd = sock.fileno()
            # Read after the connections in use until it sends a request (a flood of idle connections
            # closing at once waits behind them, not they behind it: namesrv_grpc.runtime.event_loop).
            event_loop.hold_back(self._loop, self._fd)
        with contextlib.suppress(NotImplementedError):
            transport.set_write_buffer_limits(
                high=self.limits.write_buffer_high_water_mark, low=self.limits.write_buffer_low_water_mark
            )
        self._last_activity = self._loop.time()
        self._schedule_idle_check(self.server.idle_timeout_seconds())

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        self._last_activity = self._loop.time()
        try:
            self._decoder.add(data)
        except FrameError as exc:
            self._frame_error(exc)
            return
        if not self.budget.hold(self, self._decoder.buffered):
            return
        if not self._scheduled:
            self._process()

    def eof_received(self) -> bool | None:
        if self._decoder.buffered and not self._decoder.has_frame:
            log.warning(
                "remoting %s: connection closed by the peer inside a frame (%d bytes of it received)",
                self.peer,
                self._decoder.buffered,
            )
        self.input_ended("active")
        return None

    def input_ended(self, reading: str) -> None:
        """The peer ended its input (a half-close or a close; ``reading``: "active" when read as
        usual, "paused" when noticed while the connection is not read): close now, as Netty does at
        end of input, dropping answers not yet sent; the S15 removal follows in :meth:`connection_lost`."""
        if self.closed:
            return
        self.budget.metrics.end_of_input.labels(reading).inc()
        self.abort("end_of_input")

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        event_loop.release(self._loop, self._fd)  # before asyncio closes the socket (its number is reused)
        self._watch_end_of_input(False)
        for timer in (self._idle_timer, self._frame_timer):
            if timer is not None:
                timer.cancel()
        self.server.connection_closed(self)

    def pause_writing(self) -> None:
        self._set_paused("write_buffer", True)

    def resume_writing(self) -> None:
        self._set_paused("write_buffer", False)
        self._schedule()

    # ------------------------------------------------------------------ flow control

    def _set_paused(self, reason: str, paused: bool) -> None:
        if paused == (reason in self._paused):
            return
        transport = self.transport
        if paused:
            self._paused.add(reason)
            self.budget.metrics.reads_paused.labels(reason).inc()
            if len(self._paused) == 1 and transport is not None and not transport.is_closing():
                transport.pause_reading()
                self._watch_end_of_input(True)
        else:
            self._paused.discard(reason)
            if not self._paused and transport is not None and not transport.is_closing():
                self._watch_end_of_input(False)
                transport.resume_reading()

    def _watch_end_of_input(self, watch: bool) -> None:
        """While the connection is not read, its peer's end of input is noticed through
        ``EPOLLRDHUP`` (:class:`~.end_of_input.EndOfInputWatch`)."""
        if self._fd < 0:
            return
        if watch:
            self.budget.end_of_input.watch(self._fd, self)
        else:
            self.budget.end_of_input.unwatch(self._fd)

    @property
    def reading_paused(self) -> frozenset[str]:
        """Why the connection is not read now (empty when it is)."""
        return frozenset(self._paused)

    def _schedule(self) -> None:
        """Handle waiting frames in a later turn of the event loop, when this connection's place in
        the server-wide queue comes (:meth:`RemotingBudget.wait_turn`)."""
        if not self._scheduled and not self.closed:
            self._scheduled = True
            self.budget.wait_turn(self, self._loop)

    def take_turn(self) -> None:
        """The connection's place in the queue came: handle what the turn's budget allows."""
        self._process()

    def _process(self) -> None:
        """Handle up to ``remotingMaxFramesPerRead`` complete frames (as many as the turn's
        server-wide budget leaves), then decide whether the connection is read and whether another
        turn is needed."""
        self._scheduled = False
        if self.closed:
            return
        limits = self.limits
        budget = self.budget
        handled = 0
        self._batch, self._batch_bytes = [], 0
        try:
            while (
                handled < limits.max_frames_per_read
                and budget.frames_left_this_turn() > 0
                and "write_buffer" not in self._paused
                and len(self._tasks) < limits.max_requests_in_flight
            ):
                commands = self._decoder.take(1)
                if not commands:
                    break
                if not handled:  # this connection is now the most recently active (maxConnections)
                    if not self.active:
                        event_loop.release(self._loop, self._fd)
                    self.active = True
                    budget.touched(self)
                self._frame_started = None
                budget.frame_handled(self._loop)
                self._handle(commands[0])
                handled += 1
                if self.closed:
                    return
                if self._batch_bytes >= limits.write_buffer_high_water_mark:
                    self._flush()
            more = self._decoder.has_frame
        except FrameError as exc:
            self._frame_error(exc)
            return
        finally:
            self._flush()
            self._batch = None
        if handled and not self.budget.hold(self, self._decoder.buffered):
            return
        in_flight_full = len(self._tasks) >= limits.max_requests_in_flight
        self._set_paused("in_flight", in_flight_full)
        backlog = more and not in_flight_full and "write_buffer" not in self._paused
        self._set_paused("backlog", backlog)
        if backlog:
            self._schedule()
        if not more and self._decoder.buffered and self._frame_started is None:
            self._frame_started = self._loop.time()
            if self._frame_timer is None:
                self._frame_timer = self._loop.call_later(limits.frame_read_timeout_millis / 1000, self._frame_check)

    def _flush(self) -> None:
        batch = self._batch
        if batch and not self.closed and self.transport is not None and not self.transport.is_closing():
            self.transport.write(b"".join(batch) if len(batch) > 1 else batch[0])
        if batch:
            batch.clear()
        self._batch_bytes = 0

    def _frame_check(self) -> None:
        self._frame_timer = None
        if self.closed or self._frame_started is None:
            return
        timeout = self.limits.frame_read_timeout_millis / 1000
        waited = self._loop.time() - self._frame_started
        if waited < timeout:
            self._frame_timer = self._loop.call_later(timeout - waited, self._frame_check)
            return
        self.budget.metrics.frames_refused.labels("frame_timeout").inc()
        log.warning(
            "remoting %s: closed, a frame started %.1f s ago is still incomplete (%d bytes received; "
            "remotingFrameReadTimeoutMillis %d)",
            self.peer,
            waited,
            self._decoder.buffered,
            self.limits.frame_read_timeout_millis,
        )
        self.abort("frame_timeout")

    def _frame_error(self, error: FrameError) -> None:
        """One log line naming the problem and the peer (no raw bytes), then close."""
        self.budget.metrics.frame_errors.inc()
        if error.limit is not None:
            self.budget.metrics.frames_refused.labels(_REFUSAL_REASONS.get(error.limit, error.limit)).inc()
        log.warning("remoting %s: bad frame, closing the connection: %s", self.peer, printable(str(error)))
        self.budget.hold(self, 0)
        self.close()

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
            task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if "in_flight" in self._paused or self._decoder.buffered:
            self._schedule()

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
            self._batch_bytes += len(frame)
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

    def abort(self, reason: str) -> None:
        """Close at once, dropping buffered answers (a bound was reached; ``reason`` names it)."""
        self.closed = True
        if self.transport is not None:
            self.transport.abort()

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
            if self.transport is not None and self.transport.get_write_buffer_size():
                # Answers the peer does not read: a graceful close would wait for them for ever
                # (RocketMQ's idle close, Channel.close(), drops them too).
                self.abort("idle")
            else:
                self.close()
            return
        self._schedule_idle_check(max(timeout - idle, 0.05))
