"""gRPC server metrics by method and status code, named as go-grpc-prometheus names them.

* ``grpc_server_started_total{grpc_type,grpc_service,grpc_method}``: RPCs started;
* ``grpc_server_handled_total{grpc_type,grpc_service,grpc_method,grpc_code}``: RPCs completed, by
  their final status code (``OK``, ``NOT_FOUND``, ... as Python's ``grpc.StatusCode`` names them);
* ``grpc_server_handling_seconds{grpc_type,grpc_service,grpc_method}``: histogram of the time from
  the start of the handler to its end.

``grpc_type`` is ``unary``, ``client_stream``, ``server_stream`` or ``bidi_stream``. As in
go-grpc-prometheus, :meth:`GrpcServerMetrics.preregister` creates every series of every method of
the given services at 0 (every status code for ``handled_total``), so that ``rate()`` and alerts
see a series from the first scrape.

:class:`GrpcMetricsInterceptor` must be the *first* interceptor of the server: interceptors wrap
each other in list order, so the first one sees the final status, including the one that
:class:`~namesrv_grpc.grpc_api.grpc_errors.ErrorInterceptor` sets with ``context.abort``.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any

import grpc
from google.protobuf.descriptor import ServiceDescriptor
from prometheus_client import CollectorRegistry, Counter, Histogram

HANDLING_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
"""Buckets of ``grpc_server_handling_seconds``: most calls of a NameServer take well under 1 ms."""

Context = grpc.aio.ServicerContext[Any, Any]


def rpc_type(client_streaming: bool, server_streaming: bool) -> str:
    """The ``grpc_type`` label of a method."""
    if client_streaming and server_streaming:
        return "bidi_stream"
    if client_streaming:
        return "client_stream"
    if server_streaming:
        return "server_stream"
    return "unary"


def split_method(full_method: str) -> tuple[str, str]:
    """``/pkg.Service/Method`` -> (``pkg.Service``, ``Method``)."""
    service, _, method = full_method.lstrip("/").rpartition("/")
    return service or "unknown", method or "unknown"


class GrpcServerMetrics:
    """The three metric families in ``registry``."""

    def __init__(self, registry: CollectorRegistry, buckets: Iterable[float] = HANDLING_BUCKETS) -> None:
        labels = ["grpc_type", "grpc_service", "grpc_method"]
        self.started = Counter(
            "grpc_server_started", "Total number of RPCs started on the server.", labels, registry=registry
        )
        self.handled = Counter(
            "grpc_server_handled",
            "Total number of RPCs completed on the server, regardless of success or failure.",
            [*labels, "grpc_code"],
            registry=registry,
        )
        self.handling_seconds = Histogram(
            "grpc_server_handling_seconds",
            "Histogram of response latency (seconds) of gRPC that had been application-level handled by the server.",
            labels,
            buckets=tuple(buckets),
            registry=registry,
        )

    def preregister(self, services: Iterable[ServiceDescriptor]) -> None:
        """Create every series of every method of ``services`` at 0 (go-grpc-prometheus'
        ``InitializeMetrics``): started, handling time, and handled for every status code."""
        for service in services:
            for method in service.methods:
                labels = (rpc_type(method.client_streaming, method.server_streaming), service.full_name, method.name)
                self.started.labels(*labels)
                self.handling_seconds.labels(*labels)
                for code in grpc.StatusCode:
                    self.handled.labels(*labels, code.name)

    def start(self, labels: tuple[str, str, str]) -> float:
        """Count a started RPC; return its start time for :meth:`finish`."""
        self.started.labels(*labels).inc()
        return time.perf_counter()

    def finish(self, labels: tuple[str, str, str], started: float, code: grpc.StatusCode) -> None:
        """Count a completed RPC with its final status code and observe its handling time."""
        self.handling_seconds.labels(*labels).observe(time.perf_counter() - started)
        self.handled.labels(*labels, code.name).inc()


def final_code(context: Context, error: BaseException | None) -> grpc.StatusCode:
    """The status code an RPC ends with: the one set on ``context`` (``set_code`` or ``abort``),
    else CANCELLED when the handler was cancelled, UNKNOWN when it raised, OK when it returned."""
    code = context.code()
    if isinstance(code, grpc.StatusCode):
        return code
    if isinstance(code, int):  # some grpc versions keep the raw integer
        for candidate in grpc.StatusCode:
            if candidate.value[0] == code:
                return candidate
    if error is None:
        return grpc.StatusCode.OK
    if isinstance(error, (asyncio.CancelledError, GeneratorExit)):  # the client went away
        return grpc.StatusCode.CANCELLED
    return grpc.StatusCode.UNKNOWN


class GrpcMetricsInterceptor(grpc.aio.ServerInterceptor):
    """Counts and times every RPC of a ``grpc.aio`` server (all four kinds). Put it first."""

    def __init__(self, metrics: GrpcServerMetrics) -> None:
        self.metrics = metrics

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any] | None]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        handler = await continuation(handler_call_details)
        if handler is None:  # unknown method: gRPC answers UNIMPLEMENTED itself
            return handler
        service, method = split_method(handler_call_details.method)
        labels = (rpc_type(handler.request_streaming, handler.response_streaming), service, method)
        kwargs: dict[str, Any] = {
            "request_deserializer": handler.request_deserializer,
            "response_serializer": handler.response_serializer,
        }
        if handler.unary_unary is not None:
            return grpc.unary_unary_rpc_method_handler(self._wrap(handler.unary_unary, labels, False), **kwargs)
        if handler.unary_stream is not None:
            return grpc.unary_stream_rpc_method_handler(self._wrap(handler.unary_stream, labels, True), **kwargs)
        if handler.stream_unary is not None:
            return grpc.stream_unary_rpc_method_handler(self._wrap(handler.stream_unary, labels, False), **kwargs)
        if handler.stream_stream is not None:
            return grpc.stream_stream_rpc_method_handler(self._wrap(handler.stream_stream, labels, True), **kwargs)
        return handler

    def _wrap(self, behavior: Callable[..., Any], labels: tuple[str, str, str], streaming: bool) -> Any:
        """Wrap a handler behavior as grpc.aio calls it: a coroutine function (a response returned,
        or responses written with ``context.write``), an async generator function, or a plain
        function returning a response, an awaitable, or (``streaming``) an (async) iterable."""
        metrics = self.metrics
        if streaming and not inspect.iscoroutinefunction(behavior):

            async def wrapped_generator(request: Any, context: Context) -> AsyncIterator[Any]:
                started = metrics.start(labels)
                error: BaseException | None = None
                try:
                    responses = behavior(request, context)
                    if inspect.isawaitable(responses):
                        responses = await responses
                    if hasattr(responses, "__aiter__"):
                        async for response in responses:
                            yield response
                    else:
                        for response in responses:
                            yield response
                except BaseException as exc:
                    error = exc
                    raise
                finally:
                    metrics.finish(labels, started, final_code(context, error))

            return wrapped_generator

        async def wrapped(request: Any, context: Context) -> Any:
            started = metrics.start(labels)
            error: BaseException | None = None
            try:
                result = behavior(request, context)
                return (await result) if inspect.isawaitable(result) else result
            except BaseException as exc:
                error = exc
                raise
            finally:
                metrics.finish(labels, started, final_code(context, error))

        return wrapped
