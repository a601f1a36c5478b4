"""What every serving process holds, readable by all of them: the server-wide bounds
(``maxConnections``, ``remotingPartialFramesMaxBytes``) count what all serving processes together
hold, not what one does.

The ledger is a small file in the run directory, mapped into every serving process (``mmap``): one
row of 64-bit counters per serving process, each written only by its own process (so no lock is
needed) and summed by whoever checks a bound. The supervisor creates it and zeroes the row of a
serving process that exited (what it held went with it).
"""

from __future__ import annotations

import mmap
import os
from pathlib import Path

FIELDS = ("remoting_connections", "remoting_evictable", "remoting_never_active", "partial_frame_bytes")
"""The counters of each row."""

_WIDTH = 8


class Ledger:
    """The counters of every serving process of one NameServer (rows 1..``rows - 1``; row 0 unused)."""

    def __init__(self, path: Path, rows: int, *, create: bool = False) -> None:
        """Map the ledger at ``path`` (``create``: make it, zeroed). Raises OSError."""
        size = rows * len(FIELDS) * _WIDTH
        flags = os.O_RDWR | (os.O_CREAT | os.O_TRUNC if create else 0)
        fd = os.open(path, flags, 0o600)
        try:
            if create:
                os.ftruncate(fd, size)
            self._map = mmap.mmap(fd, size)
        finally:
            os.close(fd)
        self._values = memoryview(self._map).cast("q")
        self.rows = rows

    def put(self, row: int, field: str, value: int) -> None:
        """Set this process's counter (only row ``row``'s own process writes it)."""
        self._values[row * len(FIELDS) + FIELDS.index(field)] = value

    def total(self, field: str) -> int:
        """The counter summed over every row."""
        index = FIELDS.index(field)
        width = len(FIELDS)
        return sum(self._values[index::width])

    def clear(self, row: int) -> None:
        """Zero a row (its process exited)."""
        for index in range(len(FIELDS)):
            self._values[row * len(FIELDS) + index] = 0


class LedgerRow:
    """One serving process's view: it writes its own row and reads the others' sum (what the remoting
    budget needs, :class:`~namesrv_grpc.remoting.budget.SharedUsage`)."""

    def __init__(self, ledger: Ledger, row: int) -> None:
        self._ledger = ledger
        self._row = row
        ledger.clear(row)

    def publish(self, field: str, value: int) -> None:
        self._ledger.put(self._row, field, value)

    def others(self, field: str) -> int:
        """What the other serving processes hold."""
        return self._ledger.total(field) - self._ledger._values[self._row * len(FIELDS) + FIELDS.index(field)]
