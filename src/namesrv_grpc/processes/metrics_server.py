"""``/metrics`` of ``namesrv``: prometheus-client's own WSGI exposition (``make_wsgi_app``: content
negotiation, OpenMetrics, gzip), served by the standard library's threading WSGI server with the
bounds a port open to a network needs (issue 30: 176 stalled connections each kept a thread, and
four tight scrape loops of a 1,000,000-topic table kept a core busy):

- at most :data:`MAX_CONNECTIONS` connections at once; when all are taken, a new one takes the
  place of the connection that has waited longest without sending its request (that one is
  closed), so connections held open idle cannot keep a scraper out (issue 39: 16 idle connections,
  reopened as they were closed, failed every scrape); only when every connection is in the middle
  of a request is the new one closed at once;
- a connection that sends nothing (or not a whole request) for :data:`READ_TIMEOUT_SECONDS` is
  closed (its thread ends);
- one collection at a time: scrapes that come while one runs wait for it and get its samples, so
  however many scrape loops run, every process is asked once at a time (and the route table's sizes
  are counted once per route change, ``RouteInfoManager.stats``).

Refusals are counted in ``namesrv_metrics_connections_refused_total``.

Paths: ``/metrics``; ``/healthz`` (200 ``ok`` while ``namesrv`` answers: liveness); ``/ready`` (200
when every process serves, else 503 with the reason: readiness, for load balancers and Kubernetes);
anything else 404.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable, Iterable, Iterator
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

MAX_CONNECTIONS = 64
"""Connections at once, each a thread (a Prometheus server uses one; more for people, tests, and
for room while idle ones wait to be replaced)."""
READ_TIMEOUT_SECONDS = 5.0
"""A connection idle this long in the middle of a request (or before one) is closed."""


class CoalescingCollector(Collector):
    """``source()`` once at a time (thread-safe): a scrape that comes while a collection runs waits
    for it and shares its samples instead of starting another one."""

    def __init__(self, source: Callable[[], list[Metric]]) -> None:
        self._source = source
        self._lock = threading.Lock()
        self._generation = 0
        self._families: list[Metric] = []

    def collect(self) -> Iterator[Metric]:
        seen = self._generation
        with self._lock:
            if self._generation == seen:  # nobody collected while this scrape waited: collect
                self._families = self._source()
                self._generation += 1
            families = self._families
        yield from families


class _Handler(WSGIRequestHandler):
    """No access log; a socket timeout, so a stalled peer's thread ends; tells the server when its
    request has arrived (from then on it is not replaced by a newer connection)."""

    timeout = READ_TIMEOUT_SECONDS
    server: _Server

    def parse_request(self) -> bool:
        parsed = super().parse_request()
        self.server.request_arrived(self.connection)
        return parsed

    def log_message(self, format: str, *args: Any) -> None:
        """Log nothing."""


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True
    request_queue_size = 64
    """The kernel's queue of connections not yet accepted (socketserver's default is 5)."""
    refused = 0
    """Connections closed because :data:`MAX_CONNECTIONS` were open: the oldest one without a
    request, or the new one when every connection was in the middle of a request."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._lock = threading.Lock()
        self._waiting: dict[socket.socket, None] = {}
        """Open connections whose request has not arrived, oldest first."""
        self._open = 0
        super().__init__(*args, **kwargs)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._lock:
            if self._open >= MAX_CONNECTIONS:
                self.refused += 1
                if not self._waiting:
                    self.shutdown_request(request)
                    return
                oldest = next(iter(self._waiting))
                del self._waiting[oldest]
                with contextlib.suppress(OSError):  # its thread's read ends: it closes and leaves
                    oldest.shutdown(socket.SHUT_RDWR)
            self._open += 1
            self._waiting[request] = None
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._closed(request)
            raise

    def request_arrived(self, request: socket.socket) -> None:
        with self._lock:
            self._waiting.pop(request, None)

    def _closed(self, request: socket.socket) -> None:
        with self._lock:
            self._waiting.pop(request, None)
            self._open -= 1

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._closed(request)


class MetricsServer:
    """Serves ``registry`` on ``addr:port`` in a daemon thread until :meth:`close`."""

    def __init__(
        self,
        addr: str,
        port: int,
        registry: CollectorRegistry,
        ready: Callable[[], tuple[bool, str]],
    ) -> None:
        """``ready()``: ``(ready, why)`` for ``/ready``. Raises OSError when the port cannot be bound."""
        family = socket.AF_INET6 if ":" in addr.strip("[]") else socket.AF_INET

        class Server(_Server):
            address_family = family

        registry.register(_RefusalCollector(self))
        app = routes(make_wsgi_app(registry), ready)
        self._server = make_server(addr.strip("[]"), port, app, Server, handler_class=_Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="metrics-server", daemon=True)
        self._thread.start()

    @property
    def refused(self) -> int:
        return self._server.refused

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def routes(metrics: WSGIApp, ready: Callable[[], tuple[bool, str]]) -> WSGIApp:
    """The metrics port's WSGI app: ``/metrics`` (prometheus-client's app), ``/healthz``, ``/ready``,
    404 for any other path."""

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path == "/metrics":
            return metrics(environ, start_response)
        if path == "/healthz":
            status, text = "200 OK", "ok"
        elif path == "/ready":
            is_ready, why = ready()
            status, text = ("200 OK" if is_ready else "503 Service Unavailable"), why
        else:
            status, text = "404 Not Found", f"no {path or '/'} here: /metrics, /healthz, /ready"
        body = (text + "\n").encode()
        start_response(status, [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(body)))])
        return [body]

    return app


class _RefusalCollector(Collector):
    def __init__(self, server: MetricsServer) -> None:
        self._server = server

    def collect(self) -> Iterator[Metric]:
        refused = Metric(
            "namesrv_metrics_connections_refused",
            "Connections to /metrics closed because 64 were open (the oldest idle one, else the new one).",
            "counter",
        )
        refused.add_sample("namesrv_metrics_connections_refused_total", {}, getattr(self._server, "refused", 0))
        yield refused
