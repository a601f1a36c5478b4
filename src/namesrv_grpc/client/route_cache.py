"""A client-side route cache fed by ``WatchTopicRoutes``: the routes of a set of topics, kept current
by the NameServer's pushes instead of polling every 30 s, with reconnect and resync against the
other NameServers of a list.

::

    with RouteCache(["10.0.0.1:8081", "10.0.0.2:8081"], ["TopicA", "TopicB"]) as cache:
        cache.wait_synced(timeout=5)
        route = cache.route("TopicA")        # namesrv.v1.TopicRouteData, or None (no route now)

How it stays right:

- One background thread holds one ``WatchTopicRoutes`` stream to one NameServer. The stream's first
  message carries every watched topic, so the cache *replaces* its content with it (a resync: a
  topic whose route vanished while the cache was disconnected is dropped, too); later messages
  replace the changed topics' routes.
- When the stream breaks (the NameServer stops, restarts, is unreachable, keepalive finds it dead,
  or it refuses with RESOURCE_EXHAUSTED), the thread watches the next NameServer of the list,
  after a pause that doubles from ``retry_initial_seconds`` up to ``retry_max_seconds`` while every
  server fails and resets once a stream delivers. Meanwhile the cache keeps serving its last routes
  (``synced`` is False until the next first message arrives).
- INVALID_ARGUMENT (a bad topic name, too many topics) is not retried: :meth:`wait_synced` raises
  it as :class:`WatchRefusedError`.
- ``revision`` is per NameServer (see the .proto); the cache never compares revisions of different
  servers, it resyncs from the first message instead.

Any other language does the same with the generated stubs of ``protos/namesrv/v1``: open
``WatchTopicRoutes``, replace the cache with the first message, apply each later message's
``changes`` (``removed`` = drop the topic), and on any stream error reconnect to another NameServer
and start again from its first message. Set client keepalive (e.g. 10 s ping, 5 s timeout) so a
silently dead NameServer is noticed.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import grpc

from namesrv.v1 import name_server_service_pb2 as ns_pb2
from namesrv.v1 import name_server_service_pb2_grpc as ns_grpc
from namesrv.v1 import types_pb2

log = logging.getLogger(__name__)

CHANNEL_OPTIONS = (
    ("grpc.keepalive_time_ms", 10_000),
    ("grpc.keepalive_timeout_ms", 5_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.max_receive_message_length", 128 * 1024 * 1024),
)
"""Ping the NameServer every 10 s (it permits that) and give up after 5 s without an answer, so a
NameServer that vanished without closing the connection is left within about 15 s."""


@dataclass(frozen=True, slots=True)
class RouteUpdate:
    """One topic's route as a stream delivered it: ``route`` None = the topic has no route now.
    ``resync`` is True for the topics of a stream's first message."""

    topic: str
    route: types_pb2.TopicRouteData | None
    revision: int
    namesrv: str
    resync: bool


class WatchRefusedError(Exception):
    """The NameServer refused the watch itself (INVALID_ARGUMENT): retrying cannot help."""


def parse_namesrv_addrs(addresses: str | Sequence[str]) -> list[str]:
    """``"h:p;h:p"`` (RocketMQ's ``namesrvAddr`` form) or a list -> the list of addresses.
    Raises ValueError when it names none."""
    items = addresses.split(";") if isinstance(addresses, str) else list(addresses)
    result = [a.strip() for a in items if a.strip()]
    if not result:
        raise ValueError("no NameServer address given")
    return result


class RouteCache:
    """Routes of ``topics``, kept current by a watch (see the module docs). Thread-safe."""

    def __init__(
        self,
        namesrv_addrs: str | Sequence[str],
        topics: Iterable[str],
        *,
        on_update: Callable[[RouteUpdate], None] | None = None,
        retry_initial_seconds: float = 0.1,
        retry_max_seconds: float = 5.0,
        channel_factory: Callable[[str], grpc.Channel] | None = None,
    ) -> None:
        """``namesrv_addrs``: ``"h:p;h:p"`` or a list, tried in order; ``on_update`` is called in
        the cache's thread for every topic of every message, after the cache holds it;
        ``channel_factory(address)`` makes a channel (default: insecure with keepalive, for TLS pass
        one with ``grpc.secure_channel``). Raises ValueError for an empty address list or topic list."""
        self.addresses = parse_namesrv_addrs(namesrv_addrs)
        self.topics = tuple(dict.fromkeys(topics))
        if not self.topics:
            raise ValueError("no topic to watch")
        self._on_update = on_update
        self._retry_initial = retry_initial_seconds
        self._retry_max = retry_max_seconds
        self._channel_factory = channel_factory or (lambda a: grpc.insecure_channel(a, options=CHANNEL_OPTIONS))
        self._lock = threading.Condition()
        self._routes: dict[str, types_pb2.TopicRouteData] = {}
        self._synced = False
        self._error: WatchRefusedError | None = None
        self._stopping = threading.Event()
        self._call: Any = None
        self._thread: threading.Thread | None = None
        self.namesrv = ""
        """The NameServer the current (or last) stream came from."""
        self.revision = 0
        """Revision of the last message, on :attr:`namesrv`."""
        self.resyncs = 0
        """First messages received (1 after the first connection; more after reconnects)."""

    # ------------------------------------------------------------------ reading

    def route(self, topic: str) -> types_pb2.TopicRouteData | None:
        """The last known route of a watched topic (a copy), or None when it has none."""
        with self._lock:
            route = self._routes.get(topic)
            if route is None:
                return None
            copy = types_pb2.TopicRouteData()
            copy.CopyFrom(route)
            return copy

    def routes(self) -> dict[str, types_pb2.TopicRouteData]:
        """Copies of every known route (topics without a route are absent)."""
        with self._lock:
            result = {}
            for topic, route in self._routes.items():
                result[topic] = types_pb2.TopicRouteData()
                result[topic].CopyFrom(route)
            return result

    @property
    def synced(self) -> bool:
        """True while a stream is open and its first message has been applied."""
        with self._lock:
            return self._synced

    def wait_synced(self, timeout: float | None = None) -> bool:
        """Wait until the cache holds a NameServer's first message; False on timeout. Raises
        WatchRefusedError when a NameServer refused the watch (bad topics)."""
        with self._lock:
            self._lock.wait_for(lambda: self._synced or self._error is not None, timeout)
            if self._error is not None:
                raise self._error
            return self._synced

    def wait_for(self, predicate: Callable[[RouteCache], bool], timeout: float | None = None) -> bool:
        """Wait until ``predicate(self)`` holds (checked after every message); False on timeout."""
        with self._lock:
            return self._lock.wait_for(lambda: predicate(self), timeout)

    # ------------------------------------------------------------------ life cycle

    def start(self) -> RouteCache:
        """Start watching in a daemon thread; returns self."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="route-cache", daemon=True)
            self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Cancel the stream and end the thread."""
        self._stopping.set()
        call = self._call
        if call is not None:
            call.cancel()
        if self._thread is not None:
            self._thread.join(timeout)

    def __enter__(self) -> RouteCache:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # ------------------------------------------------------------------ the watch thread

    def _run(self) -> None:
        delay = self._retry_initial
        index = 0
        while not self._stopping.is_set():
            address = self.addresses[index % len(self.addresses)]
            delivered = self._watch(address)
            if self._error is not None or self._stopping.is_set():
                return
            index += 1
            if delivered:
                delay = self._retry_initial
                if len(self.addresses) > 1:
                    continue  # another NameServer right away; pause only when all of them fail
            if self._stopping.wait(delay):
                return
            delay = min(delay * 2, self._retry_max)

    def _watch(self, address: str) -> bool:
        """One stream to ``address`` until it ends; True when it delivered a first message."""
        delivered = False
        try:
            with self._channel_factory(address) as channel:
                stub = ns_grpc.NameServerServiceStub(channel)
                call = stub.WatchTopicRoutes(ns_pb2.WatchTopicRoutesRequest(topics=self.topics))
                self._call = call
                if self._stopping.is_set():
                    call.cancel()
                for message in call:
                    self._apply(address, message, first=not delivered)
                    delivered = True
        except grpc.RpcError as error:
            code = error.code() if isinstance(error, grpc.Call) else None
            if code == grpc.StatusCode.INVALID_ARGUMENT:
                with self._lock:
                    self._error = WatchRefusedError(f"{address}: {error.details()}")
                    self._lock.notify_all()
            elif not self._stopping.is_set():
                log.warning("route watch on %s ended: %s", address, code.name if code else error)
        finally:
            self._call = None
            with self._lock:
                self._synced = False
                self._lock.notify_all()
        return delivered

    def _apply(self, address: str, message: ns_pb2.WatchTopicRoutesResponse, *, first: bool) -> None:
        updates = []
        with self._lock:
            if first:
                self._routes.clear()
                self.resyncs += 1
            for change in message.changes:
                if change.removed:
                    self._routes.pop(change.topic, None)
                    route = None
                else:
                    route = change.route
                    self._routes[change.topic] = route
                updates.append(RouteUpdate(change.topic, route, message.revision, address, first))
            self.namesrv = address
            self.revision = message.revision
            self._synced = True
            self._lock.notify_all()
        if self._on_update is not None:
            for update in updates:
                self._on_update(update)
