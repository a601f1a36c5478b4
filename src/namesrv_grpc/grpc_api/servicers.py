"""gRPC servicers: translate protobuf requests into reads of
:class:`~namesrv_grpc.core.reader.NameServerReader` or commands (:mod:`namesrv_grpc.core.commands`)
and results back. No rules live here; domain errors become statuses in
:mod:`namesrv_grpc.grpc_api.grpc_errors`."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from time import perf_counter
from typing import TYPE_CHECKING, Any

import grpc

from namesrv.v1 import admin_service_pb2 as admin_pb2
from namesrv.v1 import admin_service_pb2_grpc as admin_grpc
from namesrv.v1 import kv_config_service_pb2 as kv_pb2
from namesrv.v1 import kv_config_service_pb2_grpc as kv_grpc
from namesrv.v1 import name_server_service_pb2 as ns_pb2
from namesrv.v1 import name_server_service_pb2_grpc as ns_grpc
from namesrv_grpc.core import commands
from namesrv_grpc.core.commands import RouteTableWrites
from namesrv_grpc.core.reader import NameServerReader
from namesrv_grpc.grpc_api.connections import close_connections
from namesrv_grpc.grpc_api.convert import (
    broker_live_entry_to_proto,
    cluster_info_to_proto,
    identity_from_proto,
    queue_data_from_proto,
)
from namesrv_grpc.grpc_api.encoded_responses import (
    encode_route_response,
    routes_response_bytes,
    watch_response_bytes,
)
from namesrv_grpc.grpc_api.route_watches import RouteWatches, new_route_watches
from namesrv_grpc.grpc_api.sessions import BrokerSessions
from namesrv_grpc.grpc_api.stream_resets import StreamResetGuard
from namesrv_grpc.grpc_api.unsent_answers import UnsentAnswers
from namesrv_grpc.metrics import NamesrvMetrics
from namesrv_grpc.runtime.policy import OffLoopDecodes, checksum
from namesrv_grpc.security.audit import AuditLog
from namesrv_grpc.security.authz import Action, Guard, grpc_peer_address
from namesrv_grpc.wire.grpc_register_body import (
    crc32c,
    data_version_from_proto,
    data_version_to_proto,
    verify_checksum,
)

if TYPE_CHECKING:
    pass

log = logging.getLogger(__name__)

Context = grpc.aio.ServicerContext[Any, Any]

# Keys of the answers built once per change of the route table or the configuration
# (NameServerReader.answer_per_change), gRPC encodings; the remoting door has its own.
_TOPICS_BY_CLUSTER = "grpc topics by cluster"
_SYSTEM_TOPICS = "grpc system topics"
_UNIT = "grpc unit topics"
_UNIT_SUB = "grpc unit sub topics"
_UNIT_SUB_UNUNIT = "grpc unit sub ununit topics"


class NameServerServicer(ns_grpc.NameServerServiceServicer):  # type: ignore[misc]
    """``namesrv.v1.NameServerService``."""

    def __init__(
        self,
        nameserver: NameServerReader,
        writes: RouteTableWrites,
        metrics: NamesrvMetrics,
        sessions: BrokerSessions,
        route_watches: RouteWatches | None = None,
        guard: Guard | None = None,
        decodes: OffLoopDecodes | None = None,
    ) -> None:
        """``nameserver`` answers the reads (this serving process's replica), ``writes`` takes the
        writes to the route-table process; ``route_watches``: the server's watch hub (a new one
        subscribed to the route table when None); ``guard``: the ACL check (open when None);
        ``decodes``: where registration bodies are decoded (the serving process's, shared with the
        remoting door; a new one when None)."""
        self._ns = nameserver
        self._writes = writes
        self._metrics = metrics
        self._route_lookup_seconds = metrics.route_lookup_seconds["grpc"]
        self._sessions = sessions
        self._decodes = decodes or OffLoopDecodes()
        self.route_watches = route_watches if route_watches is not None else new_route_watches(nameserver)
        self._guard = guard or Guard(None, AuditLog())
        self.unsent_answers = UnsentAnswers(
            lambda: nameserver.config.grpc_write_buffer_high_water_mark,
            lambda: nameserver.config.grpc_write_buffer_max_total_bytes,
            lambda reason: metrics.grpc_refusals.labels(reason).inc(),
            wait_seconds=lambda: nameserver.config.grpc_write_buffer_wait_millis / 1000,
            paused=lambda reason: metrics.grpc_calls_paused.labels(reason).inc(),
        )
        """Unread answers of every service's unary calls (:func:`~namesrv_grpc.grpc_api.handlers.add_services`
        shares it among the services)."""
        metrics.grpc_unsent_answer_bytes.set_function(lambda: self.unsent_answers.total)
        if self.route_watches.refused is None:
            self.route_watches.refused = lambda reason: metrics.grpc_refusals.labels(reason).inc()
        self._to_close: set[str] = set()
        """Peers whose connections close at the end of this turn (unread watches)."""
        self._closing: set[asyncio.Future[None]] = set()
        self.stream_resets = StreamResetGuard(
            lambda: nameserver.config.grpc_max_stream_resets_per_second, self._reset_too_often
        )
        """Closes connections that reset streams too fast (HTTP/2 rapid reset); runs from here since
        the servicer is made in the serving process's event loop, when its gRPC server starts."""
        with contextlib.suppress(RuntimeError):  # no event loop (methods called directly): no guard
            self.stream_resets.start(asyncio.get_running_loop())

    def OpenBrokerSession(
        self, request_iterator: AsyncIterator[ns_pb2.OpenBrokerSessionRequest], context: Context
    ) -> AsyncIterator[ns_pb2.OpenBrokerSessionResponse]:
        return self._sessions.serve(request_iterator, context)

    async def RegisterBroker(
        self, request: ns_pb2.RegisterBrokerRequest, context: Context
    ) -> ns_pb2.RegisterBrokerResponse:
        caller = self._guard.require(context, Action.REGISTER_BROKER, request.broker_name)
        body = request.body  # one copy of the bytes
        identity = identity_from_proto(request)
        with self._metrics.registration("grpc"):
            verify_checksum(body, request.body_crc32c, await checksum(crc32c, body))  # S01
            command = commands.RegisterBroker(
                "grpc",
                identity,
                ha_server_addr=request.ha_server_addr,
                heartbeat_timeout_millis=request.heartbeat_timeout_millis,
                body_fingerprint=(request.body_crc32c, len(body), request.compressed),
                # proto3 cannot tell false from absent: false is "did not say" (no acting-master rules).
                enable_acting_master=True if request.enable_acting_master else None,
                zone_name=request.zone_name,
                instance_id=request.instance_id,
            )
            raw = commands.RawBody(body, request.compressed)
            reply = await self._decodes.send_registration(self._writes, command, raw, self._ns)
        result, kv_table = reply.result, reply.kv_table
        if result.conflicting_instance_id:
            self._metrics.registration_conflicts.inc()
        if result.changed:  # a re-registration with nothing new only refreshes liveness: not audited
            self._guard.audit(
                context,
                caller,
                "RegisterBroker",
                cluster_name=request.cluster_name,
                broker_name=request.broker_name,
                broker_id=request.broker_id,
                broker_addr=request.broker_addr,
                ha_server_addr=request.ha_server_addr,
                body_bytes=len(body),
                body_crc32c=request.body_crc32c,
                master_addr=result.master_addr,
            )
        return ns_pb2.RegisterBrokerResponse(
            master_addr=result.master_addr,
            ha_server_addr=result.ha_server_addr,
            kv_table=kv_table,
            conflicting_instance_id=result.conflicting_instance_id,
        )

    async def UnregisterBroker(
        self, request: ns_pb2.UnregisterBrokerRequest, context: Context
    ) -> ns_pb2.UnregisterBrokerResponse:
        caller = self._guard.require(context, Action.UNREGISTER_BROKER, request.broker_name)
        identity = identity_from_proto(request)
        removed = await self._writes.send(commands.UnregisterBroker(identity, request.instance_id))
        if removed is not None:
            self._metrics.unregistrations.inc()
        self._guard.audit(
            context,
            caller,
            "UnregisterBroker",
            cluster_name=request.cluster_name,
            broker_name=request.broker_name,
            broker_id=request.broker_id,
            broker_addr=request.broker_addr,
            removed=removed is not None,
        )
        return ns_pb2.UnregisterBrokerResponse()

    async def BrokerHeartbeat(
        self, request: ns_pb2.BrokerHeartbeatRequest, context: Context
    ) -> ns_pb2.BrokerHeartbeatResponse:
        self._guard.require(context, Action.BROKER_HEARTBEAT, request.broker_name)
        identity = identity_from_proto(request)
        await self._writes.send(commands.BrokerHeartbeat(identity))
        return ns_pb2.BrokerHeartbeatResponse()

    async def QueryDataVersion(
        self, request: ns_pb2.QueryDataVersionRequest, context: Context
    ) -> ns_pb2.QueryDataVersionResponse:
        self._guard.require(context, Action.QUERY_DATA_VERSION, request.broker_name)
        identity = identity_from_proto(request)
        data_version = data_version_from_proto(request.data_version)
        changed, stored = await self._writes.send(commands.QueryDataVersion(identity, data_version))
        response = ns_pb2.QueryDataVersionResponse(changed=changed)
        if stored is not None:
            response.name_server_data_version.CopyFrom(data_version_to_proto(stored))
        return response

    async def PickupTopicRoute(self, request: ns_pb2.PickupTopicRouteRequest, context: Context) -> bytes:
        self._guard.require(context, Action.READ_ROUTES)
        started = perf_counter()
        try:
            # The serialized PickupTopicRouteResponse, cached per topic (see encoded_responses).
            return self._ns.pickup_topic_route_encoded(request.topic, encode_route_response, request.zone_name)
        finally:
            self._route_lookup_seconds.observe(perf_counter() - started)

    async def PickupTopicRoutes(self, request: ns_pb2.PickupTopicRoutesRequest, context: Context) -> bytes:
        self._guard.require(context, Action.READ_ROUTES)
        # The cached PickupTopicRoute bytes of each topic, framed as map entries.
        return routes_response_bytes(
            self._ns.pickup_topic_routes_encoded(request.topics, encode_route_response, request.zone_name)
        )

    async def WatchTopicRoutes(self, request: ns_pb2.WatchTopicRoutesRequest, context: Context) -> AsyncIterator[bytes]:
        # Serialized WatchTopicRoutesResponse messages; a slow reader holds back this generator, and
        # meanwhile its changes coalesce in the hub (one entry per topic).
        self._guard.require(context, Action.READ_ROUTES)
        self._ns.check_serving()
        hub = self.route_watches
        peer = context.peer()
        watcher = hub.open(request.topics, request.zone_name, grpc_peer_address(peer), lambda _: self._unread(peer))
        try:
            while True:
                taken = await hub.next(watcher)
                if taken is None:
                    if watcher.dropped:  # its client read again just as it was dropped
                        limit = self._ns.config.route_watch_max_unread_millis
                        await context.abort(
                            grpc.StatusCode.RESOURCE_EXHAUSTED,
                            f"a message of this watch waited {limit} ms to be read (routeWatchMaxUnreadMillis)",
                        )
                    await context.abort(grpc.StatusCode.UNAVAILABLE, "the NameServer is shutting down; watch another")
                    return
                revision, changes = taken
                message = watch_response_bytes(revision, [change for _, change in changes])
                hub.sending(watcher)  # until gRPC asks for the next message, the client has not read it
                yield message
                hub.sent(watcher)
        finally:
            hub.close(watcher)

    def _reset_too_often(self, peer: str, resets_per_second: float) -> None:
        self._metrics.grpc_refusals.labels("stream_resets").inc()
        log.warning(
            "gRPC connection of %s reset %.0f streams a second, more than grpcMaxStreamResetsPerSecond=%d "
            "(HTTP/2 rapid reset): connection closed",
            peer,
            resets_per_second,
            self._ns.config.grpc_max_stream_resets_per_second,
        )

    def _unread(self, peer: str) -> None:
        """A watch of ``peer`` left a message unread ``routeWatchMaxUnreadMillis``: its stream cannot
        be ended in order (the status would wait behind the unread message, and gRPC's core keeps
        both), so its connection is closed: gRPC ends every call of it and frees what it held, and
        the client sees UNAVAILABLE and reconnects. The connections of the watches dropped in one
        turn of the event loop are closed together, in a worker thread (one scan of the sockets)."""
        if not self._to_close:
            task = asyncio.ensure_future(self._close_unread())
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)
        self._to_close.add(peer)

    async def _close_unread(self) -> None:
        await asyncio.sleep(0)  # let the other watches dropped in this turn join
        peers, self._to_close = self._to_close, set()
        closed = await asyncio.to_thread(close_connections, peers)
        limit = self._ns.config.route_watch_max_unread_millis
        for peer in sorted(peers):
            log.warning(
                "route watch of %s left a message unread for %d ms (routeWatchMaxUnreadMillis): watch dropped%s",
                peer,
                limit,
                ", connection closed" if peer in closed else "",
            )

    async def GetBrokerClusterInfo(
        self, request: ns_pb2.GetBrokerClusterInfoRequest, context: Context
    ) -> ns_pb2.GetBrokerClusterInfoResponse | bytes:
        self._guard.require(context, Action.READ_ROUTES)
        return self._ns.answer_per_change(
            "grpc cluster info", lambda: cluster_info_to_proto(self._ns.get_cluster_info()).SerializeToString()
        )

    async def GetAllTopicList(
        self, request: ns_pb2.GetAllTopicListRequest, context: Context
    ) -> ns_pb2.GetAllTopicListResponse | bytes:
        self._guard.require(context, Action.READ_ROUTES)
        self._ns.check_all_topic_list_enabled()  # S41
        ns = self._ns
        return ns.answer_per_change(
            "grpc all topics",
            lambda: ns_pb2.GetAllTopicListResponse(topics=ns.get_all_topic_list()).SerializeToString(),
        )

    async def GetTopicsByCluster(
        self, request: ns_pb2.GetTopicsByClusterRequest, context: Context
    ) -> ns_pb2.GetTopicsByClusterResponse | bytes:
        self._guard.require(context, Action.READ_ROUTES)
        cluster = request.cluster_name
        topics = self._ns.get_topics_by_cluster  # S41 and the name checked on every call
        if not self._ns.has_cluster(cluster):
            # No cache entry per made-up name (as on remoting): an unknown cluster's list is empty.
            return ns_pb2.GetTopicsByClusterResponse(topics=topics(cluster))
        self._ns.check_topic_list_enabled()
        return self._ns.answer_per_change(
            (_TOPICS_BY_CLUSTER, cluster),
            lambda: ns_pb2.GetTopicsByClusterResponse(topics=topics(cluster)).SerializeToString(),
        )

    async def GetSystemTopicList(
        self, request: ns_pb2.GetSystemTopicListRequest, context: Context
    ) -> ns_pb2.GetSystemTopicListResponse | bytes:
        self._guard.require(context, Action.READ_ROUTES)

        def build() -> bytes:
            topics, broker_addr = self._ns.get_system_topic_list()
            return ns_pb2.GetSystemTopicListResponse(topics=topics, broker_addr=broker_addr).SerializeToString()

        return self._ns.answer_per_change(_SYSTEM_TOPICS, build)

    async def GetUnitTopicList(
        self, request: ns_pb2.GetUnitTopicListRequest, context: Context
    ) -> ns_pb2.GetUnitTopicListResponse | bytes:
        self._guard.require(context, Action.READ_ROUTES)
        self._ns.check_topic_list_enabled()  # S41, on every call: the cached answer does not know it
        ns = self._ns
        return ns.answer_per_change(
            _UNIT, lambda: ns_pb2.GetUnitTopicListResponse(topics=ns.get_unit_topic_list()).SerializeToString()
        )

    async def GetHasUnitSubTopicList(
        self, request: ns_pb2.GetHasUnitSubTopicListRequest, context: Context
    ) -> ns_pb2.GetHasUnitSubTopicListResponse | bytes:
        self._guard.require(context, Action.READ_ROUTES)
        self._ns.check_topic_list_enabled()
        ns = self._ns
        return ns.answer_per_change(
            _UNIT_SUB,
            lambda: ns_pb2.GetHasUnitSubTopicListResponse(topics=ns.get_has_unit_sub_topic_list()).SerializeToString(),
        )

    async def GetHasUnitSubUnUnitTopicList(
        self, request: ns_pb2.GetHasUnitSubUnUnitTopicListRequest, context: Context
    ) -> ns_pb2.GetHasUnitSubUnUnitTopicListResponse | bytes:
        self._guard.require(context, Action.READ_ROUTES)
        self._ns.check_topic_list_enabled()
        ns = self._ns
        return ns.answer_per_change(
            _UNIT_SUB_UNUNIT,
            lambda: ns_pb2.GetHasUnitSubUnUnitTopicListResponse(
                topics=ns.get_has_unit_sub_ununit_topic_list()
            ).SerializeToString(),
        )


class KVConfigServicer(kv_grpc.KVConfigServiceServicer):  # type: ignore[misc]
    """``namesrv.v1.KVConfigService`` (S21)."""

    def __init__(
        self,
        nameserver: NameServerReader,
        writes: RouteTableWrites,
        metrics: NamesrvMetrics,
        guard: Guard | None = None,
    ) -> None:
        self._ns = nameserver
        self._writes = writes
        self._metrics = metrics
        self._guard = guard or Guard(None, AuditLog())

    async def PutKVConfig(self, request: kv_pb2.PutKVConfigRequest, context: Context) -> kv_pb2.PutKVConfigResponse:
        caller = self._guard.require(context, Action.WRITE_KV)
        # Acknowledged once the route-table process wrote it to disk.
        await self._writes.send(commands.PutKVConfig(request.namespace, request.key, request.value))
        self._metrics.kv_config_writes.inc()
        self._guard.audit(
            context, caller, "PutKVConfig", namespace=request.namespace, key=request.key, value_chars=len(request.value)
        )
        return kv_pb2.PutKVConfigResponse()

    async def GetKVConfig(self, request: kv_pb2.GetKVConfigRequest, context: Context) -> kv_pb2.GetKVConfigResponse:
        self._guard.require(context, Action.READ_KV)
        return kv_pb2.GetKVConfigResponse(value=self._ns.get_kv_config(request.namespace, request.key))

    async def DeleteKVConfig(
        self, request: kv_pb2.DeleteKVConfigRequest, context: Context
    ) -> kv_pb2.DeleteKVConfigResponse:
        caller = self._guard.require(context, Action.WRITE_KV)
        await self._writes.send(commands.DeleteKVConfig(request.namespace, request.key))
        self._metrics.kv_config_writes.inc()
        self._guard.audit(context, caller, "DeleteKVConfig", namespace=request.namespace, key=request.key)
        return kv_pb2.DeleteKVConfigResponse()

    async def GetKVListByNamespace(
        self, request: kv_pb2.GetKVListByNamespaceRequest, context: Context
    ) -> kv_pb2.GetKVListByNamespaceResponse:
        self._guard.require(context, Action.READ_KV)
        return kv_pb2.GetKVListByNamespaceResponse(table=self._ns.get_kv_list_by_namespace(request.namespace))


class AdminServicer(admin_grpc.AdminServiceServicer):  # type: ignore[misc]
    """``namesrv.v1.AdminService`` (S23, S25, S26, route snapshots)."""

    def __init__(self, nameserver: NameServerReader, writes: RouteTableWrites, guard: Guard | None = None) -> None:
        self._ns = nameserver
        self._writes = writes
        self._guard = guard or Guard(None, AuditLog())

    async def WipeWritePermOfBroker(
        self, request: admin_pb2.WipeWritePermOfBrokerRequest, context: Context
    ) -> admin_pb2.WipeWritePermOfBrokerResponse:
        caller = self._guard.require(context, Action.ADMIN_WRITE)
        count = await self._writes.send(commands.WipeWritePerm(request.broker_name))
        self._guard.audit(context, caller, "WipeWritePermOfBroker", broker_name=request.broker_name, topics=count)
        return admin_pb2.WipeWritePermOfBrokerResponse(wipe_topic_count=count)

    async def AddWritePermOfBroker(
        self, request: admin_pb2.AddWritePermOfBrokerRequest, context: Context
    ) -> admin_pb2.AddWritePermOfBrokerResponse:
        caller = self._guard.require(context, Action.ADMIN_WRITE)
        count = await self._writes.send(commands.AddWritePerm(request.broker_name))
        self._guard.audit(context, caller, "AddWritePermOfBroker", broker_name=request.broker_name, topics=count)
        return admin_pb2.AddWritePermOfBrokerResponse(add_topic_count=count)

    async def DeleteTopic(
        self, request: admin_pb2.DeleteTopicRequest, context: Context
    ) -> admin_pb2.DeleteTopicResponse:
        caller = self._guard.require(context, Action.ADMIN_WRITE)
        await self._writes.send(commands.DeleteTopic(request.topic, request.cluster_name))
        self._guard.audit(context, caller, "DeleteTopic", topic=request.topic, cluster_name=request.cluster_name)
        return admin_pb2.DeleteTopicResponse()

    async def RegisterTopic(
        self, request: admin_pb2.RegisterTopicRequest, context: Context
    ) -> admin_pb2.RegisterTopicResponse:
        caller = self._guard.require(context, Action.ADMIN_WRITE)
        queue_datas = tuple(queue_data_from_proto(q) for q in request.queue_datas)
        await self._writes.send(commands.RegisterTopic(request.topic, queue_datas))
        brokers = sorted(q.broker_name for q in request.queue_datas)
        self._guard.audit(context, caller, "RegisterTopic", topic=request.topic, broker_names=brokers)
        return admin_pb2.RegisterTopicResponse()

    async def GetNamesrvConfig(
        self, request: admin_pb2.GetNamesrvConfigRequest, context: Context
    ) -> admin_pb2.GetNamesrvConfigResponse | bytes:
        self._guard.require(context, Action.ADMIN_READ)
        return self._ns.answer_per_change(
            "grpc config",
            lambda: admin_pb2.GetNamesrvConfigResponse(config=self._ns.get_namesrv_config()).SerializeToString(),
        )

    async def UpdateNamesrvConfig(
        self, request: admin_pb2.UpdateNamesrvConfigRequest, context: Context
    ) -> admin_pb2.UpdateNamesrvConfigResponse:
        caller = self._guard.require(context, Action.UPDATE_CONFIG)
        await self._writes.send(commands.UpdateNamesrvConfig(dict(request.config)))
        self._guard.audit(context, caller, "UpdateNamesrvConfig", changes=dict(request.config))
        return admin_pb2.UpdateNamesrvConfigResponse()

    async def GetBrokerLiveTable(
        self, request: admin_pb2.GetBrokerLiveTableRequest, context: Context
    ) -> admin_pb2.GetBrokerLiveTableResponse:
        self._guard.require(context, Action.ADMIN_READ)  # AdminService: admin accounts (CONTRACT.md ACL)
        now, entries = await self._writes.send(commands.LiveTable())
        return admin_pb2.GetBrokerLiveTableResponse(
            brokers=[broker_live_entry_to_proto(addr, live, now) for addr, live in entries], now_millis=now
        )

    async def ExportRouteSnapshot(
        self, request: admin_pb2.ExportRouteSnapshotRequest, context: Context
    ) -> admin_pb2.ExportRouteSnapshotResponse:
        caller = self._guard.require(context, Action.EXPORT_SNAPSHOT)
        info = await self._writes.send(commands.ExportSnapshot())
        self._guard.audit(context, caller, "ExportRouteSnapshot", file_name=info.file_name, topics=info.topics)
        from namesrv_grpc.snapshot_schema import SCHEMA_VERSION

        return admin_pb2.ExportRouteSnapshotResponse(
            snapshot_time_millis=info.snapshot_time_ms,
            namesrv=info.namesrv,
            snapshot_dir=str(info.directory),
            file_name=info.file_name,
            topics=info.topics,
            queue_datas=info.queue_datas,
            broker_names=info.broker_names,
            broker_addrs=info.broker_addrs,
            clusters=info.clusters,
            schema_version=SCHEMA_VERSION,
        )
