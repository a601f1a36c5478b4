"""gRPC server metrics by method and status code, named as go-grpc-prometheus names them.

* ``grpc_server_started_total{grpc_type,grpc_service,grpc_method}``: RPCs started;
* ``grpc_server_handled_total{grpc_type,grpc_service,grpc_method,grpc_code}``: RPCs completed, by
  their final status code (``OK``, ``NOT_FOUND``, ... as Python's ``grpc.StatusCode`` names them);
* ``grpc_server_handling_seconds{grpc_type,grpc_service,grpc_method}``: histogram of the time from
  the start of the handler to its end.

``grpc_type`` is ``unary``, ``client_stream``, ``server_stream`` or ``bidi_stream``.
:meth:`GrpcServerMetrics.preregister` creates one series per method of the given services at 0:
``handled_total{grpc_code="OK"}``, the denominator of error ratios, so that ``rate()`` and alerts
see it from the first scrape (Prometheus' "avoid missing metrics"). A method's other series (its
``started_total``, ``handling_seconds`` and other codes) appear with its first call: a NameServer
whose clients all speak remoting exports 31 zero series for its gRPC door, not every status code
times every method (go-grpc-prometheus' ``InitializeMetrics``: 527 series, 186 KB of /metrics).

Cost: a route lookup's whole handling is a few microseconds, so the counters are plain Python
integers per method (:class:`MethodMetrics`, looked up once when the handler is registered, see
:mod:`namesrv_grpc.grpc_api.handlers`), turned into Prometheus samples only when scraped. Updating
one costs two additions and a ``bisect``; prometheus-client's ``labels(...).inc()`` with its lock
costs several times that on every call. Handlers run in the event loop's thread, so the counters
need no lock; a scrape (in the metrics thread) copies them, and a histogram's count is its +Inf
bucket, so each scraped histogram is consistent.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Iterator
from typing import Any

import grpc
from google.protobuf.descriptor import ServiceDescriptor
from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from namesrv_grpc.metrics import REQUEST_DURATION_BUCKETS, FastHistogram

HANDLING_BUCKETS = REQUEST_DURATION_BUCKETS
"""Buckets of ``grpc_server_handling_seconds`` (those of the remoting twin too): most calls of a
NameServer take well under 1 ms."""

Context = grpc.aio.ServicerContext[Any, Any]
Labels = tuple[str, str, str]
"""(grpc_type, grpc_service, grpc_method)."""

CODE_NAMES = {code: code.name for code in grpc.StatusCode}

OK = grpc.StatusCode.OK.name
"""The ``grpc_code`` whose series every known method has from the start."""


def rpc_type(client_streaming: bool, server_streaming: bool) -> str:
    """The ``grpc_type`` label of a method."""
    if client_streaming and server_streaming:
        return "bidi_stream"
    if client_streaming:
        return "client_stream"
    if server_streaming:
        return "server_stream"
    return "unary"


class MethodMetrics:
    """The counters of one method: RPCs started, completed by code, and handling time."""

    __slots__ = ("handled", "handling", "labels", "started")

    def __init__(self, labels: Labels, buckets: Iterable[float]) -> None:
        self.labels = labels
        self.started = 0
        self.handled: dict[str, int] = {}
        self.handling = FastHistogram(buckets)

    def finish(self, code: str, seconds: float) -> None:
        """One RPC completed with status ``code`` (a ``grpc.StatusCode`` name) after ``seconds``."""
        handled = self.handled
        handled[code] = handled.get(code, 0) + 1
        self.handling.observe(seconds)


class GrpcServerMetrics(Collector):
    """The three metric families, registered in ``registry`` as one collector."""

    def __init__(self, registry: CollectorRegistry | None, buckets: Iterable[float] = HANDLING_BUCKETS) -> None:
        self._buckets = tuple(buckets)
        self._methods: dict[Labels, MethodMetrics] = {}
        if registry is not None:
            registry.register(self)

    def method(self, labels: Labels) -> MethodMetrics:
        """The counters of one method (created at 0 on first use)."""
        metrics = self._methods.get(labels)
        if metrics is None:
            metrics = self._methods[labels] = MethodMetrics(labels, self._buckets)
        return metrics

    def preregister(self, services: Iterable[ServiceDescriptor]) -> None:
        """Create the ``handled_total{grpc_code="OK"}`` series of every method of ``services`` at 0
        (the rest of a method's series appear with its first call)."""
        for service in services:
            for method in service.methods:
                labels = (rpc_type(method.client_streaming, method.server_streaming), service.full_name, method.name)
                self.method(labels).handled.setdefault(OK, 0)

    def start(self, labels: Labels) -> float:
        """Count a started RPC; return its start time for :meth:`finish`."""
        self.method(labels).started += 1
        return time.perf_counter()

    def finish(self, labels: Labels, started: float, code: grpc.StatusCode) -> None:
        """Count a completed RPC with its final status code and observe its handling time."""
        self.method(labels).finish(code.name, time.perf_counter() - started)

    def describe(self) -> Iterator[Metric]:
        """The families without samples (lets the registry check for name clashes)."""
        yield from self._families(())

    def collect(self) -> Iterator[Metric]:
        """Samples of every method: ``handled_total`` of the codes seen (and OK of every preregistered
        method); ``started_total`` and ``handling_seconds`` of the methods called at least once."""
        yield from self._families(list(self._methods.values()))

    def _families(self, methods: Iterable[MethodMetrics]) -> Iterator[Metric]:
        label_names = ["grpc_type", "grpc_service", "grpc_method"]
        started = CounterMetricFamily(
            "grpc_server_started", "Total number of RPCs started on the server.", labels=label_names
        )
        handled = CounterMetricFamily(
            "grpc_server_handled",
            "Total number of RPCs completed on the server, regardless of success or failure.",
            labels=[*label_names, "grpc_code"],
        )
        handling = HistogramMetricFamily(
            "grpc_server_handling_seconds",
            "Histogram of response latency (seconds) of gRPC that had been application-level handled by the server.",
            labels=label_names,
        )
        for metrics in methods:
            labels = list(metrics.labels)
            for code, count in list(metrics.handled.items()):
                handled.add_metric([*labels, code], count)
            if metrics.started:
                started.add_metric(labels, metrics.started)
                buckets, total = metrics.handling.sample()
                handling.add_metric(labels, buckets, total)
        yield started
        yield handled
        yield handling


def final_code(context: Context, error: BaseException | None) -> grpc.StatusCode:
    """The status code an RPC ends with: the one set on ``context`` (``set_code`` or ``abort``),
    else CANCELLED when the handler was cancelled, UNKNOWN when it raised, OK when it returned."""
    code = context.code()
    if isinstance(code, grpc.StatusCode):
        return code
    if isinstance(code, int):  # some grpc versions keep the raw integer
        for candidate in grpc.StatusCode:
            if candidate.value[0] == code:
                return candidate
    if error is None:
        return grpc.StatusCode.OK
    if isinstance(error, (asyncio.CancelledError, GeneratorExit)):  # the client went away
        return grpc.StatusCode.CANCELLED
    return grpc.StatusCode.UNKNOWN
