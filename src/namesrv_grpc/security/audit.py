"""The audit trail: one line per state-changing call, to the logger ``namesrv.audit``.

Each line is one JSON object (control characters escaped, so a hostile name cannot forge lines)::

    {"audit": "RegisterBroker", "result": "ok", "identity": "ak:broker-a-ak", "peer": "ipv4:10.0.0.7:53122",
     "cluster_name": "DefaultCluster", "broker_name": "broker-a", "broker_id": 0, "broker_addr": "10.0.0.7:10911"}

``result`` is ``ok`` or ``refused: REASON`` (an ACL refusal of a state-changing call). Calls that
only refresh liveness are not audited: heartbeats, QueryDataVersion, session heartbeats, and a
registration that changed nothing (``RegisterBrokerResult.changed`` false: a broker's periodic
re-registration, which for a Java broker is its heartbeat). Those that change routes, KV entries,
configuration or files are: RegisterBroker that registers a broker address new here or changes
what is held for it, UnregisterBroker, session binds, AdminService writes, KV writes,
UpdateNamesrvConfig, ExportRouteSnapshot; and their remoting request codes. The lines go
wherever logging sends them (stderr by default) and, with ``--audit-log-file``, to that file too
(``WatchedFileHandler``: rotate it with logrotate, no copytruncate needed).

Bounded (issue 30: one captured signed REGISTER_BROKER replayed 84,857 times in 20 s wrote 20.7 MB
of audit log), three ways, each counted in ``namesrv_audit_lines_suppressed_total{reason}``:

- ``repeat``: an event identical to one written less than ``auditRepeatWindowSeconds`` ago (same
  RPC, result, identity, peer address without its port, and fields; the ``suppressed`` count of a
  refusal line aside) is not written; when the window ends, one summary line says how many were:
  the event's line with ``"repeats": N`` and ``"repeat_window_seconds"``, its peer without a port;
- ``refusals``: refusals of one identity and RPC past :data:`REFUSALS_PER_MINUTE` a minute (whatever
  their fields); the next refusal line written for them carries ``"suppressed": N``;
- ``rate``: past ``auditLogLinesPerSecond`` lines a second (a token bucket holding one second's
  worth), lines are dropped; at most once a second a line says how many:
  ``{"audit": "AuditLinesSuppressed", "result": "suppressed", "lines": N, "lines_per_second": 50}``
  (``lines_per_second``: this serving process's share of ``auditLogLinesPerSecond``).

Each serving process writes its own lines (every one appends to the same file), so the repeat and
refusal bounds are per serving process; the rate is ``auditLogLinesPerSecond`` divided among them
(each :class:`AuditLog` is built with its process's share, ``policy.share``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import logging.handlers
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

AUDIT_LOGGER = "namesrv.audit"

REFUSALS_PER_MINUTE = 10
"""Refusal lines per identity and RPC per minute; the rest are counted and reported as suppressed."""

MAX_RATE_KEYS = 4096
"""Identities x RPCs tracked for the refusal rate limit (the table is cleared when it fills)."""

MAX_VALUE_CHARS = 256
"""Longer string values are cut (with a marker) so one request cannot write a huge line."""

DEFAULT_REPEAT_WINDOW_SECONDS = 60
"""``auditRepeatWindowSeconds``: identical events within this long write one line (0 = every one)."""

DEFAULT_LINES_PER_SECOND = 100
"""``auditLogLinesPerSecond``: audit lines written per second at most, all serving processes together
(an :class:`AuditLog` is given its process's share)."""

MAX_REPEAT_WINDOWS = 4096
"""Distinct events whose repeat window is tracked; past it the oldest window ends early (summary written)."""

VOLATILE_FIELDS = frozenset({"suppressed"})
"""Fields that do not make an event another one (a counter of the refusal rate limit)."""

SUPPRESSION_REASONS = ("repeat", "refusals", "rate")
"""Values of the ``reason`` label of ``namesrv_audit_lines_suppressed_total``."""

_suppressed = dict.fromkeys(SUPPRESSION_REASONS, 0)
"""Audit lines not written in this process, by reason (the audit logger is one per process, so are
its counts): :func:`suppressed_lines`."""


def suppressed_lines() -> dict[str, int]:
    """Audit lines this process did not write since it started, by reason (:data:`SUPPRESSION_REASONS`)."""
    return dict(_suppressed)


def _short(value: object) -> object:
    if isinstance(value, str) and len(value) > MAX_VALUE_CHARS:
        return value[:MAX_VALUE_CHARS] + f"...({len(value)} chars)"
    return value


def peer_address(peer: str) -> str:
    """``peer`` without its port: ``remoting:10.0.0.7:53122`` -> ``remoting:10.0.0.7``,
    ``ipv6:[::1]:5`` -> ``ipv6:[::1]`` (a replay from new connections comes from new ports)."""
    head, sep, port = peer.rpartition(":")
    return head if sep and port.isdigit() and head else peer


@dataclass(slots=True)
class _Window:
    start: float
    line: dict[str, object]
    repeats: int = 0


class AuditLog:
    """Writes audit lines to ``namesrv.audit`` (and ``path`` when given), bounded (see the module)."""

    def __init__(
        self,
        path: Path | None = None,
        *,
        repeat_window_seconds: float = DEFAULT_REPEAT_WINDOW_SECONDS,
        lines_per_second: int = DEFAULT_LINES_PER_SECOND,
    ) -> None:
        """Raises OSError when ``path`` cannot be opened for appending; ValueError for a negative
        window or fewer than 1 line a second."""
        if repeat_window_seconds < 0 or lines_per_second < 1:
            raise ValueError("repeat_window_seconds must be at least 0 and lines_per_second at least 1")
        self.logger = logging.getLogger(AUDIT_LOGGER)
        self.repeat_window_seconds = repeat_window_seconds
        self.lines_per_second = lines_per_second
        self._refusals: dict[tuple[str, str], list[float]] = {}
        """(identity, rpc) -> [window start (monotonic s), lines in the window, suppressed]."""
        self._windows: OrderedDict[str, _Window] = OrderedDict()
        """event -> its repeat window, oldest first."""
        self._windows_with_repeats = 0
        self._tokens = float(lines_per_second)
        self._refilled = time.monotonic()
        self._rate_suppressed = 0
        self._rate_summarised = float("-inf")
        """When the last line about lines the cap dropped was written (monotonic s)."""
        self._timer: asyncio.TimerHandle | None = None
        self.logger.setLevel(logging.INFO)
        self._handler: logging.Handler | None = None
        if path is not None:
            handler = logging.handlers.WatchedFileHandler(path, encoding="utf-8")
            handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
            self.logger.addHandler(handler)
            self._handler = handler

    def ok(self, identity: str, peer: str, rpc: str, **changed: object) -> None:
        """A state-changing call that was applied; ``changed`` says what it changed."""
        self._write(rpc, "ok", identity, peer, changed)

    def refused(self, identity: str, peer: str, rpc: str, reason: str, **request: object) -> None:
        """A state-changing call refused by the ACL (nothing changed); rate-limited (see the module)."""
        now = time.monotonic()
        key = (identity, rpc)
        state = self._refusals.get(key)
        if state is None or now - state[0] >= 60.0:
            if len(self._refusals) >= MAX_RATE_KEYS:
                self._refusals.clear()
            suppressed = int(state[2]) if state is not None else 0
            state = self._refusals[key] = [now, 0.0, 0.0]
            if suppressed:
                request = {**request, "suppressed": suppressed}
        if state[1] >= REFUSALS_PER_MINUTE:
            state[2] += 1
            _suppressed["refusals"] += 1
            return
        state[1] += 1
        self._write(rpc, f"refused: {reason}", identity, peer, request)

    def _write(self, rpc: str, result: str, identity: str, peer: str, fields: dict[str, object]) -> None:
        if not self.logger.isEnabledFor(logging.INFO):
            return
        now = time.monotonic()
        self._end_windows(now)
        line: dict[str, object] = {"audit": rpc, "result": result, "identity": identity, "peer": peer}
        line.update({k: _short(v) for k, v in fields.items()})
        if self.repeat_window_seconds > 0:
            event = dict(line, peer=peer_address(peer))
            key = json.dumps(
                {k: v for k, v in event.items() if k not in VOLATILE_FIELDS}, ensure_ascii=True, default=str
            )
            window = self._windows.get(key)
            if window is not None:  # within its window (an ended one was removed above)
                if not window.repeats:
                    self._windows_with_repeats += 1
                window.repeats += 1
                _suppressed["repeat"] += 1
                self._schedule(window.start + self.repeat_window_seconds - now)
                return
            self._windows[key] = _Window(now, event)
            if len(self._windows) > MAX_REPEAT_WINDOWS:
                self._end_window(self._windows.popitem(last=False)[1], now)
        self._emit(line, now)

    def _emit(self, line: dict[str, object], now: float) -> None:
        """Write one line within ``auditLogLinesPerSecond`` (token bucket), after the summary of
        the lines the bucket dropped before, if any."""
        self._tokens = min(float(self.lines_per_second), self._tokens + (now - self._refilled) * self.lines_per_second)
        self._refilled = now
        if self._tokens < 1:
            self._rate_suppressed += 1
            _suppressed["rate"] += 1
            self._schedule(max(self._rate_summarised + 1.0 - now, 1.0 / self.lines_per_second))
            return
        self._tokens -= 1
        if now - self._rate_summarised >= 1.0:
            self._rate_summary(now)
        self.logger.info("%s", json.dumps(line, ensure_ascii=True, default=str))

    def _rate_summary(self, now: float) -> None:
        """The line saying how many lines ``auditLogLinesPerSecond`` dropped since the last one (at
        most one a second, besides the cap)."""
        if self._rate_suppressed:
            summary = {
                "audit": "AuditLinesSuppressed",
                "result": "suppressed",
                "lines": self._rate_suppressed,
                "lines_per_second": self.lines_per_second,
            }
            self._rate_suppressed = 0
            self._rate_summarised = now
            self.logger.info("%s", json.dumps(summary))

    def _end_windows(self, now: float) -> None:
        """End the repeat windows that are over (oldest first), writing their summaries."""
        windows = self._windows
        while windows:
            window = next(iter(windows.values()))
            if now - window.start < self.repeat_window_seconds:
                return
            windows.popitem(last=False)
            self._end_window(window, now)

    def _end_window(self, window: _Window, now: float) -> None:
        if window.repeats:
            self._windows_with_repeats -= 1
            self._emit(
                {**window.line, "repeats": window.repeats, "repeat_window_seconds": self.repeat_window_seconds}, now
            )

    def _schedule(self, delay: float) -> None:
        """Write the summaries due in ``delay`` seconds then, even if no other line comes (needs a
        running event loop; without one they are written with the next line, or by :meth:`close`)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        when = loop.time() + max(delay, 0.0)
        if self._timer is not None:
            if self._timer.when() <= when:
                return
            self._timer.cancel()
        self._timer = loop.call_at(when, self._due)

    def _due(self) -> None:
        self._timer = None
        now = time.monotonic()
        self._end_windows(now)
        if self._rate_suppressed and now - self._rate_summarised >= 1.0:
            self._rate_summary(now)
        if self._rate_suppressed:
            self._schedule(self._rate_summarised + 1.0 - now)
        elif self._windows_with_repeats:
            oldest = next(iter(self._windows.values()))
            self._schedule(oldest.start + self.repeat_window_seconds - now)

    def close(self) -> None:
        """Write the summaries still pending and close the audit file, if any."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for window in self._windows.values():
            if window.repeats:
                line = {**window.line, "repeats": window.repeats, "repeat_window_seconds": self.repeat_window_seconds}
                self.logger.info("%s", json.dumps(line, ensure_ascii=True, default=str))
        self._windows.clear()
        self._windows_with_repeats = 0
        self._rate_summary(time.monotonic())
        if self._handler is not None:
            self.logger.removeHandler(self._handler)
            self._handler.close()
            self._handler = None
