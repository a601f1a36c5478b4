"""How the agent talks to one NameServer. :class:`NamesrvClient` is the interface the agent uses;
:class:`GrpcNamesrvClient` implements it over gRPC. Tests may pass any object with these methods
(the agent takes a factory), like httpx's mock transport."""

from __future__ import annotations

from typing import Protocol

import grpc

from namesrv.v1 import name_server_service_pb2 as ns_pb2
from namesrv.v1 import name_server_service_pb2_grpc as ns_grpc
from namesrv_grpc.security.client import ClientSecurity

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


class GrpcNamesrvClient:
    """A NameServer reached over a gRPC channel to ``address`` (``host:port``; a DNS name is resolved
    by gRPC, which reconnects by itself after failures): plaintext and unsigned, or with TLS and
    RocketMQ signatures as ``security`` says."""

    def __init__(self, address: str, security: ClientSecurity | None = None) -> None:
        self.address = address
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

    async def register_broker(
        self, request: ns_pb2.RegisterBrokerRequest, timeout: float
    ) -> ns_pb2.RegisterBrokerResponse:
        response: ns_pb2.RegisterBrokerResponse = await self._stub.RegisterBroker(request, timeout=timeout)
        return response

    async def unregister_broker(self, request: ns_pb2.UnregisterBrokerRequest, timeout: float) -> None:
        await self._stub.UnregisterBroker(request, timeout=timeout)

    async def query_data_version(
        self, request: ns_pb2.QueryDataVersionRequest, timeout: float
    ) -> ns_pb2.QueryDataVersionResponse:
        response: ns_pb2.QueryDataVersionResponse = await self._stub.QueryDataVersion(request, timeout=timeout)
        return response

    async def close(self) -> None:
        await self._channel.close()
