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
(rate-limited by :mod:`namesrv_grpc.runtime.log_limits`).
"""

from __future__ import annotations

import asyncio
import logging
import resource
from collections import deque
from dataclasses import dataclass
from typing import Protocol

from namesrv_grpc.config import NamesrvConfig
from namesrv_grpc.remoting.end_of_input import EndOfInputWatch
from namesrv_grpc.remoting.remoting_metrics import RemotingMetrics
from namesrv_grpc.runtime.policy import share

log = logging.getLogger(__name__)


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
    """The bounds of one serving process's remoting listener; each field is a configuration key
    (docs/limits.md), whose default is declared once, on :class:`~namesrv_grpc.config.NamesrvConfig`
    (:meth:`from_config`)."""

    frame_max_length: int
    """``remotingFrameMaxLength``: largest frame, bytes, counting its 4 length bytes (RocketMQ
    ``com.rocketmq.remoting.frameMaxLength``)."""
    header_max_fields: int
    """``remotingHeaderMaxFields``: extFields in one header at most."""
    header_max_length: int
    """``remotingHeaderMaxLength``: bytes of one header at most (refused when its length arrives)."""
    max_connections: int
    """``maxConnections``: remoting connections open at once (0 = :func:`default_max_connections`)."""
    max_connections_per_ip: int
    """``remotingMaxConnectionsPerIp``, this serving process's share: connections from one IP address
    open at once (0 = no bound of its own)."""
    max_frames_per_read: int
    """``remotingMaxFramesPerRead``: requests of one connection handled per turn of the event loop,
    before the other connections get theirs."""
    max_frames_per_turn: int
    """``remotingMaxFramesPerTurn``: requests of all connections together handled per turn of the
    event loop; a connection that finds them spent waits for the next turn."""
    accepts_per_turn: int
    """``remotingAcceptsPerTurn``: connections accepted per turn of the event loop (asyncio accepts
    as many as its ``backlog`` per readiness event); the rest wait in the kernel's queue of
    :data:`~.server.LISTEN_BACKLOG` for the next turns. Few, so that a flood of new connections
    lengthens no turn much: a gRPC call takes several turns (docs/limits.md)."""
    max_requests_in_flight: int
    """``remotingMaxRequestsInFlight``: requests of one connection being processed off the event loop
    (large registrations, KV and configuration writes); at the bound the connection is not read."""
    write_buffer_high_water_mark: int
    """``writeBufferHighWaterMark``: bytes of answers waiting to be sent on one connection above which
    it is not read (RocketMQ ``NettyServerConfig``, Netty's ``autoRead`` off while unwritable)."""
    write_buffer_low_water_mark: int
    """``writeBufferLowWaterMark`` (at most the high-water mark): reading resumes when the waiting
    answers fall to this."""
    partial_frames_max_bytes: int
    """``remotingPartialFramesMaxBytes``: bytes held in frames not yet decoded, all connections together."""
    frame_read_timeout_millis: int
    """``remotingFrameReadTimeoutMillis``: a frame must be complete this long after its first bytes
    arrived (more bytes do not restart it), else the connection is closed."""

    @classmethod
    def from_config(cls, config: NamesrvConfig | None = None, workers: int = 1) -> RemotingLimits:
        """The bounds ``config`` (default: every key's default) sets for one of ``workers`` serving
        processes: the per-IP connection cap is shared among them (:func:`~namesrv_grpc.runtime.policy.share`),
        the other bounds are each process's own."""
        config = config or NamesrvConfig()
        return cls(
            frame_max_length=config.remoting_frame_max_length,
            header_max_fields=config.remoting_header_max_fields,
            header_max_length=config.remoting_header_max_length,
            max_connections=config.max_connections,
            max_connections_per_ip=share(config.remoting_max_connections_per_ip, workers),
            max_frames_per_read=config.remoting_max_frames_per_read,
            max_frames_per_turn=config.remoting_max_frames_per_turn,
            accepts_per_turn=config.remoting_accepts_per_turn,
            max_requests_in_flight=config.remoting_max_requests_in_flight,
            write_buffer_high_water_mark=config.write_buffer_high_water_mark,
            write_buffer_low_water_mark=min(config.write_buffer_low_water_mark, config.write_buffer_high_water_mark),
            partial_frames_max_bytes=config.remoting_partial_frames_max_bytes,
            frame_read_timeout_millis=config.remoting_frame_read_timeout_millis,
        )

    def resolved_max_connections(self) -> int:
        return self.max_connections or default_max_connections()


class BudgetedConnection(Protocol):
    """What the budget needs of a connection."""

    peer: str
    peer_ip: str
    active: bool
    """Whether it has sent a complete frame."""
    registered: dict[str, int]
    """Brokers registered over it (S15): such a connection is never evicted to make room."""

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
        ``remoting_evictable``: connections that may be closed to make room,
        ``remoting_never_active``: connections that have sent no request yet, ``partial_frame_bytes``)."""
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
        """Connections that have not sent a request yet, oldest first: the first to make room."""
        self._activity: dict[BudgetedConnection, None] = {}
        """The others, least recently active first: each moved to the end when it sends requests
        (:meth:`touched`; TCP keepalives are not requests)."""
        self._by_ip: dict[str, _AddressConnections] = {}
        """Every connection per peer IP address (``remotingMaxConnectionsPerIp``), ordered likewise."""
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

        At ``maxConnections`` (all serving processes together) a connection of this process makes
        room: the oldest that has not sent a request yet, else the least recently active (by its last
        request; one over which a broker registered is never chosen: closing it would remove the
        broker, S15). An active connection is chosen only while no serving process holds one that
        has sent no request. When this process has none to close but another one has, the new
        connection is admitted and that process makes room at its next :meth:`trim` (a tenth of a
        second at most). At ``remotingMaxConnectionsPerIp`` the least
        recently active connection from the same address makes room. Only when no connection may be
        closed is the new one refused: a new client always gets in while idle ones can make room."""
        per_ip = self.limits.max_connections_per_ip
        if per_ip:
            same_ip = self._by_ip.get(connection.peer_ip)
            if same_ip is not None and len(same_ip) >= per_ip:
                victim = same_ip.victim()
                if victim is None:
                    return self._refuse(connection, "max_connections_per_ip", "remotingMaxConnectionsPerIp")
                self._evict(victim, "per_ip_evicted", "remotingMaxConnectionsPerIp")
        if len(self.connections) + self.shared.others("remoting_connections") >= self.max_connections:
            victim = self._victim(self.shared.others("remoting_never_active") > 0)
            if victim is not None:
                self._evict(victim, "idle_evicted", "maxConnections")
            elif self.shared.others("remoting_evictable") <= 0:
                return self._refuse(connection, "max_connections", "maxConnections")
        self.connections.add(connection)
        self._never_active[connection] = None
        self._by_ip.setdefault(connection.peer_ip, _AddressConnections()).never_active[connection] = None
        self.metrics.connection_opened()
        self._publish_connections()
        return True

    def _refuse(self, connection: BudgetedConnection, reason: str, key: str) -> bool:
        self.metrics.connections_refused.labels(reason).inc()
        log.warning(
            "remoting %s: refused, the connections open (%s) are all brokers' (closing one would remove its broker)",
            connection.peer,
            key,
        )
        return False

    def touched(self, connection: BudgetedConnection) -> None:
        """``connection`` sent requests now: it becomes the most recently active."""
        activity = self._activity
        if activity.pop(connection, 0) is None:
            activity[connection] = None
        elif self._never_active.pop(connection, 0) is None:
            activity[connection] = None
            self.shared.publish("remoting_never_active", len(self._never_active))
        else:
            return
        # Its address's order too, at every request (not only the first): the per-address bound
        # closes the least recently active, not the one that first asked longest ago.
        same_ip = self._by_ip.get(connection.peer_ip)
        if same_ip is not None:
            same_ip.touched(connection)

    def trim(self) -> None:
        """Over ``maxConnections`` (another serving process admitted a connection for which this one
        has room to make): close this process's share of the excess. While any serving process holds
        connections that have sent no request, only those go (each process closes its share of them,
        oldest first); otherwise the least recently active ones, shared by the number each holds."""
        excess = len(self.connections) + self.shared.others("remoting_connections") - self.max_connections
        if excess <= 0 or not self.connections:
            return
        own_never = len(self._never_active)
        all_never = own_never + self.shared.others("remoting_never_active")
        if all_never > 0:
            own, pool = own_never, all_never
        else:
            own, pool = len(self.connections), len(self.connections) + self.shared.others("remoting_evictable")
        for _ in range(min(own, -(-excess * own // pool))):
            victim = self._victim(all_never > 0)
            if victim is None:
                return
            self._evict(victim, "idle_evicted", "maxConnections")

    def _victim(self, never_active_only: bool = False) -> BudgetedConnection | None:
        """The connection to close to make room: the oldest never-active one, else (unless
        ``never_active_only``: another serving process has never-active ones to close) the least
        recently active one without a registered broker; None when there is none."""
        victim = _least_active(self._never_active)
        if victim is None and not never_active_only:
            victim = _least_active(self._activity)
        return victim

    def _evict(self, victim: BudgetedConnection, reason: str, key: str) -> None:
        self.metrics.connections_refused.labels(reason).inc()
        log.warning(
            "remoting %s: closed to make room for a new connection (%s reached; it was the least recently active, %s)",
            victim.peer,
            key,
            "it has sent requests" if victim.active else "it has sent no request",
        )
        self.forget(victim)
        victim.abort("evicted")

    def _publish_connections(self) -> None:
        self.shared.publish("remoting_connections", len(self.connections))
        # Connections that may make room: all but brokers' (brokers are few; counted as evictable).
        self.shared.publish("remoting_evictable", len(self.connections))
        self.shared.publish("remoting_never_active", len(self._never_active))

    def forget(self, connection: BudgetedConnection) -> None:
        """The connection is gone (or about to be): release what it held."""
        if connection in self.connections:
            self.connections.discard(connection)
            self.metrics.connection_closed()
        self._activity.pop(connection, None)
        self._never_active.pop(connection, None)
        same_ip = self._by_ip.get(connection.peer_ip)
        if same_ip is not None:
            same_ip.forget(connection)
            if not same_ip:
                del self._by_ip[connection.peer_ip]
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


class _AddressConnections:
    """The connections from one peer IP address, in the order :meth:`RemotingBudget.admit` closes
    them at ``remotingMaxConnectionsPerIp``: never-active ones oldest first, then the least recently
    active. Two ordered dicts, so that choosing one costs O(1) however many the address holds (a
    flood from one address must not make each new connection scan all of its others)."""

    __slots__ = ("active", "never_active")

    def __init__(self) -> None:
        self.never_active: dict[BudgetedConnection, None] = {}
        self.active: dict[BudgetedConnection, None] = {}

    def __len__(self) -> int:
        return len(self.never_active) + len(self.active)

    def victim(self) -> BudgetedConnection | None:
        return _least_active(self.never_active) or _least_active(self.active)

    def touched(self, connection: BudgetedConnection) -> None:
        if self.never_active.pop(connection, 0) is None or self.active.pop(connection, 0) is None:
            self.active[connection] = None

    def forget(self, connection: BudgetedConnection) -> None:
        self.never_active.pop(connection, None)
        self.active.pop(connection, None)


def _least_active(pool: dict[BudgetedConnection, None]) -> BudgetedConnection | None:
    """The least recently active connection of ``pool`` over which no broker registered, or None."""
    for connection in pool:
        if not connection.registered:
            return connection
    return None
