"""Client-side helpers for programs that read routes from the NameServer (agents, the admin CLI,
Python producers): :class:`~namesrv_grpc.client.route_cache.RouteCache`."""

from namesrv_grpc.client.route_cache import RouteCache, RouteUpdate, WatchRefusedError

__all__ = ["RouteCache", "RouteUpdate", "WatchRefusedError"]
