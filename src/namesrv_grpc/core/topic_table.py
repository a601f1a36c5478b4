"""The route table's QueueData writes: the layer of :class:`~namesrv_grpc.core.route_table.RouteInfoManager`
between the tables (:class:`~namesrv_grpc.core.route_tables.RouteTables`) and the broker-level
operations (registration, liveness, sessions, removal). It writes topic records as RocketMQ's
``topicQueueTable`` does (S06, S07, S40; in bulk, interned), keeps the topic index, the filter
servers, the cached routes' invalidation and the admin writes (S23, S25), and what every write keeps
besides the tables: the capacity account (:class:`~namesrv_grpc.core.capacity.CapacityAccount`), the
route digest (:mod:`namesrv_grpc.core.digest`) and the journal for the replicas
(:class:`~namesrv_grpc.core.route_journal.RouteJournal`).

Route changes: every place that drops a topic's cached route is exactly a change of that topic's
route (its QueueData, its broker names' BrokerData or filter servers, or what the encoder adds).
Each public method that may change routes collects the topics it touched; when the method ends, the
route revision grows by one and every :data:`~namesrv_grpc.core.route_tables.RouteListener` is
called with the new revision and the changed topics, once the method's changes are complete (a
listener may read the table).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import compress, repeat
from operator import is_, is_not, ne
from typing import TypeVar

from namesrv_grpc.core.capacity import CapacityAccount, RouteTableLimits
from namesrv_grpc.core.compact_topics import CompactTopics
from namesrv_grpc.core.digest import RouteDigest, mapping_hash, queue_data_hash, queue_nums_changes
from namesrv_grpc.core.errors import BrokerNameNotRegisteredError
from namesrv_grpc.core.model import (
    PERM_READ,
    PERM_WRITE,
    BrokerData,
    MinBrokerIdChange,
    QueueData,
    TopicQueueMappingInfo,
)
from namesrv_grpc.core.replication import TableChange
from namesrv_grpc.core.route_journal import RouteJournal, apply_change, replica_state, replica_state_pieces
from namesrv_grpc.core.route_tables import (
    Clock,
    QueueNums,
    RouteTables,
    TopicQueues,
    queues_get,
    queues_put,
    queues_remove,
    wall_clock_millis,
)

MAX_INTERNED_QUEUE_NUMS = 4096
"""Distinct QueueNums values kept for sharing; past this the sharing table starts over (values in the
table stay valid, only no longer shared)."""

MAX_INTERNED_RECORDS = 65_536
"""Distinct TopicQueues kept for sharing (see ``RouteInfoManager._interned_records``)."""

MinBrokerIdListener = Callable[[MinBrokerIdChange], None]
"""Called once a change is complete, for every broker name whose smallest broker id changed
in a way RocketMQ tells the brokers about (S53)."""


T = TypeVar("T")


@dataclass(slots=True)
class PreparedTopics:
    """S07 of one registration worked out before it is written (:meth:`RouteInfoManager._prepare`):
    the topics whose QueueData change, each one's record before and after, and what they add to the
    route digest (modulo 2**52), as pieces of work to do once the change is published
    (:func:`~namesrv_grpc.core.digest.queue_nums_changes`)."""

    topics: list[str]
    olds: list[TopicQueues | None]
    news: list[TopicQueues]
    digest_changes: list[Callable[[], int]]


def _shared_copy(table: dict[T, T], value: T, limit: int) -> T:
    """The copy of ``value`` kept in ``table`` (``value`` itself when new); ``table`` starts over
    past ``limit`` entries (copies handed out stay valid)."""
    shared = table.get(value)
    if shared is None:
        if len(table) >= limit:
            table.clear()
        shared = table[value] = value
    return shared


class TopicTable(RouteTables):
    """The QueueData writes over :class:`~namesrv_grpc.core.route_tables.RouteTables`, with the
    capacity account, the digest and the journal they keep (see the module doc). One thread."""

    def __init__(
        self,
        clock: Clock = wall_clock_millis,
        *,
        liveness_clock: Clock | None = None,
        support_acting_master: bool = False,
        limits: RouteTableLimits | None = None,
    ) -> None:
        """The arguments: see :class:`~namesrv_grpc.core.route_tables.RouteTables`."""
        super().__init__(
            clock, liveness_clock=liveness_clock, support_acting_master=support_acting_master, limits=limits
        )
        self.capacity = CapacityAccount(self)
        """The answers' estimated sizes and the checks of :attr:`limits` (core.capacity)."""
        self.journal = RouteJournal()
        """What changed, for the replicas (core.route_journal; notes nothing until :meth:`track_changes`)."""
        self._digest = RouteDigest()
        """Content digest of topic_queue_table and broker_addr_table (core.digest), kept up to date
        by every change of a QueueData or BrokerData."""
        self._interned: dict[QueueNums, QueueNums] = {}
        self._interned_records: dict[TopicQueues, TopicQueues] = {}
        """Shared TopicQueues (most topics of a cluster have the same broker names and numbers): a
        record that was seen before is untracked already, so storing it does not make the dict of all
        topics tracked again (a fresh tuple would, until the next full collection)."""
        self.min_broker_id_listeners: list[MinBrokerIdListener] = []
        """Called with every MinBrokerIdChange (S53), once the change that made it is complete."""
        self._min_broker_id_changes: dict[str, tuple[str, str, bool]] = {}
        """broker name -> (offline address, HA address, after a departure) of the smallest-id changes
        of the call under way; the last one per broker name counts (see _pending_min_broker_id_changes)."""
        self._changed_topics: set[str] = set()
        self._all_routes_changed = False
        self._change_depth = 0

    # ------------------------------------------------------------------ route changes and their notices

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

    def _route_changed(self, topic: str) -> None:
        """The topic's route changed: drop its cached encodings and report it when the call ends."""
        self.route_answers.drop_one(topic)
        self._changed_topics.add(topic)

    def _routes_changed(self, topics: list[str]) -> None:
        """:meth:`_route_changed` of many topics at once (the cached ones found by set operations)."""
        self.route_answers.drop(topics)
        self._changed_topics.update(topics)

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

    def invalidate_routes(self, topics: Iterable[str] | None = None) -> None:
        """Drop cached routes of ``topics`` (all when None): what the encoder adds changed (S19).
        Reported to the route listeners as a change of those topics (of every topic for None)."""
        with self._changing():
            if topics is None:
                self.route_answers.clear()
                self._all_routes_changed = True
            else:
                topics = list(topics)
                for topic in topics:
                    self._route_changed(topic)
            self.journal.routes_invalidated(topics)

    def _invalidate_broker_name(self, broker_name: str) -> None:
        """The broker name's BrokerData or its addresses' filter servers changed: so did the route of
        every topic it holds QueueData of."""
        for topic in self.topics_by_broker_name.get(broker_name, ()):
            self._route_changed(topic)
        self.route_answers.drop_layouts_of((broker_name,))
        self.journal.broker_changed(broker_name)

    def set_support_acting_master(self, enabled: bool) -> None:
        """Switch S52 (``supportActingMaster``) at run time; every route counts as changed when it flips."""
        with self._changing():
            if enabled != self.support_acting_master:
                self.support_acting_master = enabled
                self.route_answers.clear()
                self._all_routes_changed = True
                self.journal.routes_invalidated(None)

    # ------------------------------------------------------------------ QueueData (S06, S07, S40)

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
            return PreparedTopics(names, olds, news, queue_nums_changes(names, broker_name, all_nums))
        if olds.count(olds[0]) == len(olds):  # one record now (usual: a broker's topics share one)
            old, old_nums = olds[0], queues_get(olds[0], broker_name)
            changed = list(map(ne, all_nums, repeat(old_nums)))  # S07: equal QueueData is left alone
            if changed.count(False):
                names, all_nums = list(compress(names, changed)), list(compress(all_nums, changed))
            by_nums = {nums: self._new_record(old, broker_name, nums) for nums in set(all_nums)}
            digest_changes = queue_nums_changes(
                names,
                broker_name,
                all_nums,
                names if old_nums is not None else (),
                [old_nums] * len(names) if old_nums is not None else (),
            )
            news = list(map(by_nums.__getitem__, all_nums))
            return PreparedTopics(names, [old] * len(names), news, digest_changes)
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
        digest_changes = queue_nums_changes(
            names, broker_name, all_nums, list(compress(names, replaced)), replaced_nums
        )
        return PreparedTopics(names, olds, list(map(by_key.__getitem__, keys)), digest_changes)

    def _new_record(self, old: TopicQueues | None, broker_name: str, nums: QueueNums) -> TopicQueues:
        """The shared record of ``old`` with ``broker_name``'s QueueData set to ``nums``."""
        return self._intern_record(queues_put(old, broker_name, self._intern_nums(nums)))

    def _commit(self, broker_name: str, prepared: PreparedTopics) -> None:
        """Write what :meth:`_prepare` worked out, in a few bulk dict operations."""
        if not prepared.topics:
            return
        self.topic_queue_nums.update(zip(prepared.topics, prepared.news, strict=True))
        if prepared.olds.count(None):
            self.capacity.topics_added(list(compress(prepared.topics, map(is_, prepared.olds, repeat(None)))))
        self.journal.records_written(prepared.topics)
        self._index_add(broker_name, prepared.topics)
        self._routes_changed(prepared.topics)
        self._digest.add_later(prepared.digest_changes)  # worked out by settle_digest_piece()

    def _intern_nums(self, nums: QueueNums) -> QueueNums:
        """The shared copy of ``nums`` (bounded: past :data:`MAX_INTERNED_QUEUE_NUMS` distinct values
        the sharing starts over)."""
        return _shared_copy(self._interned, nums, MAX_INTERNED_QUEUE_NUMS)

    def _intern_record(self, record: TopicQueues) -> TopicQueues:
        """The shared copy of ``record`` (bounded: past :data:`MAX_INTERNED_RECORDS` distinct records
        the sharing starts over; stored records stay valid)."""
        return _shared_copy(self._interned_records, record, MAX_INTERNED_RECORDS)

    def _create_and_update_queue_nums(self, broker_name: str, topic: str, nums: QueueNums) -> None:
        """S07: create the topic, add or replace this broker name's QueueData when it differs."""
        if queues_get(self.topic_queue_nums.get(topic), broker_name) != nums:
            self._set_queue_nums(topic, broker_name, nums)
            self._route_changed(topic)
        index = self.topics_by_broker_name.get(broker_name)
        if index is None or topic not in index:
            self._index_add(broker_name, [topic])

    def _set_queue_nums(self, topic: str, broker_name: str, nums: QueueNums) -> None:
        """Put ``nums`` (interned here) as ``broker_name``'s QueueData of ``topic`` (created when
        missing), keeping the digest up to date."""
        queues = self.topic_queue_nums.get(topic)
        old = queues_get(queues, broker_name)
        self.topic_queue_nums[topic] = self._intern_record(queues_put(queues, broker_name, self._intern_nums(nums)))
        if queues is None:
            self.capacity.topics_added([topic])
        self.journal.records_written((topic,))
        self._digest.replace(
            None if old is None else queue_data_hash(topic, QueueData(broker_name, *old)),
            queue_data_hash(topic, QueueData(broker_name, *nums)),
        )

    def _index_add(self, broker_name: str, topics: list[str]) -> None:
        """``topics`` now have QueueData of ``broker_name`` (:attr:`topics_by_broker_name`)."""
        self.topics_by_broker_name.setdefault(broker_name, {}).update(dict.fromkeys(topics))
        self.journal.index_changed(broker_name, topics, True)

    def _put_topic_queue_mappings(self, mappings: Mapping[str, TopicQueueMappingInfo]) -> None:
        """RocketMQ 5.x: keep each mapping under its topic and its own ``bname``; a changed one is
        a change of the topic's route."""
        for topic, mapping in mappings.items():
            by_broker = self.topic_queue_mapping_info_table.setdefault(topic, {})
            old = by_broker.get(mapping.bname)
            if old != mapping:
                by_broker[mapping.bname] = mapping
                self.journal.mappings_changed(topic)
                self._digest.replace(None if old is None else mapping_hash(topic, old), mapping_hash(topic, mapping))
                self._route_changed(topic)

    def _set_filter_servers(self, broker_addr: str, filter_servers: list[str]) -> None:
        """S09: the filter servers of ``broker_addr`` (none: the entry is dropped)."""
        if filter_servers == self.filter_server_table.get(broker_addr, []):
            return
        if filter_servers:
            self.filter_server_table[broker_addr] = filter_servers
        else:
            del self.filter_server_table[broker_addr]
        self.journal.filter_servers_changed(broker_addr)

    def _forget_topics_fingerprints(self, broker_name: str) -> None:
        """This broker name's QueueData changed other than by S07: its next registration decodes."""
        broker_data = self.broker_addr_table.get(broker_name)
        for addr in broker_data.broker_addrs.values() if broker_data else ():
            live = self.broker_live_table.get(addr)
            if live is not None:
                live.topics_fingerprint = None
                self._note_registered_body(addr)

    def _note_registered_body(self, broker_addr: str) -> None:
        """Bring ``registered_bodies`` in line with the address's live entry (its fingerprints, or
        none when it left), and journal it when that changed something."""
        live = self.broker_live_table.get(broker_addr)
        body = (
            None
            if live is None
            else (live.cluster, live.broker_name, live.broker_id, live.body_fingerprint, live.topics_fingerprint)
        )
        if self.registered_bodies.get(broker_addr) == body:
            return
        if body is None:
            del self.registered_bodies[broker_addr]
        else:
            self.registered_bodies[broker_addr] = body
        self.journal.registered_body_changed(broker_addr)

    def _remove_queue_datas(self, broker_name: str, topics: Iterable[str]) -> None:
        """The QueueData of ``broker_name`` for ``topics`` leave the table (a topic it has none of is
        skipped): its last address left (S13/S15/S16), a registration no longer carries them
        (``deleteTopicWithBrokerRegistration``), or the topic was deleted (S25). Done in bulk: a
        1,600-topic broker whose connection closed took ~15 ms one topic at a time. The digest's share
        is worked out later (:meth:`settle_digest_piece`, as for a registration)."""
        self._forget_topics_fingerprints(broker_name)
        topics = list(topics)
        self._routes_changed(topics)
        table = self.topic_queue_nums
        removed_topics: list[str] = []
        removed_nums: list[QueueNums] = []
        olds: list[TopicQueues] = []  # keeps every old record alive, so that no id is reused meanwhile
        remaining_of: dict[int, TopicQueues | None] = {}
        gone: list[str] = []  # topics left with no QueueData
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
                gone.append(topic)
            else:
                table[topic] = remaining
        self.capacity.topics_removed(gone)
        self.journal.records_written(removed_topics)
        if removed_topics:
            self._digest.add_later(queue_nums_changes((), broker_name, (), removed_topics, removed_nums))
        index = self.topics_by_broker_name.get(broker_name)
        if not index:
            return
        left = [topic for topic in topics if topic in index]
        for topic in left:
            del index[topic]
        if not index:
            del self.topics_by_broker_name[broker_name]
        if left:
            self.journal.index_changed(broker_name, left, False)

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
                self.capacity.check_new_topic(topic)
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

    # ------------------------------------------------------------------ replication and the digest

    def track_changes(self) -> None:
        """From now on, note every change for :meth:`take_change` (the route-table process's table)."""
        self.journal.tracking = True

    def take_change(self) -> TableChange | None:
        """What changed since the last call, as a replica needs it (:meth:`apply_change`); None when
        nothing a replica holds changed. Requires :meth:`track_changes`."""
        return self.journal.take(self)

    def replica_state(self) -> TableChange:
        """Everything a replica holds, as one change an empty table applies (route_journal.replica_state)."""
        return replica_state(self)

    def replica_state_pieces(self, piece_topics: int) -> Iterator[TableChange]:
        """:meth:`replica_state` in pieces of at most ``piece_topics`` topics (route_journal.replica_state_pieces).
        Raises ValueError when ``piece_topics`` < 1."""
        return replica_state_pieces(self, piece_topics)

    def apply_change(self, change: TableChange) -> frozenset[str] | None:
        """A replica: apply a change taken from the writer's table (route_journal.apply_change); returns
        the topics whose route changed (None: every route)."""
        self.capacity.forget()  # a replica counts its estimates when asked
        return apply_change(self, change)

    def route_digest(self) -> int:
        """Content digest of the routes (every QueueData, BrokerData and static-topic mapping;
        :mod:`namesrv_grpc.core.digest`):
        equal on two NameServers exactly when they would answer every route lookup alike (filter
        servers aside). Kept up to date by every change (a registration's per-topic hashes are worked
        out piece by piece, :meth:`settle_digest_piece`, or here); a 52-bit integer. A replica keeps none (0):
        the route-table process reports it."""
        return self._digest.value

    def settle_digest_piece(self) -> bool:
        """Work out one piece (up to :data:`~namesrv_grpc.core.digest.DIGEST_PIECE_TOPICS` QueueData)
        of the digest's share of the registrations applied so far; True when more is left. The
        route-table process calls it once per event-loop turn after the waiting writes are
        answered, so a write arriving meanwhile waits for one piece at most."""
        return self._digest.settle_piece()
