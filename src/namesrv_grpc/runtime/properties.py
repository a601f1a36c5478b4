"""Java ``.properties`` files (RocketMQ's ``broker.conf`` and ``namesrv.conf``), read with the
``jproperties`` library: ``key=value``, ``key = value``, ``key: value``, ``#``/``!`` comments, line
continuations and ``\\u`` escapes (four hex digits), UTF-8 (a byte-order mark is skipped)."""

from __future__ import annotations

from pathlib import Path

import jproperties


class ConfigError(Exception):
    """A configuration problem, worded as one line ``FILE: KEY: PROBLEM`` for stderr (exit code 2)."""

    def __init__(self, source: str, key: str | None, problem: str) -> None:
        self.source, self.key, self.problem = source, key, problem
        super().__init__(f"{source}: {key}: {problem}" if key else f"{source}: {problem}")


def read_properties(path: Path) -> dict[str, str]:
    """Return the key/value pairs of a Java properties file (values with surrounding white space
    stripped, as RocketMQ's ``MixAll.properties2Object`` trims them).

    Raises ConfigError when the file cannot be read or is not UTF-8 text.
    """
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(str(path), None, f"cannot read: {exc.strerror or exc}") from None
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(str(path), None, f"not UTF-8 text (byte {exc.start})") from None
    properties = jproperties.Properties()
    try:
        properties.load(data, encoding="utf-8")
    except Exception as exc:  # jproperties raises several error types for broken escapes
        raise ConfigError(str(path), None, f"not a Java properties file: {exc}") from None
    return {str(key).strip(): str(value.data).strip() for key, value in properties.items()}
