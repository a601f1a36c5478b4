"""The writes: every request that changes state, as the doors hand it to the route-table process.

A serving process answers reads from its replica (:mod:`namesrv_grpc.core.replication`) and hands
every write to the route-table process as it arrived, through a :class:`RouteTableWrites`
(:class:`~namesrv_grpc.processes.route_table_client.RouteTableClient`); the route-table process
applies them one at a time, in arrival order
(:class:`~namesrv_grpc.processes.route_table_service.RouteTableService`), and answers once every
serving process holds the change (read-your-writes). The method names are the
:class:`~namesrv_grpc.core.processor.NameServer` methods they end in, and raise the same errors.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from namesrv_grpc.core.model import BrokerLiveInfo, DataVersion, QueueData, RegisterBrokerResult, RemovedBroker
from namesrv_grpc.core.processor import BrokerIdentity

if TYPE_CHECKING:
    from namesrv_grpc.snapshot import SnapshotInfo

SESSION_ENDS_PER_CALL = 256
"""Brokers whose sessions ended together (a closed remoting connection's, an exited serving
process's) are removed this many per write (:meth:`RouteTableWrites.sessions_ended`), one batch after
the other: when 64 connections with 20,000 broker sessions bound to them closed at once, one write
each made the next registration wait 477 ms behind them (36 ms in batches); a batch keeps the
route-table process's work per write to a few milliseconds, so other writes go between the
batches."""


def session_end_batches(sessions: Sequence[tuple[str, int]]) -> Iterator[Sequence[tuple[str, int]]]:
    """``sessions`` (broker address, session id) in order, :data:`SESSION_ENDS_PER_CALL` at a time."""
    for start in range(0, len(sessions), SESSION_ENDS_PER_CALL):
        yield sessions[start : start + SESSION_ENDS_PER_CALL]


@dataclass(frozen=True, slots=True)
class Registration:
    """A REGISTER_BROKER as its door received it: the header fields, and the body bytes as sent, with
    the checksum the door verified (S01) before handing it on. The route-table process decodes the
    body with its door's decoder (``door`` "remoting": :mod:`namesrv_grpc.remoting.register_body`,
    "grpc": :mod:`namesrv_grpc.grpc_api.register_body`), unless it is the same as last time."""

    door: str
    """"remoting" or "grpc"."""
    identity: BrokerIdentity
    ha_server_addr: str
    heartbeat_timeout_millis: int
    body: bytes
    compressed: bool
    body_fingerprint: tuple[int, int, bool]
    """(checksum as verified, length, compressed): the same bytes as last time are not decoded again."""
    enable_acting_master: bool | None = None
    zone_name: str = ""
    instance_id: str = ""
    request_version: int = 0
    """Remoting: the request's RocketMQ version (5.x bodies may carry static-topic mappings, S40)."""
    bind_session: bool = False
    """Remoting: bind a liveness session (S15) to the registering connection in the same step."""
    body_elided: bool = False
    """``body`` is left out (empty), ``body_fingerprint`` kept: applied only when the table holds a
    body with that fingerprint for the broker, else answered with
    :attr:`RegistrationReply.body_needed` (a serving process sends bodies of 64 KiB or more so at
    first, :mod:`namesrv_grpc.processes.route_table_client`)."""


@dataclass(frozen=True, slots=True)
class RegistrationReply:
    """The answer to a :class:`Registration`: the result (S10; ``result.changed`` false for a
    re-registration that only refreshed liveness, which is not audited), the ORDER_TOPIC_CONFIG table
    (S11), and the session bound (``bind_session``: its id; 0 when none)."""

    result: RegisterBrokerResult
    kv_table: dict[str, str]
    session_id: int = 0
    body_needed: bool = False
    """The registration was not applied: its body was elided (:attr:`Registration.body_elided`)
    and the table no longer holds a body with its fingerprint; send it again with the body."""


class RouteTableWrites(Protocol):
    """What a door may ask of the route-table process (each an awaitable; the errors of the
    :class:`~namesrv_grpc.core.processor.NameServer` method of the same name)."""

    async def register_broker(self, registration: Registration) -> RegistrationReply: ...

    async def unregister_broker(
        self, cluster_name: str, broker_name: str, broker_id: int, broker_addr: str, instance_id: str = ""
    ) -> RemovedBroker | None: ...

    async def broker_heartbeat(self, cluster_name: str, broker_name: str, broker_id: int, broker_addr: str) -> None: ...

    async def query_data_version(
        self, cluster_name: str, broker_name: str, broker_id: int, broker_addr: str, data_version: DataVersion
    ) -> tuple[bool, DataVersion | None]: ...

    async def put_kv_config(self, namespace: str, key: str, value: str) -> None: ...

    async def delete_kv_config(self, namespace: str, key: str) -> None: ...

    async def wipe_write_perm_of_broker(self, broker_name: str) -> int: ...

    async def add_write_perm_of_broker(self, broker_name: str) -> int: ...

    async def delete_topic(self, topic: str, cluster_name: str) -> None: ...

    async def register_topic(self, topic: str, queue_datas: Sequence[QueueData]) -> None: ...

    async def update_namesrv_config(self, changes: Mapping[str, str]) -> None: ...

    async def bind_session(
        self, cluster_name: str, broker_name: str, broker_id: int, broker_addr: str, instance_id: str
    ) -> tuple[int, int] | None: ...

    async def session_heartbeat(self, broker_addr: str, session_id: int) -> bool: ...

    async def session_ended(self, broker_addr: str, session_id: int, cause: str) -> bool: ...

    async def session_handed_over(self, broker_addr: str, session_id: int) -> bool: ...

    async def sessions_ended(self, sessions: Sequence[tuple[str, int]], cause: str) -> int: ...

    async def master_of(self, broker_name: str) -> tuple[str, str]: ...

    async def live_table(self) -> tuple[int, list[tuple[str, BrokerLiveInfo]]]: ...

    async def export_snapshot(self) -> SnapshotInfo: ...
