"""Large registration bodies are decoded in a child process, so lookups never wait behind them.

Decoding a 100,000-topic body is about half a second of Python work. In a worker thread it still
holds the GIL that the event loop needs for every request, and the 100,000 ``TopicConfig`` objects
it builds make the garbage collector's full passes long: lookups waited hundreds of milliseconds
(docs/benchmarks.md, rows 3a and 11a). :class:`BodyDecodePool` runs the decode (inflate, split,
parse, validate: the very functions the in-thread path runs) in one child process and gets back a
:class:`~namesrv_grpc.core.compact_topics.CompactTopics` (two objects for any number of topics);
the server's process then only compares and applies the topics that differ (S07).

A broker re-registers the same big table with a few topics changed: the child keeps the tables it
decoded last (:data:`CHILD_CACHE_MAX_TOPICS` topics in all, least recently used dropped first) by
their topics fingerprint, and :func:`decode_as_delta` returns a
:class:`~namesrv_grpc.core.compact_topics.TopicsDelta` against the table the route table holds
(its ``BrokerLiveInfo.topics_fingerprint``): the server's process then handles the changed topics
only, not all 100,000 (issue 21). Without that table in the cache the whole table comes back.

The child is started at the first large body (``spawn``: nothing of the server's threads is
copied), runs at a lower CPU priority (:data:`CHILD_NICENESS`), decodes one body at a time, and is
stopped with the server. If it dies (killed for memory,
say), the body is decoded in the calling thread instead and a new child is started for the next one;
if no child can be started at all (no ``/dev/shm`` for its semaphores, say), every body is decoded in
the calling thread, as with ``registerBodyDecodeInChildProcess=false``.
Errors raised by the decode (MalformedBodyError, InvalidFieldError, LimitExceededError) come back
as the same exceptions.

``spawn`` imports the parent's main module in the child (except ``python -m namesrv_grpc``, whose
``__main__`` it skips, and the ``namesrv`` script, which is guarded): a program that embeds
:class:`~namesrv_grpc.server.NamesrvServer` must start it under ``if __name__ == "__main__":``, or set
``registerBodyDecodeInChildProcess=false``.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import CancelledError, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import TYPE_CHECKING, TypeVar

from namesrv_grpc.core.compact_topics import CompactTopics, TopicsDelta

if TYPE_CHECKING:
    from namesrv_grpc.core.processor import DecodedBody

log = logging.getLogger(__name__)

T = TypeVar("T")

LARGE_BODY_BYTES = 512 * 1024
"""A body sent uncompressed is decoded in the child from this size on (about 12,000 topics)."""

LARGE_COMPRESSED_BODY_BYTES = 8 * 1024
"""A compressed body is decoded in the child from this size on: it inflates 10 to 400 times (a Java
broker's compressed body of 100,000 alike topics is 225 KiB), so its size says little; 8 KiB is a few
thousand topics."""

CHILD_NICENESS = 10
"""The child runs at a lower CPU priority: when the machine is busy, requests go first and a large
registration takes longer."""


CHILD_CACHE_MAX_TOPICS = 400_000
"""Topics of the decoded tables the child keeps for :func:`decode_as_delta` (about 40 MiB)."""

_in_child = False
_tables: OrderedDict[int, CompactTopics] = OrderedDict()
"""In the child: topics fingerprint -> the table decoded with it, least recently used first."""


def _init_child() -> None:
    """Child initializer: lower its CPU priority (ignored where not allowed); turn the cache on."""
    global _in_child
    _in_child = True
    with contextlib.suppress(OSError):
        os.nice(CHILD_NICENESS)


def _remember(fingerprint: int, topics: CompactTopics) -> None:
    _tables[fingerprint] = topics
    _tables.move_to_end(fingerprint)
    total = sum(len(table) for table in _tables.values())
    while total > CHILD_CACHE_MAX_TOPICS and len(_tables) > 1:
        total -= len(_tables.popitem(last=False)[1])
    if total > CHILD_CACHE_MAX_TOPICS:
        _tables.clear()


def decode_as_delta(
    decode: Callable[..., DecodedBody], args: tuple[object, ...], base: int | None, broker_name: str = ""
) -> DecodedBody:
    """``decode(*args)`` (a body decoder returning :class:`CompactTopics`), with its topics as a
    :class:`TopicsDelta` against the table of fingerprint ``base`` when this is the child and it
    still has that table (else unchanged), and, when ``broker_name`` is given, the route digest
    hash of each topic it returns as that broker name's QueueData (:meth:`CompactTopics.with_hashes`:
    the server's process then does not hash them). Only the child keeps tables: called in the
    server's process (the child died) it decodes in full and keeps nothing. Raises what ``decode``
    raises."""
    decoded = decode(*args)
    topics, fingerprint = decoded.topic_configs, decoded.topics_fingerprint
    if not _in_child or not isinstance(topics, CompactTopics):
        return decoded
    previous = _tables.get(base) if base is not None and fingerprint is not None else None
    if fingerprint is not None:
        _remember(fingerprint, topics)
    if base is not None and previous is not None:
        delta = TopicsDelta.between(base, previous, topics)
        if broker_name:
            delta.changed = delta.changed.with_hashes(broker_name)
        return decoded._replace(topic_configs=delta)
    return decoded._replace(topic_configs=topics.with_hashes(broker_name)) if broker_name else decoded


class BodyDecodePool:
    """One child process that decodes large registration bodies; thread-safe."""

    def __init__(
        self, min_bytes: int = LARGE_BODY_BYTES, min_compressed_bytes: int = LARGE_COMPRESSED_BODY_BYTES
    ) -> None:
        """Bodies of at least ``min_bytes`` (``min_compressed_bytes`` when compressed) go to the child."""
        self.min_bytes = min_bytes
        self.min_compressed_bytes = min_compressed_bytes
        self._lock = threading.Lock()
        self._pool: ProcessPoolExecutor | None = None
        self._closed = False
        self.decoded_in_child = 0
        """Bodies decoded by the child (for tests and the benchmarks)."""

    def wants(self, size: int, compressed: bool) -> bool:
        """True when a body of ``size`` bytes is decoded in the child."""
        return not self._closed and size >= (self.min_compressed_bytes if compressed else self.min_bytes)

    def _executor(self) -> ProcessPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ProcessPoolExecutor(
                    max_workers=1, mp_context=multiprocessing.get_context("spawn"), initializer=_init_child
                )
            return self._pool

    def decode(self, function: Callable[..., T], *args: object) -> T:
        """``function(*args)`` in the child (both picklable, ``function`` at module level), or in this
        thread when the child died or the pool is closed. Blocks; call it from a worker thread.
        Raises what ``function`` raises."""
        if self._closed:
            return function(*args)
        try:
            executor = self._executor()
        except (OSError, ImportError, NotImplementedError) as exc:  # e.g. no /dev/shm for its semaphores
            log.warning(
                "cannot start the body-decoding child process (%s); large bodies are decoded in the server", exc
            )
            self._closed = True
            return function(*args)
        try:
            result = executor.submit(function, *args).result()
        except BrokenProcessPool:
            log.warning("the body-decoding child process died; decoding this body in the server process")
            with self._lock:
                if self._pool is executor:
                    self._pool = None
            executor.shutdown(wait=False)
            return function(*args)
        except (RuntimeError, CancelledError):  # closed meanwhile: "cannot schedule new futures after shutdown"
            if not self._closed:
                raise
            return function(*args)
        self.decoded_in_child += 1
        return result

    def decode_delta(
        self, function: Callable[..., DecodedBody], args: tuple[object, ...], base: int | None, broker_name: str = ""
    ) -> DecodedBody:
        """:func:`decode_as_delta` of ``function(*args)`` against the table of fingerprint ``base``
        (None: in full), hashed for ``broker_name``, as :meth:`decode` runs it (in this thread, in
        full and unhashed, when the child died)."""
        return self.decode(decode_as_delta, function, args, base, broker_name)

    def child_pid(self) -> int | None:
        """The child's process id, None before the first large body (for tests and the benchmarks)."""
        with self._lock:
            pool = self._pool
        if pool is None:
            return None
        processes = list(getattr(pool, "_processes", {}) or {})
        return processes[0] if processes else None

    def close(self) -> None:
        """Stop the child (bodies still being decoded there finish in their callers' threads)."""
        with self._lock:
            self._closed = True
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
