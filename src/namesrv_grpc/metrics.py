"""Prometheus metrics of the NameServer (prometheus-client), served on ``--metrics-port``.

Names follow Prometheus practice: prefix ``namesrv_``, base units (seconds), counters end in
``_total``, and no topic or address is ever a label value. Table sizes are read from the route table
at scrape time, so they are never stale. Rule ids (S13, S15, ...) are those of docs/rules.md.

- ``namesrv_brokers_live`` (gauge): broker addresses in brokerLiveTable
- ``namesrv_broker_names`` (gauge): broker names in brokerAddrTable
- ``namesrv_clusters`` (gauge): clusters in clusterAddrTable
- ``namesrv_topics`` (gauge): topics in topicQueueTable
- ``namesrv_queue_datas`` (gauge): QueueData entries over all topics
- ``namesrv_route_cache_bytes`` (gauge): bytes of encoded route answers kept, all serving processes
  together, and ``namesrv_route_cache_evictions_total`` (counter): answers dropped to stay within
  ``routeCacheMaxBytes`` (:mod:`namesrv_grpc.core.route_answers`)
- ``namesrv_route_table_digest`` (gauge): content digest of the routes (every QueueData and
  BrokerData, :mod:`namesrv_grpc.core.digest`); equal on NameServers that hold the same routes
- ``namesrv_answer_bytes{answer}`` (gauge): the estimated size of the answers that grow with the
  table, ``topic_list`` (GET_ALL_TOPIC_LIST_FROM_NAMESERVER) and ``cluster_info``
  (GET_BROKER_CLUSTER_INFO), and ``namesrv_answer_max_bytes`` (gauge): the most an answer may be
  (registrations that would pass it are refused, :mod:`namesrv_grpc.core.capacity`; 0 = no bound)
- ``namesrv_route_table_busy_seconds_total`` (counter): time the route-table process spent applying
  writes (registrations, their bodies, removals, KV changes, expiry scans); its rate is the share of
  one core the writes take, 1 = saturated: writes then queue in the serving processes
- ``namesrv_registrations_total{result}`` (counter): RegisterBroker calls by result (REGISTRATION_RESULTS)
- ``namesrv_unregistrations_total`` (counter): brokers removed by UnregisterBroker
- ``namesrv_broker_expirations_total`` (counter): brokers removed for silence (S13)
- ``namesrv_broker_session_losses_total`` (counter): brokers removed because their session ended (S15)
- ``namesrv_body_checksum_failures_total`` (counter): registrations refused with BODY_CHECKSUM_MISMATCH
- ``namesrv_broker_registration_conflicts_total`` (counter): registrations that took a broker back
  from another run of the same broker (two agents for one broker name and id)
- ``namesrv_kv_config_writes_total`` (counter): KV config changes persisted
- ``namesrv_kv_config_flushes_total{result}`` (counter, ``ok``/``failed``): writes of the KV config
  file, and ``namesrv_kv_config_writes_per_flush`` (histogram): the KV writes each made durable
  (group commit, :mod:`namesrv_grpc.processes.kv_group_commit`)
- ``namesrv_broker_notifications_total{result}`` (counter): NOTIFY_MIN_BROKER_ID_CHANGE messages to
  brokers, ``sent``/``failed``/``dropped`` (S53; :mod:`namesrv_grpc.remoting.notifier`)
- ``namesrv_registration_duration_seconds{protocol}`` (histogram): time to process a registration,
  by front door: ``remoting`` (REGISTER_BROKER) or ``grpc`` (RegisterBroker)
- ``namesrv_route_lookup_duration_seconds{protocol}`` (histogram): time to answer a route lookup, by
  front door: ``remoting`` (GET_ROUTEINFO_BY_TOPIC, what RocketMQ's own clients send) or ``grpc``
  (PickupTopicRoute)
- ``namesrv_gc_pause_seconds{generation}`` (histogram): garbage-collection pauses by generation
  (``0``, ``1``, ``2`` = full), timed with ``gc.callbacks`` (:mod:`namesrv_grpc.runtime.pauses`)
- ``namesrv_event_loop_lag_seconds`` (histogram): how late the event loop runs a callback scheduled
  every 100 ms (:mod:`namesrv_grpc.runtime.pauses`)
- ``namesrv_snapshot_exports_total{result}`` (counter): route snapshots exported, ``ok`` or ``failed``
- ``namesrv_snapshot_export_duration_seconds`` (histogram): time to export one route snapshot
- ``namesrv_auth_refusals_total{reason}`` (counter): requests refused by the ACL (``--acl-file``), by
  reason: ``access_denied``, ``bad_signature``, ``unknown_access_key``, ``stale_date_time``
- ``namesrv_audit_lines_suppressed_total{reason}`` (counter): audit lines not written, ``repeat``
  (identical events within ``auditRepeatWindowSeconds``, summarised), ``refusals`` (over 10 refusals
  a minute of one identity and RPC), ``rate`` (over ``auditLogLinesPerSecond``)
  (:mod:`namesrv_grpc.security.audit`)
- ``namesrv_grpc_refusals_total{reason}`` (counter): gRPC calls refused and streams ended by a bound
  of what one peer may make a serving process hold (docs/limits.md, "gRPC door"), by reason
  (:data:`GRPC_REFUSAL_REASONS`); ``namesrv_grpc_calls_paused_total{reason}`` (counter): calls held
  back before being handled by those bounds (``write_buffer``, ``write_buffer_total``);
  ``namesrv_grpc_unsent_answer_bytes`` (gauge): bytes of unary answers handed to gRPC and not yet
  sent (:mod:`namesrv_grpc.grpc_api.unsent_answers`)
- ``namesrv_tls_certificate_expiry_timestamp_seconds`` (gauge) and ``namesrv_tls_reloads_total{result}``
  (counter, ``ok``/``failed``): only with TLS on, see :class:`namesrv_grpc.security.tls.TlsCollector`
- ``namesrv_build_info{version}`` (gauge): always 1
- ``namesrv_processes{role}`` (gauge): processes of the NameServer alive now, by role (``supervisor``,
  ``route_table``, ``serving``), and ``namesrv_serving_process_restarts_total`` (counter): serving
  processes started again after they exited (:mod:`namesrv_grpc.processes.supervisor`)

Every process of a NameServer keeps its own registry; ``/metrics`` (served by the supervisor) sums
them: counters and histograms over every serving process, the route table's gauges from the
route-table process, ``process_*`` over all processes (memory and CPU of the whole NameServer).
- ``process_*`` (CPU seconds, resident memory, open fds, start time) and ``python_*`` (version,
  garbage collection): prometheus-client's standard collectors
- ``grpc_server_started_total``, ``grpc_server_handled_total``, ``grpc_server_handling_seconds``: see
  :mod:`namesrv_grpc.grpc_api.grpc_metrics`; ``namesrv_remoting_requests_total`` and
  ``namesrv_remoting_request_duration_seconds``, their remoting twins: see
  :mod:`namesrv_grpc.remoting.remoting_metrics`
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from importlib import metadata
from typing import TYPE_CHECKING

from prometheus_client import (
    GC_COLLECTOR,
    PLATFORM_COLLECTOR,
    PROCESS_COLLECTOR,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    Info,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from namesrv_grpc.core.errors import BodyChecksumMismatchError, NamesrvError
from namesrv_grpc.runtime.pauses import GC_GENERATIONS
from namesrv_grpc.security.audit import suppressed_lines

if TYPE_CHECKING:  # an annotation only: namesrv's supervisor and broker-agent import this module without the table
    from namesrv_grpc.core.route_table import RouteInfoManager

REGISTRATION_RESULTS = (
    "ok",
    "invalid_field",
    "malformed_body",
    "body_checksum_mismatch",
    "stale_broker_state",
    "internal",
)
"""Values of the ``result`` label of ``namesrv_registrations_total`` (initialised to 0): ``ok``, the
reason of a refusal in lower case, ``internal`` for an unexpected exception."""


PROTOCOLS = ("remoting", "grpc")
"""Values of the ``protocol`` label (the front door a request came through) of
``namesrv_registration_duration_seconds`` and ``namesrv_route_lookup_duration_seconds`` (both
initialised: the two doors always listen)."""

ROUTE_LOOKUP_BUCKETS = (0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.1, 1.0)
"""``namesrv_route_lookup_duration_seconds`` buckets (seconds); 0.01 is the alert's threshold."""

REQUEST_DURATION_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
"""Buckets of the per-request histograms of both doors (``grpc_server_handling_seconds``,
``namesrv_remoting_request_duration_seconds``): most requests of a NameServer take well under 1 ms."""

REGISTRATION_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
"""``namesrv_registration_duration_seconds`` buckets (seconds); 0.25 is the alert's threshold."""


KV_WRITES_PER_FLUSH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
"""``namesrv_kv_config_writes_per_flush`` buckets (KV writes per file write)."""

AUTH_REFUSAL_REASONS = ("access_denied", "bad_signature", "unknown_access_key", "stale_date_time")
"""Values of the ``reason`` label of ``namesrv_auth_refusals_total`` (initialised to 0)."""


GRPC_REFUSAL_REASONS = (
    "write_buffer",
    "write_buffer_total",
    "watch_topics_per_peer",
    "watch_topics",
    "watch_unread",
    "unbound_sessions_per_peer",
    "unbound_sessions",
    "unbound_session_ended",
    "stream_resets",
)
"""Values of the ``reason`` label of ``namesrv_grpc_refusals_total`` (initialised to 0), one per bound:
``write_buffer``/``write_buffer_total`` (a call held back by ``grpcWriteBufferHighWaterMark``/
``grpcWriteBufferMaxTotalBytes`` for ``grpcWriteBufferWaitMillis``),
``watch_topics_per_peer``/``watch_topics`` (``routeWatchMaxTopicsPerPeer``/``routeWatchMaxTopicsTotal``),
``watch_unread`` (a watch ended after ``routeWatchMaxUnreadMillis`` unread), ``unbound_sessions_per_peer``/
``unbound_sessions`` (``maxUnboundBrokerSessionsPerPeer``/``maxUnboundBrokerSessions``) and
``unbound_session_ended`` (a session ended for not binding to a registered broker within
``brokerSessionHelloTimeoutMillis``), ``stream_resets`` (a connection closed for resetting more
than ``grpcMaxStreamResetsPerSecond`` streams a second: HTTP/2 rapid reset)."""


def package_version() -> str:
    """The installed version of namesrv-grpc, or "unknown" when run from a source tree."""
    try:
        return metadata.version("namesrv-grpc")
    except metadata.PackageNotFoundError:
        return "unknown"


class FastHistogram:
    """A label-less histogram as plain integers: :meth:`observe` is a ``bisect`` and two additions,
    several times cheaper than prometheus-client's (which takes a lock). Only one thread (the event
    loop's) may observe; :meth:`sample` may run in any thread (a scrape)."""

    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: Iterable[float]) -> None:
        self.bounds = tuple(sorted(bounds))
        self.counts = [0] * (len(self.bounds) + 1)
        self.sum = 0.0

    def observe(self, seconds: float) -> None:
        """Count one observation (Prometheus ``le`` buckets: a value equal to a bound is in it)."""
        self.counts[bisect.bisect_left(self.bounds, seconds)] += 1
        self.sum += seconds

    def sample(self) -> tuple[list[tuple[str, float]], float]:
        """Cumulative ``(le, count)`` buckets ending with ``+Inf`` (= the count), and the sum."""
        counts, total = list(self.counts), self.sum
        buckets, running = [], 0
        for bound, count in zip((*(repr(float(b)) for b in self.bounds), "+Inf"), counts, strict=True):
            running += count
            buckets.append((bound, float(running)))
        return buckets, total


class FastHistogramCollector(Collector):
    """Exports one :class:`FastHistogram` under ``name``."""

    def __init__(self, name: str, documentation: str, histogram: FastHistogram) -> None:
        self._name, self._documentation, self._histogram = name, documentation, histogram

    def collect(self) -> Iterator[HistogramMetricFamily]:
        family = HistogramMetricFamily(self._name, self._documentation)
        buckets, total = self._histogram.sample()
        family.add_metric([], buckets, total)
        yield family


class LabelledFastHistogramCollector(Collector):
    """Exports several :class:`FastHistogram` under ``name``, one per value of one label."""

    def __init__(self, name: str, documentation: str, label: str, histograms: dict[str, FastHistogram]) -> None:
        self._name, self._documentation, self._label, self._histograms = name, documentation, label, histograms

    def collect(self) -> Iterator[HistogramMetricFamily]:
        family = HistogramMetricFamily(self._name, self._documentation, labels=[self._label])
        for value, histogram in self._histograms.items():
            buckets, total = histogram.sample()
            family.add_metric([value], buckets, total)
        yield family


GC_PAUSE_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.015, 0.02, 0.03, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0)
"""``namesrv_gc_pause_seconds`` buckets (seconds); 0.02 is the bound docs/benchmarks.md holds it to."""

LOOP_LAG_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
"""``namesrv_event_loop_lag_seconds`` buckets (seconds); 0.1 is the alert's threshold."""


class _AuditCollector(Collector):
    """``namesrv_audit_lines_suppressed_total{reason}``: this process's audit lines not written
    (:func:`namesrv_grpc.security.audit.suppressed_lines`; the audit logger is one per process)."""

    def collect(self) -> Iterator[CounterMetricFamily]:
        family = CounterMetricFamily(
            "namesrv_audit_lines_suppressed",
            "Audit lines not written, by reason: repeat (identical events within auditRepeatWindowSeconds, "
            "summarised), refusals (refusals of one identity and RPC over 10 a minute), rate "
            "(auditLogLinesPerSecond).",
            labels=["reason"],
        )
        for reason, count in suppressed_lines().items():
            family.add_metric([reason], count)
        yield family


class _RouteTableCollector(Collector):
    """Gauges of the route table's sizes, read at scrape time."""

    def __init__(self, route_table: RouteInfoManager) -> None:
        self._route_table = route_table

    def collect(self) -> Iterator[GaugeMetricFamily]:
        stats = self._route_table.stats()
        yield GaugeMetricFamily("namesrv_brokers_live", "Broker addresses in brokerLiveTable.", stats.brokers_live)
        yield GaugeMetricFamily("namesrv_broker_names", "Broker names in brokerAddrTable.", stats.broker_names)
        yield GaugeMetricFamily("namesrv_clusters", "Clusters in clusterAddrTable.", stats.clusters)
        yield GaugeMetricFamily("namesrv_topics", "Topics in topicQueueTable.", stats.topics)
        yield GaugeMetricFamily("namesrv_queue_datas", "QueueData entries over all topics.", stats.queue_datas)
        topic_list, cluster_info = self._route_table.capacity.answer_sizes()
        sizes = GaugeMetricFamily(
            "namesrv_answer_bytes",
            "Estimated bytes of the answers that grow with the table (remoting JSON), by answer.",
            labels=["answer"],
        )
        sizes.add_metric(["topic_list"], topic_list)
        sizes.add_metric(["cluster_info"], cluster_info)
        yield sizes
        yield GaugeMetricFamily(
            "namesrv_answer_max_bytes",
            "The most an answer may be; registrations that would pass it are refused (0 = no bound).",
            self._route_table.limits.max_answer_bytes,
        )
        yield GaugeMetricFamily(
            "namesrv_route_table_digest",
            "Content digest of the routes (every QueueData and BrokerData; 52-bit hash, order independent): "
            "NameServers holding the same routes report the same value.",
            self._route_table.route_digest(),
        )


class _RouteAnswersCollector(Collector):
    """The encoded route answers a process keeps (``routeCacheMaxBytes``), read at scrape time."""

    def __init__(self, route_table: RouteInfoManager) -> None:
        self._answers = route_table.route_answers

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        yield GaugeMetricFamily(
            "namesrv_route_cache_bytes",
            "Bytes of encoded route answers kept for the next lookups (routeCacheMaxBytes per serving process).",
            self._answers.bytes,
        )
        yield CounterMetricFamily(
            "namesrv_route_cache_evictions",
            "Route answers dropped to stay within routeCacheMaxBytes (encoded again when next asked for).",
            self._answers.evictions,
        )


def register_standard_collectors(registry: CollectorRegistry) -> None:
    """Add prometheus-client's ``process_*`` (CPU, memory, fds, start time), ``python_info`` and
    ``python_gc_*`` series to a custom registry (the default registry has them; ours is our own so
    that several servers can run in one process). A process holds one set of these series, so one
    registry per process should carry them: callers pass ``standard_collectors=False`` otherwise."""
    for collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):
        registry.register(collector)


class NamesrvMetrics:
    """The NameServer's metrics in their own registry (so several servers can run in one process)."""

    def __init__(
        self,
        route_table: RouteInfoManager,
        registry: CollectorRegistry | None = None,
        *,
        standard: bool = True,
        table_stats: bool = True,
    ) -> None:
        """``standard``: also export the ``process_*`` and ``python_*`` series (see
        :func:`register_standard_collectors`); ``table_stats``: the route table's sizes and digest
        (the route-table process's; a serving process's replica has no live table)."""
        self.registry = registry or CollectorRegistry()
        if table_stats:
            self.registry.register(_RouteTableCollector(route_table))
        self.registry.register(_RouteAnswersCollector(route_table))
        if standard:
            register_standard_collectors(self.registry)
        self._add_write_metrics()
        self._add_latency_metrics()
        self._add_snapshot_metrics()
        self._add_refusal_metrics()
        Info("namesrv_build", "Build information.", registry=self.registry).info({"version": package_version()})

    def _add_write_metrics(self) -> None:
        """Registrations, broker removals, the route-table process's busy time, KV config writes."""
        self.registrations = Counter(
            "namesrv_registrations", "RegisterBroker calls by result.", ["result"], registry=self.registry
        )
        for result in REGISTRATION_RESULTS:
            self.registrations.labels(result)
        self.unregistrations = Counter(
            "namesrv_unregistrations", "Brokers removed by UnregisterBroker.", registry=self.registry
        )
        self.expirations = Counter(
            "namesrv_broker_expirations",
            "Brokers removed for silence (docs/rules.md S13).",
            registry=self.registry,
        )
        self.route_table_busy = Counter(
            "namesrv_route_table_busy_seconds",
            "Seconds the route-table process spent applying writes and expiry scans (rate: share of one core).",
            registry=self.registry,
        )
        self.session_losses = Counter(
            "namesrv_broker_session_losses",
            "Brokers removed because their session with this NameServer ended (docs/rules.md S15).",
            registry=self.registry,
        )
        self.body_checksum_failures = Counter(
            "namesrv_body_checksum_failures",
            "RegisterBroker calls refused because the body's CRC32C did not match (BODY_CHECKSUM_MISMATCH).",
            registry=self.registry,
        )
        self.registration_conflicts = Counter(
            "namesrv_broker_registration_conflicts",
            "Registrations that took a broker (cluster, name, id) back from another run of the same broker "
            "that had taken it before: two agents fight over one broker.",
            registry=self.registry,
        )
        self.kv_config_writes = Counter(
            "namesrv_kv_config_writes", "KV config changes persisted.", registry=self.registry
        )
        self.kv_config_flushes = Counter(
            "namesrv_kv_config_flushes",
            "Writes of the KV config file (each holds every KV write that arrived while the one before it "
            "was written: group commit), by result (ok, failed). Route-table process.",
            ["result"],
            registry=self.registry,
        )
        for result in ("ok", "failed"):
            self.kv_config_flushes.labels(result)
        self.kv_config_writes_per_flush = Histogram(
            "namesrv_kv_config_writes_per_flush",
            "KV writes (PUT_KV_CONFIG, DELETE_KV_CONFIG) made durable by one write of the KV config file.",
            buckets=KV_WRITES_PER_FLUSH_BUCKETS,
            registry=self.registry,
        )

    def _add_latency_metrics(self) -> None:
        """Registration and route-lookup durations, GC pauses, event-loop lag."""
        self.registration_seconds = Histogram(
            "namesrv_registration_duration_seconds",
            "Time to process a broker registration, by front door (remoting REGISTER_BROKER, gRPC RegisterBroker).",
            ["protocol"],
            buckets=REGISTRATION_BUCKETS,
            registry=self.registry,
        )
        for protocol in PROTOCOLS:
            self.registration_seconds.labels(protocol)
        self.route_lookup_seconds = {protocol: FastHistogram(ROUTE_LOOKUP_BUCKETS) for protocol in PROTOCOLS}
        """By front door (:data:`PROTOCOLS`). Observed on every lookup (the event loop's thread only), so
        plain integers, not a lock."""
        self.registry.register(
            LabelledFastHistogramCollector(
                "namesrv_route_lookup_duration_seconds",
                "Time to answer a route lookup, by front door (remoting GET_ROUTEINFO_BY_TOPIC, gRPC "
                "PickupTopicRoute).",
                "protocol",
                self.route_lookup_seconds,
            )
        )
        self.gc_pause_seconds = {generation: FastHistogram(GC_PAUSE_BUCKETS) for generation in GC_GENERATIONS}
        """Observed by :class:`namesrv_grpc.runtime.pauses.GcPauses` (collections never overlap: one writer)."""
        self.registry.register(
            LabelledFastHistogramCollector(
                "namesrv_gc_pause_seconds",
                "Garbage-collection pauses (every thread waits), by generation (2 = full collection).",
                "generation",
                self.gc_pause_seconds,
            )
        )
        self.event_loop_lag_seconds = FastHistogram(LOOP_LAG_BUCKETS)
        """Observed by :class:`namesrv_grpc.runtime.pauses.LoopLagProbe` on the event loop's thread."""
        self.registry.register(
            FastHistogramCollector(
                "namesrv_event_loop_lag_seconds",
                "How late the event loop ran a callback scheduled every 100 ms (requests wait as long).",
                self.event_loop_lag_seconds,
            )
        )

    def _add_snapshot_metrics(self) -> None:
        """Route snapshot exports: count by result, duration."""
        self.snapshot_exports = Counter(
            "namesrv_snapshot_exports",
            "Route snapshots exported, by result (ok, failed).",
            ["result"],
            registry=self.registry,
        )
        for result in ("ok", "failed"):
            self.snapshot_exports.labels(result)
        self.snapshot_export_seconds = Histogram(
            "namesrv_snapshot_export_duration_seconds",
            "Time to export a route snapshot (copy, Parquet, commit).",
            buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0),
            registry=self.registry,
        )

    def _add_refusal_metrics(self) -> None:
        """Refusals (ACL, gRPC bounds), suppressed audit lines, unsent gRPC answers."""
        self.auth_refusals = Counter(
            "namesrv_auth_refusals",
            "Requests refused by the ACL, by reason (no identities or addresses as labels).",
            ["reason"],
            registry=self.registry,
        )
        for reason in AUTH_REFUSAL_REASONS:
            self.auth_refusals.labels(reason)
        self.registry.register(_AuditCollector())
        self.grpc_refusals = Counter(
            "namesrv_grpc_refusals",
            "gRPC calls refused and streams ended by a bound of what one peer may make the server hold, by reason.",
            ["reason"],
            registry=self.registry,
        )
        for reason in GRPC_REFUSAL_REASONS:
            self.grpc_refusals.labels(reason)
        self.grpc_calls_paused = Counter(
            "namesrv_grpc_calls_paused",
            "gRPC calls held back before being handled because their connection (write_buffer) or all "
            "connections (write_buffer_total) have too many answers not read yet.",
            ["reason"],
            registry=self.registry,
        )
        for reason in ("write_buffer", "write_buffer_total"):
            self.grpc_calls_paused.labels(reason)
        self.grpc_unsent_answer_bytes = Gauge(
            "namesrv_grpc_unsent_answer_bytes",
            "Bytes of gRPC answers handed to gRPC and not sent yet (the client has not read them).",
            registry=self.registry,
        )

    @contextmanager
    def registration(self, protocol: str) -> Iterator[None]:
        """Time a registration that came through the front door ``protocol`` (one of
        :data:`PROTOCOLS`) and count it by result (``ok`` or the error reason, lower case)."""
        start = time.perf_counter()
        try:
            yield
        except NamesrvError as error:
            self.registrations.labels(error.reason.lower()).inc()
            if isinstance(error, BodyChecksumMismatchError):
                self.body_checksum_failures.inc()
            raise
        except Exception:
            self.registrations.labels("internal").inc()
            raise
        else:
            self.registrations.labels("ok").inc()
        finally:
            self.registration_seconds.labels(protocol).observe(time.perf_counter() - start)
