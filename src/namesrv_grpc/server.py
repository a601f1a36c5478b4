"""Wiring (RocketMQ ``NamesrvController``): the RocketMQ remoting listener, the ``grpc.aio`` server with
the three services, health checking and reflection, the periodic expiry scan (S13), metrics, and
orderly shutdown.

Where a request goes: ``grpc_api/servicers.py`` (protobuf) or ``remoting/handlers.py`` (RocketMQ
remoting) -> ``core/processor.py`` (rules, validation) -> ``core/route_table.py`` / ``core/kvconfig.py``
(state).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import signal
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING
from wsgiref.simple_server import WSGIServer

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection, reflection_pb2
from prometheus_client import start_http_server

from namesrv.v1 import (
    admin_service_pb2,
    kv_config_service_pb2,
    name_server_service_pb2,
)
from namesrv_grpc.config import NamesrvConfig
from namesrv_grpc.core.kvconfig import KVConfigManager
from namesrv_grpc.core.processor import NameServer
from namesrv_grpc.core.route_table import Clock, RouteInfoManager, wall_clock_millis
from namesrv_grpc.decode_pool import BodyDecodePool
from namesrv_grpc.event_loop import LoopPacer
from namesrv_grpc.grpc_api.grpc_metrics import GrpcServerMetrics
from namesrv_grpc.grpc_api.handlers import add_services
from namesrv_grpc.grpc_api.route_watches import RouteWatchCollector, new_route_watches
from namesrv_grpc.grpc_api.servicers import AdminServicer, KVConfigServicer, NameServerServicer
from namesrv_grpc.grpc_api.sessions import BrokerSessions
from namesrv_grpc.log_limits import RateLimitFilter, suppressed_lines_counter
from namesrv_grpc.log_limits import install as install_log_filter
from namesrv_grpc.metrics import NamesrvMetrics
from namesrv_grpc.pauses import GcPauses, LoopLagProbe, freeze_startup_objects
from namesrv_grpc.remoting.budget import RemotingLimits, default_grpc_max_connections
from namesrv_grpc.remoting.handlers import RemotingHandlers
from namesrv_grpc.remoting.notifier import BrokerNotifier
from namesrv_grpc.remoting.remoting_metrics import RemotingMetrics
from namesrv_grpc.remoting.server import RemotingServer
from namesrv_grpc.security.setup import OPEN_WARNING, reload_acl, server_guard, server_tls
from namesrv_grpc.security.tls import TlsCollector

if TYPE_CHECKING:  # pyarrow (about 40 MB resident) is loaded only when a snapshot is taken
    from namesrv_grpc.snapshot import SnapshotExporter, SnapshotInfo

log = logging.getLogger(__name__)

SERVICE_NAMES = (
    name_server_service_pb2.DESCRIPTOR.services_by_name["NameServerService"].full_name,
    kv_config_service_pb2.DESCRIPTOR.services_by_name["KVConfigService"].full_name,
    admin_service_pb2.DESCRIPTOR.services_by_name["AdminService"].full_name,
)
"""Fully qualified names of our services, as health checking and reflection list them."""

SERVICE_DESCRIPTORS = (
    name_server_service_pb2.DESCRIPTOR.services_by_name["NameServerService"],
    kv_config_service_pb2.DESCRIPTOR.services_by_name["KVConfigService"],
    admin_service_pb2.DESCRIPTOR.services_by_name["AdminService"],
    health_pb2.DESCRIPTOR.services_by_name["Health"],
    reflection_pb2.DESCRIPTOR.services_by_name["ServerReflection"],
)
"""Every service on the server; their gRPC metrics exist from the start (go-grpc-prometheus)."""

FIRST_SCAN_DELAY_MILLIS = 5_000
"""The first expiry scan runs this long after start (or one interval, when shorter) (S13)."""


class NamesrvServer:
    """One NameServer process: build with a config, ``await start()``, ``await stop()``."""

    def __init__(self, config: NamesrvConfig, clock: Clock = wall_clock_millis) -> None:
        """Load the KV config file (raises KVConfigFileError) and build the route table."""
        self.route_table = RouteInfoManager(clock)
        self.pacer = LoopPacer()
        """Big registrations prepared in worker threads let this server's event loop go first."""
        kv_path = Path(config.kv_config_path).expanduser()
        self.nameserver = NameServer(config, self.route_table, KVConfigManager(kv_path))
        self.body_decode_pool = BodyDecodePool()
        """Large registration bodies are decoded in its child process (started at the first one)."""
        self.nameserver.body_decoder = self.body_decode_pool
        self.metrics = NamesrvMetrics(self.route_table)
        self.grpc_metrics = GrpcServerMetrics(self.metrics.registry)
        self.gc_pauses = GcPauses(self.metrics.gc_pause_seconds)
        self.loop_lag = LoopLagProbe(self.metrics.event_loop_lag_seconds)
        self.grpc_metrics.preregister(SERVICE_DESCRIPTORS)
        self.tls = server_tls(config)
        """Server TLS (None = plaintext); raises TlsFileError for unusable files."""
        if self.tls is not None:
            self.metrics.registry.register(TlsCollector(self.tls))
        self.guard = server_guard(config, self.metrics.auth_refusals)
        """The ACL check before every request (open without ``--acl-file``); raises ConfigError."""
        self.sessions = BrokerSessions(self.nameserver, self.metrics, self.guard)
        self.route_watches = new_route_watches(self.nameserver)
        self.metrics.registry.register(RouteWatchCollector(self.route_watches, self.nameserver))
        self.health = health.aio.HealthServicer()
        self.broker_notifier = BrokerNotifier(self.metrics.registry)
        """NOTIFY_MIN_BROKER_ID_CHANGE to brokers (S53; sends only with notifyMinBrokerIdChanged)."""
        self.nameserver.min_broker_id_senders.append(self.broker_notifier)
        self.remoting = RemotingServer(
            RemotingHandlers(self.nameserver, self.metrics, RemotingMetrics(self.metrics.registry), self.guard),
            limits=RemotingLimits(
                frame_max_length=config.remoting_frame_max_length,
                header_max_fields=config.remoting_header_max_fields,
                max_connections=config.max_connections,
                max_frames_per_read=config.remoting_max_frames_per_read,
                max_frames_per_turn=config.remoting_max_frames_per_turn,
                accepts_per_turn=config.remoting_accepts_per_turn,
                max_requests_in_flight=config.remoting_max_requests_in_flight,
                write_buffer_high_water_mark=config.write_buffer_high_water_mark,
                write_buffer_low_water_mark=min(
                    config.write_buffer_low_water_mark, config.write_buffer_high_water_mark
                ),
                partial_frames_max_bytes=config.remoting_partial_frames_max_bytes,
                frame_read_timeout_millis=config.remoting_frame_read_timeout_millis,
            ),
            idle_timeout_seconds=lambda: self.config.server_channel_max_idle_time_seconds,
            ssl_context=self.tls.remoting_context() if self.tls is not None else None,
            permissive_tls=self.tls is not None and self.tls.settings.mode == "permissive",
        )
        suppressed = suppressed_lines_counter(self.metrics.registry)
        self.log_filter = RateLimitFilter(
            burst=config.peer_log_lines_per_kind, on_suppressed=lambda name: suppressed.labels(name).inc()
        )
        """Rate limit of the log lines peers can cause (installed while serving)."""
        self._remove_log_filter: Callable[[], None] | None = None
        self._health_server: grpc.aio.Server | None = None
        self.health_port = 0
        self._tls_watch_task: asyncio.Task[None] | None = None
        self.port = 0
        """The bound gRPC port (after :meth:`start`)."""
        self._server: grpc.aio.Server | None = None
        self._scan_task: asyncio.Task[None] | None = None
        self._snapshot_task: asyncio.Task[None] | None = None
        self._snapshot_lock = asyncio.Lock()
        self._snapshot_dir = Path(config.snapshot_dir).expanduser()  # snapshotDir: not changeable at run time
        self.snapshot_exporter: SnapshotExporter | None = None
        """Created by :meth:`start` (the default identity needs the bound port)."""
        self._metrics_server: tuple[WSGIServer, threading.Thread] | None = None

    @property
    def config(self) -> NamesrvConfig:
        """The effective configuration (UpdateNamesrvConfig may replace it)."""
        return self.nameserver.config

    @property
    def remoting_port(self) -> int:
        """The bound remoting port (after :meth:`start`)."""
        return self.remoting.port

    async def start(self) -> int:
        """Bind both listeners (remoting first), start serving, start the expiry scan and metrics;
        return the bound gRPC port (:attr:`remoting_port` holds the remoting one).

        Raises RuntimeError when a port cannot be bound.
        """
        config = self.config
        fix_malloc_mmap_threshold()
        self._remove_log_filter = install_log_filter(self.log_filter)
        self.broker_notifier.attach(asyncio.get_running_loop())
        self.route_table.pace = self.pacer
        self.route_table.pace_locked = self.pacer.release_gil
        self.pacer.attach(asyncio.get_running_loop())
        await self.remoting.start(config.bind_address, config.listen_port)
        options = [
            ("grpc.max_receive_message_length", config.grpc_max_message_size),
            ("grpc.max_send_message_length", config.grpc_max_message_size),
            ("grpc.so_reuseport", 0),
            # Find dead broker sessions (S15) even when no packet says so: ping every 10 s, give up after 5 s.
            ("grpc.keepalive_time_ms", 10_000),
            ("grpc.keepalive_timeout_ms", 5_000),
            # grpcio 1.85 times pings out after this, not keepalive_timeout_ms (default 60 s): without
            # it a silent peer (SIGSTOP, a cut cable) held its session or route watch for a minute.
            ("grpc.http2.ping_timeout_ms", 5_000),
            ("grpc.keepalive_permit_without_calls", 1),
            ("grpc.http2.min_ping_interval_without_data_ms", 5_000),
            ("grpc.http2.max_pings_without_data", 0),
            # Limits (docs/field-limits.md): calls in flight per connection, and idle connections closed
            # (a broker's open session is a call, so its connection is never idle).
            ("grpc.max_concurrent_streams", config.grpc_max_concurrent_streams),
            ("grpc.max_connection_idle_ms", config.grpc_max_connection_idle_millis),
            # Connections at once: beyond it new ones are closed, so a flood cannot take the file
            # descriptors the remoting listener and the files need (issue 20).
            ("grpc.max_allowed_incoming_connections", config.grpc_max_connections or default_grpc_max_connections()),
        ]
        # No interceptors: every method is registered once, wrapped for error mapping and metrics,
        # with a serializer that passes pre-encoded bytes through (grpc_api/handlers.py).
        # Calls in flight, all connections together (long ones included: watches, broker sessions);
        # beyond it a call is RESOURCE_EXHAUSTED at once instead of queueing (issue 20).
        max_calls = config.grpc_max_concurrent_calls or (
            config.route_watch_max_watchers + config.max_broker_sessions + DEFAULT_GRPC_SHORT_CALLS
        )
        server = grpc.aio.server(options=options, maximum_concurrent_rpcs=max_calls)
        self.route_watches.attach(asyncio.get_running_loop())
        add_services(
            server,
            self.grpc_metrics,
            [
                (
                    SERVICE_DESCRIPTORS[0],
                    NameServerServicer(self.nameserver, self.metrics, self.sessions, self.route_watches, self.guard),
                ),
                (SERVICE_DESCRIPTORS[1], KVConfigServicer(self.nameserver, self.metrics, self.guard)),
                (SERVICE_DESCRIPTORS[2], AdminServicer(self.nameserver, self.export_snapshot, self.guard)),
                (SERVICE_DESCRIPTORS[3], self.health),
                (
                    SERVICE_DESCRIPTORS[4],
                    reflection.aio.ReflectionServicer((*SERVICE_NAMES, health.SERVICE_NAME, reflection.SERVICE_NAME)),
                ),
            ],
        )
        address = f"{_host_for_bind(config.bind_address)}:{config.grpc_server_port}"
        try:
            if self.tls is not None:
                self.port = server.add_secure_port(address, self.tls.grpc_credentials())
            else:
                self.port = server.add_insecure_port(address)
        except RuntimeError as exc:
            await self.remoting.stop(0)
            raise RuntimeError(f"cannot listen on {address}: {exc}") from None
        await server.start()
        self._server = server
        if config.health_port:
            await self._start_health_server(config)
        if self.guard.acl is None:
            log.warning("%s", OPEN_WARNING)
        if self.tls is not None:
            self._tls_watch_task = asyncio.create_task(self.tls.watch(), name="tls-file-watch")
        for name in ("", *SERVICE_NAMES):
            await self.health.set(name, health_pb2.HealthCheckResponse.SERVING)
        self._scan_task = asyncio.create_task(self._scan_loop(), name="scan-not-active-broker")
        log.debug("%d objects of the start frozen out of garbage collection", freeze_startup_objects())
        self.gc_pauses.install()
        self.loop_lag.start()
        self._snapshot_task = asyncio.create_task(self._snapshot_loop(), name="route-snapshots")
        if config.metrics_port:
            self._metrics_server = start_http_server(
                config.metrics_port, addr=config.bind_address, registry=self.metrics.registry
            )
        log.info(
            "listening on %s:%d (remoting), %s:%d (gRPC, %s), metrics %s, health-only port %s, ACL %s",
            config.bind_address,
            self.remoting_port,
            config.bind_address,
            self.port,
            ("mTLS" if self.tls.require_client_cert else "TLS") if self.tls is not None else "plaintext",
            config.metrics_port or "off",
            self.health_port or "off",
            config.acl_file or "none",
        )
        return self.port

    async def _start_health_server(self, config: NamesrvConfig) -> None:
        """A plaintext server with only ``grpc.health.v1`` (same statuses as the main port), for
        Kubernetes ``grpc`` probes, which cannot speak TLS."""
        server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
        health_pb2_grpc.add_HealthServicer_to_server(self.health, server)
        address = f"{_host_for_bind(config.bind_address)}:{config.health_port}"
        try:
            self.health_port = server.add_insecure_port(address)
        except RuntimeError as exc:
            raise RuntimeError(f"cannot listen on {address} (--health-port): {exc}") from None
        await server.start()
        self._health_server = server

    def reload_security(self) -> None:
        """SIGHUP: load the certificate files and the ACL file again; what fails to load is
        reported and the old one stays. The route table is untouched."""
        if self.tls is not None:
            self.tls.reload("SIGHUP")
        reload_acl(self.guard, self.config)

    async def _scan_loop(self) -> None:
        """S13: scan every ``scanNotActiveBrokerInterval`` ms (re-read each time, it may be updated)."""
        await asyncio.sleep(min(FIRST_SCAN_DELAY_MILLIS, self.config.scan_not_active_broker_interval) / 1000)
        while True:
            try:
                # Off the event loop: an expired broker may take 100,000 topics with it.
                removed = await asyncio.to_thread(self.nameserver.scan_not_active_broker)
                self.metrics.expirations.inc(len(removed))
            except Exception:  # a scan must never kill the loop
                log.exception("expiry scan failed")
            await asyncio.sleep(self.config.scan_not_active_broker_interval / 1000)

    async def export_snapshot(self) -> SnapshotInfo:
        """Export a route snapshot (``AdminService.ExportRouteSnapshot``, ``snapshotInterval``): the
        copy, Parquet and commit run in a worker thread, one export at a time, so RPCs go on.
        Raises SnapshotWriteError."""
        if self._server is None:
            raise RuntimeError("the server is not started")
        async with self._snapshot_lock:
            if self.snapshot_exporter is None:
                from namesrv_grpc.snapshot import SnapshotExporter

                self.snapshot_exporter = SnapshotExporter(
                    self.route_table,
                    self._snapshot_dir,
                    namesrv_identity(self.config, self.port),
                    retention_hours=lambda: self.config.snapshot_retention_hours,
                )
            started = time.perf_counter()
            try:
                info = await asyncio.to_thread(self.snapshot_exporter.export)
            except Exception:
                self.metrics.snapshot_exports.labels("failed").inc()
                raise
            finally:
                self.metrics.snapshot_export_seconds.observe(time.perf_counter() - started)
            self.metrics.snapshot_exports.labels("ok").inc()
            return info

    async def _snapshot_loop(self) -> None:
        """Export every ``snapshotInterval`` seconds; 0 = off (re-read each second, it may be updated)."""
        last = time.monotonic()
        while True:
            interval = self.config.snapshot_interval
            if not interval:
                last = time.monotonic()
                await asyncio.sleep(1)
                continue
            wait = last + interval - time.monotonic()
            if wait > 0:
                await asyncio.sleep(min(wait, 1.0))
                continue
            last = time.monotonic()
            try:
                await self.export_snapshot()
            except Exception:  # a failed export must never kill the loop
                log.exception("route snapshot failed")

    async def stop(self, grace_seconds: float | None = None) -> None:
        """Orderly shutdown: health NOT_SERVING, stop accepting (both listeners), drain in-flight calls
        for up to ``grace_seconds`` (default ``shutdownGracePeriodMillis``), close the remoting
        connections, stop the scan and metrics."""
        if grace_seconds is None:
            grace_seconds = self.config.shutdown_grace_period_millis / 1000
        await self.health.enter_graceful_shutdown()
        self.sessions.close_all()
        self.route_watches.close_all()
        if self._server is not None:
            await asyncio.gather(self.remoting.stop(grace_seconds), self._server.stop(grace_seconds))
        else:
            await self.remoting.stop(grace_seconds)
        if self._health_server is not None:
            await self._health_server.stop(0)
        await self.broker_notifier.close()
        await self.loop_lag.stop()
        self.gc_pauses.uninstall()
        self.body_decode_pool.close()
        for task in (self._scan_task, self._snapshot_task, self._tls_watch_task):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if self._metrics_server is not None:
            http_server, thread = self._metrics_server
            http_server.shutdown()
            thread.join(timeout=5)
        self.guard.audit_log.close()
        if self._remove_log_filter is not None:
            self._remove_log_filter()
            self._remove_log_filter = None

    async def serve_until_signalled(self) -> None:
        """Run until SIGTERM or SIGINT, then :meth:`stop`."""
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        reloads: set[asyncio.Task[None]] = set()

        def on_sighup() -> None:  # read the files in a worker thread, never on the event loop
            task = asyncio.create_task(asyncio.to_thread(self.reload_security))
            reloads.add(task)
            task.add_done_callback(reloads.discard)

        loop.add_signal_handler(signal.SIGHUP, on_sighup)
        await stop.wait()
        log.info("signal received: draining in-flight calls and stopping")
        await self.stop()


def namesrv_identity(config: NamesrvConfig, port: int) -> str:
    """The NameServer's identity in snapshots: ``snapshotNamesrvId``, else ``host:port`` with the bind
    address, or the host name when bound to every address."""
    if config.snapshot_namesrv_id:
        return config.snapshot_namesrv_id
    host = config.bind_address
    if host in ("", "0.0.0.0", "::", "[::]"):
        host = socket.gethostname()
    return f"{host}:{port}"


DEFAULT_GRPC_SHORT_CALLS = 10_000
"""Unary calls in flight at once, beyond the watches and sessions, when ``grpcMaxConcurrentCalls`` is 0."""


def fix_malloc_mmap_threshold(threshold: int = 1024 * 1024) -> bool:
    """glibc only: allocations of ``threshold`` bytes or more always get their own mapping, returned
    to the system when freed. glibc's default raises the threshold (up to 32 MiB) each time such a
    block is freed, after which large buffers (an inflated registration body) come from per-thread
    heaps and stay resident for good (issue 20: pipelined deflate bombs left +750 MB). Returns
    whether it was set."""
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return False
    m_mmap_threshold = -3
    return bool(libc.mallopt(m_mmap_threshold, threshold))


def _host_for_bind(host: str) -> str:
    """gRPC wants IPv6 literals in brackets."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host
