"""Stateful property test of the route table: random sequences of registrations, unregistrations,
heartbeats, expiry scans and admin operations keep the five tables consistent with each other.

Liveness sessions (S15, S17) are checked against the machine's own model, not against the table's
fields: the model remembers which broker instance registered each address and which session it bound,
and says on its own whether a session survives a re-registration (same non-empty instance, cluster,
name and id) and whether a hello binds (exactly the registered instance, "" included).

Runs are reproducible in CI (``CI`` set: the derandomized profile of tests/conftest.py); locally a
failure prints the ``--hypothesis-seed`` that replays the run."""

from __future__ import annotations

import copy
import pickle
from collections.abc import Iterator
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from namesrv_grpc.core.digest import full_digest
from namesrv_grpc.core.errors import BrokerNameNotRegisteredError, BrokerNotRegisteredError, StaleBrokerStateError
from namesrv_grpc.core.model import PERM_WRITE, DataVersion, QueueData, TopicConfig
from namesrv_grpc.core.replication import TableChange
from namesrv_grpc.core.route_table import RouteInfoManager
from tests.support import FakeClock

CLUSTERS = ["c1", "c2"]
BROKER_NAMES = ["broker-a", "broker-b", "broker-c"]
ADDRS = [f"10.0.0.{i}:10911" for i in range(1, 6)]
TOPICS = ["T0", "T1", "T2", "T3"]

clusters = st.sampled_from(CLUSTERS)
broker_names = st.sampled_from(BROKER_NAMES)
broker_ids = st.integers(0, 2)
addrs = st.sampled_from(ADDRS)
topic_names = st.sampled_from(TOPICS)
topic_configs = st.builds(
    TopicConfig,
    topic_name=topic_names,
    read_queue_nums=st.integers(0, 8),
    write_queue_nums=st.integers(0, 8),
    perm=st.integers(0, 15),
    topic_sys_flag=st.integers(0, 3),
)
same_layout_topic_sets = st.builds(
    lambda names, nums: [TopicConfig(name, *nums) for name in names],
    st.lists(topic_names, unique=True, min_size=2, max_size=4),
    st.sampled_from([(4, 4, 6, 0), (1, 1, 6, 0), (4, 4, 4, 0)]),
)
"""Topics with the same QueueNums, so that routes share layouts (answers found by content, issue 41)."""
topic_sets = st.one_of(st.lists(topic_configs, max_size=4, unique_by=lambda t: t.topic_name), same_layout_topic_sets)
data_versions = st.builds(DataVersion, st.integers(0, 2), st.integers(0, 2), st.integers(0, 2))
filter_lists = st.lists(st.sampled_from(["10.9.0.1:1", "10.9.0.2:1"]), max_size=2)
timeouts = st.sampled_from([0, 1_000, 10_000, 60_000])


def as_is(route: Any) -> Any:
    """The route itself as the "encoding" of the per-topic answers (a stable function: it keys them)."""
    return route


def as_is_by_content(route: Any) -> Any:
    """The same, as another encoding: the answers found by content (``shared``)."""
    return route


def any_topic(topic: str) -> bool:
    return True


def snapshot(rt: RouteInfoManager) -> Any:
    return copy.deepcopy(
        (
            rt.topic_queue_table,
            rt.broker_addr_table,
            rt.cluster_addr_table,
            rt.broker_live_table,
            rt.filter_server_table,
            rt.topics_by_broker_name,
        )
    )


def crossed(change: TableChange) -> TableChange:
    """``change`` as it crosses to a serving process (pickled)."""
    copied: TableChange = pickle.loads(pickle.dumps(change, protocol=pickle.HIGHEST_PROTOCOL))
    return copied


def assert_same_tables(replica: RouteInfoManager, rt: RouteInfoManager) -> None:
    """``replica`` holds every table a serving process's replica holds as ``rt`` has it."""
    assert replica.topic_queue_nums == rt.topic_queue_nums
    assert replica.broker_addr_table == rt.broker_addr_table
    assert replica.cluster_addr_table == rt.cluster_addr_table
    assert replica.filter_server_table == rt.filter_server_table
    assert replica.topics_by_broker_name == rt.topics_by_broker_name
    assert replica.topic_queue_mapping_info_table == rt.topic_queue_mapping_info_table
    assert replica.route_revision == rt.route_revision


class RouteTableMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.clock = FakeClock()
        self.rt = RouteInfoManager(self.clock)
        self.rt.track_changes()
        self.replica = RouteInfoManager(self.clock)
        """A serving process's replica, fed by the route table's changes after every step."""
        self.replica_notices: list[tuple[int, frozenset[str] | None]] = []
        self.replica.route_listeners.append(lambda revision, topics: self.replica_notices.append((revision, topics)))
        self.joiner: RouteInfoManager | None = None
        """A serving process's replica that joins once the table has two topics, from the route table's
        state in one-topic pieces applied one per step, the changes of those steps held back and
        applied after the last piece (route_table_process.Publisher.join); then fed every change."""
        self.pieces: Iterator[TableChange] | None = None
        self.held: list[TableChange] = []
        self.sessions: list[tuple[str, int]] = []
        # The oracle of sessions: address -> (instance, cluster, name, id) of its last registration,
        # and address -> the session bound to it. Entries of addresses that left the live table are
        # dropped after each step (liveness itself is checked by the rules and invariants).
        self.registered_as: dict[str, tuple[str, str, str, int]] = {}
        self.bound_session: dict[str, int] = {}

    @initialize(delete_topics=st.booleans())
    def configure(self, delete_topics: bool) -> None:
        self.rt.delete_topic_with_broker_registration = delete_topics

    # ------------------------------------------------------------------ rules

    @rule(
        cluster=clusters,
        name=broker_names,
        broker_id=broker_ids,
        addr=addrs,
        topics=topic_sets,
        version=data_versions,
        filters=filter_lists,
        timeout=timeouts,
        instance=st.sampled_from(["", "run-1", "run-2"]),
    )
    def register(
        self,
        cluster: str,
        name: str,
        broker_id: int,
        addr: str,
        topics: list[TopicConfig],
        version: DataVersion,
        filters: list[str],
        timeout: int,
        instance: str,
    ) -> None:
        before = snapshot(self.rt)
        identity = (instance, cluster, name, broker_id)
        keeps_session = instance != "" and self.registered_as.get(addr) == identity
        try:
            self.rt.register_broker(
                cluster_name=cluster,
                broker_name=name,
                broker_id=broker_id,
                broker_addr=addr,
                data_version=version,
                topic_configs={t.topic_name: t for t in topics},
                filter_server_list=filters,
                heartbeat_timeout_millis=timeout,
                instance_id=instance,
            )
        except StaleBrokerStateError:
            assert snapshot(self.rt) == before
            return
        self.registered_as[addr] = identity
        if not keeps_session:
            self.bound_session.pop(addr, None)
        live = self.rt.broker_live_table[addr]
        assert (live.cluster, live.broker_name, live.broker_id) == (cluster, name, broker_id)
        assert (live.data_version, live.last_update_timestamp) == (version, self.clock.now)
        assert self.rt.broker_addr_table[name].broker_addrs[broker_id] == addr
        assert name in self.rt.cluster_addr_table[cluster]
        assert self.rt.filter_server_table.get(addr, []) == filters

    @precondition(lambda self: bool(self.registered_as))
    @rule(
        data=st.data(),
        instance=st.sampled_from([None, "", "run-1", "run-2"]),
        topics=topic_sets,
        version=data_versions,
    )
    def reregister(
        self, data: st.DataObject, instance: str | None, topics: list[TopicConfig], version: DataVersion
    ) -> None:
        """The broker at a registered address registers again (its periodic round or a restart):
        same identity, the same instance (None) or another one, "" included."""
        addr = data.draw(st.sampled_from(sorted(self.registered_as)))
        registered, cluster, name, broker_id = self.registered_as[addr]
        self.register(
            cluster, name, broker_id, addr, topics, version, [], 0, registered if instance is None else instance
        )

    @precondition(lambda self: bool(self.registered_as))
    @rule(data=st.data(), instance=st.sampled_from([None, "", "run-1", "run-2"]), version=data_versions)
    def session_then_reregister(self, data: st.DataObject, instance: str | None, version: DataVersion) -> None:
        """A broker with a session registers again (its periodic round, or a restart under another
        instance): the model says whether the session is still the bound one afterwards."""
        addr = data.draw(st.sampled_from(sorted(self.registered_as)))
        self.hello(addr, None)
        if self.bound_session.get(addr) is None:
            return
        session_id = self.bound_session[addr]
        registered, cluster, name, broker_id = self.registered_as[addr]
        self.register(cluster, name, broker_id, addr, [], version, [], 0, registered if instance is None else instance)
        assert self.rt.session_heartbeat(addr, session_id) == (self.bound_session.get(addr) == session_id)

    @rule(cluster=clusters, name=broker_names, broker_id=broker_ids, addr=addrs)
    def unregister_random(self, cluster: str, name: str, broker_id: int, addr: str) -> None:
        self.rt.unregister_broker(cluster_name=cluster, broker_name=name, broker_id=broker_id, broker_addr=addr)

    @precondition(lambda self: bool(self.rt.broker_live_table))
    @rule(data=st.data())
    def unregister_registered(self, data: st.DataObject) -> None:
        addr = data.draw(st.sampled_from(sorted(self.rt.broker_live_table)))
        live = self.rt.broker_live_table[addr]
        removed = self.rt.unregister_broker(
            cluster_name=live.cluster, broker_name=live.broker_name, broker_id=live.broker_id, broker_addr=addr
        )
        assert removed is not None
        assert addr not in self.rt.broker_live_table

    @rule(cluster=clusters, name=broker_names, broker_id=broker_ids, addr=addrs)
    def heartbeat(self, cluster: str, name: str, broker_id: int, addr: str) -> None:
        try:
            self.rt.heartbeat(cluster_name=cluster, broker_name=name, broker_id=broker_id, broker_addr=addr)
        except BrokerNotRegisteredError:
            live = self.rt.broker_live_table.get(addr)
            assert live is None or live.cluster != cluster
        else:
            assert self.rt.broker_live_table[addr].last_update_timestamp == self.clock.now

    @rule(millis=st.integers(0, 130_000))
    def advance_and_scan(self, millis: int) -> None:
        self.clock.advance(millis)
        now = self.clock.now
        expired = {a for a, live in self.rt.broker_live_table.items() if live.expired(now)}
        removed = self.rt.scan_not_active_broker()
        assert {r.broker_addr for r in removed} == expired
        assert all(r.reason == "expired" for r in removed)
        for live in self.rt.broker_live_table.values():
            assert live.last_update_timestamp + live.heartbeat_timeout_millis >= now

    @precondition(lambda self: bool(self.registered_as))
    @rule(data=st.data(), hello_instance=st.sampled_from([None, "", "run-1", "run-2"]))
    def bind_session(self, data: st.DataObject, hello_instance: str | None) -> None:
        """A hello naming the registered identity, with the registered instance (None) or another
        one; the model says whether it binds."""
        self.hello(data.draw(st.sampled_from(sorted(self.registered_as))), hello_instance)

    def hello(self, addr: str, hello_instance: str | None) -> None:
        instance, cluster, name, broker_id = self.registered_as[addr]
        hello = instance if hello_instance is None else hello_instance
        bound = self.rt.bind_session(
            cluster_name=cluster, broker_name=name, broker_id=broker_id, broker_addr=addr, instance_id=hello
        )
        if hello != instance:
            assert bound is None, f"a hello from instance {hello!r} bound to {instance!r}'s registration"
            return
        assert bound is not None
        assert bound[0] not in {sid for _, sid in self.sessions}
        assert self.rt.broker_live_table[addr].last_update_timestamp == self.clock.now
        self.sessions.append((addr, bound[0]))
        self.bound_session[addr] = bound[0]

    @precondition(lambda self: bool(self.sessions))
    @rule(data=st.data(), end=st.booleans())
    def session_event(self, data: st.DataObject, end: bool) -> None:
        addr, session_id = data.draw(st.sampled_from(self.sessions))
        bound = self.bound_session.get(addr) == session_id
        before = snapshot(self.rt)
        if end:
            removed = self.rt.remove_if_session(addr, session_id, "session ended")
            assert (removed is not None) == bound, f"session {session_id} of {addr}: model says bound={bound}"
            if removed is None:
                assert snapshot(self.rt) == before
            else:
                self.bound_session.pop(addr, None)
        else:
            assert self.rt.session_heartbeat(addr, session_id) == bound

    @rule(name=broker_names, wipe=st.booleans())
    def write_perm(self, name: str, wipe: bool) -> None:
        expected = len(self.rt.topics_by_broker_name.get(name, ()))
        if wipe:
            assert self.rt.wipe_write_perm_of_broker(name) == expected
            assert all(q.perm & PERM_WRITE == 0 for m in self.rt.topic_queue_table.values() if (q := m.get(name)))
        else:
            assert self.rt.add_write_perm_of_broker(name) == expected
            assert all(q.perm == 6 for m in self.rt.topic_queue_table.values() if (q := m.get(name)))

    @rule(topic=topic_names, cluster=st.sampled_from(["", *CLUSTERS]))
    def delete_topic(self, topic: str, cluster: str) -> None:
        self.rt.delete_topic(topic, cluster)
        if not cluster:
            assert topic not in self.rt.topic_queue_table
        else:
            remaining = self.rt.topic_queue_table.get(topic, {})
            assert not set(remaining) & self.rt.cluster_addr_table.get(cluster, set())

    @rule(
        topic=topic_names,
        names=st.lists(broker_names, min_size=1, max_size=3, unique=True),
        read=st.integers(0, 8),
        perm=st.integers(0, 15),
    )
    def register_topic(self, topic: str, names: list[str], read: int, perm: int) -> None:
        before = snapshot(self.rt)
        queue_datas = [QueueData(n, read, read, perm) for n in names]
        try:
            self.rt.register_topic(topic, queue_datas)
        except BrokerNameNotRegisteredError:
            assert any(n not in self.rt.broker_addr_table for n in names)
            assert snapshot(self.rt) == before
        else:
            for q in queue_datas:
                assert self.rt.topic_queue_table[topic][q.broker_name] == q

    @rule(cluster=clusters, name=broker_names, broker_id=broker_ids, addr=addrs, version=data_versions)
    def query_data_version(self, cluster: str, name: str, broker_id: int, addr: str, version: DataVersion) -> None:
        changed, stored = self.rt.query_data_version(
            cluster_name=cluster, broker_name=name, broker_id=broker_id, broker_addr=addr, data_version=version
        )
        if stored is None:
            assert changed
        else:
            assert changed == (stored != version)

    # ------------------------------------------------------------------ invariants

    @invariant()
    def sessions_agree_with_the_model(self) -> None:
        for addr in set(self.registered_as) - set(self.rt.broker_live_table):
            del self.registered_as[addr]
            self.bound_session.pop(addr, None)
        for addr, live in self.rt.broker_live_table.items():
            assert live.session_id == self.bound_session.get(addr, 0), f"session of {addr}"

    @invariant()
    def cluster_sets_name_registered_broker_names(self) -> None:
        for cluster, names in self.rt.cluster_addr_table.items():
            assert names, f"empty cluster set {cluster}"
            for name in names:
                assert name in self.rt.broker_addr_table, f"{name} of {cluster} has no BrokerData"
        in_some_cluster = set().union(*self.rt.cluster_addr_table.values())
        assert set(self.rt.broker_addr_table) <= in_some_cluster

    @invariant()
    def queue_data_broker_names_registered(self) -> None:
        for topic, queue_data_map in self.rt.topic_queue_table.items():
            assert queue_data_map, f"topic {topic} left with no QueueData"
            for name, queue_data in queue_data_map.items():
                assert queue_data.broker_name == name
                assert name in self.rt.broker_addr_table, f"QueueData of {topic} on {name} has no BrokerData"

    @invariant()
    def broker_data_addresses_unique_and_live(self) -> None:
        seen: dict[str, str] = {}
        for name, broker_data in self.rt.broker_addr_table.items():
            assert broker_data.broker_name == name
            assert broker_data.broker_addrs, f"empty BrokerData {name}"
            addresses = list(broker_data.broker_addrs.values())
            assert len(addresses) == len(set(addresses)), f"address twice in {name}: {broker_data.broker_addrs}"
            for broker_id, addr in broker_data.broker_addrs.items():
                assert addr not in seen, f"{addr} in both {seen.get(addr)} and {name}"
                seen[addr] = name
                live = self.rt.broker_live_table.get(addr)
                assert live is not None, f"{addr} of {name} is not live"
                assert (live.broker_name, live.broker_id) == (name, broker_id)
        assert set(self.rt.broker_live_table) == set(seen), "a live address is in no BrokerData"

    @invariant()
    def filter_servers_only_for_live_addresses(self) -> None:
        for addr, servers in self.rt.filter_server_table.items():
            assert servers, f"empty filter-server list for {addr}"
            assert addr in self.rt.broker_live_table

    @invariant()
    def answer_estimates_kept_as_counted_again(self) -> None:
        """The estimates the capacity limits read (core.capacity), kept change by change, equal what
        counting the whole table again gives."""
        kept = (self.rt.capacity.topic_list_bytes, self.rt.capacity.broker_table_bytes)
        self.rt.capacity.topic_list_bytes = self.rt.capacity.broker_table_bytes = None
        counted = self.rt.capacity.answer_sizes()
        assert kept[0] is None or kept[0] == counted[0]
        assert kept[1] is None or kept[1] == counted[1]

    @invariant()
    def topic_index_agrees_with_topic_queue_table(self) -> None:
        expected: dict[str, set[str]] = {}
        for topic, queue_data_map in self.rt.topic_queue_table.items():
            for name in queue_data_map:
                expected.setdefault(name, set()).add(topic)
        assert {name: set(topics) for name, topics in self.rt.topics_by_broker_name.items()} == expected

    @invariant()
    def routes_readable(self) -> None:
        for topic in self.rt.topic_queue_table:
            route = self.rt.pickup_topic_route_data(topic)
            assert route is not None
            assert [q.broker_name for q in route.queue_datas] == [b.broker_name for b in route.broker_datas]

    @invariant()
    def cached_routes_equal_fresh_routes(self) -> None:
        """The per-topic route cache (S18 at dict-hit cost) is never stale: every change of a step
        dropped the entries it touched. Each check also refills the cache for the next step."""
        for topic in [*self.rt.topic_queue_table, *TOPICS]:
            fresh = self.rt.pickup_topic_route_data(topic)
            assert self.rt.pickup_topic_route_cached(topic, as_is) == fresh
            assert self.rt.pickup_topic_route_cached(topic, as_is_by_content, shared=any_topic) == fresh

    @invariant()
    def replica_answers_as_the_route_table(self) -> None:
        """A replica fed with :meth:`take_change` after each step holds the same tables and answers
        every lookup alike; its cached routes (filled at the previous step) were dropped for every
        topic whose route changed, and those topics were reported to its route listeners with the
        route table's revision."""
        cached_before = {topic: self.replica.pickup_topic_route_cached(topic, as_is) for topic in TOPICS}
        for topic in TOPICS:  # answers found by content, filled before the change as well
            self.replica.pickup_topic_route_cached(topic, as_is_by_content, shared=any_topic)
        change = self.rt.take_change()
        self.replica_notices.clear()
        if change is not None:  # as it crosses to a serving process
            self.replica.apply_change(crossed(change))
        self.a_replica_that_joins_in_pieces_holds_the_route_table(change)
        replica, rt = self.replica, self.rt
        assert_same_tables(replica, rt)
        # The replica keeps no digest (the route-table process reports it); the writer's, settled
        # lazily, is what counting it from scratch gives.
        assert rt.route_digest() == full_digest(
            rt.topic_queue_table, rt.broker_addr_table.values(), rt.topic_queue_mapping_info_table
        )
        assert replica.get_cluster_info() == rt.get_cluster_info()
        assert replica.get_system_topic_list() == rt.get_system_topic_list()
        for cluster in CLUSTERS:
            assert replica.get_topics_by_cluster(cluster) == rt.get_topics_by_cluster(cluster)
        notified: set[str] = set()
        for _, topics in self.replica_notices:
            notified |= set(TOPICS) if topics is None else topics
        for topic in TOPICS:
            fresh = rt.pickup_topic_route_data(topic)
            assert replica.pickup_topic_route_cached(topic, as_is) == fresh
            assert replica.pickup_topic_route_cached(topic, as_is_by_content, shared=any_topic) == fresh
            if cached_before[topic] != fresh:
                assert topic in notified, f"{topic}'s route changed but the replica's listeners were not told"

    def a_replica_that_joins_in_pieces_holds_the_route_table(self, change: TableChange | None) -> None:
        """A replica started from :meth:`replica_state_pieces` while writes go on (one piece per
        step, the changes made meanwhile applied after the last piece) ends with the route table's
        records, topic index, BrokerData, clusters, filter servers and static-topic mappings;
        ``change`` is what this step changed."""
        if self.joiner is None:  # it joins now (nothing changed since the change was taken)
            if len(self.rt.topic_queue_nums) < 2:
                return  # once the state is several pieces
            self.joiner = RouteInfoManager(self.clock)
            self.pieces = self.rt.replica_state_pieces(piece_topics=1)
            self.joiner.apply_change(crossed(next(self.pieces)))
            return
        if self.pieces is not None:
            if change is not None:
                self.held.append(change)
            piece = next(self.pieces, None)
            if piece is not None:
                self.joiner.apply_change(crossed(piece))
                return
            self.pieces = None
            for held in self.held:
                self.joiner.apply_change(crossed(held))
        elif change is not None:
            self.joiner.apply_change(crossed(change))
        assert_same_tables(self.joiner, self.rt)

    @invariant()
    def route_digest_equals_digest_from_scratch(self) -> None:
        """The incrementally kept content digest (namesrv_route_table_digest) equals the digest
        computed from the tables: every change of a QueueData or BrokerData was accounted for."""
        expected = full_digest(self.rt.topic_queue_table, self.rt.broker_addr_table.values())
        assert self.rt.route_digest() == expected


RouteTableMachine.TestCase.settings = settings(
    max_examples=200,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestRouteTableStateMachine = RouteTableMachine.TestCase
