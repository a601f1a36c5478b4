"""Broker liveness sessions (``OpenBrokerSession``, rule S15): RocketMQ removes a broker the moment its
channel to the NameServer closes (``onChannelDestroy``); a gRPC stream plays that channel here.

One session, as the server sees it::

    broker                                   server
    hello(cluster, name, id, addr, instance) -> bind to the registration  -> accepted(timeout)
                                                 (not registered / other instance) -> register_required
    heartbeat                                -> refresh lastUpdateTimestamp (no answer)
                                                 (no longer bound)        -> register_required
                                              <- master_changed (slaves, when their master changes)
    handover(reason)                         -> unbind: the broker stays until its next registration
                                                 or S13 expiry; the stream ends (OK)
    stream ends (exit, crash, reset, keepalive) -> remove the broker if this session is still bound

Outbound messages go through a bounded queue per session; a master-change notice that does not fit
is dropped (the slave also learns its master from every registration answer, S10).

Limits (each serving process has its own sessions, so each bound is per serving process):

- **Bound sessions** (an authorized hello bound to a registration in the route-table process) are at
  most ``maxBrokerSessions``; past it, a hello for a broker this process's replica holds is refused
  with RESOURCE_EXHAUSTED before it binds (one for a broker it does not hold cannot bind, takes no
  slot, and is answered ``register_required``).
- **Unbound sessions** (no hello yet, or a hello for a broker that is not registered here) cost the
  server a stream and a task but protect nothing, so they are bounded on their own: at most
  ``maxUnboundBrokerSessionsPerPeer`` per client IP address and ``maxUnboundBrokerSessions`` of all
  clients; past either, a new session takes the place of the oldest unbound one (of that address,
  or of all; ended with RESOURCE_EXHAUSTED): a broker connecting while a flood holds them all, even
  from the broker's own address, still gets its session, and binds it with its hello at once. An
  unbound session must bind within ``brokerSessionHelloTimeoutMillis`` of opening (or of being told
  ``register_required``), else it is ended: INVALID_ARGUMENT when no hello came, NOT_FOUND
  (``BROKER_NOT_REGISTERED``) when its hello named no registered broker. (Before, a hello for a
  broker that never registered kept its stream forever: 11,000 of them locked real brokers out.)
- **With an ACL**, a caller whose account may open no session at all (anonymous, or an account with
  neither broker names nor the admin role) is refused with PERMISSION_DENIED when it opens the
  stream, not after the hello timeout (anonymous streams reopened every 10 s held the slots).
- A message that is not an ``OpenBrokerSessionRequest`` ends the stream with INVALID_ARGUMENT; a
  ``handover`` before the session is bound, or with a reason longer than
  :data:`HANDOVER_REASON_MAX_CHARS`, too.

Refusals and ends are counted in ``namesrv_grpc_refusals_total{reason}`` (``unbound_sessions_per_peer``,
``unbound_sessions``, ``unbound_session_ended``: ended for not binding in time).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import grpc
from google.protobuf.message import DecodeError

from namesrv.v1 import name_server_service_pb2 as ns_pb2
from namesrv_grpc.core import commands
from namesrv_grpc.core.commands import RouteTableWrites
from namesrv_grpc.core.errors import (
    AccessDeniedError,
    BrokerNotRegisteredError,
    InvalidFieldError,
    LimitExceededError,
    MalformedRequestError,
    NamesrvError,
)
from namesrv_grpc.core.model import MASTER_ID, RemovedBroker
from namesrv_grpc.core.reader import NameServerReader
from namesrv_grpc.grpc_api.convert import identity_from_proto
from namesrv_grpc.grpc_api.grpc_errors import to_status
from namesrv_grpc.metrics import NamesrvMetrics
from namesrv_grpc.security.audit import AuditLog
from namesrv_grpc.security.authz import ANONYMOUS, Action, Guard, Principal, grpc_peer_address

log = logging.getLogger(__name__)

OUTBOUND_QUEUE_SIZE = 16
"""Messages waiting to be sent on one session before notices are dropped."""

HANDOVER_REASON_MAX_CHARS = 256
"""A ``SessionHandover`` reason is logged; longer ones are refused (INVALID_ARGUMENT)."""

Response = ns_pb2.OpenBrokerSessionResponse


@dataclass(eq=False)
class _Session:
    outbound: asyncio.Queue[Response | None] = field(default_factory=lambda: asyncio.Queue(OUTBOUND_QUEUE_SIZE))
    hello: ns_pb2.SessionHello | None = None
    session_id: int = 0
    principal: Principal = ANONYMOUS
    peer: str = ""
    address: str = ""
    """The client's IP address (``maxUnboundBrokerSessionsPerPeer`` counts per address)."""
    error: NamesrvError | None = None
    """Why the server ended the session (the stream ends with its status)."""
    unbound_timer: asyncio.TimerHandle | None = None


class BrokerSessions:
    """Every open session of one NameServer, and the stream handler that serves them."""

    def __init__(
        self,
        nameserver: NameServerReader,
        writes: RouteTableWrites,
        metrics: NamesrvMetrics,
        guard: Guard | None = None,
    ) -> None:
        """``nameserver``: this serving process's replica (its listeners report master changes and
        removals the route-table process made); ``writes``: sessions are bound, refreshed and ended
        in the route-table process."""
        self._ns = nameserver
        self._writes = writes
        self._ending: set[asyncio.Task[int]] = set()
        self._metrics = metrics
        self._guard = guard or Guard(None, AuditLog())
        self._open: set[_Session] = set()
        self._unbound: dict[_Session, None] = {}
        """Open sessions not bound to a registration, oldest first."""
        self._unbound_by_address: dict[str, dict[_Session, None]] = {}
        """The same, per client IP address, oldest first."""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._slaves: dict[str, set[_Session]] = {}
        self._by_addr: dict[str, set[_Session]] = {}
        nameserver.master_listeners.append(self._master_changed)
        nameserver.removal_listeners.append(self._address_freed)

    @property
    def bound_sessions(self) -> int:
        """Sessions bound to a registration now (what ``maxBrokerSessions`` bounds)."""
        return len(self._open) - len(self._unbound)

    @property
    def unbound_sessions(self) -> int:
        """Sessions open now that are not bound to a registration."""
        return len(self._unbound)

    def _refused(self, reason: str) -> None:
        self._metrics.grpc_refusals.labels(reason).inc()

    def _admit_unbound(self, address: str) -> None:
        """A new session of ``address`` is about to be unbound: past ``maxUnboundBrokerSessionsPerPeer``
        end the oldest unbound session of that address, past ``maxUnboundBrokerSessions`` the oldest
        unbound session of all, to make room. A new session takes the place of an old one rather
        than being refused: a real broker that shares its address with sessions that never bind (a
        flood, a broken client) still gets its session and binds it with its hello at once (issue 39:
        it was refused, "127.0.0.1 has 128 broker sessions open that are bound to no registered
        broker")."""
        config = self._ns.config
        per_peer = config.max_unbound_broker_sessions_per_peer
        held = self._unbound_by_address.get(address, {})
        while len(held) >= per_peer:
            oldest = next(iter(held))
            self._refused("unbound_sessions_per_peer")
            self._end_session(
                oldest,
                LimitExceededError(
                    "maxUnboundBrokerSessionsPerPeer",
                    f"{address} has {len(held)} broker sessions open that are bound to no registered broker, "
                    "the most one address may have (maxUnboundBrokerSessionsPerPeer); this one, its oldest, "
                    "was ended to make room",
                ),
            )
        limit = config.max_unbound_broker_sessions
        while len(self._unbound) >= limit:
            oldest = next(iter(self._unbound))
            self._refused("unbound_sessions")
            log.warning(
                "%d broker sessions bound to no registered broker are open (maxUnboundBrokerSessions): "
                "the oldest, of %s, ended to make room",
                len(self._unbound),
                oldest.peer,
            )
            self._end_session(
                oldest,
                LimitExceededError(
                    "maxUnboundBrokerSessions",
                    f"{len(self._unbound)} broker sessions bound to no registered broker are open, the most "
                    "allowed (maxUnboundBrokerSessions); this one, the oldest, was ended to make room",
                ),
            )

    def _mark_unbound(self, session: _Session, error: NamesrvError) -> None:
        """``session`` is not bound (new, or told ``register_required``): it must bind within
        ``brokerSessionHelloTimeoutMillis``, else it is ended with ``error``."""
        if session not in self._unbound:
            self._unbound[session] = None
            self._unbound_by_address.setdefault(session.address, {})[session] = None
        if session.unbound_timer is not None:
            session.unbound_timer.cancel()
        if self._loop is not None:
            timeout = self._ns.config.broker_session_hello_timeout_millis / 1000
            session.unbound_timer = self._loop.call_later(timeout, self._unbound_too_long, session, error)

    def _mark_bound(self, session: _Session) -> None:
        if session.unbound_timer is not None:
            session.unbound_timer.cancel()
            session.unbound_timer = None
        if self._unbound.pop(session, ()) is None:
            held = self._unbound_by_address[session.address]
            del held[session]
            if not held:
                del self._unbound_by_address[session.address]

    def _unbound_too_long(self, session: _Session, error: NamesrvError) -> None:
        session.unbound_timer = None
        if session in self._unbound and session in self._open:
            self._refused("unbound_session_ended")
            self._end_session(session, error)

    def _end_session(self, session: _Session, error: NamesrvError) -> None:
        """End ``session``'s stream with ``error``'s status (it is forgotten when its stream ends)."""
        self._mark_bound(session)  # no longer counted as unbound
        session.error = error
        while True:
            try:
                session.outbound.put_nowait(None)
                return
            except asyncio.QueueFull:
                session.outbound.get_nowait()  # a client that does not read loses its pending notices

    def _in_loop(self) -> bool:
        try:
            return asyncio.get_running_loop() is self._loop
        except RuntimeError:
            return False

    def close_all(self) -> None:
        """End every session stream (server shutdown): sessions never complete by themselves, so
        draining would otherwise wait out the whole grace period."""
        for session in list(self._open):
            with contextlib.suppress(asyncio.QueueFull):
                session.outbound.put_nowait(None)

    def _master_changed(self, broker_name: str, master_addr: str, ha_server_addr: str) -> None:
        # Registrations may run in a worker thread (large bodies); queues belong to the event loop.
        if self._loop is not None and not self._in_loop():
            self._loop.call_soon_threadsafe(self._master_changed, broker_name, master_addr, ha_server_addr)
            return
        notice = Response(
            master_changed=ns_pb2.SessionMasterChanged(master_addr=master_addr, ha_server_addr=ha_server_addr)
        )
        for session in self._slaves.get(broker_name, ()):
            try:
                session.outbound.put_nowait(notice)
            except asyncio.QueueFull:
                log.warning("session of %s: outbound queue full, master notice dropped", session.hello)

    def _address_freed(self, removed: RemovedBroker) -> None:
        """A broker address was removed: every other run of a broker whose session names that address
        (an agent whose registration another run had taken) is asked to register at once, so a
        second agent that stops leaves no gap in the route (only the removed run's own session, if
        still open, is not asked)."""
        if self._loop is not None and not self._in_loop():
            self._loop.call_soon_threadsafe(self._address_freed, removed)
            return
        reason = f"{removed.broker_addr} was removed ({removed.reason}) by another run of this broker; register again"
        notice = Response(register_required=ns_pb2.SessionRegisterRequired(reason=reason))
        for session in self._by_addr.get(removed.broker_addr, ()):
            if session.hello is None or session.hello.instance_id == removed.instance_id:
                continue
            self._unbind(session, reason)
            try:
                session.outbound.put_nowait(notice)
            except asyncio.QueueFull:
                log.warning("session of %s: outbound queue full, register notice dropped", session.hello.broker_addr)

    async def serve(
        self, requests: AsyncIterator[ns_pb2.OpenBrokerSessionRequest], context: grpc.aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[Response]:
        """The ``OpenBrokerSession`` handler: yields responses until the stream ends, then ends the
        session (S15)."""
        self._loop = asyncio.get_running_loop()
        session = _Session()
        try:  # who opens the stream; each hello is checked against its broker name (ACL)
            session.principal = self._guard.identify_grpc(context)
            if not self._guard.may_open_broker_sessions(session.principal):
                self._guard.check(session.principal, Action.OPEN_BROKER_SESSION, peer=context.peer())
                raise AccessDeniedError(f"{session.principal.name} may not open broker sessions (--acl-file)")
            session.peer = context.peer()
            session.address = grpc_peer_address(session.peer)
            self._admit_unbound(session.address)
        except NamesrvError as refused:
            status = to_status(refused)
            await context.abort(status.code, status.details, status.trailing_metadata)
        self._open.add(session)
        timeout_ms = self._ns.config.broker_session_hello_timeout_millis
        self._mark_unbound(
            session,
            InvalidFieldError(
                "hello", f"no hello within {timeout_ms} ms of opening the session (brokerSessionHelloTimeoutMillis)"
            ),
        )
        reader = asyncio.create_task(self._read(requests, session))
        try:
            while True:
                response = await session.outbound.get()
                if response is None:
                    break
                yield response
            error = session.error
            if error is None and reader.done() and not reader.cancelled():
                exception = reader.exception()
                error = exception if isinstance(exception, NamesrvError) else None
            if error is not None:
                status = to_status(error)
                await context.abort(status.code, status.details, status.trailing_metadata)
        finally:
            reader.cancel()
            self._mark_bound(session)
            self._open.discard(session)
            self._end(session)

    async def _read(self, requests: AsyncIterator[ns_pb2.OpenBrokerSessionRequest], session: _Session) -> None:
        """Handle incoming messages; put None on the outbound queue when the stream ends or fails.
        (The session must bind within ``brokerSessionHelloTimeoutMillis``: :meth:`_mark_unbound`.)"""
        iterator = aiter(requests)
        try:
            async for request in iterator:
                for response in await self._handle(session, request):
                    await session.outbound.put(response)
        except asyncio.CancelledError:
            raise
        except DecodeError:
            await session.outbound.put(None)
            raise MalformedRequestError("a session message is not a valid OpenBrokerSessionRequest") from None
        except BaseException:
            await session.outbound.put(None)
            raise
        await session.outbound.put(None)

    async def _handle(self, session: _Session, request: ns_pb2.OpenBrokerSessionRequest) -> list[Response]:
        kind = request.WhichOneof("kind")
        if kind == "hello":
            return await self._hello(session, request.hello)
        if kind not in ("heartbeat", "handover"):
            raise InvalidFieldError("kind", "a session message must be a hello, a heartbeat or a handover")
        if session.hello is None:
            raise InvalidFieldError("hello", "the first message of a session must be a hello")
        if kind == "handover":
            await self._handover(session, request.handover.reason)
            return []
        if session.session_id and await self._writes.send(
            commands.SessionHeartbeat(session.hello.broker_addr, session.session_id)
        ):
            return []
        reason = "this broker instance is not registered here any more (removed, expired or replaced)"
        self._unbind(session, reason)
        return [Response(register_required=ns_pb2.SessionRegisterRequired(reason=reason))]

    async def _handover(self, session: _Session, reason: str) -> None:
        """The agent stops, its broker does not: unbind the session in the route-table process (the
        broker stays until its next registration or the S13 expiry) and end the stream (OK)."""
        if len(reason) > HANDOVER_REASON_MAX_CHARS:
            raise InvalidFieldError("handover.reason", f"longer than {HANDOVER_REASON_MAX_CHARS} characters")
        if not session.session_id or session.hello is None:
            raise InvalidFieldError("handover", "the session is not bound to a registration: nothing to hand over")
        hello = session.hello
        handed = await self._writes.send(commands.SessionHandedOver(hello.broker_addr, session.session_id))
        session.session_id = 0  # its end removes nothing now
        log.info(
            "session of broker %s (%s id %d) handed over%s: it stays until its next registration or expiry (S13)",
            hello.broker_addr,
            hello.broker_name,
            hello.broker_id,
            f" ({reason!r})" if reason else "",
        )
        if not handed:
            log.info("session of broker %s was no longer bound when handed over", hello.broker_addr)
        await session.outbound.put(None)

    def _unbind(self, session: _Session, reason: str) -> None:
        """The session lost (or never got) its registration: it is unbound until its next hello binds
        it, which must come within ``brokerSessionHelloTimeoutMillis``."""
        session.session_id = 0
        timeout_ms = self._ns.config.broker_session_hello_timeout_millis
        self._mark_unbound(
            session,
            BrokerNotRegisteredError(
                f"{reason}; no hello bound this session to a registration within {timeout_ms} ms "
                "(brokerSessionHelloTimeoutMillis): register, then open a session"
            ),
        )

    async def _hello(self, session: _Session, hello: ns_pb2.SessionHello) -> list[Response]:
        self._guard.check(session.principal, Action.OPEN_BROKER_SESSION, hello.broker_name, peer=session.peer)
        limit = self._ns.config.max_broker_sessions
        if session in self._unbound and self.bound_sessions >= limit and self._registered(hello):
            raise LimitExceededError(
                "maxBrokerSessions",
                f"{self.bound_sessions} broker sessions are bound to registered brokers, the most allowed "
                "(maxBrokerSessions)",
            )
        self._forget(session)
        bound = await self._writes.send(commands.BindSession(identity_from_proto(hello), hello.instance_id))
        session.hello = hello
        self._by_addr.setdefault(hello.broker_addr, set()).add(session)
        if bound is None:
            reason = f"{hello.broker_addr} is not registered here as {hello.broker_name} id {hello.broker_id}"
            self._unbind(session, reason)
            return [Response(register_required=ns_pb2.SessionRegisterRequired(reason=reason))]
        if session not in self._open:  # its stream ended while it was being bound: S15 applies at once
            session.session_id = bound[0]
            self._end(session)
            return []
        self._mark_bound(session)
        session.session_id, timeout = bound
        self._guard.audit_log.ok(
            session.principal.name,
            session.peer,
            "OpenBrokerSession",
            broker_name=hello.broker_name,
            broker_id=hello.broker_id,
            broker_addr=hello.broker_addr,
        )
        responses = [Response(accepted=ns_pb2.SessionAccepted(heartbeat_timeout_millis=timeout))]
        if hello.broker_id != MASTER_ID:
            self._slaves.setdefault(hello.broker_name, set()).add(session)
            master_addr, ha_addr = await self._writes.send(commands.MasterOf(hello.broker_name))
            notice = ns_pb2.SessionMasterChanged(master_addr=master_addr, ha_server_addr=ha_addr)
            responses.append(Response(master_changed=notice))
        return responses

    def _registered(self, hello: ns_pb2.SessionHello) -> bool:
        """Whether this process's replica holds the broker ``hello`` names (a hello that cannot bind
        needs no ``maxBrokerSessions`` slot: it is answered ``register_required``)."""
        return self._ns.registered_as(hello.broker_name, hello.broker_id, hello.broker_addr)

    def _forget(self, session: _Session) -> None:
        if session.hello is not None:
            same_addr = self._by_addr.get(session.hello.broker_addr)
            if same_addr is not None:
                same_addr.discard(session)
                if not same_addr:
                    del self._by_addr[session.hello.broker_addr]
            slaves = self._slaves.get(session.hello.broker_name)
            if slaves is not None:
                slaves.discard(session)
                if not slaves:
                    del self._slaves[session.hello.broker_name]

    def _end(self, session: _Session) -> None:
        """S15: forget the session, and have the route-table process remove its broker if the
        session still holds it."""
        self._forget(session)
        if session.hello is None or not session.session_id:
            return
        ended = commands.SessionsEnded(((session.hello.broker_addr, session.session_id),), "session ended")
        task = asyncio.ensure_future(self._writes.send(ended))
        self._ending.add(task)
        task.add_done_callback(self._ended)

    def _ended(self, task: asyncio.Task[int]) -> None:
        self._ending.discard(task)
        if not task.cancelled() and task.exception() is None and task.result():
            self._metrics.session_losses.inc()
