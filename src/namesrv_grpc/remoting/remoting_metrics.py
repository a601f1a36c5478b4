"""Prometheus metrics of the remoting front door, in the NameServer's registry (the remoting twin of
:mod:`namesrv_grpc.grpc_api.grpc_metrics`). Labels are bounded: request codes by name (23 known ones,
anything else is ``unknown``), response codes by name.

- ``namesrv_remoting_requests_total{request_code, response_code}`` (counter): requests answered (or
  handled, for oneway ones) by request code and the response code of the answer
- ``namesrv_remoting_connections`` (gauge): remoting connections open now
- ``namesrv_remoting_connections_opened_total`` (counter): connections accepted
- ``namesrv_remoting_frame_errors_total`` (counter): connections closed because a frame could not be parsed
- ``namesrv_remoting_max_connections`` (gauge): the connection cap (``maxConnections``)
- ``namesrv_remoting_connections_refused_total{reason}`` (counter): connections closed by the cap:
  ``max_connections`` (a new one refused: every open one has sent requests) or ``idle_evicted`` (an
  open one that never sent a request, closed to make room)
- ``namesrv_remoting_frames_refused_total{reason}`` (counter): connections closed over a frame bound:
  ``frame_timeout`` (``remotingFrameReadTimeoutMillis``), ``partial_frames_budget``
  (``remotingPartialFramesMaxBytes``), ``frame_too_large`` (``remotingFrameMaxLength``),
  ``header_too_large`` (``remotingHeaderMaxFields``; these two also count in ``frame_errors``)
- ``namesrv_remoting_partial_frame_bytes`` (gauge): bytes held in frames not yet decoded
- ``namesrv_remoting_reads_paused_total{reason}`` (counter): times a connection stopped being read:
  ``write_buffer`` (answers not read by the peer, ``writeBufferHighWaterMark``), ``in_flight``
  (``remotingMaxRequestsInFlight``), ``backlog`` (more than ``remotingMaxFramesPerRead`` frames in
  one read, or the turn's ``remotingMaxFramesPerTurn`` spent)
- brokers removed because their remoting connection closed (S15) count in
  ``namesrv_broker_session_losses_total``, as gRPC session losses do (:mod:`namesrv_grpc.metrics`)
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge

from namesrv_grpc.remoting.codes import RequestCode, ResponseCode

UNKNOWN = "unknown"
"""Label value of a request code that is not one of the 23 (and of a response code not in ResponseCode)."""

_REQUEST_NAMES = {int(code): code.name for code in RequestCode}
_RESPONSE_NAMES = {int(code): code.name for code in ResponseCode}


class RemotingMetrics:
    """Counters and gauges of the remoting listener; series of every (request code, SUCCESS) exist from
    the start."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.requests = Counter(
            "namesrv_remoting_requests",
            "Remoting requests handled, by request code and response code.",
            ["request_code", "response_code"],
            registry=registry,
        )
        self._children: dict[tuple[int, int], Counter] = {}
        for code in RequestCode:
            self.requests.labels(code.name, ResponseCode.SUCCESS.name)
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
        for reason in ("max_connections", "idle_evicted"):
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

    def request_handled(self, request_code: int, response_code: int) -> None:
        """Count one request (cheap: the labelled child is looked up once per pair)."""
        if request_code not in _REQUEST_NAMES:
            request_code = -1  # one series (and one cache entry) for every unknown code
        if response_code not in _RESPONSE_NAMES:
            response_code = -1
        child = self._children.get((request_code, response_code))
        if child is None:
            child = self.requests.labels(
                _REQUEST_NAMES.get(request_code, UNKNOWN), _RESPONSE_NAMES.get(response_code, UNKNOWN)
            )
            self._children[(request_code, response_code)] = child
        child.inc()
