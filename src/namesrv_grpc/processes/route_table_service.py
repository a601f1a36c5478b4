"""The route-table process's side of every write: the commands a serving process sends
(:mod:`namesrv_grpc.core.commands`) are applied here, one at a time, in the order they arrived, by
:meth:`RouteTableService.apply`, which picks the method for the command's type.

Each method runs on the route-table process's event loop and calls the
:class:`~namesrv_grpc.core.processor.NameServer` method of its name (KV writes: checked now,
written to the file with the others that arrive meanwhile, :mod:`.kv_group_commit`; the method
returns a coroutine that ends once the write is durable). Registration bodies are needed only when
they are not the same as the broker's last one; then they come decoded by their door
(:func:`~namesrv_grpc.core.commands.send_registration`), except compressed and very large ones,
which are decoded here, by the function both doors decode with
(:func:`~namesrv_grpc.runtime.policy.decode_registration`, over ``wire/``; this process imports no
module of a door).

Liveness sessions (S15) are remembered per serving process: when one exits, its sessions are
unbound but its brokers stay until their next registration or the S13 expiry: the connections
closed because our process died, not because the brokers did
(:meth:`RouteTableService.serving_process_exited`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from namesrv_grpc.core.commands import (
    AddWritePerm,
    BindSession,
    BrokerHeartbeat,
    Command,
    DeleteKVConfig,
    DeleteTopic,
    ExportSnapshot,
    LiveTable,
    MasterOf,
    PutKVConfig,
    QueryDataVersion,
    RegisterBroker,
    RegisterTopic,
    RegistrationReply,
    SessionHandedOver,
    SessionHeartbeat,
    SessionsEnded,
    UnregisterBroker,
    UpdateNamesrvConfig,
    WipeWritePerm,
)
from namesrv_grpc.core.model import BrokerLiveInfo, DataVersion, RegisterBrokerResult, RemovedBroker
from namesrv_grpc.core.processor import NameServer
from namesrv_grpc.processes.kv_group_commit import KVGroupCommit
from namesrv_grpc.runtime.policy import decode_registration

if TYPE_CHECKING:
    from collections.abc import Awaitable, Coroutine

    from namesrv_grpc.metrics import NamesrvMetrics
    from namesrv_grpc.snapshot import SnapshotInfo

log = logging.getLogger(__name__)


class RouteTableService:
    """The commands of :mod:`namesrv_grpc.core.commands`, applied to ``nameserver`` (the route-table
    process's one :class:`NameServer`). ``process`` names the serving process a command came from
    (for its sessions); it is given by the caller of :meth:`apply`."""

    def __init__(
        self,
        nameserver: NameServer,
        export_snapshot: Callable[[], Awaitable[SnapshotInfo]],
        metrics: NamesrvMetrics | None = None,
    ) -> None:
        """``metrics``: the route-table process's (KV group commit counts)."""
        self.ns = nameserver
        self._export_snapshot = export_snapshot
        self.kv = KVGroupCommit(nameserver, metrics)
        """KV writes: checked and staged at once, written together, answered once durable."""
        self._sessions: dict[int, dict[str, int]] = {}
        """serving process -> broker address -> the last session bound through it. Only a broker's
        last session can remove it (``RouteInfoManager.remove_if_session``), so an older one is
        forgotten when a newer one is bound: a remoting registration binds a new session each time
        (every 30 s a broker), and keeping every one grew this process by 38.8 MiB per 200,000
        registrations (measured), ~550 MB a day for 1,000 brokers.
        At most one entry per broker address and serving process."""
        self.session_losses = 0
        """Brokers removed because their session ended (all causes)."""
        self._methods: dict[type, Callable[[int, Any], Any]] = {
            RegisterBroker: self.register_broker,
            UnregisterBroker: self.unregister_broker,
            BrokerHeartbeat: self.broker_heartbeat,
            QueryDataVersion: self.query_data_version,
            PutKVConfig: self.put_kv_config,
            DeleteKVConfig: self.delete_kv_config,
            WipeWritePerm: self.wipe_write_perm,
            AddWritePerm: self.add_write_perm,
            DeleteTopic: self.delete_topic,
            RegisterTopic: self.register_topic,
            UpdateNamesrvConfig: self.update_namesrv_config,
            BindSession: self.bind_session,
            SessionHeartbeat: self.session_heartbeat,
            SessionsEnded: self.sessions_ended,
            SessionHandedOver: self.session_handed_over,
            MasterOf: self.master_of,
            LiveTable: self.live_table,
            ExportSnapshot: self.export_snapshot,
        }
        """Command type -> the method that applies it (one per command class)."""

    def method_for(self, command: object) -> Callable[[int, Any], Any] | None:
        """The method that applies ``command`` (called with the serving process and the command:
        its result, or a coroutine that ends with it: KV writes end once durable, a snapshot once
        written), or None when it is not a command."""
        return self._methods.get(type(command))

    def apply(self, process: int, command: Command[Any]) -> Any:
        """Apply ``command`` from serving process ``process`` (:meth:`method_for`). Raises what the
        NameServer raises, and LookupError for anything that is not a command."""
        method = self.method_for(command)
        if method is None:
            raise LookupError(f"not a route-table command: {type(command).__name__}")
        return method(process, command)

    # ------------------------------------------------------------------ brokers

    def register_broker(self, process: int, r: RegisterBroker) -> RegistrationReply:
        """REGISTER_BROKER / RegisterBroker: applied with the body the table holds when the
        fingerprint is the same as last time, else with the body the door decoded. Without a usable
        decoded body (none sent, or one whose skipped topic table the table no longer holds) nothing
        is applied and the reply asks for it (``body_needed``, with the topics fingerprint held)."""
        ns = self.ns
        identity = r.identity
        ns.check_registration(
            identity,
            ha_server_addr=r.ha_server_addr,
            heartbeat_timeout_millis=r.heartbeat_timeout_millis,
            zone_name=r.zone_name,
            instance_id=r.instance_id,
        )
        decoded = ns.same_body(identity, r.body_fingerprint)
        if decoded is None:
            ns.route_table.capacity.check_broker_room(identity.broker_name, identity.broker_addr)  # before any decoding
            known = ns.stored_topics_fingerprint(identity)
            decoded = r.decoded if r.raw is None else decode_registration(r.protocol, r.raw, ns.config, known)
            if decoded is None or (decoded.topic_configs is None and decoded.topics_fingerprint != known):
                return RegistrationReply(RegisterBrokerResult(), {}, body_needed=True, known_topics_fingerprint=known)
            if decoded.topic_configs is None and r.protocol == "remoting":  # only the DataVersion differs
                decoded = decoded._replace(filter_server_list=ns.route_table.filter_servers_of(identity.broker_addr))
        result, kv_table = ns.apply_registration(
            identity,
            decoded,
            ha_server_addr=r.ha_server_addr,
            heartbeat_timeout_millis=r.heartbeat_timeout_millis,
            body_fingerprint=r.body_fingerprint,
            enable_acting_master=r.enable_acting_master,
            zone_name=r.zone_name,
            instance_id=r.instance_id,
            protocol=r.protocol,
        )
        session_id = 0
        if r.bind_session:
            bound = self.bind_session(process, BindSession(identity, r.instance_id))
            session_id = bound[0] if bound is not None else 0
        return RegistrationReply(result, kv_table, session_id)

    def unregister_broker(self, process: int, c: UnregisterBroker) -> RemovedBroker | None:
        return self.ns.unregister_broker(**c.identity._asdict(), instance_id=c.instance_id)

    def broker_heartbeat(self, process: int, c: BrokerHeartbeat) -> None:
        self.ns.broker_heartbeat(**c.identity._asdict())

    def query_data_version(self, process: int, c: QueryDataVersion) -> tuple[bool, DataVersion | None]:
        return self.ns.query_data_version(**c.identity._asdict(), data_version=c.data_version)

    def wipe_write_perm(self, process: int, c: WipeWritePerm) -> int:
        return self.ns.wipe_write_perm_of_broker(c.broker_name)

    def add_write_perm(self, process: int, c: AddWritePerm) -> int:
        return self.ns.add_write_perm_of_broker(c.broker_name)

    # ------------------------------------------------------------------ topics, KV config, admin

    def delete_topic(self, process: int, c: DeleteTopic) -> None:
        self.ns.delete_topic(c.topic, c.cluster_name)

    def register_topic(self, process: int, c: RegisterTopic) -> None:
        self.ns.register_topic(c.topic, c.queue_datas)

    def put_kv_config(self, process: int, c: PutKVConfig) -> Coroutine[Any, Any, None]:
        """Checked and staged now (raises before anything changes); the coroutine ends once the
        write is durable and visible (group commit, :class:`KVGroupCommit`)."""
        return self.kv.put(c.namespace, c.key, c.value)

    def delete_kv_config(self, process: int, c: DeleteKVConfig) -> Coroutine[Any, Any, None]:
        """As :meth:`put_kv_config`."""
        return self.kv.delete(c.namespace, c.key)

    def update_namesrv_config(self, process: int, c: UpdateNamesrvConfig) -> None:
        self.ns.update_namesrv_config(c.changes)

    def live_table(self, process: int, c: LiveTable) -> tuple[int, list[tuple[str, BrokerLiveInfo]]]:
        return self.ns.route_table.live_table()

    def master_of(self, process: int, c: MasterOf) -> tuple[str, str]:
        return self.ns.route_table.master_of(c.broker_name)

    async def export_snapshot(self, process: int, c: ExportSnapshot) -> SnapshotInfo:
        return await self._export_snapshot()

    # ------------------------------------------------------------------ sessions (S15)

    def bind_session(self, process: int, c: BindSession) -> tuple[int, int] | None:
        bound = self.ns.bind_session(**c.identity._asdict(), instance_id=c.instance_id)
        if bound is not None:
            self._sessions.setdefault(process, {})[c.identity.broker_addr] = bound[0]
        return bound

    def session_heartbeat(self, process: int, c: SessionHeartbeat) -> bool:
        return self.ns.route_table.session_heartbeat(c.broker_addr, c.session_id)

    def sessions_ended(self, process: int, c: SessionsEnded) -> int:
        """S15 for sessions (broker address, session id) that ended together, e.g. a batch of a closed
        remoting connection's (at most :data:`~namesrv_grpc.core.commands.SESSION_ENDS_PER_CALL`):
        one write and one change for all of them, as RocketMQ batches them
        (``BatchUnregistrationService``). Returns how many brokers were removed."""
        removed = 0
        for broker_addr, session_id in c.sessions:
            self._forget_session(process, broker_addr, session_id)
            if self.ns.session_ended(broker_addr, session_id, c.cause) is not None:
                removed += 1
        self.session_losses += removed
        return removed

    def session_handed_over(self, process: int, c: SessionHandedOver) -> bool:
        """The session's holder stops but its broker does not (``OpenBrokerSession`` ``handover``):
        the session is unbound and the broker stays until its next registration or the S13 expiry.
        True when the session was the bound one."""
        self._forget_session(process, c.broker_addr, c.session_id)
        return self.ns.session_orphaned(c.broker_addr, c.session_id)

    def _forget_session(self, process: int, broker_addr: str, session_id: int) -> None:
        held = self._sessions.get(process)
        if held is not None and held.get(broker_addr) == session_id:
            del held[broker_addr]

    def held_sessions(self, process: int) -> int:
        """How many sessions bound through serving process ``process`` are remembered (at most one
        per broker address)."""
        return len(self._sessions.get(process, {}))

    def serving_process_exited(self, process: int) -> int:
        """A serving process exited, and its connections closed with it: its sessions are forgotten
        and unbound, and their brokers stay (no write, no change to any route) until their next
        registration, which binds a new session through a live process, or the S13 expiry. Not S15:
        the broker did not close anything, our process died (docs/rules.md). Returns how many brokers
        were kept so."""
        kept = 0
        for broker_addr, session_id in self._sessions.pop(process, {}).items():
            if self.ns.session_orphaned(broker_addr, session_id):
                kept += 1
        return kept


__all__ = ["RouteTableService"]
