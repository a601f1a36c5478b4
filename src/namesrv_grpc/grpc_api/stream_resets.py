"""HTTP/2 rapid reset (CVE-2023-44487): a connection that resets the calls it starts as fast as it can
send them is closed (``grpcMaxStreamResetsPerSecond``).

What grpcio 1.85's core does about it, read in its chttp2 transport (``parsing.cc``,
``chttp2_transport.cc``): ``grpc.http.overload_protection`` (on by default) keeps reset streams
counted against ``grpc.max_concurrent_streams`` until they are freed and refuses new ones past it;
``grpc.http2.max_requests_per_read`` (32) stops reading a connection until the server has taken the
calls it started; ``grpc.http2.ping_on_rst_stream_percent`` (1) answers some resets with a PING; and
``DEFAULT_MAX_PENDING_INDUCED_FRAMES`` (10,000) stops reading a connection whose induced frames
(RST_STREAM, PING and SETTINGS answers) pile up. None of them closes the connection: two connections
sent 186,000 HEADERS + RST_STREAM pairs in 20 s, kept a core busy, and lookups of other clients
were CANCELLED or took 0.5 s. Those CANCELLED came from grpc-core's queue of calls Python has not
taken yet: past 1,000 queued calls (``grpc.server.max_pending_requests``) it cancels new calls at
random, and a reset call whose HEADERS came first waits in that queue like any other. So
``grpcMaxConcurrentStreams`` (100) also bounds what one flooding connection puts in the queue; this
guard ends the flood itself. Most reset calls never reach a handler (gRPC cancels them first), so no
Python code can count them.

What it does count, per connection: channelz (on by default, ``grpc.enable_channelz``) keeps
``streamsStarted``/``streamsSucceeded``/``streamsFailed`` for each server socket, where a stream the
client reset is *failed* and one the server ended with any status, errors included, *succeeded*
(measured: 300 NOT_FOUND answers left ``streamsFailed`` at 0; 3,000 resets made it 3,000). So
:class:`StreamResetGuard` reads, once a second, the server-wide ``callsFailed`` (one call; it counts
resets and error statuses, so it is never below the resets); only when it grew by at least the
bound does it read every server socket's ``streamsFailed`` and close (``connections.close_connection``)
each connection whose count grew by more than ``grpcMaxStreamResetsPerSecond`` per second since the
previous reading. A connection is closed within about two seconds of starting a flood (longer while
thousands of connections are open: a reading then takes long enough to be spaced out, see
:data:`LOOP_SHARE`; 2,000 connections, ~10 s), and one
opened while a flood goes on (a flooding client reconnects at once) at the next reading: it is
newer than every socket of the last reading, so all its failures came since. A client that cancels
calls now and then (deadlines) is far below the bound. 0 turns it off.

The channelz functions are grpcio's own (``grpc._cython.cygrpc.channelz_*``, what the
``grpcio-channelz`` service wraps); if a grpcio lacks them, the guard logs that once and does
nothing.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import logging
import time
from collections.abc import Callable
from typing import Any

from namesrv_grpc.grpc_api.connections import close_connections

log = logging.getLogger(__name__)

INTERVAL_SECONDS = 1.0
"""How often the counters are read, at most."""

LOOP_SHARE = 0.01
"""The share of the event loop the readings may take: the next reading waits at least 100 times as
long as the last one took. grpc-core 1.85 renders a server's channelz node in time proportional to
its open connections, holding the GIL (measured on this project's machine kind: ~100 ms with 2,000
idle HTTP/2 connections, for a 389-byte answer), so one reading a second stalled every lookup of the
process for a tenth of the time (row 12w: lookups 40-90 ms late once a second). With few
connections a reading takes well under 10 ms and the guard still reads every second. A reading's
time is wall time, so on a busy machine a preempted reading also spaces the next one out."""

MAX_SPACING_SECONDS = 30.0
"""The longest wait between two readings, however slow the last one was: a rapid-reset flood is
closed within about a minute even among tens of thousands of connections."""

PAGE = 100
"""Sockets asked of channelz per call (its own maximum per page)."""


def _channelz() -> Any | None:
    try:
        cygrpc = importlib.import_module("grpc._cython.cygrpc")
    except ImportError:  # pragma: no cover - grpcio always has it
        return None
    if not all(
        hasattr(cygrpc, name) for name in ("channelz_get_servers", "channelz_get_server_sockets", "channelz_get_socket")
    ):
        return None
    return cygrpc


class StreamResetGuard:
    """Closes the connections of this process that reset more than ``limit()`` streams per second.
    :meth:`start` in the event loop; ``on_close(peer, resets_per_second)`` is told of each close."""

    def __init__(
        self,
        limit: Callable[[], int],
        on_close: Callable[[str, float], None] | None = None,
        *,
        interval: float = INTERVAL_SECONDS,
        close: Callable[[list[str]], set[str]] = close_connections,
        channelz: Any | None = None,
        clock: Callable[[], float] = time.monotonic,
        timer: Callable[[], float] = time.perf_counter,
    ) -> None:
        """``limit()``: the bound, read at every reading; ``close(peers)`` closes connections and
        returns those it closed; ``channelz``: what has grpcio's ``channelz_get_servers``,
        ``channelz_get_server_sockets`` and ``channelz_get_socket`` (default: grpcio's own);
        ``clock``: seconds, for the rates; ``timer``: seconds, for how long a reading took
        (:data:`LOOP_SHARE`)."""
        self._limit = limit
        self._on_close = on_close
        self._interval = interval
        self._close = close
        self._channelz = channelz if channelz is not None else _channelz()
        self._clock = clock
        self._timer = timer
        self._calls_failed: tuple[int, float] | None = None
        """Server-wide callsFailed and when it was read."""
        self._seen: dict[int, tuple[int, float]] = {}
        """channelz socket id -> (streamsFailed, monotonic time) at the last reading."""
        self._handle: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Read the counters every ``interval`` seconds on ``loop``, or less often when a reading
        takes more than :data:`LOOP_SHARE` of that."""
        if self._channelz is None:
            log.warning("this grpcio has no channelz functions: HTTP/2 rapid-reset connections are not closed")
            return
        self._loop = loop
        self._handle = loop.call_later(self._interval, self._tick)

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _tick(self) -> None:
        started = self._timer()
        try:
            self.check()
        except Exception:  # never let a bad reading stop the guard
            log.exception("reading gRPC's channelz counters failed")
        if self._loop is not None and not self._loop.is_closed():
            took = self._timer() - started
            spacing = min(max(self._interval, took / LOOP_SHARE), MAX_SPACING_SECONDS)
            self._handle = self._loop.call_later(spacing, self._tick)

    def check(self) -> list[str]:
        """One reading; returns the peers whose connections were closed."""
        limit = self._limit()
        if limit <= 0 or self._channelz is None:
            self._calls_failed = None
            self._seen.clear()
            return []
        channelz = self._channelz
        servers = json.loads(channelz.channelz_get_servers(0)).get("server", [])
        calls_failed = sum(int(server.get("data", {}).get("callsFailed", 0)) for server in servers)
        now = self._clock()
        previous, self._calls_failed = self._calls_failed, (calls_failed, now)
        if previous is None:
            return []
        burst = calls_failed - previous[0] > limit * max(now - previous[1], 1e-9)
        if not burst and not self._seen:
            return []
        seen: dict[int, tuple[int, float]] = {}
        offenders: dict[str, float] = {}
        # A socket newer than every socket of the last reading (channelz numbers them in order) was
        # opened since: all its failures fall after that reading. So a flooding client that
        # reconnects at once is closed at the first reading, not the second.
        newest_seen = max(self._seen, default=None)
        for server in servers:
            server_id = int(server["ref"]["serverId"])
            start = 0
            while True:
                page = json.loads(channelz.channelz_get_server_sockets(server_id, start, PAGE))
                refs = page.get("socketRef", [])
                for ref in refs:
                    socket_id = int(ref["socketId"])
                    start = max(start, socket_id + 1)
                    data = json.loads(channelz.channelz_get_socket(socket_id)).get("socket", {}).get("data", {})
                    failed = int(data.get("streamsFailed", 0))
                    seen[socket_id] = (failed, now)
                    before = self._seen.get(socket_id)
                    if before is None and newest_seen is not None and socket_id > newest_seen:
                        before = (0, previous[1])
                    if before is None or now <= before[1]:
                        continue
                    rate = (failed - before[0]) / (now - before[1])
                    if rate > limit:
                        offenders[str(ref.get("name", "")).removeprefix("chttp2 ")] = rate
                        seen.pop(socket_id, None)
                if not refs or page.get("end", False):
                    break
        # Keep readings only while the failures go on: the next quiet second forgets them all.
        self._seen = seen if burst else {}
        closed = self._close(list(offenders)) if offenders else set()
        for peer in sorted(closed):
            if self._on_close is not None:
                self._on_close(peer, offenders[peer])
        return sorted(closed)
