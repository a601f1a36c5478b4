"""``namesrv`` itself: the supervisor of one route-table process and N serving processes, as nginx's
master is of its workers.

    namesrv (this process)        binds nothing it serves; reserves the ports, starts and watches the
    │                             children, serves /metrics (every process's metrics summed)
    ├── route-table process       the one writer: route table, KV config, expiry scan, snapshots
    ├── serving process 1         both doors on the shared ports (SO_REUSEPORT), a replica of the table
    └── serving process N

Ports: the supervisor binds the remoting and gRPC ports (and the health port) without listening on
them, so ``0`` resolves to one free port that every serving process then listens on (gRPC's own
multiprocessing example does the same); the kernel spreads new connections over the listening
processes. The first bind is exclusive (``SO_REUSEPORT`` is set after it), so a port that anything
else holds, a second ``namesrv`` included, is refused with exit code 2 instead of shared.

Failures: a serving process that exits is started again (its brokers stay in the routes until their
next registration or the S13 expiry: our process died, not their connections; docs/rules.md, S15);
if the route-table process exits, ``namesrv`` stops the serving processes and exits 1 with one line
saying so, for the service manager to restart it (as it would a crashed Java NameServer). A process
that runs but does not answer (stopped, starved, stuck) is the watchdog's (:mod:`.watchdog`).
/metrics never falls: a silent process's last values stand in, and an exited serving process's
counters are kept (:func:`counters_of`).
SIGTERM/SIGINT: the serving processes drain their calls and stop, then the route-table process, then
``namesrv`` exits 0. SIGHUP is passed on (TLS certificates and the ACL are loaded again).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from namesrv_grpc.config import NamesrvConfig
from namesrv_grpc.metrics import register_standard_collectors
from namesrv_grpc.processes.channel import Channel
from namesrv_grpc.processes.child import LEDGER_FILE, ProcessParams
from namesrv_grpc.processes.fork_server import ChildProcess, fork_server_died, start_child
from namesrv_grpc.processes.ledger import Ledger
from namesrv_grpc.processes.metrics_server import CoalescingCollector, MetricsServer
from namesrv_grpc.processes.watchdog import STALE_AFTER_SECONDS, watch
from namesrv_grpc.runtime.pipes import print_line
from namesrv_grpc.runtime.policy import default_worker_processes
from namesrv_grpc.security import OPEN_WARNING

log = logging.getLogger("namesrv")

RESTART_DELAY_SECONDS = 0.2
"""Wait before starting a serving process again (doubling, at most 5 s, while it keeps failing)."""
START_TIMEOUT_SECONDS = 60.0
"""A child that is not ready within this long is a failed start."""
METRICS_TIMEOUT_SECONDS = 5.0
"""How long a scrape waits for the children's metrics, at most (see :func:`metrics_wait_seconds`)."""
METRICS_MIN_WAIT_SECONDS = 0.5
"""The shortest wait for a child's metrics that it is asked for."""


def metrics_wait_seconds(silent_for: float) -> float | None:
    """How long a scrape waits for the metrics of a child silent for ``silent_for`` seconds: until it
    would count as silent (:data:`STALE_AFTER_SECONDS`), at least :data:`METRICS_MIN_WAIT_SECONDS`;
    None: not asked (its last values stand in). A scrape that comes in the first moments of a stall
    waits at most 2 s for it, not :data:`METRICS_TIMEOUT_SECONDS` (issue 39: 5.0 s)."""
    if silent_for >= STALE_AFTER_SECONDS:
        return None
    return min(METRICS_TIMEOUT_SECONDS, max(METRICS_MIN_WAIT_SECONDS, STALE_AFTER_SECONDS - silent_for))


class StartError(RuntimeError):
    """A child could not start; ``code`` is the exit code for ``namesrv`` (2: configuration, 1: other)."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


@dataclass(eq=False)
class Child:
    """A running child process and its control link."""

    role: str
    index: int
    process: ChildProcess
    control: Channel
    events: asyncio.Queue[tuple[Any, ...]] = field(default_factory=asyncio.Queue)
    reader: asyncio.Task[None] | None = None
    watch: asyncio.Task[None] | None = None
    """The watchdog's heartbeats (:mod:`.watchdog`), from when it serves."""
    silent_for: float = 0.0
    """Seconds its event loop has not answered the watchdog (0 while it answers)."""
    killed_silent: bool = False
    """The watchdog killed it for its silence."""
    metrics: list[Metric] = field(default_factory=list)
    """Its metric families as last collected: they stand in while it does not answer, and its
    counters are kept once it exited (:class:`_ProcessesCollector`)."""
    retired: bool = False
    """It exited and its counters moved to :attr:`Supervisor.retired`."""

    @property
    def name(self) -> str:
        return "route-table process" if self.role == "route_table" else f"serving process {self.index}"


def reserve_port(host: str, port: int, what: str) -> socket.socket:
    """A socket bound (not listening) to ``host:port`` that holds the port for the serving processes,
    which bind it too with ``SO_REUSEPORT``.

    It is bound *without* ``SO_REUSEPORT`` first, so the bind fails when anything at all holds the
    port: another program, or another ``namesrv`` (whose sockets would otherwise let this one join
    its ``SO_REUSEPORT`` group and take part of its connections); ``SO_REUSEPORT`` is set only once
    the port is ours, and the kernel then lets this server's serving processes join. One gap is
    left: ``SO_REUSEADDR`` (kept, so a restart is not refused for connections in TIME_WAIT) lets two
    sockets that both have it share a port while *neither listens*, so a second server that starts
    while no serving process of the first listens (the first one's own start-up, or the replacement
    of its only serving process) can still join. Raises StartError (exit code 2) naming the port
    and, where it can be found, the process that holds it."""
    bare = host.strip("[]")
    family = socket.AF_INET6 if ":" in bare else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((bare or "0.0.0.0", port))
    except OSError as exc:
        sock.close()
        holder = port_holder(port) if exc.errno == errno.EADDRINUSE else ""
        raise StartError(f"cannot listen on {host}:{port} ({what}): {exc.strerror or exc}{holder}", 2) from None
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    return sock


def port_holder(port: int) -> str:
    """``" (held by pid N: NAME)"`` for a process with a TCP socket on local ``port`` (listening, or
    bound as this supervisor's reservations are), or ``""`` when none can be told (another user's
    process without the permission to read it)."""
    try:
        for connection in psutil.net_connections(kind="tcp"):
            if connection.laddr and connection.laddr.port == port and connection.pid:
                name = psutil.Process(connection.pid).name()
                return f" (held by pid {connection.pid}: {name})"
    except (psutil.Error, OSError):
        pass
    return ""


class Supervisor:
    """Starts the children, keeps the serving processes running, and stops everything in order."""

    def __init__(self, config: NamesrvConfig, log_level: str = "INFO", log_format: str = "text") -> None:
        self.config = config
        self.log_level = log_level
        self.log_format = log_format
        self.workers = config.server_worker_processes or default_worker_processes()
        self.started = time.monotonic()
        self.run_dir = tempfile.mkdtemp(prefix="namesrv-")
        """Mode 0700: the route-table process's socket is reachable by this user only."""
        self._reserved: list[socket.socket] = []
        self.remoting_port = 0
        self.grpc_port = 0
        self.health_port = 0
        self.route_table: Child | None = None
        self.serving: dict[int, Child] = {}
        self.serving_ready: set[int] = set()
        """Indexes of the serving processes that said they serve and have not exited since (/ready)."""
        self.restarts = 0
        self.silences = {"route_table": 0, "serving": 0}
        """Times the watchdog found a process silent past ``processHeartbeatTimeoutMillis``, by role."""
        self.route_table_silent = False
        """The route-table process has not answered for ``processHeartbeatTimeoutMillis``."""
        self.retired: list[Metric] = []
        """The counters of serving processes that exited, as last collected (:func:`counters_of`)."""
        self._stopping = False
        self._metrics_server: MetricsServer | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.ledger: Ledger | None = None

    # ------------------------------------------------------------------ start

    async def start(self) -> None:
        """Reserve the ports, start the route-table process, then every serving process; return
        once all serve. Raises StartError: a port cannot be bound (exit code 2) or a child failed
        (with its exit code)."""
        self._loop = asyncio.get_running_loop()
        config = self.config
        for what, port, attribute in (
            ("remoting", config.listen_port, "remoting_port"),
            ("gRPC", config.grpc_server_port, "grpc_port"),
            ("--health-port", config.health_port, "health_port"),
        ):
            if attribute == "health_port" and not port:
                continue
            sock = reserve_port(config.bind_address, port, what)
            self._reserved.append(sock)
            setattr(self, attribute, sock.getsockname()[1])
        self.ledger = Ledger(Path(self.run_dir) / LEDGER_FILE, self.workers + 1, create=True)
        self.route_table = await self._spawn("route_table", 0)
        # The serving processes start at once too: their imports, most of a start-up, run while the
        # route-table process starts; each is told its params once the route-table process is ready.
        for index in range(1, self.workers + 1):
            self.serving[index] = await self._spawn("serving", index, send_params=False)
        await self._until(self.route_table, "ready")
        self._watch(self.route_table)
        for index, child in self.serving.items():
            child.control.send(("params", self.params(index)))
        await asyncio.gather(*(self._until(child, "serving") for child in self.serving.values()))
        self.serving_ready.update(self.serving)
        for child in self.serving.values():
            self._watch(child)
        if config.metrics_port:
            registry = CollectorRegistry()
            registry.register(CoalescingCollector(_ProcessesCollector(self).families))
            try:
                self._metrics_server = MetricsServer(
                    config.bind_address, config.metrics_port, registry, ready=self.readiness
                )
            except OSError as exc:
                holder = port_holder(config.metrics_port) if exc.errno == errno.EADDRINUSE else ""
                raise StartError(
                    f"cannot listen on {config.bind_address}:{config.metrics_port} (metrics): "
                    f"{exc.strerror or exc}{holder}",
                    2,
                ) from None

    async def _start_serving(self, index: int) -> None:
        child = await self._spawn("serving", index)
        self.serving[index] = child
        await self._until(child, "serving")
        self.serving_ready.add(index)
        self._watch(child)

    # ------------------------------------------------------------------ watchdog

    def _watch(self, child: Child) -> None:
        """Start the watchdog's heartbeats of ``child`` (:mod:`.watchdog`; module docstring there)."""
        timeout = self.config.process_heartbeat_timeout_millis / 1000

        def silent(seconds: float) -> bool:
            child.silent_for = seconds
            if child.role == "serving":
                if seconds < timeout:
                    return True
                self.silences["serving"] += 1
                log.error(
                    "serving process %d (pid %d) did not answer for %.1f s (processHeartbeatTimeoutMillis): "
                    "killed, to be started again",
                    child.index,
                    child.process.pid,
                    seconds,
                )
                self._kill_silent(child)
                return False
            if seconds >= timeout and not self.route_table_silent:
                self.silences["route_table"] += 1
                self.route_table_silent = True
                log.error(
                    "the route-table process (pid %d) did not answer for %.1f s (processHeartbeatTimeoutMillis): "
                    "health says NOT_SERVING until it does",
                    child.process.pid,
                    seconds,
                )
                self._tell_serving("route_table_silent", True)
            if seconds * 1000 >= self.config.route_table_heartbeat_exit_millis:
                log.error(
                    "the route-table process (pid %d) did not answer for %.1f s (routeTableHeartbeatExitMillis): "
                    "killed; stopping: restart namesrv",
                    child.process.pid,
                    seconds,
                )
                self._kill_silent(child)
                return False
            return True

        def answered() -> None:
            if child.role == "route_table" and self.route_table_silent:
                self.route_table_silent = False
                log.warning("the route-table process answers again after %.1f s: health says SERVING", child.silent_for)
                self._tell_serving("route_table_silent", False)
            child.silent_for = 0.0

        child.watch = asyncio.create_task(watch(child.control, silent, answered), name=f"watchdog {child.name}")

    @staticmethod
    def _kill_silent(child: Child) -> None:
        child.killed_silent = True
        with contextlib.suppress(ProcessLookupError):
            child.process.kill()

    def _tell_serving(self, method: str, *args: Any) -> None:
        """Call ``method`` on every serving process, answers not awaited (one that does not answer
        has its own heartbeats)."""
        for child in self.serving.values():
            if not child.control.closed:
                task = asyncio.create_task(child.control.call(method, *args))
                task.add_done_callback(_ignore_result)

    def readiness(self) -> tuple[bool, str]:
        """``(ready, why)`` for ``/ready`` on the metrics port: ready when the route-table process runs
        and every serving process serves (one being replaced after it exited is not). Called from
        the metrics server's thread; reads only."""
        if self._stopping:
            return False, "stopping"
        if self.route_table is None or self.route_table.process.returncode is not None:
            return False, "the route-table process is not running"
        if self.route_table_silent:
            return False, f"the route-table process has not answered for {self.route_table.silent_for:.0f} s"
        missing = [index for index in range(1, self.workers + 1) if index not in self.serving_ready]
        missing += [i for i, c in self.serving.items() if c.silent_for >= STALE_AFTER_SECONDS and i not in missing]
        if missing:
            return False, f"serving process {', '.join(map(str, missing))} not serving"
        return True, f"{self.workers} serving processes and the route-table process serve"

    def params(self, index: int) -> ProcessParams:
        return ProcessParams(
            config=self.config,
            run_dir=self.run_dir,
            started_monotonic=self.started,
            log_level=self.log_level,
            log_format=self.log_format,
            index=index,
            workers=self.workers,
            remoting_port=self.remoting_port,
            grpc_port=self.grpc_port,
            health_port=self.health_port,
        )

    async def _spawn(self, role: str, index: int, send_params: bool = True) -> Child:
        """Start a child process of ``role`` (``route_table`` or ``serving``) and send it its params
        (unless ``send_params`` is false: it waits for them after its imports)."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            process = await start_child(role, index, theirs)
        except OSError as exc:
            ours.close()
            raise StartError(f"cannot start the {role.replace('_', '-')} process: {exc}", 1) from None
        finally:
            theirs.close()
        reader, writer = await asyncio.open_unix_connection(sock=ours, limit=1 << 20)
        child = Child(role, index, process, Channel(reader, writer, f"{role} {index}"))
        if send_params:
            child.control.send(("params", self.params(index)))
        child.reader = asyncio.create_task(child.control.serve(child.events.put_nowait))
        return child

    async def _until(self, child: Child, state: str) -> None:
        """Wait for the child's ``state`` message. Raises StartError when it fails or exits first."""
        exited = asyncio.create_task(child.process.wait())
        try:
            async with asyncio.timeout(START_TIMEOUT_SECONDS):
                while True:
                    event = asyncio.create_task(child.events.get())
                    await asyncio.wait([event, exited], return_when=asyncio.FIRST_COMPLETED)
                    if not event.done():
                        event.cancel()
                        raise StartError(f"the {child.name} exited with code {exited.result()} while starting", 1)
                    message = event.result()
                    if message[0] == state:
                        return
                    if message[0] == "failed":
                        raise StartError(str(message[1]), int(message[2]))
        except TimeoutError:
            raise StartError(f"the {child.name} did not start within {START_TIMEOUT_SECONDS:.0f} s", 1) from None
        finally:
            if not exited.done():
                exited.cancel()

    # ------------------------------------------------------------------ run

    async def supervise(self, stop: asyncio.Event) -> int:
        """Keep the serving processes running until ``stop`` (return 0 after stopping all) or until
        the route-table process exits (stop the rest, return 1)."""
        assert self.route_table is not None
        waits: dict[asyncio.Task[Any], Child | None] = {asyncio.create_task(stop.wait()): None}
        waits[asyncio.create_task(self.route_table.process.wait())] = self.route_table
        for child in self.serving.values():
            waits[asyncio.create_task(child.process.wait())] = child
        delay = RESTART_DELAY_SECONDS
        while True:
            done, _ = await asyncio.wait(list(waits), return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                exited = waits.pop(task)
                if exited is None:  # SIGTERM / SIGINT
                    log.info("signal received: draining in-flight calls and stopping")
                    for pending in waits:
                        pending.cancel()
                    await self.stop()
                    return 0
                code = task.result()
                child = exited
                if await fork_server_died(child.process):
                    log.error(
                        "the fork server (pid %d) exited and took every child with it; stopping: restart namesrv",
                        child.process.fork_server_pid,
                    )
                    for pending in waits:
                        pending.cancel()
                    await self.stop()
                    return 1
                if child.role == "route_table":
                    if not child.killed_silent:  # else the watchdog said why already
                        log.error("the route-table process exited (%s); stopping: restart namesrv", _exit_text(code))
                    for pending in waits:
                        pending.cancel()
                    await self.stop()
                    return 1
                self.serving_ready.discard(child.index)
                self.retired = merge_families([self.retired, counters_of(child.metrics)])
                child.retired = True
                log.warning("serving process %d exited (%s); starting it again", child.index, _exit_text(code))
                if self.ledger is not None:
                    self.ledger.clear(child.index)  # what it held went with it
                await asyncio.sleep(delay)
                if stop.is_set():  # a stop signalled every process at once (systemd): no restart, stop next
                    continue
                self.restarts += 1
                try:
                    await self._start_serving(child.index)
                    delay = RESTART_DELAY_SECONDS
                except StartError as exc:
                    if stop.is_set():  # it met the stop while starting
                        log.info("serving process %d did not start again: namesrv is stopping", child.index)
                        continue
                    log.error("serving process %d did not start again: %s", child.index, exc)
                    delay = min(delay * 2, 5.0)
                new = self.serving[child.index]
                waits[asyncio.create_task(new.process.wait())] = new

    async def stop(self) -> None:
        """Stop the serving processes (they drain their calls), then the route-table process."""
        if self._stopping:
            return
        self._stopping = True
        for child in self.children():
            if child.watch is not None:
                child.watch.cancel()
        grace = self.config.shutdown_grace_period_millis / 1000 + 10
        await asyncio.gather(*(self._terminate(child, grace) for child in self.serving.values()))
        if self.route_table is not None:
            await self._terminate(self.route_table, 10)
        if self._metrics_server is not None:
            self._metrics_server.close()
        for sock in self._reserved:
            sock.close()
        shutil.rmtree(self.run_dir, ignore_errors=True)

    @staticmethod
    async def _terminate(child: Child, grace: float) -> None:
        if child.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                child.process.terminate()
            try:
                await asyncio.wait_for(child.process.wait(), grace)
            except TimeoutError:
                log.warning("the %s did not stop within %.0f s: killed", child.name, grace)
                with contextlib.suppress(ProcessLookupError):
                    child.process.kill()
                await child.process.wait()
        child.control.close()

    def signal_children(self, sig: int) -> None:
        """Pass a signal on to every serving process (SIGHUP: reload TLS and the ACL)."""
        for child in self.serving.values():
            with contextlib.suppress(ProcessLookupError):
                child.process.send_signal(sig)

    # ------------------------------------------------------------------ metrics

    def children(self) -> list[Child]:
        return [c for c in (self.route_table, *self.serving.values()) if c is not None and not c.control.closed]

    def collect_children(self) -> list[list[Metric]]:
        """The metric families of every child, and the counters of those that exited
        (:attr:`retired`), called from the metrics server's thread. A child that answers the
        watchdog is asked (for :func:`metrics_wait_seconds`); one silent for
        :data:`STALE_AFTER_SECONDS` is not, and its last families stand in, as they do when it does
        not answer in time. The list is made on the event loop
        after the answers, with no wait between reading which children run and :attr:`retired`, so
        a child that exits meanwhile is counted once: among the retired or among the running."""
        assert self._loop is not None

        async def gather() -> list[list[Metric]]:
            async def refresh(child: Child) -> None:
                wait = metrics_wait_seconds(child.silent_for)
                if wait is not None:
                    with contextlib.suppress(TimeoutError, ConnectionError):
                        child.metrics = list(await asyncio.wait_for(child.control.call("metrics"), wait))

            await asyncio.gather(*(refresh(child) for child in self.children()))
            running = [c for c in (self.route_table, *self.serving.values()) if c is not None and not c.retired]
            return [self.retired, *(child.metrics for child in running)]

        return asyncio.run_coroutine_threadsafe(gather(), self._loop).result(METRICS_TIMEOUT_SECONDS + 1)


def _ignore_result(task: asyncio.Task[Any]) -> None:
    if not task.cancelled():
        task.exception()  # retrieved: a link that closed meanwhile is no error here


def _exit_text(code: int | None) -> str:
    if code is not None and code < 0:
        with contextlib.suppress(ValueError):
            return f"signal {signal.Signals(-code).name}"
    return f"code {code}"


MINIMUM_GAUGES = frozenset({"process_start_time_seconds"})
"""Gauges merged by the minimum over processes (the oldest process's start)."""
MAXIMUM_GAUGES = frozenset({"process_max_fds", "python_info", "namesrv_build_info", "namesrv_remoting_max_connections"})
"""Gauges merged by the maximum (the same value in every process)."""


COUNTER_TYPES = frozenset({"counter", "histogram", "summary"})


def counters_of(families: Iterable[Metric]) -> list[Metric]:
    """The families of ``families`` that only grow (counters, histograms, summaries), without their
    ``_created`` samples: what a process that exited adds to the totals for good, so that no
    counter of ``namesrv`` falls when one of its processes is replaced (Prometheus would read the
    fall as a reset and count the survivors' whole lifetime again; issue 39)."""
    kept = []
    for family in families:
        if family.type not in COUNTER_TYPES:
            continue
        copy = Metric(family.name, family.documentation, family.type, family.unit)
        for sample in family.samples:
            if not sample.name.endswith("_created"):
                copy.add_sample(sample.name, dict(sample.labels), sample.value)
        kept.append(copy)
    return kept


def merge_families(per_process: Iterable[Iterable[Metric]]) -> list[Metric]:
    """One family per name from every process's: counters, histograms and most gauges summed per
    label set (requests, memory, connections of all processes together); the few gauges every
    process reports alike taken once (:data:`MINIMUM_GAUGES`, :data:`MAXIMUM_GAUGES`)."""
    merged: dict[str, Metric] = {}
    values: dict[str, dict[tuple[str, tuple[tuple[str, str], ...]], float]] = {}
    for families in per_process:
        for family in families:
            target = merged.get(family.name)
            if target is None:
                target = merged[family.name] = Metric(family.name, family.documentation, family.type, family.unit)
                values[family.name] = {}
            table = values[family.name]
            for sample in family.samples:
                key = (sample.name, tuple(sorted(sample.labels.items())))
                old = table.get(key)
                if old is None:
                    table[key] = sample.value
                elif sample.name in MINIMUM_GAUGES:
                    table[key] = min(old, sample.value)
                elif sample.name in MAXIMUM_GAUGES or family.type == "info":
                    table[key] = max(old, sample.value)
                else:
                    table[key] = old + sample.value
    for name, target in merged.items():
        for (sample_name, labels), value in values[name].items():
            target.add_sample(sample_name, dict(labels), value)
    return list(merged.values())


class _ProcessesCollector(Collector):
    """/metrics of ``namesrv``: every process's metrics merged (:func:`merge_families`) with the
    counters of the serving processes that exited (:attr:`Supervisor.retired`), plus
    ``namesrv_processes{role}``, ``namesrv_serving_process_restarts_total`` and
    ``namesrv_process_silences_total{role}``."""

    def __init__(self, supervisor: Supervisor) -> None:
        self._supervisor = supervisor
        self._own = CollectorRegistry()
        register_standard_collectors(self._own)

    def collect(self) -> Iterator[Metric]:
        yield from self.families()

    def families(self) -> list[Metric]:
        """Every family, collected now (every process asked)."""
        supervisor = self._supervisor
        per_process = [list(self._own.collect()), *supervisor.collect_children()]
        roles = {"supervisor": 1}
        for role in ("route_table", "serving"):
            roles[role] = sum(
                1
                for child in supervisor.children()
                if child.role == role
                and child.silent_for < STALE_AFTER_SECONDS
                and (role == "route_table" or child.index in supervisor.serving_ready)
            )
        return merge_families(per_process) + process_families(roles, supervisor.restarts, supervisor.silences)


def process_families(roles: dict[str, int], restarts: int, silences: dict[str, int]) -> list[Metric]:
    """``namesrv_processes{role}`` (processes that serve and answer the watchdog, by role),
    ``namesrv_serving_process_restarts_total`` and ``namesrv_process_silences_total{role}``."""
    processes = Metric(
        "namesrv_processes", "Processes of this NameServer by role that run and answer the watchdog.", "gauge"
    )
    for role, count in roles.items():
        processes.add_sample("namesrv_processes", {"role": role}, count)
    restarted = Metric(
        "namesrv_serving_process_restarts", "Serving processes started again after they exited.", "counter"
    )
    restarted.add_sample("namesrv_serving_process_restarts_total", {}, restarts)
    silent = Metric(
        "namesrv_process_silences",
        "Times a process did not answer the watchdog for processHeartbeatTimeoutMillis "
        "(serving: killed and started again; route_table: health NOT_SERVING meanwhile).",
        "counter",
    )
    for role, count in silences.items():
        silent.add_sample("namesrv_process_silences_total", {"role": role}, count)
    return [processes, restarted, silent]


async def serve(
    config: NamesrvConfig, log_level: str, origin: list[tuple[int, str]], boot_line: Any, log_format: str = "text"
) -> int:
    """Run ``namesrv``: start everything, print the boot line, supervise until a signal; the exit code."""
    supervisor = Supervisor(config, log_level, log_format)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    loop.add_signal_handler(signal.SIGHUP, lambda: supervisor.signal_children(signal.SIGHUP))
    try:
        await supervisor.start()
    except StartError as exc:
        await supervisor.stop()
        print(f"namesrv: {exc}", file=sys.stderr)
        return exc.code
    except RuntimeError as exc:
        await supervisor.stop()
        print(f"namesrv: {exc}", file=sys.stderr)
        return 1
    for level, line in origin:
        log.log(level, "%s", line)
    if not config.acl_file:
        log.warning("%s", OPEN_WARNING)
    log.info(
        "serving with %d serving processes (serverWorkerProcesses) and one route-table process; pid %d",
        supervisor.workers,
        os.getpid(),
    )
    print_line(boot_line(config, supervisor.remoting_port, supervisor.grpc_port, supervisor.workers))
    code = await supervisor.supervise(stop)
    if code == 0:
        print_line("The Name Server stopped.")
    return code
