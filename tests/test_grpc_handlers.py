"""The gRPC handler wrappers (``grpc_api/handlers.py``) without a server: what they promise about
the wrapped behaviours' lifetimes, and which methods get an intake of their own."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from namesrv_grpc.grpc_api.grpc_metrics import MethodMetrics
from namesrv_grpc.grpc_api.handlers import wrap_stream_response


class _Context:
    def code(self) -> None:
        return None


def test_closing_a_stream_paused_at_a_yield_closes_the_wrapped_generator_at_once() -> None:
    """A client that cancels right after a response: gRPC closes the wrapper while both generators
    are paused at a yield. The wrapped one's ``finally`` (a session's S15 removal) must run before
    the close returns, not when the garbage collector gets to it."""
    cleaned: list[str] = []

    async def behavior(request: Any, context: Any) -> AsyncIterator[str]:
        try:
            yield "accepted"
            await asyncio.sleep(3600)
            yield "never"
        finally:
            cleaned.append("session ended")

    async def scenario() -> None:
        wrapped = wrap_stream_response(behavior, MethodMetrics(("server_stream", "test.Service", "Method"), [0.1]))
        responses = wrapped(None, _Context())
        assert await responses.__anext__() == "accepted"
        await responses.aclose()
        assert cleaned == ["session ended"]

    asyncio.run(scenario())


class _RecordingServer:
    """What :func:`add_services` hands a ``grpc.aio.Server``: registered methods and generic handlers."""

    def __init__(self) -> None:
        self.registered: dict[str, set[str]] = {}
        self.generic: list[Any] = []

    def add_registered_method_handlers(self, service: str, handlers: dict[str, Any]) -> None:
        self.registered.setdefault(service, set()).update(handlers)

    def add_generic_rpc_handlers(self, handlers: tuple[Any, ...]) -> None:
        self.generic.extend(handlers)


def test_lookups_registrations_and_health_checks_have_their_own_intake_and_the_rest_share_one() -> None:
    """grpcio takes generic-handler calls in one at a time (one pending ``request_call`` for all of
    them): the lookups, broker registrations/heartbeats and health checks are registered methods so
    a burst of another method's calls does not queue them; every other method still has a handler."""
    from grpc_health.v1 import health, health_pb2

    from namesrv.v1 import admin_service_pb2, kv_config_service_pb2, name_server_service_pb2
    from namesrv_grpc.grpc_api.grpc_metrics import GrpcServerMetrics
    from namesrv_grpc.grpc_api.handlers import OWN_INTAKE_METHODS, add_services

    descriptors = [
        name_server_service_pb2.DESCRIPTOR.services_by_name["NameServerService"],
        kv_config_service_pb2.DESCRIPTOR.services_by_name["KVConfigService"],
        admin_service_pb2.DESCRIPTOR.services_by_name["AdminService"],
        health_pb2.DESCRIPTOR.services_by_name["Health"],
    ]

    class Servicer:
        def __getattr__(self, name: str) -> Any:
            return lambda request, context: None

    server = _RecordingServer()
    services: list[tuple[Any, object]] = [(d, Servicer()) for d in descriptors[:3]]
    services.append((descriptors[3], health.HealthServicer()))
    add_services(server, GrpcServerMetrics(None), services)  # type: ignore[arg-type]

    registered = {f"/{service}/{method}" for service, methods in server.registered.items() for method in methods}
    assert registered == OWN_INTAKE_METHODS
    every = {f"/{d.full_name}/{m.name}" for d in descriptors for m in d.methods}
    assert every >= OWN_INTAKE_METHODS, "a name in OWN_INTAKE_METHODS that no service has"
    for name in sorted(every - OWN_INTAKE_METHODS):
        details = type("Details", (), {"method": name, "invocation_metadata": ()})()
        assert [h for h in server.generic if h.service(details) is not None], f"{name} has no handler"
