"""The audit trail: one line per state-changing call, to the logger ``namesrv.audit``.

Each line is one JSON object (control characters escaped, so a hostile name cannot forge lines)::

    {"audit": "RegisterBroker", "result": "ok", "identity": "ak:broker-a-ak", "peer": "ipv4:10.0.0.7:53122",
     "cluster_name": "DefaultCluster", "broker_name": "broker-a", "broker_id": 0, "broker_addr": "10.0.0.7:10911"}

``result`` is ``ok`` or ``refused: REASON`` (an ACL refusal of a state-changing call). Refusals are
rate-limited so a flood of refused requests cannot fill the disk: at most
:data:`REFUSALS_PER_MINUTE` lines a minute per identity and RPC; the next line written for them
carries ``"suppressed": N``. Calls that
only refresh liveness are not audited: heartbeats, QueryDataVersion, session heartbeats, and a
registration that changed nothing (``RegisterBrokerResult.changed`` false: a broker's periodic
re-registration, which for a Java broker is its heartbeat). Those that change routes, KV entries,
configuration or files are: RegisterBroker that registers a broker address new here or changes
what is held for it, UnregisterBroker, session binds, AdminService writes, KV writes,
UpdateNamesrvConfig, ExportRouteSnapshot; and their remoting request codes. The lines go
wherever logging sends them (stderr by default) and, with ``--audit-log-file``, to that file too
(``WatchedFileHandler``: rotate it with logrotate, no copytruncate needed).
"""

from __future__ import annotations

import json
import logging
import logging.handlers
import time
from pathlib import Path

AUDIT_LOGGER = "namesrv.audit"

REFUSALS_PER_MINUTE = 10
"""Refusal lines per identity and RPC per minute; the rest are counted and reported as suppressed."""

MAX_RATE_KEYS = 4096
"""Identities x RPCs tracked for the refusal rate limit (the table is cleared when it fills)."""

MAX_VALUE_CHARS = 256
"""Longer string values are cut (with a marker) so one request cannot write a huge line."""


def _short(value: object) -> object:
    if isinstance(value, str) and len(value) > MAX_VALUE_CHARS:
        return value[:MAX_VALUE_CHARS] + f"...({len(value)} chars)"
    return value


class AuditLog:
    """Writes audit lines to ``namesrv.audit`` (and ``path`` when given)."""

    def __init__(self, path: Path | None = None) -> None:
        """Raises OSError when ``path`` cannot be opened for appending."""
        self.logger = logging.getLogger(AUDIT_LOGGER)
        self._refusals: dict[tuple[str, str], list[float]] = {}
        """(identity, rpc) -> [window start (monotonic s), lines in the window, suppressed]."""
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
            return
        state[1] += 1
        self._write(rpc, f"refused: {reason}", identity, peer, request)

    def _write(self, rpc: str, result: str, identity: str, peer: str, fields: dict[str, object]) -> None:
        if not self.logger.isEnabledFor(logging.INFO):
            return
        line: dict[str, object] = {"audit": rpc, "result": result, "identity": identity, "peer": peer}
        line.update({k: _short(v) for k, v in fields.items()})
        self.logger.info("%s", json.dumps(line, ensure_ascii=True, default=str))

    def close(self) -> None:
        """Close the audit file, if any."""
        if self._handler is not None:
            self.logger.removeHandler(self._handler)
            self._handler.close()
            self._handler = None
