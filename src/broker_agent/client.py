"""How the agent talks to one NameServer. :class:`NamesrvClient` is the interface the agent uses;
:class:`GrpcNamesrvClient` implements it over gRPC. Tests may pass any object with these methods
(the agent takes a factory), like httpx's mock transport."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable
from typing import Protocol, TypeVar

import grpc

from namesrv.v1 import name_server_service_pb2 as ns_pb2
from namesrv.v1 import name_server_service_pb2_grpc as ns_grpc
from namesrv_grpc.client.security import ClientSecurity
from namesrv_grpc.remoting.codec import FrameDecoder, FrameError, RemotingCommand, encode_command
from namesrv_grpc.remoting.codes import RequestCode

log = logging.getLogger(__name__)

T = TypeVar("T")

PROBE_TIMEOUT_SECONDS = 2.0
"""How long the remoting probe of an unreachable NameServer address waits for an answer."""

DEFAULT_GRPC_PORT = 8081
"""The NameServer's default gRPC port (``grpcServerPort``)."""

MAX_MESSAGE_BYTES = 128 * 1024 * 1024
"""Largest request the agent sends (a 100,000-topic body is about 6 MiB, 1 MiB compressed)."""


class NamesrvClient(Protocol):
    """One NameServer. Every call raises ``grpc.aio.AioRpcError`` (or TimeoutError) on failure;
    ``timeout`` is in seconds."""

    address: str

    async def register_broker(
        self, request: ns_pb2.RegisterBrokerRequest, timeout: float
    ) -> ns_pb2.RegisterBrokerResponse: ...

    async def unregister_broker(self, request: ns_pb2.UnregisterBrokerRequest, timeout: float) -> None: ...

    async def query_data_version(
        self, request: ns_pb2.QueryDataVersionRequest, timeout: float
    ) -> ns_pb2.QueryDataVersionResponse: ...

    async def close(self) -> None: ...


async def speaks_remoting(address: str, timeout: float = PROBE_TIMEOUT_SECONDS) -> bool:
    """True when ``address`` (``host:port``) answers a harmless RocketMQ remoting request
    (GET_NAMESRV_CONFIG, which changes nothing) with a remoting response within ``timeout`` seconds:
    it is a NameServer's remoting port (9876), not its gRPC port. False on any failure."""
    host, _, port = address.rpartition(":")
    writer = None
    try:
        async with asyncio.timeout(timeout):
            reader, writer = await asyncio.open_connection(host.strip("[]"), int(port))
            writer.write(encode_command(RemotingCommand(RequestCode.GET_NAMESRV_CONFIG, opaque=1)))
            await writer.drain()
            decoder = FrameDecoder(1 << 20)
            while True:
                data = await reader.read(65536)
                if not data:
                    return False
                for command in decoder.feed(data):
                    return command.is_response and command.opaque == 1
    except (OSError, ValueError, FrameError, TimeoutError):
        return False
    finally:
        if writer is not None:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()


_REPORTED_REMOTING: set[str] = set()
"""Addresses already reported as remoting ports (the line is logged once per address and process)."""


_SOURCES = {
    "--namesrv-addr": "--namesrv-addr names",
    "grpcNamesrvAddr": "grpcNamesrvAddr in broker.conf names",
    "namesrvAddr": "namesrvAddr in broker.conf names (for the Java broker: keep it)",
    "NAMESRV_ADDR": "the environment's NAMESRV_ADDR names (as every RocketMQ tool reads it)",
}
"""Where an address came from (``BrokerConfig.namesrv_addr_source``) -> how the hint says it."""


def remoting_port_message(address: str, source: str = "namesrvAddr") -> str:
    """The one line that says ``address`` is a remoting port, where that address came from
    (``source``: a key of ``_SOURCES``) and what to give the agent instead."""
    host = address.rpartition(":")[0] or address
    named = _SOURCES.get(source, f"{source} names")
    return (
        f"NameServer {address} speaks RocketMQ remoting, not gRPC: the agent registers over gRPC, and {named} "
        f"the remoting port. Give the agent the NameServer's gRPC port (grpcServerPort, default "
        f"{DEFAULT_GRPC_PORT}): --namesrv-addr {host}:{DEFAULT_GRPC_PORT}, or grpcNamesrvAddr={host}:"
        f"{DEFAULT_GRPC_PORT} in broker.conf (namesrvAddr and NAMESRV_ADDR keep naming the remoting ports "
        "for the Java broker and RocketMQ's tools)"
    )


class GrpcNamesrvClient:
    """A NameServer reached over a gRPC channel to ``address`` (``host:port``; a DNS name is resolved
    by gRPC, which reconnects by itself after failures): plaintext and unsigned, or with TLS and
    RocketMQ signatures as ``security`` says."""

    def __init__(self, address: str, security: ClientSecurity | None = None, source: str = "namesrvAddr") -> None:
        """``source``: where the address came from (``BrokerConfig.namesrv_addr_source``)."""
        self.address = address
        self._source = source
        self._channel = (security or ClientSecurity()).aio_channel(
            address,
            [
                ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
                ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                ("grpc.enable_retries", 0),
                # Reconnect fast after a NameServer restart (gRPC jitters these itself).
                ("grpc.initial_reconnect_backoff_ms", 100),
                ("grpc.min_reconnect_backoff_ms", 5_000),  # also the timeout of one connection attempt
                ("grpc.max_reconnect_backoff_ms", 500),
                # Notice a dead NameServer on an idle session.
                ("grpc.keepalive_time_ms", 10_000),
                ("grpc.keepalive_timeout_ms", 5_000),
                ("grpc.keepalive_permit_without_calls", 1),
            ],
        )
        self._stub = ns_grpc.NameServerServiceStub(self._channel)

    @property
    def channel(self) -> grpc.aio.Channel:
        """The channel, shared with the broker's liveness session."""
        return self._channel

    async def _call(self, call: Awaitable[T]) -> T:
        """Await a call; when it fails UNAVAILABLE, check once whether the address is a remoting
        port (a ``namesrvAddr`` copied from broker.conf) and say so in one log line."""
        try:
            return await call
        except grpc.aio.AioRpcError as error:
            if (
                error.code() == grpc.StatusCode.UNAVAILABLE
                and self.address not in _REPORTED_REMOTING
                and await speaks_remoting(self.address)
            ):
                _REPORTED_REMOTING.add(self.address)
                log.error("%s", remoting_port_message(self.address, self._source))
            raise

    async def register_broker(
        self, request: ns_pb2.RegisterBrokerRequest, timeout: float
    ) -> ns_pb2.RegisterBrokerResponse:
        response: ns_pb2.RegisterBrokerResponse = await self._call(self._stub.RegisterBroker(request, timeout=timeout))
        return response

    async def unregister_broker(self, request: ns_pb2.UnregisterBrokerRequest, timeout: float) -> None:
        await self._call(self._stub.UnregisterBroker(request, timeout=timeout))

    async def query_data_version(
        self, request: ns_pb2.QueryDataVersionRequest, timeout: float
    ) -> ns_pb2.QueryDataVersionResponse:
        response: ns_pb2.QueryDataVersionResponse = await self._call(
            self._stub.QueryDataVersion(request, timeout=timeout)
        )
        return response

    async def close(self) -> None:
        await self._channel.close()
