"""A content digest of the route table, so NameServers can be compared by one number.

NameServers never talk to each other (docs/rules.md, S27): each one's route table is what the brokers
registered with it. When one NameServer misses a change (a failed registration, an admin command
sent to one NameServer only) its routes differ from the others'. Comparing counts misses a
permission split; comparing this digest does not.

The digest covers what a route lookup returns, apart from filter servers:

- every QueueData, as ``(topic, broker name, readQueueNums, writeQueueNums, perm, topicSysFlag)``;
- every BrokerData, as ``(broker name, cluster, {broker id: address}, zoneName, enableActingMaster)``;
- every static-topic mapping (RocketMQ 5.x, rule S40), as ``(topic, bname, scope, totalQueues, epoch,
  dirty, currIdMap)``.

Each element is hashed with BLAKE2b (stable across processes and machines, unlike ``hash()``) and
the digest is the sum of the element hashes modulo 2**52: independent of insertion order, so two
tables with the same content have the same digest however they were built, and cheap to keep up to
date (a change subtracts the old element's hash and adds the new one's). 52 bits fit exactly in the
float64 of a Prometheus sample (``namesrv_route_table_digest``).
"""

from __future__ import annotations

import hashlib
import sys
from array import array
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from typing import Final

from namesrv_grpc.core.model import BrokerData, QueueData, TopicQueueMappingInfo

DIGEST_BITS = 52
DIGEST_MASK = (1 << DIGEST_BITS) - 1


def _hash(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "big") & DIGEST_MASK


def queue_data_hash(topic: str, queue_data: QueueData) -> int:
    """Hash of one QueueData of ``topic`` (52 bits)."""
    q = queue_data
    return queue_nums_hash(topic, q.broker_name, (q.read_queue_nums, q.write_queue_nums, q.perm, q.topic_sys_flag))


def queue_nums_hash(topic: str, broker_name: str, nums: tuple[int, int, int, int]) -> int:
    """:func:`queue_data_hash` of ``QueueData(broker_name, *nums)`` without building it; ``nums`` is
    ``(readQueueNums, writeQueueNums, perm, topicSysFlag)``."""
    read, write, perm, sys_flag = nums
    return _hash(f"Q\0{topic}\0{broker_name}\0{read}\0{write}\0{perm}\0{sys_flag}")


_QUEUE_DATA_STATE: Final = hashlib.blake2b(b"Q\0", digest_size=8)
"""The BLAKE2b-64 state after the start every QueueData text shares: copying it is cheaper than
making a new one (no parameter parsing)."""


def queue_nums_hash_sum(topics: Sequence[str], broker_name: str, nums: Sequence[tuple[int, int, int, int]]) -> int:
    """The sum modulo 2**52 of :func:`queue_nums_hash` of ``(topics[i], broker_name, nums[i])`` for
    every i (what a registration adds to the digest): the same values, about twice as fast for many
    topics (no text built per topic: a copied state takes the topic, then the suffix its distinct
    ``nums`` share). ``topics`` and ``nums`` have the same length."""
    suffixes = {n: f"\0{broker_name}\0{n[0]}\0{n[1]}\0{n[2]}\0{n[3]}".encode() for n in set(nums)}
    copy = _QUEUE_DATA_STATE.copy
    digests: list[bytes] = []
    append = digests.append
    for topic, suffix in zip(map(str.encode, topics), map(suffixes.__getitem__, nums), strict=True):
        state = copy()
        state.update(topic)
        state.update(suffix)
        append(state.digest())
    values = array("Q", b"".join(digests))
    if sys.byteorder == "little":
        values.byteswap()  # each digest is read big-endian, as _hash does
    # (h & DIGEST_MASK) summed modulo 2**52 is h summed modulo 2**52: the mask is taken once.
    return sum(values) & DIGEST_MASK


DIGEST_PIECE_TOPICS: Final = 1000
"""QueueData per piece of work a registration leaves for the digest (:func:`queue_nums_changes`):
about 0.6 ms each, so that a write arriving meanwhile waits no longer than one piece."""


def _removed_hash_sum(topics: Sequence[str], broker_name: str, nums: Sequence[tuple[int, int, int, int]]) -> int:
    return -queue_nums_hash_sum(topics, broker_name, nums) & DIGEST_MASK


def queue_nums_changes(
    topics: Sequence[str],
    broker_name: str,
    nums: Sequence[tuple[int, int, int, int]],
    old_topics: Sequence[str] = (),
    old_nums: Sequence[tuple[int, int, int, int]] = (),
) -> list[Callable[[], int]]:
    """What a registration changes in the digest, as pieces of work of at most
    :data:`DIGEST_PIECE_TOPICS` QueueData each, whose results add up (modulo 2**52) to: the QueueData
    ``(topics[i], broker_name, nums[i])`` added, ``(old_topics[i], broker_name, old_nums[i])`` removed."""
    size = DIGEST_PIECE_TOPICS
    return [
        partial(sign_sum, names[start : start + size], broker_name, values[start : start + size])
        for names, values, sign_sum in ((topics, nums, queue_nums_hash_sum), (old_topics, old_nums, _removed_hash_sum))
        for start in range(0, len(names), size)
    ]


def broker_data_hash(broker_data: BrokerData) -> int:
    """Hash of one BrokerData (52 bits); the address map is taken in broker id order."""
    b = broker_data
    addrs = ",".join(f"{broker_id}={addr}" for broker_id, addr in sorted(b.broker_addrs.items()))
    return _hash(f"B\0{b.broker_name}\0{b.cluster}\0{addrs}\0{b.zone_name}\0{int(b.enable_acting_master)}")


def mapping_hash(topic: str, mapping: TopicQueueMappingInfo) -> int:
    """Hash of one static-topic mapping of ``topic`` (52 bits); ``currIdMap`` in logic id order."""
    m = mapping
    ids = ",".join(f"{logic}={physical}" for logic, physical in sorted(m.curr_id_map.items()))
    return _hash(f"M\0{topic}\0{m.bname}\0{m.scope}\0{m.total_queues}\0{m.epoch}\0{int(m.dirty)}\0{ids}")


def full_digest(
    topic_queue_table: Mapping[str, Mapping[str, QueueData]],
    broker_datas: Iterable[BrokerData],
    mappings: Mapping[str, Mapping[str, TopicQueueMappingInfo]] | None = None,
) -> int:
    """The digest computed from scratch (for checks; the route table keeps it incrementally);
    ``mappings``: topic -> broker name -> static-topic mapping."""
    total = 0
    for topic, by_broker in (mappings or {}).items():
        for mapping in by_broker.values():
            total += mapping_hash(topic, mapping)
    for topic, queue_data_map in topic_queue_table.items():
        for queue_data in queue_data_map.values():
            total += queue_data_hash(topic, queue_data)
    for broker_data in broker_datas:
        total += broker_data_hash(broker_data)
    return total & DIGEST_MASK


MAX_PENDING_PIECES: Final = 512
"""Pieces of work :meth:`RouteDigest.add_later` keeps at most (each holds its share of a
registration's topic lists: at most ~8 MiB together)."""


class RouteDigest:
    """The running digest: callers report every element added to or removed from the tables, at once
    (:meth:`add`, :meth:`remove`) or as work to do later (:meth:`add_later`: a registration's
    thousands of hashes, worked out piece by piece once its change is on its way to the replicas,
    :meth:`settle_piece`)."""

    __slots__ = ("_pending", "_value")

    def __init__(self) -> None:
        self._value = 0
        self._pending: deque[Callable[[], int]] = deque()

    @property
    def value(self) -> int:
        """The current digest, 0 <= value < 2**52 (0 for an empty table); settles pending work."""
        if self._pending:
            self.settle()
        return self._value

    def add(self, element_hash: int) -> None:
        """An element with this hash entered the table."""
        self._value = (self._value + element_hash) & DIGEST_MASK

    def remove(self, element_hash: int) -> None:
        """An element with this hash left the table."""
        self._value = (self._value - element_hash) & DIGEST_MASK

    def add_later(self, pieces: Iterable[Callable[[], int]]) -> None:
        """Each ``piece()`` (a sum of element hashes, modulo 2**52) is added by :meth:`settle_piece`,
        :meth:`settle` or a read of :attr:`value`: the sum does not depend on the order of its
        terms. Past :data:`MAX_PENDING_PIECES` pending pieces, the oldest are worked out now, as
        many as were added (a burst of writes with no pause pays for its own pieces, each write
        its share, instead of one write paying for the whole burst)."""
        self._pending.extend(pieces)
        while len(self._pending) > MAX_PENDING_PIECES:
            self.add(self._pending.popleft()())

    def settle_piece(self) -> bool:
        """Do one piece of the work :meth:`add_later` left; True when more is left."""
        if self._pending:
            self.add(self._pending.popleft()())
        return bool(self._pending)

    def settle(self) -> None:
        """Do all the work :meth:`add_later` left."""
        while self._pending:
            self.add(self._pending.popleft()())

    def replace(self, old_hash: int | None, new_hash: int | None) -> None:
        """An element was replaced (either side None = absent)."""
        if old_hash is not None:
            self.remove(old_hash)
        if new_hash is not None:
            self.add(new_hash)
