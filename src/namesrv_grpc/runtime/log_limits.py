"""Log lines a remote peer can cause, bounded: one peer must not be able to fill the disk.

:class:`RateLimitFilter` is a ``logging.Filter`` installed, in every serving process and in the
route-table process, on the loggers of both front doors, of the route table's rules (registration
conflicts, brokers removed as their connection closed) and on ``asyncio`` (whose "socket.accept()
out of system resource" line a connection flood causes): lines of one kind (logger, level, message
template) pass at most ``burst`` times per ``window_seconds``; the rest are dropped and counted, and
the next line of that kind that passes says how many were suppressed (``... [42 similar lines
suppressed in the last 10 s]``). Audit lines are bounded by their own rules, which know what an
event is (:mod:`namesrv_grpc.security.audit`). :func:`printable` makes peer-supplied text safe for
one line.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter

__all__ = ["PEER_LOGGERS", "RateLimitFilter", "install", "printable", "suppressed_lines_counter"]

PEER_LOGGERS = (
    "asyncio",
    "namesrv_grpc.remoting.budget",
    "namesrv_grpc.remoting.connection",
    "namesrv_grpc.remoting.server",
    "namesrv_grpc.remoting.handlers",
    "namesrv_grpc.remoting.notifier",
    "namesrv_grpc.remoting.tls_sniff",
    "namesrv_grpc.grpc_api.sessions",
    "namesrv_grpc.grpc_api.servicers",
    "namesrv_grpc.grpc_api.connections",
    "namesrv_grpc.core.processor",
    "namesrv_grpc.processes.route_table_process",
    "namesrv_grpc.processes.kv_group_commit",
    "namesrv_grpc.security.authz",
    "namesrv_grpc.security.signature",
    "grpc._cython.cygrpc",
    "grpc.aio._server",
)
"""Loggers whose lines a remote peer can cause (refusals, bad frames, unknown codes, accept errors)."""

DEFAULT_BURST = 20
DEFAULT_WINDOW_SECONDS = 10.0
_MAX_KINDS = 4096
"""Kinds tracked at most (message templates are finite; a formatted message used as a template is not)."""


def printable(text: str, limit: int = 200) -> str:
    """``text`` safe for one log line: control characters escaped, at most ``limit`` characters."""
    if text.isprintable() and len(text) <= limit:
        return text
    escaped = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text[:limit])
    return escaped + ("..." if len(text) > limit else "")


@dataclass(slots=True)
class _Kind:
    window_start: float
    passed: int
    suppressed: int


class RateLimitFilter(logging.Filter):
    """At most ``burst`` lines of one kind per ``window_seconds`` (monotonic clock); ``on_suppressed``
    is called with the logger name of every dropped line (the ``namesrv_log_lines_suppressed_total``
    counter)."""

    def __init__(
        self,
        *,
        burst: int = DEFAULT_BURST,
        window_seconds: float = DEFAULT_WINDOW_SECONDS,
        on_suppressed: Callable[[str], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        if burst < 1 or window_seconds <= 0:
            raise ValueError("burst must be at least 1 and window_seconds positive")
        self.burst = burst
        self.window_seconds = window_seconds
        self.on_suppressed = on_suppressed
        self._clock = clock
        self._kinds: dict[tuple[str, int, str], _Kind] = {}
        self.suppressed_total = 0
        """Lines dropped since creation."""

    def filter(self, record: logging.LogRecord) -> bool:
        key = (record.name, record.levelno, str(record.msg)[:200])
        now = self._clock()
        kind = self._kinds.get(key)
        if kind is None:
            if len(self._kinds) >= _MAX_KINDS:
                self._kinds.clear()
            kind = self._kinds[key] = _Kind(now, 0, 0)
        elif now - kind.window_start >= self.window_seconds:
            kind.window_start, kind.passed = now, 0
        if kind.passed >= self.burst:
            kind.suppressed += 1
            self.suppressed_total += 1
            if self.on_suppressed is not None:
                self.on_suppressed(record.name)
            return False
        kind.passed += 1
        if kind.suppressed:
            # Formatted now, so a '%' in the note never meets the record's arguments.
            record.msg = f"{record.getMessage()} [{kind.suppressed} similar lines suppressed in the last "
            record.msg += f"{self.window_seconds:.0f} s]"
            record.args = None
            kind.suppressed = 0
        return True


def install(filter_: RateLimitFilter, names: Iterable[str] = PEER_LOGGERS) -> Callable[[], None]:
    """Add ``filter_`` to each named logger (replacing an earlier RateLimitFilter there); return a
    function that removes it again."""
    loggers = [logging.getLogger(name) for name in names]
    for logger in loggers:
        for old in [f for f in logger.filters if isinstance(f, RateLimitFilter)]:
            logger.removeFilter(old)
        logger.addFilter(filter_)

    def remove() -> None:
        for logger in loggers:
            logger.removeFilter(filter_)

    return remove


def suppressed_lines_counter(registry: CollectorRegistry) -> Counter:
    """``namesrv_log_lines_suppressed_total{logger}`` in ``registry``, a series per peer logger."""
    counter = Counter(
        "namesrv_log_lines_suppressed",
        "Log lines a peer caused that were dropped by the rate limit (peerLogLinesPerKind), by logger.",
        ["logger"],
        registry=registry,
    )
    for name in PEER_LOGGERS:
        counter.labels(name)
    return counter
