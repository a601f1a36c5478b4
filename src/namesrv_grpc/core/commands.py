"""The commands: every write a door hands to the route-table process, as one frozen value each.

A serving process answers reads from its replica (:mod:`namesrv_grpc.core.replication`). A write
becomes one command here, built by the door from the request it decoded (the broker's four
identifying fields as a :class:`~namesrv_grpc.core.processor.BrokerIdentity`, the values checked as
far as the door can check them); the door sends it with :meth:`RouteTableWrites.send` and awaits its
result (:class:`Command` ``[result]``). The route-table process applies commands one at a time, in
arrival order, with one dispatch on the command's type
(:meth:`~namesrv_grpc.processes.route_table_service.RouteTableService.apply`), and answers once every
serving process holds the change (read-your-writes). A command raises what the
:class:`~namesrv_grpc.core.processor.NameServer` method it ends in raises.

Three commands are questions rather than writes: :class:`LiveTable`, :class:`MasterOf` and
:class:`ExportSnapshot` ask for what only the route-table process holds (liveness times, the master
a slave follows, a consistent snapshot).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

from namesrv_grpc.core.body import BrokerIdentity, DecodedBody
from namesrv_grpc.core.model import BrokerLiveInfo, DataVersion, QueueData, RegisterBrokerResult, RemovedBroker

if TYPE_CHECKING:
    from namesrv_grpc.snapshot import SnapshotInfo  # noqa: F401 (the string type argument of ExportSnapshot)

ResultT = TypeVar("ResultT")
ResultT_co = TypeVar("ResultT_co", covariant=True)


class Command(Generic[ResultT_co]):
    """A write (or a question) for the route-table process, whose answer is a ``ResultT_co``."""

    __slots__ = ()


class RouteTableWrites(Protocol):
    """What a door holds to change the table: :meth:`send` a command, get its result once every
    serving process applied what it changed. Raises what the NameServer raised, or
    :class:`~namesrv_grpc.core.errors.RouteTableUnavailableError` when the route-table process is
    gone."""

    async def send(self, command: Command[ResultT]) -> ResultT: ...


SESSION_ENDS_PER_CALL = 256
"""Brokers whose sessions ended together (a closed remoting connection's, an exited serving
process's) are removed this many per command (:class:`SessionsEnded`), one batch after the other:
when 64 connections with 20,000 broker sessions bound to them closed at once, one write each made
the next registration wait 477 ms behind them (36 ms in batches); a batch keeps the route-table
process's work per write to a few milliseconds, so other writes go between the batches."""


def session_end_batches(sessions: Sequence[tuple[str, int]]) -> Iterator[tuple[tuple[str, int], ...]]:
    """``sessions`` (broker address, session id) in order, :data:`SESSION_ENDS_PER_CALL` at a time."""
    for start in range(0, len(sessions), SESSION_ENDS_PER_CALL):
        yield tuple(sessions[start : start + SESSION_ENDS_PER_CALL])


# ---------------------------------------------------------------------------- brokers


@dataclass(frozen=True, slots=True)
class RegistrationReply:
    """The answer to a :class:`RegisterBroker`: the result (S10; ``result.changed`` false for a
    re-registration that only refreshed liveness, which is not audited), the ORDER_TOPIC_CONFIG table
    (S11), and the session bound (``bind_session``: its id; 0 when none)."""

    result: RegisterBrokerResult
    kv_table: dict[str, str]
    session_id: int = 0
    body_needed: bool = False
    """The registration was not applied: the table holds no body with its fingerprint for the broker
    (or the decoded body skipped a topic table the table no longer holds); send it again decoded."""
    known_topics_fingerprint: int | None = None
    """With ``body_needed``: the fingerprint of the topic table the table holds for the broker, for
    the decoder to skip an unchanged topic table (None: decode every topic)."""


@dataclass(frozen=True, slots=True)
class RegisterBroker(Command[RegistrationReply]):
    """REGISTER_BROKER / RegisterBroker (S01-S12, S50-S53): the header fields, the fingerprint of
    the body as the door verified its checksum (S01), and the body as the door decoded it
    (:data:`BodyDecoder`), or None at first: a broker's periodic registration carries the same body
    as last time (up to megabytes of topics), which need not be decoded anywhere
    (:func:`send_registration`)."""

    protocol: str
    """"remoting" or "grpc": the door it came through (``RegistrationProtocol`` in
    ``GetBrokerLiveTable``)."""
    identity: BrokerIdentity
    ha_server_addr: str
    heartbeat_timeout_millis: int
    body_fingerprint: tuple[int, int, bool]
    """(checksum as verified, length, compressed): the same bytes as last time are not decoded again."""
    decoded: DecodedBody | None = None
    """The body, decoded by the door; None: applied only when the table holds a body with
    ``body_fingerprint`` for the broker, else answered with :attr:`RegistrationReply.body_needed`.
    A remoting body decoded without its topics (``topic_configs`` None) leaves its filter servers
    empty: the table keeps the ones it holds (the topics fingerprint covers them)."""
    enable_acting_master: bool | None = None
    zone_name: str = ""
    instance_id: str = ""
    bind_session: bool = False
    """Remoting: bind a liveness session (S15) to the registering connection in the same step."""
    raw: RawBody | None = None
    """The body as it arrived, for the route-table process to decode: the door leaves a compressed or
    very large body to it (:func:`~namesrv_grpc.runtime.policy.decoded_by_door`)."""


@dataclass(frozen=True, slots=True)
class RawBody:
    """A registration body as it arrived, decoded by the route-table process
    (:meth:`~namesrv_grpc.processes.route_table_service.RouteTableService.register_broker`)."""

    body: bytes
    compressed: bool
    rocketmq5: bool = True
    """Remoting: the request's version is at least RocketMQ 5.0 (its body may carry static-topic
    mappings, S40)."""


BodyDecoder = Callable[[int | None], Awaitable[DecodedBody]]
"""The door's decoder of one registration's body (in its wire format, within
``registerBodyMaxInflatedSize`` and ``registerBodyMaxTopics``), given the fingerprint of the topic
table the route table holds for the broker: when the body's topic table has it, only the rest is
decoded (``topic_configs`` None). Raises MalformedBodyError, LimitExceededError, InvalidFieldError."""


async def send_registration(
    writes: RouteTableWrites,
    command: RegisterBroker,
    decode: BodyDecoder,
    raw: RawBody | None = None,
    held: tuple[tuple[int, int, bool] | None, int | None] | None = None,
) -> RegistrationReply:
    """Register a broker the way both doors do. ``held`` is what the serving process's replica
    says the broker's last registration carried (``(body fingerprint, topics fingerprint)``,
    :meth:`~namesrv_grpc.core.route_tables.RouteTables.registered_body`; None: nothing).

    - The same body as held (a periodic registration), or a broker the replica does not know: sent
      without the body (``command.decoded`` None), which is all the route-table process needs for
      the first, and lets it refuse the second before anything is decoded (``routeTableMaxBrokers``:
      a flood of new brokers costs no decoding).
    - A registered broker's new body (a new DataVersion): decoded at once, on the serving process's
      cores, skipping the topic table the route table holds when the body's has its fingerprint,
      and sent with it (one trip to the route-table process, not two).
    - When the route-table process asks for the body (``body_needed``: a new broker, or the replica
      was behind, or the topic table skipped is not held any more), the body is decoded (in full the
      second time) and sent. At most two decodes.

    A body given as ``raw`` (compressed or very large) is sent as it is instead of decoded, for the
    route-table process to decode. Raises what the route-table process or the decoder raises."""
    if held is None or held[0] == command.body_fingerprint:
        reply = await writes.send(command)
        if not reply.body_needed:
            return reply
        known = reply.known_topics_fingerprint
    else:
        known = held[1]
    if raw is not None:
        return await writes.send(dataclasses.replace(command, raw=raw))
    reply = await writes.send(dataclasses.replace(command, decoded=await decode(known)))
    if reply.body_needed and known is not None:
        reply = await writes.send(dataclasses.replace(command, decoded=await decode(None)))
    return reply


@dataclass(frozen=True, slots=True)
class UnregisterBroker(Command[RemovedBroker | None]):
    """UNREGISTER_BROKER / UnregisterBroker (S16, S17): the broker removed, or None when it was not
    registered (with ``instance_id``: when another instance holds the address now)."""

    identity: BrokerIdentity
    instance_id: str = ""


@dataclass(frozen=True, slots=True)
class BrokerHeartbeat(Command[None]):
    """BROKER_HEARTBEAT / BrokerHeartbeat (S14): the broker's liveness refreshed."""

    identity: BrokerIdentity


@dataclass(frozen=True, slots=True)
class QueryDataVersion(Command[tuple[bool, DataVersion | None]]):
    """QUERY_DATA_VERSION / QueryDataVersion (S20): (changed, the DataVersion held); the
    broker's liveness is refreshed when it is unchanged."""

    identity: BrokerIdentity
    data_version: DataVersion


@dataclass(frozen=True, slots=True)
class WipeWritePerm(Command[int]):
    """WIPE_WRITE_PERM_OF_BROKER (S23): how many queues lost their write permission."""

    broker_name: str


@dataclass(frozen=True, slots=True)
class AddWritePerm(Command[int]):
    """ADD_WRITE_PERM_OF_BROKER (S23): how many queues got their write permission back."""

    broker_name: str


# ---------------------------------------------------------------------------- topics, KV, config


@dataclass(frozen=True, slots=True)
class DeleteTopic(Command[None]):
    """DELETE_TOPIC_IN_NAMESRV (S25): the topic's queues on ``cluster_name``'s brokers (every broker when
    empty) removed."""

    topic: str
    cluster_name: str


@dataclass(frozen=True, slots=True)
class RegisterTopic(Command[None]):
    """REGISTER_TOPIC_IN_NAMESRV (S25): the topic's QueueData set as given."""

    topic: str
    queue_datas: tuple[QueueData, ...]


@dataclass(frozen=True, slots=True)
class PutKVConfig(Command[None]):
    """PUT_KV_CONFIG / PutKVConfig (S21): answered once the KV file holds it."""

    namespace: str
    key: str
    value: str


@dataclass(frozen=True, slots=True)
class DeleteKVConfig(Command[None]):
    """DELETE_KV_CONFIG / DeleteKVConfig (S21): answered once the KV file no longer holds it."""

    namespace: str
    key: str


@dataclass(frozen=True, slots=True)
class UpdateNamesrvConfig(Command[None]):
    """UPDATE_NAMESRV_CONFIG (S26): RocketMQ key -> new value, all applied or none."""

    changes: dict[str, str] = field(default_factory=dict)


# ---------------------------------------------------------------------------- liveness sessions (S15)


@dataclass(frozen=True, slots=True)
class BindSession(Command[tuple[int, int] | None]):
    """A broker session's hello: (session id, heartbeat timeout ms), or None when the broker is not
    registered as it says."""

    identity: BrokerIdentity
    instance_id: str


@dataclass(frozen=True, slots=True)
class SessionHeartbeat(Command[bool]):
    """A session's heartbeat: False when the session no longer holds its broker."""

    broker_addr: str
    session_id: int


@dataclass(frozen=True, slots=True)
class SessionsEnded(Command[int]):
    """S15: sessions (broker address, session id) that ended together, at most
    :data:`SESSION_ENDS_PER_CALL`: how many brokers were removed."""

    sessions: tuple[tuple[str, int], ...]
    cause: str


@dataclass(frozen=True, slots=True)
class SessionHandedOver(Command[bool]):
    """A session's holder stops but its broker does not: True when it was the bound session."""

    broker_addr: str
    session_id: int


# ---------------------------------------------------------------------------- questions


@dataclass(frozen=True, slots=True)
class MasterOf(Command[tuple[str, str]]):
    """(master address, HA address) of ``broker_name``; empty strings when it has no master."""

    broker_name: str


@dataclass(frozen=True, slots=True)
class LiveTable(Command[tuple[int, list[tuple[str, BrokerLiveInfo]]]]):
    """(now ms, [(broker address, its liveness)]): the liveness times only the route-table process
    holds."""


@dataclass(frozen=True, slots=True)
class ExportSnapshot(Command["SnapshotInfo"]):
    """Write a route snapshot now (ExportRouteSnapshot): where and what was written."""
