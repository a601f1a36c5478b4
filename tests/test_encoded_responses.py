"""The wire-format framing of cached route bytes (``grpc_api.encoded_responses``): what it builds
parses as exactly the message protobuf itself would build, for any sizes (multi-byte varints)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from namesrv.v1 import name_server_service_pb2 as ns_pb2
from namesrv_grpc.core.model import BrokerData, QueueData, TopicRouteData
from namesrv_grpc.grpc_api.convert import route_to_proto
from namesrv_grpc.grpc_api.encoded_responses import (
    encode_route_response,
    route_change_bytes,
    routes_response_bytes,
    varint,
    watch_response_bytes,
)

names = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1, max_size=300)


@st.composite
def routes(draw: st.DrawFn) -> TopicRouteData:
    broker_names = draw(st.lists(names, min_size=1, max_size=40, unique=True))
    queue_datas = tuple(QueueData(n, draw(st.integers(0, 65535)), 4, 6, 0) for n in sorted(broker_names))
    broker_datas = tuple(
        BrokerData("c", n, {i: f"10.0.{i}.1:{10911 + i}" for i in range(draw(st.integers(1, 3)))})
        for n in sorted(broker_names)
    )
    return TopicRouteData(queue_datas, broker_datas, {})


@given(st.integers(0, 2**63 - 1))
def test_varint_matches_protobuf(value: int) -> None:
    assert ns_pb2.WatchTopicRoutesResponse(revision=value).SerializeToString() == (
        b"\x08" + varint(value) if value else b""
    )


@given(names, st.one_of(st.none(), routes()))
def test_route_change_is_a_topic_route_change(topic: str, route: TopicRouteData | None) -> None:
    cached = None if route is None else encode_route_response(route)
    change = ns_pb2.TopicRouteChange.FromString(route_change_bytes(topic, cached))
    if route is None:
        expected = ns_pb2.TopicRouteChange(topic=topic, removed=True)
    else:
        expected = ns_pb2.TopicRouteChange(topic=topic, route=route_to_proto(route))
    assert change == expected


@given(st.integers(0, 2**40), st.lists(st.tuples(names, st.one_of(st.none(), routes())), max_size=5))
def test_watch_and_batch_responses_parse_as_built(
    revision: int, answers: list[tuple[str, TopicRouteData | None]]
) -> None:
    cached = [(t, None if r is None else encode_route_response(r)) for t, r in answers]
    watch = ns_pb2.WatchTopicRoutesResponse.FromString(
        watch_response_bytes(revision, [route_change_bytes(t, c) for t, c in cached])
    )
    assert watch.revision == revision
    assert [(c.topic, c.removed) for c in watch.changes] == [(t, r is None) for t, r in answers]
    batch = ns_pb2.PickupTopicRoutesResponse.FromString(routes_response_bytes(cached))
    expected = ns_pb2.PickupTopicRoutesResponse(
        routes={t: route_to_proto(r) for t, r in answers if r is not None},
        not_found=[t for t, r in answers if r is None],
    )
    assert dict(batch.routes) == dict(expected.routes)
    assert list(batch.not_found) == list(expected.not_found)
