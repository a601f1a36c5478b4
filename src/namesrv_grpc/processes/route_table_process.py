"""The route-table process: the one process that writes (RocketMQ's ``RouteInfoManager``, whose lock
becomes one event loop in a process of its own).

It owns the route table, the KV config (and its file), the expiry scan (S13) and route snapshots.
Serving processes connect to its Unix socket and send every write as one command
(:mod:`namesrv_grpc.core.commands`; a registration body decoded by the door when it is plain and at
most 2 MiB, else decoded here); it applies them one at a time, in arrival order, with no lookups to
keep waiting (:class:`~namesrv_grpc.processes.route_table_service.RouteTableService`). It imports
no module of a door (the body decoders are in ``wire/``), and opens no connection: the
``NOTIFY_MIN_BROKER_ID_CHANGE`` messages it decides on (S53) go out
with the change stream, and the first serving process sends them.

After each write (and each expiry scan) it takes what changed and sends it to every serving process
(:class:`Publisher`), and answers the write only once every serving process has applied that change:
a client that got a write's answer reads it back from any serving process (read-your-writes). A
serving process that does not apply a change within ``servingProcessApplyTimeoutMillis`` is killed
(the supervisor starts a new one), so one stuck process never holds every write back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from namesrv_grpc.core.errors import NamesrvError, SnapshotsNotInstalledError
from namesrv_grpc.core.kvconfig import KVConfigManager
from namesrv_grpc.core.processor import NameServer
from namesrv_grpc.core.replication import Change
from namesrv_grpc.core.route_table import RouteInfoManager
from namesrv_grpc.metrics import NamesrvMetrics
from namesrv_grpc.processes.channel import Channel, encode
from namesrv_grpc.processes.child import ROUTE_TABLE_SOCKET, ControlLink, ProcessParams, run_child
from namesrv_grpc.processes.route_table_service import RouteTableService
from namesrv_grpc.runtime.log_limits import RateLimitFilter, suppressed_lines_counter
from namesrv_grpc.runtime.log_limits import install as install_log_filter

if TYPE_CHECKING:
    from namesrv_grpc.core.commands import Command
    from namesrv_grpc.snapshot import SnapshotExporter, SnapshotInfo

log = logging.getLogger(__name__)

FIRST_SCAN_DELAY_MILLIS = 5_000
"""The first expiry scan runs this long after start (or one interval, when shorter) (S13)."""

REPLICA_PIECE_TOPICS = 20_000
"""Topics per piece of the state a new serving process starts from (:meth:`Publisher.join`): one
piece is made and pickled per event-loop turn (median 3-4 ms, at most 26 ms, for a 950,000-topic
table on a 2-core machine), so writes are not held back while the table goes out (one piece: up to
2.4 s, issue 39; docs/performance.md)."""

STALL_CHECK_SECONDS = 0.5
"""How often the publisher looks for a serving process that stopped applying changes."""


@dataclass(eq=False)
class ServingLink:
    """One connected serving process, as the publisher sees it."""

    channel: Channel
    index: int
    pid: int
    applied: int = 0
    """The last change it applied."""
    sent: int = 0
    """The last change sent to it."""
    waiting_since: float | None = None
    """``time.monotonic()`` when the oldest change it has not applied was sent (None: none)."""
    held: list[tuple[int, bytes]] | None = None
    """Changes published while the pieces of its first state are still being sent, sent after the
    last piece ((seq, pickled message), in order; None: changes are sent as they are published)."""
    serving: bool = False
    """It has its whole state and may serve (it said ``ready``): writes wait for it only then."""


@dataclass(eq=False)
class Publisher:
    """The change stream, and read-your-writes: :meth:`publish` sends what the last writes changed to
    every serving process; :meth:`after_applied` runs a write's answer once every serving process has
    applied everything published so far."""

    nameserver: NameServer
    apply_timeout_seconds: Callable[[], float]
    links: dict[Channel, ServingLink] = field(default_factory=dict)
    seq: int = 0
    """The last change published."""
    read_seq: int = 0
    """The last change published that a read may see
    (:meth:`~namesrv_grpc.core.replication.Change.seen_by_reads`): what a write's answer waits for."""
    _waiting: deque[tuple[int, Callable[[], None]]] = field(default_factory=deque)
    """Answers waiting for the serving processes, with the change each waits for: in publish order,
    so in ``seq`` order (the ones ready are always at the left)."""
    _settle_scheduled: bool = False

    def publish(self) -> bool:
        """Send what changed since the last call to every serving process; False when nothing did."""
        change = self.nameserver.take_change()
        if change is None:
            return False
        self.seq = change.seq
        if change.seen_by_reads():
            self.read_seq = change.seq
        now = time.monotonic()
        data = encode(("change", change))
        for link in list(self.links.values()):
            if link.held is not None:
                link.held.append((change.seq, data))
            else:
                self._send_change(link, change.seq, data, now)
        return True

    @staticmethod
    def _send_change(link: ServingLink, seq: int, data: bytes, now: float) -> bool:
        """Send one pickled change to ``link``; False when its channel is gone."""
        try:
            link.channel.send_encoded(data)
        except ConnectionError:
            return False
        link.sent = seq
        if link.waiting_since is None:
            link.waiting_since = now
        return True

    def _settle_soon(self) -> None:
        """Work out the digest's share of the registrations answered so far (6 ms for 10,000 topics)
        once nothing waits for the serving processes, one piece of 1,000 QueueData per event-loop
        turn: off the path of the answers, and a write that arrives meanwhile waits for one piece
        (~0.6 ms), not for all of them (``core.digest``: in a burst of writes with no pause, each write
        works out as many pieces as it adds past :data:`~namesrv_grpc.core.digest.MAX_PENDING_PIECES`)."""
        if self._settle_scheduled:
            return
        self._settle_scheduled = True

        loop = asyncio.get_running_loop()

        def settle() -> None:
            if self.nameserver.route_table.settle_digest_piece():
                loop.call_soon(settle)  # the next piece after the I/O that came meanwhile
            else:
                self._settle_scheduled = False

        loop.call_soon(settle)

    def join(self, link: ServingLink) -> None:
        """A serving process connected: it gets everything there is now, in pieces of
        :data:`REPLICA_PIECE_TOPICS` topics sent one per event-loop turn (writes go on between them),
        then every change published since, in order, then every later change as it is published.
        Writes wait for it only once it said it has all of it (:meth:`ready`): until then it does
        not serve, so no answer need wait for it."""
        self.publish()
        pieces = self.nameserver.replica_state_pieces(REPLICA_PIECE_TOPICS)
        link.held = []
        self.links[link.channel] = link
        self._send_piece(link, pieces, next(pieces))

    def _send_piece(self, link: ServingLink, pieces: Iterator[Change], piece: Change) -> None:
        if self.links.get(link.channel) is not link:
            return  # it left
        following = next(pieces, None)
        try:
            link.channel.send(("state", piece, following is None))
        except ConnectionError:
            return
        if following is not None:
            asyncio.get_running_loop().call_soon(self._send_piece, link, pieces, following)
            return
        held, link.held = link.held or [], None
        now = time.monotonic()
        for seq, data in held:
            if not self._send_change(link, seq, data, now):
                return

    def ready(self, link: ServingLink) -> None:
        """The serving process applied the last piece of its state: it is told the last change
        published so far (``("serve", seq)``) and serves once it applied it; every later change's
        write waits for it. Raises ConnectionError when its pieces are not all sent yet."""
        if link.held is not None:
            raise ConnectionError(f"{link.channel.name} said ready before the last piece of its state")
        link.channel.send(("serve", self.seq))
        link.applied = max(link.applied, self.seq)  # it serves only once it applied them
        if link.applied >= link.sent:
            link.waiting_since = None
        link.serving = True

    def applied(self, link: ServingLink, seq: int) -> None:
        link.applied = max(link.applied, seq)
        link.waiting_since = None if link.applied >= link.sent else time.monotonic()
        self._release()

    def leave(self, link: ServingLink) -> None:
        self.links.pop(link.channel, None)
        self._release()

    def after_applied(self, answer: Callable[[], None]) -> None:
        """Run ``answer`` once every serving process has applied every change published so far that
        a read may see (:attr:`read_seq`)."""
        if all(link.applied >= self.read_seq for link in self.links.values() if link.serving):
            answer()
            self._settle_soon()
        else:
            self._waiting.append((self.read_seq, answer))

    def _release(self) -> None:
        """Run the answers whose change every serving process has applied: O(answers released),
        however many still wait (a connection closing with thousands of brokers bound to it makes
        thousands of writes at once; scanning them all at each acknowledgement stalled this process
        for seconds)."""
        waiting = self._waiting
        if not waiting:
            return
        low = min((link.applied for link in self.links.values() if link.serving), default=self.seq)
        released = False
        while waiting and waiting[0][0] <= low:
            waiting.popleft()[1]()
            released = True
        if released and not waiting:
            self._settle_soon()

    def stalled(self) -> list[ServingLink]:
        """Serving processes that have not applied a change for longer than the timeout."""
        limit = time.monotonic() - self.apply_timeout_seconds()
        return [link for link in self.links.values() if link.waiting_since is not None and link.waiting_since < limit]


class RouteTableProcess:
    """Everything the route-table process runs (one per ``namesrv``)."""

    def __init__(self, params: ProcessParams, control: ControlLink) -> None:
        """Loads the KV config file (raises KVConfigFileError)."""
        config = params.config
        self.params = params
        self.control = control
        self.route_table = RouteInfoManager()
        self.nameserver = NameServer(
            config, self.route_table, KVConfigManager(Path(config.kv_config_path).expanduser())
        )
        self.nameserver.track_changes()
        self.metrics = NamesrvMetrics(self.route_table)
        self.service = RouteTableService(self.nameserver, self.export_snapshot, self.metrics)
        self.publisher = Publisher(
            self.nameserver, lambda: self.nameserver.config.serving_process_apply_timeout_millis / 1000
        )
        self._snapshot_lock = asyncio.Lock()
        self._snapshot_dir = Path(config.snapshot_dir).expanduser()  # snapshotDir: not changeable at run time
        self.snapshot_exporter: SnapshotExporter | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._server: asyncio.Server | None = None
        self._fatal = asyncio.Event()
        """Set when the replicas can no longer be kept equal to the table (a change could not be
        sent): the process exits 1 rather than let serving processes answer from a diverged copy."""
        control.handlers["metrics"] = lambda: list(self.metrics.registry.collect())

    @property
    def socket_path(self) -> str:
        return str(Path(self.params.run_dir) / ROUTE_TABLE_SOCKET)

    async def run(self) -> int:
        """Serve until SIGTERM (exit 0) or until the supervisor is gone."""
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        loop.add_signal_handler(signal.SIGHUP, lambda: None)  # the serving processes reload TLS and the ACL
        # Lines peers cause here too (registration conflicts, brokers removed when their connection
        # closed: a replayed REGISTER_BROKER makes two per replay), bounded as in the serving processes.
        suppressed = suppressed_lines_counter(self.metrics.registry)
        remove_log_filter = install_log_filter(
            RateLimitFilter(
                burst=self.nameserver.config.peer_log_lines_per_kind,
                on_suppressed=lambda name: suppressed.labels(name).inc(),
            )
        )
        self._server = await asyncio.start_unix_server(self._connected, self.socket_path, limit=1 << 20)
        os.chmod(self.socket_path, 0o600)
        background = [
            asyncio.create_task(self._scan_loop(), name="scan-not-active-broker"),
            asyncio.create_task(self._snapshot_loop(), name="route-snapshots"),
            asyncio.create_task(self._watch_stalls(), name="serving-process-stalls"),
        ]
        self.control.tell("ready", os.getpid())
        lost = asyncio.create_task(self.control.lost.wait())
        stopping = asyncio.create_task(stop.wait())
        fatal = asyncio.create_task(self._fatal.wait())
        await asyncio.wait([lost, stopping, fatal], return_when=asyncio.FIRST_COMPLETED)
        for task in (*background, lost, stopping, fatal):
            task.cancel()
        self._server.close()
        for link in list(self.publisher.links.values()):
            link.channel.close()
        remove_log_filter()
        return 1 if self._fatal.is_set() else 0

    # ------------------------------------------------------------------ serving processes

    async def _connected(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        channel = Channel(reader, writer, "serving process")
        link: ServingLink | None = None

        def on_message(message: tuple[Any, ...]) -> None:
            nonlocal link
            kind = message[0]
            if link is None:
                if kind != "hello":
                    raise ConnectionError(f"expected hello, got {kind!r}")
                link = ServingLink(channel, message[1], message[2])
                channel.name = f"serving process {link.index} (pid {link.pid})"
                self.publisher.join(link)
            elif kind == "applied":
                self.publisher.applied(link, message[1])
            elif kind == "ready":
                self.publisher.ready(link)
            elif kind == "command":
                self._apply(link, message[1], message[2])

        try:
            await channel.serve(on_message)
        except ConnectionError as exc:
            log.warning("serving process link refused: %s", exc)
        except Exception:
            log.exception("the route-table process failed; exiting (the serving processes' replicas cannot be trusted)")
            self._fatal.set()
        except asyncio.CancelledError:  # the route-table process is stopping: its table goes with it
            channel.close()
            return
        channel.close()
        if link is not None:
            self.publisher.leave(link)
            self._serving_process_exited(link.index)

    def _serving_process_exited(self, process: int) -> None:
        """The brokers bound through a serving process that exited stay, unbound, until their next
        registration or the S13 expiry (not S15: docs/rules.md). Unbinding changes no route, so
        nothing is published and no write waits (removing 10,000 brokers held the other process's
        registrations back 61-71 ms in batches, 520-542 ms in one step)."""
        kept = self.service.serving_process_exited(process)
        if kept:
            log.warning(
                "serving process %d exited: its %d broker(s) stay until they register again "
                "(through a live process) or expire (S13)",
                process,
                kept,
            )

    def _apply(self, link: ServingLink, call_id: int, command: Command[Any]) -> None:
        """Apply one command now (in arrival order) and answer it once every serving process has
        applied what it changed."""
        method = self.service.method_for(command)
        if method is None:
            link.channel.reply(call_id, False, LookupError(f"not a route-table command: {type(command).__name__}"))
            return
        started = time.perf_counter()
        try:
            value = method(link.index, command)
        except NamesrvError as error:
            self._answer(link, call_id, False, error)
            return
        except Exception as exc:
            log.exception("%s from serving process %d failed", type(command).__name__, link.index)
            self._answer(link, call_id, False, exc)
            return
        finally:
            self.metrics.route_table_busy.inc(time.perf_counter() - started)
        if asyncio.iscoroutine(value):
            task = asyncio.create_task(self._finish(link, call_id, value))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            return
        self._answer(link, call_id, True, value)

    async def _finish(self, link: ServingLink, call_id: int, pending: Any) -> None:
        try:
            value = await pending
        except Exception as exc:
            self._answer(link, call_id, False, exc)
        else:
            self._answer(link, call_id, True, value)

    def _answer(self, link: ServingLink, call_id: int, ok: bool, value: Any) -> None:
        self.publisher.publish()
        self.publisher.after_applied(lambda: link.channel.reply(call_id, ok, value))

    async def _watch_stalls(self) -> None:
        """Kill a serving process that stopped applying changes (the supervisor starts another; its
        brokers stay until their next registration or the S13 expiry), so writes do not wait for it
        for ever."""
        while True:
            await asyncio.sleep(STALL_CHECK_SECONDS)
            for link in self.publisher.stalled():
                log.error(
                    "serving process %d (pid %d) applied no change for %.1f s (servingProcessApplyTimeoutMillis): "
                    "killing it",
                    link.index,
                    link.pid,
                    time.monotonic() - (link.waiting_since or 0),
                )
                with contextlib.suppress(ProcessLookupError):
                    os.kill(link.pid, signal.SIGKILL)
                link.waiting_since = None
                link.channel.close()

    # ------------------------------------------------------------------ expiry scan (S13)

    async def _scan_loop(self) -> None:
        """S13: scan every ``scanNotActiveBrokerInterval`` ms (re-read each time, it may be updated).

        A scan that comes more than an interval late (this process was stopped or starved: SIGSTOP,
        a paused VM) is put off by one interval, so that the registrations that queued up meanwhile
        are applied before any broker is found silent: brokers are not removed for our pause. Never
        twice in a row: a process late at every scan still expires brokers."""
        config = self.nameserver.config
        loop = asyncio.get_running_loop()
        delay = min(FIRST_SCAN_DELAY_MILLIS, config.scan_not_active_broker_interval) / 1000
        put_off = False
        while True:
            due = loop.time() + delay
            await asyncio.sleep(delay)
            delay = self.nameserver.config.scan_not_active_broker_interval / 1000
            late = loop.time() - due
            put_off = late > delay and not put_off
            if put_off:
                log.warning(
                    "expiry scan %.1f s late (this process was stopped or starved): put off %.1f s so that "
                    "the registrations that waited are applied first",
                    late,
                    delay,
                )
                continue
            try:
                started = time.perf_counter()
                removed = self.nameserver.scan_not_active_broker()
                self.metrics.route_table_busy.inc(time.perf_counter() - started)
                self.metrics.expirations.inc(len(removed))
                self.publisher.publish()
            except Exception:  # a scan must never kill the loop
                log.exception("expiry scan failed")

    # ------------------------------------------------------------------ route snapshots

    async def export_snapshot(self) -> SnapshotInfo:
        """Export a route snapshot (``AdminService.ExportRouteSnapshot``, ``snapshotInterval``): the
        copy, Parquet and commit run in a worker thread, one export at a time. Raises SnapshotWriteError."""
        async with self._snapshot_lock:
            if self.snapshot_exporter is None:
                from namesrv_grpc.snapshot import SnapshotExporter

                config = self.nameserver.config
                self.snapshot_exporter = SnapshotExporter(
                    self.route_table,
                    self._snapshot_dir,
                    namesrv_identity(config, self.params.grpc_port),
                    retention_hours=lambda: self.nameserver.config.snapshot_retention_hours,
                )
            started = time.perf_counter()
            try:
                copy = self.snapshot_exporter.copy_table()  # the table has one thread: this one
                info = await asyncio.to_thread(self.snapshot_exporter.export, copy)
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
        said_not_installed = False
        while True:
            interval = self.nameserver.config.snapshot_interval
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
            except SnapshotsNotInstalledError as exc:  # the same every time: said once
                if not said_not_installed:
                    log.error("route snapshots every %d s are off: %s", interval, exc)
                    said_not_installed = True
            except Exception:  # a failed export must never kill the loop
                log.exception("route snapshot failed")


def namesrv_identity(config: Any, port: int) -> str:
    """The NameServer's identity in snapshots: ``snapshotNamesrvId``, else ``host:port`` with the bind
    address, or the host name when bound to every address."""
    import socket

    if config.snapshot_namesrv_id:
        return str(config.snapshot_namesrv_id)
    host = config.bind_address
    if host in ("", "0.0.0.0", "::", "[::]"):
        host = socket.gethostname()
    return f"{host}:{port}"


async def _main(params: ProcessParams, control: ControlLink) -> int:
    from namesrv_grpc.core.kvconfig import KVConfigFileError

    try:
        process = RouteTableProcess(params, control)
    except KVConfigFileError as exc:
        print(f"namesrv: {exc}", file=sys.stderr)
        control.tell("failed", str(exc), 2)
        return 2
    return await process.run()


def main(argv: Sequence[str] | None = None) -> int:
    return run_child(argv, _main)


if __name__ == "__main__":
    raise SystemExit(main())
