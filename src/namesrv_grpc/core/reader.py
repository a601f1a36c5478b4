"""What a serving process holds: the replica of the route table, the KV config and the server's
configuration, and every read a door answers from it (RocketMQ's ``DefaultRequestProcessor``, its
lookups). The route-table process's :class:`~namesrv_grpc.core.processor.NameServer` is this reader
plus the writes; a serving process holds a reader only, so a door cannot write past the route-table
process (mypy checks the doors' ``NameServerReader`` type), and its replica changes only by
:meth:`NameServerReader.apply_change`, the change stream's next message.

Every lookup validates its arguments first and raises a :class:`~namesrv_grpc.core.errors.NamesrvError`.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Hashable, Sequence
from typing import TypeVar, cast

from namesrv_grpc.config import NamesrvConfig
from namesrv_grpc.core.body import BrokerIdentity
from namesrv_grpc.core.capacity import RouteTableLimits
from namesrv_grpc.core.errors import ServiceWarmingUpError, TopicListDisabledError, TopicRouteNotFoundError
from namesrv_grpc.core.kvconfig import KVConfigManager
from namesrv_grpc.core.model import (
    ORDER_TOPIC_CONFIG_NAMESPACE,
    ClusterInfo,
    MinBrokerIdChange,
    RemovedBroker,
    TopicRouteData,
)
from namesrv_grpc.core.replication import Change
from namesrv_grpc.core.route_answers import PER_CHANGE, PerChangeAnswer, PerChangeKey
from namesrv_grpc.core.route_table import RouteInfoManager
from namesrv_grpc.core.route_tables import RouteListener
from namesrv_grpc.core.route_watch import watched_topics
from namesrv_grpc.core.validation import require_name
from namesrv_grpc.core.zones import filter_route_by_zone, route_zone_names, zone_key, zone_requested

T = TypeVar("T")

MinBrokerIdSender = Callable[[MinBrokerIdChange], None]
"""Sends ``NOTIFY_MIN_BROKER_ID_CHANGE`` to the change's recipients without blocking (the remoting
door's :class:`~namesrv_grpc.remoting.notifier.BrokerNotifier`); must not raise."""

MasterListener = Callable[[str, str, str], None]
"""Called with (broker name, master address, master HA address) when a broker name's live master
changes; both addresses are "" when it has none."""


def _always(topic: str) -> bool:
    """Every topic's answer may be shared by content (nothing per topic is added to it)."""
    return True


def _as_is(route: TopicRouteData) -> TopicRouteData:
    return route


class NameServerReader:
    """The reads of every request code, over one replica (or, in the route-table process, the table
    itself): one object per process, shared by both doors."""

    def __init__(
        self,
        config: NamesrvConfig,
        route_table: RouteInfoManager,
        kv_config: KVConfigManager,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        """``monotonic`` (seconds) times the warm-up window (``needWaitForService``)."""
        self._monotonic = monotonic
        self.started_at = monotonic()
        self.route_table = route_table
        self.kv_config = kv_config
        self.master_listeners: list[MasterListener] = []
        self.removal_listeners: list[Callable[[RemovedBroker], None]] = []
        """Called with every broker address removed (expiry, unregistration, session end)."""
        self.min_broker_id_senders: list[MinBrokerIdSender] = []
        """Given every MinBrokerIdChange while ``notifyMinBrokerIdChanged`` is on (S53)."""
        self._use_config(config)

    @property
    def route_revision(self) -> int:
        """The route revision (the writer's, in a replica): grows by one with every change of some
        topic's route (:class:`~namesrv_grpc.core.route_tables.RouteTables`)."""
        return self.route_table.route_revision

    def add_route_listener(self, listener: RouteListener) -> None:
        """Call ``listener(route revision, changed topics or None for all)`` after every route change,
        once the change is complete (in a replica: once the change stream's message is applied)."""
        self.route_table.route_listeners.append(listener)

    def _use_config(self, config: NamesrvConfig) -> None:
        """Take ``config`` and hand the route table its settings (limits, ``deleteTopicWithBrokerRegistration``)."""
        self.config = config
        self.route_table.delete_topic_with_broker_registration = config.delete_topic_with_broker_registration
        self.route_table.limits = RouteTableLimits.from_config(config)

    def pickup_topic_route(self, topic: str, zone_name: str = "") -> TopicRouteData:
        """GET_ROUTEINFO_BY_TOPIC (S18, S19; zone mode S39). Raises InvalidFieldError,
        TopicRouteNotFoundError, ServiceWarmingUpError (``needWaitForService``: for
        ``waitSecondsForService`` after start)."""
        return self.pickup_topic_route_encoded(topic, _as_is, zone_name)

    def pickup_topic_route_encoded(self, topic: str, encode: Callable[[TopicRouteData], T], zone_name: str = "") -> T:
        """:meth:`pickup_topic_route`, returning ``encode(route)`` cached per topic and per ``encode``
        by the route table (the gRPC servicer passes a protobuf encoder, the remoting handler a JSON
        one: a lookup costs a dict hit). ``encode`` must be a stable function (it keys the cache).
        ``zone_name`` not blank = the route filtered to that zone (S39, :mod:`namesrv_grpc.core.zones`).
        Same errors.

        As in RocketMQ, a lookup does not apply the topic rule (a name no broker could register is
        simply not found); it only bounds the name (255 characters, no control characters)."""
        require_name("topic", topic)
        if zone_requested(zone_name):
            require_name("zone_name", zone_name)
        self.check_serving()
        value = self.topic_route_encoded(topic, encode, zone_name)
        if value is None:
            raise TopicRouteNotFoundError(topic)
        return value

    def pickup_topic_routes_encoded(
        self, topics: Sequence[str], encode: Callable[[TopicRouteData], T], zone_name: str = ""
    ) -> list[tuple[str, T | None]]:
        """Many lookups in one call (``PickupTopicRoutes``; S18 per topic, zone mode S39 when
        ``zone_name`` is not blank): ``[(topic, encode(route) or None when it has no route)]`` in
        request order, duplicates answered once.

        Raises InvalidFieldError (empty list, more than ``routeWatchMaxTopics``, an invalid name as
        ``topics[i]``, an invalid ``zone_name``), ServiceWarmingUpError.
        """
        unique = watched_topics(topics, self.config.route_watch_max_topics)
        if zone_requested(zone_name):
            require_name("zone_name", zone_name)
        self.check_serving()
        return [(topic, self.topic_route_encoded(topic, encode, zone_name)) for topic in unique]

    def check_serving(self) -> None:
        """Raise ServiceWarmingUpError during the warm-up after start (``needWaitForService``: for
        ``waitSecondsForService`` s), so clients ask another NameServer."""
        if self.config.need_wait_for_service:
            remaining = self.config.wait_seconds_for_service - (self._monotonic() - self.started_at)
            if remaining > 0:
                raise ServiceWarmingUpError(
                    f"NameServer started {self.config.wait_seconds_for_service - remaining:.0f} s ago and waits "
                    f"{remaining:.0f} s more for brokers to register (needWaitForService); ask another NameServer",
                    {"retry_after_seconds": f"{remaining:.0f}"},
                )

    def topic_route_encoded(self, topic: str, encode: Callable[[TopicRouteData], T], zone_name: str = "") -> T | None:
        """``encode(route)`` of a topic's route with its order config (S19), cached per topic and per
        ``encode`` by the route table; None when it has no route. No checks: ``topic`` must be a valid
        name; ``encode`` a stable function (it keys the cache).

        ``zone_name`` not blank (S39): the route as a client of that zone sees it. Cached per topic,
        ``encode`` and :func:`~namesrv_grpc.core.zones.zone_key`, so whatever zone names clients
        send, a topic holds at most one filtered encoding per zone of its brokers, plus one."""
        order_conf_enabled = self.config.order_message_enable
        # The answer is the same for every topic of the same layout unless it carries an order
        # config of the topic's own (issue 41: found by content, see RouteInfoManager).
        shared = self._without_order_conf if order_conf_enabled else _always
        if zone_requested(zone_name):
            zone_names = self.route_table.pickup_topic_route_cached(topic, route_zone_names, shared=_always)
            if zone_names is None:
                return None
            key = zone_key(zone_names, zone_name)

            def build_in_zone(route: TopicRouteData) -> T:
                route = filter_route_by_zone(route, key)
                if order_conf_enabled:
                    order_conf = self.kv_config.get_or_none(ORDER_TOPIC_CONFIG_NAMESPACE, topic) or ""
                    route = dataclasses.replace(route, order_topic_conf=order_conf)
                return encode(route)

            return cast(
                "T | None",
                self.route_table.pickup_topic_route_cached(
                    topic, build_in_zone, key=(encode, "zone", key), shared=shared
                ),
            )
        build = encode
        if order_conf_enabled:

            def build(route: TopicRouteData) -> T:
                # KV changes of ORDER_TOPIC_CONFIG and toggling orderMessageEnable drop cached routes.
                order_conf = self.kv_config.get_or_none(ORDER_TOPIC_CONFIG_NAMESPACE, topic) or ""
                return encode(dataclasses.replace(route, order_topic_conf=order_conf))

        return cast("T | None", self.route_table.pickup_topic_route_cached(topic, build, key=encode, shared=shared))

    def _without_order_conf(self, topic: str) -> bool:
        """True when ``topic`` has no order configuration (S19): its answer adds nothing of its own."""
        return not self.kv_config.get_or_none(ORDER_TOPIC_CONFIG_NAMESPACE, topic)

    def answer_per_change(self, key: Hashable, build: Callable[[], T]) -> T:
        """``build()``, built once per change of the route table or the configuration and then
        returned as it is (issue 20: topic lists, cluster info and the configuration cost milliseconds
        to build for a thousand topics, and a client may ask thousands of times a second).

        ``key`` names the answer and its encoding (one door's bytes are not the other's). The
        answers are kept with the routes' (:mod:`namesrv_grpc.core.route_answers`, :data:`PER_CHANGE`),
        within the same ``routeCacheMaxBytes``. The route table's ``version`` is read before
        building, so a change made meanwhile only makes the next call build again."""
        answers = self.route_table.route_answers
        number, slot = answers.encoding(PER_CHANGE), PerChangeKey(key)
        version, config = self.route_table.version, self.config
        entry = answers.get(number, slot)
        if entry is not None and entry.version == version and entry.config is config:
            return cast("T", entry.value)
        value = build()
        answers.put(number, slot, PerChangeAnswer(version, config, value))
        return value

    def get_cluster_info(self) -> ClusterInfo:
        """GET_BROKER_CLUSTER_INFO (S22)."""
        return self.route_table.get_cluster_info()

    def get_broker_member_group(self, cluster_name: str, broker_name: str) -> dict[int, str]:
        """GET_BROKER_MEMBER_GROUP (RocketMQ 5.x): broker id -> address of ``broker_name``; {} when it
        has no BrokerData (the cluster name is only echoed, as in RocketMQ). Raises InvalidFieldError."""
        require_name("cluster_name", cluster_name)
        require_name("broker_name", broker_name)
        return self.route_table.broker_addrs_of(broker_name)

    def registered_as(self, broker_name: str, broker_id: int, broker_addr: str) -> bool:
        """Whether ``broker_addr`` holds ``broker_id`` of ``broker_name`` (its BrokerData, S05)."""
        return self.route_table.broker_addrs_of(broker_name).get(broker_id) == broker_addr

    def registered_body(self, identity: BrokerIdentity) -> tuple[tuple[int, int, bool] | None, int | None] | None:
        """``(body fingerprint, topics fingerprint)`` of the broker's last registration as this
        replica knows it, or None (:meth:`RouteTables.registered_body`): whether a registration's
        body must be decoded before it is sent."""
        return self.route_table.registered_body(**identity._asdict())

    def has_cluster(self, cluster_name: str) -> bool:
        """Whether a broker name of ``cluster_name`` is registered (S03)."""
        return cluster_name in self.route_table.cluster_addr_table

    def get_topics_by_cluster(self, cluster_name: str) -> list[str]:
        """GET_TOPICS_BY_CLUSTER (S24). Raises TopicListDisabledError (``enableTopicList=false``,
        S41), InvalidFieldError."""
        self.check_topic_list_enabled()
        require_name("cluster_name", cluster_name)
        return self.route_table.get_topics_by_cluster(cluster_name)

    def get_all_topic_list(self) -> list[str]:
        """GET_ALL_TOPIC_LIST_FROM_NAMESERVER (S24). Raises TopicListDisabledError when
        ``enableAllTopicList`` is false (S41: big clusters turn it off)."""
        self.check_all_topic_list_enabled()
        return self.route_table.get_all_topic_list()

    def get_system_topic_list(self) -> tuple[list[str], str]:
        """GET_SYSTEM_TOPIC_LIST_FROM_NS (S24); never disabled (S41)."""
        return self.route_table.get_system_topic_list()

    def get_unit_topic_list(self) -> list[str]:
        """GET_UNIT_TOPIC_LIST (S24). Raises TopicListDisabledError (``enableTopicList=false``, S41)."""
        self.check_topic_list_enabled()
        return self.route_table.get_unit_topic_list()

    def get_has_unit_sub_topic_list(self) -> list[str]:
        """GET_HAS_UNIT_SUB_TOPIC_LIST (S24). Raises TopicListDisabledError (S41)."""
        self.check_topic_list_enabled()
        return self.route_table.get_has_unit_sub_topic_list()

    def get_has_unit_sub_ununit_topic_list(self) -> list[str]:
        """GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST (S24). Raises TopicListDisabledError (S41)."""
        self.check_topic_list_enabled()
        return self.route_table.get_has_unit_sub_ununit_topic_list()

    def check_all_topic_list_enabled(self) -> None:
        """S41: raise TopicListDisabledError when ``enableAllTopicList`` is false (read at every
        request, changeable at run time); for doors that cache the list's encoding."""
        if not self.config.enable_all_topic_list:
            raise TopicListDisabledError(
                "the list of all topics is disabled on this NameServer (enableAllTopicList=false)",
                {"key": "enableAllTopicList"},
            )

    def check_topic_list_enabled(self) -> None:
        """S41: raise TopicListDisabledError when ``enableTopicList`` is false (read at every request,
        changeable at run time); for doors that cache the lists' encodings."""
        if not self.config.enable_topic_list:
            raise TopicListDisabledError(
                "topic lists are disabled on this NameServer (enableTopicList=false)", {"key": "enableTopicList"}
            )

    def get_kv_config(self, namespace: str, key: str) -> str:
        """GET_KV_CONFIG. Raises InvalidFieldError, KVConfigNotFoundError."""
        return self.kv_config.get(require_name("namespace", namespace), require_name("key", key))

    def get_kv_list_by_namespace(self, namespace: str) -> dict[str, str]:
        """GET_KVLIST_BY_NAMESPACE. Raises InvalidFieldError."""
        return self.kv_config.list_namespace(require_name("namespace", namespace))

    def get_namesrv_config(self) -> dict[str, str]:
        """GET_NAMESRV_CONFIG (S26): RocketMQ key -> value text."""
        return self.config.to_properties()

    def apply_change(self, change: Change) -> None:
        """A serving process: apply the next message of the route-table process's change stream to
        this replica (configuration and KV first, so routes re-encoded for watchers carry them)."""
        if change.config is not None:
            self._use_config(change.config)
            self.route_table.support_acting_master = change.config.support_acting_master
        if change.kv is not None:
            self.kv_config.apply(change.kv)
        if change.table is not None:
            self.route_table.apply_change(change.table)
        for name, addr, ha_addr in change.master_changes:
            for listener in self.master_listeners:
                listener(name, addr, ha_addr)
        for removed in change.removals:
            for removal_listener in self.removal_listeners:
                removal_listener(removed)
        for notification in change.notifications:  # already checked against notifyMinBrokerIdChanged
            for send in self.min_broker_id_senders:
                send(notification)
