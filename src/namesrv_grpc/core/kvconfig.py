"""The persisted key/value configuration (RocketMQ ``KVConfigManager``, rule S21).

File format, RocketMQ's own ``kvConfig.json``::

    {"configTable": {"ORDER_TOPIC_CONFIG": {"orders-eu": "broker-a:4;broker-b:4"}, ...}}

Every change is written before it is acknowledged, atomically: a temporary file in the same
directory is written and fsynced, then renamed over the old file, then the directory is fsynced. A
crash at any moment leaves the old file or the new one, never a torn one. When the write fails the
change is undone in memory and :class:`~namesrv_grpc.core.errors.PersistError` is raised.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

from namesrv_grpc.atomic_file import write_atomically
from namesrv_grpc.core.errors import KVConfigNotFoundError, PersistError


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


class KVConfigManager:
    """Namespaced key/value store persisted to ``path`` on every change. Thread-safe."""

    def __init__(self, path: Path | None) -> None:
        """``path`` None keeps the table in memory only (tests); else it is loaded with
        :func:`load_config_table` (raises KVConfigFileError)."""
        self.path = path
        self._lock = threading.Lock()
        self._table: dict[str, dict[str, str]] = load_config_table(path) if path is not None else {}

    def put(self, namespace: str, key: str, value: str) -> None:
        """Set a value and persist; on a failed write the old value stays and PersistError is raised."""
        with self._lock:
            entries = self._table.setdefault(namespace, {})
            had_key, old_value = key in entries, entries.get(key)
            entries[key] = value
            try:
                self._persist()
            except PersistError:
                if had_key:
                    entries[key] = old_value  # type: ignore[assignment]
                else:
                    del entries[key]
                    if not entries:
                        del self._table[namespace]
                raise

    def get(self, namespace: str, key: str) -> str:
        """Return a value; raise KVConfigNotFoundError when it is absent."""
        with self._lock:
            try:
                return self._table[namespace][key]
            except KeyError:
                raise KVConfigNotFoundError(
                    f"no KV config {key!r} in namespace {namespace!r}", {"namespace": namespace, "key": key}
                ) from None

    def get_or_none(self, namespace: str, key: str) -> str | None:
        """Return a value or None."""
        with self._lock:
            return self._table.get(namespace, {}).get(key)

    def delete(self, namespace: str, key: str) -> None:
        """Delete a value (absent is fine) and persist; on a failed write it stays and PersistError is raised."""
        with self._lock:
            entries = self._table.get(namespace)
            if entries is None or key not in entries:
                return
            old_value = entries.pop(key)
            if not entries:
                del self._table[namespace]
            try:
                self._persist()
            except PersistError:
                self._table.setdefault(namespace, {})[key] = old_value
                raise

    def list_namespace(self, namespace: str) -> dict[str, str]:
        """A copy of one namespace's table ({} when unknown)."""
        with self._lock:
            return dict(self._table.get(namespace, {}))

    def snapshot(self) -> dict[str, dict[str, str]]:
        """A deep copy of the whole table."""
        with self._lock:
            return {namespace: dict(entries) for namespace, entries in self._table.items()}

    def _persist(self) -> None:
        if self.path is None:
            return
        text = json.dumps({"configTable": self._table}, ensure_ascii=False, indent=2, sort_keys=True) + "\n"
        try:
            write_atomically(self.path, text)
        except OSError as exc:
            raise PersistError(f"cannot write KV config file {self.path}: {exc}", {"path": str(self.path)}) from None
