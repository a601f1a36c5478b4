"""Client code, which the server never imports: what programs that talk to a NameServer (ours or
Java's) use. :class:`~namesrv_grpc.client.route_cache.RouteCache` (routes from a watch, for agents
and Python producers), :mod:`.remoting` (a small asyncio RocketMQ remoting client: the admin tools,
tests, the bench) and :mod:`.security` (TLS and signature credentials of the command-line
programs and the broker agent)."""

from namesrv_grpc.client.route_cache import RouteCache, RouteUpdate, WatchRefusedError

__all__ = ["RouteCache", "RouteUpdate", "WatchRefusedError"]
