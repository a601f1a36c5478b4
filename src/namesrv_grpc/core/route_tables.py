"""The route table's state and its reads: RocketMQ's ``RouteInfoManager`` tables and lookups, as a
pure module (no gRPC, no I/O). The writes are :class:`~namesrv_grpc.core.route_table.RouteInfoManager`'s,
which extends :class:`RouteTables`; a serving process's replica is one too, changed only by the
change stream (:mod:`namesrv_grpc.core.route_journal`).

Five tables, as in ``namesrv/.../routeinfo/RouteInfoManager.java``::

    topic_queue_nums     topic       -> TopicQueues: (broker names, their QueueNums) as two tuples
    broker_addr_table    broker name -> BrokerData {broker id -> broker addr}
    cluster_addr_table   cluster     -> {broker name}
    broker_live_table    broker addr -> BrokerLiveInfo
    filter_server_table  broker addr -> [filter-server addr]

plus one index, ``topics_by_broker_name`` (broker name -> {topic: None}), so removing a broker name,
changing its write permission or listing a cluster's topics does not scan every topic.

Representation (what the garbage collector walks): a QueueData is stored as a plain tuple of four
ints, ``(readQueueNums, writeQueueNums, perm, topicSysFlag)``, interned (one object per distinct
value in the whole table); a topic's QueueData are two plain tuples, its broker names (sorted) and
their QueueNums (:data:`TopicQueues`, replaced as a whole on a change); the topic index holds dicts
of ``None``, not sets; cached routes are one dict of bytes per encoding. CPython stops tracking plain
tuples of untracked items and dicts holding only such values, so the 200,000-entry dicts of topics
are not walked by a full collection at all (a ``QueueData`` NamedTuple, a ``set`` or a dict of dicts
is tracked for ever: full collections took 0.3 s with 800,000 QueueData, 50 ms with dicts of dicts).
:class:`QueueData` objects are built when a route is read (:meth:`RouteTables.pickup_topic_route_data`,
:attr:`RouteTables.topic_queue_table`, :meth:`RouteTables.copy_tables`).

One thread only, no lock: the route-table process applies one command at a time on its event loop,
and each serving process applies the change stream to its replica between two requests on its own,
so a reader never sees half a registration or removal. Time comes from an injected ``clock``
returning milliseconds since the epoch, so tests drive expiry without sleeping.
"""

from __future__ import annotations

import bisect
import dataclasses
import time
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from namesrv_grpc.core.capacity import RouteTableLimits
from namesrv_grpc.core.model import (
    MASTER_ID,
    PERM_WRITE,
    SYNC_BROKER_MEMBER_GROUP_PREFIX,
    TOPIC_SYS_FLAG_UNIT,
    TOPIC_SYS_FLAG_UNIT_SUB,
    BrokerData,
    BrokerLiveInfo,
    ClusterInfo,
    DataVersion,
    QueueData,
    TopicQueueMappingInfo,
    TopicRouteData,
)
from namesrv_grpc.core.route_answers import RouteAnswers

QueueNums = tuple[int, int, int, int]
"""One QueueData as the table stores it: ``(readQueueNums, writeQueueNums, perm, topicSysFlag)``."""

TopicQueues = tuple[tuple[str, ...], tuple[QueueNums, ...]]
"""One topic's QueueData: its broker names, sorted, and their QueueNums in the same order."""


def queues_get(queues: TopicQueues | None, broker_name: str) -> QueueNums | None:
    """The QueueNums of ``broker_name`` in a topic's QueueData, or None."""
    if queues is None:
        return None
    names = queues[0]
    index = bisect.bisect_left(names, broker_name)
    return queues[1][index] if index < len(names) and names[index] == broker_name else None


def queues_put(queues: TopicQueues | None, broker_name: str, nums: QueueNums) -> TopicQueues:
    """A topic's QueueData with ``broker_name``'s added or replaced."""
    if queues is None:
        return (broker_name,), (nums,)
    names, values = queues
    index = bisect.bisect_left(names, broker_name)
    if index < len(names) and names[index] == broker_name:
        return names, (*values[:index], nums, *values[index + 1 :])
    return (*names[:index], broker_name, *names[index:]), (*values[:index], nums, *values[index:])


def queues_remove(queues: TopicQueues, broker_name: str) -> TopicQueues | None:
    """A topic's QueueData without ``broker_name``'s (None when none is left)."""
    names, values = queues
    index = bisect.bisect_left(names, broker_name)
    if index == len(names) or names[index] != broker_name:
        return queues
    if len(names) == 1:
        return None
    return (*names[:index], *names[index + 1 :]), (*values[:index], *values[index + 1 :])


Clock = Callable[[], int]
"""Returns the current time in milliseconds since the epoch."""

RouteListener = Callable[[int, "frozenset[str] | None"], None]
"""Called after a change with (route revision, changed topics); topics None = every topic (what
the route encoder adds changed, e.g. ``orderMessageEnable`` was toggled)."""


def wall_clock_millis() -> int:
    """The system clock in milliseconds since the epoch (RocketMQ ``System.currentTimeMillis()``)."""
    return time.time_ns() // 1_000_000


def monotonic_millis() -> int:
    """``time.monotonic`` in milliseconds: the liveness clock (S13), which no clock step moves. The
    same clock in every process of one machine (Linux ``CLOCK_MONOTONIC``), so replicas agree."""
    return time.monotonic_ns() // 1_000_000


class QueueDataView(Mapping[str, dict[str, QueueData]]):
    """``topic -> {broker name -> QueueData}`` over the table's compact storage (read-only; each
    access builds the QueueData of one topic). For introspection and tests: the table itself reads
    :attr:`RouteInfoManager.topic_queue_nums`."""

    def __init__(self, queue_nums: dict[str, TopicQueues]) -> None:
        self._queue_nums = queue_nums

    def __getitem__(self, topic: str) -> dict[str, QueueData]:
        names, values = self._queue_nums[topic]
        return {name: QueueData(name, *nums) for name, nums in zip(names, values, strict=True)}

    def __iter__(self) -> Iterator[str]:
        return iter(self._queue_nums)

    def __len__(self) -> int:
        return len(self._queue_nums)


@dataclass(frozen=True, slots=True)
class RouteTableCopy:
    """A consistent copy of the five tables, taken in one step (for snapshots and exports).

    QueueData and DataVersion are immutable and shared with the live table; every dict, set and
    BrokerData/BrokerLiveInfo is a copy, safe to read from another thread.
    """

    topic_queue_table: dict[str, dict[str, QueueData]]
    broker_addr_table: dict[str, BrokerData]
    cluster_addr_table: dict[str, frozenset[str]]
    broker_live_table: dict[str, BrokerLiveInfo]
    filter_server_table: dict[str, tuple[str, ...]]
    topic_queue_mapping_info_table: dict[str, dict[str, TopicQueueMappingInfo]] = dataclasses.field(
        default_factory=dict
    )
    """Static topics (RocketMQ 5.x): topic -> broker name -> mapping (immutable, shared)."""


RegisteredBody = tuple[str, str, int, "tuple[int, int, bool] | None", "int | None"]
"""``(cluster, broker name, broker id, body fingerprint, topics fingerprint)`` of a broker address's
last registration: what :attr:`RouteTables.registered_bodies` holds (fingerprints as in
:class:`~namesrv_grpc.core.model.BrokerLiveInfo`)."""


@dataclass(frozen=True, slots=True)
class RouteTableStats:
    """Sizes of the tables, for metrics: counts of live broker addresses, broker names, clusters,
    topics and QueueData entries."""

    brokers_live: int
    broker_names: int
    clusters: int
    topics: int
    queue_datas: int


class RouteTables:
    """The five tables, the topic index, the encoded answers and the reads of them (RocketMQ
    ``RouteInfoManager``'s lookups). Changed only by :class:`~namesrv_grpc.core.route_table.RouteInfoManager`'s
    writes or, in a replica, by :meth:`~namesrv_grpc.core.route_table.RouteInfoManager.apply_change`."""

    def __init__(
        self,
        clock: Clock = wall_clock_millis,
        *,
        liveness_clock: Clock | None = None,
        support_acting_master: bool = False,
        limits: RouteTableLimits | None = None,
    ) -> None:
        """``clock`` returns ms since the epoch (the times shown); ``liveness_clock`` the ms that S13
        measures silence with: :func:`monotonic_millis` when ``clock`` is the system clock, else
        ``clock`` too (a test's fake clock drives both). ``support_acting_master`` is 5.x's
        ``supportActingMaster`` (default off, S52): routes show a master-less broker name's acting
        master under id 0. ``limits``: how large the table and its answers may grow (none by
        default; the NameServer sets its configuration's)."""
        self._clock = clock
        self._liveness_clock = liveness_clock or (monotonic_millis if clock is wall_clock_millis else clock)
        self.route_answers = RouteAnswers()
        """Encoded answers of :meth:`pickup_topic_route_cached`, per encoding, within
        ``limits.route_cache_max_bytes`` (:mod:`namesrv_grpc.core.route_answers`)."""
        self.limits = limits or RouteTableLimits()
        self.support_acting_master = support_acting_master
        self.topic_queue_nums: dict[str, TopicQueues] = {}
        """topic -> its QueueData as :data:`TopicQueues` (see the module doc)."""
        self.broker_addr_table: dict[str, BrokerData] = {}
        self.cluster_addr_table: dict[str, set[str]] = {}
        self.broker_live_table: dict[str, BrokerLiveInfo] = {}
        self.registered_bodies: dict[str, RegisteredBody] = {}
        """broker address -> which body its last registration carried (the fingerprints of its live
        entry): kept by the writer and by every replica, so that a door knows, without asking the
        route-table process, that a registration's body is new and must be decoded
        (:meth:`registered_body`). Only a hint: the writer's live table decides."""
        self.filter_server_table: dict[str, list[str]] = {}
        self.topics_by_broker_name: dict[str, dict[str, None]] = {}
        """broker name -> {topic: None} (a dict used as an ordered set: untracked by the collector)."""
        self.topic_queue_mapping_info_table: dict[str, dict[str, TopicQueueMappingInfo]] = {}
        """Static topics (RocketMQ 5.x ``topicQueueMappingInfoTable``, S40): topic -> the mapping's
        ``bname`` -> mapping. Written by registrations that carry topics (master, prime slave); never
        removed (as in RocketMQ: a broker that leaves, or a deleted topic, keeps its mappings; a later
        registration replaces them)."""
        self.version = 0
        """Increases on every change of any table; cheap change detection for caches and snapshots."""
        self.route_revision = 0
        """Increases by one for every public call that changed some topic's route (see RouteListener)."""
        self.route_listeners: list[RouteListener] = []
        """Called after every route change, once the change is complete."""
        self._queue_datas_counted: tuple[int, int] | None = None
        """(route revision, QueueData count) of the last :meth:`stats`."""

    @property
    def topic_queue_table(self) -> QueueDataView:
        """RocketMQ's ``topicQueueTable`` (topic -> {broker name -> QueueData}) as a read-only view of
        :attr:`topic_queue_nums` (:meth:`copy_tables` for a detached copy)."""
        return QueueDataView(self.topic_queue_nums)

    @property
    def limits(self) -> RouteTableLimits:
        """How large the table and its answers may grow (settable: the NameServer sets its
        configuration's, again when it changes)."""
        return self._limits

    @limits.setter
    def limits(self, limits: RouteTableLimits) -> None:
        self._limits = limits
        self.route_answers.max_bytes = limits.route_cache_max_bytes

    # ------------------------------------------------------------------ lookups (S18, S22, S24)

    def pickup_topic_route_data(self, topic: str) -> TopicRouteData | None:
        """S18: the topic's QueueData (sorted by broker name), copies of the BrokerData of their broker
        names and the filter servers of their addresses; None when the topic has no QueueData or none
        of its broker names has BrokerData."""
        return self._route_data(topic)

    def pickup_topic_route_cached(
        self,
        topic: str,
        encode: Callable[[TopicRouteData], Any],
        key: Hashable | None = None,
        shared: Callable[[str], bool] | None = None,
    ) -> Any | None:
        """S18 at the cost of a dict lookup: ``encode(route)`` of the topic's route, cached until a
        change touches the route (its QueueData, its broker names' BrokerData or filter servers).
        None when the topic has no route (not cached). ``key`` names the encoding (default: ``encode``
        itself, so pass a stable function); one topic may be cached in several encodings (the gRPC
        response and the remoting bodies), and a change drops all of them together. The answers are
        kept within ``limits.route_cache_max_bytes`` (``routeCacheMaxBytes``); one dropped to stay
        within it is encoded again when next asked for (:mod:`namesrv_grpc.core.route_answers`).

        Every change drops the entries it touches in the same step, so a reader sees the route
        either before or after a registration, never half of one. ``encode`` must not call back into
        this table. Call :meth:`invalidate_routes` when
        what ``encode`` adds changes.

        ``shared(topic)`` true: ``encode`` adds nothing of the topic's own,
        so its answer is the answer of every topic with the same QueueData records whose route
        carries nothing per topic either (no static-topic mappings, not a ``SYNC_BROKER_MEMBER_GROUP``
        topic under acting master): found by that content first, encoded only for the first such
        topic (issue 41; :mod:`namesrv_grpc.core.route_answers`).
        """
        if key is None:
            key = encode
        answers = self.route_answers
        number = answers.encoding(key)
        cached = answers.get(number, topic)
        if cached is not None:
            return cached
        layout = None
        if shared is not None:
            layout = self.topic_queue_nums.get(topic)
            if layout is None:
                return None
            if (
                topic in self.topic_queue_mapping_info_table
                or (self.support_acting_master and topic.startswith(SYNC_BROKER_MEMBER_GROUP_PREFIX))
                or not shared(topic)
            ):
                layout = None
            else:
                cached = answers.get(number, layout)
                if cached is not None:
                    answers.put(number, topic, cached)
                    return cached
        route = self._route_data(topic)
        if route is None:
            return None
        value = encode(route)
        answers.put(number, topic, value)
        if layout is not None:
            answers.put_layout(number, layout, value)
        return value

    def routes_of(self, topics: Iterable[str]) -> tuple[int, dict[str, TopicRouteData | None]]:
        """S18 for many topics in one step: ``(route revision, {topic: route or None})``.
        The routes are exactly those of that revision (for watchers: a change with a revision up to
        this one is already in them)."""
        return self.route_revision, {topic: self._route_data(topic) for topic in topics}

    def _route_data(self, topic: str) -> TopicRouteData | None:
        queues = self.topic_queue_nums.get(topic)
        if not queues:
            return None
        queue_data_map = dict(zip(*queues, strict=True))
        broker_datas: list[BrokerData] = []
        filter_servers: dict[str, tuple[str, ...]] = {}
        for broker_name in sorted(queue_data_map):
            broker_data = self.broker_addr_table.get(broker_name)
            if broker_data is None:
                continue
            broker_datas.append(broker_data.copy())
            for addr in broker_data.broker_addrs.values():
                servers = self.filter_server_table.get(addr)
                if servers:
                    filter_servers[addr] = tuple(servers)
        if not broker_datas:
            return None
        if self.support_acting_master and not topic.startswith(SYNC_BROKER_MEMBER_GROUP_PREFIX):
            for broker_data in broker_datas:
                addrs = broker_data.broker_addrs
                if (
                    addrs
                    and MASTER_ID not in addrs
                    and broker_data.enable_acting_master
                    and not queue_data_map[broker_data.broker_name][2] & PERM_WRITE
                ):
                    # S52: the acting master (smallest id) is shown as the master (RocketMQ 5.x
                    # pickupTopicRouteData, supportActingMaster).
                    addrs[MASTER_ID] = addrs.pop(min(addrs))
        queue_datas = tuple(QueueData(name, *queue_data_map[name]) for name in sorted(queue_data_map))
        mappings = self.topic_queue_mapping_info_table.get(topic)
        if mappings:  # S40
            return TopicRouteData(queue_datas, tuple(broker_datas), filter_servers, "", dict(mappings))
        return TopicRouteData(queue_datas, tuple(broker_datas), filter_servers)

    def get_cluster_info(self) -> ClusterInfo:
        """S22: copies of brokerAddrTable and clusterAddrTable, each in name order (broker names,
        cluster names, and the broker names of each cluster sorted): every serving process writes
        the same GET_BROKER_CLUSTER_INFO body, whatever order its replica learnt the brokers in."""
        return ClusterInfo(
            {name: self.broker_addr_table[name].copy() for name in sorted(self.broker_addr_table)},
            {name: tuple(sorted(self.cluster_addr_table[name])) for name in sorted(self.cluster_addr_table)},
        )

    def filter_servers_of(self, broker_addr: str) -> tuple[str, ...]:
        """The filter-server addresses registered for ``broker_addr`` (S09); () when none."""
        return tuple(self.filter_server_table.get(broker_addr, ()))

    def broker_addrs_of(self, broker_name: str) -> dict[int, str]:
        """A copy of ``brokerAddrs`` (broker id -> address) of ``broker_name``; {} when it is unknown."""
        broker_data = self.broker_addr_table.get(broker_name)
        return dict(broker_data.broker_addrs) if broker_data is not None else {}

    def master_of(self, broker_name: str) -> tuple[str, str]:
        """``(address, HA address)`` of the live master (id 0) of ``broker_name``, or ``("", "")``."""
        broker_data = self.broker_addr_table.get(broker_name)
        master_addr = broker_data.broker_addrs.get(MASTER_ID, "") if broker_data else ""
        live = self.broker_live_table.get(master_addr) if master_addr else None
        return (master_addr, live.ha_server_addr) if live is not None else ("", "")

    def get_all_topic_list(self) -> list[str]:
        """S24: every topic, sorted."""
        return sorted(self.topic_queue_nums)

    def get_topics_by_cluster(self, cluster_name: str) -> list[str]:
        """S24: topics with QueueData on any broker name of the cluster, sorted; [] for an unknown one."""
        topics: set[str] = set()
        for broker_name in self.cluster_addr_table.get(cluster_name, ()):
            topics.update(self.topics_by_broker_name.get(broker_name, ()))
        return sorted(topics)

    def get_system_topic_list(self) -> tuple[list[str], str]:
        """S24: every cluster name and broker name (sorted), and the lowest-id address of the first
        broker name (sorted) as RocketMQ's ``TopicList.brokerAddr`` ("" when there is none)."""
        names: set[str] = set(self.cluster_addr_table)
        for broker_names in self.cluster_addr_table.values():
            names |= broker_names
        broker_addr = ""
        for broker_name in sorted(self.broker_addr_table):
            addrs = self.broker_addr_table[broker_name].broker_addrs
            if addrs:
                broker_addr = addrs[min(addrs)]
                break
        return sorted(names), broker_addr

    def get_topics_by_sys_flag(self, *, has: int, has_not: int = 0) -> list[str]:
        """S24: topics where some QueueData has every bit of ``has`` and no QueueData has a bit of
        ``has_not`` (UNIT: ``has=1``; UNIT_SUB: ``has=2``; UNIT_SUB but not UNIT: ``has=2, has_not=1``)."""
        return sorted(
            topic
            for topic, (_, values) in self.topic_queue_nums.items()
            if any(nums[3] & has == has for nums in values) and not any(nums[3] & has_not for nums in values)
        )

    def get_unit_topic_list(self) -> list[str]:
        """S24 ``GET_UNIT_TOPIC_LIST``."""
        return self.get_topics_by_sys_flag(has=TOPIC_SYS_FLAG_UNIT)

    def get_has_unit_sub_topic_list(self) -> list[str]:
        """S24 ``GET_HAS_UNIT_SUB_TOPIC_LIST``."""
        return self.get_topics_by_sys_flag(has=TOPIC_SYS_FLAG_UNIT_SUB)

    def get_has_unit_sub_ununit_topic_list(self) -> list[str]:
        """S24 ``GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST``."""
        return self.get_topics_by_sys_flag(has=TOPIC_SYS_FLAG_UNIT_SUB, has_not=TOPIC_SYS_FLAG_UNIT)

    # ------------------------------------------------------------------ the live table (S08, S13)

    def _live_in_cluster(self, cluster_name: str, addr: str) -> BrokerLiveInfo | None:
        live = self.broker_live_table.get(addr)
        return live if live is not None and live.cluster == cluster_name else None

    def _matching_live(self, cluster_name: str, broker_name: str, broker_id: int, addr: str) -> BrokerLiveInfo | None:
        live = self.broker_live_table.get(addr)
        if live is None or (live.cluster, live.broker_name, live.broker_id) != (
            cluster_name,
            broker_name,
            broker_id,
        ):
            return None
        return live

    def live_info(self, broker_addr: str) -> BrokerLiveInfo | None:
        """A copy of the live entry of an address, or None."""
        live = self.broker_live_table.get(broker_addr)
        return None if live is None else dataclasses.replace(live)

    def stored_topics_fingerprint(
        self, *, cluster_name: str, broker_name: str, broker_id: int, broker_addr: str
    ) -> int | None:
        """The fingerprint of the topic table this broker's last registration left in the table: a
        body whose topic table has it changes no topic (None: none is kept, or the broker is not
        registered so). A topics fingerprint is dropped when anything but the broker's own
        registration changes its broker name's QueueData."""
        live = self._matching_live(cluster_name, broker_name, broker_id, broker_addr)
        return None if live is None else live.topics_fingerprint

    def registered_body(
        self, *, cluster_name: str, broker_name: str, broker_id: int, broker_addr: str
    ) -> tuple[tuple[int, int, bool] | None, int | None] | None:
        """``(body fingerprint, topics fingerprint)`` of this broker's last registration as this
        table knows it (a replica: as of the last change applied), or None when the address is not
        registered as this broker. A door reads it to decode a new body before sending it, instead
        of asking the route-table process first (:func:`~namesrv_grpc.core.commands.send_registration`)."""
        held = self.registered_bodies.get(broker_addr)
        if held is None or held[:3] != (cluster_name, broker_name, broker_id):
            return None
        return held[3], held[4]

    def same_body_registered(
        self,
        *,
        cluster_name: str,
        broker_name: str,
        broker_id: int,
        broker_addr: str,
        fingerprint: tuple[int, int, bool],
    ) -> tuple[DataVersion, tuple[str, ...], int | None] | None:
        """When this broker's last registration carried a body with the same (CRC32C, length,
        compressed), return its stored DataVersion, filter servers and topics fingerprint: the body
        need not be decoded (it would change nothing, S06/S07/S09). None otherwise."""
        live = self._matching_live(cluster_name, broker_name, broker_id, broker_addr)
        if live is None or live.body_fingerprint != fingerprint:
            return None
        return live.data_version, tuple(self.filter_server_table.get(broker_addr, ())), live.topics_fingerprint

    # ------------------------------------------------------------------ introspection

    def copy_tables(self) -> RouteTableCopy:
        """A consistent, detached copy of all five tables (O(table size))."""
        return RouteTableCopy(
            topic_queue_table={
                topic: {name: QueueData(name, *nums) for name, nums in zip(names, values, strict=True)}
                for topic, (names, values) in self.topic_queue_nums.items()
            },
            broker_addr_table={name: data.copy() for name, data in self.broker_addr_table.items()},
            cluster_addr_table={c: frozenset(names) for c, names in self.cluster_addr_table.items()},
            broker_live_table={addr: dataclasses.replace(live) for addr, live in self.broker_live_table.items()},
            filter_server_table={addr: tuple(s) for addr, s in self.filter_server_table.items()},
            topic_queue_mapping_info_table={t: dict(m) for t, m in self.topic_queue_mapping_info_table.items()},
        )

    def live_table(self) -> tuple[int, list[tuple[str, BrokerLiveInfo]]]:
        """``(now ms, [(broker address, copy of its BrokerLiveInfo)])`` sorted by cluster, broker
        name, broker id and address, read in one step (the liveness view)."""
        now = self._clock()
        entries = [(addr, dataclasses.replace(live)) for addr, live in self.broker_live_table.items()]
        entries.sort(key=lambda e: (e[1].cluster, e[1].broker_name, e[1].broker_id, e[0]))
        return now, entries

    def stats(self) -> RouteTableStats:
        """Table sizes for metrics. The QueueData count takes a pass over every topic, made once per
        route change (a scrape of an unchanged 1,000,000-topic table costs no pass)."""
        counted = self._queue_datas_counted
        if counted is None or counted[0] != self.route_revision:
            counted = (self.route_revision, sum(len(names) for names, _ in self.topic_queue_nums.values()))
            self._queue_datas_counted = counted
        return RouteTableStats(
            brokers_live=len(self.broker_live_table),
            broker_names=len(self.broker_addr_table),
            clusters=len(self.cluster_addr_table),
            topics=len(self.topic_queue_nums),
            queue_datas=counted[1],
        )
