"""Responses that are already serialized: a handler may return ``bytes`` instead of a message.

``PickupTopicRoute`` answers from a per-topic cache of serialized ``PickupTopicRouteResponse`` bytes
(built once per route change, rule S18), so a lookup costs a dict hit instead of copying and
encoding the route each time (the Java NameServer deep-copies and re-encodes on every lookup,
RocketMQ #10982). Every method is registered with :func:`passthrough_bytes` as its response
serializer (:mod:`namesrv_grpc.grpc_api.handlers`), so ``bytes`` go out unchanged.

``PickupTopicRoutes`` and ``WatchTopicRoutes`` reuse those cached bytes: in protobuf's wire format a
message field is ``tag, length, payload`` and the cached response is exactly field 1 (``route``)
holding the serialized ``TopicRouteData``; the same payload under another tag is the ``route`` of a
``TopicRouteChange`` (field 2) or the value of a ``map<string, TopicRouteData>`` entry (field 2).
The functions below only put tags and lengths around cached payloads (proto3 encoding rules; field
numbers are fixed by the .proto files and never renumbered, CONTRACT.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from namesrv.v1 import name_server_service_pb2 as ns_pb2
from namesrv_grpc.core.model import TopicRouteData
from namesrv_grpc.grpc_api.convert import route_to_proto


def passthrough_bytes(serializer: Callable[[Any], bytes] | None) -> Callable[[Any], bytes]:
    """A serializer that returns ``bytes`` as they are and serializes anything else with ``serializer``."""

    def serialize(response: Any) -> bytes:
        if response.__class__ is bytes:
            return response  # type: ignore[no-any-return,unused-ignore]
        assert serializer is not None
        return serializer(response)

    return serialize


def encode_route_response(route: TopicRouteData) -> bytes:
    """A route as serialized ``PickupTopicRouteResponse`` bytes (field 1 = the route), ready to send."""
    return bytes(ns_pb2.PickupTopicRouteResponse(route=route_to_proto(route)).SerializeToString())


def varint(value: int) -> bytes:
    """Protobuf base-128 varint of a non-negative integer."""
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def length_delimited(field_number: int, payload: bytes) -> bytes:
    """One length-delimited field (string, bytes, message): tag, length, payload."""
    return varint(field_number << 3 | 2) + varint(len(payload)) + payload


def _route_as_field_2(route_response: bytes) -> bytes:
    """``PickupTopicRouteResponse`` bytes (``route`` = field 1) as field 2 with the same payload."""
    if route_response[:1] != b"\x0a":
        raise ValueError("not a PickupTopicRouteResponse with a route")
    return b"\x12" + route_response[1:]


def route_change_bytes(topic: str, route_response: bytes | None) -> bytes:
    """A serialized ``TopicRouteChange``: the topic and its route (``route_response`` = cached
    ``PickupTopicRouteResponse`` bytes), or ``removed`` when None."""
    name = length_delimited(1, topic.encode())
    if route_response is None:
        return name + b"\x18\x01"  # field 3 (removed), varint true
    return name + _route_as_field_2(route_response)


def watch_response_bytes(revision: int, changes: Iterable[bytes]) -> bytes:
    """A serialized ``WatchTopicRoutesResponse``: ``revision`` (field 1) and serialized
    ``TopicRouteChange`` messages (field 2, repeated)."""
    parts = [b"\x08" + varint(revision)] if revision else []
    parts.extend(length_delimited(2, change) for change in changes)
    return b"".join(parts)


def routes_response_bytes(answers: Iterable[tuple[str, bytes | None]]) -> bytes:
    """A serialized ``PickupTopicRoutesResponse`` from ``(topic, cached PickupTopicRouteResponse
    bytes or None)``: found topics in ``routes`` (map entries, field 1), the others in
    ``not_found`` (field 2), in the given order."""
    parts = []
    for topic, route_response in answers:
        name = topic.encode()
        if route_response is None:
            parts.append(length_delimited(2, name))
        else:
            parts.append(length_delimited(1, length_delimited(1, name) + _route_as_field_2(route_response)))
    return b"".join(parts)
