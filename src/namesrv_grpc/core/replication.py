"""What the route-table process sends its serving processes: changes of the route table, the KV
config and the configuration, in the order they were made (docs/performance.md, "Processes").

The route-table process owns every table and makes every change (:mod:`namesrv_grpc.processes`).
Each serving process keeps a replica of what lookups read (the route table's topic records, the
BrokerData, clusters, filter servers and static-topic mappings, the KV config, the configuration)
and answers every read from it. A change is the *result* of writes (the records as they are now),
never the writes themselves: a replica applies it in a few bulk dict operations, whatever rule
produced it, and never decides anything.

Read-your-writes: the route-table process acknowledges a write only after every serving process
applied the change that holds it (:class:`~namesrv_grpc.processes.route_table_process.Publisher`),
so a client that got a write's answer reads it back from any serving process, as behind the Java
NameServer's lock. A change no read sees (which body a broker registered, kept for the doors:
:meth:`Change.seen_by_reads`) is published in order with the others, but no answer waits for it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from namesrv_grpc.config import NamesrvConfig
    from namesrv_grpc.core.model import BrokerData, MinBrokerIdChange, RemovedBroker, TopicQueueMappingInfo
    from namesrv_grpc.core.route_tables import RegisteredBody

    TopicQueues = tuple[tuple[str, ...], tuple[tuple[int, int, int, int], ...]]


@dataclass(slots=True)
class TableChange:
    """What calls changed in a :class:`~namesrv_grpc.core.route_table.RouteInfoManager` that its
    replicas hold (:meth:`~namesrv_grpc.core.route_table.RouteInfoManager.take_change`, applied by
    :meth:`~namesrv_grpc.core.route_table.RouteInfoManager.apply_change`).

    Every value is what the writer's table holds now (None = no entry any more); the live table
    (heartbeats, sessions) stays with the writer.
    """

    route_revision: int
    """The writer's route revision after the change (watchers see the writer's numbers)."""
    records: dict[str, TopicQueues] = field(default_factory=dict)
    """topic -> its QueueData record (``topic_queue_nums``)."""
    removed_topics: list[str] = field(default_factory=list)
    """Topics with no QueueData any more."""
    index_log: list[tuple[str, list[str], bool]] = field(default_factory=list)
    """``topics_by_broker_name`` changes in order: (broker name, topics, added or removed)."""
    broker_datas: dict[str, BrokerData | None] = field(default_factory=dict)
    """broker name -> BrokerData (a copy), for broker names whose BrokerData or filter servers changed."""
    filter_servers: dict[str, list[str] | None] = field(default_factory=dict)
    """broker address -> filter servers."""
    clusters: dict[str, set[str]] | None = None
    """The whole ``cluster_addr_table``: only in the change a serving process starts from
    (:meth:`~namesrv_grpc.core.route_table.RouteInfoManager.replica_state`)."""
    cluster_log: list[tuple[str, str, bool]] = field(default_factory=list)
    """``cluster_addr_table`` changes in order, applied after :attr:`clusters`: (cluster, broker
    name, joined or left); a cluster left by its last broker name goes (S03)."""
    mappings: dict[str, dict[str, TopicQueueMappingInfo] | None] = field(default_factory=dict)
    """topic -> static-topic mappings by broker name (S40)."""
    invalidated: list[str] = field(default_factory=list)
    """Topics whose route changed for what the encoder adds (an ORDER_TOPIC_CONFIG entry, S19)."""
    registered_bodies: dict[str, RegisteredBody | None] = field(default_factory=dict)
    """broker address -> what its last registration's body was
    (:attr:`~namesrv_grpc.core.route_tables.RouteTables.registered_bodies`)."""
    all_routes: bool = False
    """Every route changed (``orderMessageEnable`` or ``supportActingMaster`` was switched)."""
    seen_by_reads: bool = True
    """Whether anything a read answers changed; False: only :attr:`registered_bodies` did (a broker
    re-registered a body with a new DataVersion and the same topics), which no client sees, so no
    write's answer waits for the serving processes to apply it."""


@dataclass(slots=True)
class Change:
    """One message of the change stream: a sequence number, and whatever changed (each part None
    when it did not)."""

    seq: int
    """1, 2, 3, ... in the order the route-table process made the changes; a serving process acknowledges it."""
    table: TableChange | None = None
    kv: dict[tuple[str, str], str | None] | None = None
    """(namespace, key) -> value (None = deleted), or for a serving process that starts, the whole table."""
    config: NamesrvConfig | None = None
    """The configuration after ``UpdateNamesrvConfig`` (or at start)."""
    master_changes: list[tuple[str, str, str]] = field(default_factory=list)
    """(broker name, master address, master HA address) for gRPC broker sessions of slaves."""
    removals: list[RemovedBroker] = field(default_factory=list)
    """Brokers removed (for gRPC broker sessions of other runs of the same broker)."""
    notifications: list[MinBrokerIdChange] = field(default_factory=list)
    """``NOTIFY_MIN_BROKER_ID_CHANGE`` messages to send (S53, ``notifyMinBrokerIdChanged``): the
    first serving process sends them (the route-table process makes no connection of its own)."""

    def seen_by_reads(self) -> bool:
        """Whether a read may see any of it (read-your-writes waits only for such changes; a change of
        :attr:`TableChange.registered_bodies` alone is no read's)."""
        if self.table is None or self.table.seen_by_reads:
            return True
        return (
            self.kv is not None
            or self.config is not None
            or bool(self.master_changes or self.removals or self.notifications)
        )

    def empty(self) -> bool:
        """Nothing in it for a serving process."""
        return (
            self.table is None
            and self.kv is None
            and self.config is None
            and not self.master_changes
            and not self.removals
            and not self.notifications
        )
