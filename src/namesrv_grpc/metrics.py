"""Prometheus metrics of the NameServer (prometheus-client), served on ``--metrics-port``.

Names follow Prometheus practice: prefix ``namesrv_``, base units (seconds), counters end in
``_total``, and no topic or address is ever a label value. Table sizes are read from the route table
at scrape time, so they are never stale.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import metadata

from prometheus_client import CollectorRegistry, Counter, Histogram, Info
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from namesrv_grpc.errors import NamesrvError
from namesrv_grpc.route_table import RouteInfoManager

REGISTRATION_RESULTS = (
    "ok",
    "invalid_field",
    "malformed_body",
    "body_checksum_mismatch",
    "stale_broker_state",
)
"""Values of the ``result`` label of ``namesrv_registrations_total`` (initialised to 0)."""


def package_version() -> str:
    """The installed version of namesrv-grpc, or "unknown" when run from a source tree."""
    try:
        return metadata.version("namesrv-grpc")
    except metadata.PackageNotFoundError:
        return "unknown"


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


class NamesrvMetrics:
    """The NameServer's metrics in their own registry (so several servers can run in one process)."""

    def __init__(self, route_table: RouteInfoManager, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.registry.register(_RouteTableCollector(route_table))
        self.registrations = Counter(
            "namesrv_registrations", "RegisterBroker calls by result.", ["result"], registry=self.registry
        )
        for result in REGISTRATION_RESULTS:
            self.registrations.labels(result)
        self.unregistrations = Counter(
            "namesrv_unregistrations", "Brokers removed by UnregisterBroker.", registry=self.registry
        )
        self.expirations = Counter(
            "namesrv_broker_expirations", "Brokers removed for silence (S13).", registry=self.registry
        )
        self.kv_config_writes = Counter(
            "namesrv_kv_config_writes", "KV config changes persisted.", registry=self.registry
        )
        self.registration_seconds = Histogram(
            "namesrv_registration_duration_seconds",
            "Time to process a RegisterBroker call.",
            registry=self.registry,
        )
        self.route_lookup_seconds = Histogram(
            "namesrv_route_lookup_duration_seconds",
            "Time to answer a PickupTopicRoute call.",
            buckets=(0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.1, 1.0),
            registry=self.registry,
        )
        Info("namesrv_build", "Build information.", registry=self.registry).info({"version": package_version()})

    @contextmanager
    def registration(self) -> Iterator[None]:
        """Time a registration and count it by result (``ok`` or the error reason, lower case)."""
        start = time.perf_counter()
        try:
            yield
        except NamesrvError as error:
            self.registrations.labels(error.reason.lower()).inc()
            raise
        else:
            self.registrations.labels("ok").inc()
        finally:
            self.registration_seconds.observe(time.perf_counter() - start)

    @contextmanager
    def route_lookup(self) -> Iterator[None]:
        """Time a route lookup."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self.route_lookup_seconds.observe(time.perf_counter() - start)
