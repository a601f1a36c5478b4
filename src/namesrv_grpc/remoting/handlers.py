"""Remoting request handlers: one method per RocketMQ request code, each a thin translation of the
request's ``extFields`` and body into the same read of :class:`~namesrv_grpc.core.reader.NameServerReader`
or the same command (:mod:`namesrv_grpc.core.commands`, applied by the route-table process's
:class:`~namesrv_grpc.core.processor.NameServer`) the gRPC servicer makes
(:mod:`namesrv_grpc.grpc_api.servicers`), and of the result into a response.
No rules live here; domain errors become response codes and remarks in :mod:`.errors`.

Request code -> handler -> NameServer method (rule)::

    PUT_KV_CONFIG 100                     put_kv_config            put_kv_config (S21)
    GET_KV_CONFIG 101                     get_kv_config            get_kv_config (S21)
    DELETE_KV_CONFIG 102                  delete_kv_config         delete_kv_config (S21)
    REGISTER_BROKER 103                   register_broker          apply_registration (S01-S12, S15)
    UNREGISTER_BROKER 104                 unregister_broker        unregister_broker (S16, S17)
    GET_ROUTEINFO_BY_TOPIC 105            get_routeinfo_by_topic   pickup_topic_route_encoded (S18, S19, S39)
    GET_BROKER_CLUSTER_INFO 106           get_broker_cluster_info  get_cluster_info (S22)
    WIPE_WRITE_PERM_OF_BROKER 205         wipe_write_perm_of_broker  wipe_write_perm_of_broker (S23)
    GET_ALL_TOPIC_LIST_FROM_NAMESERVER 206  get_all_topic_list     get_all_topic_list (S24, S41)
    DELETE_TOPIC_IN_NAMESRV 216           delete_topic             delete_topic (S25)
    REGISTER_TOPIC_IN_NAMESRV 217         register_topic           register_topic (S25)
    GET_KVLIST_BY_NAMESPACE 219           get_kv_list_by_namespace get_kv_list_by_namespace (S21)
    GET_TOPICS_BY_CLUSTER 224             get_topics_by_cluster    get_topics_by_cluster (S24, S41)
    GET_SYSTEM_TOPIC_LIST_FROM_NS 304     get_system_topic_list    get_system_topic_list (S24)
    GET_UNIT_TOPIC_LIST 311               get_unit_topic_list      get_unit_topic_list (S24, S41)
    GET_HAS_UNIT_SUB_TOPIC_LIST 312       get_has_unit_sub_topic_list  (S24, S41)
    GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST 313  get_has_unit_sub_ununit_topic_list  (S24, S41)
    UPDATE_NAMESRV_CONFIG 318             update_namesrv_config    update_namesrv_config (S26)
    GET_NAMESRV_CONFIG 319                get_namesrv_config       get_namesrv_config (S26)
    QUERY_DATA_VERSION 322                query_data_version       query_data_version (S20, S14)
    ADD_WRITE_PERM_OF_BROKER 327          add_write_perm_of_broker add_write_perm_of_broker (S23)
    GET_BROKER_MEMBER_GROUP 901           get_broker_member_group  get_broker_member_group
    BROKER_HEARTBEAT 904                  broker_heartbeat         broker_heartbeat (S14)
    anything else                         REQUEST_CODE_NOT_SUPPORTED (3), " request type X not supported"

Where RocketMQ 5.x and the rules differ in small ways, the handler says which it follows.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import zlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from time import perf_counter

from namesrv_grpc.core import commands
from namesrv_grpc.core.body import BrokerIdentity
from namesrv_grpc.core.commands import RouteTableWrites, session_end_batches
from namesrv_grpc.core.errors import (
    BodyChecksumMismatchError,
    BrokerNotRegisteredError,
    InvalidFieldError,
    LimitExceededError,
    NamesrvError,
    RouteTableUnavailableError,
)
from namesrv_grpc.core.model import (
    ZONE_MODE_EXT_FIELD,
    ZONE_NAME_EXT_FIELD,
    DataVersion,
    TopicRouteData,
)
from namesrv_grpc.core.reader import NameServerReader
from namesrv_grpc.metrics import NamesrvMetrics
from namesrv_grpc.remoting import access
from namesrv_grpc.remoting.codec import RemotingCommand
from namesrv_grpc.remoting.codes import VERSION_V4_9_4, VERSION_V5_0_0, RequestCode, ResponseCode
from namesrv_grpc.remoting.connection import RemotingConnection
from namesrv_grpc.remoting.errors import kv_not_found_remark, not_supported_remark, to_response
from namesrv_grpc.remoting.remoting_metrics import RemotingMetrics
from namesrv_grpc.runtime.log_limits import printable
from namesrv_grpc.runtime.policy import OFF_LOOP_SIGNATURE_BYTES, OffLoopDecodes, checksum
from namesrv_grpc.security.audit import AuditLog
from namesrv_grpc.security.authz import Guard, Principal
from namesrv_grpc.wire import bodies
from namesrv_grpc.wire.remoting_register_body import body_fingerprint

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Unchanged:
    """What a handler returns for a successful state-changing request that changed nothing: the
    ``response`` is sent as usual, but no audit line is written (a Java broker's periodic
    REGISTER_BROKER with nothing new, every 30 s: for such a broker the registration is its
    heartbeat, and heartbeats are not audited, docs/security.md)."""

    response: RemotingCommand


Result = RemotingCommand | Unchanged | Awaitable[RemotingCommand | Unchanged]
Handler = Callable[[RemotingCommand, RemotingConnection], Result]

DATA_VERSION_BODY_MAX_BYTES = 16 * 1024
"""Largest QUERY_DATA_VERSION body (a DataVersion is about 80 bytes of JSON)."""

REGISTER_TOPIC_BODY_MAX_BYTES = 64 * 1024
"""Largest REGISTER_TOPIC_IN_NAMESRV body (one QueueData of about 150 bytes per broker name). JSON is
parsed on the event loop in one C call: bounded, so one request cannot hold the loop for long."""

CONFIG_BODY_MAX_BYTES = 1024 * 1024
"""Largest UPDATE_NAMESRV_CONFIG body (about 70 keys of at most 4,096 characters each)."""

BODY_MAX_BYTES: dict[int, int] = {
    RequestCode.REGISTER_BROKER: 2**31,  # bounded by remotingFrameMaxLength only
    RequestCode.UPDATE_NAMESRV_CONFIG: CONFIG_BODY_MAX_BYTES,
    RequestCode.REGISTER_TOPIC_IN_NAMESRV: REGISTER_TOPIC_BODY_MAX_BYTES,
    RequestCode.QUERY_DATA_VERSION: DATA_VERSION_BODY_MAX_BYTES,
}
"""request code -> the largest body it is handled with; any other code carries no body and is
refused one over :data:`~namesrv_grpc.runtime.policy.OFF_LOOP_SIGNATURE_BYTES`. Checked before the ACL check,
whose signature covers the body (issue 30): so only REGISTER_BROKER and UPDATE_NAMESRV_CONFIG bodies
can be large enough to have their signature checked in a worker thread. The answer is the one their
handler gives a larger body (SYSTEM_ERROR, "X body of N bytes is over its L-byte limit")."""

CONNECTION_CLOSED = "remoting connection closed"

MEMBER_GROUP_REMARK = "not set any response code"
"""The remark of a successful GET_BROKER_MEMBER_GROUP, as RocketMQ 5.x sends it: its
``DefaultRequestProcessor.getBrokerMemberGroup`` sets the code but keeps the remark of
``RemotingCommand.createResponseCommand(null)`` (found by the differential suite, ``docs/compatibility.md``)."""

# Keys of the answers built once per change (NameServerReader.answer_per_change), remoting encodings.
_CLUSTER_INFO = "remoting cluster info"
_ALL_TOPICS = "remoting all topics"
_SYSTEM_TOPICS = "remoting system topics"
_UNIT = "remoting unit topics"
_UNIT_SUB = "remoting unit sub topics"
_UNIT_SUB_UNUNIT = "remoting unit sub ununit topics"
_CONFIG = "remoting config"

_REQUEST_NAMES = {int(code): code.name for code in RequestCode}
"""The cause logged when a broker is removed because its connection closed (S15)."""


# ---------------------------------------------------------------------------------- header fields


def _field(request: RemotingCommand, name: str) -> str:
    value = request.ext_fields.get(name)
    if value is None:
        raise InvalidFieldError(name, "missing from the request header (extFields)")
    return value


def _optional(request: RemotingCommand, name: str, default: str = "") -> str:
    value = request.ext_fields.get(name)
    return default if value is None else value


_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1


def _int(request: RemotingCommand, name: str, default: int | None = None) -> int:
    text = request.ext_fields.get(name)
    if text is None or (text == "" and default is not None):
        if default is None:
            raise InvalidFieldError(name, "missing from the request header (extFields)")
        return default
    problem = f"must be a whole number that fits a Java long, got {text[:40]!r}"
    if len(text) > 24:  # a long has at most 20 characters: refused before any conversion work
        raise InvalidFieldError(name, f"{problem} ({len(text)} characters)")
    try:
        value = int(text)
    except ValueError:
        raise InvalidFieldError(name, problem) from None
    if not _LONG_MIN <= value <= _LONG_MAX:  # Java Long.parseLong refuses it too
        raise InvalidFieldError(name, problem)
    return value


def _small_body(request: RemotingCommand, limit: int) -> bytes:
    """The body of a request whose body is small by nature; a larger one is refused before parsing."""
    if len(request.body) > limit:
        name = _REQUEST_NAMES.get(request.code, str(request.code))
        raise LimitExceededError("body", f"{name} body of {len(request.body)} bytes is over its {limit}-byte limit")
    return request.body


def _bool(request: RemotingCommand, name: str, default: bool = False) -> bool:
    text = request.ext_fields.get(name)
    if text is None or text == "":
        return default
    return text.strip().lower() == "true"  # Java Boolean.parseBoolean


def _optional_bool(request: RemotingCommand, name: str) -> bool | None:
    """None when the field is absent (a Java ``Boolean`` header field left null), else
    ``Boolean.parseBoolean`` of its text."""
    text = request.ext_fields.get(name)
    return None if text is None else text.strip().lower() == "true"


def _identity(request: RemotingCommand) -> BrokerIdentity:
    return BrokerIdentity(
        _field(request, "clusterName"),
        _field(request, "brokerName"),
        _int(request, "brokerId"),
        _field(request, "brokerAddr"),
    )


def _topic_list_body(topics: list[str], broker_addr: str | None = None) -> bytes:
    return bodies.encode_topic_list(topics, broker_addr)


def route_old_json(route: TopicRouteData) -> bytes:
    """GET_ROUTEINFO_BY_TOPIC body for clients before 4.9.4: fastjson's default form (unquoted int keys)."""
    return bodies.encode_topic_route_data(route, standard_json=False)


def route_standard_json(route: TopicRouteData) -> bytes:
    """GET_ROUTEINFO_BY_TOPIC body for 4.9.4+ or ``acceptStandardJsonOnly``: standard JSON, sorted keys."""
    return bodies.encode_topic_route_data(route, standard_json=True)


# ---------------------------------------------------------------------------------------- handlers


class RemotingHandlers:
    """The dispatch table of one NameServer's remoting listener, and S15 for its connections."""

    def __init__(
        self,
        nameserver: NameServerReader,
        writes: RouteTableWrites,
        metrics: NamesrvMetrics,
        remoting_metrics: RemotingMetrics,
        guard: Guard | None = None,
        decodes: OffLoopDecodes | None = None,
    ) -> None:
        """``nameserver`` answers the reads (this serving process's replica), ``writes`` takes the
        writes to the route-table process; ``guard``: the ACL check and audit trail (open when None),
        see :mod:`.access`; ``decodes``: where registration bodies are decoded (the serving
        process's, shared with the gRPC door; a new one when None)."""
        self._ns = nameserver
        self._writes = writes
        self.guard = guard or Guard(None, AuditLog())
        self._namesrv_metrics = metrics
        self._route_lookup_seconds = metrics.route_lookup_seconds["remoting"]
        self.metrics = remoting_metrics
        self._session_ends: set[asyncio.Task[None]] = set()
        self._decodes = decodes or OffLoopDecodes()
        self.table: dict[int, Handler] = {
            RequestCode.PUT_KV_CONFIG: self.put_kv_config,
            RequestCode.GET_KV_CONFIG: self.get_kv_config,
            RequestCode.DELETE_KV_CONFIG: self.delete_kv_config,
            RequestCode.REGISTER_BROKER: self.register_broker,
            RequestCode.UNREGISTER_BROKER: self.unregister_broker,
            RequestCode.GET_ROUTEINFO_BY_TOPIC: self.get_routeinfo_by_topic,
            RequestCode.GET_BROKER_CLUSTER_INFO: self.get_broker_cluster_info,
            RequestCode.WIPE_WRITE_PERM_OF_BROKER: self.wipe_write_perm_of_broker,
            RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: self.get_all_topic_list,
            RequestCode.DELETE_TOPIC_IN_NAMESRV: self.delete_topic,
            RequestCode.REGISTER_TOPIC_IN_NAMESRV: self.register_topic,
            RequestCode.GET_KVLIST_BY_NAMESPACE: self.get_kv_list_by_namespace,
            RequestCode.GET_TOPICS_BY_CLUSTER: self.get_topics_by_cluster,
            RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS: self.get_system_topic_list,
            RequestCode.GET_UNIT_TOPIC_LIST: self.get_unit_topic_list,
            RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST: self.get_has_unit_sub_topic_list,
            RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST: self.get_has_unit_sub_ununit_topic_list,
            RequestCode.UPDATE_NAMESRV_CONFIG: self.update_namesrv_config,
            RequestCode.GET_NAMESRV_CONFIG: self.get_namesrv_config,
            RequestCode.QUERY_DATA_VERSION: self.query_data_version,
            RequestCode.ADD_WRITE_PERM_OF_BROKER: self.add_write_perm_of_broker,
            RequestCode.GET_BROKER_MEMBER_GROUP: self.get_broker_member_group,
            RequestCode.BROKER_HEARTBEAT: self.broker_heartbeat,
        }
        """request code -> handler (all 23 codes of a RocketMQ 5.x NameServer)."""

    # ------------------------------------------------------------------ dispatch

    def dispatch(
        self, request: RemotingCommand, connection: RemotingConnection
    ) -> RemotingCommand | Awaitable[RemotingCommand]:
        """The answer to ``request``: a response now, or an awaitable of one (large registrations,
        writes, a signature over a large body). Never raises: domain errors become their response
        code (:func:`.errors.to_response`), anything unexpected SYSTEM_ERROR (logged with its
        traceback). A body larger than its request code ever carries (:data:`BODY_MAX_BYTES`) is
        refused first, before the ACL check hashes it. Every request is counted and timed
        (``namesrv_remoting_requests_total``, ``namesrv_remoting_request_duration_seconds``), from here
        to its answer; a state-changing one that succeeded is audited unless its handler answered
        :class:`Unchanged`."""
        started = perf_counter()
        handler = self.table.get(request.code)
        if handler is None:
            remark = not_supported_remark(request.code)
            log.warning("remoting %s: request code %d is not a NameServer request", connection.peer, request.code)
            response = request.make_response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, remark)
            return self._done(request, connection, response, None, started)
        principal: Principal | None = None
        try:
            _small_body(request, BODY_MAX_BYTES.get(request.code, OFF_LOOP_SIGNATURE_BYTES))
            authorized = access.authorize(self.guard, request, connection)  # ACL first (no-op without one)
            if authorized is not None and not isinstance(authorized, Principal):
                return self._authorized_later(request, connection, authorized, handler, started)
            principal = authorized
            result = handler(request, connection)
        except NamesrvError as error:
            result = self._refused(request, connection, error)
        except Exception as exc:
            result = self._internal_error(request, exc)
        if isinstance(result, (RemotingCommand, Unchanged)):
            return self._done(request, connection, result, principal, started)
        return self._finish(request, connection, result, principal, started)

    async def _authorized_later(
        self,
        request: RemotingCommand,
        connection: RemotingConnection,
        authorized: Awaitable[Principal],
        handler: Handler,
        started: float,
    ) -> RemotingCommand:
        """:meth:`dispatch` once the signature over a large body was checked in a worker thread."""
        principal: Principal | None = None
        try:
            principal = await authorized
            result = handler(request, connection)
        except NamesrvError as error:
            result = self._refused(request, connection, error)
        except Exception as exc:
            result = self._internal_error(request, exc)
        if isinstance(result, (RemotingCommand, Unchanged)):
            return self._done(request, connection, result, principal, started)
        return await self._finish(request, connection, result, principal, started)

    async def _finish(
        self,
        request: RemotingCommand,
        connection: RemotingConnection,
        pending: Awaitable[RemotingCommand | Unchanged],
        principal: Principal | None,
        started: float,
    ) -> RemotingCommand:
        try:
            result = await pending
        except NamesrvError as error:
            result = self._refused(request, connection, error)
        except Exception as exc:
            result = self._internal_error(request, exc)
        return self._done(request, connection, result, principal, started)

    def _done(
        self,
        request: RemotingCommand,
        connection: RemotingConnection,
        result: RemotingCommand | Unchanged,
        principal: Principal | None,
        started: float,
    ) -> RemotingCommand:
        """Count the answer to ``request`` (and audit it when it succeeded and is not :class:`Unchanged`)."""
        if isinstance(result, Unchanged):
            response = result.response
        else:
            response = result
            if response.code == ResponseCode.SUCCESS:
                access.audit(self.guard, request, connection, principal)
        self.metrics.request_handled(request.code, response.code, perf_counter() - started)
        return response

    @staticmethod
    def _refused(request: RemotingCommand, connection: RemotingConnection, error: NamesrvError) -> RemotingCommand:
        """The answer to a request the NameServer refuses; one log line says what and from where,
        except for the everyday answers TOPIC_NOT_EXIST and QUERY_NOT_FOUND."""
        code, remark = to_response(error)
        if code not in (ResponseCode.TOPIC_NOT_EXIST, ResponseCode.QUERY_NOT_FOUND):
            name = _REQUEST_NAMES.get(request.code, str(request.code))
            message = printable(error.message)
            log.warning("remoting %s: %s refused (%s): %s", connection.peer, name, error.reason, message)
        return request.make_response(code, remark)

    @staticmethod
    def _internal_error(request: RemotingCommand, exc: Exception) -> RemotingCommand:
        log.exception("remoting request code %d failed", request.code)
        return request.make_response(ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}")

    @staticmethod
    def _ok(request: RemotingCommand, body: bytes = b"", ext_fields: dict[str, str] | None = None) -> RemotingCommand:
        return request.make_response(ResponseCode.SUCCESS, None, body, ext_fields)

    # ------------------------------------------------------------------ KV config (S21)

    async def put_kv_config(self, request: RemotingCommand, connection: RemotingConnection) -> RemotingCommand:
        """Acknowledged once the route-table process wrote it to disk (pipelined writes keep their order)."""
        namespace, key, value = _field(request, "namespace"), _field(request, "key"), _field(request, "value")
        await self._writes.send(commands.PutKVConfig(namespace, key, value))
        self._namesrv_metrics.kv_config_writes.inc()
        return self._ok(request)

    def get_kv_config(self, request: RemotingCommand, connection: RemotingConnection) -> RemotingCommand:
        value = self._ns.get_kv_config(_field(request, "namespace"), _field(request, "key"))
        return self._ok(request, ext_fields={"value": value})

    async def delete_kv_config(self, request: RemotingCommand, connection: RemotingConnection) -> RemotingCommand:
        namespace, key = _field(request, "namespace"), _field(request, "key")
        await self._writes.send(commands.DeleteKVConfig(namespace, key))
        self._namesrv_metrics.kv_config_writes.inc()
        return self._ok(request)

    def get_kv_list_by_namespace(self, request: RemotingCommand, connection: RemotingConnection) -> RemotingCommand:
        namespace = _field(request, "namespace")
        table = self._ns.get_kv_list_by_namespace(namespace)
        if not table:  # RocketMQ: no such namespace -> QUERY_NOT_FOUND
            return request.make_response(ResponseCode.QUERY_NOT_FOUND, kv_not_found_remark(namespace))
        return self._ok(request, bodies.encode_kv_table(table))

    # ------------------------------------------------------------------ brokers

    async def register_broker(
        self, request: RemotingCommand, connection: RemotingConnection
    ) -> RemotingCommand | Unchanged:
        """REGISTER_BROKER: ``bodyCrc32`` (CRC32 & 0x7FFFFFFF, 0 = unchecked) first (S01), then the
        route-table process applies it (S02-S12), with the body decoded here when it is not the same
        as the broker's last one (by the route-table process when it is compressed or very large:
        :func:`~namesrv_grpc.core.commands.send_registration`), and binds
        the broker to this connection (S15). A registration that changed nothing
        (``RegisterBrokerResult.changed`` false: a Java broker's periodic one) answers
        :class:`Unchanged`, so it is not audited."""
        identity = _identity(request)
        compressed = _bool(request, "compressed")
        body_crc32 = _int(request, "bodyCrc32", 0)
        body = request.body
        with self._namesrv_metrics.registration("remoting"):
            actual = await checksum(zlib.crc32, body) & 0x7FFFFFFF
            if body_crc32 != 0 and actual != body_crc32:
                raise BodyChecksumMismatchError(
                    f"bodyCrc32 is {body_crc32} but the CRC32 of the {len(body)} body bytes is {actual}",
                    {"expected": str(body_crc32), "actual": str(actual)},
                )
            command = commands.RegisterBroker(
                "remoting",
                identity,
                ha_server_addr=_optional(request, "haServerAddr"),
                heartbeat_timeout_millis=_int(request, "heartbeatTimeoutMillis", 0),
                body_fingerprint=body_fingerprint(body, compressed, actual),
                enable_acting_master=_optional_bool(request, "enableActingMaster"),  # absent: a pre-5.x broker
                # RocketMQ 5.x: the zone is the ext field __ZONE_NAME (DynamicalExtFieldRPCHook), set
                # again by every registration: one without it clears the zone (S39).
                zone_name=_optional(request, ZONE_NAME_EXT_FIELD),
                instance_id=f"remoting-connection-{os.getpid()}-{connection.connection_id}",
                bind_session=True,
            )
            rocketmq5 = request.version >= VERSION_V5_0_0  # 5.x bodies may carry static-topic mappings (S40)
            raw = commands.RawBody(body, compressed, rocketmq5)
            reply = await self._decodes.send_registration(self._writes, command, raw, self._ns)
        if reply.session_id:
            if connection.closed:  # closed while the registration was applied: it ends at once (S15)
                self._end_sessions([(identity.broker_addr, reply.session_id)])
            else:
                connection.registered[identity.broker_addr] = reply.session_id
        result = reply.result
        ext_fields = {}
        if result.master_addr:
            ext_fields["masterAddr"] = result.master_addr
        if result.ha_server_addr:
            ext_fields["haServerAddr"] = result.ha_server_addr
        body_out = b""
        if reply.kv_table and self._ns.config.return_order_topic_config_to_broker:
            body_out = bodies.encode_kv_table(reply.kv_table)
        response = self._ok(request, body_out, ext_fields)
        return response if result.changed else Unchanged(response)

    def connection_closed(self, connection: RemotingConnection) -> None:
        """S15 (RocketMQ ``BrokerHousekeepingService.onChannelDestroy``): remove the brokers registered
        over this connection, unless a newer registration (another connection, gRPC) took them (S17)."""
        sessions = list(connection.registered.items())
        connection.registered.clear()
        if sessions:
            self._end_sessions(sessions)

    def _end_sessions(self, sessions: list[tuple[str, int]]) -> None:
        task = asyncio.ensure_future(self._sessions_ended(sessions))
        self._session_ends.add(task)
        task.add_done_callback(self._session_ends.discard)

    async def _sessions_ended(self, sessions: list[tuple[str, int]]) -> None:
        """S15 for ``sessions`` (broker address, session id),
        :data:`~namesrv_grpc.core.commands.SESSION_ENDS_PER_CALL` a command."""
        for batch in session_end_batches(sessions):
            try:
                removed = await self._writes.send(commands.SessionsEnded(batch, CONNECTION_CLOSED))
            except RouteTableUnavailableError:
                return  # the NameServer is going down with the route-table process
            if removed:
                self._namesrv_metrics.session_losses.inc(removed)

    async def unregister_broker(self, request: RemotingCommand, connection: RemotingConnection) -> RemotingCommand:
        """UNREGISTER_BROKER (S16, S17)."""
        removed = await self._writes.send(commands.UnregisterBroker(_identity(request)))
        if removed is not None:
            self._namesrv_metrics.unregistrations.inc()
        return self._ok(request)

    async def broker_heartbeat(self, request: RemotingCommand, connection: RemotingConnection) -> RemotingCommand:
        """S14. An unregistered broker still gets SUCCESS, as from RocketMQ 5.x
        (``updateBrokerInfoUpdateTimestamp`` ignores unknown addresses; brokers send it oneway)."""
        with contextlib.suppress(BrokerNotRegisteredError):
            await self._writes.send(commands.BrokerHeartbeat(_identity(request)))
        return self._ok(request)

    async def query_data_version(self, request: RemotingCommand, connection: RemotingConnection) -> RemotingCommand:
        """S20: header ``changed``, body the stored DataVersion (none when the broker is unknown); an
        unchanged broker's liveness is refreshed (the route-table process's live table)."""
        data_version = (
            bodies.decode_data_version(_small_body(request, DATA_VERSION_BODY_MAX_BYTES))
            if request.body
            else DataVersion()
        )
        changed, stored = await self._writes.send(commands.QueryDataVersion(_identity(request), data_version))
        body = bodies.encode_data_version(stored) if stored is not None else b""
        return self._ok(request, body, {"changed": "true" if changed else "false"})

    def get_broker_member_group(self, request: RemotingCommand, connection: RemotingConnection) -> RemotingCommand:
        cluster_name, broker_name = _field(request, "clusterName"), _field(request, "brokerName")
        addrs = self._ns.get_broker_member_group(cluster_name, broker_name)
        body = bodies.encode_broker_member_group(cluster_name, broker_name, addrs)
        return request.make_response(ResponseCode.SUCCESS, MEMBER_GROUP_REMARK, body)

    # ------------------------------------------------------------------ routes

    def get_routeinfo_by_topic(self, request: RemotingCommand, connection: RemotingConnection) -> RemotingCommand:
        """S18/S19 from the route cache: clients of 4.9.4 and later (``version``) or asking
        ``acceptStandardJsonOnly`` get standard JSON, older ones fastjson's form (``ClientRequestProcessor``).

        Zone mode (S39, RocketMQ 5.x ``ZoneRouteRPCHook``): ``__ZONE_MODE=true`` with a non-blank
        ``__ZONE_NAME`` gets the route filtered to that zone, always in fastjson's old form (the hook
        re-encodes the answer with ``TopicRouteData.encode()``, whatever the client's version).
        Timed in ``namesrv_route_lookup_duration_seconds{protocol="remoting"}``, found or not."""
        started = perf_counter()
        try:
            topic = _field(request, "topic")
            zone_name = _optional(request, ZONE_NAME_EXT_FIELD) if _bool(request, ZONE_MODE_EXT_FIELD) else ""
            if zone_name.strip():
                return self._ok(request, self._ns.pickup_topic_route_encoded(topic, route_old_json, zone_name))
            standard = request.version >= VERSION_V4_9_4 or _bool(request, "acceptStandardJsonOnly")
            encode = route_standard_json if standard else route_old_json
            return self._ok(request, self._ns.pickup_topic_route_encoded(topic, encode))
        finally:
            self._route_lookup_seconds.observe(perf_counter() - started)

    def get_broker_cluster_info(self, request: RemotingCommand, connection: RemotingConnection) -> RemotingCommand:
        body = self._ns.answer_per_change(
            _CLUSTER_INFO, lambda: bodies.encode_cluster_info(self._ns.get_cluster_info())
        )
        return self._ok(request, body)

    def get_all_topic_list(self, request: RemotingCommand, connection: RemotingConnection) -> RemotingCommand:
        self._ns.check_all_topic_list_enabled()  # S41
        ns = self._ns
        return self._ok(request, ns.answer_per_change(_ALL_TOPICS, lambda: _topic_list_body(ns.get_all_topic_list())))

    def get_topics_by_cluster(self, request: RemotingCommand, connection: RemotingConnection) -> RemotingCommand:
        self._ns.check_topic_list_enabled()  # S41
        cluster = _field(request, "cluster")
        if not self._ns.has_cluster(cluster):  # no cache entry per made-up name
            return self._ok(request, _topic_list_body(self._ns.get_topics_by_cluster(cluster)))
        build = functools.partial(self._topics_by_cluster_body, cluster)
        return self._ok(request, self._ns.answer_per_change(("remoting topics by cluster", cluster), build))

    def _topics_by_cluster_body(self, cluster: str) -> bytes:
        return _topic_list_body(self._ns.get_topics_by_cluster(cluster))

    def get_system_topic_list(self, request: RemotingCommand, connection: RemotingConnection) -> RemotingCommand:
        def build() -> bytes:
            topics, broker_addr = self._ns.get_system_topic_list()
            return _topic_list_body(topics, broker_addr or None)

        return self._ok(request, self._ns.answer_per_change(_SYSTEM_TOPICS, build))

    def get_unit_topic_list(self, request: RemotingCommand, connection: RemotingConnection) -> RemotingCommand:
        self._ns.check_topic_list_enabled()  # S41
        ns = self._ns
        return self._ok(request, ns.answer_per_change(_UNIT, lambda: _topic_list_body(ns.get_unit_topic_list())))

    def get_has_unit_sub_topic_list(self, request: RemotingCommand, connection: RemotingConnection) -> RemotingCommand:
        self._ns.check_topic_list_enabled()  # S41
        build = lambda: _topic_list_body(self._ns.get_has_unit_sub_topic_list())  # noqa: E731
        return self._ok(request, self._ns.answer_per_change(_UNIT_SUB, build))

    def get_has_unit_sub_ununit_topic_list(
        self, request: RemotingCommand, connection: RemotingConnection
    ) -> RemotingCommand:
        self._ns.check_topic_list_enabled()  # S41
        build = lambda: _topic_list_body(self._ns.get_has_unit_sub_ununit_topic_list())  # noqa: E731
        return self._ok(request, self._ns.answer_per_change(_UNIT_SUB_UNUNIT, build))

    # ------------------------------------------------------------------ admin (S23, S25, S26)

    async def wipe_write_perm_of_broker(
        self, request: RemotingCommand, connection: RemotingConnection
    ) -> RemotingCommand:
        broker_name = _field(request, "brokerName")
        count = await self._writes.send(commands.WipeWritePerm(broker_name))
        log.info("wipe write perm of broker %s by %s: %d topics", broker_name, connection.peer, count)
        return self._ok(request, ext_fields={"wipeTopicCount": str(count)})

    async def add_write_perm_of_broker(
        self, request: RemotingCommand, connection: RemotingConnection
    ) -> RemotingCommand:
        broker_name = _field(request, "brokerName")
        count = await self._writes.send(commands.AddWritePerm(broker_name))
        log.info("add write perm of broker %s by %s: %d topics", broker_name, connection.peer, count)
        return self._ok(request, ext_fields={"addTopicCount": str(count)})

    async def delete_topic(self, request: RemotingCommand, connection: RemotingConnection) -> RemotingCommand:
        await self._writes.send(commands.DeleteTopic(_field(request, "topic"), _optional(request, "clusterName")))
        return self._ok(request)

    async def register_topic(self, request: RemotingCommand, connection: RemotingConnection) -> RemotingCommand:
        """S25: the body is a TopicRouteData whose ``queueDatas`` are added; none at all is a no-op
        (as in RocketMQ)."""
        topic = _field(request, "topic")
        body = _small_body(request, REGISTER_TOPIC_BODY_MAX_BYTES)
        queue_datas = bodies.decode_register_topic_body(body) if body else []
        if queue_datas:
            await self._writes.send(commands.RegisterTopic(topic, tuple(queue_datas)))
        return self._ok(request)

    def get_namesrv_config(self, request: RemotingCommand, connection: RemotingConnection) -> RemotingCommand:
        """S26: the configuration as Java properties text (``Configuration.getAllConfigsFormatString``)."""
        build = lambda: bodies.encode_namesrv_config(self._ns.get_namesrv_config())  # noqa: E731
        return self._ok(request, self._ns.answer_per_change(_CONFIG, build))

    async def update_namesrv_config(self, request: RemotingCommand, connection: RemotingConnection) -> RemotingCommand:
        """S26: the body is Java properties text; no body changes nothing (as in RocketMQ)."""
        if not request.body:
            return self._ok(request)
        # Properties are parsed in pure Python: in a worker thread, which yields the GIL every few ms.
        changes = await asyncio.to_thread(bodies.decode_namesrv_config, _small_body(request, CONFIG_BODY_MAX_BYTES))
        log.info("UPDATE_NAMESRV_CONFIG from %s: keys %s", connection.peer, sorted(changes)[:50])
        await self._writes.send(commands.UpdateNamesrvConfig(dict(changes)))
        return self._ok(request)
