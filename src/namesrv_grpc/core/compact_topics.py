"""A registration's topic table in compact form: what the route table takes from each topic (S07).

:class:`CompactTopics` holds one list of topic names and one ``array('i')`` of four ints per topic
(``readQueueNums, writeQueueNums, perm, topicSysFlag``): two Python objects for 100,000 topics
instead of 100,000 ``TopicConfig`` tuples, so it crosses a process boundary cheaply and adds nothing
for the garbage collector to walk. A body decoder may give the numbers as one tuple per topic
instead (:meth:`CompactTopics.from_queue_nums`), what the route table reads; the array is then
built only when someone reads it. It is a read-only ``Mapping[str, TopicConfig]``; its values are
built when read and carry only the four numbers (``order``, filter type and attributes are not kept:
the NameServer never stores them, as in RocketMQ's ``RouteInfoManager``).

:class:`TopicsDelta` is a table as what it changes against an earlier one: what the body-decoding
child returns for a broker's re-registration (``namesrv_grpc.decode_pool``).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator, Mapping
from itertools import chain

from namesrv_grpc.core.digest import queue_nums_hash
from namesrv_grpc.core.model import TopicConfig

QueueNums = tuple[int, int, int, int]
"""``(readQueueNums, writeQueueNums, perm, topicSysFlag)`` (as ``route_table.QueueNums``)."""


class CompactTopics(Mapping[str, TopicConfig]):
    """topic name -> TopicConfig (four numbers each); names are unique."""

    __slots__ = ("_index", "_nums", "_tuples", "hashed_for", "hashes", "names")

    def __init__(
        self, names: list[str], nums: array[int], hashed_for: str = "", hashes: array[int] | None = None
    ) -> None:
        """``nums`` holds four ints per name, in the order of ``names``. ``hashes`` (optional): the
        route digest hash of each topic's QueueData for broker name ``hashed_for``
        (``core.digest.queue_nums_hash``), worked out where the body was decoded. Raises ValueError
        when the lengths disagree."""
        if len(nums) != 4 * len(names):
            raise ValueError(f"{len(names)} names need {4 * len(names)} numbers, got {len(nums)}")
        if hashes is not None and len(hashes) != len(names):
            raise ValueError(f"{len(names)} names need {len(names)} hashes, got {len(hashes)}")
        self.names = names
        self._nums: array[int] | None = nums
        self._tuples: list[QueueNums] | None = None
        self.hashed_for = hashed_for
        self.hashes = hashes
        self._index: dict[str, int] | None = None

    @classmethod
    def from_queue_nums(cls, names: list[str], queue_nums: list[QueueNums]) -> CompactTopics:
        """The topics ``names`` with ``queue_nums[i]`` the ``(read, write, perm, sys flag)`` of
        ``names[i]`` (each an int32), as a body decoder makes them: kept as given for
        :meth:`nums_list` (what the route table reads), :attr:`nums` is built when first read.
        Raises ValueError when the lengths disagree."""
        if len(queue_nums) != len(names):
            raise ValueError(f"{len(names)} names need {len(names)} QueueNums, got {len(queue_nums)}")
        topics = cls([], array("i"))
        topics.names = names
        topics._nums = None
        topics._tuples = queue_nums
        return topics

    @property
    def nums(self) -> array[int]:
        """Four ints per topic, in the order of :attr:`names`."""
        if self._nums is None:
            self._nums = array("i", chain.from_iterable(self._tuples or ()))
        return self._nums

    def with_hashes(self, broker_name: str) -> CompactTopics:
        """The same topics with the digest hash of each as ``broker_name``'s QueueData."""
        hashes = array("q", (queue_nums_hash(topic, broker_name, nums) for topic, nums in self.queue_nums()))
        return CompactTopics(self.names, self.nums, broker_name, hashes)

    @classmethod
    def from_topic_configs(cls, topic_configs: Mapping[str, TopicConfig]) -> CompactTopics:
        """The compact form of decoded topic configs (keyed by their topic names)."""
        names = []
        nums = array("i")
        for config in topic_configs.values():
            names.append(config.topic_name)
            nums.extend((config.read_queue_nums, config.write_queue_nums, config.perm, config.topic_sys_flag))
        return cls(names, nums)

    def queue_nums(self, positions: Iterable[int] | None = None) -> Iterator[tuple[str, QueueNums]]:
        """``(topic, (read, write, perm, sys flag))`` in order (only at ``positions`` when given),
        without building TopicConfig objects."""
        if positions is not None:
            return ((self.names[i], self._nums_at(i)) for i in positions)
        return zip(self.names, self.nums_list(), strict=True)

    def nums_list(self) -> list[QueueNums]:
        """The four numbers of every topic, in the order of :attr:`names` (built in C; the list
        :meth:`from_queue_nums` was given, not a copy: callers do not change it)."""
        if self._tuples is not None:
            return self._tuples
        numbers = iter(self.nums)
        return list(zip(numbers, numbers, numbers, numbers, strict=True))

    def _nums_at(self, position: int) -> QueueNums:
        if self._tuples is not None:
            return self._tuples[position]
        nums = self.nums
        base = 4 * position
        return nums[base], nums[base + 1], nums[base + 2], nums[base + 3]

    def __len__(self) -> int:
        return len(self.names)

    def __iter__(self) -> Iterator[str]:
        return iter(self.names)

    def __getitem__(self, name: str) -> TopicConfig:
        if self._index is None:
            self._index = {topic: position for position, topic in enumerate(self.names)}
        read, write, perm, sys_flag = self._nums_at(self._index[name])
        return TopicConfig(name, read, write, perm, sys_flag)

    def __reduce__(self) -> tuple[type[CompactTopics], tuple[list[str], array[int], str, array[int] | None]]:
        return CompactTopics, (self.names, self.nums, self.hashed_for, self.hashes)


DELTA_CHUNK = 1024
"""Numbers compared at once (256 topics) when two tables list the same names in the same order."""


class TopicsDelta:
    """A registration's topic table as what it changes against an earlier table (S07, issue 21).

    ``base_fingerprint`` names the earlier table (the topics fingerprint of the body that made it,
    ``BrokerLiveInfo.topics_fingerprint``); ``count`` is the number of topics the new table holds;
    ``changed`` holds its topics that are new or whose four numbers differ from the earlier table's;
    ``removed`` the earlier table's topics it no longer holds. Applied to a route table that holds
    exactly what the earlier table made, the changed topics are all that S07 writes and the removed
    ones all that ``deleteTopicWithBrokerRegistration`` deletes. Made in the body-decoding child
    process, so the server process handles a few topics instead of all of a big broker's.
    """

    __slots__ = ("base_fingerprint", "changed", "count", "removed")

    def __init__(self, base_fingerprint: int, count: int, changed: CompactTopics, removed: list[str]) -> None:
        self.base_fingerprint = base_fingerprint
        self.count = count
        self.changed = changed
        self.removed = removed

    def __len__(self) -> int:
        """The number of topics of the new table (not of the delta)."""
        return self.count

    def __reduce__(self) -> tuple[type[TopicsDelta], tuple[int, int, CompactTopics, list[str]]]:
        return TopicsDelta, (self.base_fingerprint, self.count, self.changed, self.removed)

    @classmethod
    def between(cls, base_fingerprint: int, old: CompactTopics, new: CompactTopics) -> TopicsDelta:
        """What ``new`` changes against ``old`` (the table whose fingerprint is ``base_fingerprint``).
        When both list the same names in the same order (a broker's table between two of its
        registrations) the numbers are compared a chunk at a time, in C."""
        positions: list[int] = []
        removed: list[str] = []
        if old.names == new.names:
            old_nums, new_nums = old.nums, new.nums
            for start in range(0, len(new_nums), DELTA_CHUNK):
                end = start + DELTA_CHUNK
                if old_nums[start:end] != new_nums[start:end]:
                    for position in range(start // 4, min(end, len(new_nums)) // 4):
                        if old._nums_at(position) != new._nums_at(position):
                            positions.append(position)
        else:
            index = {topic: position for position, topic in enumerate(old.names)}
            for position, topic in enumerate(new.names):
                at = index.pop(topic, None)
                if at is None or old._nums_at(at) != new._nums_at(position):
                    positions.append(position)
            removed = list(index)
        nums = array("i")
        for position in positions:
            nums.extend(new._nums_at(position))
        changed = CompactTopics([new.names[position] for position in positions], nums)
        return cls(base_fingerprint, len(new), changed, removed)
