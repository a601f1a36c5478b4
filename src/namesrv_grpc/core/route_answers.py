"""Encoded route answers of one route table, kept within a byte budget (``routeCacheMaxBytes``).

A lookup (S18) is answered from the bytes its encoder made the first time the topic was asked for
(gRPC ``PickupTopicRouteResponse`` bytes, the remoting JSON in both of its forms, zone-filtered
forms), until a change touches the route. Every serving process keeps its own answers, so without a
bound a client that asks for every topic makes each serving process hold every answer: with
rocketmq-rust's ``topics-100k-width-16`` workload that was 405 MiB per JSON form, 173 MiB of gRPC
answers and 684 MiB of route objects for zone-mode lookups, per serving process (measured; zone-mode
lookups now keep the route's zone names, :func:`~namesrv_grpc.core.zones.route_zone_names`).

The bound works in two generations, each one plain dict per encoding: new answers go into the
young generation; when it holds half the budget it becomes the old one and the previous old one is
dropped (counted in :attr:`RouteAnswers.evictions`). An answer found in the old generation moves
back to the young one, so answers asked for again stay. Together they hold at most the budget, or
two answers when each is larger than half of it (an answer is at most 16 MiB, the largest frame).
A plain dict of bytes and strings is never tracked by the garbage collector: a full collection does
not walk the answers, however many (an ``OrderedDict`` of 400,000 entries added 21 ms to each full
collection).

Answers that depend only on a route's content are also kept under that content (issue 41): a
topic's :data:`~namesrv_grpc.core.route_tables.TopicQueues` record (its broker names and their
QueueNums, interned) is a key beside the topic names, so the first lookup of a topic whose layout
another topic already has costs a dict hit, not an encoding (most topics of a real cluster share a
few hundred layouts). Such an answer also depends on its broker names' BrokerData and filter
servers: :meth:`RouteAnswers.drop_layouts_of` drops it when one of them changes. The route table
decides which topics may share (not those whose answer carries per-topic data: static-topic
mappings, order configuration, ``SYNC_BROKER_MEMBER_GROUP`` topics under acting master).

The answers built once per change of the table or the configuration (topic lists, cluster info,
the configuration: :meth:`~namesrv_grpc.core.reader.NameServerReader.answer_per_change`) are kept
here too, in one encoding of their own (:data:`PER_CHANGE`), under the same budget: one cache of
encoded answers per serving process.

Not thread-safe: used by one thread, the event loop of the process that holds the table.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from namesrv_grpc.core.model import TopicRouteData

ENTRY_OVERHEAD_BYTES = 64
"""What an answer costs besides its own bytes (the dict slot, the bytes object's header): measured
405 MiB of RSS for 399 MiB of answers, 100,000 of them."""

ROUTE_OBJECT_BYTES_PER_DATA = 224
"""An answer that is a route object (:class:`TopicRouteData`, e.g. ``NameServerReader.pickup_topic_route``)
is counted as this many bytes per QueueData and BrokerData (measured: 684 MiB for 100,000 routes of
16 each)."""


PER_CHANGE = "answers built once per change"
"""The encoding key of the answers built once per change (:class:`PerChangeKey` -> :class:`PerChangeAnswer`)."""


@dataclass(frozen=True, slots=True)
class PerChangeKey:
    """What an answer built once per change is kept under: the name its builder gives it (neither
    a topic name nor a layout, so no route change drops it; its version decides)."""

    name: Hashable


@dataclass(frozen=True, slots=True)
class PerChangeAnswer:
    """An answer built once per change: valid while the table's ``version`` and the configuration
    object are the ones it was built from."""

    version: int
    config: object
    value: Any


def answer_bytes(value: Any) -> int:
    """The bytes an answer is counted as: its length for bytes and strings, an estimate for a route
    object or a set of zone names, 1 KiB for anything else."""
    if isinstance(value, (bytes, bytearray, str)):
        return ENTRY_OVERHEAD_BYTES + len(value)
    if isinstance(value, TopicRouteData):
        return ENTRY_OVERHEAD_BYTES + ROUTE_OBJECT_BYTES_PER_DATA * (len(value.queue_datas) + len(value.broker_datas))
    if isinstance(value, PerChangeAnswer):
        return answer_bytes(value.value)
    if isinstance(value, frozenset):
        return ENTRY_OVERHEAD_BYTES + sum(64 + len(str(item)) for item in value)
    return ENTRY_OVERHEAD_BYTES + 1024


class RouteAnswers:
    """Per encoding (a number given by :meth:`encoding`), topic (a ``str``) or route layout (a
    ``TopicQueues`` tuple) -> encoded answer, in two generations within :attr:`max_bytes`
    (0: no bound)."""

    def __init__(self, max_bytes: int = 0) -> None:
        self.max_bytes = max_bytes
        """Bytes the answers may hold (:func:`answer_bytes` each); 0 = no bound."""
        self.numbers: dict[Hashable, int] = {}
        """encoding key -> its number (an index into the generations' lists)."""
        self.young: list[dict[Hashable, Any]] = []
        """The young generation: per encoding number, topic or layout -> answer (replaced, never
        changed in place, when it becomes the old one)."""
        self._old: list[dict[Hashable, Any]] = []
        self._layouts_of: dict[str, set[tuple[tuple[str, ...], Any]]] = {}
        """broker name -> the layouts naming it that may be held (in either generation)."""
        self._young_bytes = 0
        self._old_bytes = 0
        self.evictions = 0
        """Answers dropped to stay within :attr:`max_bytes` (not those a change dropped)."""

    @property
    def bytes(self) -> int:
        """Bytes held now (:func:`answer_bytes` of every answer)."""
        return self._young_bytes + self._old_bytes

    def __len__(self) -> int:
        return sum(map(len, self.young)) + sum(map(len, self._old))

    def dicts(self) -> Iterator[dict[Hashable, Any]]:
        """Every dict of answers (both generations, every encoding)."""
        yield from self.young
        yield from self._old

    def encoding(self, key: Hashable) -> int:
        """The number of the encoding ``key``, added when new."""
        number = self.numbers.get(key)
        if number is None:
            number = self.numbers[key] = len(self.young)
            self.young.append({})
            self._old.append({})
        return number

    def get(self, number: int, topic: Hashable) -> Any | None:
        """The answer of a topic or a layout, or None; one found in the old generation moves to the
        young one."""
        value = self.young[number].get(topic)
        if value is not None:
            return value
        value = self._old[number].pop(topic, None)
        if value is not None:
            self._old_bytes -= answer_bytes(value)
            if type(topic) is tuple:
                self.put_layout(number, topic, value)  # indexed again: put may drop the old generation
            else:
                self.put(number, topic, value)
        return value

    def put(self, number: int, topic: Hashable, value: Any) -> None:
        """Keep ``value`` (not None) as the topic's answer in encoding ``number``. When it would take
        the young generation past half the budget, the young generation becomes the old one first
        (and the old one is dropped)."""
        old_value = self.young[number].pop(topic, None)
        if old_value is not None:
            self._young_bytes -= answer_bytes(old_value)
        size = answer_bytes(value)
        if self.max_bytes and self._young_bytes and self._young_bytes + size > self.max_bytes // 2:
            self.evictions += sum(map(len, self._old))
            self._old = self.young
            self._old_bytes = self._young_bytes
            self.young = [{} for _ in self._old]
            self._young_bytes = 0
            self._index_layouts()
        self.young[number][topic] = value
        self._young_bytes += size

    def put_layout(self, number: int, layout: tuple[tuple[str, ...], Any], value: Any) -> None:
        """:meth:`put` of an answer shared by every topic whose route has ``layout`` (a
        ``TopicQueues`` record: broker names, their QueueNums)."""
        self.put(number, layout, value)
        for broker_name in layout[0]:
            self._layouts_of.setdefault(broker_name, set()).add(layout)

    def drop_layouts_of(self, broker_names: Iterable[str]) -> None:
        """Forget the shared answers of every layout naming one of ``broker_names`` (their
        BrokerData or filter servers changed)."""
        for broker_name in broker_names:
            layouts = self._layouts_of.pop(broker_name, None)
            if layouts:
                for layout in layouts:
                    self._young_bytes -= _pop_from(self.young, layout)
                    self._old_bytes -= _pop_from(self._old, layout)

    def _index_layouts(self) -> None:
        """Rebuild :attr:`_layouts_of` from the layouts still held (after a generation was dropped,
        so that the index never outgrows the answers)."""
        self._layouts_of = {}
        for answers in self._old:
            for key in answers:
                if type(key) is tuple:
                    for broker_name in key[0]:
                        self._layouts_of.setdefault(broker_name, set()).add(key)

    def drop(self, topics: Collection[str]) -> None:
        """Forget every answer of ``topics`` (their routes changed)."""
        self._young_bytes -= _drop_from(self.young, topics)
        self._old_bytes -= _drop_from(self._old, topics)

    def drop_one(self, topic: str) -> None:
        """:meth:`drop` of one topic (no set built: a registration drops its topics one by one)."""
        self._young_bytes -= _pop_from(self.young, topic)
        self._old_bytes -= _pop_from(self._old, topic)

    def clear(self) -> None:
        """Forget every answer (every route changed)."""
        for answers in self.dicts():
            answers.clear()
        self._young_bytes = self._old_bytes = 0
        self._layouts_of = {}


def _drop_from(generation: list[dict[Hashable, Any]], topics: Collection[str]) -> int:
    """Remove ``topics`` from every dict of ``generation``; the bytes (:func:`answer_bytes`) freed."""
    freed = 0
    for answers in generation:
        if answers:
            for topic in answers.keys() & topics:  # iterates the smaller of two sets
                freed += answer_bytes(answers.pop(topic))
    return freed


def _pop_from(generation: list[dict[Hashable, Any]], topic: Hashable) -> int:
    """Remove ``topic`` (or a layout) from every dict of ``generation``; the bytes freed."""
    freed = 0
    for answers in generation:
        value = answers.pop(topic, None)
        if value is not None:
            freed += answer_bytes(value)
    return freed
