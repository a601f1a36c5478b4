"""The route table: RocketMQ's ``RouteInfoManager`` as a pure module (no gRPC, no I/O).

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
:class:`QueueData` objects are built when a route is read (:meth:`pickup_topic_route_data`,
:attr:`topic_queue_table`, :meth:`copy_tables`).

One thread only, no lock: the route-table process applies one command at a time on its event loop,
and each serving process applies the change stream to its replica between two requests on its own,
so a reader never sees half a registration or removal. (The table had a lock while registrations
were decoded and applied in worker threads; a snapshot now copies the table on the event loop and
writes the copy in a worker thread.) Time comes from an injected ``clock`` returning milliseconds
since the epoch, so tests drive expiry without sleeping. Arguments are assumed validated by the caller
(:mod:`namesrv_grpc.core.processor`); this module enforces the rules S03-S10, S12-S18, S20, S22-S25.

Settled where the rules are silent (RocketMQ 4.9/5.x source decides, improved where it is racy):

- An address belongs to one broker at a time. A registration of an address under another broker
  name removes it from the old BrokerData first (S05 extended across names), and a broker id that
  moves to a new address drops the old address's live entry, so every live address is in exactly
  one BrokerData and every BrokerData address is live.
- Removals re-check in the same step (S17, RocketMQ #11043): an expiry only removes a broker that is
  still expired; an unregister only removes an address whose live entry still belongs to that
  cluster, broker name and id; a session's end only removes the broker while that session is still
  bound to it (a newer session, or a registration by another broker instance, unbinds it).
- A broker name removed from ``broker_addr_table`` leaves every cluster set that held it.

Route changes: every place that drops a topic's cached route is exactly a change of that topic's
route (its QueueData, its broker names' BrokerData or filter servers, or what the encoder adds).
Each public method that may change routes collects the topics it touched; when the method ends, the
route revision grows by one and every :data:`RouteListener` is called with the new revision and the
changed topics, once the method's changes are complete (a listener may read the table).
"""

from __future__ import annotations

import bisect
import dataclasses
import heapq
import sys
import time
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from itertools import compress, filterfalse, repeat
from operator import is_, is_not, ne
from typing import Any, TypeVar

from namesrv_grpc.core.capacity import (
    LIST_OVERHEAD,
    RouteTableLimits,
    broker_addr_entry_bytes,
    broker_name_entry_bytes,
    cluster_entry_bytes,
    filter_servers_bytes,
    member_entry_bytes,
    text_bytes,
    topic_entry_bytes,
)
from namesrv_grpc.core.compact_topics import CompactTopics
from namesrv_grpc.core.digest import (
    RouteDigest,
    broker_data_hash,
    mapping_hash,
    queue_data_hash,
    queue_nums_digest_change,
)
from namesrv_grpc.core.errors import (
    BrokerNameNotRegisteredError,
    BrokerNotRegisteredError,
    LimitExceededError,
    RegistrationRefusedError,
    StaleBrokerStateError,
)
from namesrv_grpc.core.model import (
    DEFAULT_HEARTBEAT_TIMEOUT_MILLIS,
    MASTER_ID,
    PERM_READ,
    PERM_WRITE,
    SYNC_BROKER_MEMBER_GROUP_PREFIX,
    TOPIC_SYS_FLAG_UNIT,
    TOPIC_SYS_FLAG_UNIT_SUB,
    BrokerData,
    BrokerLiveInfo,
    ClusterInfo,
    DataVersion,
    MinBrokerIdChange,
    QueueData,
    RegisterBrokerResult,
    RemovedBroker,
    TopicConfig,
    TopicQueueMappingInfo,
    TopicRouteData,
)
from namesrv_grpc.core.replication import TableChange
from namesrv_grpc.core.route_answers import RouteAnswers

DISPLACED_MEMORY_MILLIS = 600_000
"""How long a broker run whose registration another run of the same broker replaced is remembered:
when it registers again within this time, the two runs are fighting (a registration conflict)."""
MAX_DISPLACED_KEYS = 4096
MAX_DISPLACED_PER_BROKER = 16
"""Bounds of that memory: broker (cluster, name, id) keys, and replaced runs per key."""

QueueNums = tuple[int, int, int, int]
"""One QueueData as the table stores it: ``(readQueueNums, writeQueueNums, perm, topicSysFlag)``."""

MAX_INTERNED_QUEUE_NUMS = 4096
"""Distinct QueueNums values kept for sharing; past this the sharing table starts over (values in the
table stay valid, only no longer shared)."""

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


MAX_INTERNED_RECORDS = 65_536
"""Distinct TopicQueues kept for sharing (see ``RouteInfoManager._interned_records``)."""

Clock = Callable[[], int]
"""Returns the current time in milliseconds since the epoch."""

RouteListener = Callable[[int, "frozenset[str] | None"], None]
"""Called after a change with (route revision, changed topics); topics None = every topic (what
the route encoder adds changed, e.g. ``orderMessageEnable`` was toggled)."""

MinBrokerIdListener = Callable[[MinBrokerIdChange], None]
"""Called once a change is complete, for every broker name whose smallest broker id changed
in a way RocketMQ tells the brokers about (S53)."""


def wall_clock_millis() -> int:
    """The system clock in milliseconds since the epoch (RocketMQ ``System.currentTimeMillis()``)."""
    return time.time_ns() // 1_000_000


def monotonic_millis() -> int:
    """``time.monotonic`` in milliseconds: the liveness clock (S13), which no clock step moves. The
    same clock in every process of one machine (Linux ``CLOCK_MONOTONIC``), so replicas agree."""
    return time.monotonic_ns() // 1_000_000


T = TypeVar("T")


@dataclass(slots=True)
class PreparedTopics:
    """S07 of one registration worked out before it is written (:meth:`RouteInfoManager._prepare`):
    the topics whose QueueData change, each one's record before and after, and what they add to the
    route digest (modulo 2**52), as work to do once the change is published (``digest_change()``)."""

    topics: list[str]
    olds: list[TopicQueues | None]
    news: list[TopicQueues]
    digest_change: Callable[[], int]


def _shared_copy(table: dict[T, T], value: T, limit: int) -> T:
    """The copy of ``value`` kept in ``table`` (``value`` itself when new); ``table`` starts over
    past ``limit`` entries (copies handed out stay valid)."""
    shared = table.get(value)
    if shared is None:
        if len(table) >= limit:
            table.clear()
        shared = table[value] = value
    return shared


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


@dataclass(frozen=True, slots=True)
class RouteTableStats:
    """Sizes of the tables, for metrics: counts of live broker addresses, broker names, clusters,
    topics and QueueData entries."""

    brokers_live: int
    broker_names: int
    clusters: int
    topics: int
    queue_datas: int


class RouteInfoManager:
    """The NameServer's in-memory route table (RocketMQ ``RouteInfoManager``). Thread-safe."""

    def __init__(
        self,
        clock: Clock = wall_clock_millis,
        *,
        liveness_clock: Clock | None = None,
        delete_topic_with_broker_registration: bool = False,
        support_acting_master: bool = False,
        limits: RouteTableLimits | None = None,
    ):
        """``clock`` returns ms since the epoch (the times shown); ``liveness_clock`` the ms that S13
        measures silence with: :func:`monotonic_millis` when ``clock`` is the system clock, else
        ``clock`` too (a test's fake clock drives both). ``delete_topic_with_broker_registration`` is RocketMQ
        5.x's ``deleteTopicWithBrokerRegistration`` (default off): a master's changed registration
        also removes its topics that the body no longer lists. ``support_acting_master`` is 5.x's
        ``supportActingMaster`` (default off, S52): routes show a master-less broker name's acting
        master under id 0; change it with :meth:`set_support_acting_master`. ``limits``: how large the
        table and its answers may grow (none by default; the NameServer sets its configuration's)."""
        self._clock = clock
        self._liveness_clock = liveness_clock or (monotonic_millis if clock is wall_clock_millis else clock)
        self.route_answers = RouteAnswers()
        """Encoded answers of :meth:`pickup_topic_route_cached`, per encoding, within
        ``limits.route_cache_max_bytes`` (:mod:`namesrv_grpc.core.route_answers`)."""
        self.limits = limits or RouteTableLimits()
        self._topic_list_bytes: int | None = LIST_OVERHEAD
        """Estimated bytes of the list of all topics (core.capacity), kept by every change of the
        topics; None: to be counted again."""
        self._broker_table_bytes: int | None = LIST_OVERHEAD
        """Estimated bytes of the cluster info (core.capacity), kept by registrations that add to it;
        None after anything leaves it (counted again when next needed)."""
        self.delete_topic_with_broker_registration = delete_topic_with_broker_registration
        self.support_acting_master = support_acting_master
        self.topic_queue_nums: dict[str, TopicQueues] = {}
        """topic -> its QueueData as :data:`TopicQueues` (see the module doc)."""
        self._interned: dict[QueueNums, QueueNums] = {}
        self.broker_addr_table: dict[str, BrokerData] = {}
        self.cluster_addr_table: dict[str, set[str]] = {}
        self.broker_live_table: dict[str, BrokerLiveInfo] = {}
        self.filter_server_table: dict[str, list[str]] = {}
        self.topics_by_broker_name: dict[str, dict[str, None]] = {}
        """broker name -> {topic: None} (a dict used as an ordered set: untracked by the collector)."""
        self.topic_queue_mapping_info_table: dict[str, dict[str, TopicQueueMappingInfo]] = {}
        """Static topics (RocketMQ 5.x ``topicQueueMappingInfoTable``, S40): topic -> the mapping's
        ``bname`` -> mapping. Written by registrations that carry topics (master, prime slave); never
        removed (as in RocketMQ: a broker that leaves, or a deleted topic, keeps its mappings; a later
        registration replaces them)."""
        self._session_seq = 0
        self._expiry_heap: list[tuple[int, str]] = []
        self._scheduled: dict[str, int] = {}
        """S13 without scanning every broker: each live address has one heap entry at a deadline no
        later than its real one (``last_seen_millis + heartbeat_timeout_millis``); a scan pops
        the entries that are due, removes the brokers that really expired and reschedules the rest
        at their real deadline. A scan with nothing due costs one comparison."""
        self._interned_records: dict[TopicQueues, TopicQueues] = {}
        """Shared TopicQueues (most topics of a cluster have the same broker names and numbers): a
        record that was seen before is untracked already, so storing it does not make the dict of all
        topics tracked again (a fresh tuple would, until the next full collection)."""
        self.version = 0
        """Increases on every change of any table; cheap change detection for caches and snapshots."""
        self._digest = RouteDigest()
        """Content digest of topic_queue_table and broker_addr_table (core.digest), kept up to date
        by every change of a QueueData or BrokerData."""
        self._displaced: dict[tuple[str, str, int], dict[str, int]] = {}
        """(cluster, broker name, id) -> {instance id replaced by another run -> when, ms}."""
        self.route_revision = 0
        """Increases by one for every public call that changed some topic's route (see RouteListener)."""
        self.route_listeners: list[RouteListener] = []
        """Called after every route change, once the change is complete."""
        self.min_broker_id_listeners: list[MinBrokerIdListener] = []
        """Called with every MinBrokerIdChange (S53), once the change that made it is complete."""
        self._min_broker_id_changes: dict[str, tuple[str, str, bool]] = {}
        """broker name -> (offline address, HA address, after a departure) of the smallest-id changes
        of the call under way; the last one per broker name counts (see _pending_min_broker_id_changes)."""
        self._changed_topics: set[str] = set()
        self._all_routes_changed = False
        self._change_depth = 0
        self._tracking = False
        """Whether changes are noted for replicas (:meth:`track_changes`, :meth:`take_change`)."""
        self._dirty_records: set[str] = set()
        """Topics whose record in :attr:`topic_queue_nums` was written since the last :meth:`take_change`."""
        self._dirty_brokers: set[str] = set()
        """Broker names whose BrokerData changed, or whose addresses' filter servers did."""
        self._dirty_addrs: set[str] = set()
        """Broker addresses whose filter servers changed."""
        self._cluster_log: list[tuple[str, str, bool]] = []
        """(cluster, broker name, joined) changes of :attr:`cluster_addr_table`, in order: a replica
        gets each change, not the whole table (a cluster of 36,000 broker names made each new
        broker's change stream message ~10 MB)."""
        self._dirty_mappings: set[str] = set()
        self._index_log: list[tuple[str, list[str], bool]] = []
        """(broker name, topics, added) changes of :attr:`topics_by_broker_name`, in order."""
        self._invalidated: set[str] = set()
        """Topics whose route changed for what the encoder adds (:meth:`invalidate_routes`)."""
        self._all_routes_invalidated = False
        self._taken_revision = 0
        """The route revision of the last :meth:`take_change`."""
        self._queue_datas_counted: tuple[int, int] | None = None
        """(route revision, QueueData count) of the last :meth:`stats`."""

    @property
    def topic_queue_table(self) -> QueueDataView:
        """RocketMQ's ``topicQueueTable`` (topic -> {broker name -> QueueData}) as a read-only view of
        :attr:`topic_queue_nums` (:meth:`copy_tables` for a detached copy)."""
        return QueueDataView(self.topic_queue_nums)

    # ------------------------------------------------------------------ route changes

    @contextmanager
    def _changing(self) -> Iterator[None]:
        """One change of the table; when the outermost one ends, bump the revision if routes changed
        and call the listeners (once the table is complete again)."""
        notice: tuple[int, frozenset[str] | None] | None = None
        min_broker_id_changes: list[MinBrokerIdChange] = []
        self._change_depth += 1
        try:
            yield
        finally:
            self._change_depth -= 1
            if self._change_depth == 0 and (self._changed_topics or self._all_routes_changed):
                self.route_revision += 1
                topics = None if self._all_routes_changed else frozenset(self._changed_topics)
                notice = (self.route_revision, topics)
                self._changed_topics = set()
                self._all_routes_changed = False
            if self._change_depth == 0 and self._min_broker_id_changes:
                min_broker_id_changes = self._pending_min_broker_id_changes()
        if notice is not None:
            for listener in list(self.route_listeners):
                listener(*notice)
        for change in min_broker_id_changes:
            for min_listener in list(self.min_broker_id_listeners):
                min_listener(change)

    @property
    def limits(self) -> RouteTableLimits:
        """How large the table and its answers may grow (settable: the NameServer sets its
        configuration's, again when it changes)."""
        return self._limits

    @limits.setter
    def limits(self, limits: RouteTableLimits) -> None:
        self._limits = limits
        self.route_answers.max_bytes = limits.route_cache_max_bytes

    def _route_changed(self, topic: str) -> None:
        """The topic's route changed: drop its cached encodings and report it when the call ends."""
        self.route_answers.drop_one(topic)
        self._changed_topics.add(topic)

    def _routes_changed(self, topics: list[str]) -> None:
        """:meth:`_route_changed` of many topics at once (the cached ones found by set operations)."""
        self.route_answers.drop(topics)
        self._changed_topics.update(topics)

    # ------------------------------------------------------------------ registration (S03-S12)

    def register_broker(
        self,
        *,
        cluster_name: str,
        broker_name: str,
        broker_id: int,
        broker_addr: str,
        ha_server_addr: str = "",
        data_version: DataVersion = DataVersion(),
        topic_configs: Mapping[str, TopicConfig] | None = None,
        filter_server_list: Iterable[str] = (),
        heartbeat_timeout_millis: int = 0,
        zone_name: str = "",
        enable_acting_master: bool | None = None,
        instance_id: str = "",
        body_fingerprint: tuple[int, int, bool] | None = None,
        topics_fingerprint: int | None = None,
        protocol: str = "grpc",
        topic_queue_mappings: Mapping[str, TopicQueueMappingInfo] | None = None,
        refuse_single_topic_first: bool = False,
    ) -> RegisterBrokerResult:
        """Register (or refresh) one broker address; RocketMQ ``registerBroker``: S03-S12 in order,
        each rule in a method of its own (:meth:`_check_registration`, :meth:`_join_cluster`,
        :meth:`_put_broker_addr`, :meth:`_apply_topics`, :meth:`_put_live_entry`); readers never
        see half of a registration.

        ``topic_configs`` (topic name -> TopicConfig) enters the route table only for a master (id 0)
        whose ``data_version`` differs from the stored one, or on a first registration (S06); None
        means "topics unchanged" (a fingerprint matched). ``heartbeat_timeout_millis`` 0 means
        120 000 ms (S08). ``body_fingerprint`` is kept for :meth:`same_body_registered`,
        ``topics_fingerprint`` (of the body's topic table) for :meth:`topics_unchanged` when the table
        now holds what those topics make. ``protocol`` ("grpc" or "remoting") is shown by the liveness
        view. RocketMQ 5.x: ``zone_name`` replaces the broker name's zone (empty clears it);
        ``topic_queue_mappings`` are the static-topic mappings (S40); ``enable_acting_master`` None
        is a broker older than 5.x, to which no acting-master rule applies (S50-S53; a registration
        that lowers the smallest id is reported to :attr:`min_broker_id_listeners`).

        Returns the live master's address and HA address for a slave (S10), the run of the broker it
        took the registration back from (``conflicting_instance_id``, :meth:`_note_displacement`) and
        whether anything beyond liveness changed (``changed``).

        Raises, before changing anything: StaleBrokerStateError (S12), RegistrationRefusedError with
        ``refuse_single_topic_first`` when the broker id is not registered under its name yet and
        the topic table holds exactly one topic (S42), LimitExceededError (capacity).
        """
        topics: CompactTopics | None = None
        if isinstance(topic_configs, CompactTopics):
            topics = topic_configs
        elif topic_configs is not None:
            topics = CompactTopics.from_topic_configs(topic_configs)
        filter_servers = list(filter_server_list)
        identity = (cluster_name, broker_name, broker_id)
        with self._changing():
            now = self._clock()
            old_addr = self._check_registration(
                broker_name, broker_id, broker_addr, data_version, topics if refuse_single_topic_first else None
            )  # S12, S42
            may_carry_topics = broker_id == MASTER_ID or enable_acting_master is not None  # 5.x: prime slave
            growth, moved = self._check_capacity(
                *identity,
                broker_addr,
                zone_name,
                filter_servers,
                topics if may_carry_topics else None,
                topic_queue_mappings if may_carry_topics else None,
            )
            self.version += 1
            conflicting = self._note_displacement(identity, old_addr or broker_addr, instance_id, now, protocol)
            # An address belongs to one broker name: leave the old one first.
            previous = self.broker_live_table.get(broker_addr)
            if previous is not None and previous.broker_name != broker_name:
                self._remove_addr_from_broker_data(previous.broker_name, broker_addr)
            self._join_cluster(cluster_name, broker_name)  # S03
            broker_data, register_first, prev_min_broker_id, broker_data_changed = self._put_broker_addr(
                *identity, broker_addr, zone_name, enable_acting_master
            )  # S04, S05
            changed = previous is None or previous.broker_name != broker_name or previous.data_version != data_version
            topics_applied = self._apply_topics(
                broker_data, broker_id, topics, topic_queue_mappings, enable_acting_master, register_first or changed
            )  # S06, S07, S40, S50
            timeout = heartbeat_timeout_millis or DEFAULT_HEARTBEAT_TIMEOUT_MILLIS
            live = BrokerLiveInfo(
                cluster=cluster_name,
                broker_name=broker_name,
                broker_id=broker_id,
                last_update_timestamp=now,
                last_seen_millis=self._liveness_clock(),
                heartbeat_timeout_millis=timeout,
                data_version=data_version,
                ha_server_addr=ha_server_addr,
                instance_id=instance_id,
                body_fingerprint=body_fingerprint,
                topics_fingerprint=topics_fingerprint if topics_applied else None,
                protocol=protocol,
            )
            registration_changed = self._put_live_entry(broker_addr, live, previous) or broker_data_changed  # S08
            if filter_servers != self.filter_server_table.get(broker_addr, []):  # S09
                self._invalidate_broker_name(broker_name)
                registration_changed = True
            self._set_filter_servers(broker_addr, filter_servers)
            if self._broker_table_bytes is not None:
                self._broker_table_bytes = None if moved else self._broker_table_bytes + growth
            # S53: a registration that lowers the smallest id tells the others (RocketMQ registerBroker).
            if broker_id < prev_min_broker_id:
                self._min_broker_id_changed(broker_data, offline_broker_addr="", ha_broker_addr=ha_server_addr)
            master_addr, master_ha_addr = self.master_of(broker_name) if broker_id != MASTER_ID else ("", "")
            return RegisterBrokerResult(master_addr, master_ha_addr, conflicting, changed=registration_changed)  # S10

    def _check_registration(
        self,
        broker_name: str,
        broker_id: int,
        broker_addr: str,
        data_version: DataVersion,
        first_topics: CompactTopics | None,
    ) -> str | None:
        """The address that holds ``broker_id`` of ``broker_name`` now (None: none). Raises
        StaleBrokerStateError when another live address holds it with a higher ``state_version``
        (S12); RegistrationRefusedError when none holds it and ``first_topics`` (given when the
        NameServer's rule S42 applies) holds exactly one topic."""
        broker_data = self.broker_addr_table.get(broker_name)
        old_addr = broker_data.broker_addrs.get(broker_id) if broker_data else None
        if old_addr is not None and old_addr != broker_addr:
            old_live = self.broker_live_table.get(old_addr)
            if old_live is not None and old_live.data_version.state_version > data_version.state_version:
                raise StaleBrokerStateError(
                    f"broker {broker_name} id {broker_id} is held by {old_addr} with stateVersion "
                    f"{old_live.data_version.state_version}; {broker_addr} registered with "
                    f"stateVersion {data_version.state_version}",
                    {"broker_name": broker_name, "broker_addr": broker_addr},
                )
        if first_topics is not None and len(first_topics) == 1 and old_addr is None:
            raise RegistrationRefusedError(
                f"broker {broker_name} id {broker_id} at {broker_addr} is not registered yet and its "
                f"registration carries one topic ({first_topics.names[0]!r}): a broker registers its "
                "whole topic table first (RocketMQ 5.x answers 'register broker failed')",
                {"broker_name": broker_name, "broker_addr": broker_addr},
            )
        return old_addr

    def _join_cluster(self, cluster_name: str, broker_name: str) -> None:
        """S03: the broker name joins its cluster."""
        cluster = self.cluster_addr_table.setdefault(cluster_name, set())
        if broker_name not in cluster:
            cluster.add(broker_name)
            if self._tracking:
                self._cluster_log.append((cluster_name, broker_name, True))

    def _put_broker_addr(
        self,
        cluster_name: str,
        broker_name: str,
        broker_id: int,
        broker_addr: str,
        zone_name: str,
        enable_acting_master: bool | None,
    ) -> tuple[BrokerData, bool, int, bool]:
        """S04 (BrokerData made on first registration) and S05 (one entry per address, then
        ``brokerAddrs[id] = addr``), with the zone and acting-master switch (5.x). Returns the
        BrokerData, whether the id was not registered under the name before, the smallest id before
        (S53: RocketMQ compares with it, 0 when none) and whether the BrokerData changed."""
        broker_data = self.broker_addr_table.get(broker_name)
        register_first = broker_data is None
        digest_before = None if broker_data is None else broker_data_hash(broker_data)
        if broker_data is None:
            broker_data = BrokerData(cluster_name, broker_name)
            self.broker_addr_table[broker_name] = broker_data
        before = (dict(broker_data.broker_addrs), broker_data.zone_name, broker_data.enable_acting_master)
        broker_data.zone_name = zone_name
        broker_data.enable_acting_master = bool(enable_acting_master)
        prev_min_broker_id = min(broker_data.broker_addrs) if broker_data.broker_addrs else MASTER_ID
        for other_id, addr in list(broker_data.broker_addrs.items()):
            if addr == broker_addr and other_id != broker_id:
                del broker_data.broker_addrs[other_id]
        old_addr = broker_data.broker_addrs.get(broker_id)
        broker_data.broker_addrs[broker_id] = broker_addr
        register_first = register_first or old_addr is None
        if old_addr is not None and old_addr != broker_addr:
            # The id moved to a new address: the old address is no broker of this name any more.
            old_live = self.broker_live_table.get(old_addr)
            if old_live is not None and old_live.broker_name == broker_name:
                del self.broker_live_table[old_addr]
                self._set_filter_servers(old_addr, [])
        changed = before != (broker_data.broker_addrs, broker_data.zone_name, broker_data.enable_acting_master)
        if changed:
            self._invalidate_broker_name(broker_name)
            self._digest.replace(digest_before, broker_data_hash(broker_data))
        elif digest_before is None:
            self._digest.add(broker_data_hash(broker_data))
        return broker_data, register_first, prev_min_broker_id, changed

    def _apply_topics(
        self,
        broker_data: BrokerData,
        broker_id: int,
        topics: CompactTopics | None,
        topic_queue_mappings: Mapping[str, TopicQueueMappingInfo] | None,
        enable_acting_master: bool | None,
        new_or_changed: bool,
    ) -> bool:
        """S06/S07: a master with a changed DataVersion (or a first registration,
        ``new_or_changed``) carries its topics; S50 (5.x): so does the prime slave, read-only when its
        broker name has acting master; S40: its static-topic mappings too. Returns whether the table
        now holds what the topics make (``topics`` None: they were known unchanged), i.e. whether
        the topics fingerprint may be kept."""
        broker_name = broker_data.broker_name
        prime_slave = (
            enable_acting_master is not None and broker_id != MASTER_ID and broker_id == min(broker_data.broker_addrs)
        )
        carries_topics = broker_id == MASTER_ID or prime_slave
        if not carries_topics:
            return True
        if topic_queue_mappings and new_or_changed:
            self._put_topic_queue_mappings(topic_queue_mappings)  # S40
        if topics is None:
            return True
        if not new_or_changed:
            return False
        if self.delete_topic_with_broker_registration and not topic_queue_mappings:
            gone = self.topics_by_broker_name.get(broker_name, {}).keys() - topics.keys()
            if gone:
                self._remove_queue_datas(broker_name, gone)
        if broker_id == MASTER_ID:
            self._commit(broker_name, self._prepare(broker_name, topics))  # S07 skips equal ones
        else:
            pairs: Iterable[tuple[str, QueueNums]] = topics.queue_nums()
            if prime_slave and broker_data.enable_acting_master:
                pairs = [(topic, (r, w, perm & ~PERM_WRITE, flag)) for topic, (r, w, perm, flag) in pairs]
            for topic, nums in pairs:
                self._create_and_update_queue_nums(broker_name, topic, nums)
        # S40: with mappings no topic is deleted; the table may then hold more than the body's topics
        # make, so the topics fingerprint is not kept (the next body decodes in full).
        return not (self.delete_topic_with_broker_registration and topic_queue_mappings)

    def _put_live_entry(self, broker_addr: str, live: BrokerLiveInfo, previous: BrokerLiveInfo | None) -> bool:
        """S08: the live entry; the liveness session stays only with the same broker instance (same
        non-empty instance id, cluster, name and id). Returns whether anything beyond liveness
        changed (``RegisterBrokerResult.changed``: what an audit line is for)."""
        same_instance = (
            previous is not None
            and live.instance_id != ""
            and (previous.instance_id, previous.cluster, previous.broker_name, previous.broker_id)
            == (live.instance_id, live.cluster, live.broker_name, live.broker_id)
        )
        if same_instance and previous is not None:
            live.session_id = previous.session_id
        self.broker_live_table[broker_addr] = live
        self._schedule(broker_addr, live)
        return previous is None or (
            previous.cluster,
            previous.broker_name,
            previous.broker_id,
            previous.instance_id,
            previous.data_version,
            previous.ha_server_addr,
            previous.heartbeat_timeout_millis,
        ) != (
            live.cluster,
            live.broker_name,
            live.broker_id,
            live.instance_id,
            live.data_version,
            live.ha_server_addr,
            live.heartbeat_timeout_millis,
        )

    # ------------------------------------------------------------------ capacity (issue 30)

    def check_broker_room(self, broker_name: str, broker_addr: str) -> None:
        """Raise LimitExceededError when ``broker_addr`` is not registered and ``routeTableMaxBrokers``
        addresses are: the part of :meth:`register_broker`'s capacity check that needs no body, so
        that a registration refused for it is refused before its body is decoded (a 200,000-topic
        body took a core for a second to decode, then was refused). Changes nothing."""
        self._check_broker_room(broker_name, broker_addr)

    def _check_broker_room(self, broker_name: str, broker_addr: str) -> None:
        live = self.broker_live_table
        max_brokers = self.limits.max_brokers
        if max_brokers and broker_addr not in live and len(live) >= max_brokers:
            raise LimitExceededError(
                "routeTableMaxBrokers",
                f"broker {broker_name} at {broker_addr} is not registered and {len(live)} "
                f"broker addresses are, the most at once (routeTableMaxBrokers)",
            )

    def _check_capacity(
        self,
        cluster_name: str,
        broker_name: str,
        broker_id: int,
        broker_addr: str,
        zone_name: str,
        filter_servers: list[str],
        topics: CompactTopics | None,
        mappings: Mapping[str, TopicQueueMappingInfo] | None,
    ) -> tuple[int, bool]:
        """Raise LimitExceededError (``metadata["limit"]``: the key) when this registration would pass
        one of :attr:`limits` (core.capacity): one broker address more than ``routeTableMaxBrokers``,
        more topics (or static-topic mappings) than ``routeTableMaxTopics``, or a topic list or
        cluster info larger than an answer may be. Changes nothing. Returns what the registration
        adds to the cluster info's estimate, bytes, and whether it moves an address (between ids or
        broker names: the estimate is then counted again)."""
        limits = self.limits
        self._check_broker_room(broker_name, broker_addr)
        table = self.topic_queue_nums
        if topics is not None and (limits.max_topics or limits.max_answer_bytes):
            new_topics = list(filterfalse(table.__contains__, topics.names))
            if new_topics and limits.max_topics and len(table) + len(new_topics) > limits.max_topics:
                raise LimitExceededError(
                    "routeTableMaxTopics",
                    f"broker {broker_name} at {broker_addr} registers {len(new_topics)} new topics; with the "
                    f"{len(table)} held that is more than {limits.max_topics} (routeTableMaxTopics)",
                )
            if new_topics and limits.max_answer_bytes:
                projected = self._topics_bytes() + sum(map(len, new_topics)) + 3 * len(new_topics)
                if projected > limits.max_answer_bytes:
                    raise LimitExceededError(
                        limits.answer_limit_key,
                        f"broker {broker_name} at {broker_addr} registers {len(new_topics)} new topics; the "
                        f"topic list would be about {projected} bytes, more than the {limits.max_answer_bytes} "
                        f"an answer may be ({limits.answer_limit_key} less 64 KiB)",
                    )
        if mappings and limits.max_topics:
            held = self.topic_queue_mapping_info_table
            new_mappings = len(mappings.keys() - held.keys())
            if new_mappings and len(held) + new_mappings > limits.max_topics:
                raise LimitExceededError(
                    "routeTableMaxTopics",
                    f"broker {broker_name} at {broker_addr} maps {new_mappings} new static topics; with the "
                    f"{len(held)} held that is more than {limits.max_topics} (routeTableMaxTopics)",
                )
        growth, moved = self._broker_growth(
            cluster_name, broker_name, broker_id, broker_addr, zone_name, filter_servers
        )
        if limits.max_answer_bytes and growth > 0:
            projected = self._brokers_bytes() + growth
            if projected > limits.max_answer_bytes:
                raise LimitExceededError(
                    limits.answer_limit_key,
                    f"registering broker {broker_name} at {broker_addr} would make the cluster info about "
                    f"{projected} bytes, more than the {limits.max_answer_bytes} an answer may be "
                    f"({limits.answer_limit_key} less 64 KiB)",
                )
        return growth, moved

    def _broker_growth(
        self,
        cluster_name: str,
        broker_name: str,
        broker_id: int,
        broker_addr: str,
        zone_name: str,
        filter_servers: list[str],
    ) -> tuple[int, bool]:
        """What a registration adds to the cluster info's estimate (bytes, may be negative) and
        whether it moves an address between ids or broker names (see :meth:`_check_capacity`)."""
        growth = 0
        members = self.cluster_addr_table.get(cluster_name)
        if members is None:
            growth += cluster_entry_bytes(cluster_name)
        if members is None or broker_name not in members:
            growth += member_entry_bytes(broker_name)
        broker_data = self.broker_addr_table.get(broker_name)
        addrs = broker_data.broker_addrs if broker_data is not None else {}
        if broker_data is None:
            growth += broker_name_entry_bytes(cluster_name, broker_name, zone_name)
        else:
            growth += text_bytes(zone_name) - text_bytes(broker_data.zone_name)
        held = addrs.get(broker_id)
        previous = self.broker_live_table.get(broker_addr)
        moved = (
            (held is not None and held != broker_addr)
            or (held is None and broker_addr in addrs.values())
            or (previous is not None and previous.broker_name != broker_name)
        )
        if held == broker_addr:
            growth += filter_servers_bytes(filter_servers) - filter_servers_bytes(
                self.filter_server_table.get(broker_addr, ())
            )
        else:
            growth += broker_addr_entry_bytes(broker_addr, filter_servers)
        return growth, moved

    def _topics_bytes(self) -> int:
        """The topic list's estimated bytes (core.capacity), counted again when unknown."""
        if self._topic_list_bytes is None:
            table = self.topic_queue_nums
            self._topic_list_bytes = LIST_OVERHEAD + sum(map(len, table)) + 3 * len(table)
        return self._topic_list_bytes

    def _brokers_bytes(self) -> int:
        """The cluster info's estimated bytes (core.capacity), counted again when unknown."""
        if self._broker_table_bytes is None:
            total = LIST_OVERHEAD
            for cluster_name, names in self.cluster_addr_table.items():
                total += cluster_entry_bytes(cluster_name) + sum(map(member_entry_bytes, names))
            filter_servers = self.filter_server_table
            for broker_data in self.broker_addr_table.values():
                total += broker_name_entry_bytes(broker_data.cluster, broker_data.broker_name, broker_data.zone_name)
                for addr in broker_data.broker_addrs.values():
                    total += broker_addr_entry_bytes(addr, filter_servers.get(addr, ()))
            self._broker_table_bytes = total
        return self._broker_table_bytes

    def _check_new_topic(self, topic: str) -> None:
        """Raise LimitExceededError when one topic more would pass ``routeTableMaxTopics`` or make the
        topic list larger than an answer may be (``REGISTER_TOPIC_IN_NAMESRV``)."""
        limits = self.limits
        if limits.max_topics and len(self.topic_queue_nums) >= limits.max_topics:
            raise LimitExceededError(
                "routeTableMaxTopics",
                f"topic {topic!r} is new and {len(self.topic_queue_nums)} topics are held, the most at once "
                "(routeTableMaxTopics)",
            )
        if limits.max_answer_bytes and self._topics_bytes() + topic_entry_bytes(topic) > limits.max_answer_bytes:
            raise LimitExceededError(
                limits.answer_limit_key,
                f"topic {topic!r} is new and would make the topic list larger than the "
                f"{limits.max_answer_bytes} bytes an answer may be ({limits.answer_limit_key} less 64 KiB)",
            )

    def answer_estimates(self) -> tuple[int, int]:
        """``(topic list, cluster info)``: their estimated bytes (core.capacity), as the limits see them."""
        return self._topics_bytes(), self._brokers_bytes()

    def _put_topic_queue_mappings(self, mappings: Mapping[str, TopicQueueMappingInfo]) -> None:
        """RocketMQ 5.x: keep each mapping under its topic and its own ``bname``; a changed one is
        a change of the topic's route."""
        for topic, mapping in mappings.items():
            by_broker = self.topic_queue_mapping_info_table.setdefault(topic, {})
            old = by_broker.get(mapping.bname)
            if old != mapping:
                by_broker[mapping.bname] = mapping
                if self._tracking:
                    self._dirty_mappings.add(topic)
                self._digest.replace(None if old is None else mapping_hash(topic, old), mapping_hash(topic, mapping))
                self._route_changed(topic)

    def _note_displacement(
        self, key: tuple[str, str, int], holder_addr: str, instance_id: str, now: int, protocol: str
    ) -> str:
        """Remember the run whose live entry for ``key`` (cluster, broker name, id) this registration
        of ``instance_id`` replaces; return that run's instance id when ``instance_id`` itself had
        been replaced before (a fight), else "".

        Registrations through different doors are never runs fighting: a Java broker registering
        itself over remoting and broker-agent beside it over gRPC are one broker (the Kubernetes
        example runs both), so only a replacement through the same door is remembered."""
        holder = self._matching_live(*key, holder_addr)
        if holder is not None and holder.protocol != protocol:
            holder = None
        displaced = self._displaced.get(key)
        if displaced is not None:
            for old_instance, at in list(displaced.items()):
                if at + DISPLACED_MEMORY_MILLIS < now:
                    del displaced[old_instance]
        if holder is None or not holder.instance_id or not instance_id or holder.instance_id == instance_id:
            if displaced is not None and not displaced:
                del self._displaced[key]
            return ""
        if displaced is None:
            if len(self._displaced) >= MAX_DISPLACED_KEYS:
                self._displaced.pop(next(iter(self._displaced)))
            displaced = self._displaced[key] = {}
        fighting = displaced.pop(instance_id, None) is not None
        displaced[holder.instance_id] = now
        while len(displaced) > MAX_DISPLACED_PER_BROKER:
            displaced.pop(next(iter(displaced)))
        return holder.instance_id if fighting else ""

    def _prepare(self, broker_name: str, topics: CompactTopics) -> PreparedTopics:
        """S07 worked out in bulk (dict reads only; records are immutable tuples): for each topic
        whose QueueData of ``broker_name`` differs from ``topics``', its record now and the record it
        gets, and the digest change. :meth:`_commit` writes them.

        Records are shared (most topics of a broker hold the same one), so the outcome is worked out
        once per distinct (record now, numbers) pair and spread over the topics by C-level ``map``
        and ``compress`` calls: no Python-level step per topic. Topics that no broker name holds yet
        (a new broker's first registration) share one new record per distinct numbers."""
        names = list(map(sys.intern, topics.names))
        all_nums = topics.nums_list()
        olds = list(map(self.topic_queue_nums.get, names))
        if olds.count(None) == len(olds):
            records = {nums: self._new_record(None, broker_name, nums) for nums in set(all_nums)}
            news = list(map(records.__getitem__, all_nums))
            return PreparedTopics(names, olds, news, partial(queue_nums_digest_change, names, broker_name, all_nums))
        if olds.count(olds[0]) == len(olds):  # one record now (usual: a broker's topics share one)
            old, old_nums = olds[0], queues_get(olds[0], broker_name)
            changed = list(map(ne, all_nums, repeat(old_nums)))  # S07: equal QueueData is left alone
            if changed.count(False):
                names, all_nums = list(compress(names, changed)), list(compress(all_nums, changed))
            by_nums = {nums: self._new_record(old, broker_name, nums) for nums in set(all_nums)}
            digest_change = partial(
                queue_nums_digest_change,
                names,
                broker_name,
                all_nums,
                names if old_nums is not None else (),
                [old_nums] * len(names) if old_nums is not None else (),
            )
            news = list(map(by_nums.__getitem__, all_nums))
            return PreparedTopics(names, [old] * len(names), news, digest_change)
        # Records are compared by id: olds keeps every record alive, so no id is reused meanwhile.
        ids = list(map(id, olds))
        record_of = dict(zip(ids, olds, strict=True))
        nums_now_of = {key: queues_get(record, broker_name) for key, record in record_of.items()}
        nums_now = list(map(nums_now_of.__getitem__, ids))
        changed = list(map(ne, nums_now, all_nums))  # S07: equal QueueData is left alone
        if changed.count(False):
            names, olds, ids = (
                list(compress(names, changed)),
                list(compress(olds, changed)),
                list(compress(ids, changed)),
            )
            all_nums, nums_now = list(compress(all_nums, changed)), list(compress(nums_now, changed))
        keys = list(zip(ids, all_nums, strict=True))
        by_key = {key: self._new_record(record_of[key[0]], broker_name, key[1]) for key in set(keys)}
        replaced = list(map(is_not, nums_now, repeat(None)))
        replaced_nums: list[QueueNums] = list(compress(nums_now, replaced))  # type: ignore[arg-type]
        digest_change = partial(
            queue_nums_digest_change, names, broker_name, all_nums, list(compress(names, replaced)), replaced_nums
        )
        return PreparedTopics(names, olds, list(map(by_key.__getitem__, keys)), digest_change)

    def _new_record(self, old: TopicQueues | None, broker_name: str, nums: QueueNums) -> TopicQueues:
        """The shared record of ``old`` with ``broker_name``'s QueueData set to ``nums``."""
        return self._intern_record(queues_put(old, broker_name, self._intern_nums(nums)))

    def _commit(self, broker_name: str, prepared: PreparedTopics) -> None:
        """Write what :meth:`_prepare` worked out, in a few bulk dict operations."""
        if not prepared.topics:
            return
        self.topic_queue_nums.update(zip(prepared.topics, prepared.news, strict=True))
        if self._topic_list_bytes is not None and prepared.olds.count(None):
            added = list(compress(prepared.topics, map(is_, prepared.olds, repeat(None))))
            self._topic_list_bytes += sum(map(len, added)) + 3 * len(added)
        self._records_written(prepared.topics)
        self._index_add(broker_name, prepared.topics)
        self._routes_changed(prepared.topics)
        self._digest.add_later(prepared.digest_change)  # worked out by settle_digest()

    def _intern_nums(self, nums: QueueNums) -> QueueNums:
        """The shared copy of ``nums`` (bounded: past :data:`MAX_INTERNED_QUEUE_NUMS` distinct values
        the sharing starts over)."""
        return _shared_copy(self._interned, nums, MAX_INTERNED_QUEUE_NUMS)

    def _create_and_update_queue_nums(self, broker_name: str, topic: str, nums: QueueNums) -> None:
        """S07: create the topic, add or replace this broker name's QueueData when it differs."""
        if queues_get(self.topic_queue_nums.get(topic), broker_name) != nums:
            self._set_queue_nums(topic, broker_name, nums)
            self._route_changed(topic)
        index = self.topics_by_broker_name.get(broker_name)
        if index is None or topic not in index:
            self._index_add(broker_name, [topic])

    def _index_add(self, broker_name: str, topics: list[str]) -> None:
        """``topics`` now have QueueData of ``broker_name`` (:attr:`topics_by_broker_name`)."""
        self.topics_by_broker_name.setdefault(broker_name, {}).update(dict.fromkeys(topics))
        if self._tracking:
            self._index_log.append((broker_name, topics, True))

    def _records_written(self, topics: Iterable[str]) -> None:
        """The records of ``topics`` in :attr:`topic_queue_nums` were written (for replicas)."""
        if self._tracking:
            self._dirty_records.update(topics)

    def _intern_record(self, record: TopicQueues) -> TopicQueues:
        """The shared copy of ``record`` (bounded: past :data:`MAX_INTERNED_RECORDS` distinct records
        the sharing starts over; stored records stay valid)."""
        return _shared_copy(self._interned_records, record, MAX_INTERNED_RECORDS)

    def _set_queue_nums(self, topic: str, broker_name: str, nums: QueueNums) -> None:
        """Put ``nums`` (interned here) as ``broker_name``'s QueueData of ``topic`` (created when
        missing), keeping the digest up to date."""
        queues = self.topic_queue_nums.get(topic)
        old = queues_get(queues, broker_name)
        self.topic_queue_nums[topic] = self._intern_record(queues_put(queues, broker_name, self._intern_nums(nums)))
        if queues is None and self._topic_list_bytes is not None:
            self._topic_list_bytes += topic_entry_bytes(topic)
        self._records_written((topic,))
        self._digest.replace(
            None if old is None else queue_data_hash(topic, QueueData(broker_name, *old)),
            queue_data_hash(topic, QueueData(broker_name, *nums)),
        )

    # ------------------------------------------------------------------ liveness (S13, S14, S20)

    def heartbeat(self, *, cluster_name: str, broker_name: str, broker_id: int, broker_addr: str) -> None:
        """S14: refresh ``last_update_timestamp`` of a registered broker.

        The broker is found by (cluster, address), as RocketMQ 5.x keys its live table
        (``BrokerAddrInfo``); broker name and id are only reported. Raises BrokerNotRegisteredError
        when no broker of that cluster is registered at that address (it should register in full).
        """
        live = self._live_in_cluster(cluster_name, broker_addr)
        if live is None:
            raise BrokerNotRegisteredError(
                f"broker {broker_addr} ({cluster_name}/{broker_name}/{broker_id}) is not registered; register it first",
                {"broker_addr": broker_addr},
            )
        self._heard_from(live)
        self._schedule(broker_addr, live)

    def query_data_version(
        self,
        *,
        cluster_name: str,
        broker_name: str,
        broker_id: int,
        broker_addr: str,
        data_version: DataVersion,
    ) -> tuple[bool, DataVersion | None]:
        """S20: return ``(changed, stored version)``; refresh liveness when unchanged.

        The broker is found by (cluster, address) as in :meth:`heartbeat`. ``changed`` is True when it
        is not registered or its stored DataVersion differs; the stored version is None when it is not
        registered.
        """
        live = self._live_in_cluster(cluster_name, broker_addr)
        if live is None:
            return True, None
        changed = live.data_version != data_version
        if not changed:
            self._heard_from(live)
            self._schedule(broker_addr, live)
        return changed, live.data_version

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

    def scan_not_active_broker(self) -> list[RemovedBroker]:
        """S13: remove every broker with ``last_seen_millis + heartbeat_timeout_millis < now`` (the
        liveness clock: monotonic).

        Returns the removed brokers (reason ``"expired"``). Decision and removal happen in one step,
        so a broker that re-registered in between is never removed (S17). Costs O(brokers due
        now), not O(brokers): see ``_expiry_heap``.
        """
        with self._changing():
            now = self._liveness_clock()
            heap = self._expiry_heap
            removed = []
            while heap and heap[0][0] < now:
                deadline, addr = heapq.heappop(heap)
                if self._scheduled.get(addr) != deadline:
                    continue  # superseded by an earlier entry, or the address is gone
                del self._scheduled[addr]
                live = self.broker_live_table.get(addr)
                if live is None:
                    continue
                if live.expired(now):
                    removed.append(self._remove_addr(addr, "expired"))
                else:
                    self._schedule(addr, live)
            if len(heap) > 2 * len(self._scheduled) + 1024:
                self._expiry_heap = [(d, a) for a, d in self._scheduled.items()]
                heapq.heapify(self._expiry_heap)
            return removed

    def _heard_from(self, live: BrokerLiveInfo) -> None:
        """S14: the broker was heard from now (both clocks)."""
        live.last_update_timestamp = self._clock()
        live.last_seen_millis = self._liveness_clock()

    def _schedule(self, addr: str, live: BrokerLiveInfo) -> None:
        """Make sure the expiry heap holds an entry for ``addr`` no later than its real deadline
        (on the liveness clock)."""
        deadline = live.last_seen_millis + live.heartbeat_timeout_millis
        scheduled = self._scheduled.get(addr)
        if scheduled is None or deadline < scheduled:
            self._scheduled[addr] = deadline
            heapq.heappush(self._expiry_heap, (deadline, addr))

    def live_info(self, broker_addr: str) -> BrokerLiveInfo | None:
        """A copy of the live entry of an address, or None."""
        live = self.broker_live_table.get(broker_addr)
        return None if live is None else dataclasses.replace(live)

    # ------------------------------------------------------------------ removal (S15-S17)

    def unregister_broker(
        self, *, cluster_name: str, broker_name: str, broker_id: int, broker_addr: str, instance_id: str = ""
    ) -> RemovedBroker | None:
        """S16/S17: remove one broker matched by (cluster, broker name, broker id, broker address).

        A broker that is not registered so (e.g. its address was re-registered under another id) is
        left alone and None is returned; that is not an error. With a non-empty ``instance_id``, an
        address registered by another run of the broker (non-empty, different instance id) is left
        alone too: a second agent that stops never removes the first one's registration (S17).
        """
        with self._changing():
            # Every BrokerData address is live with its current name and id, so the live entry decides.
            live = self._matching_live(cluster_name, broker_name, broker_id, broker_addr)
            if live is None or (instance_id and live.instance_id and live.instance_id != instance_id):
                return None
            return self._remove_addr(broker_addr, "unregistered")

    # ------------------------------------------------------------------ sessions (S15, S17)

    def bind_session(
        self, *, cluster_name: str, broker_name: str, broker_id: int, broker_addr: str, instance_id: str
    ) -> tuple[int, int] | None:
        """Bind a new liveness session to a registered broker; return ``(session id, heartbeat
        timeout ms)``, or None when the address is not registered as exactly this cluster, broker
        name, id and instance (the broker must register first). A newer session replaces an older
        one, whose end then removes nothing. Binding refreshes ``last_update_timestamp``."""
        live = self._matching_live(cluster_name, broker_name, broker_id, broker_addr)
        if live is None or live.instance_id != instance_id:
            return None
        self._session_seq += 1
        live.session_id = self._session_seq
        self._heard_from(live)
        self._schedule(broker_addr, live)
        return live.session_id, live.heartbeat_timeout_millis

    def session_heartbeat(self, broker_addr: str, session_id: int) -> bool:
        """S14 over a session: refresh the broker when ``session_id`` is still bound to it; False
        when it is not (the broker was removed or re-registered by another instance)."""
        live = self.broker_live_table.get(broker_addr)
        if live is None or not session_id or live.session_id != session_id:
            return False
        self._heard_from(live)
        self._schedule(broker_addr, live)
        return True

    def unbind_session(self, broker_addr: str, session_id: int) -> bool:
        """The session ended without the broker's doing (the serving process that held its
        connection or stream died): keep the broker, unbound, so that its next registration (S11)
        or the S13 expiry, whichever comes first, decides. True when ``session_id`` was the bound
        one (an older session's end unbinds nothing newer, S17). Nothing a lookup shows changes."""
        live = self.broker_live_table.get(broker_addr)
        if live is None or not session_id or live.session_id != session_id:
            return False
        live.session_id = 0
        return True

    def remove_if_session(self, broker_addr: str, session_id: int, reason: str) -> RemovedBroker | None:
        """S15: the session ended; remove the broker when that session is still the bound one
        (a newer session or another instance's registration is never wiped, S17)."""
        with self._changing():
            live = self.broker_live_table.get(broker_addr)
            if live is None or not session_id or live.session_id != session_id:
                return None
            return self._remove_addr(broker_addr, reason)

    def master_of(self, broker_name: str) -> tuple[str, str]:
        """``(address, HA address)`` of the live master (id 0) of ``broker_name``, or ``("", "")``."""
        broker_data = self.broker_addr_table.get(broker_name)
        master_addr = broker_data.broker_addrs.get(MASTER_ID, "") if broker_data else ""
        live = self.broker_live_table.get(master_addr) if master_addr else None
        return (master_addr, live.ha_server_addr) if live is not None else ("", "")

    def _remove_addr(self, broker_addr: str, reason: str) -> RemovedBroker:
        """S16: drop an address from the live and filter tables and from its BrokerData, cascading.
        Every departure (expiry, unregistration, connection or session end) comes here, so S51 and
        S53 apply to all of them alike."""
        self.version += 1
        self._broker_table_bytes = None  # counted again when next needed (core.capacity)
        live = self.broker_live_table.pop(broker_addr)
        self._set_filter_servers(broker_addr, [])
        broker_data = self.broker_addr_table.get(live.broker_name)
        was_min = (
            broker_data is not None
            and bool(broker_data.broker_addrs)
            and live.broker_id == min(broker_data.broker_addrs)
        )
        self._remove_addr_from_broker_data(live.broker_name, broker_addr)
        if broker_data is not None and broker_data.broker_addrs:
            self._after_departure(broker_data, broker_addr, was_min)
        return RemovedBroker(broker_addr, live.cluster, live.broker_name, live.broker_id, reason, live.instance_id)

    def _after_departure(self, broker_data: BrokerData, offline_addr: str, was_min: bool) -> None:
        """A broker name lost ``offline_addr`` and keeps other addresses (RocketMQ 5.x
        ``unRegisterBroker`` / ``cleanTopicByUnRegisterRequests``).

        S51: with ``enable_acting_master`` and no master left, every QueueData of the broker name
        loses its WRITE bit (RocketMQ: ``isNoMasterExists`` -> ``perm & ~PERM_WRITE``).
        S53: when the address had the smallest id and the broker name has ``enable_acting_master``,
        the remaining brokers are to be told the new smallest id.
        When the smallest id changed, the next registration of the new smallest (now the prime
        slave, S50) decodes its topics again."""
        broker_name = broker_data.broker_name
        if was_min:
            self._forget_topics_fingerprints(broker_name)
        if broker_data.enable_acting_master and MASTER_ID not in broker_data.broker_addrs:
            for topic in self.topics_by_broker_name.get(broker_name, ()):
                nums = queues_get(self.topic_queue_nums.get(topic), broker_name)
                if nums is not None and nums[2] & PERM_WRITE:
                    read, write, perm, sys_flag = nums
                    self._forget_topics_fingerprints(broker_name)
                    self._set_queue_nums(topic, broker_name, (read, write, perm & ~PERM_WRITE, sys_flag))
                    self._route_changed(topic)
        if was_min and broker_data.enable_acting_master:
            self._min_broker_id_changed(broker_data, offline_broker_addr=offline_addr, ha_broker_addr="")

    def _min_broker_id_changed(self, broker_data: BrokerData, *, offline_broker_addr: str, ha_broker_addr: str) -> None:
        """Note that the broker name's smallest id changed (S53); told when the call ends."""
        self._min_broker_id_changes[broker_data.broker_name] = (
            offline_broker_addr,
            ha_broker_addr,
            bool(offline_broker_addr),
        )

    def _pending_min_broker_id_changes(self) -> list[MinBrokerIdChange]:
        """The MinBrokerIdChange of each broker name noted in this call, built from its BrokerData
        as the call leaves it, as RocketMQ's ``unRegisterBroker`` does for a batch of removals (its
        ``BrokerStatusChangeInfo`` holds the live ``brokerAddrs`` map): one message per broker name,
        none when no address is left, none after departures when the broker name has no
        ``enableActingMaster`` any more. Recipients as ``chooseBrokerAddrsToNotify``: after a
        departure, or when the broker name has one address, every address; after an arrival, every
        address but the new smallest id's."""
        changes = []
        for broker_name, (offline, ha, departure) in self._min_broker_id_changes.items():
            broker_data = self.broker_addr_table.get(broker_name)
            if broker_data is None or not broker_data.broker_addrs:
                continue
            if departure and not broker_data.enable_acting_master:
                continue
            addrs = broker_data.broker_addrs
            min_id = min(addrs)
            if offline or len(addrs) == 1:
                recipients = tuple(addrs[i] for i in sorted(addrs))
            else:
                recipients = tuple(addrs[i] for i in sorted(addrs) if i != min_id)
            changes.append(
                MinBrokerIdChange(broker_data.cluster, broker_name, min_id, addrs[min_id], offline, ha, recipients)
            )
        self._min_broker_id_changes = {}
        return changes

    def _remove_addr_from_broker_data(self, broker_name: str, broker_addr: str) -> None:
        broker_data = self.broker_addr_table.get(broker_name)
        if broker_data is None:
            return
        self._broker_table_bytes = None  # counted again when next needed (core.capacity)
        self._invalidate_broker_name(broker_name)
        self._digest.remove(broker_data_hash(broker_data))
        for broker_id, addr in list(broker_data.broker_addrs.items()):
            if addr == broker_addr:
                del broker_data.broker_addrs[broker_id]
        if broker_data.broker_addrs:
            self._digest.add(broker_data_hash(broker_data))
            return  # remaining master or slaves keep the topics
        del self.broker_addr_table[broker_name]
        for cluster_name, names in list(self.cluster_addr_table.items()):
            if broker_name in names:
                names.discard(broker_name)
                if self._tracking:
                    self._cluster_log.append((cluster_name, broker_name, False))
            if not names:
                del self.cluster_addr_table[cluster_name]
        self._remove_queue_datas(broker_name, list(self.topics_by_broker_name.get(broker_name, ())))

    def _forget_topics_fingerprints(self, broker_name: str) -> None:
        """This broker name's QueueData changed other than by S07: its next registration decodes."""
        broker_data = self.broker_addr_table.get(broker_name)
        for addr in broker_data.broker_addrs.values() if broker_data else ():
            live = self.broker_live_table.get(addr)
            if live is not None:
                live.topics_fingerprint = None

    def _remove_queue_datas(self, broker_name: str, topics: Iterable[str]) -> None:
        """The QueueData of ``broker_name`` for ``topics`` leave the table (a topic it has none of is
        skipped): its last address left (S13/S15/S16), a registration no longer carries them
        (``deleteTopicWithBrokerRegistration``), or the topic was deleted (S25). Done in bulk: a
        1,600-topic broker whose connection closed took ~15 ms one topic at a time. The digest's share
        is worked out later (:meth:`settle_digest`, as for a registration)."""
        self._forget_topics_fingerprints(broker_name)
        topics = list(topics)
        self._routes_changed(topics)
        table = self.topic_queue_nums
        removed_topics: list[str] = []
        removed_nums: list[QueueNums] = []
        olds: list[TopicQueues] = []  # keeps every old record alive, so that no id is reused meanwhile
        remaining_of: dict[int, TopicQueues | None] = {}
        for topic in topics:
            queues = table.get(topic)
            old = queues_get(queues, broker_name) if queues is not None else None
            if queues is None or old is None:
                continue
            removed_topics.append(topic)
            removed_nums.append(old)
            key = id(queues)
            if key in remaining_of:
                remaining = remaining_of[key]
            else:
                olds.append(queues)
                remaining = queues_remove(queues, broker_name)
                remaining = remaining_of[key] = None if remaining is None else self._intern_record(remaining)
            if remaining is None:
                del table[topic]
                if self._topic_list_bytes is not None:
                    self._topic_list_bytes -= topic_entry_bytes(topic)
            else:
                table[topic] = remaining
        self._records_written(removed_topics)
        if removed_topics:
            change = partial(queue_nums_digest_change, (), broker_name, (), removed_topics, removed_nums)
            self._digest.add_later(change)
        index = self.topics_by_broker_name.get(broker_name)
        if not index:
            return
        left = [topic for topic in topics if topic in index]
        for topic in left:
            del index[topic]
        if not index:
            del self.topics_by_broker_name[broker_name]
        if self._tracking and left:
            self._index_log.append((broker_name, left, False))

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

    def invalidate_routes(self, topics: Iterable[str] | None = None) -> None:
        """Drop cached routes of ``topics`` (all when None): what the encoder adds changed (S19).
        Reported to the route listeners as a change of those topics (of every topic for None)."""
        with self._changing():
            if topics is None:
                self.route_answers.clear()
                self._all_routes_changed = True
                self._all_routes_invalidated = self._tracking
            else:
                for topic in topics:
                    self._route_changed(topic)
                    if self._tracking:
                        self._invalidated.add(topic)

    def _invalidate_broker_name(self, broker_name: str) -> None:
        """The broker name's BrokerData or its addresses' filter servers changed: so did the route of
        every topic it holds QueueData of."""
        for topic in self.topics_by_broker_name.get(broker_name, ()):
            self._route_changed(topic)
        self.route_answers.drop_layouts_of((broker_name,))
        if self._tracking:
            self._dirty_brokers.add(broker_name)

    def _set_filter_servers(self, broker_addr: str, filter_servers: list[str]) -> None:
        """S09: the filter servers of ``broker_addr`` (none: the entry is dropped)."""
        if filter_servers == self.filter_server_table.get(broker_addr, []):
            return
        if filter_servers:
            self.filter_server_table[broker_addr] = filter_servers
        else:
            del self.filter_server_table[broker_addr]
        if self._tracking:
            self._dirty_addrs.add(broker_addr)

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

    def set_support_acting_master(self, enabled: bool) -> None:
        """Switch S52 (``supportActingMaster``) at run time; every route counts as changed when it flips."""
        with self._changing():
            if enabled != self.support_acting_master:
                self.support_acting_master = enabled
                self.route_answers.clear()
                self._all_routes_changed = True
                self._all_routes_invalidated = self._tracking

    def topics_unchanged(
        self, *, cluster_name: str, broker_name: str, broker_id: int, broker_addr: str, topics_fingerprint: int
    ) -> bool:
        """True when this broker's last registration had the same topic table and nothing else has
        changed its broker name's QueueData since: decoding the topics again would change nothing."""
        live = self._matching_live(cluster_name, broker_name, broker_id, broker_addr)
        return live is not None and live.topics_fingerprint == topics_fingerprint

    def stored_topics_fingerprint(
        self, *, cluster_name: str, broker_name: str, broker_id: int, broker_addr: str
    ) -> int | None:
        """The topics fingerprint :meth:`topics_unchanged` compares with (None: none is kept, or the
        broker is not registered so)."""
        live = self._matching_live(cluster_name, broker_name, broker_id, broker_addr)
        return None if live is None else live.topics_fingerprint

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

    # ------------------------------------------------------------------ admin (S23, S25)

    def wipe_write_perm_of_broker(self, broker_name: str) -> int:
        """S23: clear the WRITE bit of every QueueData of ``broker_name``; return how many it has."""
        return self._operate_write_perm(broker_name, lambda perm: perm & ~PERM_WRITE)

    def add_write_perm_of_broker(self, broker_name: str) -> int:
        """S23: set every QueueData of ``broker_name`` to READ|WRITE (6); return how many it has."""
        return self._operate_write_perm(broker_name, lambda perm: PERM_READ | PERM_WRITE)

    def _operate_write_perm(self, broker_name: str, new_perm: Callable[[int], int]) -> int:
        with self._changing():
            topics = self.topics_by_broker_name.get(broker_name, {})
            if topics:
                self.version += 1
                self._forget_topics_fingerprints(broker_name)
            for topic in topics:
                nums = queues_get(self.topic_queue_nums.get(topic), broker_name)
                assert nums is not None, "topics_by_broker_name lists only topics with this broker name's QueueData"
                read, write, perm, sys_flag = nums
                self._set_queue_nums(topic, broker_name, (read, write, new_perm(perm), sys_flag))
                self._route_changed(topic)
            return len(topics)

    def delete_topic(self, topic: str, cluster_name: str = "") -> None:
        """S25 ``DELETE_TOPIC_IN_NAMESRV``: remove the topic, or only the QueueData of the broker names
        of ``cluster_name`` when it is given (an unknown cluster or topic changes nothing)."""
        with self._changing():
            queues = self.topic_queue_nums.get(topic)
            if queues is None:
                return
            if cluster_name:
                broker_names = [n for n in self.cluster_addr_table.get(cluster_name, ()) if n in queues[0]]
            else:
                broker_names = list(queues[0])
            if broker_names:
                self.version += 1
            for broker_name in broker_names:
                self._remove_queue_datas(broker_name, (topic,))

    def register_topic(self, topic: str, queue_datas: Iterable[QueueData]) -> None:
        """S25 ``REGISTER_TOPIC_IN_NAMESRV``: add or replace the topic's QueueData, all or nothing.

        Raises BrokerNameNotRegisteredError, changing nothing, when a broker name has no BrokerData.
        """
        queue_datas = list(queue_datas)
        if not queue_datas:
            return
        with self._changing():
            for queue_data in queue_datas:
                if queue_data.broker_name not in self.broker_addr_table:
                    raise BrokerNameNotRegisteredError(
                        f"broker name {queue_data.broker_name!r} is not registered; topic {topic!r} unchanged",
                        {"broker_name": queue_data.broker_name},
                    )
            if topic not in self.topic_queue_nums:
                self._check_new_topic(topic)
            self.version += 1
            self._route_changed(topic)
            for queue_data in queue_datas:
                self._forget_topics_fingerprints(queue_data.broker_name)
                nums = (
                    queue_data.read_queue_nums,
                    queue_data.write_queue_nums,
                    queue_data.perm,
                    queue_data.topic_sys_flag,
                )
                self._set_queue_nums(topic, queue_data.broker_name, nums)
                index = self.topics_by_broker_name.get(queue_data.broker_name)
                if index is None or topic not in index:
                    self._index_add(queue_data.broker_name, [topic])

    # ------------------------------------------------------------------ replication

    def track_changes(self) -> None:
        """From now on, note every change for :meth:`take_change` (the route-table process's table)."""
        self._tracking = True

    def take_change(self) -> TableChange | None:
        """What changed since the last call, as a replica needs it (:meth:`apply_change`); None when
        nothing a replica holds changed (a heartbeat, an unchanged re-registration). Requires
        :meth:`track_changes`."""
        if not (
            self._dirty_records
            or self._dirty_brokers
            or self._dirty_addrs
            or self._cluster_log
            or self._dirty_mappings
            or self._index_log
            or self._invalidated
            or self._all_routes_invalidated
            or self._taken_revision != self.route_revision
        ):
            return None
        change = TableChange(
            route_revision=self.route_revision,
            index_log=self._index_log,
            invalidated=list(self._invalidated),
            all_routes=self._all_routes_invalidated,
        )
        self._taken_revision = self.route_revision
        self._all_routes_invalidated = False
        topics = list(self._dirty_records)
        records = list(map(self.topic_queue_nums.get, topics))
        if None in records:
            change.removed_topics = [topic for topic, record in zip(topics, records, strict=True) if record is None]
            change.records = {topic: record for topic, record in zip(topics, records, strict=True) if record}
        else:
            change.records = dict(zip(topics, records, strict=True))  # type: ignore[arg-type]
        for broker_name in self._dirty_brokers:
            broker_data = self.broker_addr_table.get(broker_name)
            change.broker_datas[broker_name] = broker_data.copy() if broker_data is not None else None
        for addr in self._dirty_addrs:
            servers = self.filter_server_table.get(addr)
            change.filter_servers[addr] = list(servers) if servers else None
        change.cluster_log = self._cluster_log
        for topic in self._dirty_mappings:
            mappings = self.topic_queue_mapping_info_table.get(topic)
            change.mappings[topic] = dict(mappings) if mappings else None
        self._dirty_records = set()
        self._dirty_brokers = set()
        self._dirty_addrs = set()
        self._cluster_log = []
        self._dirty_mappings = set()
        self._index_log = []
        self._invalidated = set()
        return change

    def replica_state(self) -> TableChange:
        """Everything a replica holds, as one change that an empty table applies
        (:meth:`apply_change`): what a serving process starts from."""
        return TableChange(
            route_revision=self.route_revision,
            records=dict(self.topic_queue_nums),
            index_log=[(name, list(topics), True) for name, topics in self.topics_by_broker_name.items()],
            broker_datas={name: data.copy() for name, data in self.broker_addr_table.items()},
            filter_servers={addr: list(servers) for addr, servers in self.filter_server_table.items()},
            clusters={cluster: set(names) for cluster, names in self.cluster_addr_table.items()},
            mappings={topic: dict(m) for topic, m in self.topic_queue_mapping_info_table.items()},
        )

    def replica_state_pieces(self, piece_topics: int) -> Iterator[TableChange]:
        """Everything a replica holds, as :meth:`replica_state` has it now, in pieces of at most
        ``piece_topics`` topic records (and as many topic index entries) that an empty table applies
        one after the other (:meth:`apply_change`). The table's references are copied now; each piece
        is made, and pickled by its sender, only when asked for, so a route-table process sends a
        very large table over several event-loop turns and writes go on in between (issue 39: one
        950,000-topic piece held writes 501 ms). The first piece also holds the BrokerData, filter
        servers, clusters and static-topic mappings. Every change made after this call must reach
        the replica after the last piece (the pieces are the table as it is now). Raises ValueError
        when ``piece_topics`` < 1."""
        if piece_topics < 1:
            raise ValueError(f"piece_topics must be at least 1, not {piece_topics}")
        first = TableChange(
            route_revision=self.route_revision,
            broker_datas={name: data.copy() for name, data in self.broker_addr_table.items()},
            filter_servers={addr: list(servers) for addr, servers in self.filter_server_table.items()},
            clusters={cluster: set(names) for cluster, names in self.cluster_addr_table.items()},
            mappings={topic: dict(m) for topic, m in self.topic_queue_mapping_info_table.items()},
        )
        # keys and values apart: no new (key, value) tuple per topic for the garbage collector to
        # count (with pairs, the longest write during a 500,000-topic join was 174-221 ms, 87-132 without)
        topics, records = list(self.topic_queue_nums), list(self.topic_queue_nums.values())
        index = [(name, list(names)) for name, names in self.topics_by_broker_name.items()]
        return self._pieces(first, topics, records, index, piece_topics)

    @staticmethod
    def _pieces(
        first: TableChange,
        topics: list[str],
        records: list[TopicQueues],
        index: list[tuple[str, list[str]]],
        size: int,
    ) -> Iterator[TableChange]:
        piece = first
        entries = 0  # topic index entries in this piece
        for name, names in index:
            for start in range(0, len(names), size):
                part = names[start : start + size]
                if entries and entries + len(part) > size:
                    yield piece
                    piece, entries = TableChange(route_revision=first.route_revision), 0
                piece.index_log.append((name, part, True))
                entries += len(part)
        for start in range(0, len(records), size):
            if entries:
                yield piece
                piece, entries = TableChange(route_revision=first.route_revision), 0
            piece.records = dict(zip(topics[start : start + size], records[start : start + size], strict=True))
            entries = len(piece.records)
        yield piece

    def apply_change(self, change: TableChange) -> frozenset[str] | None:
        """Apply a change taken from the route-table process's table (a serving process's replica):
        the same tables, the cached routes of every topic whose route changed dropped, the route
        revision the writer's, and the route listeners told. Readers see all of it or none of it
        (it runs between two requests, and cached routes are dropped with the change). Returns the topics
        whose route changed (None: every route)."""
        self._topic_list_bytes = self._broker_table_bytes = None  # a replica counts them when asked
        table = self.topic_queue_nums
        table.update(change.records)
        for topic in change.removed_topics:
            table.pop(topic, None)
        index = self.topics_by_broker_name
        for broker_name, topics, added in change.index_log:
            if added:
                index.setdefault(broker_name, {}).update(dict.fromkeys(topics))
                continue
            held = index.get(broker_name)
            if held is not None:
                for topic in topics:
                    held.pop(topic, None)
                if not held:
                    del index[broker_name]
        for broker_name, broker_data in change.broker_datas.items():
            if broker_data is None:
                self.broker_addr_table.pop(broker_name, None)
            else:
                self.broker_addr_table[broker_name] = broker_data
        for addr, servers in change.filter_servers.items():
            if servers is None:
                self.filter_server_table.pop(addr, None)
            else:
                self.filter_server_table[addr] = servers
        if change.clusters is not None:
            self.cluster_addr_table = change.clusters
        clusters = self.cluster_addr_table
        for cluster_name, broker_name, joined in change.cluster_log:
            if joined:
                clusters.setdefault(cluster_name, set()).add(broker_name)
                continue
            names = clusters.get(cluster_name)
            if names is not None:
                names.discard(broker_name)
                if not names:
                    del clusters[cluster_name]
        for topic, mappings in change.mappings.items():
            if mappings is None:
                self.topic_queue_mapping_info_table.pop(topic, None)
            else:
                self.topic_queue_mapping_info_table[topic] = mappings
        changed = change.records.keys() | change.removed_topics
        if change.mappings or change.invalidated:
            changed.update(change.mappings, change.invalidated)
        for broker_name in change.broker_datas:
            changed.update(index.get(broker_name, ()))
        if change.all_routes:
            self.route_answers.clear()
        else:
            self.route_answers.drop(changed)
            # the writer marks a broker name whose BrokerData or filter servers changed
            self.route_answers.drop_layouts_of(change.broker_datas)
        self.version += 1
        revision_moved = change.route_revision != self.route_revision
        self.route_revision = change.route_revision
        notice = None if change.all_routes else frozenset(changed)
        if revision_moved and (notice is None or notice):
            for listener in list(self.route_listeners):
                listener(change.route_revision, notice)
        return notice

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

    def route_digest(self) -> int:
        """Content digest of the routes (every QueueData, BrokerData and static-topic mapping;
        :mod:`namesrv_grpc.core.digest`):
        equal on two NameServers exactly when they would answer every route lookup alike (filter
        servers aside). Kept up to date by every change (a registration's per-topic hashes are worked
        out at the next :meth:`settle_digest`, or here); a 52-bit integer. A replica keeps none (0):
        the route-table process reports it."""
        return self._digest.value

    def settle_digest(self) -> None:
        """Work out the digest's share of the registrations applied since the last call (the
        route-table process calls it once the writes waiting for the serving processes are answered,
        so that it is off the path of their answers)."""
        self._digest.settle()

    def answer_sizes(self) -> tuple[int, int]:
        """``(topic list bytes, cluster info bytes)``: the estimates the answer bound is checked
        against (core.capacity; ``limits.max_answer_bytes``), for metrics."""
        return self._topics_bytes(), self._brokers_bytes()

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
