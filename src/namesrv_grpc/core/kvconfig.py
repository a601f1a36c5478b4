"""The persisted key/value configuration (RocketMQ ``KVConfigManager``, rule S21).

File format, RocketMQ's own ``kvConfig.json``::

    {"configTable": {"ORDER_TOPIC_CONFIG": {"orders-eu": "broker-a:4;broker-b:4"}, ...}}

Every change is written before it is acknowledged, atomically: a temporary file in the same
directory is written and fsynced, then renamed over the old file, then the directory is fsynced. A
crash at any moment leaves the old file or the new one, never a torn one (a stray temporary file is
removed at the next start). The change is made visible in memory only after the write; when the
write fails nothing changes and :class:`~namesrv_grpc.core.errors.PersistError` is raised. Writes
block on the disk: the gRPC servicer runs them in a worker thread. Values are bounded
(``kvConfigMaxValueSize``) and so is the whole table (``kvConfigMaxTotalSize``), so no single write
can make every later one slow.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Mapping
from pathlib import Path

from namesrv_grpc.atomic_file import write_atomically
from namesrv_grpc.core.errors import KVConfigNotFoundError, LimitExceededError, PersistError
from namesrv_grpc.core.validation import quote

log = logging.getLogger(__name__)


class KVConfigFileError(Exception):
    """The KV config file exists but cannot be read as RocketMQ's kvConfig.json; names file and problem."""


def load_config_table(path: Path) -> dict[str, dict[str, str]]:
    """Read ``path`` (UTF-8 JSON ``{"configTable": {namespace: {key: value}}}``).

    A missing file is an empty table. Numbers and booleans as values are kept as their JSON text.
    Raises KVConfigFileError for anything else that is not that shape.
    """
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise KVConfigFileError(f"{path}: cannot read: {exc}") from None
    if not text.strip():
        return {}
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise KVConfigFileError(f"{path}: not valid JSON: {exc}") from None
    if not isinstance(document, dict):
        raise KVConfigFileError(f"{path}: expected a JSON object with key configTable")
    table = document.get("configTable", {})
    if table is None:
        return {}
    if not isinstance(table, dict):
        raise KVConfigFileError(f"{path}: configTable must be an object of namespaces")
    result: dict[str, dict[str, str]] = {}
    for namespace, entries in table.items():
        if not isinstance(entries, dict):
            raise KVConfigFileError(f"{path}: configTable.{namespace} must be an object of key/value pairs")
        result[namespace] = {}
        for key, value in entries.items():
            if isinstance(value, (dict, list)) or value is None:
                raise KVConfigFileError(f"{path}: configTable.{namespace}.{key} must be a string")
            result[namespace][key] = value if isinstance(value, str) else json.dumps(value)
    return {namespace: entries for namespace, entries in result.items() if entries}


def entry_size(namespace: str, key: str, value: str) -> int:
    """What one entry counts against ``kvConfigMaxTotalSize``: UTF-8 bytes of namespace, key and value."""
    return (
        len(namespace.encode("utf-8", "surrogatepass"))
        + len(key.encode("utf-8", "surrogatepass"))
        + len(value.encode("utf-8", "surrogatepass"))
    )


def remove_stray_temp_files(path: Path) -> list[Path]:
    """Delete temporary files a crash left beside ``path`` (``.NAME.*.tmp``, see
    :func:`~namesrv_grpc.atomic_file.write_atomically`); return them. Only call it while no write
    to ``path`` is in progress (at start)."""
    removed = []
    for stray in path.parent.glob(f".{path.name}.*.tmp"):
        try:
            stray.unlink()
        except OSError as exc:
            log.warning("cannot remove stray temporary file %s: %s", stray, exc)
            continue
        removed.append(stray)
    return removed


class KVConfigManager:
    """Namespaced key/value store persisted to ``path`` on every change. Thread-safe.

    Writers are serialised and write the file outside the table's lock, then publish the new table:
    readers (route lookups read ORDER_TOPIC_CONFIG) never wait for a disk write, and a write is
    visible only once it is durable. Published namespace dicts are never mutated.
    """

    def __init__(self, path: Path | None) -> None:
        """``path`` None keeps the table in memory only (tests); else stray temporary files of a
        crashed write are removed and the file is loaded with :func:`load_config_table` (raises
        KVConfigFileError)."""
        self.path = path
        self._lock = threading.Lock()
        """Guards ``_table`` and ``_total_bytes`` (held only to read or swap them)."""
        self._write_lock = threading.Lock()
        """Serialises writers (held across the file write)."""
        if path is not None:
            for stray in remove_stray_temp_files(path):
                log.info("removed %s, left by an interrupted KV config write", stray)
        self._table: dict[str, dict[str, str]] = load_config_table(path) if path is not None else {}
        self._total_bytes = sum(
            entry_size(namespace, key, value)
            for namespace, entries in self._table.items()
            for key, value in entries.items()
        )

    @property
    def total_bytes(self) -> int:
        """UTF-8 bytes of every namespace, key and value stored (``kvConfigMaxTotalSize`` bounds it)."""
        with self._lock:
            return self._total_bytes

    def put(self, namespace: str, key: str, value: str, *, max_total_bytes: int | None = None) -> None:
        """Set a value and persist; returns once the file is durably written. On a failed write
        nothing changes and PersistError is raised; when the table would pass ``max_total_bytes``
        (None = no limit) nothing changes and LimitExceededError is raised."""
        with self._write_lock:
            with self._lock:
                table = self._table
                entries = table.get(namespace, {})
                old = entries.get(key)
                total = self._total_bytes + entry_size(namespace, key, value)
                if old is not None:
                    total -= entry_size(namespace, key, old)
            if max_total_bytes is not None and total > max_total_bytes and total > self._total_bytes:
                raise LimitExceededError(
                    "kvConfigMaxTotalSize",
                    f"the KV config would hold {total} bytes, more than kvConfigMaxTotalSize {max_total_bytes}; "
                    "delete keys or raise the limit",
                )
            new_table = dict(table)
            new_table[namespace] = {**entries, key: value}
            self._publish(new_table, total)

    def get(self, namespace: str, key: str) -> str:
        """Return a value; raise KVConfigNotFoundError when it is absent."""
        with self._lock:
            try:
                return self._table[namespace][key]
            except KeyError:
                raise KVConfigNotFoundError(
                    f"no KV config {quote(key)} in namespace {quote(namespace)}",
                    {"namespace": namespace, "key": key},
                ) from None

    def get_or_none(self, namespace: str, key: str) -> str | None:
        """Return a value or None."""
        with self._lock:
            return self._table.get(namespace, {}).get(key)

    def delete(self, namespace: str, key: str) -> None:
        """Delete a value (absent is fine) and persist; returns once the file is durably written. On
        a failed write it stays and PersistError is raised."""
        with self._write_lock:
            with self._lock:
                table = self._table
                entries = table.get(namespace)
                if entries is None or key not in entries:
                    return
                total = self._total_bytes - entry_size(namespace, key, entries[key])
            new_table = dict(table)
            remaining = {k: v for k, v in entries.items() if k != key}
            if remaining:
                new_table[namespace] = remaining
            else:
                del new_table[namespace]
            self._publish(new_table, total)

    def apply(self, changes: Mapping[tuple[str, str], str | None]) -> None:
        """A replica's update, in memory only (a serving process; the route-table process wrote the
        file): set each (namespace, key) to its value, or delete it (None)."""
        with self._write_lock:
            with self._lock:
                table = dict(self._table)
                total = self._total_bytes
            copied: set[str] = set()
            for (namespace, key), value in changes.items():
                if namespace not in copied:
                    table[namespace] = dict(table.get(namespace, {}))
                    copied.add(namespace)
                entries = table[namespace]
                old = entries.pop(key, None)
                if old is not None:
                    total -= entry_size(namespace, key, old)
                if value is not None:
                    entries[key] = value
                    total += entry_size(namespace, key, value)
            for namespace in copied:
                if not table[namespace]:
                    del table[namespace]
            with self._lock:
                self._table = table
                self._total_bytes = total

    def list_namespace(self, namespace: str) -> dict[str, str]:
        """A copy of one namespace's table ({} when unknown)."""
        with self._lock:
            return dict(self._table.get(namespace, {}))

    def snapshot(self) -> dict[str, dict[str, str]]:
        """A deep copy of the whole table."""
        with self._lock:
            return {namespace: dict(entries) for namespace, entries in self._table.items()}

    def _publish(self, table: dict[str, dict[str, str]], total: int) -> None:
        """Write ``table`` durably (caller holds ``_write_lock``), then make it the current one."""
        self._persist(table)
        with self._lock:
            self._table = table
            self._total_bytes = total

    def _persist(self, table: dict[str, dict[str, str]]) -> None:
        if self.path is None:
            return
        text = json.dumps({"configTable": table}, ensure_ascii=False, indent=2, sort_keys=True) + "\n"
        try:
            write_atomically(self.path, text)
        except OSError as exc:
            raise PersistError(f"cannot write KV config file {self.path}: {exc}", {"path": str(self.path)}) from None
