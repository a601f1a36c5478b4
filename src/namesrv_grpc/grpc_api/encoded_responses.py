"""Responses that are already serialized: a handler may return ``bytes`` instead of a message.

``PickupTopicRoute`` answers from a per-topic cache of serialized responses (built once per route
change, rule S18), so a lookup costs a dict hit instead of copying and encoding the route each time
(the Java NameServer deep-copies and re-encodes on every lookup, RocketMQ #10982). gRPC serializes
what a handler returns with the method's ``response_serializer``; this interceptor, the innermost
of the server, makes that serializer pass ``bytes`` through unchanged.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import grpc


def passthrough_bytes(serializer: Callable[[Any], bytes] | None) -> Callable[[Any], bytes]:
    """A serializer that returns ``bytes`` as they are and serializes anything else with ``serializer``."""

    def serialize(response: Any) -> bytes:
        if isinstance(response, bytes):
            return response
        assert serializer is not None
        return serializer(response)

    return serialize


class PreEncodedResponses(grpc.aio.ServerInterceptor):
    """Lets unary-unary handlers return pre-serialized ``bytes``. Register it last."""

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any] | None]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        handler = await continuation(handler_call_details)
        if handler is None or handler.unary_unary is None:
            return handler
        return grpc.unary_unary_rpc_method_handler(
            handler.unary_unary,
            request_deserializer=handler.request_deserializer,
            response_serializer=passthrough_bytes(handler.response_serializer),
        )
