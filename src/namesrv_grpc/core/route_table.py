"""The route table's writes: RocketMQ's ``RouteInfoManager`` as a pure module (no gRPC, no I/O).
:class:`RouteInfoManager` extends :class:`~namesrv_grpc.core.route_tables.RouteTables` (the five
tables, their representation and every lookup) with registration (S03-S12), liveness and sessions
(S13-S17), through :class:`~namesrv_grpc.core.topic_table.TopicTable`, which writes the QueueData
(S06, S07, S23, S25, S40) and keeps the capacity account, the route digest and the journal of
changes for the replicas. Arguments are assumed validated by the
caller (:mod:`namesrv_grpc.core.processor`); this module enforces the rules S03-S10, S12-S18, S20,
S22-S25.

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
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping

from namesrv_grpc.core.capacity import RouteTableLimits
from namesrv_grpc.core.compact_topics import CompactTopics
from namesrv_grpc.core.digest import (
    broker_data_hash,
)
from namesrv_grpc.core.errors import (
    BrokerNotRegisteredError,
    RegistrationRefusedError,
    StaleBrokerStateError,
)
from namesrv_grpc.core.model import (
    DEFAULT_HEARTBEAT_TIMEOUT_MILLIS,
    MASTER_ID,
    PERM_WRITE,
    BrokerData,
    BrokerLiveInfo,
    DataVersion,
    RegisterBrokerResult,
    RemovedBroker,
    TopicConfig,
    TopicQueueMappingInfo,
)
from namesrv_grpc.core.route_tables import (
    Clock,
    QueueNums,
    queues_get,
    wall_clock_millis,
)
from namesrv_grpc.core.topic_table import TopicTable

DISPLACED_MEMORY_MILLIS = 600_000
"""How long a broker run whose registration another run of the same broker replaced is remembered:
when it registers again within this time, the two runs are fighting (a registration conflict)."""
MAX_DISPLACED_KEYS = 4096
MAX_DISPLACED_PER_BROKER = 16
"""Bounds of that memory: broker (cluster, name, id) keys, and replaced runs per key."""


class RouteInfoManager(TopicTable):
    """The NameServer's in-memory route table (RocketMQ ``RouteInfoManager``): the tables and their
    lookups (:class:`~namesrv_grpc.core.route_tables.RouteTables`) plus every write. One thread."""

    def __init__(
        self,
        clock: Clock = wall_clock_millis,
        *,
        liveness_clock: Clock | None = None,
        delete_topic_with_broker_registration: bool = False,
        support_acting_master: bool = False,
        limits: RouteTableLimits | None = None,
    ):
        """``clock``, ``liveness_clock``, ``support_acting_master`` (change it with
        :meth:`set_support_acting_master`) and ``limits``: see
        :class:`~namesrv_grpc.core.route_tables.RouteTables`. ``delete_topic_with_broker_registration``
        is RocketMQ 5.x's ``deleteTopicWithBrokerRegistration`` (default off): a master's changed
        registration also removes its topics that the body no longer lists."""
        super().__init__(
            clock, liveness_clock=liveness_clock, support_acting_master=support_acting_master, limits=limits
        )
        self.delete_topic_with_broker_registration = delete_topic_with_broker_registration
        self._session_seq = 0
        self._expiry_heap: list[tuple[int, str]] = []
        self._scheduled: dict[str, int] = {}
        """S13 without scanning every broker: each live address has one heap entry at a deadline no
        later than its real one (``last_seen_millis + heartbeat_timeout_millis``); a scan pops
        the entries that are due, removes the brokers that really expired and reschedules the rest
        at their real deadline. A scan with nothing due costs one comparison."""
        self._displaced: dict[tuple[str, str, int], dict[str, int]] = {}
        """(cluster, broker name, id) -> {instance id replaced by another run -> when, ms}."""

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
        each rule in a method of its own; readers never see half of a registration.

        ``topic_configs`` (topic name -> TopicConfig) enters the table only for a master (id 0) whose
        ``data_version`` differs from the stored one, or on a first registration (S06); None means
        "topics unchanged" (a fingerprint matched). ``heartbeat_timeout_millis`` 0 means 120 000 ms
        (S08). ``body_fingerprint`` is kept for :meth:`same_body_registered`, ``topics_fingerprint``
        for :meth:`stored_topics_fingerprint`. ``protocol`` ("grpc" or "remoting") is shown by the liveness
        view. RocketMQ 5.x: ``zone_name`` replaces the broker name's zone (empty clears it), static-topic
        mappings (S40); ``enable_acting_master`` None: a broker older than 5.x (no rule S50-S53).

        Returns the live master's address and HA address for a slave (S10), the run of the broker it
        took the registration back from (``conflicting_instance_id``) and whether anything beyond
        liveness changed. Raises what :meth:`_check_registration` raises, before changing anything.
        """
        topics = CompactTopics.of(topic_configs)
        filter_servers = list(filter_server_list)
        identity = (cluster_name, broker_name, broker_id)
        with self._changing():
            now = self._clock()
            old_addr, growth, moved = self._check_registration(
                identity,
                broker_addr,
                data_version,
                zone_name,
                filter_servers,
                topics,
                topic_queue_mappings,
                enable_acting_master,
                refuse_single_topic_first,
            )  # S12, S42, capacity
            self.version += 1
            conflicting = self._note_displacement(identity, old_addr or broker_addr, instance_id, now, protocol)
            previous = self._leave_other_broker_name(broker_name, broker_addr)
            self._join_cluster(cluster_name, broker_name)  # S03
            broker_data, register_first, broker_data_changed = self._put_broker_addr(
                *identity, broker_addr, zone_name, enable_acting_master, ha_server_addr
            )  # S04, S05, S53
            changed = previous is None or previous.broker_name != broker_name or previous.data_version != data_version
            topics_applied = self._apply_topics(
                broker_data, broker_id, topics, topic_queue_mappings, enable_acting_master, register_first or changed
            )  # S06, S07, S40, S50
            live = BrokerLiveInfo(
                *identity,
                last_update_timestamp=now,
                last_seen_millis=self._liveness_clock(),
                heartbeat_timeout_millis=heartbeat_timeout_millis or DEFAULT_HEARTBEAT_TIMEOUT_MILLIS,
                data_version=data_version,
                ha_server_addr=ha_server_addr,
                instance_id=instance_id,
                body_fingerprint=body_fingerprint,
                topics_fingerprint=topics_fingerprint if topics_applied else None,
                protocol=protocol,
            )
            registration_changed = self._put_live_entry(broker_addr, live, previous) or broker_data_changed  # S08
            registration_changed |= self._put_filter_servers(broker_name, broker_addr, filter_servers)  # S09
            self.capacity.registered(growth, moved)
            master_addr, master_ha_addr = self.master_of(broker_name) if broker_id != MASTER_ID else ("", "")
            return RegisterBrokerResult(master_addr, master_ha_addr, conflicting, changed=registration_changed)  # S10

    def _check_registration(
        self,
        identity: tuple[str, str, int],
        broker_addr: str,
        data_version: DataVersion,
        zone_name: str,
        filter_servers: list[str],
        topics: CompactTopics | None,
        mappings: Mapping[str, TopicQueueMappingInfo] | None,
        enable_acting_master: bool | None,
        refuse_single_topic_first: bool,
    ) -> tuple[str | None, int, bool]:
        """Every check before a registration changes anything: ``(the address that holds the broker
        id of the broker name now or None, what the registration adds to the cluster info's estimate
        in bytes, whether it moves an address)``. Raises StaleBrokerStateError when another live
        address holds the id with a higher ``state_version`` (S12); RegistrationRefusedError when
        none holds it, ``refuse_single_topic_first`` (the rule S42 applies) and ``topics`` holds
        exactly one topic; LimitExceededError (:meth:`CapacityAccount.check_registration`)."""
        broker_name, broker_id = identity[1], identity[2]
        first_topics = topics if refuse_single_topic_first else None
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
        carries_topics = broker_id == MASTER_ID or enable_acting_master is not None  # 5.x: prime slave
        growth, moved = self.capacity.check_registration(
            *identity,
            broker_addr,
            zone_name,
            filter_servers,
            topics if carries_topics else None,
            mappings if carries_topics else None,
        )
        return old_addr, growth, moved

    def _leave_other_broker_name(self, broker_name: str, broker_addr: str) -> BrokerLiveInfo | None:
        """An address belongs to one broker name: when ``broker_addr`` is live under another one, it
        leaves that one first (S05 across names). Returns its live entry before (None: none)."""
        previous = self.broker_live_table.get(broker_addr)
        if previous is not None and previous.broker_name != broker_name:
            self._remove_addr_from_broker_data(previous.broker_name, broker_addr)
        return previous

    def _join_cluster(self, cluster_name: str, broker_name: str) -> None:
        """S03: the broker name joins its cluster."""
        cluster = self.cluster_addr_table.setdefault(cluster_name, set())
        if broker_name not in cluster:
            cluster.add(broker_name)
            self.journal.cluster_changed(cluster_name, broker_name, True)

    def _put_broker_addr(
        self,
        cluster_name: str,
        broker_name: str,
        broker_id: int,
        broker_addr: str,
        zone_name: str,
        enable_acting_master: bool | None,
        ha_server_addr: str,
    ) -> tuple[BrokerData, bool, bool]:
        """S04 (BrokerData made on first registration) and S05 (one entry per address, then
        ``brokerAddrs[id] = addr``), with the zone and acting-master switch (5.x); S53: an id lower
        than the smallest one before (0 when none) is noted to be told to the others (RocketMQ
        ``registerBroker``). Returns the BrokerData, whether the id was not registered under the
        name before and whether the BrokerData changed."""
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
                self._note_registered_body(old_addr)
                self._set_filter_servers(old_addr, [])
        changed = before != (broker_data.broker_addrs, broker_data.zone_name, broker_data.enable_acting_master)
        if changed:
            self._invalidate_broker_name(broker_name)
            self._digest.replace(digest_before, broker_data_hash(broker_data))
        elif digest_before is None:
            self._digest.add(broker_data_hash(broker_data))
        if broker_id < prev_min_broker_id:
            self._min_broker_id_changed(broker_data, offline_broker_addr="", ha_broker_addr=ha_server_addr)
        return broker_data, register_first, changed

    def _put_filter_servers(self, broker_name: str, broker_addr: str, filter_servers: list[str]) -> bool:
        """S09: the registration's filter servers; True when they changed (and with them the routes
        of the broker name's topics)."""
        if filter_servers == self.filter_server_table.get(broker_addr, []):
            return False
        self._invalidate_broker_name(broker_name)
        self._set_filter_servers(broker_addr, filter_servers)
        return True

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
        """S08: the live entry (and ``registered_bodies``); the liveness session stays only with the
        same broker instance (same non-empty instance id, cluster, name and id). Returns whether
        anything beyond liveness changed (``RegisterBrokerResult.changed``: what an audit line is for)."""
        same_instance = (
            previous is not None
            and live.instance_id != ""
            and (previous.instance_id, previous.cluster, previous.broker_name, previous.broker_id)
            == (live.instance_id, live.cluster, live.broker_name, live.broker_id)
        )
        if same_instance and previous is not None:
            live.session_id = previous.session_id
        self.broker_live_table[broker_addr] = live
        self._note_registered_body(broker_addr)
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

    # ------------------------------------------------------------------ registration conflicts

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

    def _remove_addr(self, broker_addr: str, reason: str) -> RemovedBroker:
        """S16: drop an address from the live and filter tables and from its BrokerData, cascading.
        Every departure (expiry, unregistration, connection or session end) comes here, so S51 and
        S53 apply to all of them alike."""
        self.version += 1
        self.capacity.brokers_left()
        live = self.broker_live_table.pop(broker_addr)
        self._note_registered_body(broker_addr)
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

    def _remove_addr_from_broker_data(self, broker_name: str, broker_addr: str) -> None:
        broker_data = self.broker_addr_table.get(broker_name)
        if broker_data is None:
            return
        self.capacity.brokers_left()
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
                self.journal.cluster_changed(cluster_name, broker_name, False)
            if not names:
                del self.cluster_addr_table[cluster_name]
        self._remove_queue_datas(broker_name, list(self.topics_by_broker_name.get(broker_name, ())))
