"""Broker liveness sessions (``OpenBrokerSession``, rule S15): RocketMQ removes a broker the moment its
channel to the NameServer closes (``onChannelDestroy``); a gRPC stream plays that channel here.

One session, as the server sees it::

    broker                                   server
    hello(cluster, name, id, addr, instance) -> bind to the registration  -> accepted(timeout)
                                                 (not registered / other instance) -> register_required
    heartbeat                                -> refresh lastUpdateTimestamp (no answer)
                                                 (no longer bound)        -> register_required
                                              <- master_changed (slaves, when their master changes)
    stream ends (exit, crash, reset, keepalive) -> remove the broker if this session is still bound

Outbound messages go through a bounded queue per session; a master-change notice that does not fit
is dropped (the slave also learns its master from every registration answer, S10).

Limits: the hello must arrive within ``brokerSessionHelloTimeoutMillis`` (else the stream ends
with INVALID_ARGUMENT), at most ``maxBrokerSessions`` streams are open at once (more are refused
with RESOURCE_EXHAUSTED), and a message that is not an ``OpenBrokerSessionRequest`` ends the stream
with INVALID_ARGUMENT.
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
from namesrv_grpc.core.errors import InvalidFieldError, LimitExceededError, MalformedRequestError, NamesrvError
from namesrv_grpc.core.model import MASTER_ID, RemovedBroker
from namesrv_grpc.core.processor import NameServer
from namesrv_grpc.core.writes import RouteTableWrites
from namesrv_grpc.grpc_api.grpc_errors import to_status
from namesrv_grpc.metrics import NamesrvMetrics
from namesrv_grpc.security.audit import AuditLog
from namesrv_grpc.security.authz import ANONYMOUS, Action, Guard, Principal

log = logging.getLogger(__name__)

OUTBOUND_QUEUE_SIZE = 16
"""Messages waiting to be sent on one session before notices are dropped."""

Response = ns_pb2.OpenBrokerSessionResponse


@dataclass(eq=False)
class _Session:
    outbound: asyncio.Queue[Response | None] = field(default_factory=lambda: asyncio.Queue(OUTBOUND_QUEUE_SIZE))
    hello: ns_pb2.SessionHello | None = None
    session_id: int = 0
    principal: Principal = ANONYMOUS
    peer: str = ""


class BrokerSessions:
    """Every open session of one NameServer, and the stream handler that serves them."""

    def __init__(
        self, nameserver: NameServer, writes: RouteTableWrites, metrics: NamesrvMetrics, guard: Guard | None = None
    ) -> None:
        """``nameserver``: this serving process's replica (its listeners report master changes and
        removals the route-table process made); ``writes``: sessions are bound, refreshed and ended
        in the route-table process."""
        self._ns = nameserver
        self._writes = writes
        self._ending: set[asyncio.Task[bool]] = set()
        self._metrics = metrics
        self._guard = guard or Guard(None, AuditLog())
        self._open: set[_Session] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._slaves: dict[str, set[_Session]] = {}
        self._by_addr: dict[str, set[_Session]] = {}
        nameserver.master_listeners.append(self._master_changed)
        nameserver.removal_listeners.append(self._address_freed)

    @property
    def open_sessions(self) -> int:
        """Streams open now (bound or not)."""
        return len(self._open)

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
            session.session_id = 0
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
        limit = self._ns.config.max_broker_sessions
        if len(self._open) >= limit:
            status = to_status(
                LimitExceededError(
                    "maxBrokerSessions",
                    f"{len(self._open)} broker sessions are open, the most allowed (maxBrokerSessions)",
                )
            )
            await context.abort(status.code, status.details, status.trailing_metadata)
        session = _Session()
        try:  # who opens the stream; each hello is checked against its broker name (ACL)
            session.principal = self._guard.identify_grpc(context)
        except NamesrvError as refused:
            status = to_status(refused)
            await context.abort(status.code, status.details, status.trailing_metadata)
        session.peer = context.peer()
        self._open.add(session)
        reader = asyncio.create_task(self._read(requests, session))
        try:
            while True:
                response = await session.outbound.get()
                if response is None:
                    break
                yield response
            error = reader.exception() if reader.done() else None
            if isinstance(error, NamesrvError):
                status = to_status(error)
                await context.abort(status.code, status.details, status.trailing_metadata)
        finally:
            reader.cancel()
            self._open.discard(session)
            self._end(session)

    async def _read(self, requests: AsyncIterator[ns_pb2.OpenBrokerSessionRequest], session: _Session) -> None:
        """Handle incoming messages; put None on the outbound queue when the stream ends or fails.
        The first message must come within ``brokerSessionHelloTimeoutMillis``."""
        iterator = aiter(requests)
        timeout_ms = self._ns.config.broker_session_hello_timeout_millis
        try:
            try:
                first = await asyncio.wait_for(anext(iterator), timeout_ms / 1000)
            except StopAsyncIteration:
                await session.outbound.put(None)
                return
            except TimeoutError:
                raise InvalidFieldError(
                    "hello", f"no hello within {timeout_ms} ms of opening the session (brokerSessionHelloTimeoutMillis)"
                ) from None
            for response in await self._handle(session, first):
                await session.outbound.put(response)
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
        if kind != "heartbeat":
            raise InvalidFieldError("kind", "a session message must be a hello or a heartbeat")
        if session.hello is None:
            raise InvalidFieldError("hello", "the first message of a session must be a hello")
        if session.session_id and await self._writes.session_heartbeat(session.hello.broker_addr, session.session_id):
            return []
        session.session_id = 0
        reason = "this broker instance is not registered here any more (removed, expired or replaced)"
        return [Response(register_required=ns_pb2.SessionRegisterRequired(reason=reason))]

    async def _hello(self, session: _Session, hello: ns_pb2.SessionHello) -> list[Response]:
        self._guard.check(session.principal, Action.OPEN_BROKER_SESSION, hello.broker_name, peer=session.peer)
        self._forget(session)
        bound = await self._writes.bind_session(
            hello.cluster_name, hello.broker_name, hello.broker_id, hello.broker_addr, hello.instance_id
        )
        session.hello = hello
        self._by_addr.setdefault(hello.broker_addr, set()).add(session)
        if bound is None:
            session.session_id = 0
            reason = f"{hello.broker_addr} is not registered here as {hello.broker_name} id {hello.broker_id}"
            return [Response(register_required=ns_pb2.SessionRegisterRequired(reason=reason))]
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
            master_addr, ha_addr = await self._writes.master_of(hello.broker_name)
            notice = ns_pb2.SessionMasterChanged(master_addr=master_addr, ha_server_addr=ha_addr)
            responses.append(Response(master_changed=notice))
        return responses

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
        task = asyncio.ensure_future(
            self._writes.session_ended(session.hello.broker_addr, session.session_id, "session ended")
        )
        self._ending.add(task)
        task.add_done_callback(self._ended)

    def _ended(self, task: asyncio.Task[bool]) -> None:
        self._ending.discard(task)
        if not task.cancelled() and task.exception() is None and task.result():
            self._metrics.session_losses.inc()
