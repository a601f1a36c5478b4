"""Crash-safe file replacement: a reader sees the old file or the new one, never a torn one."""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path

log = logging.getLogger(__name__)


def write_atomically(path: Path, text: str | bytes) -> None:
    """Replace ``path`` with ``text`` (a str is written as UTF-8, bytes as they are) via temp file +
    fsync + rename + directory fsync.

    Raises OSError when a step before the rename fails; the old file is then untouched. Once the
    rename is done the new file is what readers see, so a failing directory fsync (some filesystems
    refuse it) is logged, not raised.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as tmp:
            tmp.write(text.encode("utf-8") if isinstance(text, str) else text)
            tmp.flush()
            os.fsync(tmp.fileno())
        os.replace(tmp_name, path)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    try:
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except OSError as exc:
        log.warning("%s written, but fsync of its directory failed: %s", path, exc)
