"""Group commit of KV writes in the route-table process (issue 30, "KV write amplification").

``kvConfig.json`` is one JSON document, as RocketMQ's: every PUT_KV_CONFIG / DELETE_KV_CONFIG
rewrites and fsyncs all of it (a 2 MiB table: 2 MB and two fsyncs per write), and each write must
be durable before it is answered (S21). Written one by one on the route-table process's event
loop, a flood of KV writes held every registration behind the disk (a heartbeat waited ~3 s).

:class:`KVGroupCommit` instead:

1. checks and stages a write at once, in arrival order, on the event loop
   (:meth:`~namesrv_grpc.core.processor.NameServer.stage_kv_put`): a bad write or one past
   ``kvConfigMaxTotalSize`` (counting every write staged or being written) is refused before
   anything changes;
2. writes the staged writes together, one file write and fsync for all of them, in a worker thread
   (the event loop goes on applying registrations meanwhile); writes that arrive meanwhile are
   staged for the next write, which starts as soon as this one ends;
3. once the file is durable, makes the batch visible (the table readers see, and the change the
   serving processes' replicas get) and answers its writes.

A write is therefore answered only once it is durable and visible ("nothing acknowledged is lost"),
KV writes become visible in the order they arrived, and no reader ever sees one that is not on disk.
A failed file write fails every write of its batch and every write staged behind it (they were
checked against a table holding the batch) with the same PersistError: nothing of them changes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

from namesrv_grpc.core.kvconfig import KVBatch
from namesrv_grpc.core.processor import NameServer
from namesrv_grpc.metrics import NamesrvMetrics

log = logging.getLogger(__name__)


class KVGroupCommit:
    """The KV writes of one route-table process (its :class:`NameServer`'s KV config)."""

    def __init__(self, nameserver: NameServer, metrics: NamesrvMetrics | None = None) -> None:
        """``metrics``: counts flushes (``namesrv_kv_config_flushes_total{result}``) and observes
        the writes of each (``namesrv_kv_config_writes_per_flush``)."""
        self._ns = nameserver
        self._metrics = metrics
        self._next: asyncio.Future[None] | None = None
        """Resolved when the staged writes are durable and visible."""
        self._writing: asyncio.Future[None] | None = None
        """Resolved when the batch being written is durable and visible."""
        self._flusher: asyncio.Task[None] | None = None

    def put(self, namespace: str, key: str, value: str) -> Coroutine[Any, Any, None]:
        """PUT_KV_CONFIG: checked and staged now (raises InvalidFieldError, LimitExceededError:
        nothing changes); the coroutine returned ends once it is durable and visible (raises
        PersistError when the file could not be written)."""
        self._ns.stage_kv_put(namespace, key, value)
        return _wait(self._staged())

    def delete(self, namespace: str, key: str) -> Coroutine[Any, Any, None]:
        """DELETE_KV_CONFIG: as :meth:`put`. A key that is absent once every earlier write is written
        stages nothing; its answer still waits for those writes (one of them may be what removes it)."""
        if self._ns.stage_kv_delete(namespace, key):
            return _wait(self._staged())
        return _wait(self._next or self._writing)

    def _staged(self) -> asyncio.Future[None]:
        """The future of the staged writes; starts writing them unless a write is in progress."""
        if self._next is None:
            self._next = asyncio.get_running_loop().create_future()
        if self._flusher is None:
            self._flusher = asyncio.create_task(self._flush(), name="kv-config-group-commit")
        return self._next

    async def _flush(self) -> None:
        """Write batches until nothing is staged: one file write at a time."""
        kv = self._ns.kv_config
        try:
            while self._next is not None:
                done, self._next = self._next, None
                batch = kv.take_batch()
                if batch is None:  # cannot happen: a future exists only with staged writes
                    done.set_result(None)
                    continue
                self._writing = done
                try:
                    await asyncio.to_thread(kv.write, batch)
                except Exception as exc:
                    kv.abort(batch)
                    self._failed(batch, exc, done)
                else:
                    kv.commit(batch)
                    self._ns.kv_committed(batch)
                    self._count(batch, "ok")
                    done.set_result(None)
                finally:
                    self._writing = None
        finally:
            self._flusher = None

    def _failed(self, batch: KVBatch, exc: Exception, done: asyncio.Future[None]) -> None:
        dropped = self._next
        self._next = None
        log.error(
            "KV config file not written, %d write(s) refused%s: %s",
            batch.writes,
            " (and the writes staged behind them)" if dropped is not None else "",
            exc,
        )
        self._count(batch, "failed")
        for future in (done, dropped):
            if future is not None:
                future.set_exception(exc)
                future.exception()  # retrieved: a batch whose callers all left is not "never retrieved"

    def _count(self, batch: KVBatch, result: str) -> None:
        if self._metrics is not None:
            self._metrics.kv_config_flushes.labels(result).inc()
            self._metrics.kv_config_writes_per_flush.observe(batch.writes)


async def _wait(future: asyncio.Future[None] | None) -> None:
    if future is not None:
        await asyncio.shield(future)


__all__ = ["KVGroupCommit"]
