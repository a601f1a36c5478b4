"""Zone mode (RocketMQ 5.x ``ZoneRouteRPCHook``): a route filtered to the client's zone. Pure functions.

A 5.x client started with ``ROCKETMQ_ZONE`` and zone mode asks for routes with the ext fields
``__ZONE_NAME`` and ``__ZONE_MODE=true`` (remoting) or ``zone_name`` (gRPC). Its route keeps a
BrokerData when the broker name has no master (id 0) any more ("master down, consume from slave":
the client may read from a slave in another zone) or when its zone equals the client's, ignoring
case (Java ``StringUtils.equalsIgnoreCase``; here ``str.lower`` on both sides). QueueData of the
dropped broker names and the filter servers of their addresses go too; the static-topic mappings
stay (``ZoneRouteRPCHook.filterByZoneName`` leaves them). A route whose brokers are all dropped is
still a route, with empty lists (the hook filters a SUCCESS answer; it never turns it into
TOPIC_NOT_EXIST).
"""

from __future__ import annotations

import dataclasses

from namesrv_grpc.core.model import MASTER_ID, TopicRouteData


def zone_requested(zone_name: str) -> bool:
    """True when ``zone_name`` asks for a filtered route: not blank (Java ``StringUtils.isBlank``:
    a blank zone name leaves the route whole)."""
    return bool(zone_name) and not zone_name.isspace()


def route_zone_names(route: TopicRouteData) -> frozenset[str]:
    """The zones of the route's BrokerData in lower case (blank ones left out): all :func:`zone_key`
    needs of a route, small enough to keep per topic (a route object of 16 brokers is ~7 KB)."""
    return frozenset(broker_data.zone_name.lower() for broker_data in route.broker_datas if broker_data.zone_name)


def zone_key(zone_names: frozenset[str], zone_name: str) -> str | None:
    """What decides the filtered form of a route whose brokers are in ``zone_names``
    (:func:`route_zone_names`) for a client in ``zone_name`` (not blank): the zone in lower case
    when some BrokerData of the route is in it, else None (every zone that matches no broker gets
    the same route: the master-less broker names only). Equal keys give equal filtered routes, so a
    cache keyed by it holds at most one entry per zone of the route's brokers, plus one, whatever
    zone names clients send."""
    lowered = zone_name.lower()
    return lowered if lowered in zone_names else None


def filter_route_by_zone(route: TopicRouteData, key: str | None) -> TopicRouteData:
    """The route as a client of the zone ``key`` sees it (``key`` from :func:`zone_key`: a lower-case
    zone, or None for a zone no broker of the route is in). Returns ``route`` itself when nothing
    is dropped; never changes ``route``."""
    kept = []
    dropped: set[str] = set()
    for broker_data in route.broker_datas:
        if MASTER_ID not in broker_data.broker_addrs or (
            key is not None and broker_data.zone_name.lower() == key and broker_data.zone_name != ""
        ):
            kept.append(broker_data)
        else:
            dropped.add(broker_data.broker_name)
    if not dropped:
        return route
    dropped_addrs = {
        addr
        for broker_data in route.broker_datas
        if broker_data.broker_name in dropped
        for addr in broker_data.broker_addrs.values()
    }
    return dataclasses.replace(
        route,
        queue_datas=tuple(q for q in route.queue_datas if q.broker_name not in dropped),
        broker_datas=tuple(kept),
        filter_server_table={
            addr: servers for addr, servers in route.filter_server_table.items() if addr not in dropped_addrs
        },
    )
