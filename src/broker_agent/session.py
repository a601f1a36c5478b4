"""The agent's liveness session with one NameServer (``OpenBrokerSession``, rule S15).

While the session is open the NameServer knows the broker is alive; when the agent dies the stream
breaks and the NameServer removes the broker at once, instead of after 120 s of silence.

:class:`SessionKeeper` keeps one session open for as long as the agent runs:

- sends ``hello``, then a ``heartbeat`` every ``min(10 s, heartbeat timeout / 4)``;
- on ``register_required`` (the NameServer restarted, or expired or lost the broker) registers with
  that NameServer at once and says ``hello`` again, so a restarted NameServer has the full route
  back well within a second of coming back;
- on ``master_changed`` (slaves) hands the new master address to the agent;
- when the stream fails, opens a new one with jittered exponential backoff (``stamina``, 50 ms up to
  500 ms), waiting for the channel to connect (``wait_for_ready``); gRPC reconnects the channel with
  its own jittered backoff, capped low by the channel options in :mod:`broker_agent.client`;
- a NameServer that does not implement sessions (UNIMPLEMENTED) is left alone: periodic
  registration still keeps the broker there;
- :meth:`SessionKeeper.hand_over` ends an open session without removing the broker (the agent
  stops, its broker does not): the NameServer keeps the broker until its next registration or its
  S13 expiry.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
import stamina

from namesrv.v1 import name_server_service_pb2 as ns_pb2
from namesrv.v1 import name_server_service_pb2_grpc as ns_grpc

log = logging.getLogger(__name__)

MAX_HEARTBEAT_INTERVAL_SECONDS = 10.0
MIN_HEARTBEAT_INTERVAL_SECONDS = 0.1

RegisterWith = Callable[[str], Awaitable[bool]]
"""Register with the NameServer at this address now; True on success."""
MasterChanged = Callable[[str, str], None]
"""Called with (master address, master HA address)."""


class SessionEndedError(Exception):
    """The NameServer ended the session stream without an error; open a new one."""


def heartbeat_interval_seconds(heartbeat_timeout_millis: int) -> float:
    """``min(10 s, timeout / 4)``, at least 0.1 s."""
    return max(MIN_HEARTBEAT_INTERVAL_SECONDS, min(MAX_HEARTBEAT_INTERVAL_SECONDS, heartbeat_timeout_millis / 4000))


def _retryable(error: Exception) -> bool:
    if isinstance(error, grpc.aio.AioRpcError):
        return error.code() != grpc.StatusCode.UNIMPLEMENTED
    return isinstance(error, (SessionEndedError, ConnectionError, TimeoutError))


class SessionKeeper:
    """Keeps a session with the NameServer behind ``channel`` open until cancelled."""

    def __init__(
        self,
        address: str,
        channel: grpc.aio.Channel,
        hello: ns_pb2.SessionHello,
        register_with: RegisterWith,
        master_changed: MasterChanged,
        state_changed: Callable[[str, str], None] | None = None,
    ) -> None:
        """``state_changed`` is called with (address, new state) on every change (metrics)."""
        self.address = address
        self._stub = ns_grpc.NameServerServiceStub(channel)
        self._hello = hello
        self._register_with = register_with
        self._master_changed = master_changed
        self._state_changed = state_changed
        self._state = ""
        self.state = "connecting"
        self.accepted_count = 0
        """How many times the NameServer accepted this session (1 + reconnects)."""
        self._write: Callable[[ns_pb2.OpenBrokerSessionRequest], Awaitable[None]] | None = None
        self._handing_over = False
        self._handed_over = asyncio.Event()

    async def hand_over(self, reason: str, timeout: float) -> bool:
        """End the open session with ``handover`` (the agent stops, its broker does not): the
        NameServer unbinds it and keeps the broker until its next registration or S13 expiry, and
        the keeper stops without opening another. True when the NameServer ended the stream within
        ``timeout`` seconds; False when no session was open (nothing to hand over) or it failed."""
        write = self._write
        if self.state != "open" or write is None:
            return False
        self._handing_over = True
        try:
            async with asyncio.timeout(timeout):
                await write(ns_pb2.OpenBrokerSessionRequest(handover=ns_pb2.SessionHandover(reason=reason)))
                await self._handed_over.wait()
        except (grpc.aio.AioRpcError, grpc.aio.UsageError, TimeoutError) as error:
            log.warning("handing the session with %s over failed: %s", self.address, error)
            return False
        return True

    @property
    def state(self) -> str:
        """``connecting``, ``open`` (accepted), ``registering``, ``unsupported`` or ``stopped``."""
        return self._state

    @state.setter
    def state(self, value: str) -> None:
        if value != self._state:
            self._state = value
            if self._state_changed is not None:
                self._state_changed(self.address, value)

    async def run(self) -> None:
        """Keep the session open; returns only when the NameServer does not support sessions."""
        try:
            async for attempt in stamina.retry_context(
                on=_retryable, attempts=None, timeout=None, wait_initial=0.05, wait_max=0.5, wait_jitter=0.1
            ):
                with attempt:
                    await self._session_once()
        except grpc.aio.AioRpcError as error:
            if error.code() != grpc.StatusCode.UNIMPLEMENTED:
                raise
            self.state = "unsupported"
            log.warning("NameServer %s has no broker sessions; relying on periodic registration", self.address)
        finally:
            if self.state != "unsupported":
                self.state = "stopped"

    async def _session_once(self) -> None:
        self.state = "connecting"
        call: Any = self._stub.OpenBrokerSession(wait_for_ready=True)
        write_lock = asyncio.Lock()
        interval = asyncio.Event()
        heartbeat_seconds = [MAX_HEARTBEAT_INTERVAL_SECONDS]

        async def write(message: ns_pb2.OpenBrokerSessionRequest) -> None:
            async with write_lock:
                await call.write(message)

        async def beat() -> None:
            await interval.wait()
            while True:
                await asyncio.sleep(heartbeat_seconds[0])
                await write(ns_pb2.OpenBrokerSessionRequest(heartbeat=ns_pb2.SessionHeartbeat()))

        beater = asyncio.create_task(beat())
        self._write = write
        try:
            await write(ns_pb2.OpenBrokerSessionRequest(hello=self._hello))
            while True:
                response = await call.read()
                if response is grpc.aio.EOF:
                    if self._handing_over:
                        log.info("session with %s handed over: the broker stays registered there", self.address)
                        self._handed_over.set()
                        return
                    raise SessionEndedError(f"NameServer {self.address} ended the session")
                kind = response.WhichOneof("kind")
                if kind == "accepted":
                    heartbeat_seconds[0] = heartbeat_interval_seconds(response.accepted.heartbeat_timeout_millis)
                    self.state = "open"
                    self.accepted_count += 1
                    interval.set()
                    log.info("session with %s open (heartbeat every %.1f s)", self.address, heartbeat_seconds[0])
                elif kind == "register_required":
                    self.state = "registering"
                    log.info(
                        "NameServer %s does not have this broker (%s; it restarted or dropped it): registering "
                        "with it now",
                        self.address,
                        response.register_required.reason,
                    )
                    if not await self._register_with(self.address):
                        raise SessionEndedError(f"registration with {self.address} failed")
                    await write(ns_pb2.OpenBrokerSessionRequest(hello=self._hello))
                elif kind == "master_changed":
                    notice = response.master_changed
                    self._master_changed(notice.master_addr, notice.ha_server_addr)
        finally:
            self._write = None
            beater.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await beater
            call.cancel()
