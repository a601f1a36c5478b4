"""How ``namesrv`` (every one of its processes) and ``broker-agent`` log: one line per record on
stderr, as ``text`` (the default) or ``json`` (``--log-format``), the time in ISO-8601 with its UTC
offset and milliseconds (``2026-11-28T09:34:25.123+00:00``), so that lines from hosts in different
zones sort and compare.

- ``text``: ``TIME LEVEL LOGGER: MESSAGE`` (``2026-11-28T09:34:25.123+00:00 WARNING namesrv: ...``);
- ``json``: one object per line with ``time``, ``level``, ``logger`` and ``message`` (and
  ``exc_info`` with the traceback), written by python-json-logger, for log collectors that parse
  JSON (Loki, Elasticsearch, Cloud Logging).
"""

from __future__ import annotations

import logging
import sys
from datetime import datetime
from typing import Literal

from pythonjsonlogger.json import JsonFormatter

LogFormat = Literal["text", "json"]
LOG_FORMATS: tuple[LogFormat, ...] = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def iso_time(created: float) -> str:
    """``created`` (Unix time, s) as local ISO-8601 time with its UTC offset, to the millisecond."""
    return datetime.fromtimestamp(created).astimezone().isoformat(timespec="milliseconds")


class IsoTextFormatter(logging.Formatter):
    """The text lines, with :func:`iso_time`."""

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        return iso_time(record.created)


class IsoJsonFormatter(JsonFormatter):
    """The JSON lines, with :func:`iso_time` under ``time``."""

    def __init__(self) -> None:
        super().__init__(
            "%(asctime)s %(levelname)s %(name)s %(message)s",
            rename_fields={"asctime": "time", "levelname": "level", "name": "logger"},
        )

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        return iso_time(record.created)


def configure_logging(level: str, log_format: str = "text") -> None:
    """Send the root logger's records of ``level`` (``DEBUG`` ... ``ERROR``) to stderr in
    ``log_format``. Raises ValueError for another format."""
    if log_format not in LOG_FORMATS:
        raise ValueError(f"log format must be one of {', '.join(LOG_FORMATS)}, not {log_format!r}")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(IsoJsonFormatter() if log_format == "json" else IsoTextFormatter(TEXT_FORMAT))
    logging.basicConfig(level=level.upper(), handlers=[handler], force=True)
