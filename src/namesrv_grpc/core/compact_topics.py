"""A registration's topic table in compact form: what the route table takes from each topic (S07).

:class:`CompactTopics` holds one list of topic names and one ``array('i')`` of four ints per topic
(``readQueueNums, writeQueueNums, perm, topicSysFlag``): two Python objects for 100,000 topics
instead of 100,000 ``TopicConfig`` tuples, adding nothing for the garbage collector to walk. A body
decoder may give the numbers as one tuple per topic instead (:meth:`CompactTopics.from_queue_nums`),
what the route table reads; the array is then built only when someone reads it. It crosses a
process boundary as the names, the distinct tuples and one small int per topic
(:meth:`CompactTopics.__reduce__`). It is a read-only ``Mapping[str, TopicConfig]``; its values are
built when read and carry only the four numbers (``order``, filter type and attributes are not kept:
the NameServer never stores them, as in RocketMQ's ``RouteInfoManager``).
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping
from itertools import chain

from namesrv_grpc.core.model import TopicConfig

QueueNums = tuple[int, int, int, int]
"""``(readQueueNums, writeQueueNums, perm, topicSysFlag)`` (as ``route_table.QueueNums``)."""


class CompactTopics(Mapping[str, TopicConfig]):
    """topic name -> TopicConfig (four numbers each); names are unique."""

    __slots__ = ("_index", "_nums", "_tuples", "names")

    def __init__(self, names: list[str], nums: array[int]) -> None:
        """``nums`` holds four ints per name, in the order of ``names``. Raises ValueError when the
        lengths disagree."""
        if len(nums) != 4 * len(names):
            raise ValueError(f"{len(names)} names need {4 * len(names)} numbers, got {len(nums)}")
        self.names = names
        self._nums: array[int] | None = nums
        self._tuples: list[QueueNums] | None = None
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

    @classmethod
    def from_topic_configs(cls, topic_configs: Mapping[str, TopicConfig]) -> CompactTopics:
        """The compact form of decoded topic configs (keyed by their topic names)."""
        names = []
        nums = array("i")
        for config in topic_configs.values():
            names.append(config.topic_name)
            nums.extend((config.read_queue_nums, config.write_queue_nums, config.perm, config.topic_sys_flag))
        return cls(names, nums)

    @classmethod
    def of(cls, topic_configs: Mapping[str, TopicConfig] | None) -> CompactTopics | None:
        """``topic_configs`` in the compact form (as it is when it is one already); None stays None."""
        if topic_configs is None or isinstance(topic_configs, CompactTopics):
            return topic_configs
        return cls.from_topic_configs(topic_configs)

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

    def __reduce__(self) -> tuple[Callable[..., CompactTopics], tuple[list[str], list[QueueNums], array[int]]]:
        """Pickled as the names, the distinct QueueNums and each topic's position among them: a
        registration's topics share a few QueueNums, so this crosses a process boundary in a
        fraction of the bytes and time of four ints per topic, and the other side gets the tuples
        :meth:`nums_list` returns (shared, as the route table keeps them) without building them
        (a 10,000-topic body: ~1 ms each side, against ~5 ms to build the array and ~3.6 ms to
        build the tuples again from it)."""
        tuples = self.nums_list()
        distinct = list(dict.fromkeys(tuples))
        position = {nums: index for index, nums in enumerate(distinct)}
        return _from_positions, (self.names, distinct, array("I", map(position.__getitem__, tuples)))


def _from_positions(names: list[str], distinct: list[QueueNums], positions: array[int]) -> CompactTopics:
    """What :meth:`CompactTopics.__reduce__` pickled. Raises IndexError or ValueError when the
    parts disagree."""
    return CompactTopics.from_queue_nums(names, list(map(distinct.__getitem__, positions)))
