"""The journal of the route table's changes, for the serving processes' replicas
(:mod:`namesrv_grpc.core.replication`): the writer's table notes what each write touched
(:class:`RouteJournal`), the route-table process takes it as one :class:`TableChange` per batch of
writes, and every replica applies it (:func:`apply_change`). A new replica starts from
:func:`replica_state` (or its pieces, :func:`replica_state_pieces`).

A change carries the records as they are now, never the writes themselves: a replica applies it in
a few bulk dict operations, whatever rule produced it, and never decides anything.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from namesrv_grpc.core.replication import TableChange
from namesrv_grpc.core.route_tables import RouteTables, TopicQueues


class RouteJournal:
    """What the writer's table changed since the last :meth:`take`, by kind: topic records written,
    broker names whose BrokerData changed, addresses whose filter servers did, cluster and topic
    index changes in order, static-topic mappings, routes whose encoding changed, which body each
    broker address registered last (a change of that alone no read sees). Notes nothing
    until :attr:`tracking` is set (a table no replica follows)."""

    def __init__(self) -> None:
        self.tracking = False
        """Whether changes are noted (the route-table process's table)."""
        self._dirty_records: set[str] = set()
        """Topics whose record in ``topic_queue_nums`` was written since the last :meth:`take`."""
        self._dirty_brokers: set[str] = set()
        """Broker names whose BrokerData changed, or whose addresses' filter servers did."""
        self._dirty_addrs: set[str] = set()
        """Broker addresses whose filter servers changed."""
        self._cluster_log: list[tuple[str, str, bool]] = []
        """(cluster, broker name, joined) changes of ``cluster_addr_table``, in order: a replica
        gets each change, not the whole table (a cluster of 36,000 broker names made each new
        broker's change stream message ~10 MB)."""
        self._dirty_mappings: set[str] = set()
        self._index_log: list[tuple[str, list[str], bool]] = []
        """(broker name, topics, added) changes of ``topics_by_broker_name``, in order."""
        self._invalidated: set[str] = set()
        """Topics whose route changed for what the encoder adds."""
        self._dirty_bodies: set[str] = set()
        """Broker addresses whose entry in ``registered_bodies`` changed."""
        self._all_routes_invalidated = False
        self._taken_revision = 0
        """The route revision of the last :meth:`take`."""

    def records_written(self, topics: Iterable[str]) -> None:
        """The records of ``topics`` in ``topic_queue_nums`` were written (or removed)."""
        if self.tracking:
            self._dirty_records.update(topics)

    def broker_changed(self, broker_name: str) -> None:
        """The broker name's BrokerData, or its addresses' filter servers, changed."""
        if self.tracking:
            self._dirty_brokers.add(broker_name)

    def filter_servers_changed(self, broker_addr: str) -> None:
        """The filter servers of ``broker_addr`` changed (S09)."""
        if self.tracking:
            self._dirty_addrs.add(broker_addr)

    def cluster_changed(self, cluster_name: str, broker_name: str, joined: bool) -> None:
        """``broker_name`` joined (or left) ``cluster_name`` (S03)."""
        if self.tracking:
            self._cluster_log.append((cluster_name, broker_name, joined))

    def index_changed(self, broker_name: str, topics: list[str], added: bool) -> None:
        """``topics`` gained (or lost) QueueData of ``broker_name`` (the topic index)."""
        if self.tracking:
            self._index_log.append((broker_name, topics, added))

    def mappings_changed(self, topic: str) -> None:
        """The topic's static-topic mappings changed (S40)."""
        if self.tracking:
            self._dirty_mappings.add(topic)

    def registered_body_changed(self, broker_addr: str) -> None:
        """The address's entry in ``registered_bodies`` changed (or went)."""
        if self.tracking:
            self._dirty_bodies.add(broker_addr)

    def routes_invalidated(self, topics: Iterable[str] | None) -> None:
        """What the encoder adds to the routes of ``topics`` (every topic: None) changed (S19, S52)."""
        if not self.tracking:
            return
        if topics is None:
            self._all_routes_invalidated = True
        else:
            self._invalidated.update(topics)

    def take(self, tables: RouteTables) -> TableChange | None:
        """What changed in ``tables`` since the last call, as a replica needs it
        (:func:`apply_change`); None when nothing a replica holds changed (a heartbeat, an unchanged
        re-registration). Requires :attr:`tracking`."""
        seen_by_reads = bool(
            self._dirty_records
            or self._dirty_brokers
            or self._dirty_addrs
            or self._cluster_log
            or self._dirty_mappings
            or self._index_log
            or self._invalidated
            or self._all_routes_invalidated
            or self._taken_revision != tables.route_revision
        )
        if not (seen_by_reads or self._dirty_bodies):
            return None
        change = TableChange(
            route_revision=tables.route_revision,
            index_log=self._index_log,
            invalidated=list(self._invalidated),
            all_routes=self._all_routes_invalidated,
            seen_by_reads=seen_by_reads,
        )
        self._taken_revision = tables.route_revision
        self._all_routes_invalidated = False
        topics = list(self._dirty_records)
        records = list(map(tables.topic_queue_nums.get, topics))
        if None in records:
            change.removed_topics = [topic for topic, record in zip(topics, records, strict=True) if record is None]
            change.records = {topic: record for topic, record in zip(topics, records, strict=True) if record}
        else:
            change.records = dict(zip(topics, records, strict=True))  # type: ignore[arg-type]
        for broker_name in self._dirty_brokers:
            broker_data = tables.broker_addr_table.get(broker_name)
            change.broker_datas[broker_name] = broker_data.copy() if broker_data is not None else None
        for addr in self._dirty_addrs:
            servers = tables.filter_server_table.get(addr)
            change.filter_servers[addr] = list(servers) if servers else None
        change.cluster_log = self._cluster_log
        for topic in self._dirty_mappings:
            mappings = tables.topic_queue_mapping_info_table.get(topic)
            change.mappings[topic] = dict(mappings) if mappings else None
        change.registered_bodies = {addr: tables.registered_bodies.get(addr) for addr in self._dirty_bodies}
        self._dirty_bodies = set()
        self._dirty_records = set()
        self._dirty_brokers = set()
        self._dirty_addrs = set()
        self._cluster_log = []
        self._dirty_mappings = set()
        self._index_log = []
        self._invalidated = set()
        return change


def replica_state(tables: RouteTables) -> TableChange:
    """Everything a replica holds, as one change that an empty table applies
    (:func:`apply_change`): what a serving process starts from."""
    state = _all_but_topics(tables)
    state.records = dict(tables.topic_queue_nums)
    state.index_log = [(name, list(topics), True) for name, topics in tables.topics_by_broker_name.items()]
    return state


def _all_but_topics(tables: RouteTables) -> TableChange:
    """A replica's state without the topic records and the topic index (copies): the BrokerData,
    filter servers, clusters, static-topic mappings and which body each broker registered."""
    return TableChange(
        route_revision=tables.route_revision,
        broker_datas={name: data.copy() for name, data in tables.broker_addr_table.items()},
        filter_servers={addr: list(servers) for addr, servers in tables.filter_server_table.items()},
        clusters={cluster: set(names) for cluster, names in tables.cluster_addr_table.items()},
        mappings={topic: dict(m) for topic, m in tables.topic_queue_mapping_info_table.items()},
        registered_bodies=dict(tables.registered_bodies),
    )


def replica_state_pieces(tables: RouteTables, piece_topics: int) -> Iterator[TableChange]:
    """Everything a replica holds, as :func:`replica_state` has it now, in pieces of at most
    ``piece_topics`` topic records (and as many topic index entries) that an empty table applies
    one after the other (:func:`apply_change`). The table's references are copied now; each piece
    is made, and pickled by its sender, only when asked for, so a route-table process sends a
    very large table over several event-loop turns and writes go on in between (issue 39: one
    950,000-topic piece held writes 501 ms). The first piece also holds the rest
    (:func:`_all_but_topics`). Every change made after this call must reach
    the replica after the last piece (the pieces are the table as it is now). Raises ValueError
    when ``piece_topics`` < 1."""
    if piece_topics < 1:
        raise ValueError(f"piece_topics must be at least 1, not {piece_topics}")
    first = _all_but_topics(tables)
    # keys and values apart: no new (key, value) tuple per topic for the garbage collector to
    # count (with pairs, the longest write during a 500,000-topic join was 174-221 ms, 87-132 without)
    topics, records = list(tables.topic_queue_nums), list(tables.topic_queue_nums.values())
    index = [(name, list(names)) for name, names in tables.topics_by_broker_name.items()]
    return _pieces(first, topics, records, index, piece_topics)


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


def apply_change(tables: RouteTables, change: TableChange) -> frozenset[str] | None:
    """Apply a change taken from the route-table process's table (a serving process's replica):
    the same tables, the cached routes of every topic whose route changed dropped, the route
    revision the writer's, and the route listeners told. Readers see all of it or none of it
    (it runs between two requests, and cached routes are dropped with the change). Returns the topics
    whose route changed (None: every route)."""
    table = tables.topic_queue_nums
    table.update(change.records)
    for topic in change.removed_topics:
        table.pop(topic, None)
    index = tables.topics_by_broker_name
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
            tables.broker_addr_table.pop(broker_name, None)
        else:
            tables.broker_addr_table[broker_name] = broker_data
    for addr, servers in change.filter_servers.items():
        if servers is None:
            tables.filter_server_table.pop(addr, None)
        else:
            tables.filter_server_table[addr] = servers
    if change.clusters is not None:
        tables.cluster_addr_table = change.clusters
    clusters = tables.cluster_addr_table
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
            tables.topic_queue_mapping_info_table.pop(topic, None)
        else:
            tables.topic_queue_mapping_info_table[topic] = mappings
    for addr, body in change.registered_bodies.items():
        if body is None:
            tables.registered_bodies.pop(addr, None)
        else:
            tables.registered_bodies[addr] = body
    changed = change.records.keys() | change.removed_topics
    if change.mappings or change.invalidated:
        changed.update(change.mappings, change.invalidated)
    for broker_name in change.broker_datas:
        changed.update(index.get(broker_name, ()))
    if change.all_routes:
        tables.route_answers.clear()
    else:
        tables.route_answers.drop(changed)
        # the writer marks a broker name whose BrokerData or filter servers changed
        tables.route_answers.drop_layouts_of(change.broker_datas)
    tables.version += 1
    revision_moved = change.route_revision != tables.route_revision
    tables.route_revision = change.route_revision
    notice = None if change.all_routes else frozenset(changed)
    if revision_moved and (notice is None or notice):
        for listener in list(tables.route_listeners):
            listener(change.route_revision, notice)
    return notice
