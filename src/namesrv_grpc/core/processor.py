"""What each write does: RocketMQ's ``DefaultRequestProcessor`` over the route table, the KV config
and the server's configuration, in the route-table process (the reads are
:mod:`namesrv_grpc.core.reader`'s, which this extends). The route-table process's service
(:mod:`namesrv_grpc.processes.route_table_service`) calls these methods for the commands the doors
send (:mod:`namesrv_grpc.core.commands`).

Every method validates its arguments first and raises a :class:`~namesrv_grpc.core.errors.NamesrvError`
before changing anything.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path

from namesrv_grpc.config import RESTART_KEYS, NamesrvConfig, apply_properties, persist_properties
from namesrv_grpc.core.body import BrokerIdentity, DecodedBody
from namesrv_grpc.core.errors import (
    ConfigKeyBlacklistedError,
    InvalidFieldError,
    LimitExceededError,
    PersistError,
)
from namesrv_grpc.core.kvconfig import KVBatch, KVConfigManager
from namesrv_grpc.core.model import (
    MASTER_ID,
    ORDER_TOPIC_CONFIG_NAMESPACE,
    DataVersion,
    MinBrokerIdChange,
    QueueData,
    RegisterBrokerResult,
    RemovedBroker,
    TopicQueueMappingInfo,
)
from namesrv_grpc.core.reader import NameServerReader
from namesrv_grpc.core.replication import Change
from namesrv_grpc.core.route_table import RouteInfoManager
from namesrv_grpc.core.validation import (
    require_addr,
    require_broker_id,
    require_heartbeat_timeout,
    require_max_utf8_bytes,
    require_name,
    require_no_lone_surrogate,
    require_non_negative,
    require_optional_name,
    require_perm,
    require_queue_nums,
    require_topic,
    safe_for_log,
)
from namesrv_grpc.runtime.properties import ConfigError

log = logging.getLogger(__name__)


def _require_broker(cluster_name: str, broker_name: str, broker_id: int, broker_addr: str) -> None:
    require_name("cluster_name", cluster_name)
    require_name("broker_name", broker_name)
    require_broker_id("broker_id", broker_id)
    require_addr("broker_addr", broker_addr)


def check_topic_queue_mappings(mappings: Mapping[str, TopicQueueMappingInfo], max_mappings: int) -> None:
    """S40: a registration's static-topic mappings are at most ``max_mappings``
    (``registerBodyMaxTopics``), keyed by topic names, each naming its broker (``bname``), with
    non-negative queue counts and ids. Raises InvalidFieldError (path under
    ``body.topic_queue_mapping_info_map``), LimitExceededError."""
    if len(mappings) > max_mappings:
        raise LimitExceededError(
            "registerBodyMaxTopics",
            f"body holds {len(mappings)} topic queue mappings, more than {max_mappings} (registerBodyMaxTopics)",
        )
    for topic, mapping in mappings.items():
        path = f"body.topic_queue_mapping_info_map[{topic[:80]!r}]"
        require_name(path, topic)
        require_name(f"{path}.bname", mapping.bname)
        require_optional_name(f"{path}.topic", mapping.topic)
        require_optional_name(f"{path}.scope", mapping.scope)
        require_non_negative(f"{path}.total_queues", mapping.total_queues)
        require_non_negative(f"{path}.epoch", mapping.epoch)
        for logic_id, physical_id in mapping.curr_id_map.items():
            if logic_id < 0 or physical_id < 0:
                raise InvalidFieldError(
                    f"{path}.curr_id_map", f"queue ids must not be negative, got {logic_id} -> {physical_id}"
                )


def check_filter_server_count(count: int, limit: int) -> None:
    """A registration carries at most ``limit`` filter-server addresses (``registerBodyMaxFilterServers``,
    default 64): every lookup of the broker's topics returns them all (S09, S18), so a long list
    multiplies every route's size. RocketMQ runs at most one filter server per broker host in
    practice and sets no limit. Raises LimitExceededError (checked before the addresses are)."""
    if count > limit:
        raise LimitExceededError(
            "registerBodyMaxFilterServers",
            f"body lists {count} filter servers, more than {limit} (registerBodyMaxFilterServers)",
        )


class NameServer(NameServerReader):
    """The writer: the reads of :class:`NameServerReader` plus every write, applied to the route table
    the route-table process holds; one per server (a test may hold one without processes)."""

    def __init__(
        self,
        config: NamesrvConfig,
        route_table: RouteInfoManager,
        kv_config: KVConfigManager,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        """``monotonic`` (seconds) times the warm-up window (``needWaitForService``)."""
        super().__init__(config, route_table, kv_config, monotonic)
        self._kv_changes: dict[tuple[str, str], str | None] = {}
        """KV writes since the last :meth:`take_change` (the route-table process's replicas)."""
        self._published_config = config
        self._master_changes: list[tuple[str, str, str]] = []
        self._removals: list[RemovedBroker] = []
        self._notifications: list[MinBrokerIdChange] = []
        self._seq = 0
        route_table.set_support_acting_master(config.support_acting_master)
        route_table.min_broker_id_listeners.append(self._on_min_broker_id_change)

    def _on_min_broker_id_change(self, change: MinBrokerIdChange) -> None:
        """S53: RocketMQ tells the brokers only with ``notifyMinBrokerIdChanged=true`` (default off)."""
        if not self.config.notify_min_broker_id_changed or not change.recipients:
            return
        log.info(
            "smallest broker id of %s is now %d (%s)%s; telling %s",
            change.broker_name,
            change.min_broker_id,
            change.min_broker_addr,
            f", {change.offline_broker_addr} left" if change.offline_broker_addr else "",
            ", ".join(change.recipients),
        )
        for send in self.min_broker_id_senders:
            send(change)

    def _notify_if_master_changed(self, broker_name: str, before: tuple[str, str]) -> None:
        after = self.route_table.master_of(broker_name)
        if after != before:
            for listener in self.master_listeners:
                listener(broker_name, *after)

    def _after_removals(self, removed: Iterable[RemovedBroker]) -> None:
        for broker in removed:
            for removal_listener in self.removal_listeners:
                removal_listener(broker)
            if broker.broker_id == MASTER_ID:
                for listener in self.master_listeners:
                    listener(broker.broker_name, *self.route_table.master_of(broker.broker_name))

    # ------------------------------------------------------------------ brokers

    def check_registration(
        self,
        identity: BrokerIdentity,
        *,
        ha_server_addr: str,
        heartbeat_timeout_millis: int,
        zone_name: str = "",
        instance_id: str = "",
    ) -> None:
        """The header fields of REGISTER_BROKER (S02), checked before its body is decoded. Raises
        InvalidFieldError."""
        _require_broker(*identity)
        require_addr("ha_server_addr", ha_server_addr, allow_empty=True)
        require_heartbeat_timeout("heartbeat_timeout_millis", heartbeat_timeout_millis)
        require_optional_name("zone_name", zone_name)
        require_optional_name("instance_id", instance_id)

    def same_body(self, identity: BrokerIdentity, body_fingerprint: tuple[int, int, bool]) -> DecodedBody | None:
        """When this broker's last registration carried the same body bytes (checksum, length,
        compressed), what decoding it would give the table again: the stored DataVersion, filter
        servers and topics fingerprint, with the topics known unchanged (S06, S07, S09). None when
        the body must be decoded."""
        same = self.route_table.same_body_registered(**identity._asdict(), fingerprint=body_fingerprint)
        return DecodedBody(None, *same) if same is not None else None

    def stored_topics_fingerprint(self, identity: BrokerIdentity) -> int | None:
        """The fingerprint of the topic table this broker's last registration left in the table
        (the doors' decoders skip decoding an unchanged table), or None."""
        return self.route_table.stored_topics_fingerprint(**identity._asdict())

    def apply_registration(
        self,
        identity: BrokerIdentity,
        decoded: DecodedBody,
        *,
        ha_server_addr: str,
        heartbeat_timeout_millis: int,
        body_fingerprint: tuple[int, int, bool],
        enable_acting_master: bool | None = None,
        zone_name: str = "",
        instance_id: str = "",
        protocol: str = "remoting",
    ) -> tuple[RegisterBrokerResult, dict[str, str]]:
        """REGISTER_BROKER after the door checked the body's checksum (S01: CRC32C over gRPC, CRC32
        over remoting) and decoded it (or found it the same as last time, :meth:`same_body`): S02-S12.

        ``protocol`` ("grpc" or "remoting", the front door) is recorded for the liveness view
        (``GetBrokerLiveTable``). A registration that takes the broker back from another run of it
        (two agents for one broker) is logged as a WARNING and named in the result
        (``conflicting_instance_id``).

        ``enable_acting_master`` None = the broker did not say (a broker older than RocketMQ 5.x; over
        gRPC, ``false``, which proto3 cannot tell from absent): the acting-master rules S50-S53 leave
        it alone. ``True``/``False`` = a 5.x broker (``RegisterBrokerRequestHeader.enableActingMaster``).

        ``body_fingerprint`` identifies the body bytes as sent (checksum, length, compressed), kept
        for :meth:`same_body`. Returns the registration result (S10) and the ORDER_TOPIC_CONFIG table
        (S11). Raises InvalidFieldError, StaleBrokerStateError, RegistrationRefusedError (S42: a
        broker's first registration over remoting carries exactly one topic), LimitExceededError
        (more than ``registerBodyMaxFilterServers`` filter servers); nothing changes when it raises.

        RocketMQ 5.x: ``zone_name`` replaces the broker name's zone, "" clears it (S39); the body's
        static-topic mappings are checked (:func:`check_topic_queue_mappings`) and kept (S40).
        """
        self.check_registration(
            identity,
            ha_server_addr=ha_server_addr,
            heartbeat_timeout_millis=heartbeat_timeout_millis,
            zone_name=zone_name,
            instance_id=instance_id,
        )
        kv_table = self._order_topic_config_for_reply()
        self._checked(decoded)
        master_before = self.route_table.master_of(identity.broker_name)
        result = self.route_table.register_broker(
            **identity._asdict(),
            ha_server_addr=ha_server_addr,
            data_version=decoded.data_version,
            topic_configs=decoded.topic_configs,
            filter_server_list=decoded.filter_server_list,
            heartbeat_timeout_millis=heartbeat_timeout_millis,
            zone_name=zone_name,
            enable_acting_master=enable_acting_master,
            instance_id=instance_id,
            body_fingerprint=body_fingerprint,
            topics_fingerprint=decoded.topics_fingerprint,
            protocol=protocol,
            topic_queue_mappings=decoded.topic_queue_mappings,
            # S42: RocketMQ's remoting protocol carries topic-increment registrations (a Java
            # broker's registerSingleTopicAll sends REGISTER_BROKER with one topic); a gRPC body is
            # always the broker's whole table (RegisterBrokerBody, CONTRACT.md): only remoting's.
            refuse_single_topic_first=protocol == "remoting",
        )
        if result.conflicting_instance_id:
            log.warning(
                "registration conflict: broker %s/%s id %d at %s is registered alternately by two runs "
                "(instance %s took it back from instance %s); run one agent per broker",
                *identity,
                instance_id,
                result.conflicting_instance_id,
            )
        self._notify_if_master_changed(identity.broker_name, master_before)
        return result, kv_table

    def _checked(self, decoded: DecodedBody) -> DecodedBody:
        """The decoded body's filter servers (``registerBodyMaxFilterServers``, addresses) and
        static-topic mappings checked. Raises LimitExceededError, InvalidFieldError."""
        check_filter_server_count(len(decoded.filter_server_list), self.config.register_body_max_filter_servers)
        for index, addr in enumerate(decoded.filter_server_list):
            require_addr(f"body.filter_server_list[{index}]", addr)
        if decoded.topic_queue_mappings:
            check_topic_queue_mappings(decoded.topic_queue_mappings, self.config.register_body_max_topics)
        return decoded

    def _order_topic_config_for_reply(self) -> dict[str, str]:
        """S11: the ORDER_TOPIC_CONFIG table a registration reply carries, checked before the
        registration is applied to fit ``kvConfigMaxTotalSize`` (2 MiB by default, well within what
        a default gRPC client receives) and ``grpcMaxMessageSize``. KV writes keep the table within
        the limit; this catches a larger file written by hand. Raises LimitExceededError."""
        table = self.kv_config.list_namespace(ORDER_TOPIC_CONFIG_NAMESPACE)
        config = self.config
        limit = min(config.kv_config_max_total_size, config.grpc_max_message_size - 64 * 1024)
        size = sum(len(k.encode()) + len(v.encode()) for k, v in table.items())
        if size > limit:
            raise LimitExceededError(
                "kvConfigMaxTotalSize",
                f"the ORDER_TOPIC_CONFIG table ({size} bytes) is larger than a registration reply may carry "
                f"({limit} bytes, kvConfigMaxTotalSize / grpcMaxMessageSize); delete some of its keys",
            )
        return table

    def unregister_broker(
        self, *, cluster_name: str, broker_name: str, broker_id: int, broker_addr: str, instance_id: str = ""
    ) -> RemovedBroker | None:
        """UNREGISTER_BROKER (S16, S17); with ``instance_id``, another run's registration stays.
        Raises InvalidFieldError."""
        _require_broker(cluster_name, broker_name, broker_id, broker_addr)
        removed = self.route_table.unregister_broker(
            cluster_name=cluster_name,
            broker_name=broker_name,
            broker_id=broker_id,
            broker_addr=broker_addr,
            instance_id=instance_id,
        )
        if removed is not None:
            log.info("unregistered broker %s (%s/%s id %d)", broker_addr, cluster_name, broker_name, broker_id)
            self._after_removals([removed])
        return removed

    def broker_heartbeat(self, *, cluster_name: str, broker_name: str, broker_id: int, broker_addr: str) -> None:
        """BROKER_HEARTBEAT (S14). Raises InvalidFieldError, BrokerNotRegisteredError."""
        _require_broker(cluster_name, broker_name, broker_id, broker_addr)
        self.route_table.heartbeat(
            cluster_name=cluster_name, broker_name=broker_name, broker_id=broker_id, broker_addr=broker_addr
        )

    def query_data_version(
        self,
        *,
        cluster_name: str,
        broker_name: str,
        broker_id: int,
        broker_addr: str,
        data_version: DataVersion,
    ) -> tuple[bool, DataVersion | None]:
        """QUERY_DATA_VERSION (S20): ``(changed, stored version or None)``. Raises InvalidFieldError."""
        _require_broker(cluster_name, broker_name, broker_id, broker_addr)
        return self.route_table.query_data_version(
            cluster_name=cluster_name,
            broker_name=broker_name,
            broker_id=broker_id,
            broker_addr=broker_addr,
            data_version=data_version,
        )

    def scan_not_active_broker(self) -> list[RemovedBroker]:
        """S13: remove expired brokers; log each one."""
        removed = self.route_table.scan_not_active_broker()
        for broker in removed:
            log.warning(
                "broker %s (%s/%s id %d) expired: no heartbeat within its timeout",
                broker.broker_addr,
                broker.cluster,
                broker.broker_name,
                broker.broker_id,
            )
        self._after_removals(removed)
        return removed

    # ------------------------------------------------------------------ sessions (S15)

    def bind_session(
        self, *, cluster_name: str, broker_name: str, broker_id: int, broker_addr: str, instance_id: str
    ) -> tuple[int, int] | None:
        """A session's hello: ``(session id, heartbeat timeout ms)``, or None when the broker must
        register first. Raises InvalidFieldError."""
        _require_broker(cluster_name, broker_name, broker_id, broker_addr)
        return self.route_table.bind_session(
            cluster_name=cluster_name,
            broker_name=broker_name,
            broker_id=broker_id,
            broker_addr=broker_addr,
            instance_id=instance_id,
        )

    def session_orphaned(self, broker_addr: str, session_id: int) -> bool:
        """The session ended because the serving process holding it died, not the broker: the broker
        stays until its next registration or the S13 expiry (docs/rules.md, "A serving process that
        dies"). True when the session was still bound."""
        return self.route_table.unbind_session(broker_addr, session_id)

    def session_ended(self, broker_addr: str, session_id: int, cause: str = "session ended") -> RemovedBroker | None:
        """S15: the session's stream (or the remoting connection the broker registered over) ended;
        remove the broker if the session was still bound. ``cause`` goes into the log line."""
        removed = self.route_table.remove_if_session(broker_addr, session_id, cause)
        if removed is not None:
            log.warning(
                "broker %s (%s/%s id %d) removed: its %s",
                broker_addr,
                removed.cluster,
                removed.broker_name,
                removed.broker_id,
                cause,
            )
            self._after_removals([removed])
        return removed

    # ------------------------------------------------------------------ KV config (S21)

    def put_kv_config(self, namespace: str, key: str, value: str) -> None:
        """PUT_KV_CONFIG, written to the file now: returns once it is durable (blocks on the disk).
        The route-table process stages it instead (:meth:`stage_kv_put`) and writes it with others
        (group commit). Raises InvalidFieldError, LimitExceededError, PersistError."""
        self.stage_kv_put(namespace, key, value)
        self.flush_kv()

    def stage_kv_put(self, namespace: str, key: str, value: str) -> None:
        """Check a PUT_KV_CONFIG and stage it for the next write of the KV file
        (:meth:`KVConfigManager.stage_put`); visible once :meth:`kv_committed` ran for its batch.
        The value is at most ``kvConfigMaxValueSize`` UTF-8 bytes and the whole table, counting every
        write staged or being written, at most ``kvConfigMaxTotalSize``. Raises InvalidFieldError,
        LimitExceededError; nothing is staged when it raises."""
        require_name("namespace", namespace)
        require_name("key", key)
        require_max_utf8_bytes("value", value, self.config.kv_config_max_value_size, "kvConfigMaxValueSize")
        for field, text in (("namespace", namespace), ("key", key), ("value", value)):
            require_no_lone_surrogate(field, text)
        self.kv_config.stage_put(namespace, key, value, max_total_bytes=self.config.kv_config_max_total_size)

    def delete_kv_config(self, namespace: str, key: str) -> None:
        """DELETE_KV_CONFIG, written to the file now (see :meth:`put_kv_config`). Raises
        InvalidFieldError, PersistError."""
        if self.stage_kv_delete(namespace, key):
            self.flush_kv()

    def stage_kv_delete(self, namespace: str, key: str) -> bool:
        """Check a DELETE_KV_CONFIG and stage it for the next write of the KV file; False when the
        key will be absent anyway (nothing staged). Raises InvalidFieldError."""
        return self.kv_config.stage_delete(require_name("namespace", namespace), require_name("key", key))

    def flush_kv(self) -> None:
        """Write the staged KV writes now and make them visible. Raises PersistError (nothing changes)."""
        batch = self.kv_config.flush()
        if batch is not None:
            self.kv_committed(batch)

    def kv_committed(self, batch: KVBatch) -> None:
        """A batch of KV writes is durable and visible here: note it for the replicas
        (:meth:`take_change`) and re-encode the routes whose ORDER_TOPIC_CONFIG entry changed (S19)."""
        self._kv_changes.update(batch.changes)
        order_topics = [key for namespace, key in batch.changes if namespace == ORDER_TOPIC_CONFIG_NAMESPACE]
        if order_topics:
            self.route_table.invalidate_routes(order_topics)

    # ------------------------------------------------------------------ admin (S23, S25, S26)

    def wipe_write_perm_of_broker(self, broker_name: str) -> int:
        """WIPE_WRITE_PERM_OF_BROKER (S23). Raises InvalidFieldError."""
        return self.route_table.wipe_write_perm_of_broker(require_name("broker_name", broker_name))

    def add_write_perm_of_broker(self, broker_name: str) -> int:
        """ADD_WRITE_PERM_OF_BROKER (S23). Raises InvalidFieldError."""
        return self.route_table.add_write_perm_of_broker(require_name("broker_name", broker_name))

    def delete_topic(self, topic: str, cluster_name: str) -> None:
        """DELETE_TOPIC_IN_NAMESRV (S25); ``cluster_name`` "" = everywhere. Raises InvalidFieldError."""
        require_name("topic", topic)
        if cluster_name:
            require_name("cluster_name", cluster_name)
        self.route_table.delete_topic(topic, cluster_name)

    def register_topic(self, topic: str, queue_datas: Iterable[QueueData]) -> None:
        """REGISTER_TOPIC_IN_NAMESRV (S25), all or nothing.

        Raises InvalidFieldError (empty list, bad numbers, a broker name twice),
        BrokerNameNotRegisteredError.
        """
        require_topic("topic", topic)
        queue_datas = list(queue_datas)
        if not queue_datas:
            raise InvalidFieldError("queue_datas", "must list at least one QueueData")
        seen: set[str] = set()
        for index, queue_data in enumerate(queue_datas):
            path = f"queue_datas[{index}]"
            require_name(f"{path}.broker_name", queue_data.broker_name)
            if queue_data.broker_name in seen:
                raise InvalidFieldError(f"{path}.broker_name", f"{queue_data.broker_name!r} is listed twice")
            seen.add(queue_data.broker_name)
            require_queue_nums(f"{path}.read_queue_nums", queue_data.read_queue_nums)
            require_queue_nums(f"{path}.write_queue_nums", queue_data.write_queue_nums)
            require_perm(f"{path}.perm", queue_data.perm)
            require_non_negative(f"{path}.topic_sys_flag", queue_data.topic_sys_flag)
        self.route_table.register_topic(topic, queue_datas)

    def update_namesrv_config(self, changes: Mapping[str, str]) -> None:
        """UPDATE_NAMESRV_CONFIG (S26), all or nothing; persisted to ``configStorePath``.

        Raises ConfigKeyBlacklistedError, InvalidFieldError (empty map, unknown key, bad value),
        PersistError. Keys in RESTART_KEYS are stored but take effect at the next start.
        """
        if not changes:
            raise InvalidFieldError("config", "must name at least one key")
        blacklisted = sorted(set(changes) & self.config.blacklisted_keys())
        if blacklisted:
            raise ConfigKeyBlacklistedError(
                f"config keys {', '.join(blacklisted)} are in configBlackList and cannot be changed at run time",
                {"keys": ",".join(blacklisted)},
            )
        try:
            new_config, _ = apply_properties(self.config, changes, "UpdateNamesrvConfig", strict=True)
        except ConfigError as exc:
            raise InvalidFieldError(f"config[{exc.key}]", exc.problem) from None
        try:
            persist_properties(new_config, Path(new_config.config_store_path))
        except OSError as exc:
            raise PersistError(f"cannot write {new_config.config_store_path}: {exc}") from None
        if new_config.order_message_enable != self.config.order_message_enable:
            self.route_table.invalidate_routes()
        self._use_config(new_config)
        self.route_table.set_support_acting_master(new_config.support_acting_master)
        later = sorted(set(changes) & RESTART_KEYS)
        log.info(
            "configuration updated: %s%s",
            safe_for_log(", ".join(f"{key}={value}" for key, value in changes.items()), 4096),
            f" ({', '.join(later)} at next start)" if later else "",
        )

    # ------------------------------------------------------------------ replication (processes)

    def track_changes(self) -> None:
        """Note every change from now on for :meth:`take_change` (the route-table process)."""
        self.route_table.track_changes()
        self.master_listeners.append(lambda name, addr, ha_addr: self._master_changes.append((name, addr, ha_addr)))
        self.removal_listeners.append(self._removals.append)
        self.min_broker_id_senders.append(self._notifications.append)  # sent by a serving process

    def take_change(self) -> Change | None:
        """Everything the serving processes' replicas need of what changed since the last call, as
        the next message of the change stream; None when nothing did (:mod:`namesrv_grpc.core.replication`)."""
        change = Change(0, self.route_table.take_change(), self._kv_changes or None)
        self._kv_changes = {}
        if self.config is not self._published_config:
            change.config = self._published_config = self.config
        change.master_changes, self._master_changes[:] = list(self._master_changes), []
        change.removals, self._removals[:] = list(self._removals), []
        change.notifications, self._notifications[:] = list(self._notifications), []
        if change.empty():
            return None
        self._seq += 1
        change.seq = self._seq
        return change

    def replica_state(self) -> Change:
        """Everything a serving process's replica holds, as one change its empty replica applies."""
        return Change(self._seq, self.route_table.replica_state(), self._kv_state(), self.config)

    def replica_state_pieces(self, piece_topics: int) -> Iterator[Change]:
        """:meth:`replica_state` as it is now, in pieces of at most ``piece_topics`` topics, each
        made when asked for (:meth:`RouteInfoManager.replica_state_pieces`): the first holds the KV
        config and the configuration too; an empty replica applies them in order. Every change taken
        after this call must reach the replica after the last piece. Raises ValueError when
        ``piece_topics`` < 1."""
        seq, kv, config = self._seq, self._kv_state(), self.config
        tables = self.route_table.replica_state_pieces(piece_topics)

        def pieces() -> Iterator[Change]:
            yield Change(seq, next(tables), kv, config)
            for table in tables:
                yield Change(seq, table)

        return pieces()

    def _kv_state(self) -> dict[tuple[str, str], str | None]:
        return {
            (namespace, key): value
            for namespace, entries in self.kv_config.snapshot().items()
            for key, value in entries.items()
        }
