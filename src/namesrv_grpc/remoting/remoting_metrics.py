"""Prometheus metrics of the remoting front door, in the NameServer's registry (the remoting twin of
:mod:`namesrv_grpc.grpc_api.grpc_metrics`). Labels are bounded: request codes by name (23 known ones,
anything else is ``unknown``), response codes by name.

- ``namesrv_remoting_requests_total{request_code, response_code}`` (counter): requests answered (or
  handled, for oneway ones) by request code and the response code of the answer; the
  ``response_code="SUCCESS"`` series of each of the 23 codes exists from the start (the denominator
  of error ratios), the others appear when first counted
- ``namesrv_remoting_request_duration_seconds{request_code}`` (histogram): time from the dispatch of a
  request to its answer (work in worker threads included; the twin of
  ``grpc_server_handling_seconds``), present once the code was requested
- ``namesrv_remoting_connections`` (gauge): remoting connections open now
- ``namesrv_remoting_connections_opened_total`` (counter): connections accepted
- ``namesrv_remoting_frame_errors_total`` (counter): connections closed because a frame could not be parsed
- ``namesrv_remoting_max_connections`` (gauge): the connection cap (``maxConnections``)
- ``namesrv_remoting_connections_refused_total{reason}`` (counter): connections closed by a cap:
  ``idle_evicted`` (``maxConnections``: an open one closed to make room, the oldest that never sent a
  request or else the least recently active), ``per_ip_evicted`` (likewise for
  ``remotingMaxConnectionsPerIp``), ``max_connections`` / ``max_connections_per_ip`` (a new one
  refused: every open one carries a broker's registration)
- ``namesrv_remoting_frames_refused_total{reason}`` (counter): connections closed over a frame bound:
  ``frame_timeout`` (``remotingFrameReadTimeoutMillis``), ``partial_frames_budget``
  (``remotingPartialFramesMaxBytes``), ``frame_too_large`` (``remotingFrameMaxLength``),
  ``header_too_large`` (``remotingHeaderMaxLength``, ``remotingHeaderMaxFields``; these two also
  count in ``frame_errors``)
- ``namesrv_remoting_partial_frame_bytes`` (gauge): bytes held in frames not yet decoded
- ``namesrv_remoting_reads_paused_total{reason}`` (counter): times a connection stopped being read:
  ``write_buffer`` (answers not read by the peer, ``writeBufferHighWaterMark``), ``in_flight``
  (``remotingMaxRequestsInFlight``), ``backlog`` (more than ``remotingMaxFramesPerRead`` frames in
  one read, or the turn's ``remotingMaxFramesPerTurn`` spent)
- ``namesrv_remoting_end_of_input_total{reading}`` (counter): connections closed because the peer
  ended its input (TCP FIN of a close or a half-close, or a reset), as Netty closes a channel at end
  of input: ``active`` (read as usual) or ``paused`` (noticed while the connection was not read, by
  ``EPOLLRDHUP``: a peer that stopped reading its answers and then half-closed)
- brokers removed because their remoting connection closed (S15) count in
  ``namesrv_broker_session_losses_total``, as gRPC session losses do (:mod:`namesrv_grpc.metrics`)
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from namesrv_grpc.metrics import REQUEST_DURATION_BUCKETS, FastHistogram
from namesrv_grpc.remoting.codes import RequestCode, ResponseCode

UNKNOWN = "unknown"
"""Label value of a request code that is not one of the 23 (and of a response code not in ResponseCode)."""

_RESPONSE_NAMES = {int(code): code.name for code in ResponseCode}


class RequestCodeMetrics:
    """The counters of one request code: answers by response code name, and handling time."""

    __slots__ = ("handled", "handling", "name")

    def __init__(self, name: str) -> None:
        self.name = name
        self.handled: dict[str, int] = {}
        self.handling = FastHistogram(REQUEST_DURATION_BUCKETS)


class RemotingRequestMetrics(Collector):
    """``namesrv_remoting_requests_total`` and ``namesrv_remoting_request_duration_seconds`` as plain
    integers per request code (a route lookup is handled in a few microseconds; prometheus-client's
    labelled ``inc()`` and ``observe()`` take a lock each). Updated in the event loop's thread only;
    a scrape copies them, and a histogram's count is its +Inf bucket, so each scraped one is consistent."""

    def __init__(self) -> None:
        self._codes = {int(code): RequestCodeMetrics(code.name) for code in RequestCode}
        for metrics in self._codes.values():
            metrics.handled[ResponseCode.SUCCESS.name] = 0
        self._unknown = RequestCodeMetrics(UNKNOWN)
        """Every request code that is not one of the 23 (one series, however many codes are sent)."""

    def finish(self, request_code: int, response_code: int, seconds: float) -> None:
        """Count one answered request and observe its handling time (``seconds``)."""
        metrics = self._codes.get(request_code) or self._unknown
        name = _RESPONSE_NAMES.get(response_code, UNKNOWN)
        handled = metrics.handled
        handled[name] = handled.get(name, 0) + 1
        metrics.handling.observe(seconds)

    def describe(self) -> Iterator[Metric]:
        """The families without samples (lets the registry check for name clashes)."""
        yield from self._families(())

    def collect(self) -> Iterator[Metric]:
        yield from self._families((*self._codes.values(), self._unknown))

    @staticmethod
    def _families(codes: tuple[RequestCodeMetrics, ...]) -> Iterator[Metric]:
        requests = CounterMetricFamily(
            "namesrv_remoting_requests",
            "Remoting requests handled, by request code and response code.",
            labels=["request_code", "response_code"],
        )
        duration = HistogramMetricFamily(
            "namesrv_remoting_request_duration_seconds",
            "Time from the dispatch of a remoting request to its answer, by request code.",
            labels=["request_code"],
        )
        for metrics in codes:
            for response_code, count in list(metrics.handled.items()):
                requests.add_metric([metrics.name, response_code], count)
            buckets, total = metrics.handling.sample()
            if buckets[-1][1]:
                duration.add_metric([metrics.name], buckets, total)
        yield requests
        yield duration


class RemotingMetrics:
    """Counters and gauges of the remoting listener; series of every (request code, SUCCESS) exist from
    the start."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.requests = RemotingRequestMetrics()
        registry.register(self.requests)
        self.connections = Gauge("namesrv_remoting_connections", "Remoting connections open now.", registry=registry)
        self._opened = Counter(
            "namesrv_remoting_connections_opened", "Remoting connections accepted.", registry=registry
        )
        self.frame_errors = Counter(
            "namesrv_remoting_frame_errors",
            "Remoting connections closed because a frame could not be parsed.",
            registry=registry,
        )

        self.max_connections = Gauge(
            "namesrv_remoting_max_connections",
            "Remoting connections allowed at once (maxConnections).",
            registry=registry,
        )
        self.connections_refused = Counter(
            "namesrv_remoting_connections_refused",
            "Remoting connections closed by the connection cap (maxConnections), by reason.",
            ["reason"],
            registry=registry,
        )
        self.frames_refused = Counter(
            "namesrv_remoting_frames_refused",
            "Remoting connections closed because a frame took too long or unfinished frames held too much memory.",
            ["reason"],
            registry=registry,
        )
        self.partial_frame_bytes = Gauge(
            "namesrv_remoting_partial_frame_bytes",
            "Bytes held in remoting frames not yet decoded, all connections together.",
            registry=registry,
        )
        self.reads_paused = Counter(
            "namesrv_remoting_reads_paused",
            "Times a remoting connection stopped being read, by reason.",
            ["reason"],
            registry=registry,
        )
        self.end_of_input = Counter(
            "namesrv_remoting_end_of_input",
            "Remoting connections closed because the peer ended its input (FIN or reset), by whether the "
            "connection was being read (active) or not (paused).",
            ["reading"],
            registry=registry,
        )
        for reading in ("active", "paused"):
            self.end_of_input.labels(reading)
        for reason in ("max_connections", "idle_evicted", "max_connections_per_ip", "per_ip_evicted"):
            self.connections_refused.labels(reason)
        for reason in ("frame_timeout", "partial_frames_budget", "frame_too_large", "header_too_large"):
            self.frames_refused.labels(reason)
        for reason in ("write_buffer", "in_flight", "backlog"):
            self.reads_paused.labels(reason)

    def connection_opened(self) -> None:
        """A connection was accepted."""
        self._opened.inc()
        self.connections.inc()

    def connection_closed(self) -> None:
        """A connection ended."""
        self.connections.dec()

    def request_handled(self, request_code: int, response_code: int, seconds: float) -> None:
        """Count one request answered with ``response_code`` after ``seconds`` (event loop's thread)."""
        self.requests.finish(request_code, response_code, seconds)
