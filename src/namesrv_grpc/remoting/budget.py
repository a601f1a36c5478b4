"""What the remoting listener as a whole may hold (issue 20): the server-wide half of the bounds whose
per-connection half is :class:`~namesrv_grpc.remoting.connection.RemotingConnection`.

- **Connections** (``maxConnections``): at the cap, a new connection takes the place of the oldest
  connection that never sent a complete frame; when every connection has sent one, the new one is
  closed at once. So a flood of idle connections cannot exhaust file descriptors, and cannot lock
  out brokers (a broker sends its registration right after connecting). The default leaves a
  quarter of the process's file-descriptor limit (at least 256) to gRPC, files and the metrics port.
- **Requests handled per turn of the event loop** (``remotingMaxFramesPerTurn``), all connections
  together: the event loop also serves the gRPC door, and a gRPC call needs several turns, so one
  turn must stay short however many connections pipeline requests (30 connections each handling
  their 16 frames per turn made turns of ~15 ms and gRPC lookups of ~55 ms). Connections with
  requests left wait in one queue, served in order once per turn while the turn's budget lasts; a
  connection served that still has requests goes to the back (round robin: a client with one
  lookup waits for a few turns, not for the pipelining ones to finish).
- **Bytes held in frames not yet decoded** (``remotingPartialFramesMaxBytes``), across all
  connections: over it, the connections holding the most are closed until the total fits again
  (100 connections each holding most of a 16 MiB frame would otherwise pin 1.4 GB).

Every refusal counts in the metrics (:class:`~.remoting_metrics.RemotingMetrics`) and logs one line
(rate-limited by :mod:`namesrv_grpc.log_limits`).
"""

from __future__ import annotations

import asyncio
import logging
import resource
from collections import deque
from dataclasses import dataclass
from typing import Protocol

from namesrv_grpc.remoting.codec import MAX_HEADER_FIELDS
from namesrv_grpc.remoting.codes import DEFAULT_FRAME_MAX_LENGTH
from namesrv_grpc.remoting.end_of_input import EndOfInputWatch
from namesrv_grpc.remoting.remoting_metrics import RemotingMetrics

log = logging.getLogger(__name__)

MIB = 1024 * 1024


def _fd_limit() -> int:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft > 1 << 20:
        soft = 1 << 20
    return int(soft)


def default_max_connections() -> int:
    """``maxConnections`` when not configured: the soft ``RLIMIT_NOFILE`` minus a quarter of it (at
    least 256 descriptors), kept for gRPC connections (:func:`default_grpc_max_connections`), files
    and the metrics port; at least 16."""
    soft = _fd_limit()
    return max(16, soft - max(256, soft // 4))


def default_grpc_max_connections() -> int:
    """``grpcMaxConnections`` when not configured: an eighth of the soft ``RLIMIT_NOFILE``, at least 64
    (the other eighth of the quarter the remoting cap leaves is for files and the metrics port)."""
    return max(64, _fd_limit() // 8)


@dataclass(frozen=True, slots=True)
class RemotingLimits:
    """The bounds of the remoting listener; each field is a configuration key (docs/limits.md)."""

    frame_max_length: int = DEFAULT_FRAME_MAX_LENGTH
    """``remotingFrameMaxLength``: largest frame, bytes, counting its 4 length bytes (RocketMQ
    ``com.rocketmq.remoting.frameMaxLength``)."""
    header_max_fields: int = MAX_HEADER_FIELDS
    """``remotingHeaderMaxFields``: extFields in one header at most."""
    max_connections: int = 0
    """``maxConnections``: remoting connections open at once (0 = :func:`default_max_connections`)."""
    max_frames_per_read: int = 16
    """``remotingMaxFramesPerRead``: requests of one connection handled per turn of the event loop,
    before the other connections get theirs."""
    max_frames_per_turn: int = 64
    """``remotingMaxFramesPerTurn``: requests of all connections together handled per turn of the
    event loop; a connection that finds them spent waits for the next turn."""
    accepts_per_turn: int = 64
    """``remotingAcceptsPerTurn``: connections accepted per turn of the event loop (asyncio accepts
    as many as its ``backlog`` per readiness event); the rest wait in the kernel's queue of
    :data:`~.server.LISTEN_BACKLOG` for the next turns."""
    max_requests_in_flight: int = 16
    """``remotingMaxRequestsInFlight``: requests of one connection being processed off the event loop
    (large registrations, KV and configuration writes); at the bound the connection is not read."""
    write_buffer_high_water_mark: int = 64 * 1024
    """``writeBufferHighWaterMark``: bytes of answers waiting to be sent on one connection above which
    it is not read (RocketMQ ``NettyServerConfig``, Netty's ``autoRead`` off while unwritable)."""
    write_buffer_low_water_mark: int = 32 * 1024
    """``writeBufferLowWaterMark``: reading resumes when the waiting answers fall to this."""
    partial_frames_max_bytes: int = 128 * MIB
    """``remotingPartialFramesMaxBytes``: bytes held in frames not yet decoded, all connections together."""
    frame_read_timeout_millis: int = 30_000
    """``remotingFrameReadTimeoutMillis``: a frame must be complete this long after its first bytes
    arrived (more bytes do not restart it), else the connection is closed."""

    def resolved_max_connections(self) -> int:
        return self.max_connections or default_max_connections()


class BudgetedConnection(Protocol):
    """What the budget needs of a connection."""

    peer: str
    active: bool
    """Whether it has sent a complete frame."""

    def abort(self, reason: str) -> None: ...

    def take_turn(self) -> None:
        """Handle waiting requests (as many as the turn's budget leaves); called when the
        connection's place in :meth:`RemotingBudget.wait_turn`'s queue comes."""
        ...


class SharedUsage(Protocol):
    """What the other serving processes of the NameServer hold (the ledger,
    :class:`~namesrv_grpc.processes.ledger.LedgerRow`): the server-wide bounds count it too."""

    def publish(self, field: str, value: int) -> None:
        """This process now holds ``value`` of ``field`` (``remoting_connections``,
        ``remoting_evictable``: connections that never sent a frame, ``partial_frame_bytes``)."""
        ...

    def others(self, field: str) -> int:
        """What the other serving processes hold of ``field``."""
        ...


class _Alone:
    """No other serving process (a listener of its own, in tests)."""

    def publish(self, field: str, value: int) -> None:
        pass

    def others(self, field: str) -> int:
        return 0


class RemotingBudget:
    """Counts what all connections hold and decides who goes when a bound is reached. The bounds are
    server-wide: what the other serving processes hold (``shared``) counts too, and when a bound is
    passed, this process's connections make room (the process where the bound is passed)."""

    def __init__(self, limits: RemotingLimits, metrics: RemotingMetrics, shared: SharedUsage | None = None) -> None:
        self.limits = limits
        self.metrics = metrics
        self.shared: SharedUsage = shared or _Alone()
        self.max_connections = limits.resolved_max_connections()
        self.connections: set[BudgetedConnection] = set()
        self._never_active: dict[BudgetedConnection, None] = {}
        """Connections without a complete frame yet, oldest first (insertion order)."""
        self._partial: dict[BudgetedConnection, int] = {}
        """connection -> bytes it holds in frames not yet decoded (only non-zero entries)."""
        self.partial_bytes = 0
        self._turn_frames = 0
        """Requests handled in this turn of the event loop (reset at the start of the next one)."""
        self._turn_reset_pending = False
        self._waiting: deque[BudgetedConnection] = deque()
        """Connections with requests left, in the order they are served (see :meth:`wait_turn`)."""
        self._turns_scheduled = False
        self.end_of_input = EndOfInputWatch()
        """The peers' end of input on connections not read now (:mod:`.end_of_input`)."""
        metrics.max_connections.set(self.max_connections)

    # ------------------------------------------------------------------ requests per turn

    def frames_left_this_turn(self) -> int:
        """How many more requests may be handled in this turn of the event loop."""
        return self.limits.max_frames_per_turn - self._turn_frames

    def frame_handled(self, loop: asyncio.AbstractEventLoop) -> None:
        """Count one request against this turn of ``loop`` (``remotingMaxFramesPerTurn``). The count
        is reset by a callback queued at the turn's first request: it runs at the start of the next
        turn, before the connections that wait for it (they queue their turn after it)."""
        self._turn_frames += 1
        if not self._turn_reset_pending:
            self._turn_reset_pending = True
            loop.call_soon(self._new_turn)

    def _new_turn(self) -> None:
        self._turn_frames = 0
        self._turn_reset_pending = False

    def wait_turn(self, connection: BudgetedConnection, loop: asyncio.AbstractEventLoop) -> None:
        """Queue ``connection`` (it has requests left) to be served in a later turn of ``loop``,
        after the connections already waiting."""
        self._waiting.append(connection)
        if not self._turns_scheduled:
            self._turns_scheduled = True
            loop.call_soon(self._serve_waiting, loop)

    def _serve_waiting(self, loop: asyncio.AbstractEventLoop) -> None:
        """One turn: serve the waiting connections in order while the turn's budget lasts; each one
        served once at most (one still with requests queues again at the back); the rest keep their
        places for the next turn."""
        self._turns_scheduled = False
        for _ in range(len(self._waiting)):
            if self.frames_left_this_turn() <= 0:
                break
            self._waiting.popleft().take_turn()
        if self._waiting and not self._turns_scheduled:
            self._turns_scheduled = True
            loop.call_soon(self._serve_waiting, loop)

    # ------------------------------------------------------------------ connections

    def admit(self, connection: BudgetedConnection) -> bool:
        """Count a new connection; False (and nothing counted) when it must be closed at once.

        At ``maxConnections`` (all serving processes together) the oldest connection of this process
        that never sent a frame makes room; when this process has none but another one has, the new
        connection is admitted and that process makes room at its next :meth:`trim` (a tenth of a
        second at most); only when no connection anywhere is idle that way is the new one refused."""
        if len(self.connections) + self.shared.others("remoting_connections") >= self.max_connections:
            oldest = next(iter(self._never_active), None)
            if oldest is not None:
                self._evict(oldest)
            elif self.shared.others("remoting_evictable") <= 0:
                self.metrics.connections_refused.labels("max_connections").inc()
                log.warning(
                    "remoting %s: refused, %d connections are open (maxConnections) and all have sent requests",
                    connection.peer,
                    len(self.connections) + self.shared.others("remoting_connections"),
                )
                return False
        self.connections.add(connection)
        self._never_active[connection] = None
        self.metrics.connection_opened()
        self._publish_connections()
        return True

    def trim(self) -> None:
        """Over ``maxConnections`` (another serving process admitted a connection for which this one
        has room to make): close this process's share of the excess, oldest never-active first."""
        excess = len(self.connections) + self.shared.others("remoting_connections") - self.max_connections
        own = len(self._never_active)
        if excess <= 0 or not own:
            return
        evictable = own + self.shared.others("remoting_evictable")
        for _ in range(min(own, -(-excess * own // evictable))):
            self._evict(next(iter(self._never_active)))

    def _evict(self, oldest: BudgetedConnection) -> None:
        self.metrics.connections_refused.labels("idle_evicted").inc()
        log.warning(
            "remoting %s: closed to make room for a new connection (maxConnections %d reached; it has sent no request)",
            oldest.peer,
            self.max_connections,
        )
        self.forget(oldest)
        oldest.abort("evicted")

    def _publish_connections(self) -> None:
        self.shared.publish("remoting_connections", len(self.connections))
        self.shared.publish("remoting_evictable", len(self._never_active))

    def became_active(self, connection: BudgetedConnection) -> None:
        """The connection completed its first frame: it is no longer the first to go."""
        if self._never_active.pop(connection, 0) is None:
            self._publish_connections()

    def forget(self, connection: BudgetedConnection) -> None:
        """The connection is gone (or about to be): release what it held."""
        if connection in self.connections:
            self.connections.discard(connection)
            self.metrics.connection_closed()
        self._never_active.pop(connection, None)
        self._publish_connections()
        self.hold(connection, 0)

    # ------------------------------------------------------------------ partial frames

    def hold(self, connection: BudgetedConnection, held: int) -> bool:
        """Record that ``connection`` now holds ``held`` bytes of frames not yet decoded; over
        ``remotingPartialFramesMaxBytes`` close the largest holders until the total fits. Returns
        False when ``connection`` itself was closed."""
        before = self._partial.pop(connection, 0)
        if held:
            self._partial[connection] = held
        self.partial_bytes += held - before
        self.shared.publish("partial_frame_bytes", self.partial_bytes)
        survived = True
        others = self.shared.others("partial_frame_bytes") if held > before else 0
        while self.partial_bytes + others > self.limits.partial_frames_max_bytes and self._partial:
            largest = max(self._partial, key=self._partial.__getitem__)
            size = self._partial[largest]
            self.metrics.frames_refused.labels("partial_frames_budget").inc()
            log.warning(
                "remoting %s: closed, it holds %d bytes of unfinished frames and all connections together "
                "hold %d (remotingPartialFramesMaxBytes %d)",
                largest.peer,
                size,
                self.partial_bytes + others,
                self.limits.partial_frames_max_bytes,
            )
            self.forget(largest)
            largest.abort("partial_frames_budget")
            if largest is connection:
                survived = False
        self.metrics.partial_frame_bytes.set(self.partial_bytes)
        return survived
