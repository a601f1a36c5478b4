"""A serving process: both front doors (RocketMQ remoting and gRPC, each listening with
``SO_REUSEPORT`` on the shared ports, so the kernel spreads connections over the serving processes)
over a replica of the route table.

Reads (routes in both JSON forms and protobuf, zone-mode routes, cluster info, topic lists, KV reads)
are answered from the replica, with no round trip; writes go to the route-table process as they
arrived (:class:`~namesrv_grpc.processes.route_table_client.RouteTableClient`). The replica is fed
by the route-table process's change stream (:mod:`namesrv_grpc.core.replication`): each change is
applied on this process's event loop, between requests, and acknowledged, so the route-table process
answers a write only once every serving process holds it.

Where a request goes: ``remoting/handlers.py`` (one method per request code) or
``grpc_api/servicers.py`` (one method per RPC) -> ``core/reader.py`` for reads, or
a command (``core/commands.py``) -> the route-table process for writes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection, reflection_pb2

from namesrv.v1 import admin_service_pb2, kv_config_service_pb2, name_server_service_pb2
from namesrv_grpc.config import NamesrvConfig
from namesrv_grpc.core.kvconfig import KVConfigManager
from namesrv_grpc.core.reader import NameServerReader
from namesrv_grpc.core.replication import Change
from namesrv_grpc.core.route_table import RouteInfoManager
from namesrv_grpc.grpc_api.grpc_metrics import GrpcServerMetrics
from namesrv_grpc.grpc_api.handlers import add_services
from namesrv_grpc.grpc_api.route_watches import RouteWatchCollector, new_route_watches
from namesrv_grpc.grpc_api.servicers import AdminServicer, KVConfigServicer, NameServerServicer
from namesrv_grpc.grpc_api.sessions import BrokerSessions
from namesrv_grpc.metrics import NamesrvMetrics
from namesrv_grpc.processes.channel import Channel
from namesrv_grpc.processes.child import LEDGER_FILE, ROUTE_TABLE_SOCKET, ControlLink, ProcessParams, run_child
from namesrv_grpc.processes.ledger import Ledger, LedgerRow
from namesrv_grpc.processes.route_table_client import RouteTableClient
from namesrv_grpc.remoting.budget import RemotingLimits, default_grpc_max_connections
from namesrv_grpc.remoting.handlers import RemotingHandlers
from namesrv_grpc.remoting.notifier import BrokerNotifier
from namesrv_grpc.remoting.remoting_metrics import RemotingMetrics
from namesrv_grpc.remoting.server import RemotingServer
from namesrv_grpc.runtime.event_loop import prioritize, prioritize_grpc_completions
from namesrv_grpc.runtime.log_limits import RateLimitFilter, suppressed_lines_counter
from namesrv_grpc.runtime.log_limits import install as install_log_filter
from namesrv_grpc.runtime.pauses import GcPauses, LoopLagProbe, freeze_startup_objects
from namesrv_grpc.runtime.policy import OffLoopDecodes, share
from namesrv_grpc.security.setup import reload_acl, server_guard, server_tls
from namesrv_grpc.security.tls import TlsCollector

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

DEFAULT_GRPC_SHORT_CALLS = 10_000
"""Unary calls in flight at once, beyond the watches and sessions, when ``grpcMaxConcurrentCalls`` is 0."""


NOTIFYING_PROCESS = 1
"""The serving process that sends ``NOTIFY_MIN_BROKER_ID_CHANGE`` to brokers (S53; the change stream
carries them to every serving process, one sends). While it is being started again, notifications
are not sent: they are best-effort in RocketMQ too (never retried; the broker's own
``GET_BROKER_MEMBER_GROUP`` poll catches up)."""


class ServingProcess:
    """One serving process: build from the params and the replica's first state, ``await start()``,
    ``await stop()``."""

    def __init__(self, params: ProcessParams, route_table_link: Channel, first: Change) -> None:
        """Raises TlsFileError, ConfigError (the supervisor checked both files before)."""
        assert first.config is not None
        config: NamesrvConfig = first.config
        self.params = params
        self.link = route_table_link
        self.nameserver = NameServerReader(config, RouteInfoManager(), KVConfigManager(None))
        self.nameserver.started_at = params.started_monotonic
        self.nameserver.apply_change(first)
        self.writes = RouteTableClient(route_table_link)
        self.metrics = NamesrvMetrics(self.nameserver.route_table, table_stats=False)
        self.grpc_metrics = GrpcServerMetrics(self.metrics.registry)
        self.grpc_metrics.preregister(SERVICE_DESCRIPTORS)
        self.notifier = BrokerNotifier(self.metrics.registry) if params.index == NOTIFYING_PROCESS else None
        """The NameServer's only outgoing requests (S53), sent by one serving process."""
        if self.notifier is not None:
            self.nameserver.min_broker_id_senders.append(self.notifier)
        self.gc_pauses = GcPauses(self.metrics.gc_pause_seconds)
        self.loop_lag = LoopLagProbe(self.metrics.event_loop_lag_seconds)
        self.tls = server_tls(config)
        if self.tls is not None:
            self.metrics.registry.register(TlsCollector(self.tls))
        self.guard = server_guard(config, self.metrics.auth_refusals, params.workers)
        self.sessions = BrokerSessions(self.nameserver, self.writes, self.metrics, self.guard)
        self.route_watches = new_route_watches(self.nameserver)
        self.metrics.registry.register(RouteWatchCollector(self.route_watches, self.nameserver))
        self.health = health.aio.HealthServicer()
        self.decodes = OffLoopDecodes()
        """Where both doors decode registration bodies: one at a time off the event loop."""
        self.remoting = RemotingServer(
            RemotingHandlers(
                self.nameserver,
                self.writes,
                self.metrics,
                RemotingMetrics(self.metrics.registry),
                self.guard,
                self.decodes,
            ),
            limits=RemotingLimits.from_config(config, params.workers),
            idle_timeout_seconds=lambda: self.config.server_channel_max_idle_time_seconds,
            ssl_context=self.tls.remoting_context() if self.tls is not None else None,
            permissive_tls=self.tls is not None and self.tls.settings.mode == "permissive",
            shared=LedgerRow(Ledger(Path(params.run_dir) / LEDGER_FILE, params.workers + 1), params.index),
        )
        suppressed = suppressed_lines_counter(self.metrics.registry)
        self.log_filter = RateLimitFilter(
            burst=config.peer_log_lines_per_kind, on_suppressed=lambda name: suppressed.labels(name).inc()
        )
        self._remove_log_filter: Callable[[], None] | None = None
        self._server: grpc.aio.Server | None = None
        self._health_server: grpc.aio.Server | None = None
        self._tls_watch_task: asyncio.Task[None] | None = None
        self._stopped = False

    @property
    def config(self) -> NamesrvConfig:
        """The effective configuration (UpdateNamesrvConfig replaces it, through the change stream)."""
        return self.nameserver.config

    def apply(self, change: Change) -> None:
        """The next change of the route-table process: applied now, then acknowledged."""
        self.nameserver.apply_change(change)
        self.link.send(("applied", change.seq))

    async def start(self) -> None:
        """Listen on both ports (``SO_REUSEPORT``) and serve. Raises RuntimeError when a port
        cannot be bound."""
        config = self.config
        params = self.params
        self._remove_log_filter = install_log_filter(self.log_filter)
        await self.remoting.start(config.bind_address, params.remoting_port, reuse_port=True)
        server = grpc.aio.server(
            options=grpc_options(config, params.workers), maximum_concurrent_rpcs=max_calls(config)
        )
        self.route_watches.attach(asyncio.get_running_loop())
        if self.notifier is not None:
            self.notifier.attach(asyncio.get_running_loop())
        add_services(
            server,
            self.grpc_metrics,
            [
                (
                    SERVICE_DESCRIPTORS[0],
                    NameServerServicer(
                        self.nameserver,
                        self.writes,
                        self.metrics,
                        self.sessions,
                        self.route_watches,
                        self.guard,
                        self.decodes,
                    ),
                ),
                (SERVICE_DESCRIPTORS[1], KVConfigServicer(self.nameserver, self.writes, self.metrics, self.guard)),
                (SERVICE_DESCRIPTORS[2], AdminServicer(self.nameserver, self.writes, self.guard)),
                (SERVICE_DESCRIPTORS[3], self.health),
                (
                    SERVICE_DESCRIPTORS[4],
                    reflection.aio.ReflectionServicer((*SERVICE_NAMES, health.SERVICE_NAME, reflection.SERVICE_NAME)),
                ),
            ],
        )
        address = f"{host_for_bind(config.bind_address)}:{params.grpc_port}"
        try:
            if self.tls is not None:
                server.add_secure_port(address, self.tls.grpc_credentials())
            else:
                server.add_insecure_port(address)
        except RuntimeError as exc:
            await self.remoting.stop(0)
            raise RuntimeError(f"cannot listen on {address}: {exc}") from None
        await server.start()
        self._server = server
        # Each step of a gRPC call comes back to this loop through one socket: not behind a flood's
        # thousands of ready connections (namesrv_grpc.runtime.event_loop).
        if not prioritize_grpc_completions(asyncio.get_running_loop()):
            log.warning("grpcio's completion socket was not found: gRPC calls are not prioritized under floods")
        if params.health_port:
            await self._start_health_server(config)
        if self.tls is not None:
            self._tls_watch_task = asyncio.create_task(self.tls.watch(), name="tls-file-watch")
        for name in ("", *SERVICE_NAMES):
            await self.health.set(name, health_pb2.HealthCheckResponse.SERVING)
        log.debug("%d objects of the start frozen out of garbage collection", freeze_startup_objects())
        self.gc_pauses.install()
        self.loop_lag.start()

    async def _start_health_server(self, config: NamesrvConfig) -> None:
        """A plaintext server with only ``grpc.health.v1`` (same statuses as the main port), for
        Kubernetes ``grpc`` probes, which cannot speak TLS."""
        server = grpc.aio.server(options=[("grpc.so_reuseport", 1)])
        health_pb2_grpc.add_HealthServicer_to_server(self.health, server)
        address = f"{host_for_bind(config.bind_address)}:{self.params.health_port}"
        try:
            server.add_insecure_port(address)
        except RuntimeError as exc:
            raise RuntimeError(f"cannot listen on {address} (--health-port): {exc}") from None
        await server.start()
        self._health_server = server

    async def route_table_silent(self, silent: bool) -> None:
        """The watchdog (:mod:`.watchdog`) says the route-table process does not answer (``True``)
        or answers again: health says NOT_SERVING meanwhile, on the gRPC port and the health port
        (writes wait; lookups still answer from this replica). Nothing changes once stopping
        (grpcio's servicer ignores a status set after ``enter_graceful_shutdown``)."""
        status = health_pb2.HealthCheckResponse.NOT_SERVING if silent else health_pb2.HealthCheckResponse.SERVING
        for name in ("", *SERVICE_NAMES):
            await self.health.set(name, status)

    def reload_security(self) -> None:
        """SIGHUP: load the certificate files and the ACL file again; what fails to load is
        reported and the old one stays."""
        if self.tls is not None:
            self.tls.reload("SIGHUP")
        reload_acl(self.guard, self.config)

    async def stop(self, grace_seconds: float | None = None) -> None:
        """Orderly shutdown: health NOT_SERVING, stop accepting (both listeners), drain in-flight calls
        for up to ``grace_seconds`` (default ``shutdownGracePeriodMillis``), close the remoting
        connections."""
        if self._stopped:
            return
        self._stopped = True
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
        await self.loop_lag.stop()
        if self.notifier is not None:
            await self.notifier.close()
        self.gc_pauses.uninstall()
        if self._tls_watch_task is not None:
            self._tls_watch_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._tls_watch_task
        self.guard.audit_log.close()
        if self._remove_log_filter is not None:
            self._remove_log_filter()
            self._remove_log_filter = None


def grpc_options(config: NamesrvConfig, workers: int = 1) -> list[tuple[str, Any]]:
    """The gRPC server's channel arguments (``SO_REUSEPORT``: every serving process listens on the
    port); ``grpcMaxConnections`` is shared among the ``workers`` serving processes."""
    return [
        ("grpc.max_receive_message_length", config.grpc_max_message_size),
        ("grpc.max_send_message_length", config.grpc_max_message_size),
        ("grpc.so_reuseport", 1),
        # Find dead broker sessions (S15) even when no packet says so: ping every 10 s, give up after 5 s.
        ("grpc.keepalive_time_ms", 10_000),
        ("grpc.keepalive_timeout_ms", 5_000),
        # grpcio 1.85 times pings out after this, not keepalive_timeout_ms (default 60 s): without
        # it a silent peer (SIGSTOP, a cut cable) held its session or route watch for a minute.
        ("grpc.http2.ping_timeout_ms", 5_000),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.min_ping_interval_without_data_ms", 5_000),
        ("grpc.http2.max_pings_without_data", 0),
        # Limits (docs/field-limits.md): calls in flight per connection (which also bounds what a
        # rapid-reset flood puts in grpc-core's queue of calls not taken yet, docs/limits.md), and idle
        # connections closed (a broker's open session is a call, so its connection is never idle).
        ("grpc.max_concurrent_streams", config.grpc_max_concurrent_streams),
        ("grpc.max_connection_idle_ms", config.grpc_max_connection_idle_millis),
        # Connections at once: beyond it new ones are closed, so a flood cannot take the file
        # descriptors the remoting listener and the files need (issue 20).
        (
            "grpc.max_allowed_incoming_connections",
            share(config.grpc_max_connections, workers) or default_grpc_max_connections(),
        ),
        # HTTP/2 rapid reset (issue 30): grpc-core keeps reset streams counted against
        # max_concurrent_streams until freed (its default, made explicit), but closes no connection;
        # its per-connection stream counters (channelz, on by default) let
        # grpc_api/stream_resets.py close the connections that reset faster than
        # grpcMaxStreamResetsPerSecond.
        ("grpc.http.overload_protection", 1),
        ("grpc.enable_channelz", 1),
        # Receive windows: HTTP/2's 64 KiB for a new stream, opened further only for the message a
        # call reads. grpc-core's bandwidth probe (on by default) announced 4 MiB per stream from the
        # start, which calls that never finish their message filled (slowloris, row 12v: peak RSS
        # +533 -> +257 MiB; docs/limits.md "Requests that never end").
        ("grpc.http2.bdp_probe", 0),
    ]


def max_calls(config: NamesrvConfig) -> int:
    """Calls in flight, all connections together (long ones included: watches, broker sessions);
    beyond it a call is RESOURCE_EXHAUSTED at once instead of queueing (issue 20)."""
    return config.grpc_max_concurrent_calls or (
        config.route_watch_max_watchers + config.max_broker_sessions + DEFAULT_GRPC_SHORT_CALLS
    )


def host_for_bind(host: str) -> str:
    """gRPC wants IPv6 literals in brackets."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


async def _main(params: ProcessParams, control: ControlLink) -> int:
    loop = asyncio.get_running_loop()
    link = await Channel.connect(os.path.join(params.run_dir, ROUTE_TABLE_SOCKET), "route-table process")
    prioritize(loop, link.socket)  # writes and changes are not held up by busy client connections
    link.send(("hello", params.index, os.getpid()))
    # the state arrives in pieces, then changes, then the ("serve", seq) that lets it listen
    # (route_table_process.Publisher.join)
    first: asyncio.Future[tuple[Change, bool]] = loop.create_future()
    serve: asyncio.Future[int] = loop.create_future()
    serving: ServingProcess | None = None
    backlog: list[tuple[Any, ...]] = []

    def handle(process: ServingProcess, message: tuple[Any, ...]) -> None:
        kind = message[0]
        if kind == "change":
            process.apply(message[1])
        elif kind == "state":
            process.nameserver.apply_change(message[1])
            if message[2]:
                link.send(("ready",))
        elif kind == "serve" and not serve.done():
            serve.set_result(message[1])

    def on_message(message: tuple[Any, ...]) -> None:
        if serving is not None:
            handle(serving, message)
        elif message[0] == "state" and not first.done():
            first.set_result((message[1], message[2]))
        else:
            backlog.append(message)

    reading = asyncio.create_task(link.serve(on_message))

    async def arrived(future: asyncio.Future[Any]) -> bool:
        """Whether ``future`` is done before the route-table process closes the link (said when not)."""
        waiting: list[asyncio.Future[Any]] = [future, reading]
        done, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        if future not in done:
            print(f"namesrv: serving process {params.index}: the route-table process closed the link", file=sys.stderr)
        return future in done

    if not await arrived(first):
        return 1
    state, last = first.result()
    serving = process = ServingProcess(params, link, state)
    if last:
        link.send(("ready",))
    for message in backlog:
        handle(process, message)
    control.handlers["metrics"] = lambda: list(process.metrics.registry.collect())
    control.handlers["route_table_silent"] = process.route_table_silent
    if not await arrived(serve):
        return 1
    try:
        await serving.start()
    except RuntimeError as exc:
        control.tell("failed", str(exc), 1)
        return 1
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    reloads: set[asyncio.Task[None]] = set()

    def on_sighup() -> None:  # read the files in a worker thread, never on the event loop
        task = asyncio.create_task(asyncio.to_thread(process.reload_security))
        reloads.add(task)
        task.add_done_callback(reloads.discard)

    loop.add_signal_handler(signal.SIGHUP, on_sighup)
    control.tell("serving", os.getpid())
    waits = [asyncio.create_task(stop.wait()), reading, asyncio.create_task(control.lost.wait())]
    await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    route_table_gone = reading.done() and not stop.is_set()
    await process.stop()
    link.close()
    if route_table_gone:
        log.error("serving process %d: the route-table process is gone; exiting", params.index)
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return run_child(argv, _main)


if __name__ == "__main__":
    raise SystemExit(main())
