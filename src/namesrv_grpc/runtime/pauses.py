"""What keeps every request of the process waiting at once: garbage-collection pauses and event-loop lag.

- :class:`GcPauses` times every collection of CPython's cyclic garbage collector (``gc.callbacks``)
  into ``namesrv_gc_pause_seconds{generation}``. While a collection runs, no thread runs Python
  code: each request in flight waits for it.
- :class:`LoopLagProbe` asks the event loop to run a callback every
  :data:`LOOP_LAG_INTERVAL_SECONDS` and records how late it ran (``namesrv_event_loop_lag_seconds``):
  the wait of a request whose answer is ready but whose turn on the loop has not come (the loop, or
  the GIL it needs, is busy elsewhere).

- :func:`freeze_startup_objects` moves what the process built to start (modules, protobuf
  descriptors, gRPC, the configuration: most of an idle server's objects) out of the collector's
  reach, so that no full collection walks them again.

Both feed :class:`~namesrv_grpc.metrics.FastHistogram` (one writer each: collections never overlap,
and the probe runs on the loop's thread), exported by :class:`~namesrv_grpc.metrics.NamesrvMetrics`.
The alert ``NamesrvEventLoopLag`` (deploy/prometheus/alerts.yml) watches the lag's p99.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from namesrv_grpc.metrics import FastHistogram

GC_GENERATIONS = ("0", "1", "2")
"""Values of the ``generation`` label of ``namesrv_gc_pause_seconds`` (2 = a full collection)."""

LOOP_LAG_INTERVAL_SECONDS = 0.1
"""How often the probe's callback is scheduled (10 observations a second, a few microseconds each)."""


def freeze_startup_objects() -> int:
    """Collect once, then ``gc.freeze()`` every object tracked now (Python's advice for long-lived
    startup objects): later collections, full ones included, walk only what was made after. Frozen
    objects are never collected as cyclic garbage; they are the ones that live as long as the
    process. Returns how many objects were frozen in all."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


class GcPauses:
    """Times garbage collections into one histogram per generation while installed.

    The callback only reads the clock and counts: it runs inside the collection, in whichever thread
    triggered it, and must neither allocate much nor take a lock (a collection can start while that
    thread holds any lock)."""

    def __init__(self, histograms: Mapping[str, FastHistogram]) -> None:
        """``histograms``: one per value of :data:`GC_GENERATIONS`."""
        self.histograms = histograms
        self._started = 0.0

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.histograms[GC_GENERATIONS[info["generation"]]].observe(time.perf_counter() - self._started)

    def install(self) -> None:
        """Start timing collections (idempotent)."""
        if self._callback not in gc.callbacks:
            gc.callbacks.append(self._callback)

    def uninstall(self) -> None:
        """Stop timing collections (idempotent)."""
        with contextlib.suppress(ValueError):
            gc.callbacks.remove(self._callback)


class LoopLagProbe:
    """Measures how late the running event loop runs a callback scheduled every ``interval`` seconds."""

    def __init__(self, histogram: FastHistogram, interval: float = LOOP_LAG_INTERVAL_SECONDS) -> None:
        """``interval`` in seconds."""
        self.interval = interval
        self.histogram = histogram
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            due = loop.time() + self.interval
            await asyncio.sleep(self.interval)
            self.histogram.observe(max(0.0, loop.time() - due))

    def start(self) -> None:
        """Start probing the running loop (call from a coroutine on it)."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="event-loop-lag-probe")

    async def stop(self) -> None:
        """Stop probing."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
