"""How servicer methods become gRPC handlers: once, at start, with no per-call interceptor.

For every method of a service descriptor, :func:`method_handlers` takes the servicer's method of the
same name and :func:`add_services` registers it (a registered method for the few of
:data:`OWN_INTAKE_METHODS`, a generic handler for the others) wrapped by one plain function
that does what three ``grpc.aio`` interceptors used to do on every call:

- error mapping: a :class:`~namesrv_grpc.core.errors.NamesrvError` raised by the method becomes its
  status with a ``google.rpc.Status`` / ``ErrorInfo`` detail (:func:`~namesrv_grpc.grpc_api.grpc_errors.to_status`);
- metrics: the method's :class:`~namesrv_grpc.grpc_api.grpc_metrics.MethodMetrics`, looked up here
  once, count the call and observe its handling time;
- pre-encoded responses: the response serializer passes ``bytes`` through unchanged, so a method may
  return (or yield) a serialized response;
- unsent answers (unary methods): a call of a connection whose answers are not read waits before
  it is handled (and is refused if they stay unread), and each answer is counted until its call is
  done
  (:class:`~namesrv_grpc.grpc_api.unsent_answers.UnsentAnswers`, ``grpcWriteBufferHighWaterMark``);
- request decoding (unary methods): gRPC hands over the raw bytes and the wrapper parses them, so a
  request that is not a valid protobuf message is INVALID_ARGUMENT (``MALFORMED_REQUEST``) rather
  than the UNKNOWN gRPC gives when its own deserializer fails. (A bad message on a client stream
  ends ``OpenBrokerSession`` with INVALID_ARGUMENT, see :mod:`.sessions`.)

An interceptor runs as a coroutine per call before the handler is even chosen, then builds a new
handler object per call; here the per-call cost is the wrapper's frame, two ``perf_counter`` reads
and the counters (``bench/lookup_limit.py`` measures the result against a bare generic handler).
"""

from __future__ import annotations

import contextlib
import inspect
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc
from google.protobuf import message_factory
from google.protobuf.descriptor import MethodDescriptor, ServiceDescriptor

from namesrv_grpc.core.errors import MalformedRequestError, NamesrvError
from namesrv_grpc.grpc_api.encoded_responses import passthrough_bytes
from namesrv_grpc.grpc_api.grpc_errors import status_code_of, to_status
from namesrv_grpc.grpc_api.grpc_metrics import (
    CODE_NAMES,
    Context,
    GrpcServerMetrics,
    MethodMetrics,
    final_code,
    rpc_type,
)
from namesrv_grpc.grpc_api.unsent_answers import UnsentAnswers

Behavior = Callable[..., Any]


async def _abort_with(context: Context, error: NamesrvError) -> None:
    status = to_status(error)
    await context.abort(status.code, status.details, status.trailing_metadata)


def _code_name(context: Context, error: BaseException | None) -> str:
    return CODE_NAMES[final_code(context, error)]


def wrap_unary_response(behavior: Behavior, metrics: MethodMetrics, unsent: UnsentAnswers | None = None) -> Behavior:
    """Wrap a method that returns one response (unary or client-streaming): a coroutine function,
    or a plain one returning a response or an awaitable. ``unsent``: hold back (then refuse) calls of
    connections that do not read their answers, and count each answer until its call is done."""
    perf_counter = time.perf_counter
    if not inspect.iscoroutinefunction(behavior):
        plain = behavior

        async def behavior(request: Any, context: Context) -> Any:
            result = plain(request, context)
            return (await result) if inspect.isawaitable(result) else result

    async def handle(request: Any, context: Context) -> Any:
        metrics.started += 1
        started = perf_counter()
        peer = ""
        try:
            if unsent is not None:
                peer = context.peer()
                if unsent.blocked(peer) is not None:
                    await unsent.admit(peer)
            response = await behavior(request, context)
        except NamesrvError as error:
            metrics.finish(status_code_of(error).name, perf_counter() - started)
            await _abort_with(context, error)
            raise  # not reached: abort raises
        except BaseException as error:
            metrics.finish(_code_name(context, error), perf_counter() - started)
            raise
        code = context.code()
        metrics.finish("OK" if code is None else _code_name(context, None), perf_counter() - started)
        if unsent is not None:
            unsent.hold(peer, response, context)
        return response

    return handle


@contextlib.asynccontextmanager
async def _closing(responses: Any) -> AsyncIterator[None]:
    """``aclose()`` ``responses`` on the way out, when it has one (async generators do)."""
    try:
        yield
    finally:
        aclose = getattr(responses, "aclose", None)
        if aclose is not None:
            await aclose()


def wrap_stream_response(behavior: Behavior, metrics: MethodMetrics) -> Behavior:
    """Wrap a method that streams responses (server or bidi streaming). An async generator
    function, or a plain function returning an (async) iterable, is served as an async generator;
    a coroutine function (responses written with ``context.write``) as a coroutine."""
    perf_counter = time.perf_counter

    if inspect.iscoroutinefunction(behavior):

        async def write_responses(request: Any, context: Context) -> Any:
            metrics.started += 1
            started = perf_counter()
            error: BaseException | None = None
            try:
                return await behavior(request, context)
            except NamesrvError as exc:
                error = exc
                await _abort_with(context, exc)
            except BaseException as exc:
                error = exc
                raise
            finally:
                metrics.finish(_code_name(context, error), perf_counter() - started)

        return write_responses

    async def yield_responses(request: Any, context: Context) -> AsyncIterator[Any]:
        metrics.started += 1
        started = perf_counter()
        error: BaseException | None = None
        try:
            responses = behavior(request, context)
            if inspect.isawaitable(responses):
                responses = await responses
            if hasattr(responses, "__aiter__"):
                # Close the inner generator with this one: when gRPC closes the stream while both are
                # paused at a yield (a client gone right after a response), the inner one's cleanup
                # (a broker session's S15 removal, a watcher's release) must run now, not whenever
                # the garbage collector finalizes it.
                async with _closing(responses):
                    async for response in responses:
                        yield response
            else:
                for response in responses:
                    yield response
        except NamesrvError as exc:
            error = exc
            await _abort_with(context, exc)
        except BaseException as exc:
            error = exc
            raise
        finally:
            metrics.finish(_code_name(context, error), perf_counter() - started)

    return yield_responses


def decoding_requests(behavior: Behavior, parse: Callable[[bytes], Any], type_name: str) -> Behavior:
    """``behavior`` taking the raw request bytes: parsed with ``parse`` first; a parse failure raises
    MalformedRequestError (INVALID_ARGUMENT). Keeps ``behavior`` a coroutine function if it is one."""

    def malformed(exc: Exception) -> MalformedRequestError:
        return MalformedRequestError(f"the request is not a valid {type_name} ({type(exc).__name__})")

    if inspect.iscoroutinefunction(behavior):

        async def decode_then_await(request: bytes, context: Context) -> Any:
            try:
                message = parse(request)
            except Exception as exc:  # protobuf raises DecodeError
                raise malformed(exc) from None
            return await behavior(message, context)

        return decode_then_await

    def decode_then_call(request: bytes, context: Context) -> Any:
        try:
            message = parse(request)
        except Exception as exc:
            raise malformed(exc) from None
        return behavior(message, context)

    return decode_then_call


def method_handler(
    method: MethodDescriptor,
    behavior: Behavior,
    metrics: GrpcServerMetrics,
    service_name: str,
    unsent: UnsentAnswers | None = None,
) -> grpc.RpcMethodHandler[Any, Any]:
    """The handler of one method: wrapped behavior, the request message's parser, a serializer that
    passes ``bytes`` through; ``unsent`` bounds the unsent answers of unary methods."""
    request_class = message_factory.GetMessageClass(method.input_type)
    response_class = message_factory.GetMessageClass(method.output_type)
    labels = (rpc_type(method.client_streaming, method.server_streaming), service_name, method.name)
    method_metrics = metrics.method(labels)
    kwargs: dict[str, Any] = {
        "request_deserializer": request_class.FromString,
        "response_serializer": passthrough_bytes(response_class.SerializeToString),
    }
    if not method.client_streaming and not method.server_streaming:
        behavior = decoding_requests(behavior, request_class.FromString, method.input_type.full_name)
        kwargs["request_deserializer"] = None
    if method.server_streaming:
        wrapped = wrap_stream_response(behavior, method_metrics)
        factory = (
            grpc.stream_stream_rpc_method_handler if method.client_streaming else grpc.unary_stream_rpc_method_handler
        )
    else:
        wrapped = wrap_unary_response(behavior, method_metrics, unsent)
        factory = (
            grpc.stream_unary_rpc_method_handler if method.client_streaming else grpc.unary_unary_rpc_method_handler
        )
    return factory(wrapped, **kwargs)


OWN_INTAKE_METHODS = frozenset(
    {
        "/namesrv.v1.NameServerService/PickupTopicRoute",
        "/namesrv.v1.NameServerService/PickupTopicRoutes",
        "/namesrv.v1.NameServerService/QueryDataVersion",
        "/namesrv.v1.NameServerService/RegisterBroker",
        "/namesrv.v1.NameServerService/BrokerHeartbeat",
        "/grpc.health.v1.Health/Check",
    }
)
"""The methods served as *registered* methods, each with its own intake; every other method goes
through the one shared generic handler.

grpcio's asyncio server keeps one pending ``request_call`` for all generic handlers together and one
per registered method (``grpc/_cython/_cygrpc/aio/server.pyx.pxi``, ``_server_main_loop``): calls of
generic methods are taken in one at a time, so a lookup behind a burst of 1,000 calls of another
method waits for every one of them (measured on a bare ``grpc.aio`` server: a concurrent lookup's
worst wait 179-197 ms with generic handlers, 8-10 ms registered). Lookups, the broker's
registrations and heartbeats (S13: a broker kept waiting expires) and health checks (a probe kept
waiting restarts the pod) get their own; the rest share one. Registering every method costs
intake speed (grpc PR #43461: 40 registered methods, call intake 1.2-1.5x slower), hence a few.

What it does not do: when the burst's calls themselves keep the serving process's event loop busy,
a lookup waits for the loop, not for the intake. Measured on one serving process (2026-11-28, this
project's machine kind): 1,000 ``GetKVConfig`` calls at once over 10 connections, a lookup loop
beside them, worst lookup wait per burst median 536-546 ms registered against 583-594 ms all
generic (six bursts, two runs each): the calls' handling (~0.5 ms each), not their intake, is what
the lookup waited for there."""


def method_handlers(
    service: ServiceDescriptor, servicer: object, metrics: GrpcServerMetrics, unsent: UnsentAnswers | None = None
) -> dict[str, grpc.RpcMethodHandler[Any, Any]]:
    """Method name -> handler for every method of ``service``, each the servicer's method of the
    same name."""
    return {
        method.name: method_handler(method, getattr(servicer, method.name), metrics, service.full_name, unsent)
        for method in service.methods
    }


def add_services(
    server: grpc.aio.Server,
    metrics: GrpcServerMetrics,
    services: list[tuple[ServiceDescriptor, object]],
    unsent: UnsentAnswers | None = None,
) -> None:
    """Register ``(service descriptor, servicer)`` pairs on ``server``: the methods of
    :data:`OWN_INTAKE_METHODS` as registered methods, the others as generic handlers. ``unsent``
    (default: the ``unsent_answers`` of the first servicer that has one, the NameServerServicer's)
    bounds the unsent answers of every unary method of every service, all sharing one count per
    connection."""
    if unsent is None:
        unsent = next(
            (
                found
                for _, servicer in services
                if isinstance(found := getattr(servicer, "unsent_answers", None), UnsentAnswers)
            ),
            None,
        )
    generic: list[grpc.GenericRpcHandler] = []
    for service, servicer in services:
        handlers = method_handlers(service, servicer, metrics, unsent)
        own = {name: h for name, h in handlers.items() if f"/{service.full_name}/{name}" in OWN_INTAKE_METHODS}
        shared = {name: h for name, h in handlers.items() if name not in own}
        if own:
            server.add_registered_method_handlers(service.full_name, own)
        if shared:
            generic.append(grpc.method_handlers_generic_handler(service.full_name, shared))
    server.add_generic_rpc_handlers(tuple(generic))
