"""The audit trail: one line per state-changing call, to the logger ``namesrv.audit``.

Each line is one JSON object (control characters escaped, so a hostile name cannot forge lines)::

    {"audit": "RegisterBroker", "result": "ok", "identity": "ak:broker-a-ak", "peer": "ipv4:10.0.0.7:53122",
     "cluster_name": "DefaultCluster", "broker_name": "broker-a", "broker_id": 0, "broker_addr": "10.0.0.7:10911"}

``result`` is ``ok`` or ``refused: REASON`` (an ACL refusal of a state-changing call). Calls that
only refresh liveness (heartbeats, QueryDataVersion, session heartbeats) are not audited; those that
change routes, KV entries, configuration or files are: RegisterBroker, UnregisterBroker, session
binds, AdminService writes, KV writes, UpdateNamesrvConfig, ExportRouteSnapshot. The lines go
wherever logging sends them (stderr by default) and, with ``--audit-log-file``, to that file too
(``WatchedFileHandler``: rotate it with logrotate, no copytruncate needed).
"""

from __future__ import annotations

import json
import logging
import logging.handlers
from pathlib import Path

AUDIT_LOGGER = "namesrv.audit"

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
        """A state-changing call refused by the ACL (nothing changed)."""
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
