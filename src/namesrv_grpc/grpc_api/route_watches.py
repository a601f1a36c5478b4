"""``WatchTopicRoutes`` over gRPC: the route watch hub of one server, fed by the route table, with
serialized ``TopicRouteChange`` bytes as what it caches per topic (see
:mod:`namesrv_grpc.core.route_watch` for coalescing and bounds, and
:mod:`namesrv_grpc.grpc_api.encoded_responses` for the bytes)."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from namesrv_grpc.core.reader import NameServerReader
from namesrv_grpc.core.route_watch import RouteWatchHub
from namesrv_grpc.grpc_api.encoded_responses import encode_route_response, route_change_bytes

RouteWatches = RouteWatchHub[bytes]
"""The hub, caching one serialized ``TopicRouteChange`` per watched topic."""


def new_route_watches(nameserver: NameServerReader) -> RouteWatches:
    """A hub for ``nameserver``, subscribed to its route table's changes. Its bounds are the config
    keys ``routeWatchMaxWatchers``, ``routeWatchMaxTopics``, ``routeWatchMaxTopicsPerPeer`` and
    ``routeWatchMaxTopicsTotal``, read when a watch opens, and ``routeWatchMaxUnreadMillis``, read
    when a message is handed to gRPC."""

    def encode(topic: str) -> bytes:
        return route_change_bytes(topic, nameserver.topic_route_encoded(topic, encode_route_response))

    def encode_in_zone(topic: str, zone_name: str) -> bytes:
        return route_change_bytes(topic, nameserver.topic_route_encoded(topic, encode_route_response, zone_name))

    hub: RouteWatches = RouteWatchHub(
        encode,
        lambda: nameserver.route_revision,
        max_watchers=lambda: nameserver.config.route_watch_max_watchers,
        max_topics=lambda: nameserver.config.route_watch_max_topics,
        encode_in_zone=encode_in_zone,
        max_topics_per_peer=lambda: nameserver.config.route_watch_max_topics_per_peer,
        max_topics_total=lambda: nameserver.config.route_watch_max_topics_total,
        max_unread_seconds=lambda: nameserver.config.route_watch_max_unread_millis / 1000,
    )
    nameserver.add_route_listener(hub.routes_changed)
    return hub


class RouteWatchCollector(Collector):
    """``namesrv_route_watchers`` (open WatchTopicRoutes streams), ``namesrv_route_watched_topics``
    (distinct topics they watch), ``namesrv_route_watched_pairs`` (watcher-topic pairs) and
    ``namesrv_route_revision`` (route changes since start), read at scrape time."""

    def __init__(self, hub: RouteWatches, nameserver: NameServerReader) -> None:
        self._hub = hub
        self._ns = nameserver

    def collect(self) -> Iterator[GaugeMetricFamily]:
        yield GaugeMetricFamily("namesrv_route_watchers", "Open WatchTopicRoutes streams.", self._hub.watchers)
        yield GaugeMetricFamily(
            "namesrv_route_watched_topics",
            "Distinct topics watched by WatchTopicRoutes streams.",
            self._hub.watched_topics,
        )
        yield GaugeMetricFamily(
            "namesrv_route_watched_pairs",
            "Watcher-topic pairs of the open WatchTopicRoutes streams (routeWatchMaxTopicsTotal bounds them).",
            self._hub.watched_pairs,
        )
        yield GaugeMetricFamily(
            "namesrv_route_revision",
            "Route revision: route changes of this NameServer since it started.",
            self._ns.route_revision,
        )
